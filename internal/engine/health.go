package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/results"
)

// Server fault timing.
const (
	// DefaultServerGone is Config.ServerGone's default (--server-gone-after).
	DefaultServerGone = 30 * time.Second
	// NotAnsweringAfter is how long the server may send nothing back while
	// operations are in flight (and the probe gets no answer either)
	// before the engine says it is not answering (ServerState
	// NotAnswering, an Outcome.Unresponsive span).
	NotAnsweringAfter = 5 * time.Second
	// comingBackFor is how long after the last "starting up / in
	// recovery" answer the state stays ComingBack.
	comingBackFor = 2 * time.Second
	// probePeriod is the pause between two probes of the server.
	probePeriod = time.Second
	// probeBackoff is the pause after the probe was refused for a reason
	// other than "starting up" (e.g. 53300 too many clients).
	probeBackoff = 10 * time.Second
	// LostAtEndAfter is how long every operation must have failed for
	// want of a server (connection errors, refusals of a server shutting
	// down or coming back) when the run ends for it to end lost
	// (Outcome.LostAtEnd) rather than completed: as long as it takes to
	// say a server is not answering.
	LostAtEndAfter = NotAnsweringAfter
	// probeConnectTimeout bounds one (re)connect of the probe.
	probeConnectTimeout = 2 * time.Second
	// hardStopAfter is how long VUs get, once their operations are
	// cancelled, before the sockets of the operations still in flight are
	// closed under them (a workload that waits on a frozen server with a
	// context of its own, or a frozen server that never reads the cancel).
	hardStopAfter = 2 * time.Second
)

// ServerCondition is what the engine makes of the server's answers.
type ServerCondition int

const (
	// ServerOK: operations complete (or fail with the server's own errors).
	ServerOK ServerCondition = iota
	// ServerNotAnswering: operations are in flight and nothing has come
	// back for NotAnsweringAfter, not even to the probe (a frozen or
	// stopped server, a dead network path).
	ServerNotAnswering
	// ServerComingBack: connections are refused with SQLSTATE 57P03
	// ("the database system is starting up", "... in recovery mode",
	// "... not yet accepting connections"): the server is on its way
	// back; this does not count toward ServerGone (but a run that ends in
	// it is not "completed": Outcome.LostAtEnd).
	ServerComingBack
	// ServerUnreachable: operations fail with connection errors (refused,
	// reset, closed); after ServerGone of it the run is aborted.
	ServerUnreachable
	// ServerShuttingDown: operations fail with connection errors and new
	// connections are refused with 57P03 "the database system is shutting
	// down" (a smart shutdown waiting for other sessions, or a shutdown
	// that hangs): the server is going, not coming back; it counts toward
	// ServerGone as ServerUnreachable does.
	ServerShuttingDown
)

// ServerState is the server's condition at one moment.
type ServerState struct {
	Condition ServerCondition
	// Since is when the condition began: the last answer before it
	// (NotAnswering), the last success (Unreachable, ShuttingDown), the
	// first "starting up" answer (ComingBack). Zero for ServerOK.
	Since time.Time
	// Waiting is the number of operations in flight (NotAnswering).
	Waiting int64
}

// Describe is the state for a progress line at now, "" for ServerOK, e.g.
// "server not answering for 5 s: 6 operations waiting".
func (s ServerState) Describe(now time.Time) string {
	secs := int64(now.Sub(s.Since).Seconds())
	switch s.Condition {
	case ServerNotAnswering:
		plural := "s"
		if s.Waiting == 1 {
			plural = ""
		}
		return fmt.Sprintf("server not answering for %d s: %d operation%s waiting", secs, s.Waiting, plural)
	case ServerComingBack:
		return fmt.Sprintf("server starting up / in recovery for %d s", secs)
	case ServerUnreachable:
		return fmt.Sprintf("server unreachable for %d s", secs)
	case ServerShuttingDown:
		return fmt.Sprintf("server shutting down for %d s: connections refused", secs)
	}
	return ""
}

