package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A missing script file and a server that is not there are worded as
// pgbench 15 and libpq word them (pgbench.c process_file, fe-connect.c
// connectFailureMessage), not in Go's words: erplab pgbench's stderr and
// exit status are pgbench 15's recorded ones and, when pgbench 15 is
// installed, exactly what it prints for the same command line. No server
// is needed: the connections fail.
func TestErrorsAsPgbench(t *testing.T) {
	dir := t.TempDir()
	missing, nosock := filepath.Join(dir, "missing.sql"), filepath.Join(dir, "nonexistent")
	noSocket := func(what string) string {
		return `pgbench: error: connection to server on socket "` + nosock + `/.s.PGSQL.5432" failed: No such file or directory` + "\n" +
			"\tIs the server running locally and accepting connections on that socket?\n" +
			"pgbench: error: could not create connection for " + what + "\n"
	}
	cases := []struct {
		name string
		args []string
		want string // pgbench 15's stderr; the exit status is 1
	}{
		{"missing file", []string{"-f", missing}, `pgbench: error: could not open file "` + missing + `": No such file or directory` + "\n"},
		{"missing file with weight", []string{"-f", missing + "@2"}, `pgbench: error: could not open file "` + missing + `": No such file or directory` + "\n"},
		{"directory", []string{"-f", dir}, `pgbench: error: could not read file "` + dir + `": Is a directory` + "\n"},
		{"no socket", []string{"-h", nosock, "-t", "1"}, noSocket("setup")},
		{"no socket, -i", []string{"-i", "-h", nosock}, noSocket("initialization")},
		{"refused", []string{"-h", "127.0.0.1", "-p", "1", "-t", "1"}, `pgbench: error: connection to server at "127.0.0.1", port 1 failed: Connection refused` + "\n" +
			"\tIs the server running on that host and accepting TCP/IP connections?\n" +
			"pgbench: error: could not create connection for setup\n"},
	}
	pgbench, version := findPgbench(t)
	if pgbench != "" && version != 15 {
		t.Logf("%s is pgbench %d: compared with pgbench 15's recorded text only", pgbench, version)
		pgbench = ""
	}
	// Neither tool sees the PG* environment of the test run.
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "PG") {
			env = append(env, e)
		}
	}
	noPG := func(k string) string {
		if strings.HasPrefix(k, "PG") {
			return ""
		}
		return os.Getenv(k)
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := Main(context.Background(), c.args, Streams{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}, noPG,
			Program{Version: "test", Out: filepath.Join(dir, "results.json")})
		if code != 1 || errb.String() != c.want || out.Len() != 0 {
			t.Errorf("%s: erplab pgbench %s: exit %d, stdout %q, stderr:\n%s\nwant exit 1 and:\n%s", c.name, strings.Join(c.args, " "), code, out.String(), errb.String(), c.want)
		}
		if pgbench == "" {
			continue
		}
		cmd := exec.Command(pgbench, c.args...)
		cmd.Dir, cmd.Env = dir, env
		var perr bytes.Buffer
		cmd.Stderr = &perr
		err := cmd.Run()
		pcode := 0
		if ee, ok := err.(*exec.ExitError); ok {
			pcode = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if pcode != code || perr.String() != errb.String() {
			t.Errorf("%s: pgbench %s: exit %d, stderr:\n%s\nerplab pgbench: exit %d, stderr:\n%s", c.name, strings.Join(c.args, " "), pcode, perr.String(), code, errb.String())
		}
	}
}
