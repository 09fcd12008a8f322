// Package pgbouncer measures what a proxy adds to latency: pgbench -S
// (simple, extended, prepared protocol; several client counts) direct to
// PostgreSQL, through erplab's rewriting proxy (package proxy) and
// through PgBouncer in session mode, side by side in one run.
//
// Per-transaction latencies come from pgbench's transaction log (-l; the
// third field is the latency in µs, https://www.postgresql.org/docs/current/pgbench.html
// "Per-Transaction Logging") into an HdrHistogram; tps is pgbench's own
// "tps = ... (without initial connection time)".
package pgbouncer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/exitcode"
	"github.com/erplab/erplab/internal/proxy"
	"github.com/erplab/erplab/internal/versus/floor"
)

// ErrNoPgBouncer is returned by FindPgBouncer when the binary is missing.
var ErrNoPgBouncer = errors.New("pgbouncer not found on PATH (Debian: apt-get install pgbouncer)")

// Options configure Run.
type Options struct {
	// Upstream is the DSN of the database holding pgbench's tables.
	Upstream string
	// Duration of each pgbench run (-T, whole seconds, at least 1 s).
	Duration time.Duration
	// Clients lists pgbench -c values (each run uses -j equal to it).
	Clients []int
	// Modes lists pgbench -M values: simple, extended, prepared.
	Modes []string
	// PgBench is the pgbench binary ("" = from PATH).
	PgBench string
	// PgBouncer is the pgbouncer binary; "" skips the PgBouncer column.
	PgBouncer string
	// OSUser runs pgbouncer when erplab runs as root (it refuses root);
	// "" means "postgres".
	OSUser string
	// Rounds repeats every (mode, clients) cell; each round runs the
	// targets in a rotated order so that a load drift on a shared machine
	// does not always favour the same target. 0 means 1.
	Rounds int
	// Progress, if set, receives one line per pgbench run.
	Progress io.Writer
	// AA adds a second PgBouncer, target AATarget, configured as the
	// first: the per-round ratio of the two (an A/A comparison) shows
	// how far two identical proxies differ on this machine, the scale
	// against which the erplab / PgBouncer ratios are read. Needs
	// PgBouncer.
	AA bool
	// Floor adds target FloorTarget: package floor's byte relay, the
	// cheapest relay a Go process can run (an event loop outside Go's
	// scheduler, no protocol handling), started for each of its runs
	// only. Its ratio to PgBouncer is what PgBouncer's design written
	// in Go carries on this machine without a proxy's protocol work;
	// erplab's ratio to it is the cost of erplab's protocol handling and
	// of its goroutines in Go's scheduler.
	Floor bool
}

// AATarget is the Result.Target of the A/A PgBouncer (Options.AA).
const AATarget = "pgbouncer A/A"

// FloorTarget is the Result.Target of the floor relay (Options.Floor).
const FloorTarget = "floor relay"

// Result is one pgbench run.
type Result struct {
	Target   string // "direct", "erplab proxy", "pgbouncer"
	Mode     string
	Clients  int
	TPS      float64
	P50, P99 time.Duration
	Count    int64
	Round    int // 0-based
}

// FindPgBouncer returns the pgbouncer binary's path or ErrNoPgBouncer.
func FindPgBouncer() (string, error) {
	for _, p := range []string{"pgbouncer", "/usr/sbin/pgbouncer"} {
		if path, err := exec.LookPath(p); err == nil {
			return path, nil
		}
	}
	return "", ErrNoPgBouncer
}

