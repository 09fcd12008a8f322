package pgcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/procfs"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/erplab/erplab/internal/leftover"
	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/hostfacts"
)

// Options configures Start. The zero value starts a cluster with defaults
// suitable for a lab run on this machine.
type Options struct {
	// BinDir holds postgres and initdb; "" means FindBinDir.
	BinDir string
	// OSUser is the OS account initdb and postgres run as when the effective
	// uid is 0 (PostgreSQL refuses to run as root); "" means "postgres".
	// Ignored when not running as root: the server then runs as the
	// current user.
	OSUser string
	// Port is the TCP port on 127.0.0.1 (with TCP) and the number in the
	// Unix socket name (.s.PGSQL.<port>); 0 picks a free TCP port with TCP,
	// else 5432 (the socket directory is private, no clash possible).
	Port int
	// MaxConnections is the max_connections setting (number of concurrent
	// client connections, runtime-config-connection.html); 0 means 100.
	// Callers pass their pool size plus headroom for monitoring sessions.
	MaxConnections int
	// SharedBuffers is the shared_buffers setting with a unit, e.g. "128MB"
	// (runtime-config-resource.html); "" sizes it from RAM: 1/8 of MemTotal
	// (/proc/meminfo), clamped to 128MB..8GB.
	SharedBuffers string
	// Settings are extra postgresql.conf settings (name -> value, values are
	// quoted for the file), applied after the built-in ones so they win.
	// port, listen_addresses, unix_socket_directories, max_connections and
	// shared_buffers are set through the fields above and rejected here.
	Settings map[string]string
	// Log receives the server's log output (stderr). When nil it goes only
	// to server.log in the cluster directory; when set it goes to both. After
	// Keep and the exit of this process, output continues in server.log only
	// if Log is nil.
	Log io.Writer
	// TCP also listens on 127.0.0.1:Port (scram-sha-256, as the socket).
	// Off by default: erplab's own connections and its child processes use
	// the Unix socket, which only the invoking user and the server's OS
	// user can reach.
	TCP bool
	// TrustSocket makes the Unix socket trust its clients (pg_hba "local
	// ... trust"); TCP stays scram-sha-256. Only for test harnesses whose
	// tests need the server's own errors that come after authentication
	// (unknown role, missing database, too many connections) while
	// passing dummy passwords. The socket directory stays private: only
	// the invoking user, root and the server's OS user can connect.
	// erplab's own servers never set it.
	TrustSocket bool
	// StopWithParent asks the kernel to send the postmaster SIGQUIT
	// (immediate shutdown) when the process that started it dies without
	// calling Stop (prctl PR_SET_PDEATHSIG), e.g. a test binary killed by
	// a timeout. The temporary directory is then left behind. Do not combine
	// with Keep: a kept server would die with this process.
	StopWithParent bool
	// WaitSampling preloads pg_wait_sampling after pg_stat_statements
	// when both libraries are installed next to the server binaries
	// (statementStats): the wait-event profile per key operation of
	// erplab ab's runs. Its collector wakes every 10 ms, so only callers
	// that compare waits ask for it. Settings' shared_preload_libraries,
	// when given, wins.
	WaitSampling bool
}

// Timeouts of Start and Stop.
const (
	// startTimeout bounds the wait for the server to accept connections.
	startTimeout = 60 * time.Second
	// fastShutdownTimeout bounds the wait after SIGINT ("Fast Shutdown
	// mode", server-shutdown.html) before escalating to SIGQUIT.
	fastShutdownTimeout = 30 * time.Second
	// immediateShutdownTimeout bounds the wait after SIGQUIT ("Immediate
	// Shutdown mode") before SIGKILL.
	immediateShutdownTimeout = 5 * time.Second
	// defaultMaxConnections is PostgreSQL's own default for max_connections.
	defaultMaxConnections = 100
	// Shared buffers sizing from RAM, in bytes.
	minSharedBuffers = 128 << 20
	maxSharedBuffers = 8 << 30
	// defaultPort is the socket number without TCP (PostgreSQL's default).
	defaultPort = 5432
	// maxSocketPath is sizeof(sockaddr_un.sun_path) - 1 on Linux: the
	// longest usable Unix socket path, in bytes.
	maxSocketPath = 107
	// logTailLines is how many server log lines a start-up error quotes.
	logTailLines = 8
)

