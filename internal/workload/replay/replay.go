// Package replay is the `replay` workload: captured client sessions (an
// `erplab proxy --capture` file, a PostgreSQL server log, a 1C
// technological journal; package capture/load reads them) replayed by
// package replay's engine as the load of a run, so that `erplab ab` and
// `erplab capacity` prove a remedy on the user's own traffic. It drives
// its own load (workload.Driver): every run replays onto a fresh copy of
// the database as it was before the capture (--replay-template), made
// and dropped by the run; the key operations are the replay's groups.
// See docs/replay.md.
package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/erplab/erplab/internal/opmap"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/capture"
	"github.com/erplab/erplab/internal/capture/load"
	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/pgcluster"
	replayer "github.com/erplab/erplab/internal/replay"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/workload"
)

// Name is the workload's registry name (and the results' workload).
const Name = replayer.Workload

// Description is the workload's line in --workload's help.
const Description = "captured sessions replayed (--replay-source, --replay-template): your own traffic as the load"

// templateMarker starts the comment on SourceDB, followed by the
// --replay-template connection string (redacted) restored into it.
const templateMarker = "erplab replay template:"

// SourceDB is the database into which Setup restores a --replay-template
// connection string; every run copies it.
const SourceDB = "erplab_replay_source"

func init() {
	workload.Register(workload.Meta{
		Name: Name, Description: Description, DefaultScale: 1,
		Flags: flags, New: New,
	})
}

func flags(fs *pflag.FlagSet) {
	fs.String("replay-source", "", "replay: the captured workload, as erplab replay's SOURCE: a capture file, a 1C journal directory, server log files (a glob pattern, quoted: 'postgresql-*.csv')")
	fs.String("replay-from", "", "replay: source kind capture, pglog or techlog (default: detected)")
	fs.String("replay-template", "", "replay: the database as it was before the capture, copied for every run: a database name on the server under test, or a connection string of it (copied in with pg_dump: ab, capacity without --dsn)")
	fs.String("replay-template-file", "", "replay: a file (mode 0600) holding the --replay-template connection string, so that its password is not in erplab's argv")
	fs.Float64("replay-speed", 1, "replay: pacing, 1 the captured pace, 2 twice as fast, 0 as fast as the sessions and the order allow")
	fs.String("replay-order", "gates", "replay: cross-session order, gates (the captured order) or none (each session on its own schedule)")
	fs.String("replay-targets", "", "replay: targets file grouping statements into key operations with their APDEX T (docs/replay.md)")
	fs.Int("users-x", 1, "replay: copies of every captured session, offset in time (erplab capacity raises it step by step)")
}

// Workload is the replay workload: the source in memory and the replay's
// options.
type Workload struct {
	src      *load.Source
	opts     replayer.Options
	usersX   int
	template string
	sessions int
	groups   []replayer.Group
}

// New builds the workload from its flags: it checks them, reads the
// source (one line naming file:line when nothing of it parses) and
// groups its statements.
func New(fs *pflag.FlagSet) (workload.Workload, error) {
	source, _ := fs.GetString("replay-source")
	w, lo, err := fromFlags(fs)
	if err != nil {
		return nil, err
	}
	sources := []string{source}
	if m, err := filepath.Glob(source); err == nil && len(m) > 0 {
		sources = m // sorted: a server log's files in order
	}
	src, err := load.Read(context.Background(), sources, lo)
	if err != nil {
		return nil, fmt.Errorf("--replay-source: %w", err)
	}
	w.src, w.opts.Header = src, src.Header
	if w.groups, err = replayer.Groups(replayer.Slice(src.Events), w.opts); err != nil {
		return nil, fmt.Errorf("--replay-source: %w", err)
	}
	seen := map[string]bool{}
	for _, e := range src.Events {
		seen[e.Session] = true
	}
	w.sessions = len(seen)
	return w, nil
}

