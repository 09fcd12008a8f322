// Package engine drives a load test in the closed model: virtual users
// (VUs) follow a staged profile, each repeatedly picks a key operation from
// its role's mix, borrows a database connection from a pool for the length
// of that one operation (like a call into a 1C application server), runs
// it, returns the connection and thinks. Time waiting for a connection and
// time in the database are measured apart and handed to a record.Recorder.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/record"
	"github.com/erplab/erplab/internal/workload"
)

// Client-side error codes recorded where the server sent no SQLSTATE. They
// reuse PostgreSQL's codes of the same meaning (Appendix A, "PostgreSQL
// Error Codes").
const (
	// CodeConnectionFailure: the connection was lost or could not be made.
	CodeConnectionFailure = "08006"
	// CodeClient: any other error raised on the client side.
	CodeClient = "client"
)

// Config describes one load test.
type Config struct {
	Workload workload.Workload
	// Roles of the virtual users (the workload's unless --mix overrode
	// them).
	Roles []workload.Role
	// Stages is the VU profile; its total length is the run length.
	Stages []Stage
	// Warmup: operations started in the first Warmup of the run are
	// recorded apart and not scored.
	Warmup time.Duration
	// Think is the think time between operations of one VU.
	Think ThinkTime
	// Connections is the pool size M; 0 gives every VU its own connection
	// for its whole life (no pool wait).
	Connections int
	// MaxErrors stops the run once this many operations have failed
	// (0 = never).
	MaxErrors int64
	// Seed makes the VUs' random choices repeatable.
	Seed uint64
	// GracefulStop is how long VUs may finish their current operation at
	// the end of the run before it is cancelled (cancelled operations are
	// not recorded).
	GracefulStop time.Duration
	// ServerGone: when every operation has failed with a connection error
	// for this long, the run is aborted (default 10 s).
	ServerGone time.Duration
	// OnInterval receives every closed interval of the time series (from
	// the controller goroutine), e.g. to stream it to disk.
	OnInterval func(record.Interval)
	// Tick is how often the controller adjusts VUs and closes intervals
	// (default 100 ms).
	Tick time.Duration
}

// Outcome says how the run ended.
type Outcome struct {
	// Status is "completed", "interrupted" or "aborted: <reason>".
	Status string
	// Elapsed is the wall time from start to the last VU's exit.
	Elapsed time.Duration
	// Cancelled counts operations cut short by the end of the run or by
	// an interrupt; they are not in the results.
	Cancelled int64
	// MaxVUs is the largest number of VUs that ran at once.
	MaxVUs int
}

// ErrAborted is wrapped by Run's error when the run stopped early on its
// own (max errors reached, server gone).
var ErrAborted = errors.New("run aborted")

// Run executes the load profile against pool until the stages end or ctx
// is cancelled (an interrupt: Outcome.Status "interrupted", nil error).
// The pool must allow at least cfg.Connections connections, or the
// maximum VU count when cfg.Connections is 0. rec must have been created
// with the workload's operations, in order.
func Run(ctx context.Context, pool *pgxpool.Pool, cfg Config, rec *record.Recorder) (Outcome, error) {
	if cfg.Tick <= 0 {
		cfg.Tick = 100 * time.Millisecond
	}
	if cfg.ServerGone <= 0 {
		cfg.ServerGone = 10 * time.Second
	}
	if cfg.GracefulStop <= 0 {
		cfg.GracefulStop = 10 * time.Second
	}
	mixes, err := buildMixes(cfg.Workload.Operations(), cfg.Roles)
	if err != nil {
		return Outcome{}, err
	}
	e := &run{cfg: cfg, pool: pool, rec: rec, mixes: mixes}
	e.lastOK.Store(rec.Start().UnixNano())
	return e.loop(ctx)
}

type mix struct {
	role string
	ops  []int
	cum  []float64 // cumulative weights
}

func (m *mix) pick(r *rand.Rand) int {
	x := r.Float64() * m.cum[len(m.cum)-1]
	for i, c := range m.cum {
		if x < c {
			return m.ops[i]
		}
	}
	return m.ops[len(m.ops)-1]
}

