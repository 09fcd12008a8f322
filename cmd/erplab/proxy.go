package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/exitcode"
	"github.com/erplab/erplab/internal/metrics"
	"github.com/erplab/erplab/internal/proxy"
	"github.com/erplab/erplab/internal/rewrite"
	"github.com/erplab/erplab/internal/stress"
	"github.com/erplab/erplab/internal/versus/pgbouncer"
)

func newProxyCmd() *cobra.Command {
	var (
		listen, upstream, metricsAddr string
		upstreamFile                  string
		shadow, verbose               bool
		disable                       []string
		cacheSize, procs              int
		maxClients, maxParseTokens    int
		maxMessage                    string
		shutdownTimeout               time.Duration
		capturePath, captureMemory    string
	)
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Run a PostgreSQL wire proxy that rewrites OR-over-subquery filters on the fly",
		Long: `Listen for PostgreSQL clients and relay each session to the upstream server on its own
connection (session mode), rewriting only the SQL text of Query and Parse messages with
erplab's rules (` + strings.Join(rewrite.Rules(), ", ") + `; see 'erplab rewrite'). Clients authenticate with the
upstream server directly (trust, md5, SCRAM-SHA-256); TLS is refused (sslmode=prefer works).
The --upstream DSN's credentials open small side connections, per database and client user
(SET ROLE), where the rules consult the server with the session's search_path: indexes,
volatility, the types of compared columns and subquery outputs, the functions a subquery
evaluates (a temporary view, rolled back; each must be leakproof, or a LIKE whose $n pattern
is then checked at each Bind: the rewritten text is prepared beside the client's as
erplab_rw_N and runs only executions whose patterns cannot end with the escape character); a rewritten text is
prepared there (never executed) and used only if it describes like the original, else that
statement is never rewritten. If a session's server still rejects a rewritten statement at
the start of an idle batch, the original is sent instead. --shadow logs what would be
rewritten and sends the original. Counters go to /metrics (with --metrics) and to a summary on exit.
SIGUSR1 drops every cached decision (send it after DDL made around the proxy; see docs/design/proxy-guarantees.md).

--capture FILE writes every client session to FILE (a new file, gzip JSON Lines, format
erplab-capture, see docs/capture-format.md) for 'erplab replay': startup parameters (never
a password), each Query, Parse, Bind+Execute (binary values kept, with the parameter types
the server reported) and COPY FROM STDIN with its data, as the client sent it (also when
the proxy rewrote it), with its duration, rows, SQLSTATE and the transaction status after
it. It is readable after a kill up to its last second; the exit summary says what it holds.

Shutdown (PgBouncer's safe shutdown): the first SIGINT, SIGTERM or SIGHUP closes the listener
and lets every session finish its transaction: an idle session (no transaction, no request
outstanding) gets FATAL 57P01 at once, the others when their transaction ends. A second
signal, SIGQUIT, or --shutdown-timeout ends the rest at once (FATAL 57P01 to each, a running
statement cancelled, an open transaction rolled back). The summary is printed either way.`,
		Example: `  erplab proxy --listen 127.0.0.1:6433 --upstream 'host=/var/run/postgresql dbname=erp user=postgres'
  psql -h 127.0.0.1 -p 6433 -U app erp`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			up, envGiven, err := resolveUpstream(cmd, upstream, upstreamFile)
			if err != nil {
				return err
			}
			if up == "" && !envGiven {
				return withCode(exitUsage, errors.New("proxy needs an upstream server: pass --upstream, --upstream-file or ERPLAB_UPSTREAM (or set PG* variables)"))
			}
			dis := map[string]bool{}
			known := map[string]bool{}
			for _, r := range rewrite.Rules() {
				known[r] = true
			}
			for _, d := range disable {
				if !known[d] {
					return withCode(exitUsage, fmt.Errorf("--disable %q: unknown rule (rules: %s)", d, strings.Join(rewrite.Rules(), ", ")))
				}
				dis[d] = true
			}
			if procs < 0 {
				return withCode(exitUsage, fmt.Errorf("--procs: %d is negative (0 picks the default)", procs))
			}
			maxMsg, err := parseMessageSize(maxMessage)
			if err != nil {
				return withCode(exitUsage, fmt.Errorf("--max-message-size: %w", err))
			}
			nofile, ferr := proxy.RaiseFileLimit()
			if maxClients < 0 {
				return withCode(exitUsage, fmt.Errorf("--max-clients: %d is negative (0 picks the default)", maxClients))
			}
			if maxParseTokens < -1 {
				return withCode(exitUsage, fmt.Errorf("--max-parse-tokens: %d is below -1 (-1: no bound)", maxParseTokens))
			}
			if shutdownTimeout < 0 {
				return withCode(exitUsage, fmt.Errorf("--shutdown-timeout: %s is negative (0 ends the sessions at once)", shutdownTimeout))
			}
			if cacheSize < 0 {
				return withCode(exitUsage, fmt.Errorf("--cache: %d is negative (0 picks the default, 10000)", cacheSize))
			}
			capMem, err := parseCaptureMemory(captureMemory)
			if err != nil {
				return withCode(exitUsage, fmt.Errorf("--capture-memory: %w", err))
			}
			if err := checkListenAddr("--listen", listen); err != nil {
				return err
			}
			if maxClients == 0 {
				maxClients = proxy.DefaultMaxClients()
			}
			// --metrics is bound before anything starts: a malformed
			// address, a port out of range or one in use is a usage error.
			if err := checkListenAddr("--metrics", metricsAddr); err != nil {
				return err
			}
			if metricsAddr != "" && metricsAddr == listen && !strings.HasSuffix(listen, ":0") { // :0 picks a free port each
				return withCode(exitUsage, fmt.Errorf("--listen and --metrics are both %q: give the metrics another port", listen))
			}
			reg := prometheus.NewRegistry()
			var ms *metrics.Server
			if metricsAddr != "" {
				if ms, err = metrics.Serve(ctx, metricsAddr, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})); err != nil {
					return withCode(exitUsage, fmt.Errorf("--metrics %q: cannot listen there: %w", metricsAddr, listenCause(err)))
				}
				defer ms.Close()
			}
			// So is --listen (it was exit 1 after the side connection's
			// log-in): nothing is served before Serve below.
			var lc net.ListenConfig
			ln, err := lc.Listen(ctx, "tcp", listen)
			if err != nil {
				return withCode(exitUsage, fmt.Errorf("--listen %q: cannot listen there: %w", listen, listenCause(err)))
			}
			defer ln.Close()
			level := slog.LevelWarn
			if verbose || shadow {
				level = slog.LevelInfo
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			if ferr != nil {
				log.Warn("cannot raise the open files limit", "err", ferr)
			}
			if uint64(2*maxClients+128) > nofile {
				log.Warn("--max-clients exceeds what the open files limit allows (two descriptors per client)", "max_clients", maxClients, "nofile", nofile)
			}
			var capt *proxy.Capture
			if capturePath != "" {
				origin := map[string]string{"upstream": conninfo.Redact(up), "erplab": version}
				if up == "" {
					origin["upstream"] = "PG* environment"
				}
				if capt, err = proxy.CreateCapture(capturePath, proxy.CaptureOptions{Origin: origin, Memory: capMem, Logger: log}); err != nil {
					return withCode(exitUsage, fmt.Errorf("--capture %q: %w (a capture is never written over an existing file or through a link)", capturePath, errors.Unwrap(err)))
				}
			}
			p, err := proxy.New(proxy.Config{Upstream: up, Shadow: shadow, Disabled: dis, CacheSize: cacheSize, Logger: log,
				MaxClients: maxClients, MaxMessageSize: maxMsg, MaxParseTokens: maxParseTokens, Capture: capt})
			if err != nil {
				if capt != nil {
					_ = capt.Close()
					_ = os.Remove(capturePath) // holds a header only
				}
				return withCode(exitUsage, errors.New(conninfo.DescribeFlag(err, "--upstream")))
			}
			// The parser was warmed by New; the side connection of the
			// upstream's database logs in and runs one decision before the
			// first client can connect. A failure is logged by the proxy
			// (one line) and the proxy serves anyway.
			_ = p.Warm(ctx)
			reg.MustRegister(p.Collector())
			if ms != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "metrics on http://%s/metrics\n", ms.Addr())
			}
			// SIGUSR1: forget every cached decision (after DDL made
			// around the proxy, see docs/design/proxy-guarantees.md).
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGUSR1)
			defer signal.Stop(hup)
			go func() {
				for {
					select {
					case <-hup:
						p.Flush()
						log.Warn("SIGUSR1: cached decisions dropped")
					case <-ctx.Done():
						return
					}
				}
			}()
			mode := "rewriting"
			if shadow {
				mode = "shadow (logging would-be rewrites, sending originals)"
			}
			n := setProxyProcs(procs)
			stop := "Ctrl-C to stop after each session's transaction"
			if signal.Ignored(os.Interrupt) {
				// Inherited ignored (a background job of a script):
				// it stays ignored, so Ctrl-C or kill -INT would do
				// nothing (interruptContext).
				stop = "SIGINT is ignored (it was when the proxy started, e.g. as a script's background job): stop with SIGTERM after each session's transaction"
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "erplab proxy listening on %s, %s, %d Go scheduler thread(s) (--procs), at most %d clients (open files limit %d), messages up to %d bytes; %s\n",
				ln.Addr(), mode, n, maxClients, nofile, maxMsg, stop)
			err = serveUntilShutdown(ctx, cmd.ErrOrStderr(), p, ln, shutdownTimeout)
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", p.Stats())
			if capt != nil {
				cerr := capt.Close()
				fmt.Fprintf(cmd.OutOrStdout(), "%s\n", capt.Summary())
				if err == nil && cerr != nil {
					err = fmt.Errorf("proxy: --capture: %w", cerr)
				}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:6433", "address to accept PostgreSQL clients on (host:port)")
	cmd.Flags().StringVar(&upstream, "upstream", "", "upstream server (libpq key=value or URL); its credentials are used for the side connections only; default: "+upstreamEnv+", else PG* environment")
	addDSNFileFlag(cmd.Flags(), &upstreamFile, "upstream")
	cmd.Flags().BoolVar(&shadow, "shadow", false, "log what would be rewritten, send the original")
	cmd.Flags().StringSliceVar(&disable, "disable", nil, "rules to switch off (comma-separated)")
	cmd.Flags().IntVar(&cacheSize, "cache", 10000, "statement texts whose decision is cached")
	cmd.Flags().StringVar(&metricsAddr, "metrics", "", "serve Prometheus metrics at host:port/metrics")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log every fallback and catalog problem (info level)")
	cmd.Flags().IntVar(&procs, "procs", 0, procsHelp)
	cmd.Flags().IntVar(&maxClients, "max-clients", 0, "client connections served at once; more get PostgreSQL's 'too many clients' (53300); 0 = a quarter of the open files limit less 128, at most 5000")
	cmd.Flags().StringVar(&maxMessage, "max-message-size", "1G", "largest client message after authentication (bytes, or with K, M, G: powers of 1024), 1K to 1G; a client announcing a longer one gets FATAL 54000 and is disconnected")
	cmd.Flags().IntVar(&maxParseTokens, "max-parse-tokens", proxy.DefaultMaxParseTokens, "statements of more tokens are relayed unchanged without being parsed (counted in the summary, logged once); -1 = no bound")
	cmd.Flags().DurationVar(&shutdownTimeout, "shutdown-timeout", 30*time.Second, "after SIGINT/SIGTERM, how long sessions may finish their transaction before they are ended at once (0 = at once)")
	cmd.Flags().StringVar(&capturePath, "capture", "", "write every client session to this new file (erplab-capture: statements with their parameters, COPY data, durations, errors; for 'erplab replay')")
	cmd.Flags().StringVar(&captureMemory, "capture-memory", "256M", "with --capture: events held at once while an earlier statement still runs (bytes, or with K, M, G); past it the oldest running statement is written without its outcome")
	cmd.AddCommand(newProxyBenchCmd())
	return cmd
}

