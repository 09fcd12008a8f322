package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/metrics"
	"github.com/erplab/erplab/internal/profile"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/top"
)

type topFlags struct {
	dsn, metricsAddr string
	dsnFile          string
	interval         time.Duration
	once, probes     bool
	count, queries   int
	view             string
	filter           top.Filter
	catalogDBs       string
	catalogEvery     time.Duration
	record, play     string
	at, from, to     string
}

func newTopCmd() *cobra.Command {
	var f topFlags
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Watch a PostgreSQL server live: sessions, wait events, CPU split, catalog growth",
		Long: `Watch a PostgreSQL server live, laid out like the field script that caught the
LWLock:LockManager storms of a 30,000-user ERP load test:

  header   tps, temp files/s, deadlocks, cache hit; the host's CPU split (user, system,
           iowait, ...), memory and transparent huge page counters when the server runs on
           this machine; catalog size and growth (pg_class, pg_attribute, pg_depend, pg_type,
           pg_index) of the connected database and, every --catalog-every, of the other
           databases (--catalog-databases); a storm line when active sessions jump while the
           CPU is not saturated or, for a server on this machine (its CPU count and its
           processes' CPU known, as in run and doctor), when active sessions double while the
           server's own CPU use does not follow and the added sessions wait on locks or I/O,
           or when at least 4 active sessions per CPU stay, 15 % of them waiting on locks,
           saturated CPU or not; with pg_wait_sampling created in the connected database, the
           wait table shows its profile (mean sessions, sampled every 10 ms in the server)
  tables   client sessions by state; active sessions by wait event with a trend;
           the longest-running active queries with duration and wait event

  sessions every client session of every database (--database, --application, --state filter
           it), parallel workers' wait events counted on their leader's row
  blocking root blockers and the chains of sessions waiting behind them, with the lock type
           each waits for (pg_blocking_pids, read only for sessions waiting on a lock)

Keys: + and - change the interval, p or space pauses (the screen only, when recording), s switches the sort order
(count / name), v switches the view, q quits. In the sessions view: up/down select a
session, enter shows its full query text, c cancels its query (pg_cancel_backend), T
terminates it (pg_terminate_backend); both ask for y to confirm. --once prints one plain-text snapshot and exits; --count N
prints N snapshots (for scripts and for terminals without a TTY).

History: --record FILE writes every sample (the header figures, sessions by state, the
waits, the longest queries, every client session with its wait, blocker and query text) to a
new file, one compressed frame per sample pushed to the file as it is taken, so a killed top
loses at most the sample being written; without a terminal and without --count, top records
until interrupted and prints nothing (about 1.7 KB a sample with 100 sessions, 6 MB an
hour at 1 s). --play FILE shows the same screens from the file, without a server: on a
terminal with time controls (space pauses, left/right step one sample, [ and ] jump a minute,
home/end, x switches the speed x1/x10, v and s as live, enter shows a session's recorded
query); --at WHEN prints the screen at WHEN (41m since the first sample, or a clock time
12:03:05), --from/--to the screens between, --count N at most N. --play also reads a run's
results (the observations of erplab run), a killed run's stream (.jsonl) too: the overview's
figures of every sample, without the longest queries or the session list. A file cut short plays up to its last whole sample
after a one-line note.

The server comes from --dsn or the PG* environment; top does not start an embedded
server. The role needs only pg_monitor (without it a note line names the GRANT, other users'
sessions count as "other" and their waits and queries are hidden; cancel and terminate need pg_signal_backend or the same role). Sampling is one round
trip per interval on one connection, in autocommit, and never reads pg_locks; the sessions and
blocking views use a second connection.`,
		Example: `  erplab top --dsn 'host=db1 dbname=erp user=monitor'
  PGHOST=/var/run/postgresql erplab top --interval 500ms
  erplab top --dsn 'host=db1 user=monitor' --count 10 --interval 2s > top.log
  erplab top --metrics-addr 127.0.0.1:9187
  nohup erplab top --dsn 'host=db1 user=monitor' --record soak.top < /dev/null > /dev/null 2>&1 &
  erplab top --play soak.top --at 41m --view blocking
  erplab top --play erplab-results/20261204-093000-erp.json --from 40m --to 42m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runTop(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dsn, "dsn", "", "server to watch (libpq key=value or URL); default: PG* environment")
	addDSNFileFlag(fl, &f.dsnFile, "dsn")
	fl.DurationVar(&f.interval, "interval", sampler.DefaultInterval, "time between samples (at least 100ms)")
	fl.BoolVar(&f.once, "once", false, "print one plain-text snapshot and exit")
	fl.IntVar(&f.count, "count", 0, "print this many plain-text snapshots, one per interval, and exit")
	fl.IntVar(&f.queries, "queries", top.DefaultQueries, "rows of the longest-running queries table")
	fl.BoolVar(&f.probes, "probes", true, "show the server's shared-invalidation events per second (catalog cache resets, catch-ups, queue clean-ups, messages inserted and read) counted with perf uprobes on its binary, removed on exit (root and a local server; otherwise one line says why; --probes=false to skip)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://HOST:PORT/metrics while top runs")
	fl.StringVar(&f.view, "view", "overview", "screen to show (start on, interactively): overview, sessions (every database's sessions, parallel workers' waits on the leader's row) or blocking (root blockers and chains from pg_blocking_pids)")
	fl.StringVar(&f.catalogDBs, "catalog-databases", "all", "other databases whose catalog size and churn the header shows: all (every database the role may connect to), none, or a comma-separated list; each is read on a connection of its own, opened and closed per reading")
	fl.DurationVar(&f.catalogEvery, "catalog-every", sampler.DefaultCatalogsEvery, "how often --catalog-databases are read (one connection start-up per database per reading)")
	fl.StringVar(&f.filter.Database, "database", "", "sessions and blocking views: only this database")
	fl.StringVar(&f.filter.Application, "application", "", "sessions and blocking views: only this application_name")
	fl.StringVar(&f.filter.State, "state", "", "sessions and blocking views: only this state (active, idle, 'idle in transaction', ...)")
	fl.StringVar(&f.record, "record", "", "record every sample (header figures, sessions by state, waits, longest queries, every client session) to this new file, a compact stream that a kill loses at most the last sample of; play it with --play")
	fl.StringVar(&f.play, "play", "", "play a recording of --record, or the observations of a run's results, instead of watching a server")
	fl.StringVar(&f.at, "at", "", "with --play: print the screen at this time, since the first sample (41m, 1h2m3s) or of the day (12:03:05)")
	fl.StringVar(&f.from, "from", "", "with --play: start at this time (as --at)")
	fl.StringVar(&f.to, "to", "", "with --play: print the screens up to this time (as --at)")
	return cmd
}

// parseCatalogDatabases reads --catalog-databases ("all", "none" or a
// comma-separated list of names) and --catalog-every (> 0).
func parseCatalogDatabases(v string, every time.Duration) (sampler.OtherCatalogs, error) {
	if every <= 0 {
		return sampler.OtherCatalogs{}, fmt.Errorf("--catalog-every must be > 0, got %s", every)
	}
	o := sampler.OtherCatalogs{Every: every}
	switch strings.TrimSpace(v) {
	case "all":
		o.All = true
	case "none", "":
	default:
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				o.Names = append(o.Names, n)
			}
		}
	}
	return o, nil
}

func runTop(cmd *cobra.Command, f topFlags) error {
	if f.play != "" {
		return runTopPlay(cmd, f)
	}
	for _, n := range []string{"at", "from", "to"} {
		if cmd.Flags().Changed(n) {
			return withCode(exitUsage, fmt.Errorf("--%s is for --play", n))
		}
	}
	if err := checkListenAddr("--metrics-addr", f.metricsAddr); err != nil {
		return err
	}
	switch {
	case f.interval < sampler.MinInterval:
		return withCode(exitUsage, fmt.Errorf("--interval must be at least %s, got %s", sampler.MinInterval, f.interval))
	case f.count < 0:
		return withCode(exitUsage, fmt.Errorf("--count must be >= 0, got %d", f.count))
	case f.once && f.count > 0:
		return withCode(exitUsage, errors.New("--once and --count exclude each other (--once is --count 1)"))
	case f.queries < 0:
		return withCode(exitUsage, fmt.Errorf("--queries must be >= 0, got %d", f.queries))
	}
	view, err := top.ParseView(f.view)
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("--view: %w", err))
	}
	if f.once {
		f.count = 1
	}
	dsn, given, err := resolveDSN(cmd, f.dsn, f.dsnFile)
	if err != nil {
		return err
	}
	if !given {
		return withCode(exitUsage, errors.New("top needs a server: give --dsn or set PGHOST/PGDATABASE/PGUSER (top does not start an embedded server)"))
	}
	interactive := f.count == 0
	// Recording without a terminal and without --count: record until
	// interrupted, printing nothing.
	headless := interactive && f.record != "" && (!isTerminal(os.Stdin) || !isTerminal(os.Stdout))
	if headless {
		interactive, f.count = false, math.MaxInt
	}
	if interactive && (!isTerminal(os.Stdin) || !isTerminal(os.Stdout)) {
		return withCode(exitUsage, errors.New("not a terminal: use --once or --count N for plain-text output (or --record FILE alone to record until interrupted)"))
	}
	cats, err := parseCatalogDatabases(f.catalogDBs, f.catalogEvery)
	if err != nil {
		return withCode(exitUsage, err)
	}
	ctx := cmd.Context()
	s, err := sampler.Connect(ctx, dsn, sampler.Options{Queries: max(f.queries, 0), Catalogs: cats})
	if err != nil {
		return err
	}
	defer s.Close(context.Background())

	// A second session, opened when first needed, serves the sessions
	// and blocking views, full query text and cancel/terminate (the
	// sampler's stays one round trip per interval).
	dial := func(ctx context.Context) (*pgx.Conn, error) { return conninfo.Connect(ctx, dsn, "erplab top", nil) }
	opts := top.Options{Interval: f.interval, Dial: dial, View: view, Filter: f.filter}
	if f.probes {
		if rec := topProbes(ctx, cmd.ErrOrStderr(), dsn); rec != nil {
			defer rec.Abort()
			opts.Invalidation = invalRates(rec)
		}
	}
	if f.metricsAddr != "" {
		exp, err := metrics.New(metrics.Options{})
		if err != nil {
			return err
		}
		srv, err := metrics.Serve(ctx, f.metricsAddr, exp.Handler())
		if err != nil {
			return withCode(exitUsage, err)
		}
		defer srv.Close()
		fmt.Fprintf(cmd.ErrOrStderr(), "serving metrics at http://%s/metrics\n", srv.Addr())
		opts.OnSample, opts.OnStorm = exp.ObserveSample, exp.ObserveStorm
	}
	if f.record != "" {
		rec, err := createRecord(f.record, s.Info())
		if err != nil {
			return err
		}
		defer closeRecord(cmd, rec)
		opts.Record = rec
	}
	if interactive {
		return top.Run(ctx, s, opts, os.Stdin, os.Stdout)
	}
	w := cmd.OutOrStdout()
	if headless {
		w = io.Discard
	}
	if err := top.Print(ctx, w, s, opts, f.count); err != nil {
		if headless && ctx.Err() != nil {
			return nil // the recording's end
		}
		if ctx.Err() != nil {
			return withCode(exitInterrupted, errors.New("interrupted"))
		}
		return fmt.Errorf("top: %w", err)
	}
	return nil
}

// isTerminal reports whether f is a terminal (TCGETS succeeds).
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// createRecord creates top --record's file with the header's host
// figures (the server's machine when it is this one).
func createRecord(path string, info sampler.Info) (*top.Recorder, error) {
	h := top.Header{Erplab: version}
	if info.HostSampled {
		if fs, err := hostfacts.New("", ""); err == nil {
			if host, err := fs.Host(); err == nil {
				h.HostName, h.HostCPUs = host.Hostname, host.CPUs
			}
		}
	}
	return top.Create(path, h)
}

// closeRecord closes the recording and says what it holds.
func closeRecord(cmd *cobra.Command, rec *top.Recorder) {
	if err := rec.Close(); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "top: %v\n", err)
		return
	}
	size := ""
	if fi, err := os.Stat(rec.Path()); err == nil {
		size = fmt.Sprintf(", %d bytes", fi.Size())
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "recorded %d samples to %s%s\n", rec.Frames(), rec.Path(), size)
}

// runTopPlay is top --play: a recording, or a run's results.
func runTopPlay(cmd *cobra.Command, f topFlags) error {
	for _, n := range []string{"dsn", "dsn-file", "record", "metrics-addr", "interval", "queries", "catalog-databases", "catalog-every"} {
		if cmd.Flags().Changed(n) {
			return withCode(exitUsage, fmt.Errorf("--%s is for watching a server, not with --play", n))
		}
	}
	switch {
	case f.count < 0:
		return withCode(exitUsage, fmt.Errorf("--count must be >= 0, got %d", f.count))
	case f.once && f.count > 0:
		return withCode(exitUsage, errors.New("--once and --count exclude each other (--once is --count 1)"))
	case f.at != "" && (f.from != "" || f.to != ""):
		return withCode(exitUsage, errors.New("--at excludes --from and --to"))
	}
	view, err := top.ParseView(f.view)
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("--view: %w", err))
	}
	r, err := openPlay(f.play)
	if err != nil {
		return err
	}
	defer r.Close()
	if view != top.ViewOverview && !r.Header.Sessions {
		return withCode(exitUsage, fmt.Errorf("--view %s: %s holds no session list (a run's results keep the overview's figures only)", view, f.play))
	}
	if r.Note != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: %s\n", r.Note)
	}
	o := top.PlayOptions{View: view, Filter: f.filter, Count: f.count}
	if f.once {
		o.Count = 1
	}
	for _, w := range []struct {
		flag, v string
		dst     *int
		before  bool
	}{{"at", f.at, &o.From, true}, {"from", f.from, &o.From, false}, {"to", f.to, &o.To, true}} {
		if w.v == "" {
			continue
		}
		if *w.dst, err = r.Find(w.v, w.before); err != nil {
			return withCode(exitUsage, fmt.Errorf("--%s: %w", w.flag, err))
		}
	}
	if f.to != "" {
		o.To++ // the frame --to names is printed
		if o.From >= o.To {
			return withCode(exitUsage, fmt.Errorf("--from is after --to (%s, %s)", f.from, f.to))
		}
	}
	if f.at != "" && o.Count == 0 {
		o.Count = 1
	}
	interactive := o.Count == 0 && f.at == "" && f.to == "" && isTerminal(os.Stdin) && isTerminal(os.Stdout)
	if interactive {
		return top.RunPlay(cmd.Context(), r, o, os.Stdin, os.Stdout)
	}
	if err := top.PrintPlay(cmd.OutOrStdout(), r, o); err != nil {
		return fmt.Errorf("top: %w", err)
	}
	return nil
}

// openPlay opens a top recording, or else a run's results with
// observations.
func openPlay(path string) (*top.Recording, error) {
	r, err := top.Open(path)
	if !errors.Is(err, top.ErrNotRecord) {
		return r, err
	}
	doc, rerr := results.Read(path)
	if rerr != nil {
		return nil, fmt.Errorf("%w; nor a run's results: %w", err, rerr)
	}
	obs, err := sampler.ObservationsOf(doc)
	switch {
	case errors.Is(err, sampler.ErrNoObservations):
		return nil, withCode(exitUsage, fmt.Errorf("%s: %w (run with --observe, the default, to keep them)", path, err))
	case err != nil:
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return top.FromObservations(path, doc.StartedAt, obs)
}

// topProbes adds the shared-invalidation uprobes to the server at dsn
// and starts counting (top --probes); when they cannot run it says why
// in one line on stderr and returns nil.
func topProbes(ctx context.Context, stderr io.Writer, dsn string) *profile.InvalRecording {
	rec, err := profile.BeginInval(ctx, dsn, profile.InvalOptions{})
	if err != nil {
		fmt.Fprintln(stderr, profile.UnavailableLine(err.Error()))
		return nil
	}
	return rec
}

// invalRates returns top's Invalidation line: the events per second
// since the previous call (since the start at the first).
func invalRates(rec *profile.InvalRecording) func() string {
	var prev profile.InvalCounts
	var prevT float64
	return func() string {
		c, t := rec.Snapshot()
		line := profile.LiveLine(c.Minus(prev), t-prevT, rec.Counted())
		prev, prevT = c, t
		return line
	}
}
