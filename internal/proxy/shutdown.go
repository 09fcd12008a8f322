package proxy

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Shutdown and refusals (see Proxy.StartShutdown and Proxy.Shutdown).
//
// A session ends at a transaction boundary when the server's last
// ReadyForQuery said 'I' and every request the client sent (Query,
// Sync; an extended batch counts from its first message) was answered
// (sessionEnd.sent == 2*rfqs). Ending it sends Terminate upstream; once
// the server has closed (upstreamLoop relayed everything before it),
// the client gets a FATAL and the connection closes. The check runs
// every drainPoll for every session, and in clientLoop before a new
// request of an idle session is forwarded (that request is then not
// sent: PgBouncer's safe shutdown does the same).
//
// Every FATAL the proxy sends itself goes to the client after
// upstreamLoop has returned, so it never interleaves with relayed
// bytes.

// SQLSTATEs and texts of the FATALs the proxy sends itself.
const (
	codeAdminShutdown = "57P01" // admin_shutdown
	codeTooMany       = "53300" // too_many_connections
	codeLimit         = "54000" // program_limit_exceeded
	codeProtocol      = "08P01" // protocol_violation

	msgRefuseShutdown = "the proxy is shutting down"
	msgEndShutdown    = "terminating connection because the proxy is shutting down"
	msgEndNow         = "terminating connection because the proxy is shutting down now, without waiting for the session's transaction"
)

// Session end states (sessionEnd.state).
const (
	endNone    = iota
	endDrained // idle at shutdown: Terminate sent upstream
	endRefused // a message over a limit: Terminate sent upstream; an invalid type: the type byte sent upstream
	endForced  // shutdown not waiting any longer: upstream closed
)

// drainPoll is how often a shutdown looks for sessions that became idle.
const drainPoll = 10 * time.Millisecond

// endGrace bounds the wait for the server to close after a Terminate.
const endGrace = 5 * time.Second

// lingerTime and lingerBytes bound the time and bytes a refused
// client's rest of a message is read and discarded for, so that it reads the FATAL instead
// of a connection reset while it is still writing.
const (
	lingerTime  = 10 * time.Second
	lingerBytes = maxMessage + 5
)

// terminateMsg is the protocol's Terminate message.
var terminateMsg = []byte{'X', 0, 0, 0, 4}

// sessionEnd is how a session the proxy ends itself ends.
type sessionEnd struct {
	// sent is 2 x the requests forwarded (clientLoop's count), plus 1
	// while an extended batch is under way (messages since the last Sync).
	sent  atomic.Int64
	state atomic.Int32
	// fatal is the ErrorResponse for the client: stored after state
	// changed and before the upstream is told, read by sayEnd once
	// upstreamLoop has returned.
	fatal  atomic.Pointer[pgproto3.ErrorResponse]
	linger atomic.Bool // read the client's input before closing (endRefused)
}

// publishSent records clientLoop's request count for idle (called for
// every frame).
func (s *session) publishSent(atBatchStart bool) {
	v := int64(s.requests) << 1
	if !atBatchStart {
		v |= 1
	}
	s.end.sent.Store(v)
}