// fromFlags checks the flags that need no file but the targets' and
// returns the workload without its source, and how to read the source.
func fromFlags(fs *pflag.FlagSet) (*Workload, load.Options, error) {
	var lo load.Options
	source, _ := fs.GetString("replay-source")
	from, _ := fs.GetString("replay-from")
	template, _ := fs.GetString("replay-template")
	if file, _ := fs.GetString("replay-template-file"); file != "" {
		if template != "" {
			return nil, lo, errors.New("--replay-template and --replay-template-file both name the template: give one")
		}
		t, err := conninfo.ReadFile(file)
		if err != nil {
			return nil, lo, fmt.Errorf("--replay-template-file: %w", err)
		}
		template = t
	}
	speed, _ := fs.GetFloat64("replay-speed")
	order, _ := fs.GetString("replay-order")
	targets, _ := fs.GetString("replay-targets")
	usersX, _ := fs.GetInt("users-x")
	w := &Workload{usersX: usersX, template: template}
	w.opts.Speed = speed
	switch {
	case source == "":
		return nil, lo, errors.New("--workload replay needs --replay-source FILE: the captured workload (a capture file, server log files or a 1C journal directory)")
	case template == "":
		return nil, lo, errors.New("--workload replay needs --replay-template DB (or --replay-template-file): the database as it was before the capture, copied for every run (a replay writes)")
	case speed < 0:
		return nil, lo, fmt.Errorf("--replay-speed must not be negative, got %g", speed)
	case usersX < 1:
		return nil, lo, fmt.Errorf("--users-x must be at least 1, got %d", usersX)
	}
	switch order {
	case "gates", "capture":
		w.opts.Order = replayer.OrderCapture
	case "none":
		w.opts.Order = replayer.OrderNone
	default:
		return nil, lo, fmt.Errorf("--replay-order %q: want gates or none", order)
	}
	switch from {
	case "":
	case "capture":
		lo.From = capture.SourceProxy
	case "pglog", "techlog":
		lo.From = capture.Source(from)
	default:
		return nil, lo, fmt.Errorf("--replay-from %q: want capture, pglog or techlog", from)
	}
	if targets != "" {
		fh, err := os.Open(targets)
		if err != nil {
			return nil, lo, fmt.Errorf("--replay-targets: %w", err)
		}
		defer fh.Close()
		if w.opts.Targets, err = replayer.ParseTargets(fh, targets); err != nil {
			return nil, lo, err
		}
	}
	return w, lo, nil
}

// Name implements workload.Workload.
func (w *Workload) Name() string { return Name }

// Operations are the replay's groups, each its own key operation.
func (w *Workload) Operations() []workload.Operation {
	ops := make([]workload.Operation, len(w.groups))
	for i, g := range w.groups {
		ops[i] = workload.Operation{Name: g.Name, Target: g.Target, Priority: 1, Description: "statements grouped by " + g.By}
	}
	return ops
}

// Roles is one role doing every operation: the replay, not the engine,
// chooses what runs.
func (w *Workload) Roles() []workload.Role {
	mix := map[string]float64{}
	for _, g := range w.groups {
		mix[g.Name] = 1
	}
	return []workload.Role{{Name: "replay", Share: 1, Mix: mix}}
}

// Execute is never called: the workload drives its own load (Drive).
func (w *Workload) Execute(context.Context, *pgx.Conn, *workload.VU, int) error {
	return errors.New("the replay workload drives its own load: it has no operation to execute")
}

// Connections is the most connections a replay of users times --users-x
// copies opens: every copy of every session at once, and its monitor.
func (w *Workload) Connections(users int) int {
	return w.sessions*w.usersX*max(users, 1) + 1
}

// connString tells a --replay-template connection string from a
// database name.
func connString(s string) bool {
	return strings.Contains(s, "=") || strings.Contains(s, "://")
}

// Setup makes sure the pre-capture state is on the server under test: a
// database name must exist there (each run copies it); a connection
// string is restored with pg_dump into SourceDB, a database of erplab's
// own beside the run's (made once per server and template: the run's
// database may hold sessions of a remedy, a copy needs none), which each
// run copies.
func (w *Workload) Setup(ctx context.Context, pool *pgxpool.Pool, o workload.SetupOptions) error {
	if !connString(w.template) {
		var ok bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, w.template).Scan(&ok); err != nil {
			return fmt.Errorf("--replay-template: %s", conninfo.Describe(err))
		}
		if !ok {
			return fmt.Errorf("--replay-template %s: no such database on the server under test (ab, and capacity without --dsn, run their own server: give the database as a connection string, e.g. 'host=db1 dbname=%s', to copy it in with pg_dump)", w.template, w.template)
		}
		return nil
	}
	if !o.Force {
		return fmt.Errorf("--replay-template: a connection string is restored into a database of erplab's own (%s) on a server erplab starts (ab, capacity or run without --dsn); with --dsn give the name of the database before the capture on that server, or --force to make %s there", SourceDB, SourceDB)
	}
	return w.restoreSource(ctx, pool)
}

// restoreSource restores the --replay-template connection string into
// SourceDB on the server of pool, unless it holds that template already.
func (w *Workload) restoreSource(ctx context.Context, pool *pgxpool.Pool) error {
	marker := templateMarker + " " + conninfo.Redact(w.template)
	var comment *string
	err := pool.QueryRow(ctx, `SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1`, SourceDB).Scan(&comment)
	switch {
	case err == nil && comment != nil && *comment == marker:
		return nil // restored already (ab's rounds, capacity's steps)
	case err == nil && (comment == nil || !strings.HasPrefix(*comment, templateMarker)):
		return fmt.Errorf("--replay-template: database %s exists and is not erplab's (no %q comment): drop it or rename it", SourceDB, templateMarker)
	case err == nil: // another template's: made again
		if _, err := pool.Exec(ctx, "DROP DATABASE "+pgx.Identifier{SourceDB}.Sanitize()+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("--replay-template: drop the previous %s: %s", SourceDB, conninfo.Describe(err))
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("--replay-template: %s", conninfo.Describe(err))
	}
	id := pgx.Identifier{SourceDB}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE DATABASE "+id); err != nil {
		return fmt.Errorf("--replay-template: create %s: %s", SourceDB, conninfo.Describe(err))
	}
	cc := pool.Config().ConnConfig
	err = restore(ctx, w.template, replayer.WithDatabase(cc.ConnString(), SourceDB), cc.Password)
	if err == nil {
		_, err = pool.Exec(ctx, "COMMENT ON DATABASE "+id+" IS "+quoteLiteral(marker))
	}
	if err != nil {
		// a half-made copy is not kept: the next set-up starts again
		_, _ = pool.Exec(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)")
		return err
	}
	return nil
}

