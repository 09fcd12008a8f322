package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/erplab/erplab/internal/capture"
	"github.com/erplab/erplab/internal/capture/load"
	"github.com/erplab/erplab/internal/capture/pglog"
	"github.com/erplab/erplab/internal/capture/techlog"
	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/replay"
	"github.com/erplab/erplab/internal/results"
)

// replayFlags are erplab replay's flags: the server set's --dsn,
// --dsn-file and --force, the output set's --out and --out-mode
// (flagsets.go), and replay's own.
type replayFlags struct {
	serverFlags
	outputFlags
	from, saveCapture string
	speed             float64
	usersX            int
	order             string
	targets           string
	target            time.Duration
	typeMap           string
	template          string
	keep, progress    bool
	maxErrors         int64
}

// replayProgressEvery is how often --progress prints a line.
const replayProgressEvery = 5 * time.Second

const replayLong = `Replay captured client sessions onto a server and score them like a run: one
connection per captured session, its statements in order with the captured protocol
(prepared statements, typed and binary binds, COPY data), paced by --speed, kept in the
captured cross-session order (--order), grouped into key operations (the journal's
Context, --targets, or the statement's fingerprint) with APDEX, the captured durations
("as in production") beside the replayed ones, and the replay's fidelity (errors new or as
captured, rows differing, lag, reorders, skips). The results document goes where run's
goes (--out, ./erplab-results).

SOURCE (--from, detected when omitted):
  capture   a file of 'erplab proxy --capture FILE' (gzip, erplab-capture header)
  pglog     PostgreSQL 15+ server log files: csvlog, jsonlog, or stderr
  techlog   the 1C technological journal: a directory of rphost_<pid>/YYMMDDHH.log
A log or a journal is converted in memory (--save-capture FILE keeps the conversion).

A replay writes. It replays into a fresh copy: --template DB makes
erplab_replay_<time> with CREATE DATABASE ... TEMPLATE DB (as 'createdb -T DB') on the
--dsn server, replays into it and drops it at the end (--keep keeps it and prints its
name); a copy left by a replay killed outright is dropped by the next erplab command
(or named, when it cannot log in without a password). Only --force replays into the
--dsn database itself. --max-errors N stops the replay after N errors the capture did not
have.

A server log usable as a source is written with these settings (postgresql.conf):
logging_collector = on
` + pglog.Settings + `

Not replayed: large objects (lo_* calls go by fast path), LISTEN/NOTIFY deliveries,
fast-path function calls, COPY FROM STDIN from a server log (the log has no data),
session-level side effects of statements not in the capture (temporary tables, SET,
prepared statements made before the capture began).`