func buildMixes(ops []workload.Operation, roles []workload.Role) ([]*mix, error) {
	idx := map[string]int{}
	for i, op := range ops {
		idx[op.Name] = i
	}
	var out []*mix
	for _, r := range roles {
		m := &mix{role: r.Name}
		total := 0.0
		// iterate in operation order so the mix is deterministic
		for i, op := range ops {
			w, ok := r.Mix[op.Name]
			if !ok || w <= 0 {
				continue
			}
			total += w
			m.ops = append(m.ops, i)
			m.cum = append(m.cum, total)
		}
		for name := range r.Mix {
			if _, ok := idx[name]; !ok {
				return nil, fmt.Errorf("role %s: unknown operation %q", r.Name, name)
			}
		}
		if total <= 0 {
			return nil, fmt.Errorf("role %s: no operation with positive weight", r.Name)
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, errors.New("no roles to run")
	}
	return out, nil
}

type vuHandle struct {
	stop chan struct{}
	done chan struct{}
}

type run struct {
	cfg   Config
	pool  *pgxpool.Pool
	rec   *record.Recorder
	mixes []*mix

	waiters   atomic.Int64
	active    atomic.Int64
	inflight  atomic.Int64 // VUs inside an operation (waiting or executing)
	errors    atomic.Int64
	cancelled atomic.Int64
	lastOK    atomic.Int64 // unix ns of the last successful operation
	lastErr   atomic.Value // string: last connection error text

	assigned []float64 // VUs assigned per role (smooth weighted round robin)
}

// roleFor assigns the next VU's role so that the counts follow the roles'
// shares as closely as possible at every VU count (deficit round robin).
func (e *run) roleFor(n int) *mix {
	if e.assigned == nil {
		e.assigned = make([]float64, len(e.mixes))
	}
	total := 0.0
	for _, r := range e.cfg.Roles {
		total += r.Share
	}
	best, bestDef := 0, -1e18
	for i, r := range e.cfg.Roles {
		def := r.Share/total*float64(n) - e.assigned[i]
		if def > bestDef {
			best, bestDef = i, def
		}
	}
	e.assigned[best]++
	return e.mixes[best]
}

func (e *run) loop(ctx context.Context) (Outcome, error) {
	start := e.rec.Start()
	runCtx, cancelOps := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelOps()
	var (
		vus    []*vuHandle
		wg     sync.WaitGroup
		nextID = 1
		out    = Outcome{Status: "completed"}
		abort  error
	)
	stopLast := func() {
		h := vus[len(vus)-1]
		vus = vus[:len(vus)-1]
		close(h.stop)
	}
	ticker := time.NewTicker(e.cfg.Tick)
	defer ticker.Stop()
	flush := func(now time.Time) {
		e.rec.SetGauges(int(e.active.Load()), int(e.waiters.Load()), int(e.inflight.Load()))
		for _, iv := range e.rec.Tick(now) {
			if e.cfg.OnInterval != nil {
				e.cfg.OnInterval(iv)
			}
		}
	}
control:
	for {
		now := time.Now()
		target, done := TargetAt(e.cfg.Stages, now.Sub(start))
		if done {
			break
		}
		for len(vus) < target {
			h := &vuHandle{stop: make(chan struct{}), done: make(chan struct{})}
			vus = append(vus, h)
			vu := &workload.VU{
				ID:   nextID,
				Rand: rand.New(rand.NewPCG(e.cfg.Seed, uint64(nextID))),
			}
			m := e.roleFor(nextID)
			vu.Role = m.role
			nextID++
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer close(h.done)
				e.vuLoop(runCtx, vu, m, h.stop)
			}()
		}
		for len(vus) > target {
			stopLast()
		}
		if len(vus) > out.MaxVUs {
			out.MaxVUs = len(vus)
		}
		flush(now)
		if e.cfg.MaxErrors > 0 && e.errors.Load() >= e.cfg.MaxErrors {
			abort = fmt.Errorf("%w: %d operations failed (--max-errors %d)", ErrAborted, e.errors.Load(), e.cfg.MaxErrors)
			break
		}
		if last := time.Unix(0, e.lastOK.Load()); e.errors.Load() > 0 && now.Sub(last) > e.cfg.ServerGone {
			if msg, _ := e.lastErr.Load().(string); msg != "" {
				abort = fmt.Errorf("%w: lost the server: no operation succeeded for %s; last error: %s", ErrAborted, now.Sub(last).Round(time.Second), msg)
				break
			}
		}
		select {
		case <-ctx.Done():
			out.Status = "interrupted"
			cancelOps()
			break control
		case <-ticker.C:
		}
	}
	// Stop all VUs; let in-flight operations finish within the grace
	// period unless interrupted.
	for len(vus) > 0 {
		stopLast()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	grace := time.NewTimer(e.cfg.GracefulStop)
	defer grace.Stop()
	if abort != nil {
		cancelOps()
	}
wait:
	for {
		select {
		case <-finished:
			break wait
		case <-grace.C:
			cancelOps()
		case <-ctx.Done():
			if out.Status == "completed" {
				out.Status = "interrupted"
			}
			cancelOps()
			<-finished
			break wait
		case <-ticker.C:
			e.rec.SetGauges(int(e.active.Load()), int(e.waiters.Load()), int(e.inflight.Load()))
		}
	}
	end := time.Now()
	// Close the last, possibly partial, interval so nothing recorded is
	// left out of the series.
	e.rec.SetGauges(0, 0, 0)
	for _, iv := range e.rec.Finish(end) {
		if e.cfg.OnInterval != nil {
			e.cfg.OnInterval(iv)
		}
	}
	out.Elapsed = end.Sub(start)
	out.Cancelled = e.cancelled.Load()
	if abort != nil {
		out.Status = "aborted: " + abortReason(abort)
		return out, abort
	}
	return out, nil
}

func abortReason(err error) string {
	s := err.Error()
	prefix := ErrAborted.Error() + ": "
	if len(s) > len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):]
	}
	return s
}

