package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/pgtest"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

// peerResult is one tool's outcome on one case.
type peerResult struct {
	status         int
	stdout, stderr string
}

// failures lists what r does not do that c expects: the exit status,
// each regex, the check.
func (c *peerCase) failures(r peerResult, known map[string]string) (statusOK bool, problems []string) {
	statusOK = r.status == c.status
	if !statusOK {
		problems = append(problems, fmt.Sprintf("exit status %d, want %d", r.status, c.status))
	}
	match := func(stream, text string, res []string) {
		for _, re := range res {
			if _, ok := known[re]; ok {
				continue
			}
			if !perlMatch(re, text) {
				problems = append(problems, fmt.Sprintf("%s does not match %s", stream, re))
			}
		}
	}
	match("stdout", r.stdout, c.stdout)
	match("stderr", r.stderr, c.stderr)
	if c.check != nil {
		if p := c.check(r.stdout, r.stderr); p != "" {
			problems = append(problems, p)
		}
	}
	return statusOK, problems
}

// perlMatch is Perl's $text =~ qr{re} for the translated regexes: "^$"
// (after optional flags) accepts "" and a lone "\n" as Perl does.
func perlMatch(re, text string) bool {
	if strings.TrimPrefix(re, "(?i)") == "^$" {
		return text == "" || text == "\n"
	}
	return regexp.MustCompile(re).MatchString(text)
}

