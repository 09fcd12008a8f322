package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/exitcode"
	"github.com/erplab/erplab/internal/loadtest"
	wpgbench "github.com/erplab/erplab/internal/pgbench"
	"github.com/erplab/erplab/internal/pgbench/script"
	"github.com/erplab/erplab/internal/pgbench/tables"
	"github.com/erplab/erplab/internal/results"
)

// Streams are the command's standard streams.
type Streams struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Program says what runs: erplab's version (for -V and the header line)
// and where the results document goes: ERPLAB_PGBENCH_OUT's value ("" =
// ./erplab-results/<time>-pgbench.json, "none", a directory or a file; see
// placeOf). Results that cannot be written never fail the run: one
// warning line on stderr, and the exit status is pgbench's.
type Program struct {
	Version string
	Out     string
}

// Exit statuses, as pgbench's.
const (
	exitOK      = 0
	exitUsage   = 1 // option, script, connection or set-up error
	exitAborted = 2 // a client aborted during the run
	// exitInterrupted: a run (or -i) cancelled without a signal named
	// (exitcode.Interruption); with one, 128 plus its number.
	exitInterrupted = int(exitcode.Interrupted)
)

// Main runs a pgbench command line (args without the program name) and
// returns pgbench's exit status: 0; 1 for an option, script, connection or
// set-up error; 2 when a client aborted during the run. pgbench's output
// goes where pgbench writes it (report to stdout; progress, vacuum and
// errors to stderr); erplab's additions follow the report on stdout,
// each line starting with "erplab:".
func Main(ctx context.Context, args []string, st Streams, env Env, prog Program) int {
	read := func(path string) ([]byte, error) {
		if path == "-" {
			return io.ReadAll(st.Stdin)
		}
		return os.ReadFile(path)
	}
	cfg, err := Parse(args, env, read)
	if err != nil {
		printError(st.Stderr, err)
		return exitUsage
	}
	switch cfg.Action {
	case Help:
		fmt.Fprint(st.Stdout, Usage)
		return exitOK
	case Version:
		fmt.Fprintf(st.Stdout, "pgbench (PostgreSQL) 17 (erplab %s)\n", prog.Version)
		return exitOK
	case ListBuiltins, ShowScript:
		fmt.Fprint(st.Stderr, cfg.ShowScript)
		return exitOK
	}
	for _, l := range cfg.Info {
		fmt.Fprintf(st.Stderr, "pgbench: %s\n", l)
	}
	r := &runner{cfg: cfg, st: st, env: env, prog: prog, args: args}
	if cfg.Action == Init {
		return r.init(ctx)
	}
	return r.bench(ctx)
}

// printError prints an *Error's lines, or any other error as pgbench's
// "pgbench: error: " line.
func printError(w io.Writer, err error) {
	var e *Error
	if errors.As(err, &e) {
		for _, l := range e.Lines {
			fmt.Fprintln(w, l)
		}
		return
	}
	fmt.Fprintf(w, "pgbench: error: %v\n", err)
}

type runner struct {
	cfg  *Config
	st   Streams
	env  Env
	prog Program
	args []string
}

// dsn is the connection string of -h/-p/-U/DBNAME as pgbench's doConnect
// hands them to libpq (PQconnectdbParams with expand_dbname): a DBNAME
// (operand or PGDATABASE) that is a connection string or URI is
// expanded and its parameters override -h/-p/-U. What is not given comes
// from libpq's environment and defaults (pgx reads PGHOST, PGPORT,
// PGUSER, PGDATABASE, PGPASSWORD, PGSERVICE, PGAPPNAME...); the password
// file is read by libpq's rules (conninfo.WithPassfile).
func (r *runner) dsn() string {
	params := []conninfo.Param{{Key: "host", Value: r.cfg.Host}, {Key: "port", Value: r.cfg.Port}, {Key: "user", Value: r.cfg.User}}
	if r.env("PGAPPNAME") == "" {
		// libpq's fallback_application_name: the DBNAME string may set it.
		params = append(params, conninfo.Param{Key: "application_name", Value: "pgbench"})
	}
	return conninfo.WithPassfile(conninfo.WithDBName(params, r.cfg.DBName))
}

