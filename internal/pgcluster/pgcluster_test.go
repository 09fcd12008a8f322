package pgcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/leftover"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/procfs"
)

// envChild selects a child mode of the test binary (see TestMain).
const envChild = "ERPLAB_PGCLUSTER_TEST_CHILD"

// The tests start clusters directly: internal/pgtest builds on this package.
func TestMain(m *testing.M) {
	switch os.Getenv(envChild) {
	case "":
		// A record of our own: the reaper tests sweep it.
		state, err := os.MkdirTemp("", "pgcluster-state-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Setenv(leftover.EnvStateDir, state)
		code := m.Run()
		_ = os.RemoveAll(state)
		os.Exit(code)
	case "sigint":
		os.Exit(childSigint())
	case "nonroot":
		os.Exit(childNonRoot())
	case "orphan":
		os.Exit(childOrphan())
	default:
		fmt.Fprintf(os.Stderr, "unknown %s\n", envChild)
		os.Exit(2)
	}
}

// startOpts are small clusters for tests.
func startOpts() Options { return Options{SharedBuffers: "128MB", MaxConnections: 20} }

func start(t *testing.T, opts Options) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

func show(t *testing.T, conn *pgx.Conn, name string) string {
	t.Helper()
	var v string
	if err := conn.QueryRow(context.Background(), "SHOW "+name).Scan(&v); err != nil {
		t.Fatalf("SHOW %s: %v", name, err)
	}
	return v
}

// processGone reports whether no process with this pid exists (kill -0).
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// postgresProcsIn lists processes whose command line mentions dir.
func postgresProcsIn(t *testing.T, dir string) []int {
	t.Helper()
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		t.Fatal(err)
	}
	procs, err := fs.AllProcs()
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range procs {
		if args, err := p.CmdLine(); err == nil && strings.Contains(strings.Join(args, " "), dir) {
			pids = append(pids, p.PID)
		}
	}
	return pids
}

// expectedUID is the uid the server must run as: the postgres OS user when
// we are root, else ourselves.
func expectedUID(t *testing.T) uint64 {
	t.Helper()
	if os.Geteuid() != 0 {
		return uint64(os.Geteuid())
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	return uid
}

func TestStartStop(t *testing.T) {
	skipShort(t)
	opts := Options{
		MaxConnections: 37,
		SharedBuffers:  "160MB",
		Settings:       map[string]string{"work_mem": "7MB", "application_name": "it's erplab"},
		TCP:            true,
	}
	c := start(t, opts)
	ctx := context.Background()

	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatalf("connect over the Unix socket: %v", err)
	}
	for name, want := range map[string]string{
		"max_connections":           "37",
		"shared_buffers":            "160MB",
		"work_mem":                  "7MB",
		"max_locks_per_transaction": "256",
		"fsync":                     "on",
		"port":                      strconv.Itoa(c.Port()),
		"unix_socket_directories":   c.SocketDir(),
		"data_directory":            c.DataDir(),
		"server_encoding":           "UTF8",
		"lc_collate":                "C",
	} {
		if got := show(t, conn, name); got != want {
			t.Errorf("SHOW %s = %q, want %q", name, got, want)
		}
	}
	if v := show(t, conn, "server_version"); c.Version() == "" || !strings.HasPrefix(v, c.Version()) {
		t.Errorf("Version() = %q, server_version %q", c.Version(), v)
	}
	conn.Close(ctx)

	tcp, err := pgx.Connect(ctx, c.DSNAt("127.0.0.1", c.Port(), "postgres"))
	if err != nil {
		t.Fatalf("connect over TCP: %v", err)
	}
	tcp.Close(ctx)
	// Without the password (passfile) TCP and the socket both refuse.
	for _, dsn := range []string{
		fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable", c.Port()),
		fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable password=wrong", c.SocketDir(), c.Port()),
	} {
		if conn, err := pgx.Connect(ctx, dsn); err == nil {
			conn.Close(ctx)
			t.Errorf("connected without the password: %s", dsn)
		}
	}

	if err := c.CreateDatabase(ctx, "Mixed Case-db"); err != nil {
		t.Fatal(err)
	}
	conn2, err := pgx.Connect(ctx, c.DSN("Mixed Case-db"))
	if err != nil {
		t.Fatalf("connect to created database: %v", err)
	}
	conn2.Close(ctx)

	pid := c.PID()
	proc, err := procfs.NewProc(pid)
	if err != nil {
		t.Fatalf("postmaster pid %d: %v", pid, err)
	}
	st, err := proc.NewStatus()
	if err != nil {
		t.Fatal(err)
	}
	if want := expectedUID(t); st.UIDs[1] != want {
		t.Errorf("postmaster runs as uid %d, want %d", st.UIDs[1], want)
	}
	stat, err := proc.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if stat.PGRP != pid {
		t.Errorf("postmaster process group %d, want its own (%d)", stat.PGRP, pid)
	}
	socket := filepath.Join(c.SocketDir(), fmt.Sprintf(".s.PGSQL.%d", c.Port()))
	if _, err := os.Stat(socket); err != nil {
		t.Errorf("socket: %v", err)
	}

	dir := c.Dir()
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster dir %s still exists after Stop (stat: %v)", dir, err)
	}
	if !processGone(pid) {
		t.Errorf("postmaster %d still exists after Stop", pid)
	}
	if pids := postgresProcsIn(t, dir); len(pids) > 0 {
		t.Errorf("processes %v still mention %s after Stop", pids, dir)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// childNonRoot starts and stops a cluster as the current (non-root) user
// and prints "RESULT <postmaster uid> <dir> <pid> <stop error>".
func childNonRoot() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, startOpts())
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	uid := "?"
	if p, err := procfs.NewProc(c.PID()); err == nil {
		if st, err := p.NewStatus(); err == nil {
			uid = strconv.FormatUint(st.UIDs[1], 10)
		}
	}
	var one int
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err == nil {
		err = conn.QueryRow(ctx, "SELECT 1").Scan(&one)
		conn.Close(ctx)
	}
	stopErr := c.Stop()
	fmt.Printf("RESULT %s %s %d query=%v stop=%v\n", uid, c.Dir(), c.PID(), err, stopErr)
	return 0
}

