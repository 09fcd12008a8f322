// Package pgbench is the workload that runs pgbench scripts as erplab key
// operations: each script (a built-in -b or a file -f) is one key
// operation, scored with APDEX against its target time T like any other;
// one virtual user is one pgbench client with its own variables, random
// state and (by default) its own connection. The interpreter is
// internal/pgbench/script, the tables internal/pgbench/tables, `erplab
// pgbench`'s command line internal/pgbench/cli. It is a service: it knows
// no command and no plugin; internal/workload/pgbench registers it as the
// workload "pgbench" (`erplab run --workload pgbench`, `erplab init`).
package pgbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/pgbench/expr"
	"github.com/erplab/erplab/internal/pgbench/script"
	"github.com/erplab/erplab/internal/pgbench/tables"
	"github.com/erplab/erplab/internal/workload"
)

// DefaultTarget is the APDEX target time T of a script when --target does
// not name it: 50 ms, a common service-level bound for an OLTP
// transaction; pgbench's own --latency-limit examples use the same order.
const DefaultTarget = 50 * time.Millisecond

// Options describe the scripts and how the clients run them; the field
// names follow pgbench's options.
type Options struct {
	// PgbenchSemantics is set by `erplab pgbench`: the drop-in for
	// pgbench runs its built-in scripts wherever pgbench would, without
	// the --force guard (pgbench has none, and existing scripts calling
	// pgbench pass no --force); the user named this database to pgbench.
	PgbenchSemantics bool
	// Scripts to run, with their weights (-f file@W, -b name@W); at least
	// one.
	Scripts []*script.Script
	// Targets are APDEX target times by key operation name (--target
	// name=50ms); others get DefaultTarget.
	Targets map[string]time.Duration
	// Mode is -M.
	Mode script.Mode
	// Defines are -D name=value.
	Defines map[string]string
	// RandomSeed seeds every client's random state in pgbench's order
	// (--random-seed).
	RandomSeed uint64
	// MaxTries is --max-tries: tries of a transaction after a
	// serialization failure or deadlock; 0 or 1 = one try (no retry), a
	// negative value = unlimited (pgbench --max-tries=0).
	MaxTries int
	// ContinueOnError (pgbench 18 --continue-on-error): a client whose
	// transaction fails with an error other than a serialization failure
	// or deadlock goes on with its next transaction. Without it the client
	// stops for the rest of the run, as pgbench 15-17 aborts it.
	ContinueOnError bool
	// PerCommand is -r: measure per-command latencies.
	PerCommand bool
	// NoVacuum is -n: skip pgbench's vacuum of the tables before the run.
	NoVacuum bool
	// Scale is -s: the scale of the tables created when the database has
	// none, and :scale of custom scripts (built-in scripts read it from
	// pgbench_branches, as pgbench does). 0 means 1.
	Scale int
	// ScaleGiven tells that -s was given (pgbench warns when it is ignored).
	ScaleGiven bool
	// Init are the table options used when the tables must be created
	// (partitions etc.; Scale is taken from Scale).
	Init tables.Options
	// EmptyInitSteps tells that `erplab init --init-steps` was given empty
	// (CheckInit refuses it).
	EmptyInitSteps bool
	// Clients is -c (for the summary and the seeding order).
	Clients int
	// Threads is -j as given (for the summary only: erplab's clients are
	// goroutines on every CPU).
	Threads int
	// Duration (-T) or TxPerClient (-t), LatencyLimit (--latency-limit)
	// and Rate (a --rate or --rate-stage was given) are for the summary.
	Duration     time.Duration
	TxPerClient  int
	LatencyLimit time.Duration
	Rate         bool
	// Debug receives debug() lines and messages; nil means io.Discard.
	Debug io.Writer
	// ShellOut receives the standard output of \shell commands; nil means
	// os.Stdout, as pgbench.
	ShellOut io.Writer
	// Log, when set, receives pgbench's own stderr lines for every client
	// abort, in pgbench's wording (script.AbortLines), instead of the
	// distinct-error lines written to Debug (`erplab pgbench`).
	Log io.Writer
	// Connect, when set, is the connection of pgbench -C: every
	// transaction runs on a new connection made from it and closed after
	// (the VU's pooled connection stays unused); connection times add up
	// in ConnectTime.
	Connect *pgconn.Config
	// Trace and VerboseErrors receive pgbench -d's and --verbose-errors'
	// lines (script.Options); nil = none.
	Trace, VerboseErrors io.Writer
	// OnTransaction, when set, sees every transaction pgbench counts
	// (successful, or failed after its tries), from the client's
	// goroutine: pgbench's -l log.
	OnTransaction func(Transaction)
	// OnAbort, when set, is called (once per client) when a client
	// aborts, e.g. to end the run at the first abort (pgbench 17
	// --exit-on-abort).
	OnAbort func(client int)
}