// confFile is the include file holding erplab's settings, next to
// postgresql.conf in the data directory.
const confFile = "erplab.conf"

// reservedSetting returns which Options field or rule controls a setting
// that Options.Settings may not override, or "".
func reservedSetting(name string) string {
	switch strings.ToLower(name) {
	case "port":
		return "Options.Port"
	case "listen_addresses":
		return "Options.TCP"
	case "unix_socket_directories", "unix_socket_permissions", "unix_socket_group":
		return "the cluster (a private socket directory)"
	case "hba_file", "password_encryption":
		return "the cluster (scram-sha-256 with a per-cluster password)"
	case "max_connections":
		return "Options.MaxConnections"
	case "shared_buffers":
		return "Options.SharedBuffers"
	}
	return ""
}

// Cluster is a running throwaway PostgreSQL server. Its methods are safe for
// concurrent use.
type Cluster struct {
	dir, dataDir, binDir string
	sockDir, passFile    string
	password             string
	tcp, trustSocket     bool
	port                 int
	version              string
	osUser               string // "" when running as the current (non-root) user
	cred                 *syscall.Credential
	logPath              string
	logFile              *os.File
	extraLog             io.Writer
	pdeath               bool // Options.StopWithParent
	rec                  *leftover.Record
	entry                *leftover.Entry // nil once removed (Stop, Keep)
	info                 reapInfo        // what entry.Data holds

	cmd     *exec.Cmd
	exited  chan struct{} // closed when the postmaster has exited and been reaped
	waitErr error         // cmd.Wait result, readable after exited is closed

	mu      sync.Mutex
	stopped bool
	kept    bool
	stopErr error
}

// Start creates a fresh private directory os.TempDir()/erplab-pg-<12 hex>
// (recorded in erplab's crash-safe record before it is created, see
// internal/leftover and ReapOrphans), runs initdb there, starts postgres and
// waits (bounded by ctx and 60 s) until it accepts connections. On any
// failure it kills what it started, removes the directory and returns an
// error; a server start-up failure quotes the last lines of the server log.
// Errors wrap ErrNoServer when there are no server binaries.
//
// See the package doc for the layout, the authentication (scram-sha-256
// with a random per-cluster password that DSN hands over through a 0600
// passfile) and who can reach the socket.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = FindBinDir(); err != nil {
			return nil, err
		}
	} else if !hasServer(binDir) {
		return nil, fmt.Errorf("%w in %s: %s", ErrNoServer, binDir, installHint)
	}
	if opts.MaxConnections < 0 || opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("pgcluster: invalid options: max connections %d, port %d", opts.MaxConnections, opts.Port)
	}
	for name := range opts.Settings {
		if by := reservedSetting(name); by != "" {
			return nil, fmt.Errorf("pgcluster: setting %q is controlled by %s", name, by)
		}
		if !validSettingName(name) {
			return nil, fmt.Errorf("pgcluster: invalid setting name %q", name)
		}
	}

	c = &Cluster{binDir: binDir, extraLog: opts.Log, pdeath: opts.StopWithParent, tcp: opts.TCP, trustSocket: opts.TrustSocket, exited: make(chan struct{})}
	if os.Geteuid() == 0 {
		c.osUser = opts.OSUser
		if c.osUser == "" {
			c.osUser = "postgres"
		}
		if c.cred, err = credentialFor(c.osUser); err != nil {
			return nil, err
		}
	}
	if c.rec, err = leftover.Open(); err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	if err := c.makeDir(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
			c = nil
		}
	}()
	c.dataDir = filepath.Join(c.dir, "data")
	c.sockDir = filepath.Join(c.dir, "sock")
	c.logPath = filepath.Join(c.dir, "server.log")
	c.passFile = filepath.Join(c.dir, passFileName)
	if n := len(c.sockDir) + len("/.s.PGSQL.65535"); n > maxSocketPath {
		return c, fmt.Errorf("pgcluster: Unix socket path in %s would be %d bytes, over the %d-byte limit; set TMPDIR to a shorter directory such as /tmp", c.sockDir, n, maxSocketPath)
	}
	if c.cred != nil {
		if err := c.checkReachable(); err != nil {
			return c, err
		}
	}
	if err := c.lockDown(); err != nil {
		return c, err
	}

	if err := c.initdb(ctx); err != nil {
		return c, err
	}

	conf := map[string]string{
		"max_connections": strconv.Itoa(orDefault(opts.MaxConnections, defaultMaxConnections)),
		"shared_buffers":  opts.SharedBuffers,
	}
	if conf["shared_buffers"] == "" {
		conf["shared_buffers"] = defaultSharedBuffers()
	}
	maps.Copy(conf, labSettings())
	maps.Copy(conf, statementStats(c.binDir, opts.WaitSampling))
	maps.Copy(conf, opts.Settings)
	c.info.DSM = conf["dynamic_shared_memory_type"]

	c.logFile, err = os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return c, fmt.Errorf("pgcluster: open server log: %w", err)
	}

	// A port picked free can be taken by someone else before postgres binds
	// it; retry a few times with a new one in that case.
	for attempt := 1; ; attempt++ {
		c.port = opts.Port
		if c.port == 0 && !c.tcp {
			c.port = defaultPort
		} else if c.port == 0 {
			if c.port, err = freePort(); err != nil {
				return c, err
			}
		}
		if err := c.writeConf(conf); err != nil {
			return c, err
		}
		err = c.startServer(ctx)
		if err == nil {
			return c, nil
		}
		if opts.Port != 0 || !c.tcp || attempt == 3 || !c.hasExited() || !c.bindFailed() {
			return c, err
		}
		c.cmd, c.exited, c.waitErr = nil, make(chan struct{}), nil
	}
}