// connect opens the set-up connection, printing pgbench's messages when it
// fails (doConnect).
func (r *runner) connect(ctx context.Context, what string) (*pgx.Conn, time.Duration, bool) {
	cc, err := pgx.ParseConfig(r.dsn())
	if err != nil {
		fmt.Fprintf(r.st.Stderr, "pgbench: error: %v\n", err)
		return nil, 0, false
	}
	cc.OnNotice = r.notice
	t0 := time.Now()
	conn, err := pgx.ConnectConfig(ctx, cc)
	d := time.Since(t0)
	if err != nil {
		fmt.Fprintf(r.st.Stderr, "pgbench: error: %s\n", wpgbench.ConnectMessage(err))
		fmt.Fprintf(r.st.Stderr, "pgbench: error: could not create connection for %s\n", what)
		return nil, 0, false
	}
	return conn, d, true
}

// notice prints a server notice as libpq's default notice processor.
func (r *runner) notice(_ *pgconn.PgConn, n *pgconn.Notice) {
	e := pgconn.PgError(*n)
	fmt.Fprintln(r.st.Stderr, script.LibpqMessage(&e))
}

// init is pgbench -i.
func (r *runner) init(ctx context.Context) int {
	c := r.cfg
	conn, _, ok := r.connect(ctx, "initialization")
	if !ok {
		return exitUsage
	}
	conn.Close(ctx)
	o := tables.Options{Scale: c.Scale, Partitions: c.Partitions, PartitionMethod: c.PartitionMethod,
		FillFactor: c.FillFactor, Unlogged: c.Unlogged, ForeignKeys: c.ForeignKeys, NoVacuum: c.NoVacuum,
		Steps: c.InitSteps, Tablespace: c.Tablespace, IndexTablespace: c.IndexTablespace, Force: true}
	var last time.Time
	step := "connecting"
	o.Progress = func(format string, a ...any) {
		line := fmt.Sprintf(format, a...)
		if strings.Contains(line, " tuples (") {
			if c.Quiet && !last.IsZero() && time.Since(last) < 5*time.Second && !strings.Contains(line, "(100%)") {
				return
			}
			last = time.Now()
		}
		if rest, ok := strings.CutPrefix(line, "generating data ("); ok {
			side, _, _ := strings.Cut(rest, ",")
			line = "generating data (" + strings.TrimSuffix(side, ")...") + ")..."
		}
		if !strings.Contains(line, " tuples (") && strings.HasSuffix(line, "...") {
			step = strings.TrimSuffix(line, "...") // "creating tables", "vacuuming", ...
		}
		fmt.Fprintln(r.st.Stderr, line)
	}
	pool, err := conninfo.OpenPool(ctx, r.dsn(), runtime.GOMAXPROCS(0)+1, noticePool(r.notice))
	if err == nil {
		defer pool.Close()
		_, err = tables.Init(ctx, pool, o)
	}
	switch {
	case err != nil && ctx.Err() != nil:
		// The error is the interruption's consequence (a cancelled
		// query, a closed socket): say what was interrupted.
		code, why := interruption(ctx)
		fmt.Fprintf(r.st.Stderr, "pgbench: error: %s during init: %s; the pgbench tables are incomplete\n", why, step)
		return code
	case err != nil:
		fmt.Fprintf(r.st.Stderr, "pgbench: error: %s\n", oneLine(err))
		return exitUsage
	}
	return exitOK
}

// interruption is the exit status and the words for a command whose ctx
// was cancelled: 128 plus the number of the signal that cancelled it (as
// the shell reports a pgbench the signal killed), "interrupted (SIGINT)";
// exitInterrupted and "interrupted" when no signal is named.
func interruption(ctx context.Context) (int, string) {
	if i := exitcode.InterruptionOf(ctx); i != nil {
		return int(i.ExitCode()), i.Error()
	}
	return exitInterrupted, "interrupted"
}