func (e *run) vuLoop(ctx context.Context, vu *workload.VU, m *mix, stop <-chan struct{}) {
	e.active.Add(1)
	defer e.active.Add(-1)
	// A random first pause spreads VUs that start together, so they do
	// not march in lock step.
	if mean := e.cfg.Think.Mean(); mean > 0 {
		if !sleep(ctx, stop, time.Duration(vu.Rand.Int64N(int64(mean)+1))) {
			return
		}
	}
	// own is the VU's own connection when Connections == 0.
	var own *pgxpool.Conn
	defer func() {
		if own != nil {
			own.Release()
		}
	}()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		var pause time.Duration
		var ok bool
		if own, pause, ok = e.operation(ctx, vu, m.pick(vu.Rand), own); !ok {
			return
		}
		if pause == 0 {
			pause = e.cfg.Think.Draw(vu.Rand)
		}
		if !sleep(ctx, stop, pause) {
			return
		}
	}
}

// operation runs one key operation for vu and records it. It returns the
// VU's own connection (Connections == 0; nil when it was lost), a pause
// to take instead of the think time (after a failed connect, so that VUs
// do not spin on a dead server), and false when the run is ending.
func (e *run) operation(ctx context.Context, vu *workload.VU, op int, own *pgxpool.Conn) (*pgxpool.Conn, time.Duration, bool) {
	e.inflight.Add(1)
	defer e.inflight.Add(-1)
	start := time.Now()
	conn, wait := own, time.Duration(0)
	if conn == nil {
		var err error
		e.waiters.Add(1)
		conn, err = e.pool.Acquire(ctx)
		e.waiters.Add(-1)
		wait = time.Since(start)
		if e.cfg.Connections == 0 {
			// A VU's own connection is its log-in, not a queue: the
			// operation starts afresh.
			wait, start = 0, time.Now()
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, 0, false
			}
			e.fail(op, start, wait, 0, err)
			return nil, time.Second, true
		}
	}
	keep := func(c *pgxpool.Conn) *pgxpool.Conn {
		if e.cfg.Connections == 0 {
			return c
		}
		c.Release()
		return nil
	}
	t0 := time.Now()
	err := e.cfg.Workload.Execute(ctx, conn.Conn(), vu, op)
	db := time.Since(t0)
	switch {
	case ctx.Err() != nil:
		// The run is ending: the operation was cut short, not failed.
		e.cancelled.Add(1)
		conn.Conn().Close(context.Background()) //nolint:errcheck // discarded either way
		conn.Release()
		return nil, 0, false
	case err != nil:
		e.fail(op, start, wait, db, err)
		if !healthy(ctx, conn.Conn()) {
			conn.Conn().Close(ctx) //nolint:errcheck // the pool drops closed connections
			conn.Release()
			return nil, 0, true
		}
		return keep(conn), 0, true
	default:
		e.lastOK.Store(time.Now().UnixNano())
		e.rec.Record(record.Sample{Op: op, Start: start, Wait: wait, DB: db})
		return keep(conn), 0, true
	}
}

// healthy reports whether conn can serve the next operation: open, and
// outside any transaction (a failed transaction is rolled back here).
func healthy(ctx context.Context, conn *pgx.Conn) bool {
	if conn.IsClosed() {
		return false
	}
	switch conn.PgConn().TxStatus() {
	case 'I':
		return true
	case 'T', 'E':
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := conn.Exec(rctx, "ROLLBACK")
		return err == nil
	default:
		return false
	}
}

func (e *run) fail(op int, start time.Time, wait, db time.Duration, err error) {
	code := SQLState(err)
	e.errors.Add(1)
	if ConnectionFailure(err) {
		e.lastErr.Store(strings.Join(strings.Fields(err.Error()), " "))
	} else {
		// The server answered: it is there.
		e.lastOK.Store(time.Now().UnixNano())
	}
	e.rec.Record(record.Sample{Op: op, Start: start, Wait: wait, DB: db, SQLState: code})
}

// SQLState classifies an operation error: the server's SQLSTATE when it
// sent one (also when it refused a new connection, e.g. 53300 too many
// clients, 28P01 bad password, 55000 database not accepting connections),
// CodeConnectionFailure for network errors and connects that got no
// answer, CodeClient otherwise.
func SQLState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	if ConnectionFailure(err) {
		return CodeConnectionFailure
	}
	return CodeClient
}

// ConnectionFailure reports whether err means the VU had or got no
// working connection: a failed connect (whatever the server said) or a
// network error on an open one. Such errors, and only they, count towards
// deciding that the server is gone.
func ConnectionFailure(err error) bool {
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08 (connection exception) and 57P01..57P03 (admin
		// shutdown, crash shutdown, cannot connect now): Appendix A.
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	var netErr net.Error
	if errors.As(err, &netErr) || pgconn.SafeToRetry(err) || errors.Is(err, net.ErrClosed) {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// sleep waits d unless stop or ctx ends first; it reports whether the VU
// should go on.
func sleep(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		select {
		case <-stop:
			return false
		case <-ctx.Done():
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	case <-ctx.Done():
		return false
	}
}