// TestPeerSuite runs PostgreSQL's own pgbench TAP cases (ported as data in
// peer_cases_test.go) against `erplab pgbench` (in process, cli.Main) and,
// when pgbench is installed, against pgbench too, on one database of the
// test server, in the TAP's order. erplab must give the expected exit
// status and match every regex (except those a case lists in erplab, with
// the reason); pgbench must too on the cases of its version. The figures
// are logged: cases, same exit, same behaviour, per tool.
func TestPeerSuite(t *testing.T) {
	dsn := srv.NewDatabase(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logDir = dir
	t.Setenv("PGHOST", cfg.Host)
	t.Setenv("PGPORT", strconv.Itoa(int(cfg.Port)))
	t.Setenv("PGUSER", cfg.User)
	t.Setenv("PGDATABASE", cfg.Database)
	if pf := passfile(dsn); pf != "" {
		t.Setenv("PGPASSFILE", pf)
	}
	t.Setenv("PGOPTIONS", "")
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	exec1 := func(sql string) {
		t.Helper()
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// the tablespace directory must belong to the server's OS user: it
	// goes beside the cluster's data
	cdir := srv.Cluster(t).Dir()
	tsDir := filepath.Join(cdir, "regress_pgbench_tap_1_ts_dir")
	if err := os.Mkdir(tsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if name := srv.Cluster(t).OSUser(); name != "" {
		u, err := user.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(tsDir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	exec1("CREATE TABLESPACE regress_pgbench_tap_1_ts LOCATION '" + tsDir + "'")
	defer func() {
		admin.Exec(ctx, "DROP TABLE IF EXISTS pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history")
		admin.Exec(ctx, "DROP TABLESPACE IF EXISTS regress_pgbench_tap_1_ts")
		admin.Exec(ctx, "ALTER SYSTEM RESET ALL")
		admin.Exec(ctx, "SELECT pg_reload_conf()")
	}()

	pgbench, pgVersion := findPgbench(t)
	var serverNum int
	if err := admin.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&serverNum); err != nil {
		t.Fatal(err)
	}
	cases := append(noServerCases(), withServerCases()...)
	type tally struct{ cases, sameExit, sameBehaviour int }
	var ours, theirs tally
	var oursFailed []string
	for i := range cases {
		c := &cases[i]
		if c.server > serverNum/10000 {
			t.Logf("not run on server %d: %q expects server %d's behaviour", serverNum/10000, c.name, c.server)
			continue
		}
		args := strings.Fields(c.opts)
		names := make([]string, 0, len(c.files))
		for n := range c.files {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			path := filepath.Join(dir, n)
			file := regexp.MustCompile(`@\d+$`).ReplaceAllString(path, "")
			if err := os.WriteFile(file, []byte(c.files[n]), 0o644); err != nil {
				t.Fatal(err)
			}
			args = append(args, "-f", path)
		}
		if c.after != "" {
			args = append(args, strings.Fields(strings.ReplaceAll(c.after, "<dir>", dir))...)
		}
		for _, s := range c.sql {
			exec1(s)
		}
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		if c.sql != nil && strings.Contains(strings.Join(c.sql, ";"), "pg_reload_conf") {
			time.Sleep(100 * time.Millisecond) // let the backends see the settings
		}
		if pgbench != "" && c.since <= pgVersion {
			for _, s := range c.reset {
				exec1(s)
			}
			removeLogs(dir)
			r := runPgbench(pgbench, dir, args)
			theirs.cases++
			ok, problems := c.failures(r, nil)
			if ok {
				theirs.sameExit++
			}
			if len(problems) == 0 {
				theirs.sameBehaviour++
			} else {
				t.Logf("pgbench %d on %q: %s", pgVersion, c.name, strings.Join(problems, "; "))
			}
		}
		for _, s := range c.reset {
			exec1(s)
		}
		removeLogs(dir)
		r := runErplab(ctx, dir, args, i)
		ours.cases++
		ok, problems := c.failures(r, c.erplab)
		if ok {
			ours.sameExit++
		}
		if len(problems) == 0 {
			ours.sameBehaviour++
		} else {
			oursFailed = append(oursFailed, c.name)
			t.Errorf("erplab pgbench %s on %q: %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), c.name, strings.Join(problems, "; "), clip(r.stdout), clip(r.stderr))
		}
		for k := range c.env {
			t.Setenv(k, "")
		}
		if strings.HasPrefix(c.name, "random seeded 2") {
			checkSeeded(t, admin, map[bool]int{true: 4, false: 2}[pgbench != ""])
		}
	}
	t.Logf("peer suite: erplab pgbench: %d cases, %d same exit status, %d same behaviour", ours.cases, ours.sameExit, ours.sameBehaviour)
	if pgbench != "" {
		t.Logf("peer suite: pgbench %d: %d cases, %d same exit status, %d same behaviour", pgVersion, theirs.cases, theirs.sameExit, theirs.sameBehaviour)
	}
	for _, c := range cases {
		for re, why := range c.erplab {
			t.Logf("regex erplab does not match, %q %s: %s", c.name, re, why)
		}
	}
}

// runErplab runs the command line in process.
func runErplab(ctx context.Context, dir string, args []string, n int) peerResult {
	var out, errb bytes.Buffer
	code := Main(ctx, args, Streams{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}, os.Getenv,
		Program{Version: "test", Out: filepath.Join(dir, fmt.Sprintf("results-%d.json", n))})
	return peerResult{status: code, stdout: out.String(), stderr: errb.String()}
}

func runPgbench(path, dir string, args []string) peerResult {
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
	}
	return peerResult{status: code, stdout: out.String(), stderr: errb.String()}
}

// findPgbench returns pgbench's path and major version ("" when not
// installed): the one next to the server binaries, else on PATH.
func findPgbench(t *testing.T) (string, int) {
	path := ""
	if bin, err := pgcluster.FindBinDir(); err == nil {
		path = filepath.Join(bin, "pgbench")
	}
	if _, err := os.Stat(path); path == "" || err != nil {
		if path, err = exec.LookPath("pgbench"); err != nil {
			t.Log("pgbench is not installed: erplab only")
			return "", 0
		}
	}
	out, err := exec.Command(path, "-V").Output()
	if err != nil {
		return "", 0
	}
	m := regexp.MustCompile(`\) (\d+)`).FindSubmatch(out)
	if m == nil {
		return "", 0
	}
	v, _ := strconv.Atoi(string(m[1]))
	return path, v
}

// passfile is the passfile of a key=value DSN.
func passfile(dsn string) string {
	for _, f := range strings.Fields(dsn) {
		if v, ok := strings.CutPrefix(f, "passfile="); ok {
			return v
		}
	}
	return ""
}

func removeLogs(dir string) {
	m, _ := filepath.Glob(filepath.Join(dir, "001_pgbench_log_*"))
	for _, f := range m {
		os.Remove(f)
	}
}

func clip(s string) string {
	if len(s) > 3000 {
		return s[:3000] + "..."
	}
	return s
}

// sameProcessed is the TAP's "actually processed: (\d+)/\1".
func sameProcessed(stdout, _ string) string {
	m := regexp.MustCompile(`actually processed: (\d+)/(\d+)`).FindStringSubmatch(stdout)
	if m == nil || m[1] != m[2] {
		return "processed transactions differ from the expected number"
	}
	return ""
}

// sameDeltaRetried is the backreferences of the TAP's serialization
// pattern: the client that got the error sends the same UPDATE (the same
// random delta) before the error and again after it.
func sameDeltaRetried(_, stderr string) string {
	errRe := regexp.MustCompile(`client (\d) got an error in command 3 \(SQL\) of script 0; ERROR:  could not serialize access due to concurrent update`)
	m := errRe.FindStringSubmatchIndex(stderr)
	if m == nil {
		return "no serialization error"
	}
	client := stderr[m[2]:m[3]]
	send := regexp.MustCompile(`client ` + client + ` sending (UPDATE xy SET y = y \+ -?\d+\b)`)
	before := send.FindAllStringSubmatch(stderr[:m[0]], -1)
	after := send.FindAllStringSubmatch(stderr[m[1]:], -1)
	if len(before) == 0 || len(after) == 0 {
		return "the failed UPDATE is not sent again"
	}
	if before[len(before)-1][1] != after[0][1] {
		return fmt.Sprintf("retry sent %q, first try %q", after[0][1], before[len(before)-1][1])
	}
	return ""
}

// logCheck is the TAP's check_pgbench_logs: nb files named
// prefix.PID[.THREAD] in the test directory, each with min..max lines all
// matching re. The directory is the one in the case's --log-prefix.
func logCheck(prefix string, nb, min, max int, re string) func(string, string) string {
	return func(string, string) string {
		dir := logDir
		files, _ := filepath.Glob(filepath.Join(dir, prefix+".*"))
		if len(files) != nb {
			return fmt.Sprintf("%d log files %s.*, want %d", len(files), prefix, nb)
		}
		name := regexp.MustCompile(`/` + prefix + `\.\d+(\.\d+)?$`)
		line := regexp.MustCompile(re)
		for _, f := range files {
			if !name.MatchString(f) {
				return "log file name " + f
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return err.Error()
			}
			lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			if len(b) == 0 {
				lines = nil
			}
			if len(lines) < min || len(lines) > max {
				return fmt.Sprintf("%s has %d lines, want %d..%d", f, len(lines), min, max)
			}
			for _, l := range lines {
				if !line.MatchString(l) {
					return fmt.Sprintf("log line %q does not match %s", l, re)
				}
			}
		}
		return ""
	}
}

// logDir is the test directory the log checks look in (set by the
// suite before it runs).
var logDir string

// checkSeeded is the TAP's check that every seeded run drew the same
// values: one value per distribution, counted runs times.
func checkSeeded(t *testing.T, conn *pgx.Conn, runs int) {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT rand, count(DISTINCT val), count(*) FROM seeded_random WHERE seed = "+seedForTest+" GROUP BY rand")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var rand string
		var distinct, count int
		if err := rows.Scan(&rand, &distinct, &count); err != nil {
			t.Fatal(err)
		}
		n++
		if distinct != 1 || count != runs {
			t.Errorf("seeded_random %s: %d distinct values in %d rows, want 1 in %d (same seed, same values)", rand, distinct, count, runs)
		}
	}
	if n != 4 {
		t.Errorf("seeded_random has %d distributions, want 4", n)
	}
}