// Restart stops the postmaster (fast shutdown, as Stop does) and starts it
// again on the same directory and port, so shared buffers start empty: a
// cold start for the next measurement (server-shutdown.html). Sessions
// are cut. It returns an error after Stop or Keep.
func (c *Cluster) Restart(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || c.kept || c.cmd == nil {
		return errors.New("pgcluster: restart: the cluster is stopped or handed over")
	}
	if err := c.stopServer(); err != nil {
		return fmt.Errorf("pgcluster: restart: %w", err)
	}
	c.cmd, c.exited, c.waitErr = nil, make(chan struct{}), nil
	if err := c.startServer(ctx); err != nil {
		return fmt.Errorf("pgcluster: restart: %w", err)
	}
	return nil
}

// RestartImmediate stops the postmaster with an immediate shutdown
// (SIGQUIT: sessions end with 57P01, no checkpoint, so the next start runs
// crash recovery; server-shutdown.html), waits for it to exit (SIGKILL
// after 5 s), runs whileDown when it is not nil (e.g. to keep the server
// down for a while, or to put a standby.signal in its data directory),
// then starts it again on the same directory and port and waits until it
// accepts connections (bounded by ctx and 60 s). It returns an error after
// Stop or Keep, or when the server does not come back.
func (c *Cluster) RestartImmediate(ctx context.Context, whileDown func()) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || c.kept || c.cmd == nil {
		return errors.New("pgcluster: restart: the cluster is stopped or handed over")
	}
	pid := c.cmd.Process.Pid
	children := childPIDs(pid)
	_ = syscall.Kill(pid, syscall.SIGQUIT)
	select {
	case <-c.exited: // the postmaster exits after its children
	case <-time.After(immediateShutdownTimeout):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-c.exited
		for _, p := range children { // session leaders: not in the group
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	if whileDown != nil {
		whileDown()
	}
	c.cmd, c.exited, c.waitErr = nil, make(chan struct{}), nil
	if err := c.startServer(ctx); err != nil {
		return fmt.Errorf("pgcluster: restart: %w", err)
	}
	return nil
}

// hasExited reports whether the postmaster has exited and been reaped.
func (c *Cluster) hasExited() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// orDefault returns v, or def when v is 0.
func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// labSettings are erplab's defaults on top of initdb's postgresql.conf.
func labSettings() map[string]string {
	return map[string]string{
		// Durability as in production: initdb -N only skipped fsync while
		// creating the cluster. Load-test numbers without fsync would lie.
		"fsync": "on",
		// ERP platforms (1C:Enterprise) create, fill and drop many temporary
		// tables per transaction; every one holds locks until commit, and
		// the shared lock table has max_locks_per_transaction *
		// (max_connections + max_prepared_transactions) slots
		// (runtime-config-locks.html). The default 64 gives "out of shared
		// memory" errors under such load; 1C's own guidance is 256.
		"max_locks_per_transaction": "256",
		// Keep the log to problems (this is the documented default, stated
		// so callers can see and override it): a load test must not be
		// slowed down or drowned by per-statement logging.
		"log_min_messages": "warning",
		// erplab diagnoses I/O: wait times in pg_stat_database,
		// pg_stat_statements and EXPLAIN (ANALYZE, BUFFERS) need it
		// (runtime-config-statistics.html); the cost is a clock read per
		// block I/O, cheap on the TSC clocks pg_test_timing checks.
		"track_io_timing": "on",
		// Parallel query uses dynamic shared memory; with "posix" it lives
		// in /dev/shm, which containers often cap at 64 MB, and queries then
		// fail with "could not resize shared memory segment". System V
		// segments are not subject to that cap. Not "mmap", although its
		// files (data/pg_dynshmem) would go with the directory: the kernel
		// writes those pages back to the data directory's disk
		// (runtime-config-resource.html: "not recommended for general
		// use"), so parallel hash joins would cost I/O a production
		// server does not pay. What a killed postmaster leaves in
		// /dev/shm is removed by Stop and the reaper instead (removeShm).
		"dynamic_shared_memory_type": dsmType(),
	}
}

// statementStats preloads pg_stat_statements with planning time tracked
// when the contrib library is installed next to the server binaries
// (<bindir>/../lib, Debian's layout and pg_config --pkglibdir of a
// source build), so that `erplab doctor` and EXPLAIN-level diagnosis of a
// throwaway server can name slow and OR-over-subquery statements
// (pgstatstatements.html). The extension itself is created per database
// by the caller (Cluster.CreateDatabase does it when preloaded).
// With waits, pg_wait_sampling is preloaded too when installed
// (Options.WaitSampling).
func statementStats(binDir string, waits bool) map[string]string {
	lib := filepath.Join(binDir, "..", "lib")
	if _, err := os.Stat(filepath.Join(lib, "pg_stat_statements.so")); err != nil {
		return nil
	}
	preload := "pg_stat_statements"
	if _, err := os.Stat(filepath.Join(lib, "pg_wait_sampling.so")); err == nil && waits {
		preload += ",pg_wait_sampling"
	}
	return map[string]string{
		"shared_preload_libraries":          preload,
		"pg_stat_statements.track_planning": "on",
	}
}

// dsmType picks dynamic_shared_memory_type: "posix" (PostgreSQL's Linux
// default) when /dev/shm has at least 1 GiB, else "sysv".
func dsmType() string {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err == nil && uint64(st.Bsize)*st.Blocks >= 1<<30 {
		return "posix"
	}
	return "sysv"
}

// defaultSharedBuffers returns 1/8 of MemTotal from /proc/meminfo, clamped
// to 128MB..8GB, formatted in MB, e.g. "3013MB". PostgreSQL suggests 25% of
// RAM for a dedicated server (runtime-config-resource.html); 1/8 leaves room
// for the load generator running on the same machine.
func defaultSharedBuffers() string {
	size := uint64(minSharedBuffers)
	if fs, err := hostfacts.New("", ""); err == nil {
		if mi, err := fs.Meminfo(); err == nil && mi.MemTotalBytes != nil {
			size = *mi.MemTotalBytes / 8
		}
	}
	size = min(max(size, minSharedBuffers), maxSharedBuffers)
	return fmt.Sprintf("%dMB", size>>20)
}

// validSettingName accepts GUC names: letters, digits, '_' and '.' (for
// extension settings such as pg_stat_statements.max), not starting with a
// digit or dot.
func validSettingName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_':
		case (r >= '0' && r <= '9') || r == '.':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// credentialFor looks up the OS user the server runs as when we are root.
func credentialFor(name string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: OS user %q not found (PostgreSQL cannot run as root, so erplab runs it as that user): create it (useradd --system %s) or pass another one with --os-user", name, name)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgcluster: OS user %q: %w", name, err)
	}
	if uid == 0 {
		return nil, fmt.Errorf("pgcluster: OS user %q has uid 0; PostgreSQL cannot run as root: pass an unprivileged user with --os-user", name)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if g, err := strconv.ParseUint(s, 10, 32); err == nil {
				cred.Groups = append(cred.Groups, uint32(g))
			}
		}
	}
	return cred, nil
}