// Transaction is one counted transaction, as pgbench's -l logs it.
type Transaction struct {
	Client, Script int
	// Start and End bound the execution; Scheduled is the open model's
	// scheduled start (zero in the closed model). A skipped transaction
	// has Start = End = the moment it was skipped.
	Start, End, Scheduled time.Time
	// SQLState is "" for a success, else the last try's SQLSTATE.
	SQLState string
	Retries  int
	// Skipped: the open model's arrival was skipped under
	// --latency-limit, never run (engine.Skip; SQLState "", Retries 0).
	Skipped bool
}

// Workload runs pgbench scripts. Create it with New.
type Workload struct {
	opts    Options
	ops     []workload.Operation
	builtin bool

	// set by Setup
	scale       int
	scaleSource string
	defaultSeed int64
	rands       []*expr.PRNG // per client, pgbench's seeding order

	mu      sync.Mutex
	clients []*client // every client made, for the per-command report
	errs    []errorSeen

	aborted     atomic.Int64 // clients aborted
	connectNs   atomic.Int64 // -C: time spent connecting
	connections atomic.Int64 // -C: connections made
}

// errorSeen is one distinct error message of a key operation and how many
// times it occurred.
type errorSeen struct {
	op    int
	msg   string
	count int64
}

// maxDistinctErrors bounds the distinct error messages kept (and printed
// as they first occur); further ones are counted by SQLSTATE only.
const maxDistinctErrors = 20

type client struct {
	c           *script.Client
	lastRetries int
	aborted     error // set once the client aborted after a counted transaction
}

// New checks the options and names the key operations: a built-in
// script's pgbench name (e.g. "select-only"), a file's base name without
// extension; duplicates get "#2", "#3". It returns an error for no
// scripts, a bad weight total or a --target naming no script.
func New(opts Options) (*Workload, error) {
	if len(opts.Scripts) == 0 {
		return nil, errors.New("no script to run (give -f FILE, -b NAME, -S or -N)")
	}
	if opts.Clients < 1 {
		opts.Clients = 1
	}
	if opts.Scale == 0 {
		opts.Scale = 1
	}
	if opts.Debug == nil {
		opts.Debug = io.Discard
	}
	w := &Workload{opts: opts}
	seen := map[string]int{}
	for _, s := range opts.Scripts {
		if s.Weight < 0 {
			return nil, fmt.Errorf("script %s: weight must not be negative", s.Name)
		}
		name, isBuiltin := OperationName(s)
		w.builtin = w.builtin || isBuiltin
		seen[name]++
		if seen[name] > 1 {
			name = fmt.Sprintf("%s#%d", name, seen[name])
		}
		t := DefaultTarget
		if v, ok := opts.Targets[name]; ok {
			t = v
		}
		w.ops = append(w.ops, workload.Operation{
			Name: name, Target: t, Priority: 1,
			Description: fmt.Sprintf("pgbench script %s, weight %d", s.Name, s.Weight),
		})
	}
	for name := range opts.Targets {
		if !w.hasOp(name) {
			return nil, fmt.Errorf("--target %s: no script of that name (scripts: %s)", name, strings.Join(w.opNames(), ", "))
		}
	}
	total := 0
	for _, s := range opts.Scripts {
		total += s.Weight
	}
	if total <= 0 {
		return nil, errors.New("total script weight must not be zero")
	}
	// Script checks that depend on the query mode (pgbench makes them
	// while parsing: too many variable references for -M prepared).
	if _, err := script.NewClient(opts.Scripts, script.Options{Mode: opts.Mode}); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *Workload) hasOp(name string) bool {
	for _, op := range w.ops {
		if op.Name == name {
			return true
		}
	}
	return false
}

func (w *Workload) opNames() []string {
	out := make([]string, len(w.ops))
	for i, op := range w.ops {
		out[i] = op.Name
	}
	return out
}

// OperationName is the key operation name of a script: the built-in's
// pgbench name ("tpcb-like", "simple-update", "select-only") when s is a
// built-in, "stdin" for a script read from standard input (-f -), else
// the file's base name without its extension.
func OperationName(s *script.Script) (name string, builtin bool) {
	if s.Name == "-" {
		return "stdin", false
	}
	for _, b := range script.BuiltinNames() {
		_, desc, err := script.BuiltinText(b)
		if err == nil && desc == s.Name {
			return b, true
		}
	}
	base := filepath.Base(s.Name)
	return strings.TrimSuffix(base, filepath.Ext(base)), false
}