// bench is a benchmark run.
func (r *runner) bench(ctx context.Context) int {
	c := r.cfg
	conn, connTime, ok := r.connect(ctx, "setup")
	if !ok {
		return exitUsage
	}
	defer conn.Close(context.WithoutCancel(ctx))
	fmt.Fprintf(r.st.Stdout, "pgbench (erplab %s, server %s)\n", r.prog.Version, shortVersion(conn.PgConn().ParameterStatus("server_version")))
	if c.Debug {
		cc := conn.Config()
		fmt.Fprintf(r.st.Stderr, "pgbench: debug: pghost: %s pgport: %d nclients: %d %s: %d dbName: %s\n",
			cc.Host, cc.Port, c.Clients, map[bool]string{true: "nxacts", false: "duration"}[c.Duration == 0],
			max(c.Transactions, c.Duration), cc.Database)
	}
	scale := c.Scale
	var layout tables.Layout
	builtin := false
	for _, s := range c.Scripts {
		if _, b := wpgbench.OperationName(s); b {
			builtin = true
		}
	}
	if builtin {
		var n int64
		if err := conn.QueryRow(ctx, "select count(*) from pgbench_branches").Scan(&n); err != nil {
			msg := err.Error()
			var pe *pgconn.PgError
			if errors.As(err, &pe) {
				msg = script.LibpqMessage(pe)
			}
			fmt.Fprintf(r.st.Stderr, "pgbench: error: could not count number of branches: %s\n", msg)
			if pe != nil && pe.Code == "42P01" {
				fmt.Fprintf(r.st.Stderr, "pgbench: hint: Perhaps you need to do initialization (\"pgbench -i\") in database \"%s\".\n", conn.Config().Database)
			}
			return exitUsage
		}
		var err error
		if layout, _, err = tables.InstalledLayout(ctx, conn); err != nil {
			fmt.Fprintf(r.st.Stderr, "pgbench: error: %s\n", oneLine(err))
			return exitUsage
		}
		scale = int(n)
		if c.ScaleGiven {
			fmt.Fprintf(r.st.Stderr, "pgbench: warning: scale option ignored, using count from pgbench_branches table (%d)\n", scale)
		}
	}
	if !c.NoVacuum {
		fmt.Fprint(r.st.Stderr, "starting vacuum...")
		stmts := []string{"vacuum pgbench_branches", "vacuum pgbench_tellers", "truncate pgbench_history"}
		if c.VacuumAll {
			stmts = append(stmts, "vacuum analyze pgbench_accounts")
		}
		for _, s := range stmts {
			if _, err := conn.Exec(ctx, s); err != nil {
				msg := err.Error()
				var pe *pgconn.PgError
				if errors.As(err, &pe) {
					msg = script.LibpqMessage(pe)
				}
				fmt.Fprintf(r.st.Stderr, "pgbench: error: %s\npgbench: detail: (ignoring this error and continuing anyway)\n", msg)
			}
		}
		fmt.Fprintln(r.st.Stderr, "end.")
	}

	defines := map[string]string{}
	for k, v := range c.Defines {
		defines[k] = v
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var abortOnce sync.Once
	var err error
	wo := wpgbench.Options{PgbenchSemantics: true,
		Scripts: c.Scripts, Mode: c.Mode, Defines: defines, RandomSeed: c.RandomSeed,
		MaxTries: c.MaxTries, ContinueOnError: c.ContinueOnError, PerCommand: c.PerCommand, NoVacuum: true,
		Scale: scale, Clients: c.Clients, Threads: c.Jobs,
		Duration: time.Duration(c.Duration) * time.Second, TxPerClient: c.Transactions,
		LatencyLimit: msDuration(c.LatencyLimitMs), Rate: c.Rate > 0,
		Debug: r.st.Stderr, ShellOut: r.st.Stdout, Log: r.st.Stderr,
	}
	if c.MaxTries == 0 {
		wo.MaxTries = -1
	}
	if c.Debug {
		wo.Trace = r.st.Stderr
	}
	if c.VerboseErrors {
		wo.VerboseErrors = r.st.Stderr
	}
	if c.ExitOnAbort {
		wo.OnAbort = func(int) { abortOnce.Do(cancel) }
	}
	if c.Connect {
		pc, err := pgconn.ParseConfig(r.dsn())
		if err != nil {
			fmt.Fprintf(r.st.Stderr, "pgbench: error: %v\n", err)
			return exitUsage
		}
		pc.OnNotice = r.notice
		wo.Connect = pc
	}
	var txl *txLog
	if c.Log {
		if txl, err = openTxLog(c); err != nil {
			printError(r.st.Stderr, err)
			return exitUsage
		}
		wo.OnTransaction = txl.add
	}
	w, err := wpgbench.New(wo)
	if err != nil {
		printError(r.st.Stderr, scriptError(err))
		return exitUsage
	}
	hold := time.Duration(c.Duration) * time.Second
	txPerVU := 0
	if c.Duration == 0 {
		txPerVU = c.Transactions
		hold = 365 * 24 * time.Hour
	}
	stages, err := engine.SimpleStages(c.Clients, 0, hold)
	if err != nil {
		printError(r.st.Stderr, err)
		return exitUsage
	}
	var rate []engine.RateStage
	if c.Rate > 0 {
		if rate, err = engine.ConstantRate(c.Rate); err != nil {
			printError(r.st.Stderr, err)
			return exitUsage
		}
	}
	think, _ := engine.ParseThinkTime("0")
	col := newCollector(len(c.Scripts), msDuration(c.LatencyLimitMs), c.ContinueOnError)
	onSkip := col.skip
	if txl != nil {
		onSkip = func(s engine.Skip) {
			col.skip(s)
			txl.add(wpgbench.Transaction{Client: s.VU - 1, Script: s.Op, Start: s.At, End: s.At, Scheduled: s.Scheduled, Skipped: true})
		}
	}
	place := placeOf(r.prog.Out)
	prog := r.startProgress(col)
	res, runErr := loadtest.Run(runCtx, loadtest.Options{
		DSN: r.dsn(), EnvGiven: true, Workload: w, Scale: float64(scale), Seed: c.RandomSeed,
		Stages: stages, Rate: rate, LatencyLimit: msDuration(c.LatencyLimitMs), TxPerVU: txPerVU,
		Think: think, Connections: 0, GracefulStop: 0, Interval: time.Second,
		RateFromFirstArrival: true, OnSample: col.sample, OnSkip: onSkip, PoolOptions: []conninfo.PoolOption{noticePool(r.notice)},
		AbortedBy: func() string {
			if n := w.AbortedClients(); n > 0 {
				return fmt.Sprintf("%d of %d clients aborted", n, c.Clients)
			}
			return ""
		},
		Out: place.File, OutDir: place.Dir, ReplaceOut: true, NoResults: place.Off,
		OnNoResults: func(err error) {
			fmt.Fprintf(r.st.Stderr, "erplab: warning: no results document: %s; the run goes on\n", oneLine(err))
		},
		CommandLine: conninfo.RedactArgs(append([]string{"erplab", "pgbench"}, r.args...)), Version: r.prog.Version,
	}, io.Discard)
	prog.stop()
	if txl != nil {
		if err := txl.close(); err != nil {
			fmt.Fprintf(r.st.Stderr, "pgbench: error: %v\n", err)
		}
	}
	if res == nil {
		if runErr == nil {
			runErr = errors.New("no results")
		}
		fmt.Fprintf(r.st.Stderr, "pgbench: error: %s\n", oneLine(runErr))
		return exitUsage
	}
	in := reportInput{cfg: c, w: w, col: col, doc: res.Doc, scale: scale, layout: layout, connTime: connTime}
	printResults(r.st.Stdout, in)
	printAdditions(r.st.Stdout, in, res.Path)
	printSilences(r.st.Stderr, res.Doc)
	if ctx.Err() != nil {
		// pgbench dies of the signal; erplab reports what ran and exits
		// as the shell reports a process the signal killed.
		code, why := interruption(ctx)
		fmt.Fprintf(r.st.Stderr, "erplab: %s: the above results are incomplete.\n", why)
		return code
	}
	// Every transaction failed (loadtest.ErrRunFailed): pgbench reports
	// the failures and exits by its own rules.
	if runErr != nil && !errors.Is(runErr, engine.ErrAborted) && !errors.Is(runErr, loadtest.ErrRunFailed) && !c.ExitOnAbort {
		fmt.Fprintf(r.st.Stderr, "pgbench: error: %s\n", oneLine(runErr))
	}
	if w.AbortedClients() > 0 {
		if c.ExitOnAbort && w.AbortedClients() > 0 {
			// pgbench 17: every thread stops at the first abort
			fmt.Fprintln(r.st.Stderr, "pgbench: error: Run was aborted due to an error in thread 0")
		} else {
			fmt.Fprintln(r.st.Stderr, "pgbench: error: Run was aborted; the above results are incomplete.")
		}
		return exitAborted
	}
	return exitOK
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// shortVersion keeps the number of a server_version such as
// "15.18 (Debian 15.18-0+deb12u1)".
func shortVersion(v string) string {
	if i := strings.IndexByte(v, ' '); i > 0 {
		return v[:i]
	}
	return v
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// noticePool makes the pool's connections print notices.
func noticePool(f func(*pgconn.PgConn, *pgconn.Notice)) conninfo.PoolOption {
	return func(c *pgxpool.Config) { c.ConnConfig.OnNotice = f }
}

// resultsDoc is the document loadtest wrote.
type resultsDoc = results.Document