// checkReachable verifies that the OS user can traverse every parent of the
// cluster directory (e.g. a TMPDIR under /root would not be).
func (c *Cluster) checkReachable() error {
	for d := filepath.Dir(c.dir); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		perm := st.Mode().Perm()
		ok = perm&0o001 != 0 ||
			(sys.Uid == c.cred.Uid && perm&0o100 != 0) ||
			((sys.Gid == c.cred.Gid || slices.Contains(c.cred.Groups, sys.Gid)) && perm&0o010 != 0)
		if !ok {
			return fmt.Errorf("pgcluster: OS user %q cannot enter %s (mode %v), a parent of the cluster directory; set TMPDIR to a directory it can reach, such as /tmp", c.osUser, d, perm)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// serverEnv is the environment of initdb and postgres: ours without PG*
// variables, which could redirect them (PGDATA, PGPORT...).
func serverEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PG") })
}

// sysProcAttr runs the child as the OS user (when root) in its own process
// group, so a terminal Ctrl-C reaches erplab, not the server.
func (c *Cluster) sysProcAttr(pdeath bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Credential: c.cred, Setpgid: true}
	if pdeath {
		a.Pdeathsig = syscall.SIGQUIT
	}
	return a
}

// initdb runs initdb -D <dir>/data -U postgres --auth-local=scram-sha-256
// (trust with Options.TrustSocket) --auth-host=scram-sha-256
// --pwfile=<dir>/initdb.pw --encoding=UTF8 --locale=C -N (app-initdb.html;
// -N skips fsync during initdb only, the server keeps fsync=on). The
// password file is the server user's, mode 0600, removed right after.
func (c *Cluster) initdb(ctx context.Context) error {
	pwFile := filepath.Join(c.dir, "initdb.pw")
	if err := c.writeFile(pwFile, c.password+"\n", true); err != nil {
		return err
	}
	defer os.Remove(pwFile)
	local := "scram-sha-256"
	if c.trustSocket {
		local = "trust"
	}
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, "initdb"),
		"-D", c.dataDir, "-U", "postgres", "--auth-local="+local, "--auth-host=scram-sha-256", "--pwfile="+pwFile,
		"--encoding=UTF8", "--locale=C", "-N")
	cmd.Dir = c.dir
	cmd.Env = serverEnv()
	cmd.SysProcAttr = c.sysProcAttr(false)
	// On ctx cancel kill the whole group: initdb runs postgres in bootstrap
	// and single-user mode as its children.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgcluster: initdb failed: %w: %s", err, lastLines(out, logTailLines))
	}
	return nil
}