// Name is the workload's registry name: `--workload pgbench`.
const Name = "pgbench"

// Name implements workload.Workload.
func (w *Workload) Name() string { return Name }

// Operations implements workload.Workload: one per script.
func (w *Workload) Operations() []workload.Operation { return w.ops }

// Roles implements workload.Workload: one role whose mix is the scripts'
// weights (pgbench's weighted choice per transaction).
func (w *Workload) Roles() []workload.Role {
	mix := map[string]float64{}
	for i, s := range w.opts.Scripts {
		if s.Weight > 0 {
			mix[w.ops[i].Name] = float64(s.Weight)
		}
	}
	return []workload.Role{{Name: "client", Share: 1, Mix: mix}}
}

// Setup implements workload.Workload. With built-in scripts it finds the
// pgbench tables and reads the scale from pgbench_branches (pgbench does
// the same); when the database has no pgbench tables they are created at
// Options.Scale only with opts.Force (given for the throwaway server's
// database, or by --force), otherwise Setup returns an error saying how to
// create them. Unless NoVacuum it then
// vacuums like pgbench ("starting vacuum...end."). It also draws the
// clients' random states in pgbench's order.
func (w *Workload) Setup(ctx context.Context, pool *pgxpool.Pool, opts workload.SetupOptions) error {
	say := func(format string, args ...any) {
		if opts.Progress != nil {
			opts.Progress(format, args...)
		}
	}
	scale, _, ok, err := tables.Installed(ctx, pool)
	if err != nil {
		return err
	}
	if !opts.Force && !w.opts.PgbenchSemantics && w.builtin {
		// The built-in scripts write pgbench_history and the balances:
		// not next to objects erplab did not create, unless --force. A
		// custom script (-f) writes what its author wrote, as pgbench.
		foreign, err := tables.ForeignForRun(ctx, pool)
		if err != nil {
			return err
		}
		if len(foreign) > 0 {
			return workload.ForeignError("pgbench setup", foreign)
		}
	}
	if !ok && opts.Force {
		// Only on the throwaway server (whose database erplab made) or
		// with --force: never create tables in a user's database unasked.
		init := w.opts.Init
		init.Scale = w.opts.Scale
		init.Force = true
		init.Progress = opts.Progress
		say("no pgbench tables: creating them at scale %d", init.Scale)
		if _, err := tables.Init(ctx, pool, init); err != nil {
			return err
		}
		scale, ok = init.Scale, true
	}
	switch {
	case w.builtin && !ok:
		return errors.New("no pgbench tables in this database: create them with erplab init --workload pgbench -s N (or pgbench -i), or pass --force to let erplab create them")
	case w.builtin:
		w.scale, w.scaleSource = scale, "pgbench_branches"
		if w.opts.ScaleGiven && w.opts.Scale != scale {
			say("scale option ignored, using count from pgbench_branches table (%d)", scale)
		}
	default:
		w.scale, w.scaleSource = w.opts.Scale, "-s"
	}
	if !w.opts.NoVacuum && ok {
		say("starting vacuum...")
		if err := tables.Vacuum(ctx, pool, false); err != nil {
			say("%v (ignoring this error and continuing anyway)", err)
		}
		say("end.")
	}
	// Random states in pgbench 15's order: clients, default_seed, threads.
	seeds := expr.NewSeeds(w.opts.RandomSeed)
	w.rands = seeds.ClientRand(w.opts.Clients)
	if _, given := w.opts.Defines["default_seed"]; !given {
		w.defaultSeed = seeds.DefaultSeed()
	}
	return nil
}