// parseCaptureMemory parses a --capture-memory value (stress.ParseSize),
// at least 1M.
func parseCaptureMemory(v string) (int64, error) {
	n, err := stress.ParseSize(v)
	if err != nil {
		return 0, err
	}
	if n < 1<<20 {
		return 0, fmt.Errorf("%q is below 1M", v)
	}
	return n, nil
}

// serveUntilShutdown serves ln with p until the first SIGINT, SIGTERM or
// SIGHUP (ctx is done: a safe shutdown, see proxy.Proxy.Shutdown, with
// one line on w saying how many sessions it waits for) or SIGQUIT (the
// sessions are ended at once). A second signal, SIGQUIT or timeout ends
// the sessions still there at once, and one line says how many. It
// returns Serve's error; after a second signal an error of exit code
// 130 (a second Ctrl-C exits 130 in every erplab command).
func serveUntilShutdown(ctx context.Context, w io.Writer, p *proxy.Proxy, ln net.Listener, timeout time.Duration) error {
	served := make(chan error, 1)
	go func() { served <- p.Serve(context.WithoutCancel(ctx), ln) }()
	again := make(chan os.Signal, 1) // the second signal, or SIGQUIT
	stop := onSecondSignal(ctx, func(s os.Signal) {
		select {
		case again <- s:
		default:
		}
	})
	defer stop()
	if !signal.Ignored(syscall.SIGQUIT) {
		signal.Notify(again, syscall.SIGQUIT)
		defer signal.Stop(again)
	}
	var first os.Signal
	select {
	case err := <-served: // the listener failed
		return err
	case <-ctx.Done():
		if i := exitcode.InterruptionOf(ctx); i != nil {
			first = i.Signal
		}
	case s := <-again:
		first = s
	}
	name := signalName(first)
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if first == syscall.SIGQUIT {
		cancel()
	}
	d := p.StartShutdown()
	if first != syscall.SIGQUIT {
		fmt.Fprintf(w, "erplab proxy: %s: shutting down: no new connections, %d idle session(s) closed, waiting for %d session(s) to finish their transaction (at most --shutdown-timeout %s; %s again or SIGQUIT ends them now)\n",
			name, d.Ended, d.Waiting+d.LoggingIn, timeout, name)
	}
	why := make(chan os.Signal, 1)
	go func() {
		select {
		case s := <-again:
			why <- s
			cancel()
		case <-sctx.Done():
			why <- nil
		}
	}()
	cut := p.Shutdown(sctx)
	cancel()
	forcedBy := <-why
	err := <-served
	if first == syscall.SIGQUIT {
		forcedBy = first
	}
	switch {
	case cut == 0:
		fmt.Fprintf(w, "erplab proxy: every session ended at a transaction boundary\n")
	case forcedBy == nil:
		fmt.Fprintf(w, "erplab proxy: --shutdown-timeout %s reached: ended %d session(s) without waiting for their transaction\n", timeout, cut)
	default:
		fmt.Fprintf(w, "erplab proxy: %s: ended %d session(s) without waiting for their transaction\n", signalName(forcedBy), cut)
	}
	if err == nil && forcedBy != nil && forcedBy != syscall.SIGQUIT && cut > 0 {
		return withCode(exitInterrupted, fmt.Errorf("proxy: second %s: %d session(s) ended without waiting: %w", signalName(forcedBy), cut, errSilent))
	}
	return err
}