// writeConf writes erplab.conf and includes it from postgresql.conf.
func (c *Cluster) writeConf(conf map[string]string) error {
	var b strings.Builder
	b.WriteString("# Written by erplab (internal/pgcluster); included from postgresql.conf.\n")
	listen := ""
	if c.tcp {
		listen = "127.0.0.1"
	}
	fmt.Fprintf(&b, "listen_addresses = %s\nport = %d\nunix_socket_directories = %s\nunix_socket_permissions = 0700\npassword_encryption = 'scram-sha-256'\n",
		quoteConf(listen), c.port, quoteConf(c.sockDir))
	for _, k := range slices.Sorted(maps.Keys(conf)) {
		fmt.Fprintf(&b, "%s = %s\n", k, quoteConf(conf[k]))
	}
	path := filepath.Join(c.dataDir, confFile)
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("pgcluster: write %s: %w", path, err)
	}
	main := filepath.Join(c.dataDir, "postgresql.conf")
	text, err := os.ReadFile(main)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	include := "include = '" + confFile + "'\n"
	if !bytes.Contains(text, []byte(include)) {
		f, err := os.OpenFile(main, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		_, err = f.WriteString("\n" + include)
		if err2 := f.Close(); err == nil {
			err = err2
		}
		if err != nil {
			return fmt.Errorf("pgcluster: append to %s: %w", main, err)
		}
	}
	if c.cred != nil {
		if err := os.Chown(path, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
	}
	return nil
}

// quoteConf quotes a postgresql.conf value: single quotes, embedded quotes
// doubled (config-setting.html, "Parameter Interaction via the
// Configuration File").
func quoteConf(v string) string {
	return "'" + strings.ReplaceAll(v, "'", "''") + "'"
}

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgcluster: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startServer starts the postmaster and waits until it accepts connections.
func (c *Cluster) startServer(ctx context.Context) error {
	cmd := exec.Command(filepath.Join(c.binDir, "postgres"), "-D", c.dataDir)
	cmd.Dir = c.dir
	cmd.Env = serverEnv()
	cmd.SysProcAttr = c.sysProcAttr(c.pdeath)
	if c.extraLog != nil {
		w := io.MultiWriter(c.logFile, c.extraLog)
		cmd.Stdout, cmd.Stderr = w, w
		// Server children inherit the pipe; do not hang forever on one
		// that outlives the postmaster.
		cmd.WaitDelay = 5 * time.Second
	} else {
		cmd.Stdout, cmd.Stderr = c.logFile, c.logFile
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgcluster: start postgres: %w", err)
	}
	c.cmd = cmd
	exited := c.exited
	go func() {
		c.waitErr = cmd.Wait()
		close(exited)
	}()
	if err := c.waitReady(ctx); err != nil {
		return err
	}
	return c.recordServer()
}

// waitReady polls with a pgx connection until the server answers, the
// postmaster exits, ctx ends or startTimeout passes.
func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var lastErr error
	for {
		attemptCtx, cancelAttempt := context.WithTimeout(ctx, 5*time.Second)
		conn, err := pgx.Connect(attemptCtx, c.DSN("postgres"))
		if err == nil {
			var v string
			err = conn.QueryRow(attemptCtx, "SHOW server_version").Scan(&v)
			_ = conn.Close(attemptCtx)
			cancelAttempt()
			if err != nil {
				return fmt.Errorf("pgcluster: read server_version: %w", err)
			}
			c.version, _, _ = strings.Cut(v, " ") // "15.18 (Debian 15.18-0+deb12u1)" -> "15.18"
			return nil
		}
		cancelAttempt()
		lastErr = err
		select {
		case <-c.exited:
			return fmt.Errorf("pgcluster: postgres exited during start-up (%v); server log: %s", c.waitErr, c.logTail())
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: postgres not accepting connections on port %d: %w (last attempt: %v); server log: %s",
				c.port, ctx.Err(), lastErr, c.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// bindFailed reports whether the server log says the port was taken.
func (c *Cluster) bindFailed() bool {
	b, _ := os.ReadFile(c.logPath)
	return bytes.Contains(b, []byte("Address already in use"))
}

// logTail returns the last log lines joined by " | ".
func (c *Cluster) logTail() string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", c.logPath, err)
	}
	return lastLines(b, logTailLines)
}

// lastLines returns the last n non-empty lines of b joined by " | ".
func lastLines(b []byte, n int) string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 0 {
		return "(empty)"
	}
	return strings.Join(lines, " | ")
}