// Execute implements workload.Workload: one transaction of script op for
// the VU's pgbench client (created at its first transaction; VU n is
// client n-1). A failed transaction returns its error, which carries the
// SQLSTATE of a server error. After an error other than a serialization
// failure or deadlock (retried up to MaxTries) the client stops for the
// rest of the run, as pgbench aborts it, unless ContinueOnError.
func (w *Workload) Execute(ctx context.Context, conn *pgx.Conn, vu *workload.VU, op int) error {
	cl, _ := vu.State.(*client)
	if cl == nil {
		var err error
		if cl, err = w.newClient(vu.ID - 1); err != nil {
			return err
		}
		vu.State = cl
	}
	if cl.aborted != nil {
		// the previous transaction was counted and the client aborted
		return fmt.Errorf("client %d aborted: %w: %w", vu.ID-1, workload.ErrStopVU, cl.aborted)
	}
	pc := conn.PgConn()
	if w.opts.Connect != nil {
		t0 := time.Now()
		c, err := pgconn.ConnectConfig(ctx, w.opts.Connect)
		w.connectNs.Add(int64(time.Since(t0)))
		w.connections.Add(1)
		if err != nil {
			w.abort(vu.ID - 1)
			if w.opts.Log != nil {
				fmt.Fprintf(w.opts.Log, "pgbench: error: %s\npgbench: error: client %d aborted while establishing connection\n", ConnectMessage(err), vu.ID-1)
			}
			return fmt.Errorf("client %d aborted: %w: %w", vu.ID-1, workload.ErrStopVU, err)
		}
		defer c.Close(context.WithoutCancel(ctx))
		pc = c
	}
	var start time.Time // read only for the -l log: a clock reading per transaction less
	if w.opts.OnTransaction != nil {
		start = time.Now()
	}
	res := cl.c.Run(ctx, pc, op)
	cl.lastRetries = res.Retries()
	if w.opts.OnTransaction != nil && ctx.Err() == nil {
		retryable := res.SQLState == script.SerializationFailure || res.SQLState == script.DeadlockDetected
		if !res.Failed || retryable || w.opts.ContinueOnError {
			w.opts.OnTransaction(Transaction{Client: vu.ID - 1, Script: op, Start: start, End: time.Now(),
				Scheduled: vu.Scheduled, SQLState: res.SQLState, Retries: res.Retries()})
		}
	}
	if res.Incomplete {
		// pgbench counts the transaction, then aborts the client: the
		// next Execute stops the VU
		w.abort(vu.ID - 1)
		w.logAbort(vu.ID-1, op, res.Err)
		cl.aborted = res.Err
		return nil
	}
	if res.Failed || res.Err != nil {
		err := res.Err
		if err == nil {
			err = fmt.Errorf("transaction failed (SQLSTATE %s)", res.SQLState)
		}
		retryable := res.SQLState == script.SerializationFailure || res.SQLState == script.DeadlockDetected
		if ctx.Err() == nil && (!retryable || w.opts.Log == nil) {
			w.noteError(vu.ID-1, op, err)
		}
		if !w.opts.ContinueOnError && !retryable {
			if ctx.Err() == nil {
				w.abort(vu.ID - 1)
				w.logAbort(vu.ID-1, op, err)
			}
			return fmt.Errorf("client %d aborted: %w: %w", vu.ID-1, workload.ErrStopVU, err)
		}
		return err
	}
	return nil
}

// abort counts an aborted client and tells OnAbort.
func (w *Workload) abort(client int) {
	w.aborted.Add(1)
	if w.opts.OnAbort != nil {
		w.opts.OnAbort(client)
	}
}

// logAbort writes pgbench's lines for an abort to Options.Log.
func (w *Workload) logAbort(client, op int, err error) {
	if w.opts.Log == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range script.AbortLines(client, op, w.opts.Scripts[op], err) {
		fmt.Fprintln(w.opts.Log, l)
	}
}

// AbortedClients is the number of clients aborted so far (pgbench 15-17
// then exits with status 2).
func (w *Workload) AbortedClients() int64 { return w.aborted.Load() }

// ConnectTime is the time spent opening the connections of Options.Connect
// and their number.
func (w *Workload) ConnectTime() (time.Duration, int64) {
	return time.Duration(w.connectNs.Load()), w.connections.Load()
}

// noteError keeps the distinct error messages per key operation with
// their counts, and writes each one to Options.Debug when it first occurs
// (pgbench prints every error as it happens; erplab prints each distinct
// one once, so a failing script does not flood the terminal).
func (w *Workload) noteError(client, op int, err error) {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.errs {
		if w.errs[i].op == op && w.errs[i].msg == msg {
			w.errs[i].count++
			return
		}
	}
	if len(w.errs) >= maxDistinctErrors {
		return
	}
	w.errs = append(w.errs, errorSeen{op: op, msg: msg, count: 1})
	if w.opts.Log != nil {
		return // the pgbench lines say it
	}
	fmt.Fprintf(w.opts.Debug, "erplab: client %d script %s: %s\n", client, w.ops[op].Name, msg)
}

// Errors returns the distinct error messages of key operation op with
// their counts, in order of first occurrence.
func (w *Workload) Errors(op int) (msgs []string, counts []int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.errs {
		if e.op == op {
			msgs = append(msgs, e.msg)
			counts = append(counts, e.count)
		}
	}
	return msgs, counts
}