// signalName is SIGINT for os.Interrupt and so on ("signal" when nil).
func signalName(s os.Signal) string {
	if sig, ok := s.(syscall.Signal); ok {
		if n := unix.SignalName(sig); n != "" {
			return n
		}
	}
	if s == nil {
		return "signal"
	}
	return s.String()
}

const procsHelp = "Go scheduler threads running the proxy (GOMAXPROCS); 0 = the GOMAXPROCS environment variable if set, else a quarter of the CPUs, at least 1"

// setProxyProcs sets GOMAXPROCS for a process running the proxy and
// returns the value in effect: procs when positive; otherwise the
// GOMAXPROCS environment variable when set; otherwise a quarter of the
// CPUs Go would use (runtime default, cgroup limits included), at least 1.
//
// Why fewer than all CPUs: a relay spends its time waiting for the
// network, and with idle Ps the Go scheduler wakes spare threads (futex)
// to look for work on readied goroutines. On a 2-core host shared with
// PostgreSQL and pgbench (pgbench -S -M prepared through the proxy,
// perf stat), proxy CPU per transaction was, with 8 clients, 20-29 µs
// with one P, 22-35 µs with two, 19-27 µs for PgBouncer's single thread;
// with 1 client 36-39 µs, 52-55 µs and 46-48 µs. Latency differences
// between one and two Ps stayed within the host's noise. The quarter
// keeps room to scale on large hosts; --procs overrides it.
func setProxyProcs(procs int) int {
	switch {
	case procs > 0:
		runtime.GOMAXPROCS(procs)
	case os.Getenv("GOMAXPROCS") == "":
		runtime.GOMAXPROCS(max(1, runtime.GOMAXPROCS(0)/4))
	}
	return runtime.GOMAXPROCS(0)
}