// DSN returns a libpq key/value connection string for dbname over the Unix
// socket as superuser "postgres", e.g. "host=/tmp/erplab-pg-1a2b3c4d5e6f/sock
// port=5432 user=postgres dbname=erplab sslmode=disable password=(empty)
// passfile=/tmp/erplab-pg-1a2b3c4d5e6f/pgpass". The password is not in it:
// pgx and libpq (psql, pgbench) read it from the passfile, which only the
// invoking user can read, so the DSN may go into a child's argv. The
// empty password keeps a PGPASSWORD in erplab's environment (meant for
// the user's own server) from taking the passfile's place.
func (c *Cluster) DSN(dbname string) string {
	return c.DSNAt(c.sockDir, c.port, dbname)
}

// DSNAt is DSN for host:port (a TCP address such as a proxy in front of
// this cluster, or 127.0.0.1 and Port() with Options.TCP), with the same
// passfile.
func (c *Cluster) DSNAt(host string, port int, dbname string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable password='' passfile=%s",
		quoteKV(host), port, quoteKV(dbname), quoteKV(c.passFile))
}

// PassFile is the 0600 passfile of the invoking user ("*:*:*:*:<password>",
// libpq-pgpass.html), Dir()/pgpass; DSN names it.
func (c *Cluster) PassFile() string { return c.passFile }