func newReplayCmd() *cobra.Command {
	f := &replayFlags{}
	cmd := &cobra.Command{
		Use:   "replay SOURCE... --dsn DSN --template DB",
		Short: "Replay a captured workload (proxy capture, server log, 1C journal) and score it",
		Long:  replayLong,
		Example: `  pg_dump -h db1 -Fc -f erp.dump erp       # the database before the capture (clients not yet on the proxy)
  createdb -h db2 erp_before && pg_restore -h db2 -d erp_before erp.dump   # on the replay server
  erplab proxy --listen 0.0.0.0:6433 --upstream 'host=db1 dbname=erp' --capture erp.erpcap.gz   # clients connect to port 6433
  erplab replay erp.erpcap.gz --dsn 'host=db2 dbname=postgres' --template erp_before
  erplab replay erp.erpcap.gz --dsn 'host=db2 dbname=postgres' --template erp_before --users-x 4 --max-errors 100 --progress
  erplab replay /var/log/postgresql/postgresql-*.csv --dsn 'host=db2 dbname=postgres' --template erp_before --speed 2
  erplab replay /var/log/1c/journal --dsn 'host=db2 dbname=postgres' --template erp_before --targets ops.txt`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd, args) },
	}
	fl := cmd.Flags()
	cmd.SetUsageFunc(groupedUsage) // own flags, then each set's
	f.serverFlags.register(fl, "dsn", "dsn-file", "force")
	f.outputFlags.register(fl, "out", "out-mode")
	fl.Lookup("dsn").Usage = "server to replay onto (libpq key=value or URL; default: PG* environment); with --template, the server where the copy is made, connected to its database (e.g. dbname=postgres)"
	fl.Lookup("force").Usage = "replay into the --dsn database itself (a replay writes)"
	fl.Lookup("out").Usage = "results file, or an existing directory for <time>-replay.json (default ./erplab-results/<time>-replay.json); never an existing file"
	fl.StringVar(&f.from, "from", "", "source kind: capture, pglog or techlog (default: detected)")
	fl.StringVar(&f.saveCapture, "save-capture", "", "also write the source as a capture file (never over an existing file)")
	fl.Float64Var(&f.speed, "speed", 1, "pacing: 1 the captured pace, 2 twice as fast, 0 as fast as the sessions and the order allow")
	fl.IntVar(&f.usersX, "users-x", 1, "N copies of every captured session, copy k started k x (the captured sessions' mean gap between starts)/N/--speed later (all at once at --speed 0): N times the users, not a fast-forward")
	fl.StringVar(&f.order, "order", "gates", "cross-session order: gates (the captured order and commit order, a watchdog against hangs) or none (each session on its own schedule, as pgreplay)")
	fl.StringVar(&f.targets, "targets", "", "targets file: lines NAME T [MATCH] grouping statements into key operations with their APDEX T (see docs/replay.md)")
	fl.DurationVar(&f.target, "target", 0, "APDEX T of the groups the targets file does not give one (default: each group's captured p95 rounded to 1 ms, 500ms without captured durations)")
	fl.StringVar(&f.typeMap, "type-map", "", "techlog: type map overrides, from=to,... ('from=' leaves a type unmapped; default mvarchar=varchar,mchar=bpchar)")
	fl.StringVar(&f.template, "template", "", "replay into a fresh copy of database DB (CREATE DATABASE erplab_replay_<time> TEMPLATE DB; DB must have no other sessions), dropped at the end; a copy a killed replay left is dropped by the next erplab command")
	fl.BoolVar(&f.keep, "keep", false, "with --template: keep the copy after the replay and print its name")
	fl.BoolVar(&f.progress, "progress", false, "print a line every 5 s: statements, failures (new: the capture did not have them), lag behind schedule p99 (--speed > 0) and reorders so far")
	fl.Int64Var(&f.maxErrors, "max-errors", 0, "stop the replay once this many statements failed with errors the capture did not have (0 = never); the results so far are written, the copy dropped")
	return cmd
}

// options checks the flags that need no server and turns them into the
// engine's options.
func (f *replayFlags) options() (replay.Options, load.Options, error) {
	var o replay.Options
	var lo load.Options
	switch f.order {
	case "gates", "capture":
		o.Order = replay.OrderCapture
	case "none":
		o.Order = replay.OrderNone
	default:
		return o, lo, fmt.Errorf("--order %q: want gates or none", f.order)
	}
	switch f.from {
	case "":
	case "capture":
		lo.From = capture.SourceProxy
	case "pglog", "techlog":
		lo.From = capture.Source(f.from)
	default:
		return o, lo, fmt.Errorf("--from %q: want capture, pglog or techlog", f.from)
	}
	if f.speed < 0 || f.usersX < 1 || f.target < 0 || f.maxErrors < 0 {
		return o, lo, errors.New("--speed, --target and --max-errors must not be negative, --users-x at least 1")
	}
	if f.keep && f.template == "" {
		return o, lo, errors.New("--keep keeps the copy --template makes: give --template")
	}
	if f.template == "" && !f.force {
		return o, lo, errors.New("a replay writes: give --template DB to replay into a fresh copy of DB (as 'createdb -T DB'), or --force to replay into the --dsn database itself")
	}
	if f.typeMap != "" {
		m, err := techlog.ParseTypeMap(f.typeMap)
		if err != nil {
			return o, lo, fmt.Errorf("--type-map: %w", err)
		}
		lo.TypeMap = m
	}
	if f.targets != "" {
		fh, err := os.Open(f.targets)
		if err != nil {
			return o, lo, fmt.Errorf("--targets: %w", err)
		}
		defer fh.Close()
		if o.Targets, err = replay.ParseTargets(fh, f.targets); err != nil {
			return o, lo, err
		}
	}
	o.Speed, o.UsersX, o.Target, o.MaxNewErrors = f.speed, f.usersX, f.target, f.maxErrors
	o.Version, o.CommandLine = version, append([]string{"erplab"}, os.Args[1:]...)
	return o, lo, nil
}

