package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/erplab/erplab/internal/exitcode"
)

// An unquoted --dsn split by the shell (--dsn host=127.0.0.1 port=1) is
// one usage line saying how to quote it, for every command with a
// connection string flag (walked from the root, so a new command is
// covered), instead of cobra's "unknown command "port=1"".
func TestSplitDSNArgument(t *testing.T) {
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, name := range []string{"dsn", "upstream"} {
			if c.Flags().Lookup(name) != nil {
				paths = append(paths, append(append([]string{}, path...), "--"+name))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string{}, path...), sub.Name()))
		}
	}
	walk(newRoot(), nil)
	if len(paths) < 10 {
		t.Fatalf("only %d commands with a connection string flag: %v", len(paths), paths)
	}
	for _, p := range paths {
		flag := p[len(p)-1]
		args := append(append([]string{}, p...), "host=127.0.0.1", "port=1")
		_, err := runRoot(t, args...)
		want := flag + " takes one argument: quote it: " + flag + " 'host=127.0.0.1 port=1'"
		if err == nil || err.Error() != want || exitcode.Of(err) != exitcode.Usage {
			t.Errorf("%q: %v (exit %d), want %q (exit %d)", args, err, exitcode.Of(err), want, exitcode.Usage)
		}
	}
	for _, c := range []struct {
		args []string
		want string // "" = not this error
	}{
		// A password is hidden in the suggestion; a quote in it escaped.
		{[]string{"top", "--dsn", "host=/tmp", "password=s3cret", "user=o'neil"}, `--dsn takes one argument: quote it: --dsn 'host=/tmp password=xxxxx user=o'\''neil'`},
		// Only after the flag is given, and only libpq keywords.
		{[]string{"top", "port=1"}, ""},
		{[]string{"rewrite", "--dsn", "host=/tmp", "x=1"}, ""},
		// Not for a URL, which quoting with the pairs would not make valid.
		{[]string{"top", "--dsn", "postgres://127.0.0.1:1/db", "sslmode=disable"}, ""},
		{[]string{"top", "--dsn", "postgresql://127.0.0.1:1/db", "port=1"}, ""},
		// k8s render's run flags after '--'.
		{[]string{"k8s", "render", "--agents", "2", "--image", "erplab:1", "--", "--dsn", "host=db", "dbname=erp", "--workload", "erp"}, "--dsn takes one argument: quote it: --dsn 'host=db dbname=erp'"},
	} {
		_, err := runRoot(t, c.args...)
		got := ""
		if err != nil && strings.Contains(err.Error(), "takes one argument") {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
}

// With no --dsn, a PG* variable (here a PGPASSWORD exported for another
// server and a PGHOST) sends erplab to the environment's server; it says
// so in one line naming the variables, before the connection fails.
func TestEnvDSNNamed(t *testing.T) {
	cmd := erplab(t, t.TempDir(), "top", "--once")
	cmd.Env = append(cmd.Env, "PGHOST=/nonexistent", "PGPASSWORD=bogus")
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "no --dsn: connecting to the server the environment names (PGHOST, PGPASSWORD set)") {
		t.Errorf("output:\n%s", out)
	}
	if strings.Contains(string(out), "bogus") {
		t.Errorf("the password is in the output:\n%s", out)
	}
}

// ab starts its own server unless --dsn: with PG* variables set it says
// in one line that it ignores them, never that it connects to them, also
// with --dry-run.
func TestABEnvIgnored(t *testing.T) {
	cmd := erplab(t, t.TempDir(), "ab", "--dry-run", "--workload", "smoke", "--variant", "x=rewrite-proxy")
	cmd.Env = append(cmd.Env, "PGHOST=/nonexistent", "PGPASSWORD=bogus")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if strings.Contains(string(out), "connecting to the server the environment names") ||
		!strings.Contains(string(out), "PG* variables are ignored by ab (PGHOST, PGPASSWORD set): give --dsn to use that server\n") {
		t.Errorf("output:\n%s", out)
	}
	if strings.Contains(string(out), "bogus") {
		t.Errorf("the password is in the output:\n%s", out)
	}
}
