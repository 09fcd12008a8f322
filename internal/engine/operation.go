package engine

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/opmap"
	"github.com/erplab/erplab/internal/record"
	"github.com/erplab/erplab/internal/workload"
)

// One key operation on the pool, recorded: what every executor's VUs run.

// operation runs one key operation for vu and records it; sched is the
// arrival's scheduled start in the open model, zero in the closed model.
// It returns the VU's own connection (Connections == 0; nil when it was
// lost), a pause to take instead of the think time (after a failed
// connect, so that VUs do not spin on a dead server), and what to do
// next: stepEnding when the run is ending (the operation was cut short
// and counted as cancelled), stepAborted when Execute's error wraps
// workload.ErrStopVU (the failure is recorded; the VU must stop).
func (e *run) operation(ctx context.Context, vu *workload.VU, op int, own *pgxpool.Conn, sched time.Time) (*pgxpool.Conn, time.Duration, step) {
	e.inflight.Add(1)
	defer e.inflight.Add(-1)
	now := time.Now()
	t := opTimes{began: now, start: now, t0: now}
	conn := own
	if conn == nil {
		var err error
		if conn, err = e.acquire(ctx, &t); err != nil {
			if ctx.Err() != nil {
				e.cutShort(op, t.began, sched)
				return nil, 0, stepEnding
			}
			e.fail(op, t.start, sched, t.wait, 0, 0, err)
			return nil, time.Second, stepNext
		}
	}
	err := e.execute(ctx, conn, vu, op, sched)
	return e.settle(ctx, conn, vu, op, sched, &t, err)
}

// opTimes are an operation's clock readings: began is the one full
// reading (wall and monotonic clock, time.Now); the others are began plus
// the monotonic time since (time.Since reads only the monotonic clock),
// so an operation reads the clock twice in all, three times with a pool
// wait.
type opTimes struct {
	began time.Time     // when the VU asked: a cut-short operation's elapsed time runs from it
	start time.Time     // the response time's start
	t0    time.Time     // the execution proper's start; t0 - start is the pool wait
	wait  time.Duration // the pool wait
}

// acquire borrows a connection from the pool and notes the wait in t. A
// VU's own connection (Connections == 0) is its log-in, not a queue: the
// operation starts afresh after it (in the open model the log-in counts
// in the schedule lag).
func (e *run) acquire(ctx context.Context, t *opTimes) (*pgxpool.Conn, error) {
	e.waiters.Add(1)
	conn, err := e.pool.Acquire(ctx)
	e.waiters.Add(-1)
	t.t0 = t.began.Add(time.Since(t.began))
	t.wait = t.t0.Sub(t.start)
	if e.cfg.Connections == 0 {
		t.wait, t.start = 0, t.t0
	}
	return conn, err
}

// execute runs operation op of vu on conn, telling the watch, Config.Ops
// and the VU's statement tracer what runs where while it does.
func (e *run) execute(ctx context.Context, conn *pgxpool.Conn, vu *workload.VU, op int, sched time.Time) error {
	pc := conn.Conn().PgConn()
	pid := pc.PID()
	e.watch.enter(pc)
	e.cfg.Ops.Begin(pid, op)
	var vt *vuTrace
	if e.cfg.Ops != nil {
		if vt = traceOf(ctx); vt != nil {
			vt.op = op
		}
	}
	vu.Scheduled = sched
	err := e.cfg.Workload.Execute(ctx, conn.Conn(), vu, op)
	if vt != nil {
		vt.op = opmap.Idle
	}
	e.cfg.Ops.End(pid)
	e.watch.leave(pc)
	return err
}

// settle records an executed operation, err its Execute's error, and
// decides what becomes of its connection and of the VU (see operation).
func (e *run) settle(ctx context.Context, conn *pgxpool.Conn, vu *workload.VU, op int, sched time.Time, t *opTimes, err error) (*pgxpool.Conn, time.Duration, step) {
	end := t.began.Add(time.Since(t.began))
	db := end.Sub(t.t0)
	retries := 0
	if e.retries != nil {
		retries = e.retries.LastRetries(vu)
	}
	switch {
	case ctx.Err() != nil:
		// The run is ending: the operation was cut short, not failed.
		e.cutShort(op, t.began, sched)
		conn.Conn().Close(context.Background()) //nolint:errcheck // discarded either way
		conn.Release()
		return nil, 0, stepEnding
	case err != nil:
		e.fail(op, t.start, sched, t.wait, db, retries, err)
		next := stepNext
		if errors.Is(err, workload.ErrStopVU) {
			next = stepAborted
		}
		if !healthy(ctx, conn.Conn()) {
			conn.Conn().Close(ctx) //nolint:errcheck // the pool drops closed connections
			conn.Release()
			return nil, 0, next
		}
		return e.keep(conn), 0, next
	default:
		e.lastOK.Store(end.UnixNano())
		e.failSince.Store(0)
		e.watch.event(end)
		e.record(record.Sample{Op: op, Start: t.start, Scheduled: sched, Wait: t.wait, DB: db, Retries: retries})
		return e.keep(conn), 0, stepNext
	}
}

// keep is what the VU keeps of conn after an operation: conn itself when
// it is the VU's own (Connections == 0), nil when conn goes back to the
// pool.
func (e *run) keep(c *pgxpool.Conn) *pgxpool.Conn {
	if e.cfg.Connections == 0 {
		return c
	}
	c.Release()
	return nil
}

// release returns a VU's own connection, if it has one, at its end.
func release(own *pgxpool.Conn) {
	if own != nil {
		own.Release()
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

// cutShort counts an operation that the end of the run cut short and
// hands it to the recorder, which scores it frustrated when it has
// already run longer than 4T (record.Recorder.RecordCutShort).
func (e *run) cutShort(op int, start, sched time.Time) {
	e.cancelled.Add(1)
	e.rec.RecordCutShort(op, start, sched, time.Now())
}

func (e *run) record(s record.Sample) {
	e.rec.Record(s)
	if e.cfg.OnSample != nil {
		e.cfg.OnSample(s)
	}
}

func (e *run) fail(op int, start, sched time.Time, wait, db time.Duration, retries int, err error) {
	code := SQLState(err)
	e.errors.Add(1)
	now := time.Now()
	e.watch.event(now)
	switch {
	case ComingBack(err):
		// Starting up or in recovery: not gone, on its way back.
		e.watch.comingBack(now)
		e.failSince.CompareAndSwap(0, now.UnixNano())
	case ConnectionFailure(err):
		if ShuttingDown(err) {
			e.watch.shuttingDown(now)
		}
		e.lastErr.Store(strings.Join(strings.Fields(err.Error()), " "))
		e.failSince.CompareAndSwap(0, now.UnixNano())
	default:
		// The server answered: it is there.
		e.lastOK.Store(now.UnixNano())
		e.failSince.Store(0)
	}
	e.record(record.Sample{Op: op, Start: start, Scheduled: sched, Wait: wait, DB: db, SQLState: code, Message: serverMessage(err), Retries: retries})
}

// serverMessage is the server's error message when it sent one, "" for
// client-side errors (whose text may name hosts and users).
func serverMessage(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Message
	}
	return ""
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