func (f *replayFlags) run(cmd *cobra.Command, args []string) error {
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	opts, lo, err := f.options()
	if err != nil {
		return withCode(exitUsage, err)
	}
	dsn, _, err := resolveDSN(cmd, f.dsn, f.dsnFile)
	if err != nil {
		return err
	}
	src, err := load.Read(ctx, args, lo)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "source: %s, %d events, %d bad lines\n", src.Kind, len(src.Events), src.BadLines)
	if f.saveCapture != "" {
		if err := src.Save(f.saveCapture); err != nil {
			return fmt.Errorf("--save-capture: %w", err)
		}
		fmt.Fprintf(out, "capture saved: %s\n", f.saveCapture)
	}
	res, err := loadtest.ReserveResults(f.out, replay.Workload, f.outMode)
	if err != nil {
		return err
	}
	streaming := false
	defer func() {
		if !streaming {
			res.Discard()
		}
	}()
	opts.DSN, opts.Header = dsn, src.Header
	if f.template != "" {
		c, err := copyTemplate(ctx, dsn, f.template)
		if err != nil {
			return err
		}
		defer c.drop(out, cmd.ErrOrStderr(), f.keep)
		opts.DSN = replay.WithDatabase(dsn, c.db)
		fmt.Fprintf(out, "replaying into %s, a copy of %s\n", c.db, f.template)
	}
	streaming = true
	return f.replay(ctx, out, src, opts, res)
}

// replay runs the engine and writes the summary and the results.
func (f *replayFlags) replay(ctx context.Context, out io.Writer, src *load.Source, opts replay.Options, rsv *loadtest.Reservation) error {
	stream := rsv.Stream
	head := &results.Document{Format: results.Format, Schema: results.SchemaVersion, Version: version,
		CommandLine: conninfo.RedactArgs(opts.CommandLine), Workload: replay.Workload, Status: results.StatusRunning, StartedAt: time.Now()}
	_ = stream.Write(results.StreamLine{Type: "header", Header: head})
	opts.OnInterval = func(iv results.Interval) {
		_ = stream.Write(results.StreamLine{Type: "interval", Interval: &iv})
	}
	var next time.Duration
	opts.OnProgress = func(p replay.Progress) {
		if f.progress && p.Elapsed >= next {
			next = p.Elapsed.Truncate(replayProgressEvery) + replayProgressEvery
			fmt.Fprintln(out, progressLine(p))
		}
	}
	res, err := replay.Run(ctx, replay.Slice(src.Events), opts)
	if err != nil {
		rsv.Discard()
		return err
	}
	replay.PrintSummary(out, res, src)
	if err := loadtest.WriteResults(out, res.Doc, rsv, f.outMode); err != nil {
		return err // loadtest.ErrResultsIncomplete carries its code
	}
	if res.Doc.Status == results.StatusInterrupted {
		return withCode(exitInterrupted, fmt.Errorf("interrupted; results so far: %s", rsv.Path()))
	}
	if why, ok := res.Doc.Status.Reason(results.StatusAborted); ok {
		return fmt.Errorf("replay stopped by --max-errors %d: %s; results so far: %s", f.maxErrors, why, rsv.Path())
	}
	return nil
}

// progressLine is --progress's line, e.g. "t=5s statements 1200 failed
// 3 (new 1) lag p99 2.1 ms reordered 0"; no lag at --speed 0.
func progressLine(p replay.Progress) string {
	lag := ""
	if p.Lagged {
		lag = " lag p99 " + results.FormatMs(float64(p.LagP99)/float64(time.Millisecond))
	}
	return fmt.Sprintf("t=%.0fs statements %d failed %d (new %d)%s reordered %d", p.Elapsed.Seconds(), p.Statements, p.Failed, p.NewErrors, lag, p.Reordered)
}
