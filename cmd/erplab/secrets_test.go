package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/versus/pgbouncer"
)

// secretCore is in the test role's password; no command line may hold it.
const secretCore = "Zx9sekretQ"

// secretPassword has a quote, a space and a '%' so that every quoting and
// encoding path is taken.
const secretPassword = "it's " + secretCore + "%"

// passwordRole creates a database owned by a new role that must give its
// password (pg_hba.conf lines for the role on the socket and on
// 127.0.0.1, first, with scram-sha-256; removed at the end) and returns a
// DSN with the password and one without.
func passwordRole(t *testing.T) (withPW, withoutPW string) {
	t.Helper()
	pgtest.SkipShort(t)
	ctx := context.Background()
	db := srv.NewDatabase(t)
	cfg, err := pgconn.ParseConfig(db)
	if err != nil {
		t.Fatal(err)
	}
	admin := srv.Pool(t, srv.DSN(t, "postgres"))
	role := "pw_" + strings.ToLower(strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	if len(role) > 40 {
		role = role[:40]
	}
	if _, err := admin.Exec(ctx, "SET password_encryption = 'scram-sha-256'; CREATE ROLE "+pgx.Identifier{role}.Sanitize()+
		" LOGIN PASSWORD "+quoteLiteral(secretPassword)); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{cfg.Database}.Sanitize()+" OWNER TO "+pgx.Identifier{role}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{cfg.Database}.Sanitize()+" WITH (FORCE)")
		_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize())
	})
	hba := filepath.Join(srv.Cluster(t).DataDir(), "pg_hba.conf")
	orig, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	lines := fmt.Sprintf("local all %s scram-sha-256\nhost all %s 127.0.0.1/32 scram-sha-256\n", role, role)
	if err := os.WriteFile(hba, append([]byte(lines), orig...), 0o600); err != nil {
		t.Fatal(err)
	}
	reload := func() {
		if _, err := admin.Exec(context.Background(), "SELECT pg_reload_conf()"); err != nil {
			t.Fatal(err)
		}
	}
	reload()
	t.Cleanup(func() {
		if err := os.WriteFile(hba, orig, 0o600); err != nil {
			t.Error(err)
		}
		reload()
	})
	base := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", conninfo.QuoteValue(cfg.Host), cfg.Port, role, cfg.Database)
	withPW = base + " password=" + conninfo.QuoteValue(secretPassword)
	// The rule is in force once a connection without the password fails;
	// the password then works.
	t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			break
		}
		c.Close(ctx)
		if time.Now().After(deadline) {
			t.Fatal("a connection without the password still succeeds: pg_hba.conf change not in effect")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, err := pgx.Connect(ctx, withPW)
	if err != nil {
		t.Fatalf("the right password is refused: %v", err)
	}
	c.Close(ctx)
	return withPW, base
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// dsnFile writes dsn into a 0600 file.
func dsnFile(t *testing.T, dsn string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "dsn")
	if err := os.WriteFile(p, []byte(dsn+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// cmdlineWatch reads /proc/<pid>/cmdline of every descendant of this test
// process (parents from /proc/<pid>/stat) until stopped, every few
// milliseconds.
type cmdlineWatch struct {
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	scans int
	seen  map[string]bool // argv joined with spaces, of every descendant seen
	leaks []string
}

func watchCmdlines(secrets ...string) *cmdlineWatch {
	w := &cmdlineWatch{stop: make(chan struct{}), done: make(chan struct{}), seen: map[string]bool{}}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			w.scan(secrets)
			time.Sleep(3 * time.Millisecond)
		}
	}()
	return w
}

func (w *cmdlineWatch) scan(secrets []string) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	children := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	queue := append([]int(nil), children[os.Getpid()]...)
	var lines []string
	for len(queue) > 0 {
		pid := queue[0]
		queue = append(queue[1:], children[pid]...)
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || len(b) == 0 {
			continue
		}
		lines = append(lines, strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " "))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.scans++
	for _, l := range lines {
		w.seen[l] = true
		for _, s := range secrets {
			if strings.Contains(l, s) {
				w.leaks = append(w.leaks, l)
			}
		}
	}
}

// finish stops the watch and fails t on a leak; it returns every command
// line seen.
func (w *cmdlineWatch) finish(t *testing.T) []string {
	t.Helper()
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.leaks) > 0 {
		t.Errorf("a password in the command line of a child process (%d times), e.g. %q", len(w.leaks), w.leaks[0])
	}
	var seen []string
	for l := range w.seen {
		seen = append(seen, l)
	}
	t.Logf("%d scans of /proc, %d distinct descendant command lines", w.scans, len(seen))
	return seen
}

// sawChild fails t unless some command line seen starts with a program
// whose base name is prog and holds every word in has.
func sawChild(t *testing.T, seen []string, prog string, has ...string) {
	t.Helper()
	for _, l := range seen {
		f := strings.Fields(l)
		if len(f) == 0 || filepath.Base(f[0]) != prog {
			continue
		}
		ok := true
		for _, h := range has {
			ok = ok && strings.Contains(l, h)
		}
		if ok {
			return
		}
	}
	t.Errorf("no %s %v process seen among %d command lines: the watch missed it or it did not run", prog, has, len(seen))
}