// TestNonRoot re-executes the test binary as the postgres OS user, where
// Start runs initdb and postgres as itself (no credential switch).
func TestNonRoot(t *testing.T) {
	skipShort(t)
	if os.Geteuid() != 0 {
		t.Skip("not root: TestStartStop already ran the cluster as the current non-root user")
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Skip("no postgres OS user to run the non-root case as")
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)

	// A copy of the test binary the postgres user can read and run.
	work := t.TempDir()
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(work); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		_ = os.Chmod(d, 0o755) // t.TempDir's parent is 0700 too
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(work, "pgcluster.test")
	if err := copyFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(work, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin)
	cmd.Dir = home
	cmd.Env = append(os.Environ(), envChild+"=nonroot", "HOME="+home, leftover.EnvStateDir+"=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child as postgres: %v\n%s", err, out)
	}
	var line string
	for l := range strings.Lines(string(out)) {
		if strings.HasPrefix(l, "RESULT ") {
			line = strings.TrimSpace(l)
		}
	}
	f := strings.Fields(line)
	if len(f) != 6 {
		t.Fatalf("child output: %s", out)
	}
	if f[1] != u.Uid {
		t.Errorf("postmaster uid %s, want %s (postgres)", f[1], u.Uid)
	}
	if f[4] != "query=<nil>" || f[5] != "stop=<nil>" {
		t.Errorf("child: %s", line)
	}
	if _, err := os.Stat(f[2]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("child's cluster dir %s still exists (stat: %v)", f[2], err)
	}
	pid, _ := strconv.Atoi(f[3])
	if pid == 0 || !processGone(pid) {
		t.Errorf("child's postmaster %d still exists", pid)
	}
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// reachableTempDir gives the test its own TMPDIR that the postgres OS user
// can enter (t.TempDir is mode 0700).
func reachableTempDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for p := d; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func TestStartFailureCleansUp(t *testing.T) {
	skipShort(t)
	tmp := reachableTempDir(t)
	t.Setenv("TMPDIR", tmp)
	opts := startOpts()
	opts.Settings = map[string]string{"work_mem": "lots"}
	c, err := Start(context.Background(), opts)
	if err == nil {
		_ = c.Stop()
		t.Fatal("Start with work_mem=lots succeeded")
	}
	if c != nil {
		t.Error("Start returned a cluster with its error")
	}
	if !strings.Contains(err.Error(), `invalid value for parameter "work_mem": "lots"`) {
		t.Errorf("error does not quote the server's complaint: %v", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error is not one line: %q", err)
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("left behind in TMPDIR: %v", entries)
	}
	if pids := postgresProcsIn(t, tmp); len(pids) > 0 {
		t.Errorf("processes %v still run in %s", pids, tmp)
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	skipShort(t)
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Settings: map[string]string{"port": "5432"}}, "Options.Port"},
		{Options{Settings: map[string]string{"work_mem = 1; x": "1"}}, "invalid setting name"},
		{Options{MaxConnections: -1}, "invalid options"},
	} {
		c, err := Start(context.Background(), tc.opts)
		if err == nil {
			_ = c.Stop()
			t.Errorf("Start(%+v) succeeded", tc.opts)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start(%+v) = %v, want it to mention %q", tc.opts, err, tc.want)
		}
	}
}