// LastRetries implements the engine's retry reporting: the retries of the
// VU's last transaction (pgbench --max-tries).
func (w *Workload) LastRetries(vu *workload.VU) int {
	if cl, ok := vu.State.(*client); ok {
		return cl.lastRetries
	}
	return 0
}

func (w *Workload) newClient(id int) (*client, error) {
	var rnd *expr.PRNG
	if id >= 0 && id < len(w.rands) {
		rnd = w.rands[id]
	} else {
		// More VUs than -c (a --stage profile): later clients continue
		// the sequence deterministically.
		rnd = expr.NewPRNG(w.opts.RandomSeed ^ uint64(id+1)*0x9E3779B97F4A7C15)
	}
	maxTries := w.opts.MaxTries
	c, err := script.NewClient(w.opts.Scripts, script.Options{
		Mode: w.opts.Mode, ClientID: id, Scale: w.scale, Defines: w.opts.Defines,
		RandomSeed: int64(w.opts.RandomSeed), DefaultSeed: w.defaultSeed, Rand: rnd,
		MaxTries: maxTries, PerCommand: w.opts.PerCommand,
		Debug: w.opts.Debug, ShellOut: w.opts.ShellOut, ShellErr: w.opts.Debug,
		Trace: w.opts.Trace, VerboseErrors: w.opts.VerboseErrors, Log: w.opts.Log,
	})
	if err != nil {
		return nil, err
	}
	cl := &client{c: c}
	w.mu.Lock()
	w.clients = append(w.clients, cl)
	w.mu.Unlock()
	return cl, nil
}

// CommandStats merges every client's per-command figures of script i.
func (w *Workload) CommandStats(i int) []script.CommandStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]script.CommandStats, len(w.opts.Scripts[i].Commands))
	for _, cl := range w.clients {
		script.MergeStats(out, cl.c.Stats(i))
	}
	return out
}

// Describe implements workload.Describer: what the run ran on.
func (w *Workload) Describe() map[string]any {
	scripts := make([]map[string]any, len(w.opts.Scripts))
	for i, s := range w.opts.Scripts {
		scripts[i] = map[string]any{"operation": w.ops[i].Name, "script": s.Name, "weight": s.Weight}
	}
	d := map[string]any{
		"scale": w.scale, "scale_from": w.scaleSource, "query_mode": w.opts.Mode.String(),
		"random_seed": w.opts.RandomSeed, "max_tries": w.opts.MaxTries, "clients": w.opts.Clients,
		"scripts": scripts,
	}
	if len(w.opts.Defines) > 0 {
		keys := make([]string, 0, len(w.opts.Defines))
		for k := range w.opts.Defines {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		defs := make([]string, len(keys))
		for i, k := range keys {
			defs[i] = k + "=" + w.opts.Defines[k]
		}
		d["defines"] = defs
	}
	errs := map[string]any{}
	for i := range w.ops {
		msgs, counts := w.Errors(i)
		if len(msgs) == 0 {
			continue
		}
		list := make([]map[string]any, len(msgs))
		for j := range msgs {
			list[j] = map[string]any{"message": msgs[j], "count": counts[j]}
		}
		errs[w.ops[i].Name] = list
	}
	if len(errs) > 0 {
		d["errors"] = errs
	}
	if w.opts.PerCommand {
		per := map[string]any{}
		for i, s := range w.opts.Scripts {
			stats := w.CommandStats(i)
			cmds := make([]map[string]any, len(s.Commands))
			for j, c := range s.Commands {
				st := stats[j]
				avg := 0.0
				if st.Count > 0 {
					avg = float64(st.SumUS) / 1000 / float64(st.Count)
				}
				cmds[j] = map[string]any{"command": c.FirstLine, "count": st.Count, "avg_ms": avg, "failures": st.Failures, "retries": st.Retries}
			}
			per[w.ops[i].Name] = cmds
		}
		d["per_command"] = per
	}
	return d
}

// Close releases the clients' resources.
func (w *Workload) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, cl := range w.clients {
		cl.c.Close()
	}
}

// VerifyData implements workload.DataVerifier: the built-in scripts need
// pgbench's tables; a custom script's needs are its author's (nil).
func (w *Workload) VerifyData(ctx context.Context, pool *pgxpool.Pool) error {
	if !w.builtin {
		return nil
	}
	_, _, ok, err := tables.Installed(ctx, pool)
	switch {
	case err != nil:
		return err
	case !ok:
		return errors.New("no pgbench tables in this database: create them once with erplab init --workload pgbench -s N (same --dsn) before the run")
	}
	return nil
}