// Password is the superuser's per-cluster password (32 hex digits). Hand it
// to children through PGPASSWORD in their environment or the passfile,
// never in an argv.
func (c *Cluster) Password() string { return c.password }

// TCP reports whether the server also listens on 127.0.0.1:Port().
func (c *Cluster) TCP() bool { return c.tcp }

// quoteKV quotes a libpq key/value when needed (libpq-connect.html,
// "Keyword/Value Connection Strings": single quotes, \' and \\ escaped).
func quoteKV(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n\r\v\f'\\") {
		return v
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// Dir is the cluster's private directory: data/ (PGDATA), sock/ (the Unix
// socket), server.log, pgpass and the erplab.owner marker.
func (c *Cluster) Dir() string { return c.dir }

// DataDir is the data directory (PGDATA), Dir()/data.
func (c *Cluster) DataDir() string { return c.dataDir }

// Port is the Unix socket's number, also the TCP port on 127.0.0.1 with
// Options.TCP.
func (c *Cluster) Port() int { return c.port }

// SocketDir is the directory of the Unix socket, Dir()/sock.
func (c *Cluster) SocketDir() string { return c.sockDir }

// BinDir is the directory of the server binaries used.
func (c *Cluster) BinDir() string { return c.binDir }

// Version is server_version without the distribution suffix, e.g. "15.18".
func (c *Cluster) Version() string { return c.version }

// LogPath is the server log file, Dir()/server.log.
func (c *Cluster) LogPath() string { return c.logPath }

// OSUser is the OS user the server runs as, "" when it runs as the current
// (non-root) user.
func (c *Cluster) OSUser() string { return c.osUser }

// PID is the postmaster's process id, 0 if it was never started. After Stop
// no process with this id (nor any of its children) is left.
func (c *Cluster) PID() int {
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// CreateDatabase runs CREATE DATABASE name (quoted as an identifier) as
// superuser over the Unix socket.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("pgcluster: create database %q: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("pgcluster: create database %q: %w", name, err)
	}
	return nil
}

// Stop shuts the server down and removes the whole temporary directory. It
// sends SIGINT (fast shutdown: abort sessions, checkpoint, exit;
// server-shutdown.html) and waits up to 30 s, then SIGQUIT (immediate
// shutdown) for 5 s, then SIGKILL to the postmaster and its children; a
// postmaster stopped by a signal (SIGSTOP: a frozen server) gets SIGKILL at
// once, with an error saying so. A postmaster that did not remove its
// shared memory itself (killed with SIGKILL by Stop or by anyone before)
// leaves its System V segment and dynamic shared memory (/dev/shm):
// Stop kills the server processes that outlived it and removes them with
// the reaper's proofs (see the package doc), and its error says so
// ("removed shared memory segment key 0x... id N"). When they cannot be
// removed yet (still attached), the record entry stays and the next
// erplab command's sweep retries. It is idempotent (later calls return
// the first result) and does nothing after Keep.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || c.kept {
		return c.stopErr
	}
	c.stopped = true
	var errs []error
	keepEntry := false
	if c.cmd != nil {
		err := c.stopServer()
		did, shmErr := c.leftBehind()
		switch {
		case len(did) > 0 && err != nil:
			err = fmt.Errorf("%w; %s", err, strings.Join(did, ", "))
		case len(did) > 0:
			err = fmt.Errorf("pgcluster: postgres (pid %d) exited without removing its shared memory (%v): %s", c.PID(), c.waitErr, strings.Join(did, ", "))
		}
		if shmErr != nil {
			keepEntry = true
			err = errors.Join(err, fmt.Errorf("pgcluster: shared memory of postgres (pid %d): %w (erplab's next command retries)", c.PID(), shmErr))
		}
		errs = append(errs, err)
	}
	if c.logFile != nil {
		_ = c.logFile.Close()
	}
	if c.dir != "" {
		if err := os.RemoveAll(c.dir); err != nil {
			errs = append(errs, fmt.Errorf("pgcluster: remove %s: %w", c.dir, err))
		} else if !keepEntry {
			errs = append(errs, c.forget())
		}
	}
	c.stopErr = errors.Join(errs...)
	return c.stopErr
}