func TestStartMissingOSUser(t *testing.T) {
	skipShort(t)
	if os.Geteuid() != 0 {
		t.Skip("OSUser only matters when running as root")
	}
	tmp := reachableTempDir(t)
	t.Setenv("TMPDIR", tmp)
	opts := startOpts()
	opts.OSUser = "erplab-no-such-user"
	_, err := Start(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "--os-user") || !strings.Contains(err.Error(), "erplab-no-such-user") {
		t.Fatalf("Start with a missing OS user: %v, want an error naming the user and --os-user", err)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

// childSigint starts a cluster, prints "READY <dir> <pid>", and on SIGINT
// stops it and prints "STOPPED <error>".
func childSigint() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c, err := Start(ctx, startOpts())
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	fmt.Printf("READY %s %d\n", c.Dir(), c.PID())
	<-ctx.Done()
	fmt.Printf("STOPPED %v\n", c.Stop())
	return 0
}

// TestCleanupAfterSIGINT runs a child that starts a cluster and stops it on
// SIGINT, and sends SIGINT to the child's whole process group, as a terminal
// Ctrl-C does.
func TestCleanupAfterSIGINT(t *testing.T) {
	skipShort(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envChild+"=sigint")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := bufio.NewScanner(stdout)
	var dir string
	var pid int
	for lines.Scan() {
		f := strings.Fields(lines.Text())
		if len(f) >= 1 && f[0] == "ERROR" {
			t.Fatalf("child: %s", lines.Text())
		}
		if len(f) == 3 && f[0] == "READY" {
			dir = f[1]
			pid, _ = strconv.Atoi(f[2])
			break
		}
	}
	if pid == 0 || processGone(pid) {
		t.Fatalf("child did not report a running cluster (pid %d, scan: %v)", pid, lines.Err())
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var stopped string
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "STOPPED") {
			stopped = lines.Text()
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if stopped != "STOPPED <nil>" {
		t.Errorf("child said %q, want \"STOPPED <nil>\"", stopped)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster dir %s still exists (stat: %v)", dir, err)
	}
	if !processGone(pid) {
		t.Errorf("postmaster %d still exists", pid)
	}
	if pids := postgresProcsIn(t, dir); len(pids) > 0 {
		t.Errorf("processes %v still mention %s", pids, dir)
	}
}

// TestKeep detaches a cluster, checks Stop leaves it alone, then runs the
// printed stop-and-remove command.
func TestKeep(t *testing.T) {
	skipShort(t)
	c := start(t, startOpts())
	msg := c.Keep("postgres")
	t.Cleanup(func() { // if the test fails before the printed command ran
		if !c.hasExited() {
			_ = syscall.Kill(c.PID(), syscall.SIGQUIT)
			<-c.exited
		}
		_ = os.RemoveAll(c.Dir())
	})
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(context.Background(), c.DSN("postgres"))
	if err != nil {
		t.Fatalf("kept cluster not reachable after Stop: %v", err)
	}
	conn.Close(context.Background())

	var stopLine string
	for l := range strings.Lines(msg) {
		if s, ok := strings.CutPrefix(strings.TrimSpace(l), "stop and remove:"); ok {
			stopLine = strings.TrimSpace(s)
		}
	}
	for _, want := range []string{"pg_ctl -D " + c.DataDir() + " stop -m fast", "rm -rf " + c.Dir()} {
		if !strings.Contains(stopLine, want) {
			t.Fatalf("stop instructions %q lack %q; message:\n%s", stopLine, want, msg)
		}
	}
	if !strings.Contains(msg, c.DSN("postgres")) {
		t.Errorf("Keep message lacks the psql DSN:\n%s", msg)
	}
	out, err := exec.Command("bash", "-c", stopLine).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", stopLine, err, out)
	}
	if _, err := os.Stat(c.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dir %s still exists after the printed command", c.Dir())
	}
	select {
	case <-c.exited:
	case <-time.After(time.Minute):
		t.Fatal("postmaster did not exit after pg_ctl stop")
	}
	if !processGone(c.PID()) {
		t.Errorf("postmaster %d still exists", c.PID())
	}
}

func TestFindBinDir(t *testing.T) {
	skipShort(t)
	d, err := FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	if !hasServer(d) {
		t.Fatalf("FindBinDir() = %s without postgres and initdb", d)
	}

	empty := t.TempDir()
	t.Setenv(EnvBinDir, empty)
	_, err = FindBinDir()
	if !errors.Is(err, ErrNoServer) {
		t.Fatalf("FindBinDir with empty $%s: %v, want ErrNoServer", EnvBinDir, err)
	}
	msg := err.Error()
	for _, want := range []string{empty, "apt-get install postgresql", "--dsn"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error is not one line: %q", msg)
	}
	if _, err := Start(context.Background(), Options{}); !errors.Is(err, ErrNoServer) {
		t.Errorf("Start without binaries: %v, want ErrNoServer", err)
	}
}

func TestNewestVersionBinDir(t *testing.T) {
	root := t.TempDir()
	mk := func(ver string, names ...string) {
		bin := filepath.Join(root, ver, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(bin, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("9.6", "postgres", "initdb")
	mk("15", "postgres", "initdb")
	mk("16", "postgres") // no initdb: client-only leftovers
	mk("latest", "postgres", "initdb")
	if got, want := newestVersionBinDir(root), filepath.Join(root, "15", "bin"); got != want {
		t.Fatalf("newestVersionBinDir = %q, want %q", got, want)
	}
}

func TestDefaultSharedBuffers(t *testing.T) {
	got := defaultSharedBuffers()
	mb, err := strconv.Atoi(strings.TrimSuffix(got, "MB"))
	if err != nil || mb < 128 || mb > 8192 {
		t.Fatalf("defaultSharedBuffers() = %q, want 128MB..8192MB", got)
	}
	fs, _ := procfs.NewDefaultFS()
	mi, err := fs.Meminfo()
	if err != nil || mi.MemTotal == nil {
		t.Skip("no /proc/meminfo")
	}
	want := min(max(*mi.MemTotal/8/1024, 128), 8192)
	if uint64(mb) != want {
		t.Fatalf("defaultSharedBuffers() = %dMB, want MemTotal/8 = %dMB", mb, want)
	}
}

// syncBuffer is a strings.Builder safe for the log-copying goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLogWriter(t *testing.T) {
	skipShort(t)
	var buf syncBuffer
	opts := startOpts()
	opts.Log = &buf
	c := start(t, opts)
	const ready = "database system is ready to accept connections"
	file, err := os.ReadFile(c.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(file), ready) {
		t.Errorf("server.log lacks %q:\n%s", ready, file)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	// Stop waited for the postmaster and its output pipe: all lines are in.
	for _, want := range []string{ready, "database system is shut down"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("Options.Log lacks %q:\n%s", want, buf.String())
		}
	}
}

// skipShort skips a test that starts a server under go test -short (the
// pgtest harness cannot be used here: it imports this package).
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs PostgreSQL server binaries (skipped under -short)")
	}
}

// A frozen (SIGSTOP) server is killed at once by Stop, which says so,
// instead of waiting for a fast and then an immediate shutdown that a
// stopped postmaster cannot perform: the directory and every server
// process are gone, backends included (each is a session leader of its
// own, out of the postmaster's process group), and so is the shared
// memory a killed postmaster leaves (its System V segment, /dev/shm).
func TestStopFrozenServer(t *testing.T) {
	skipShort(t)
	c := start(t, Options{})
	shm := shmOf(t, c)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}
	pid, dir := c.PID(), c.Dir()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for i := 0; !stopped(pid); i++ { // the signal is delivered asynchronously
		if i == 10000 {
			t.Fatalf("postmaster %d not stopped 10 s after SIGSTOP", pid)
		}
		time.Sleep(time.Millisecond)
	}
	err = c.Stop()
	if err == nil || !strings.Contains(err.Error(), "was stopped (SIGSTOP): killed; "+shm.removedLine()) {
		t.Fatalf("Stop of a frozen server: %v; want %q", err, shm.removedLine())
	}
	shm.check(t, "after Stop")
	if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("cluster dir %s still exists (stat: %v)", dir, serr)
	}
	for _, p := range []int{pid, backend} {
		// a killed child may linger as a zombie until its parent (gone)
		// is replaced by init: wait for the reaper, not for a time
		for i := 0; i < 200 && !processGone(p) && !zombie(p); i++ {
			time.Sleep(10 * time.Millisecond)
		}
		if !processGone(p) && !zombie(p) {
			t.Errorf("server process %d still runs", p)
		}
	}
}

// zombie reports whether pid has exited but is not yet reaped.
func zombie(pid int) bool { return procState(pid) == "Z" }

// TestPGPasswordIgnored: a PGPASSWORD in erplab's environment (meant for
// the user's own server, e.g. a replay template's) does not replace the
// cluster's passfile: start-up and a connection by DSN succeed.
func TestPGPasswordIgnored(t *testing.T) {
	t.Setenv("PGPASSWORD", "not-the-cluster-password")
	opts := startOpts()
	opts.TCP = true
	c := start(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, dsn := range []string{c.DSN("postgres"), c.DSNAt("127.0.0.1", c.Port(), "postgres")} {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatalf("%s: %v", dsn, err)
		}
		conn.Close(ctx)
	}
}
