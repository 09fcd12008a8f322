package replay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/erplab/erplab/internal/capture"
	"github.com/erplab/erplab/internal/conninfo"
)

// runner replays one copy of one captured session on a connection of its
// own: its steps in order, each when it is due (Speed) and its gates let
// it (OrderCapture).
type runner struct {
	r    *replay
	sess *session
	copy int
	name string // the session's id, and "#k" for copy k > 0
	g    *gates // nil with OrderNone
	conn *pgconn.PgConn
	// bypass: the watchdog released this session; its gates stay open
	// until its transaction ends.
	bypass bool

	// What the monitor reads: the statement in flight (seq 0: none) and
	// its captured duration, whether the runner is parked at a gate, and
	// the channel that releases it.
	seq      atomic.Uint64
	dur      atomic.Int64         // µs
	parkedAt atomic.Pointer[step] // the step parked at a gate, nil when not parked
	release  chan string
	next     uint64
}

func newRunner(r *replay, s *session, k int, g *gates) *runner {
	name := s.id
	if k > 0 {
		name += "#" + strconv.Itoa(k)
	}
	return &runner{r: r, sess: s, copy: k, name: name, g: g, release: make(chan string, 1)}
}

// errSession ends a session's replay: its connection failed or was lost.
type errSession struct{ reason string }

func (e errSession) Error() string { return e.reason }

// run replays the session; the steps it could not run are counted as
// skipped and let through the gates so the other sessions go on.
func (ru *runner) run(ctx context.Context) {
	defer ru.disconnect()
	for i := range ru.sess.steps {
		st := &ru.sess.steps[i]
		err := ru.pace(ctx, st)
		if err == nil {
			err = ru.gate(ctx, st)
		}
		if err == nil {
			err = ru.do(ctx, st)
		}
		if err != nil {
			reason := "interrupted"
			if es := (errSession{}); errors.As(err, &es) {
				reason = es.reason
			}
			ru.abandon(i, reason)
			return
		}
	}
}

// pace waits until st is due: its captured time from the capture's first
// event divided by Speed, after the copy's offset (at once when Speed is
// 0, after the offset only).
func (ru *runner) pace(ctx context.Context, st *step) error {
	d := time.Until(ru.r.due(ru.copy, st))
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gate waits at st's gates unless the session is released.
func (ru *runner) gate(ctx context.Context, st *step) error {
	if ru.g == nil || st.order < 0 || ru.bypass {
		return nil
	}
	drain(ru.release) // a release meant for an earlier park
	parked := func(on bool) {
		if on {
			ru.parkedAt.Store(st)
		} else {
			ru.parkedAt.Store(nil)
		}
	}
	by, err := ru.g.wait(ctx, st, ru.release, parked, ru.r.mon.kick)
	if err != nil {
		return err
	}
	drain(ru.release) // a release that came as the gate opened
	if by != "" {
		ru.bypass = true
		ru.r.tally.reorder(Reorder{Waiter: by, Released: ru.name, AtS: time.Since(ru.r.start).Seconds()})
	}
	return nil
}

// releaseIfParked lets a session parked at a gate go (the watchdog);
// waiter names the session that waited on it. Called with the monitor's
// lock held.
func (ru *runner) releaseIfParked(waiter string) {
	if ru.parkedAt.Load() == nil {
		return
	}
	select {
	case ru.release <- waiter:
	default: // already released
	}
}

// inFlight is the statement in flight (0: none) and its captured
// duration.
func (ru *runner) inFlight() (seq uint64, dur time.Duration) {
	return ru.seq.Load(), time.Duration(ru.dur.Load()) * time.Microsecond
}

// do runs one step.
func (ru *runner) do(ctx context.Context, st *step) error {
	switch st.ev.Kind {
	case capture.KindConnect:
		if ru.conn == nil {
			return ru.connect(ctx)
		}
		return nil
	case capture.KindDisconnect:
		ru.disconnect()
		return nil
	}
	if ru.conn == nil {
		if err := ru.connect(ctx); err != nil {
			return err
		}
	}
	return ru.statement(ctx, st)
}

// connect opens the session's connection: the DSN's server, user and
// database (the captured ones with KeepUser), the captured
// application_name.
func (ru *runner) connect(ctx context.Context) error {
	cfg := ru.r.cfg.Copy()
	cfg.RuntimeParams = map[string]string{}
	for k, v := range ru.r.cfg.RuntimeParams {
		cfg.RuntimeParams[k] = v
	}
	p := ru.sess.params
	cfg.RuntimeParams["application_name"] = ru.r.opts.AppName
	if v := p["application_name"]; v != "" {
		cfg.RuntimeParams["application_name"] = v
	}
	if ru.r.opts.KeepUser {
		cfg.User = cmp.Or(p["user"], cfg.User)
		cfg.Database = cmp.Or(p["database"], cfg.Database)
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conn, err := pgconn.ConnectConfig(cctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		ru.r.tally.connectFailed()
		ru.r.opts.Warn(fmt.Sprintf("session %s: %s", ru.name, conninfo.Describe(err)))
		return errSession{"connection refused"}
	}
	ru.conn = conn
	ru.r.tally.connected()
	ru.r.mon.register(conn.PID(), ru)
	return nil
}

// connectTimeout bounds one session's connection set-up.
const connectTimeout = 15 * time.Second

// disconnect closes the session's connection, if open.
func (ru *runner) disconnect() {
	if ru.conn == nil {
		return
	}
	ru.r.mon.unregister(ru.conn.PID())
	ru.r.ops.Forget(ru.conn.PID())
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = ru.conn.Close(ctx) // Terminate; nothing to report on a closing session
	ru.conn = nil
}

// abandon counts steps[from:] as skipped for reason and lets them
// through the gates.
func (ru *runner) abandon(from int, reason string) {
	for i := from; i < len(ru.sess.steps); i++ {
		st := &ru.sess.steps[i]
		if ru.g != nil {
			ru.g.markSent(st.order)
			ru.g.markEnded(st.ends)
		}
		ru.r.tally.skip(reason)
	}
}

// drain empties a release channel.
func drain(c chan string) {
	select {
	case <-c:
	default:
	}
}