// Run starts an in-process erplab proxy and (if opts.PgBouncer) a
// PgBouncer, both on 127.0.0.1, runs every (mode, clients) against every
// target, stops them, and returns the results in that order. Errors: the
// upstream has no pgbench tables, a server cannot start, pgbench fails.
func Run(ctx context.Context, opts Options) ([]Result, error) {
	if opts.Duration < time.Second {
		opts.Duration = time.Second
	}
	if opts.PgBench == "" {
		opts.PgBench = "pgbench"
	}
	if opts.AA && opts.PgBouncer == "" {
		return nil, errors.New("proxybench: an A/A comparison needs pgbouncer")
	}
	cfg, err := pgconn.ParseConfig(opts.Upstream)
	if err != nil {
		return nil, fmt.Errorf("proxybench: upstream: %w", err)
	}
	if err := checkTables(ctx, opts.Upstream); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "erplab-proxybench-")
	if err != nil {
		return nil, fmt.Errorf("proxybench: %w", err)
	}
	defer os.RemoveAll(dir)

	// erplab proxy
	p, err := proxy.New(proxy.Config{Upstream: opts.Upstream})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxybench: listen: %w", err)
	}
	pctx, stopProxy := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- p.Serve(pctx, ln) }()
	defer func() { stopProxy(); <-served }()

	viaPgBench := func(dsn string) func(context.Context, string, int) (Result, error) {
		return func(ctx context.Context, mode string, clients int) (Result, error) {
			return runPgBench(ctx, opts, dir, dsn, mode, clients)
		}
	}
	targets := []target{
		{name: "direct", run: viaPgBench(opts.Upstream)},
		{name: "erplab proxy", run: viaPgBench(redirect(opts.Upstream, ln.Addr().(*net.TCPAddr).Port))},
	}
	if opts.PgBouncer != "" {
		if os.Geteuid() == 0 {
			// pgbouncer runs as opts.OSUser in its own subdirectory.
			if err := os.Chmod(dir, 0o711); err != nil {
				return nil, fmt.Errorf("proxybench: %w", err)
			}
		}
		names := []string{"pgbouncer"}
		if opts.AA {
			names = append(names, AATarget)
		}
		for i, name := range names {
			sub := filepath.Join(dir, "pgbouncer"+strconv.Itoa(i))
			if err := os.Mkdir(sub, 0o700); err != nil {
				return nil, fmt.Errorf("proxybench: %w", err)
			}
			port, stop, err := startPgBouncer(ctx, opts, cfg, sub)
			if err != nil {
				return nil, err
			}
			defer stop()
			targets = append(targets, target{name: name, run: viaPgBench(redirect(opts.Upstream, port)), release: releaser(cfg.User, port)})
		}
	}
	if opts.Floor {
		network, address := pgconn.NetworkAddress(cfg.Host, cfg.Port)
		dial := func() (net.Conn, error) { return net.Dial(network, address) }
		targets = append(targets, target{name: FloorTarget, run: func(ctx context.Context, mode string, clients int) (Result, error) {
			return runFloor(ctx, opts, dir, dial, mode, clients)
		}})
	}
	rounds := max(opts.Rounds, 1)
	var out []Result
	for round := range rounds {
		order := append(append([]target(nil), targets[round%len(targets):]...), targets[:round%len(targets)]...)
		for _, mode := range opts.Modes {
			for _, c := range opts.Clients {
				for _, t := range order {
					r, err := t.run(ctx, mode, c)
					if err == nil && t.release != nil {
						err = t.release(ctx)
					}
					if ctx.Err() != nil {
						// The signal (main's Interruption) is the cause, not
						// pgbench's exit status; it exits Interrupted as every
						// command but pgbench, whatever the signal (the
						// Interruption's own 128+N code is pgbench's).
						return out, exitcode.With(exitcode.Interrupted, fmt.Errorf("proxybench: stopped during %s, -M %s -c %d: %v", t.name, mode, c, context.Cause(ctx)))
					}
					if err != nil {
						return out, fmt.Errorf("proxybench: %s, -M %s -c %d: %w", t.name, mode, c, err)
					}
					r.Target, r.Round = t.name, round
					out = append(out, r)
					if opts.Progress != nil {
						fmt.Fprintf(opts.Progress, "round %d/%d %-13s -M %-8s -c %d: %.0f tps, p50 %s, p99 %s\n", round+1, rounds, t.name, mode, c, r.TPS, r.P50, r.P99)
					}
				}
			}
		}
	}
	return out, nil
}

// target is one column of the bench: a name, how one pgbench run of a
// (mode, clients) cell goes through it, and what to do after each of
// its runs (nil: nothing).
type target struct {
	name    string
	run     func(ctx context.Context, mode string, clients int) (Result, error)
	release func(context.Context) error
}