// idle reports whether the session is between transactions with no
// request outstanding.
func (s *session) idle() bool {
	if s.end.sent.Load() != s.rfqs.Load()<<1 || byte(s.txStatus.Load()) != 'I' {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending == nil
}

// drainBeforeRequest is called by clientLoop before it forwards frame:
// while the proxy shuts down, a new request of an idle session ends the
// session instead of being forwarded (true: stop the loop).
func (s *session) drainBeforeRequest(typ byte, atBatchStart bool) bool {
	if !s.p.draining.Load() || !atBatchStart || typ == 'X' || !s.idle() {
		return false
	}
	s.endIdle()
	return true
}

// endIdle ends an idle session: Terminate upstream, then (once the
// server closed) FATAL 57P01 to the client. False when it is ending
// already.
func (s *session) endIdle() bool {
	if !s.end.state.CompareAndSwap(endNone, endDrained) {
		return false
	}
	s.end.fatal.Store(fatal(codeAdminShutdown, msgEndShutdown, ""))
	s.p.stats.shutdownIdle.Add(1)
	s.terminateUp()
	return true
}

// terminateUp sends Terminate upstream and bounds the wait for the
// server's close.
func (s *session) terminateUp() {
	s.writeUp(terminateMsg)
	_ = s.flushUp()
	_ = s.up.SetReadDeadline(time.Now().Add(endGrace))
}

// refuseMessage ends the session for the client message at the start of
// b whose length field frameSize rejected (limit: the session's limit,
// see frontendLimit): a length over the session's
// limit gets FATAL 54000 naming the limit, one PostgreSQL would not take
// either (below 4, negative, over 1 GiB or over the limit of a type
// that carries no data) 08P01 "invalid message length", PostgreSQL's
// words (it logs them and closes without a word). See refuse.
func (s *session) refuseMessage(b []byte, limit int) {
	n := int64(int32(binary.BigEndian.Uint32(b[1:5])))
	if carriesData(b[0]) && n > int64(limit) && n <= maxMessage {
		s.p.stats.oversized.Add(1)
		s.refuse(fatal(codeLimit, fmt.Sprintf("message of type %q with length %d exceeds the proxy's limit of %d bytes (erplab proxy --max-message-size)", b[0], n, limit),
			"The proxy closes the connection; raise --max-message-size (at most 1G) to let such messages through."))
		return
	}
	s.p.stats.invalidMessages.Add(1)
	e := fatal(codeProtocol, "invalid message length", "")
	e.Detail = fmt.Sprintf("A message of type %q announced a length of %d bytes.", b[0], n)
	s.refuse(e)
}

// refuse ends the session for a client message the proxy does not relay
// (an invalid one, one over a limit): the client gets e after what the
// server still sends, the upstream a Terminate, and the client's input
// is read and discarded (bounded) so that it sees the error, not a
// reset. Called by clientLoop, which then stops.
func (s *session) refuse(e *pgproto3.ErrorResponse) {
	if s.end.state.CompareAndSwap(endNone, endRefused) {
		s.end.fatal.Store(e)
		s.end.linger.Store(true)
		s.terminateUp()
	}
}

// refuseType ends the session for a client message of a type PostgreSQL
// does not know: the type byte alone goes upstream after the messages
// before it (queued by clientLoop), and the server, which checks the
// type before it reads a length, answers those messages first (their
// results, pipelined ones too: extended-protocol results it has not
// flushed go out with its error), then refuses the byte with its own
// words and closes: FATAL 08P01 "invalid frontend message type N", or
// during COPY FROM STDIN its ERROR "unexpected message type" and FATAL
// "protocol synchronization was lost". The proxy relays all of it and
// adds no FATAL of its own; the client's input is read and discarded
// as after refuse. No deadline: the server answers the messages before
// the byte as long as they take, as it would on a direct connection.
func (s *session) refuseType(typ byte) {
	s.p.stats.invalidMessages.Add(1)
	if s.end.state.CompareAndSwap(endNone, endRefused) {
		s.end.linger.Store(true)
		s.writeUp([]byte{typ})
		_ = s.flushUp()
	}
}

// endNow ends a session at once (a shutdown that waits no longer): a
// statement running upstream is cancelled, the upstream connection
// closed (the server rolls back an open transaction), and the client
// gets FATAL 57P01. It reports whether the session was not ending yet.
func (s *session) endNow() bool {
	prev := s.end.state.Swap(endForced)
	if prev == endForced {
		return false
	}
	if prev == endNone { // else it keeps the FATAL it was ending with
		s.end.fatal.Store(fatal(codeAdminShutdown, msgEndNow, ""))
		s.p.stats.shutdownCut.Add(1)
	}
	if !s.idle() {
		s.p.mu.Lock()
		key := s.key
		s.p.mu.Unlock()
		if pkt := cancelPacket(key); pkt != nil {
			s.p.wg.Add(1)
			go func() {
				defer s.p.wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), endGrace)
				defer cancel()
				s.p.sendCancel(ctx, pkt)
			}()
		}
	}
	_ = s.client.SetWriteDeadline(time.Now().Add(time.Second)) // a client that does not read
	_ = s.up.Close()
	return prev == endNone
}

// sayEnd, once upstreamLoop has returned, sends the client the FATAL of
// a session the proxy ended (nothing otherwise) and, after a refused
// message, reads and discards its input for a while.
func (s *session) sayEnd() {
	if s.end.state.Load() == endNone {
		return
	}
	if e := s.end.fatal.Load(); e != nil { // none after refuseType: the server's was relayed
		b, err := e.Encode(nil)
		if err != nil {
			return
		}
		_ = s.client.SetWriteDeadline(time.Now().Add(time.Second))
		s.cw.add(b)
		if s.cw.flush() != nil {
			return
		}
	}
	if s.end.linger.Load() {
		linger(s.client)
	}
}

