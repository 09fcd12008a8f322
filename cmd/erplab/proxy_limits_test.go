package main

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Out of file descriptors, erplab proxy retries accept with back-off
// instead of exiting (it exited with "accept4: too many open files"),
// and serves again once descriptors are free.
func TestProxyAcceptErrorsRetried(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to lower the open files limit")
	}
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	base := erplab(t, t.TempDir(), "proxy", "--listen", "127.0.0.1:0", "--upstream", dsn, "--max-clients", "100")
	// ulimit -n sets the soft and the hard limit: the Go runtime cannot
	// raise it again.
	cmd := exec.Command("sh", append([]string{"-c", `ulimit -n 48 && exec "$0" "$@"`}, base.Args...)...)
	cmd.Dir, cmd.Env = base.Dir, base.Env
	stdout := new(strings.Builder)
	addr, line, sc, _ := startListening(t, cmd, stdout)
	defer func() { _ = cmd.Process.Kill() }()
	if !strings.Contains(line, "open files limit 48") {
		t.Fatalf("limit not lowered: %s", line)
	}
	acceptFailed := make(chan struct{})
	go func() {
		seen := false
		for sc.Scan() {
			if !seen && strings.Contains(sc.Text(), "accept failed; retrying") {
				seen = true
				close(acceptFailed)
			}
		}
	}()
	var idle []net.Conn
	for i := 0; i < 80; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	select {
	case <-acceptFailed:
	case <-time.After(30 * time.Second):
		t.Fatal("80 idle connections under a 48 descriptor limit: no accept error logged")
	}
	for _, c := range idle {
		c.Close()
	}
	host, port, _ := strings.Cut(addr, ":")
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, dsn+" host="+host+" port="+port+" sslmode=disable")
		if err == nil {
			var n int
			err = conn.QueryRow(ctx, "SELECT 1").Scan(&n)
			conn.Close(ctx)
			if err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy does not serve after descriptors were freed: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("proxy exit: %v", err)
	}
	if !strings.Contains(stdout.String(), "accept errors ") || strings.Contains(stdout.String(), "accept errors 0") {
		t.Errorf("summary does not count the accept errors:\n%s", stdout.String())
	}
}

// startListening starts cmd, an erplab proxy, with its standard output
// going to stdout, and reads its standard error until the line saying
// where it listens: it returns that address, the line, and the scanner
// of the rest of standard error (which the caller must keep reading),
// and the lines of standard error before that line.
func startListening(t *testing.T, cmd *exec.Cmd, stdout *strings.Builder) (addr, line string, sc *bufio.Scanner, before []string) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc = bufio.NewScanner(stderr)
	for sc.Scan() {
		if _, rest, ok := strings.Cut(sc.Text(), "listening on "); ok {
			addr, _, _ = strings.Cut(rest, ",")
			return addr, sc.Text(), sc, before
		}
		before = append(before, sc.Text())
	}
	_ = cmd.Process.Kill()
	t.Fatal("proxy did not say where it listens")
	return "", "", nil, nil
}

// The user's reports: proxy flags say what is wrong in one line and exit 2,
// and connection errors name --upstream, not --dsn.
func TestProxyFlagValidation(t *testing.T) {
	for _, args := range [][]string{
		{"proxy", "--upstream", "port=abc"},
		{"proxy", "--upstream", "host=/tmp", "--listen", "nonsense"},
		{"proxy", "--upstream", "host=/tmp", "--cache", "-1"},
		{"proxy", "bench", "--upstream", "host=/tmp", "--init", "-1"},
		{"proxy", "bench", "--upstream", "host=/tmp", "--duration", "0s"},
		{"proxy", "bench", "--upstream", "host=/tmp", "--duration", "500ms"},
		// Checked before --init writes to the server (there is none at
		// host=/tmp: initialising first gave a connection error, exit 1).
		{"proxy", "bench", "--upstream", "host=/tmp", "--init", "1", "--rounds", "0"},
		{"proxy", "bench", "--upstream", "host=/tmp", "--init", "1", "--procs", "-1"},
		{"proxy", "bench", "--upstream", "host=/tmp", "--init", "1", "--aa", "--no-pgbouncer"},
		{"proxy", "bench", "--upstream", "host=/tmp", "--floor=maybe"},
	} {
		checkUsageError(t, args)
	}
	cmd := erplab(t, t.TempDir(), "proxy", "--upstream", "port=abc")
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "invalid --upstream: invalid port") || strings.Contains(string(out), "--dsn") {
		t.Errorf("--upstream port=abc: %q, want it to say invalid --upstream: invalid port", out)
	}
	// A database that does not exist: the side connection's warning,
	// before the proxy says it listens, names --upstream.
	cmd = erplab(t, t.TempDir(), "proxy", "--listen", "127.0.0.1:0", "--upstream", srv.NewDatabase(t)+" dbname=no_such_db")
	var stdout strings.Builder
	_, _, sc, before := startListening(t, cmd, &stdout)
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	go func() {
		for sc.Scan() {
		}
	}()
	if got := strings.Join(before, "\n"); !strings.Contains(got, "pass another dbname in --upstream") || strings.Contains(got, "--dsn") {
		t.Errorf("missing database: %q, want it to name --upstream", got)
	}
}

// An interrupted proxy bench prints the runs it completed, then one line
// naming the run it stopped in and the signal (not pgbench's exit
// status), and exits as every command but pgbench does on a signal.
func TestProxyBenchInterrupted(t *testing.T) {
	dsn := srv.NewDatabase(t)
	cmd := erplab(t, t.TempDir(), "proxy", "bench", "--upstream", dsn, "--init", "1", "--duration", "2s",
		"--clients", "1", "--modes", "simple", "--rounds", "3", "--floor", "--no-pgbouncer")
	var stdout strings.Builder
	cmd.Stdout = &stdout
	// During the next run.
	lines, err := signalAtLine(t, cmd, syscall.SIGTERM, func(l string) bool { return strings.HasPrefix(l, "round 1/3") })
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("exit %v, want %d; stderr %q", err, exitInterrupted, lines)
	}
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "erplab: proxybench: stopped during ") || !strings.HasSuffix(last, ": interrupted (SIGTERM)") || strings.Contains(last, "pgbench (") {
		t.Errorf("last line %q, want the run it stopped in and the signal", last)
	}
	if !strings.Contains(stdout.String(), "direct: tps") {
		t.Errorf("no partial table on stdout: %q", stdout.String())
	}
}