// leftBehind removes what an exited postmaster that did not shut down
// itself left: server processes that outlived it (a postmaster killed
// outright leaves its backends to notice by themselves) and its shared
// memory (removeShm). It says what it removed; after a clean shutdown
// there is nothing to do.
func (c *Cluster) leftBehind() ([]string, error) {
	if c.info.ShmKey == 0 || !c.hasExited() {
		return nil, nil
	}
	// Not counted in what it says: after a kill by stopServer they may
	// be on their way out already. removeShm waits for them to detach.
	for _, pid := range serverProcs(c.info, c.dataDir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return removeShm(c.info)
}

func (c *Cluster) stopServer() error {
	pid := c.cmd.Process.Pid
	if c.hasExited() {
		return nil
	}
	if stopped(pid) {
		// A stopped (SIGSTOP, SIGTSTP) postmaster handles no signal but
		// SIGKILL until it is continued: waiting 30 + 5 s for it to shut
		// down would be waiting for nothing. The directory is removed
		// next, so there is nothing to shut down cleanly.
		children := childPIDs(pid)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		for _, p := range children {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		<-c.exited
		return fmt.Errorf("pgcluster: postgres (pid %d) was stopped (SIGSTOP): killed", pid)
	}
	_ = syscall.Kill(pid, syscall.SIGINT)
	select {
	case <-c.exited:
		return nil
	case <-time.After(fastShutdownTimeout):
	}
	children := childPIDs(pid)
	_ = syscall.Kill(pid, syscall.SIGQUIT)
	select {
	case <-c.exited:
	case <-time.After(immediateShutdownTimeout):
		children = append(children, childPIDs(pid)...)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-c.exited
	}
	// Server children are session leaders of their own (InitPostmasterChild
	// calls setsid), so the process group kill does not reach them.
	for _, p := range children {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	return fmt.Errorf("pgcluster: postgres (pid %d) did not stop within %s of SIGINT; killed", pid, fastShutdownTimeout)
}

// stopped reports whether process pid is stopped by a signal (state T
// in /proc/PID/stat; t is a tracing stop, which SIGKILL also ends).
func stopped(pid int) bool {
	st := procState(pid)
	return st == "T" || st == "t"
}

// procState is process pid's state letter from /proc/PID/stat (R, S, T,
// Z, ...), "" when it cannot be read (no such process).
func procState(pid int) string {
	st, err := hostfacts.LiveProcStat(pid)
	if err != nil {
		return ""
	}
	return st.State
}

// childPIDs lists the processes whose parent is pid.
func childPIDs(pid int) []int {
	fs, err := hostfacts.New("", "")
	if err != nil {
		return nil
	}
	out, _ := fs.ChildPIDs(pid)
	return out
}

// pidsWhere lists the live processes for which keep returns true.
func pidsWhere(keep func(procfs.Proc) bool) []int {
	fs, err := hostfacts.New("", "")
	if err != nil {
		return nil
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return nil
	}
	var out []int
	for _, p := range procs {
		if keep(p) {
			out = append(out, p.PID)
		}
	}
	return out
}

// Keep detaches the cluster: it stays running after this process exits and
// Stop becomes a no-op; it leaves erplab's record (no later run reaps it).
// It returns multi-line instructions for connecting to database dbname
// with psql (the DSN, and the password: this is the only place it is
// printed) and for stopping the server and removing its directory.
func (c *Cluster) Keep(dbname string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kept = true
	_ = c.forget()
	if c.logFile != nil {
		_ = c.logFile.Close() // the server holds its own descriptor
		c.logFile = nil
	}
	pgctl := filepath.Join(c.binDir, "pg_ctl") + " -D " + c.dataDir + " stop -m fast"
	if c.osUser != "" {
		pgctl = "runuser -u " + c.osUser + " -- " + pgctl
	}
	tcp := ""
	if c.tcp {
		tcp = fmt.Sprintf("     or:  psql -h 127.0.0.1 -p %d -U postgres %s\n", c.port, dbname)
	}
	return fmt.Sprintf(`PostgreSQL %s left running (pid %d), data directory %s, log %s
connect:  psql "%s"
%spassword: %s (user postgres, scram-sha-256; read from the passfile above, mode 0600)
stop and remove:  %s && rm -rf %s
`, c.version, c.PID(), c.dataDir, c.logPath, c.DSN(dbname), tcp, c.password, pgctl, c.dir)
}