// linger half-closes c (the client reads what was sent, then EOF) and
// reads and discards its input until it closes, at most lingerBytes
// within lingerTime: closing a socket with unread input resets the
// connection, and a client still writing a long message would see the
// reset instead of the FATAL.
func linger(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.CopyN(io.Discard, c, lingerBytes)
}

// fatal is an ErrorResponse of severity FATAL.
func fatal(code, msg, hint string) *pgproto3.ErrorResponse {
	return &pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: msg, Hint: hint}
}

// cancelPacket is the CancelRequest of BackendKeyData key (cancelKey's
// form), nil when key is empty or malformed.
func cancelPacket(key string) []byte {
	pid, secret, ok := strings.Cut(key, "/")
	if !ok {
		return nil
	}
	n, err := strconv.ParseUint(pid, 10, 32)
	if err != nil {
		return nil
	}
	b, err := (&pgproto3.CancelRequest{ProcessID: uint32(n), SecretKey: []byte(secret)}).Encode(nil)
	if err != nil {
		return nil
	}
	return b
}

// Draining describes a shutdown as it starts (StartShutdown).
type Draining struct {
	// Ended: sessions idle (between transactions, no request
	// outstanding) and ended at once; Waiting: sessions in a transaction
	// or with a request outstanding, ended when they become idle;
	// LoggingIn: connections not yet authenticated (refused with 57P01
	// once their startup packet is read, or ended as sessions).
	Ended, Waiting, LoggingIn int
}

// StartShutdown starts a safe shutdown (PgBouncer's SIGINT): every
// listener Serve accepts on is closed (a new client is refused by the
// kernel), a connection already accepted gets FATAL 57P01 "the proxy is
// shutting down" once its startup packet is read, and each session ends
// at its next transaction boundary (the server's ReadyForQuery says 'I'
// and no request is outstanding; a new request then is not forwarded):
// Terminate goes upstream and the client gets FATAL 57P01 after
// everything the server sent before. It returns at once with what it
// found; Shutdown waits (Serve returns once Shutdown has, or when its
// own context is done). A second call only counts.
func (p *Proxy) StartShutdown() Draining {
	first := !p.draining.Swap(true)
	p.mu.Lock()
	if first {
		for ln := range p.listeners {
			_ = ln.Close()
		}
	}
	var ss []*session
	for s := range p.sessions {
		ss = append(ss, s)
	}
	d := Draining{LoggingIn: len(p.starting)}
	p.mu.Unlock()
	for _, s := range ss {
		switch {
		case s.end.state.Load() != endNone:
		case s.idle() && s.endIdle():
			d.Ended++
		default:
			d.Waiting++
		}
	}
	return d
}

// Shutdown shuts the proxy down safely (StartShutdown, if not called
// yet) and waits until every client connection has ended, or until ctx
// is done: then it ends the rest at once (a running statement is
// cancelled, the upstream connection closed, the client gets FATAL
// 57P01; a connection still logging in gets FATAL 57P01 "the proxy is
// shutting down" and is closed) and waits for them. It returns how many
// sessions it ended without waiting for their transaction. Serve
// returns nil once Shutdown has returned.
func (p *Proxy) Shutdown(ctx context.Context) int {
	defer p.shutOnce.Do(func() { close(p.shutDone) })
	p.StartShutdown()
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	var ss []*session
	for p.live.Load() > 0 {
		select {
		case <-ctx.Done():
			return p.endAll()
		case <-t.C:
		}
		ss = p.sessionList(ss[:0])
		for _, s := range ss {
			if s.end.state.Load() == endNone && s.idle() {
				s.endIdle()
			}
		}
	}
	return 0
}

// endAll ends every connection at once (see Shutdown), also those that
// become sessions meanwhile, and waits until they are gone; it returns
// how many sessions were not ending already (connections logging in are
// not counted).
func (p *Proxy) endAll() int {
	n := 0
	closed := map[net.Conn]bool{}
	var ss []*session
	var starting []net.Conn
	for {
		ss = p.sessionList(ss[:0])
		for _, s := range ss {
			if s.endNow() {
				n++
			}
		}
		starting = starting[:0]
		p.mu.Lock()
		for c := range p.starting {
			if !closed[c] {
				starting = append(starting, c)
			}
		}
		p.mu.Unlock()
		for _, c := range starting {
			closed[c] = true
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			writeFatal(c, codeAdminShutdown, msgRefuseShutdown)
			_ = c.Close()
		}
		if p.live.Load() == 0 {
			return n
		}
		time.Sleep(drainPoll)
	}
}

func (p *Proxy) sessionList(ss []*session) []*session {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := range p.sessions {
		ss = append(ss, s)
	}
	return ss
}