// Gone says in a few words what a server in condition c was doing while
// every operation failed, for a final status: "the server was
// unreachable", "... was shutting down, refusing connections", "... was
// starting up / in recovery and had not come back".
func (c ServerCondition) Gone() string {
	switch c {
	case ServerShuttingDown:
		return "the server was shutting down, refusing connections"
	case ServerComingBack:
		return "the server was starting up / in recovery and had not come back"
	}
	return "the server was unreachable"
}

// Health is the engine's running view of the server, for a progress line
// (Config.Health). Safe for concurrent use; the zero value is ready.
type Health struct {
	mu    sync.Mutex
	state ServerState
}

// State returns the latest state (updated on every engine tick).
func (h *Health) State() ServerState {
	if h == nil {
		return ServerState{}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state
}

func (h *Health) set(s ServerState) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.state = s
	h.mu.Unlock()
}

// ComingBack reports whether err is the server refusing a connection
// because it is starting up or recovering (SQLSTATE 57P03,
// cannot_connect_now, with any message but "shutting down"): it will take
// connections again, so such errors do not count toward ServerGone.
func ComingBack(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "57P03" && !ShuttingDown(err)
}

// ShuttingDown reports whether err is the server refusing a connection
// because it is shutting down: SQLSTATE 57P03 with PostgreSQL's message
// "the database system is shutting down" (ProcessStartupPacket, CAC_SHUTDOWN;
// the same code serves starting up and recovery, so the message, as pgconn
// hands it over, tells them apart). Such a server is going away: its
// refusals count toward ServerGone.
func ShuttingDown(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "57P03" && strings.Contains(pgErr.Message, "shutting down")
}

// watch keeps the timestamps the controller judges the server by, the
// in-flight connections to close at a hard stop, and the probe.
type watch struct {
	lastEvent atomic.Int64 // unix ns: an operation ended (any outcome) or the probe answered
	lastBack  atomic.Int64 // unix ns: the last "starting up / in recovery" answer
	backSince atomic.Int64 // unix ns: the first of the current run of them
	lastDown  atomic.Int64 // unix ns: the last "shutting down" refusal

	connMu sync.Mutex
	conns  map[*pgconn.PgConn]struct{} // connections inside an operation

	spans []results.Unresponsive // controller only
	open  bool                   // the last span is still open
}

func (w *watch) event(now time.Time) { w.lastEvent.Store(now.UnixNano()) }

func (w *watch) comingBack(now time.Time) {
	if last := w.lastBack.Load(); last == 0 || now.Sub(time.Unix(0, last)) > comingBackFor {
		w.backSince.Store(now.UnixNano())
	}
	w.lastBack.Store(now.UnixNano())
}

func (w *watch) shuttingDown(now time.Time) { w.lastDown.Store(now.UnixNano()) }

// enter and leave bracket an operation's use of a connection.
func (w *watch) enter(c *pgconn.PgConn) {
	w.connMu.Lock()
	if w.conns == nil {
		w.conns = map[*pgconn.PgConn]struct{}{}
	}
	w.conns[c] = struct{}{}
	w.connMu.Unlock()
}

func (w *watch) leave(c *pgconn.PgConn) {
	w.connMu.Lock()
	delete(w.conns, c)
	w.connMu.Unlock()
}

// closeInFlight closes the sockets of the connections still inside an
// operation, so that reads blocked on a server that will not answer
// return at once; it returns how many it closed.
func (w *watch) closeInFlight() int {
	w.connMu.Lock()
	defer w.connMu.Unlock()
	for c := range w.conns {
		_ = c.Conn().Close() // the operation sees the error and ends cut short
	}
	return len(w.conns)
}