// restore copies database src into dst with pg_dump | pg_restore (the
// server's binaries; passwords in the environment, never on a command
// line): dstPassword is the one erplab's own connection to dst found
// (its passfile's), which an inherited PGPASSWORD must not override.
func restore(ctx context.Context, src, dst, dstPassword string) error {
	bin, err := pgcluster.FindBinDir()
	if err != nil {
		return fmt.Errorf("--replay-template: pg_dump: %w", err)
	}
	srcArg, srcEnv, err := conninfo.Split(src)
	if err != nil {
		return fmt.Errorf("--replay-template: %w", err)
	}
	dstArg, dstEnv, err := conninfo.Split(dst)
	if err != nil {
		return fmt.Errorf("--replay-template: %w", err)
	}
	var dumpErr, restErr bytes.Buffer
	dump := exec.CommandContext(ctx, filepath.Join(bin, "pg_dump"), "--format=custom", "--no-owner", "--no-privileges", "--dbname", srcArg)
	dump.Env, dump.Stderr = append(os.Environ(), srcEnv...), &dumpErr
	rest := exec.CommandContext(ctx, filepath.Join(bin, "pg_restore"), "--no-owner", "--no-privileges", "--exit-on-error", "--dbname", dstArg)
	if dstPassword != "" && len(dstEnv) == 0 {
		dstEnv = []string{"PGPASSWORD=" + dstPassword}
	}
	rest.Env, rest.Stderr = append(os.Environ(), dstEnv...), &restErr
	pipe, err := dump.StdoutPipe()
	if err != nil {
		return fmt.Errorf("--replay-template: pg_dump: %w", err)
	}
	rest.Stdin = pipe
	if err := dump.Start(); err != nil {
		return fmt.Errorf("--replay-template: pg_dump: %w", err)
	}
	rerr := rest.Run()
	derr := dump.Wait()
	switch {
	case derr != nil:
		return fmt.Errorf("--replay-template: pg_dump of %s: %w: %s", conninfo.Redact(src), derr, firstError(dumpErr.String()))
	case rerr != nil:
		return fmt.Errorf("--replay-template: pg_restore: %w: %s", rerr, firstError(restErr.String()))
	}
	return nil
}

// Drive replays the source onto a fresh copy of the pre-capture state
// (the --replay-template database, or SourceDB into which Setup restored
// it), dropped at the end, with o.Users times --users-x
// copies of every session.
func (w *Workload) Drive(ctx context.Context, o workload.DriveOptions) (*results.Document, error) {
	from := w.template
	if connString(w.template) {
		from = SourceDB
	}
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	db, admin, err := replayer.CopyDatabase(ctx, o.DSN, from)
	if err != nil {
		return nil, fmt.Errorf("--replay-template: copy %s: %w", from, err)
	}
	defer func() {
		if err := replayer.DropCopy(admin, db); err != nil {
			fmt.Fprintf(out, "warning: could not drop the replayed copy %s: %v\n", db, err)
		}
	}()
	opts := w.opts
	opts.DSN, opts.UsersX, opts.Interval, opts.OnInterval = replayer.WithDatabase(o.DSN, db), w.usersX*max(o.Users, 1), o.Interval, o.OnInterval
	opts.Version, opts.CommandLine, opts.RunID = o.Version, o.CommandLine, o.RunID
	opts.Warn = func(s string) { fmt.Fprintf(out, "warning: %s\n", s) }
	fmt.Fprintf(out, "replay: %s, %d events of %d sessions, users-x %d, into %s (a copy of %s)\n",
		w.src.Kind, len(w.src.Events), w.sessions, opts.UsersX, db, from)
	var stopObserving func()
	if o.Observe != nil {
		opts.OnStart = func(start time.Time, ops *opmap.Map) { stopObserving = o.Observe(opts.DSN, start, ops) }
	}
	res, err := replayer.Run(ctx, replayer.Slice(w.src.Events), opts)
	if stopObserving != nil {
		stopObserving() // before the copy goes
	}
	if err != nil {
		return nil, err
	}
	replayer.PrintSummary(out, res, w.src)
	return res.Doc, nil
}

// firstError is the first line of s that says "error:" (pg_dump's and
// pg_restore's own), else its last non-empty line.
func firstError(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for _, l := range lines {
		if strings.Contains(l, "error:") {
			return strings.TrimSpace(l)
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