func newProxyBenchCmd() *cobra.Command {
	var (
		upstream, modes, osUser string
		upstreamFile            string
		clients                 []int
		duration                time.Duration
		initScale, rounds       int
		procs                   int
		noBouncer, aa, floorRel bool
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Compare pgbench -S direct, through erplab proxy and through PgBouncer (session mode)",
		Long: `Run pgbench -S for every protocol mode and client count against the upstream directly,
through an in-process erplab proxy and through PgBouncer in session mode (Debian package
pgbouncer; skipped with a note when absent or with --no-pgbouncer), all on this host, and
print tps, p50 and p99 (from pgbench's per-transaction log) side by side with the latency
each proxy adds at p50 and p99 and its tps as a fraction of direct. Clients reach both
proxies over TCP on 127.0.0.1 and both proxies reach the upstream the same way (its host:
a unix socket directory or a TCP address). --rounds repeats every cell with the targets in
a rotated order and reports medians. The upstream database needs pgbench's tables (--init
creates them). --aa adds a second PgBouncer (how far two equal proxies differ here); --floor adds a relay
that moves bytes and nothing else on one event loop outside Go's scheduler (PgBouncer's
design in Go, with none of a proxy's protocol work). Their ratio lines need --rounds 2 or
more. After each PgBouncer run its server connections are closed (RECONNECT on its admin
console), so the next target finds the server's connection slots free.`,
		Example: `  erplab proxy bench --upstream 'host=/var/run/postgresql dbname=bench user=postgres' --init 1 --duration 10s`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			up, envGiven, err := resolveUpstream(cmd, upstream, upstreamFile)
			if err != nil {
				return err
			}
			if up == "" && !envGiven {
				return withCode(exitUsage, errors.New("proxy bench needs a server: pass --upstream, --upstream-file or ERPLAB_UPSTREAM (or set PG* variables)"))
			}
			ms := strings.Split(modes, ",")
			for _, m := range ms {
				if m != "simple" && m != "extended" && m != "prepared" {
					return withCode(exitUsage, fmt.Errorf("--modes: %q is not simple, extended or prepared", m))
				}
			}
			for _, c := range clients {
				if c < 1 {
					return withCode(exitUsage, fmt.Errorf("--clients: %d is not a positive client count", c))
				}
			}
			if initScale < 0 {
				return withCode(exitUsage, fmt.Errorf("--init: %d is negative (0: the tables exist)", initScale))
			}
			if duration < time.Second || duration%time.Second != 0 {
				return withCode(exitUsage, fmt.Errorf("--duration: %s is not a whole number of seconds, at least 1s (pgbench -T)", duration))
			}
			if rounds < 1 {
				return withCode(exitUsage, fmt.Errorf("--rounds: %d is not a positive count", rounds))
			}
			if procs < 0 {
				return withCode(exitUsage, fmt.Errorf("--procs: %d is negative (0 picks the default)", procs))
			}
			if aa && noBouncer {
				return withCode(exitUsage, errors.New("--aa compares two PgBouncers: it cannot go with --no-pgbouncer"))
			}
			// Every flag is checked before --init writes to the server.
			if initScale > 0 {
				if err := pgbouncer.Init(ctx, "", up, initScale); err != nil {
					return err
				}
			}
			setProxyProcs(procs) // the in-process proxy runs as 'erplab proxy' would
			opts := pgbouncer.Options{Upstream: up, Duration: duration, Clients: clients, Modes: ms, OSUser: osUser,
				Rounds: rounds, Progress: cmd.ErrOrStderr(), AA: aa, Floor: floorRel}
			if !noBouncer {
				b, err := pgbouncer.FindPgBouncer()
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "note: %v; comparing direct and erplab proxy only\n", err)
				}
				opts.PgBouncer = b
			}
			rs, err := pgbouncer.Run(ctx, opts)
			if len(rs) > 0 {
				fmt.Fprint(cmd.OutOrStdout(), pgbouncer.Table(rs))
			}
			return err // stopped by a signal: pgbouncer.Run's error carries Interrupted
		},
	}
	cmd.Flags().StringVar(&upstream, "upstream", "", "server with pgbench's tables (libpq key=value or URL); default: "+upstreamEnv+", else PG* environment")
	addDSNFileFlag(cmd.Flags(), &upstreamFile, "upstream")
	cmd.Flags().StringVar(&modes, "modes", "simple,extended,prepared", "pgbench -M modes, comma-separated")
	cmd.Flags().IntSliceVar(&clients, "clients", []int{1, 8}, "pgbench -c values, comma-separated")
	cmd.Flags().DurationVar(&duration, "duration", 10*time.Second, "length of each pgbench run (whole seconds)")
	cmd.Flags().IntVar(&initScale, "init", 0, "first run 'pgbench -i -s N' on the upstream (0 = tables exist)")
	cmd.Flags().IntVar(&rounds, "rounds", 1, "repeat every cell, rotating the targets' order; report medians, from 2 rounds the per-round ratios (erplab / PgBouncer, A/A, floor), from 6 the 95 % interval of their median (at 6 it is the min-max range; use 10 to decide)")
	cmd.Flags().IntVar(&procs, "procs", 0, procsHelp+" (as for 'erplab proxy')")
	cmd.Flags().BoolVar(&noBouncer, "no-pgbouncer", false, "skip the PgBouncer column")
	cmd.Flags().BoolVar(&aa, "aa", false, "also run a second, identical PgBouncer and report its per-round ratios to the first (A/A): how far two equal proxies differ on this machine, the scale for reading erplab / PgBouncer")
	cmd.Flags().BoolVar(&floorRel, "floor", false, "also run a floor relay (bytes only, one epoll loop outside Go's scheduler, as PgBouncer's) and report, from 2 rounds, its per-round ratio to PgBouncer and erplab's to it: what PgBouncer's design written in Go carries here without a proxy's protocol work, and what erplab's protocol handling and its goroutines in Go's scheduler cost")
	cmd.Flags().StringVar(&osUser, "os-user", "postgres", "OS user to run pgbouncer as when erplab runs as root")
	return cmd
}

// parseMessageSize parses a --max-message-size value (stress.ParseSize:
// a byte count with K, M or G, powers of 1024), between 1K and 1G.
func parseMessageSize(v string) (int, error) {
	n, err := stress.ParseSize(v)
	if err != nil {
		return 0, err
	}
	if n < 1<<10 || n > 1<<30 {
		return 0, fmt.Errorf("%q is outside 1K to 1G", v)
	}
	return int(n), nil
}