// judge works out the server's state at now from the timestamps and the
// operations in flight, and keeps the spans of not answering.
func (w *watch) judge(now, start time.Time, inflight int64, lastOK time.Time, unreachable bool) ServerState {
	last := time.Unix(0, w.lastEvent.Load())
	if last.Before(start) {
		last = start
	}
	var st ServerState
	switch {
	case inflight > 0 && now.Sub(last) >= NotAnsweringAfter:
		st = ServerState{Condition: ServerNotAnswering, Since: last, Waiting: inflight}
	case w.lastBack.Load() != 0 && now.Sub(time.Unix(0, w.lastBack.Load())) <= comingBackFor:
		st = ServerState{Condition: ServerComingBack, Since: time.Unix(0, w.backSince.Load())}
	case unreachable && w.lastDown.Load() != 0 && now.Sub(time.Unix(0, w.lastDown.Load())) <= comingBackFor:
		st = ServerState{Condition: ServerShuttingDown, Since: lastOK}
	case unreachable:
		st = ServerState{Condition: ServerUnreachable, Since: lastOK}
	}
	from := round3(last.Sub(start).Seconds())
	if w.open && !w.answered(from) && st.Condition == ServerNotAnswering {
		sp := &w.spans[len(w.spans)-1]
		sp.MaxWaiting = max(sp.MaxWaiting, inflight)
	}
	if !w.open && st.Condition == ServerNotAnswering {
		w.spans = append(w.spans, results.Unresponsive{FromS: from, MaxWaiting: inflight})
		w.open = true
	}
	return st
}

// answered closes the open span, if any, when the last answer (at from,
// seconds since the start) came after it began, and reports whether it
// did. Operations that merely ended cut short, at the end of the run,
// are no answer: the span stays open.
func (w *watch) answered(from float64) bool {
	if !w.open {
		return false
	}
	sp := &w.spans[len(w.spans)-1]
	if from <= sp.FromS {
		return false
	}
	sp.ToS = from
	w.open = false
	return true
}

// finish closes the spans at the end of the run and returns them: an
// open span ends at the last answer when one came after it began (the
// answers that ended the run's last operations come after the last
// judgement), else it lasts until the end (UntilEnd).
func (w *watch) finish(end, start time.Time) []results.Unresponsive {
	if w.answered(round3(time.Unix(0, w.lastEvent.Load()).Sub(start).Seconds())) {
		return w.spans
	}
	if w.open {
		sp := &w.spans[len(w.spans)-1]
		sp.ToS, sp.UntilEnd = round3(end.Sub(start).Seconds()), true
		w.open = false
	}
	return w.spans
}

func round3(s float64) float64 { return float64(int64(s*1000+0.5)) / 1000 }

// probe pings the server every probePeriod over a connection of its own,
// outside the pool, until ctx ends: each answer is an event, so
// operations that are merely slow (long reports, lock waits) do not make
// the server look frozen while it answers the probe. A "starting up"
// refusal on reconnect counts as coming back. When the probe cannot
// connect at all it keeps trying; the judgement then rests on the
// operations alone.
func (w *watch) probe(ctx context.Context, pool *pgxpool.Pool) {
	// The pool's settings, with pgconn's default context handling: a
	// cancelled probe on a frozen server gives its socket a deadline and
	// does not wait for a cancel request to get through.
	cfg := pool.Config().ConnConfig.Config.Copy()
	if cfg.RuntimeParams["application_name"] == "erplab" {
		cfg.RuntimeParams["application_name"] = "erplab probe"
	}
	var conn *pgconn.PgConn
	defer func() {
		if conn != nil {
			_ = conn.Conn().Close()
		}
	}()
	t := time.NewTicker(probePeriod)
	defer t.Stop()
	var retryAt time.Time // no reconnect before it
	for {
		if now := time.Now(); conn == nil && !now.Before(retryAt) {
			cctx, cancel := context.WithTimeout(ctx, probeConnectTimeout)
			c, err := pgconn.ConnectConfig(cctx, cfg)
			cancel()
			switch {
			case err == nil:
				conn = c
				w.event(time.Now())
			case ComingBack(err):
				w.comingBack(time.Now())
			case ShuttingDown(err):
				w.shuttingDown(now)
				retryAt = now.Add(probeBackoff)
			default:
				// Refused for another reason (too many clients, a
				// password): do not knock every second.
				retryAt = now.Add(probeBackoff)
			}
		}
		if conn != nil {
			if err := conn.Ping(ctx); err == nil {
				w.event(time.Now())
			} else if ctx.Err() == nil {
				_ = conn.Conn().Close()
				conn = nil
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