// releaseWait bounds how long releaser waits for PgBouncer to close its
// server connections.
const releaseWait = 10 * time.Second

// releaser returns the after-run step of a PgBouncer listening on port:
// in session mode PgBouncer keeps its server connections open and idle
// after its clients leave (server_idle_timeout, 10 minutes by default),
// so the next target's clients would find the server's max_connections
// taken (FATAL 53300 "sorry, too many clients already") at 50 clients
// with four targets on a default server. The step sends RECONNECT on
// PgBouncer's admin console (the bench's ini makes the upstream user an
// admin_users entry), which closes every server connection once it is
// released, and waits until SHOW SERVERS lists none; an error when they
// are still there after releaseWait.
func releaser(user string, port int) func(context.Context) error {
	return func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, releaseWait)
		defer cancel()
		c, err := pgconn.Connect(cctx, redirect(fmt.Sprintf("user=%s dbname=pgbouncer", conninfo.QuoteValue(user)), port))
		if err != nil {
			return fmt.Errorf("pgbouncer admin console: %w", err)
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(cctx, "RECONNECT").ReadAll(); err != nil {
			return fmt.Errorf("pgbouncer RECONNECT: %w", err)
		}
		for {
			res, err := c.Exec(cctx, "SHOW SERVERS").ReadAll()
			if err != nil {
				return fmt.Errorf("pgbouncer SHOW SERVERS: %w", err)
			}
			n := 0
			if len(res) > 0 {
				n = len(res[0].Rows)
			}
			if n == 0 {
				return nil
			}
			select {
			case <-cctx.Done():
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("pgbouncer still holds %d server connections %s after RECONNECT", n, releaseWait)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// runFloor is runPgBench through a floor relay started for this run and
// stopped after it (the relay's loop holds a P of its own only while it
// runs).
func runFloor(ctx context.Context, opts Options, dir string, dial func() (net.Conn, error), mode string, clients int) (Result, error) {
	fr, err := floor.Start(dial)
	if err != nil {
		return Result{}, err
	}
	defer fr.Close()
	return runPgBench(ctx, opts, dir, redirect(opts.Upstream, fr.Addr().Port), mode, clients)
}

func checkTables(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("proxybench: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('pgbench_accounts') IS NOT NULL").Scan(&ok); err != nil {
		return fmt.Errorf("proxybench: %w", err)
	}
	if !ok {
		return errors.New("proxybench: no pgbench tables in the upstream database (create them with 'pgbench -i' or --init)")
	}
	return nil
}

// redirect returns dsn pointing at 127.0.0.1:port (TLS off, as a proxy
// client with sslmode=prefer would end up). The password stays in the
// string, for this process's own connections; runPgBench moves it to
// pgbench's environment.
func redirect(dsn string, port int) string {
	// Appending keys works only for key=value strings: a URL is first
	// turned into one (user, database and password kept).
	if cfg, err := pgconn.ParseConfig(dsn); err == nil {
		dsn = fmt.Sprintf("user=%s dbname=%s", conninfo.QuoteValue(cfg.User), conninfo.QuoteValue(cfg.Database))
		if cfg.Password != "" {
			dsn += " password=" + conninfo.QuoteValue(cfg.Password)
		}
	}
	return dsn + fmt.Sprintf(" host=127.0.0.1 port=%d sslmode=disable", port)
}

// bouncerQuote quotes a value of a pgbouncer.ini connection string
// (pgbouncer's loader.c: single quotes, a quote doubled).
func bouncerQuote(v string) string {
	return "'" + strings.ReplaceAll(v, "'", "''") + "'"
}

// pgbenchCmd is pgbench with args and dsn as its last argument, the
// password of dsn in its environment instead (conninfo.Split).
func pgbenchCmd(ctx context.Context, pgbench string, dsn string, args ...string) (*exec.Cmd, error) {
	argv, env, err := conninfo.Split(dsn)
	if err != nil {
		return nil, fmt.Errorf("proxybench: %w", err)
	}
	cmd := exec.CommandContext(ctx, pgbench, append(args, argv)...)
	cmd.Env = append(os.Environ(), env...)
	return cmd, nil
}

// Init runs pgbench -i -s scale on dsn.
func Init(ctx context.Context, pgbench, dsn string, scale int) error {
	if pgbench == "" {
		pgbench = "pgbench"
	}
	cmd, err := pgbenchCmd(ctx, pgbench, dsn, "-i", "-q", "-s", strconv.Itoa(scale))
	if err != nil {
		return err
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("proxybench: pgbench -i: %w: %s", err, lastLine(out))
	}
	return nil
}

func runPgBench(ctx context.Context, opts Options, dir, dsn, mode string, clients int) (Result, error) {
	r := Result{Mode: mode, Clients: clients}
	prefix := filepath.Join(dir, fmt.Sprintf("log-%s-%d-%d", mode, clients, time.Now().UnixNano()))
	secs := int(opts.Duration / time.Second)
	cmd, err := pgbenchCmd(ctx, opts.PgBench, dsn, "-S", "-n", "-M", mode, "-c", strconv.Itoa(clients), "-j", strconv.Itoa(clients),
		"-T", strconv.Itoa(secs), "-l", "--log-prefix="+prefix)
	if err != nil {
		return r, err
	}
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return r, fmt.Errorf("%w: %s", err, lastLine(out))
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "tps = ") {
			f := strings.Fields(line)
			if len(f) >= 3 {
				r.TPS, _ = strconv.ParseFloat(f[2], 64)
			}
		}
	}
	h := hdrhistogram.New(1, 60_000_000, 3) // µs
	files, _ := filepath.Glob(prefix + "*")
	for _, f := range files {
		if err := readLog(f, h); err != nil {
			return r, err
		}
	}
	if h.TotalCount() == 0 {
		return r, errors.New("pgbench logged no transactions")
	}
	r.Count = h.TotalCount()
	r.P50 = time.Duration(h.ValueAtQuantile(50)) * time.Microsecond
	r.P99 = time.Duration(h.ValueAtQuantile(99)) * time.Microsecond
	return r, nil
}

// readLog adds the latencies (third field, µs) of a pgbench log file.
func readLog(path string, h *hdrhistogram.Histogram) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("pgbench log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 3 {
			continue
		}
		us, err := strconv.ParseInt(fl[2], 10, 64)
		if err != nil {
			continue
		}
		_ = h.RecordValue(us)
	}
	return sc.Err()
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// startPgBouncer runs pgbouncer in session mode in front of the upstream
// and returns its port and a stop function.
//
// It reaches the upstream as the erplab proxy does (the upstream DSN's
// host: a unix socket directory or a TCP address) and stays a child in
// this process's session, not daemonized (-d): like the in-process erplab
// proxy and pgbench it then shares one scheduler autogroup
// (sched_autogroup_enabled; a session is a group). A daemonized PgBouncer
// in its own group measured twice the p50 latency at 8 clients on a busy
// 2-core host, which would flatter the erplab proxy.
func startPgBouncer(ctx context.Context, opts Options, cfg *pgconn.Config, dir string) (int, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, fmt.Errorf("proxybench: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	// The password goes into this 0600 file in a 0700 directory removed
	// at the end, never on pgbouncer's command line.
	db := fmt.Sprintf("host=%s port=%d user=%s", bouncerQuote(cfg.Host), cfg.Port, bouncerQuote(cfg.User))
	if cfg.Password != "" {
		db += " password=" + bouncerQuote(cfg.Password)
	}
	ini := fmt.Sprintf(`[databases]
* = %s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = session
max_client_conn = 200
default_pool_size = 50
admin_users = %s
logfile = %s
pidfile = %s
`, db, port, filepath.Join(dir, "users.txt"), cfg.User, filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"))
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(fmt.Sprintf("%q \"\"\n", cfg.User)), 0o600); err != nil {
		return 0, nil, fmt.Errorf("proxybench: %w", err)
	}
	iniPath := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(iniPath, []byte(ini), 0o600); err != nil {
		return 0, nil, fmt.Errorf("proxybench: %w", err)
	}
	cmd := exec.Command(opts.PgBouncer, iniPath)
	if os.Geteuid() == 0 { // pgbouncer refuses to run as root
		name := opts.OSUser
		if name == "" {
			name = "postgres"
		}
		u, err := user.Lookup(name)
		if err != nil {
			return 0, nil, fmt.Errorf("proxybench: pgbouncer cannot run as root and OS user %q: %w", name, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, p := range []string{dir, iniPath, filepath.Join(dir, "users.txt")} {
			_ = os.Chown(p, uid, gid)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, Pdeathsig: syscall.SIGTERM}
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return 0, nil, fmt.Errorf("proxybench: start pgbouncer: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	// Ready when it accepts a PostgreSQL session.
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			return 0, nil, fmt.Errorf("proxybench: pgbouncer exited: %s %s", lastLine([]byte(stderr.String())), lastLine(log))
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := pgx.Connect(cctx, redirect(fmt.Sprintf("user=%s dbname=%s", cfg.User, cfg.Database), port))
		cancel()
		if err == nil {
			_ = c.Close(ctx)
			// The check's server connection stays in the pool: close it.
			if err := releaser(cfg.User, port)(ctx); err != nil {
				stop()
				return 0, nil, fmt.Errorf("proxybench: %w", err)
			}
			return port, stop, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return 0, nil, fmt.Errorf("proxybench: pgbouncer not ready: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Table formats results side by side: one row per (mode, clients), per
// target tps, p50 and p99 (µs), then per proxy the latency it adds to
// direct at p50 and p99 (µs) and its tps as a fraction of direct. With
// several rounds, every figure is the median over the rounds, and the
// added latencies and tps ratios are medians of per-round differences
// and ratios (each round's runs are neighbours in time).
func Table(rs []Result) string {
	var order []cellKey
	byKey := map[cellKey]map[string][]Result{}
	var targets []string
	seenT := map[string]bool{}
	rounds := 0
	for _, r := range rs {
		k := cellKey{r.Mode, r.Clients}
		if byKey[k] == nil {
			byKey[k] = map[string][]Result{}
			order = append(order, k)
		}
		byKey[k][r.Target] = append(byKey[k][r.Target], r)
		if !seenT[r.Target] {
			seenT[r.Target] = true
			targets = append(targets, r.Target)
		}
		rounds = max(rounds, r.Round+1)
	}
	var b strings.Builder
	if rounds > 1 {
		fmt.Fprintf(&b, "medians of %d rounds\n", rounds)
	}
	fmt.Fprintf(&b, "%-9s %3s", "mode", "c")
	for _, t := range targets {
		fmt.Fprintf(&b, " | %-27s", t+": tps p50 p99")
	}
	b.WriteString(" | added p50/p99 vs direct, tps ratio\n")
	for _, k := range order {
		fmt.Fprintf(&b, "%-9s %3d", k.mode, k.clients)
		for _, t := range targets {
			runs := byKey[k][t]
			fmt.Fprintf(&b, " | %7.0f %8s %10s", median(runs, func(r Result) float64 { return r.TPS }),
				fmtDur(time.Duration(median(runs, func(r Result) float64 { return float64(r.P50) }))),
				fmtDur(time.Duration(median(runs, func(r Result) float64 { return float64(r.P99) }))))
		}
		direct := map[int]Result{}
		for _, r := range byKey[k]["direct"] {
			direct[r.Round] = r
		}
		var parts []string
		for _, t := range targets {
			if t == "direct" {
				continue
			}
			var paired []Result // this target's runs with a direct run in the same round
			for _, r := range byKey[k][t] {
				if _, ok := direct[r.Round]; ok {
					paired = append(paired, r)
				}
			}
			if len(paired) == 0 {
				continue
			}
			dp50 := median(paired, func(r Result) float64 { return float64(r.P50 - direct[r.Round].P50) })
			dp99 := median(paired, func(r Result) float64 { return float64(r.P99 - direct[r.Round].P99) })
			ratio := median(paired, func(r Result) float64 { return r.TPS / direct[r.Round].TPS })
			parts = append(parts, fmt.Sprintf("%s %+d/%+d µs %.2f", t, time.Duration(dp50).Microseconds(), time.Duration(dp99).Microseconds(), ratio))
		}
		b.WriteString(" | " + strings.Join(parts, ", ") + "\n")
	}
	if seenT["erplab proxy"] && (seenT["pgbouncer"] || seenT[FloorTarget]) {
		b.WriteString(headToHead(order, byKey))
	}
	return b.String()
}

// headToHead is the erplab proxy against PgBouncer per (mode, clients):
// the ratios erplab / PgBouncer of tps and of p99 in each round (the two
// runs of a round are neighbours in time, so a load drift cancels), their
// median and the distribution-free 95 % interval of the median
// (compare.MedianCI, sign-test order statistics: from 6 rounds on), and
// the range of the per-round ratios. With an A/A PgBouncer (Options.AA)
// the same ratios of the two PgBouncers follow on their own lines, and
// with the floor relay (Options.Floor) the floor's to PgBouncer and
// erplab's to the floor; a pair whose targets did not both run is left
// out.
func headToHead(order []cellKey, byKey map[cellKey]map[string][]Result) string {
	var b strings.Builder
	for _, pair := range [][2]string{{"erplab proxy", "pgbouncer"}, {AATarget, "pgbouncer"}, {FloorTarget, "pgbouncer"}, {"erplab proxy", FloorTarget}} {
		head := false
		for _, k := range order {
			bouncer := map[int]Result{}
			for _, r := range byKey[k][pair[1]] {
				bouncer[r.Round] = r
			}
			var tps, p99 []float64
			for _, r := range byKey[k][pair[0]] {
				if q, ok := bouncer[r.Round]; ok && q.TPS > 0 && q.P99 > 0 {
					tps = append(tps, r.TPS/q.TPS)
					p99 = append(p99, float64(r.P99)/float64(q.P99))
				}
			}
			if len(tps) < 2 {
				continue
			}
			if !head {
				head = true
				fmt.Fprintf(&b, "%s / %s per round: median [95 %% interval of the median] (min-max)\n", pair[0], pair[1])
			}
			fmt.Fprintf(&b, "%-9s %3d | tps %s | p99 %s\n", k.mode, k.clients, ratioSummary(tps), ratioSummary(p99))
			if pair[0] == AATarget {
				if med, _, _, _ := compare.MedianCI(tps, 0.95); math.Abs(med-1) > aaWarn {
					fmt.Fprintf(&b, "          warning: two identical PgBouncers differ by %+.0f %% in tps here: this cell's erplab / PgBouncer ratio is not to be read closer than that (more rounds, or a quieter machine)\n", 100*(med-1))
				}
			}
		}
	}
	return b.String()
}

// aaWarn is how far from 1.0 (a fraction) the A/A tps median of a cell
// may be before headToHead warns that the cell's comparison is no finer
// than the machine's noise.
const aaWarn = 0.05

// cellKey is one row of Table: a pgbench -M mode and -c.
type cellKey struct {
	mode    string
	clients int
}

// ratioSummary is "1.02 [0.95, 1.08] (0.91-1.12) over 10 rounds"; without
// enough rounds for an interval, "1.02 [too few rounds for an interval: 6
// needed] (0.91-1.12)".
func ratioSummary(x []float64) string {
	med, lo, hi, _ := compare.MedianCI(x, 0.95)
	mn, mx := slices.Min(x), slices.Max(x)
	if math.IsNaN(lo) {
		return fmt.Sprintf("%.2f [no interval: 6 rounds needed] (%.2f-%.2f) over %d rounds", med, mn, mx, len(x))
	}
	return fmt.Sprintf("%.2f [%.2f, %.2f] (%.2f-%.2f) over %d rounds", med, lo, hi, mn, mx, len(x))
}

// median returns the median of f over rs (the mean of the middle two
// for an even count); 0 for none.
func median(rs []Result, f func(Result) float64) float64 {
	if len(rs) == 0 {
		return 0
	}
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func fmtDur(d time.Duration) string { return fmt.Sprintf("%d µs", d.Microseconds()) }
