package replay

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/erplab/erplab/internal/capture"
	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/opmap"
	"github.com/erplab/erplab/internal/record"
	"github.com/erplab/erplab/internal/results"
)

// Result is what Run returns: the results document (extra.replay holds
// Fidelity) and the fidelity figures themselves.
type Result struct {
	Doc      *results.Document
	Fidelity Fidelity
}

// replay is one run's shared state.
type replay struct {
	opts   Options
	plan   *plan
	cfg    *pgconn.Config
	start  time.Time
	offset time.Duration
	rec    *record.Recorder
	tally  *tally
	mon    *monitor
	oids   map[string]uint32 // Prepare type names resolved on the target
	ops    *opmap.Map        // backend PID -> the group of the statement it runs
}

// Run replays the events of src onto opts.DSN and returns the results.
// It ends when every session has run its events, or when ctx is
// cancelled (the document's status is then "interrupted" and the events
// not run are counted as skipped). Errors are one line without passwords:
// a source error, a DSN that does not parse or a server that does not
// answer the monitor's connection.
func Run(ctx context.Context, src iter.Seq2[capture.Event, error], opts Options) (*Result, error) {
	p, opts, err := prepare(src, opts)
	if err != nil {
		return nil, err
	}
	cfg, err := pgconn.ParseConfig(opts.DSN)
	if err != nil {
		return nil, errors.New(conninfo.Describe(err))
	}
	mconn, err := conninfo.Connect(ctx, opts.DSN, opts.AppName+"-monitor", nil)
	if err != nil {
		return nil, err
	}
	defer mconn.Close(context.WithoutCancel(ctx))
	r := &replay{opts: opts, plan: p, cfg: cfg, tally: newTally(), offset: opts.offset(p)}
	if err := r.resolveTypes(ctx, mconn); err != nil {
		return nil, err
	}
	env := readEnvironment(ctx, mconn)
	r.mon = newMonitor(mconn, opts.Poll, opts.Margin, r.tally)
	rctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	r.tally.maxNew, r.tally.atMax = opts.MaxNewErrors, func(n int64) {
		abort(fmt.Errorf("%d statements failed with errors the capture did not have (at most %d allowed)", n, n))
	}
	r.start = time.Now()
	r.ops = opmap.New(p.groupNames())
	if opts.OnStart != nil {
		opts.OnStart(r.start, r.ops)
	}
	r.rec = record.New(p.opInfos(), r.start, 0, opts.Interval)
	r.runSessions(rctx)
	end := time.Now()
	r.intervals(r.rec.Finish(end))
	status := results.StatusCompleted
	switch {
	case ctx.Err() != nil:
		status = results.StatusInterrupted
	case rctx.Err() != nil:
		status = results.StatusAborted.Because(context.Cause(rctx).Error())
	}
	doc, fid := r.document(env, end, status)
	return &Result{Doc: doc, Fidelity: fid}, nil
}

// prepare reads src into a plan: its sessions' steps resolved, ordered
// (the gates) and grouped into key operations, with opts completed.
func prepare(src iter.Seq2[capture.Event, error], opts Options) (*plan, Options, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, opts, err
	}
	p, err := collect(src)
	if err != nil {
		return nil, opts, err
	}
	p.resolve()
	p.order()
	p.groupSteps(opts)
	return p, opts, nil
}

// runSessions runs every copy of every session, the monitor beside them,
// and the recorder's intervals, until the sessions end.
func (r *replay) runSessions(ctx context.Context) {
	mctx, stop := context.WithCancel(ctx)
	var aux sync.WaitGroup
	aux.Go(func() { r.mon.run(mctx) })
	aux.Go(func() { r.tick(mctx) })
	var runners []*runner
	for k := range r.opts.UsersX {
		var g *gates
		if r.opts.Order == OrderCapture {
			g = newGates(r.plan)
		}
		for _, s := range r.plan.sessions {
			ru := newRunner(r, s, k, g)
			r.mon.add(ru)
			runners = append(runners, ru)
		}
		for why, n := range r.plan.skipped {
			r.tally.skipN(why, n)
		}
	}
	r.launch(ctx, runners)
	stop()
	aux.Wait()
}

// launch starts each runner when its first step is due (at once when
// ctx ends: the runner then counts its steps as skipped), so that only
// the sessions of the moment hold a goroutine, and waits for them all.
func (r *replay) launch(ctx context.Context, runners []*runner) {
	first := func(ru *runner) time.Time {
		if len(ru.sess.steps) == 0 {
			return r.start
		}
		return r.due(ru.copy, &ru.sess.steps[0])
	}
	slices.SortStableFunc(runners, func(a, b *runner) int { return first(a).Compare(first(b)) })
	var wg sync.WaitGroup
	for _, ru := range runners {
		if d := time.Until(first(ru)); d > 0 && ctx.Err() == nil {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		wg.Go(func() { ru.run(ctx) })
	}
	wg.Wait()
}

// tick closes the recorder's intervals until ctx ends.
func (r *replay) tick(ctx context.Context) {
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			r.intervals(r.rec.Tick(now))
		}
	}
}

// intervals hands closed intervals to Options.OnInterval, then the
// figures so far to Options.OnProgress.
func (r *replay) intervals(ivs []results.Interval) {
	if r.opts.OnInterval != nil {
		for _, iv := range ivs {
			r.opts.OnInterval(iv)
		}
	}
	if r.opts.OnProgress != nil && len(ivs) > 0 {
		p := r.tally.progress()
		p.Elapsed = time.Since(r.start)
		r.opts.OnProgress(p)
	}
}

// due is when copy k should send st: its captured time from the
// capture's first event divided by Speed, after the copy's offset.
func (r *replay) due(k int, st *step) time.Time {
	at := r.start.Add(time.Duration(k) * r.offset)
	if r.opts.Speed > 0 {
		at = at.Add(time.Duration(float64(st.ev.T-r.plan.t0) / r.opts.Speed * float64(time.Microsecond)))
	}
	return at
}

// observe records a replayed step: its latency in its group, its
// fidelity to the capture, its lag behind schedule.
func (r *replay) observe(k int, st *step, sess string, begin, end time.Time, out outcome) {
	if st.group >= 0 {
		r.rec.Record(record.Sample{Op: st.group, Start: begin, DB: end.Sub(begin), SQLState: out.sqlState})
	}
	r.tally.statement(sess, st, out, begin.Sub(r.due(k, st)), r.opts.Speed > 0)
}

// resolveTypes finds the OID of every Prepare type name on the target,
// once per name; a name the target does not know is warned about once
// and its parameters left for the server to infer (OID 0).
func (r *replay) resolveTypes(ctx context.Context, conn *pgx.Conn) error {
	r.oids = map[string]uint32{}
	for _, name := range r.plan.typeNames {
		var oid uint32
		err := conn.QueryRow(ctx, "SELECT $1::regtype::oid", name).Scan(&oid)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr):
			r.tally.unknownType(name)
			r.opts.Warn(fmt.Sprintf("type %q is unknown on the target (%s): its parameters are left for the server to infer", name, pgErr.Message))
		case err != nil:
			return fmt.Errorf("resolve type %q: %s", name, conninfo.Describe(err))
		}
		r.oids[name] = oid
	}
	return nil
}

// paramOIDs are a Prepare's parameter types: the captured OIDs, else the
// type names resolved on the target.
func (r *replay) paramOIDs(oids []uint32, names []string) []uint32 {
	if len(oids) > 0 || len(names) == 0 {
		return oids
	}
	out := make([]uint32, len(names))
	for i, n := range names {
		out[i] = r.oids[n]
	}
	return out
}