// vs-pgbench on a role that needs its password: the DSN comes from a
// 0600 file, and neither pgbench nor the erplab pgbench children ever have
// the password on their command line.
func TestVsPgbenchPasswordNotInArgv(t *testing.T) {
	withPW, _ := passwordRole(t)
	file := dsnFile(t, withPW)
	w := watchCmdlines(secretCore, conninfo.QuoteValue(secretPassword))
	out, err := erplab(t, t.TempDir(), "vs-pgbench", "--dsn-file", file, "--force", "-s", "1",
		"--builtins", "select-only", "--clients", "1", "--duration", "1s", "--repeat", "1").CombinedOutput()
	seen := w.finish(t)
	if err != nil {
		t.Fatalf("vs-pgbench: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "CPU ratio") || strings.Contains(string(out), secretCore) {
		t.Fatalf("vs-pgbench output lacks the table or holds the password:\n%s", out)
	}
	sawChild(t, seen, "pgbench", "-b select-only", "dbname=")
	sawChild(t, seen, filepath.Base(os.Args[0]), "pgbench -n", "select-only", "dbname=")
}

// proxy bench (direct, erplab proxy, PgBouncer when installed, plus
// pgbench -i) with the upstream in ERPLAB_UPSTREAM.
func TestProxyBenchPasswordNotInArgv(t *testing.T) {
	withPW, _ := passwordRole(t)
	w := watchCmdlines(secretCore, conninfo.QuoteValue(secretPassword))
	cmd := erplab(t, t.TempDir(), "proxy", "bench", "--init", "1", "--duration", "1s", "--clients", "1", "--modes", "simple")
	cmd.Env = append(cmd.Env, upstreamEnv+"="+withPW)
	out, err := cmd.CombinedOutput()
	seen := w.finish(t)
	if err != nil {
		t.Fatalf("proxy bench: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "erplab proxy: tps") || strings.Contains(string(out), secretCore) {
		t.Fatalf("proxy bench output lacks the table or holds the password:\n%s", out)
	}
	sawChild(t, seen, "pgbench", "-i")
	sawChild(t, seen, "pgbench", "-S", "port=")
	if _, err := pgbouncer.FindPgBouncer(); err != nil {
		t.Logf("PgBouncer column not checked: %v", err)
		return
	}
	if !strings.Contains(string(out), "pgbouncer: tps") {
		t.Errorf("pgbouncer installed but not in the table:\n%s", out)
	}
	sawChild(t, seen, "pgbouncer", ".ini")
}

// erplab proxy reads its upstream from a 0600 file and relays a client's
// password authentication; a password in --upstream gets the one-line
// warning, which does not quote it; a group-readable file is refused.
func TestProxyUpstreamFileAndWarning(t *testing.T) {
	withPW, _ := passwordRole(t)
	file := dsnFile(t, withPW)
	w := watchCmdlines(secretCore)
	cmd := erplab(t, t.TempDir(), "proxy", "--listen", "127.0.0.1:0", "--upstream-file", file)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stderr)
	addr := ""
	var lines []string
	for addr == "" && sc.Scan() {
		lines = append(lines, sc.Text())
		if rest, ok := strings.CutPrefix(sc.Text(), "erplab proxy listening on "); ok {
			addr, _, _ = strings.Cut(rest, ",")
		}
	}
	if addr == "" {
		t.Fatalf("proxy did not start:\n%s", strings.Join(lines, "\n"))
	}
	go func() {
		for sc.Scan() {
		}
	}()
	host, port, _ := strings.Cut(addr, ":")
	cfg, err := pgconn.ParseConfig(withPW)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	client := fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable password=%s", host, port, cfg.User, cfg.Database, conninfo.QuoteValue(secretPassword))
	conn, err := pgx.Connect(ctx, client)
	if err != nil {
		t.Fatalf("client through the proxy: %v", err)
	}
	var user string
	if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil || user != cfg.User {
		t.Fatalf("current_user %q, %v; want %s", user, err, cfg.User)
	}
	conn.Close(ctx)
	_ = cmd.Process.Signal(syscall.SIGINT)
	_ = cmd.Wait()
	w.finish(t)

	// --upstream with a password: the warning, and never the password.
	out, _ := erplab(t, t.TempDir(), "proxy", "--listen", "256.0.0.1:1", "--upstream", withPW).CombinedOutput()
	if !strings.Contains(string(out), "warning: the password in --upstream is visible to every user of this host") ||
		!strings.Contains(string(out), "--upstream-file") || strings.Contains(string(out), secretCore) {
		t.Fatalf("want the argv warning without the password, got:\n%s", out)
	}
	// --dsn likewise, and nothing with the password in PGPASSWORD.
	out, _ = erplab(t, t.TempDir(), "check", "--dsn", withPW).CombinedOutput()
	if !strings.Contains(string(out), "warning: the password in --dsn is visible") || strings.Contains(string(out), secretCore) {
		t.Fatalf("check --dsn with a password: %s", out)
	}
	if err := os.Chmod(file, 0o640); err != nil {
		t.Fatal(err)
	}
	code, text := exitCode(t, erplab(t, t.TempDir(), "proxy", "--upstream-file", file))
	if code != exitUsage || !strings.Contains(text, "has group or world access (mode 0640)") || strings.Contains(text, secretCore) {
		t.Fatalf("group-readable --upstream-file: exit %d\n%s", code, text)
	}
}
