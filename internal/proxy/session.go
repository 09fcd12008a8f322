package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/erplab/erplab/internal/rewrite"
)

// session is one client connection and its upstream connection.
type session struct {
	p          *Proxy
	client, up net.Conn
	cin, uin   *inbound  // client and upstream reads
	cw         *outbound // written by upstreamLoop only
	uwMu       sync.Mutex
	uw         *outbound // guarded by uwMu: clientLoop relays, upstreamLoop replays
	db, user   string
	closeOnce  sync.Once
	closed     chan struct{}
	key        string // BackendKeyData, guarded by p.mu

	mu       sync.Mutex
	pending  *pending // a first-use rewritten statement awaiting its verdict
	requests int      // Syncs and Queries forwarded, the startup packet counting as one (clientLoop only)

	// The session's name-resolution context (see contextChange): path
	// is its search_path setting as setPath takes it (clientLoop only),
	// startPath the one of its startup packet.
	path, startPath string
	keyBuf          []byte // decision-cache key of the statement at hand (clientLoop only)
	// streamed: the Query or Parse being relayed as it arrives, nil
	// when none (clientLoop only; see streamClient).
	streamed *streamedStatement
	// ddlStmts: names of the prepared statements that may change the
	// schema, each Bind of them invalidates (clientLoop only; nil when
	// none).
	ddlStmts      map[string]bool
	startUnknown  bool
	ctxUnknown    atomic.Bool // a change the proxy does not follow: no rewriting
	setInFlight   atomic.Bool // a followed SET is under way: an error makes the context unknown
	ddlInFlight   atomic.Bool // a schema change is under way: invalidate again when it ends
	namesMu       sync.Mutex
	namesInFlight []string     // relations created (temporary) or dropped by statements under way
	namesPending  atomic.Bool  // namesInFlight is not empty
	rfqs          atomic.Int64 // ReadyForQuery messages relayed (upstreamLoop writes)
	// Error positions of rewritten simple Queries: request number ->
	// how to map the server's position to the client's text (see
	// mapPosition); posAny says the map is not empty.
	posMu      sync.Mutex
	posMaps    map[int]*posEntry
	posAny     atomic.Bool
	lastPos    *posEntry     // set by onStatement for the Query being relayed (clientLoop only)
	txStatus   atomic.Uint32 // the last ReadyForQuery's status byte
	hungUp     atomic.Bool   // a peer closed first (counted once: countHangup)
	end        sessionEnd    // how the proxy ends the session itself (shutdown.go)
	st         *dbState      // the database's state (clientLoop only: see state)
	clientDone atomic.Bool   // the client sent Terminate or EOF: relay until the server closes (see clientEOF)
	cap        *capSession   // the session's capture, nil without Config.Capture
	condFlags                // statements rewritten on condition (condstmt.go)
}

// pending is a statement sent rewritten for the first time, with what to
// send instead if the upstream rejects it.
type pending struct {
	kind      byte // 'Q' or 'P'
	key       decisionKey
	fp        string   // the statement's fingerprint
	after     int      // ReadyForQuery messages that precede its responses
	replay    [][]byte // original frames, up to and including the Sync
	sealed    bool     // the batch's Sync was forwarded
	retryable bool     // it started a batch and no Flush followed
	done      chan struct{}
	// parseFailed: its Parse was answered by an error (set before done).
	parseFailed atomic.Bool
	// upstreamLoop only:
	answered bool
	held     []byte // the upstream's ErrorResponse, while swallowing until ReadyForQuery
}

func (s *session) close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		_ = s.client.Close()
		_ = s.up.Close()
	})
}

// state returns the session's database's state (Proxy.dbState, looked
// up once); clientLoop only.
func (s *session) state() *dbState {
	if s.st == nil {
		s.st = s.p.dbState(s.db)
	}
	return s.st
}

// writeUp queues frames for the upstream; they may reference the client
// read buffer until the next flushUp.
func (s *session) writeUp(frames ...[]byte) {
	s.uwMu.Lock()
	defer s.uwMu.Unlock()
	for _, f := range frames {
		s.uw.add(f)
	}
}

func (s *session) flushUp() error {
	s.uwMu.Lock()
	defer s.uwMu.Unlock()
	return s.uw.flush()
}

// clientLoop relays client messages upstream, rewriting Query and Parse.
// The messages of one read go upstream in one write.
func (s *session) clientLoop(ctx context.Context) {
	atBatchStart := true
	limit := s.p.cfg.MaxMessageSize
	err := s.cin.run(func(data []byte) (int, error) {
		used := 0
		if s.cin.skip > 0 { // more of a message relayed as it arrives
			used = s.streamMore(data, &atBatchStart)
		}
		for used < len(data) {
			max := frontendLimit(data[used], limit)
			if max == 0 {
				// What follows the type byte is not a message: the byte
				// goes to the server after what came before it, which
				// answers those and then refuses it as on a direct
				// connection (see refuseType).
				s.refuseType(data[used])
				return used, errStop
			}
			n, err := frameSize(data[used:], max)
			if err != nil {
				_ = s.flushUp() // what came before it
				s.refuseMessage(data[used:], limit)
				return used, errStop
			}
			if n == 0 {
				if s.streamClient(ctx, data[used:], &atBatchStart) {
					used = len(data)
				}
				break
			}
			frame := data[used : used+n]
			if s.drainBeforeRequest(frame[0], atBatchStart) {
				_ = s.flushUp()
				return used, errStop
			}
			used += n
			if s.cap != nil {
				s.cap.client(frame)
			}
			if err := s.fromClient(ctx, frame, &atBatchStart); err != nil {
				return used, err
			}
		}
		return used, s.flushUp()
	})
	// After an error, drop what still references the read buffer.
	s.uwMu.Lock()
	s.uw.pending, s.uw.inUse = nil, false
	s.uwMu.Unlock()
	if errors.Is(err, io.EOF) {
		s.countHangup()
	}
	if err == errTerminate || errors.Is(err, io.EOF) {
		s.clientEOF(ctx)
	}
}

// countHangup counts the session in Stats.Hangups, once: its client
// closed without a Terminate, or its server closed while the client was
// still connected. A relay loop sees the close as the EOF of its next
// read (the connection's own Read): at once when it was waiting for
// data, after the write in progress when it was writing the other way.
func (s *session) countHangup() {
	if !s.hungUp.Swap(true) {
		s.p.stats.hangups.Add(1)
	}
}

// keyBufKeep is the largest decision-key buffer (session.keyBuf) a
// session keeps from one statement to the next.
const keyBufKeep = 64 * 1024

// errTerminate ends clientLoop after the client's Terminate was relayed:
// the session ends when the server closes (see clientEOF).
var errTerminate = errors.New("terminate")

// clientEOF passes the client's close (EOF without Terminate) on as a
// direct connection would: the bytes of a message the client did not
// finish go upstream as they are (the server then sees a truncated
// message, as it would), then the upstream's write side is shut down
// (CloseWrite: shutdown(SHUT_WR) on TCP and Unix sockets), and the
// session goes on relaying the server's answers until the server
// closes (it answers what it received, then sees EOF and ends the
// backend). A client that half-closed after its last request so gets
// its answer; one that closed gets none either way. The same follows a
// Terminate (the server ends the backend when it reads it): the answers
// to the requests sent before it reach a client still reading, as on a
// direct connection. It returns once the
// session is closed, or at once (the session then ends) when the
// upstream cannot be half-closed or the write fails.
func (s *session) clientEOF(ctx context.Context) {
	s.clientDone.Store(true)
	hc, ok := s.up.(interface{ CloseWrite() error })
	s.uwMu.Lock()
	var err error
	if s.cin.n > 0 {
		s.uw.add(s.cin.buf[:s.cin.n])
		err = s.uw.flush()
		s.cin.n = 0
	}
	if err == nil && ok {
		err = hc.CloseWrite()
	}
	s.uwMu.Unlock()
	if err != nil || !ok {
		return
	}
	select {
	case <-s.closed:
	case <-ctx.Done():
	}
}

// fromClient relays one client message; errStop ends the session,
// errTerminate (after a Terminate) ends the client's side of it.
func (s *session) fromClient(ctx context.Context, frame []byte, atBatchStart *bool) error {
	typ := frame[0]
	out := frame
	s.mu.Lock()
	building := s.pending
	s.mu.Unlock()
	if building != nil && building.sealed {
		building = nil
	}
	var started *pending
	var dropped []string // conditional statements a Query may drop
	var single bool      // the Query is one statement
	switch typ {
	case 'Q':
		if raw, ok := statementText(frame[5:], true); ok {
			dropped, single = s.condPoison(raw)
		}
		out, started = s.onStatement(ctx, frame, true, building == nil, *atBatchStart)
	case 'B':
		s.onBind(frame)
		out = s.condBind(frame)
	case 'C':
		out = s.condClose(frame, *atBatchStart)
	case 'P':
		s.onParse(frame)
		if raw, ok := statementText(frame[5:], false); ok {
			names, _ := s.condPoison(raw)
			s.condDropped(names, false)
		}
		out, started = s.onStatement(ctx, frame, false, building == nil, *atBatchStart)
		if started != nil {
			started.retryable = *atBatchStart
		}
	}
	if cap(s.keyBuf) > keyBufKeep {
		s.keyBuf = nil // the key of a large text: not kept while the session idles
	}
	if s.cap != nil && &out[0] != &frame[0] {
		s.cap.rewritten() // captured as the client sent it
	}
	if typ == 'Q' && s.lastPos != nil {
		s.posMu.Lock()
		if s.posMaps == nil {
			s.posMaps = map[int]*posEntry{}
		}
		s.posMaps[s.requests] = s.lastPos
		s.posAny.Store(true)
		s.posMu.Unlock()
		s.lastPos = nil
	}
	if started != nil {
		started.after = s.requests
		s.mu.Lock()
		s.pending = started
		s.mu.Unlock()
	} else if building != nil {
		building.replay = append(building.replay, append([]byte(nil), frame...))
		if typ == 'H' {
			s.mu.Lock()
			building.retryable = false
			s.mu.Unlock()
		}
	}
	watch := s.watchDealloc(dropped)
	s.writeUp(out)
	if watch != nil {
		if err := s.condAwait(ctx, watch, dropped, single); err != nil {
			return err
		}
	}
	switch typ {
	case 'S', 'Q':
		s.requests++
		*atBatchStart = true
	case 'p':
	default:
		*atBatchStart = false
	}
	s.publishSent(*atBatchStart)
	wait := started
	if wait == nil && typ == 'S' && building != nil {
		wait = building
	}
	if wait != nil && (typ == 'Q' || typ == 'S') {
		s.mu.Lock()
		wait.sealed = true
		s.mu.Unlock()
		if err := s.flushUp(); err != nil {
			return err
		}
		select {
		case <-wait.done:
			return nil
		case <-s.closed:
			return errStop
		case <-ctx.Done():
			return errStop
		}
	}
	if typ == 'X' {
		// Before the server can read it: its answers and FIN may come
		// in one read, which must then read again (upstreamLoop).
		s.clientDone.Store(true)
		if err := s.flushUp(); err != nil {
			return err
		}
		return errTerminate
	}
	return nil
}

// onStatement decides about a Query (simple) or Parse (extended) message
// and returns the frame to send, and a pending record for a rewritten
// text (its first response is awaited, see verdict). canPend is false
// while another rewrite of the batch awaits its verdict: then a rewrite
// not yet accepted by a session is not attempted. atBatchStart is true
// when no other message of the batch came before.
func (s *session) onStatement(ctx context.Context, frame []byte, simple, canPend, atBatchStart bool) ([]byte, *pending) {
	// The pre-filter runs on the message bytes first: most statements
	// are never decoded (no allocation per relayed statement).
	if raw, ok := statementText(frame[5:], simple); ok {
		w := scanWords(raw)
		var m *mutators
		if w.context || w.calls {
			m = s.p.mutatorsIn(ctx, s.db, s.state())
		}
		if w.context || (w.calls && m.calledIn(raw)) {
			changes, ddl := s.onContext(raw, simple && atBatchStart, m)
			if !simple && ddl {
				// Each execution of the prepared statement may
				// change the schema again (see onBind).
				if s.ddlStmts == nil {
					s.ddlStmts = map[string]bool{}
				}
				s.ddlStmts[string(stmtName(frame[5:]))] = true
			}
			if changes {
				// The text changes the schema or the session's context
				// itself: its own statements would be validated against
				// the state before it.
				s.p.stats.statements.Add(1)
				return frame, nil
			}
		}
		if !w.match {
			s.p.stats.statements.Add(1)
			s.p.stats.prefilterSkips.Add(1)
			return frame, nil
		}
		if err := rewrite.CheckSize(len(raw)); err != nil {
			// Never parsed: relayed as it is, its text neither
			// decoded, nor keyed, nor cached (a decision per
			// distinct text would keep every such text).
			s.p.stats.statements.Add(1)
			s.p.notParsed(s.db, err)
			return frame, nil
		}
		if s.keptCached(frame, raw, simple) {
			return frame, nil
		}
	}
	var text string
	var parse pgproto3.Parse
	if simple {
		var q pgproto3.Query
		if err := q.Decode(frame[5:]); err != nil {
			return frame, nil
		}
		text = q.String
	} else {
		if err := parse.Decode(frame[5:]); err != nil {
			return frame, nil
		}
		text = parse.Query
	}
	key, d, fresh := s.p.decide(ctx, s, text, parse.ParameterOIDs)
	if !d.changed || d.failed {
		return frame, nil
	}
	if s.p.cfg.Shadow {
		s.p.stats.shadow.Add(1)
		if fresh { // once per statement text, not per execution
			s.p.log.Info("shadow: would rewrite", "database", s.db, "rules", d.explain, "sql", oneLine(d.rewritten))
		}
		return frame, nil
	}
	if len(d.checks) > 0 && s.condKeep(simple, canPend, atBatchStart, parse.Name) {
		s.p.stats.conditionalKept.Add(1)
		return frame, nil
	}
	if !d.verified && !canPend {
		return frame, nil
	}
	var out []byte
	var err error
	if simple {
		out, err = (&pgproto3.Query{String: d.rewritten}).Encode(nil)
	} else {
		parse.Query = d.rewritten
		out, err = parse.Encode(nil)
	}
	if err != nil {
		return frame, nil
	}
	s.p.stats.rewrites.Add(1)
	if simple && !d.pos.Identity() {
		s.lastPos = &posEntry{original: text, rewritten: d.rewritten, m: d.pos}
	}
	if !canPend {
		return out, nil // verified, but another rewrite of the batch awaits its verdict
	}
	// Every rewritten statement, not only its first use, waits for its
	// first response when it can be replayed: the session's objects may
	// differ from those the side connection validated against.
	kind := byte('P')
	if simple {
		kind = 'Q'
	}
	// A Query of several statements is not replayed: an earlier one may
	// have had effects a rollback does not undo (a sequence, an advisory
	// lock, a COMMIT).
	pd := &pending{kind: kind, key: key, fp: d.fp, replay: [][]byte{append([]byte(nil), frame...)}, retryable: simple && d.replayable, done: make(chan struct{})}
	if len(d.checks) > 0 {
		parse.Query = text
		if out = s.condParse(frame, &parse, d.rewritten, d.checks, pd); out == nil {
			return frame, nil
		}
	}
	return out, pd
}

// keptCached reports whether the message's text (raw, inside frame) has
// a current cached decision to leave it unchanged, counting it as decide
// would: the steady state of a statement the pre-filter passes but no
// rule rewrites costs one map lookup, without decoding the message or
// allocating (the key is built in the session's buffer).
func (s *session) keptCached(frame, raw []byte, simple bool) bool {
	if s.ctxUnknown.Load() {
		return false // decide counts it
	}
	var params []byte
	if !simple {
		// After the text: the parameter count (int16) and the OIDs.
		rest := frame[5+bytes.IndexByte(frame[5:], 0)+1+len(raw)+1:]
		if len(rest) < 2 {
			return false
		}
		n := int(binary.BigEndian.Uint16(rest))
		if len(rest) < 2+4*n {
			return false
		}
		params = rest[2 : 2+4*n]
	}
	s.keyBuf = appendKey(s.keyBuf[:0], s.db, s.user, s.path, params, raw)
	d, ok := s.p.cache.getKey(s.keyBuf)
	if !ok || (d.changed && !d.failed) || !d.current(s.p.genOf(s.state()), s.p.cfg.DecisionTTL) {
		return false
	}
	s.p.stats.statements.Add(1)
	s.p.stats.cacheHits.Add(1)
	return true
}

// statementText returns the SQL text of a Query body (simple) or a Parse
// body (statement name, then the text; both NUL-terminated), or false when
// it is malformed.
func statementText(body []byte, simple bool) ([]byte, bool) {
	if !simple {
		i := bytes.IndexByte(body, 0)
		if i < 0 {
			return nil, false
		}
		body = body[i+1:]
	}
	i := bytes.IndexByte(body, 0)
	if i < 0 {
		return nil, false
	}
	return body[:i], true
}

// upstreamLoop relays upstream messages to the client, watching the
// verdict on a pending first-use rewrite. The messages of one read go to
// the client in one write, without copying unless a verdict changed them.
func (s *session) upstreamLoop(ctx context.Context) {
	rfqSeen := 0
	err := s.uin.run(func(data []byte) (int, error) {
		s.mu.Lock()
		pd := s.pending
		s.mu.Unlock()
		used, run := 0, 0   // run: start of the messages relayed as they are
		if s.uin.skip > 0 { // more of a message relayed as it arrives
			used = min(s.uin.skip, len(data))
			s.uin.skip -= used
		}
		for {
			n, err := frameSize(data[used:], maxMessage)
			if err != nil {
				s.cw.add(data[run:used]) // what came before it
				_ = s.cw.flush()
				return used, err
			}
			if n == 0 {
				// A DataRow or CopyData not awaited by a verdict is
				// relayed as it arrives (see streamMin).
				if rest := streamRest(data[used:]); rest > 0 && (data[used] == 'D' || data[used] == 'd') && (pd == nil || rfqSeen != pd.after) {
					s.uin.skip = rest
					used = len(data)
				}
				break
			}
			start := used
			frame := data[start : start+n]
			used += n
			typ := frame[0]
			if s.deallocAny.Load() {
				s.condWatch(frame, rfqSeen)
			}
			if s.injAny.Load() && s.condSwallow(frame, rfqSeen) {
				s.cw.add(data[run:start])
				run = used
				continue
			}
			if pd != nil && rfqSeen == pd.after {
				s.cw.add(data[run:start])
				run = start
				handled, err := s.verdict(pd, frame, &rfqSeen)
				if err != nil {
					return used, err
				}
				s.mu.Lock()
				pd = s.pending
				s.mu.Unlock()
				if handled {
					run = used
					continue
				}
			}
			if s.cap != nil {
				s.cap.server(frame)
			}
			switch typ {
			case 'E':
				if s.setInFlight.Load() {
					s.ctxUnknown.Store(true)
				}
				if s.posAny.Load() {
					if mapped := s.mapPosition(frame, rfqSeen); mapped != nil {
						s.cw.add(data[run:start])
						s.cw.add(mapped)
						run = used
					}
				}
			case 'Z':
				if s.posAny.Load() {
					s.forgetPosition(rfqSeen)
				}
				rfqSeen++
				if len(frame) > 5 {
					s.txStatus.Store(uint32(frame[5]))
				}
				s.rfqs.Add(1)
				s.setInFlight.Store(false)
				if s.ddlInFlight.Swap(false) {
					s.p.invalidate(s.db)
				}
				if s.namesPending.Load() {
					s.namesMu.Lock()
					names := s.namesInFlight
					s.namesInFlight = nil
					s.namesPending.Store(false)
					s.namesMu.Unlock()
					s.p.cache.dropNamed(s.db, names)
				}
			case 'S':
				s.condParamStatus(frame)
			case 'K':
				var k pgproto3.BackendKeyData
				if err := k.Decode(frame[5:]); err == nil {
					s.p.mu.Lock()
					s.key = cancelKey(k.ProcessID, k.SecretKey)
					s.p.keys[s.key] = s
					s.p.mu.Unlock()
				}
			}
		}
		s.cw.add(data[run:used])
		return used, s.cw.flush()
	})
	if errors.Is(err, io.EOF) && !s.clientDone.Load() {
		s.countHangup()
	}
	if s.uin.n > 0 && errors.Is(err, io.EOF) {
		// The server closed in the middle of a message: the client
		// gets its bytes then EOF, as on a direct connection.
		s.cw.add(s.uin.buf[:s.uin.n])
		_ = s.cw.flush()
	}
}

// verdict handles frame, a response to the pending statement's request.
// It returns true when the frame was consumed (held, dropped or replaced).
func (s *session) verdict(pd *pending, frame []byte, rfqSeen *int) (bool, error) {
	typ := frame[0]
	if pd.held != nil {
		switch typ {
		case 'N', 'S', 'A':
			return false, nil
		case 'Z':
		default:
			return true, nil // discarded by the server's error recovery anyway
		}
		status := byte(0)
		if len(frame) > 5 {
			status = frame[5]
		}
		var e pgproto3.ErrorResponse
		_ = e.Decode(pd.held[5:])
		if !rejection(e.Code) || s.inOtherStatement(pd.after, e.Position) {
			// Not about the rewritten text (25P02 in an aborted
			// transaction, a run-time error, a cancel, an error in
			// another statement of the Query): the original would
			// have met it too. Passed on; the rewrite stays.
			s.passOn(pd, frame, status, rfqSeen)
			return true, nil
		}
		s.p.neverAgain(pd.key, pd.fp)
		s.mu.Lock()
		ready, retryable := pd.sealed, pd.retryable
		s.mu.Unlock()
		// Only an error of parse analysis (class 42: the rewritten text
		// did not resolve in this session) is certain to come before
		// anything ran.
		if retryable && ready && status == 'I' {
			s.p.stats.fallbacks.Add(1)
			s.p.log.Warn("upstream rejected a rewritten statement; sent the original, never rewriting it again",
				"database", s.db, "code", e.Code, "error", e.Message)
			s.forgetPosition(pd.after) // the original's error positions are the client's
			s.writeUp(pd.replay...)
			if err := s.flushUp(); err != nil {
				return true, err
			}
			s.resolve(pd)
			return true, nil
		}
		s.p.stats.fallbackErrors.Add(1)
		s.p.log.Warn("upstream rejected a rewritten statement inside a transaction or batch; error passed on, never rewriting it again",
			"database", s.db, "code", e.Code, "error", e.Message)
		s.passOn(pd, frame, status, rfqSeen)
		return true, nil
	}
	if pd.answered {
		return false, nil
	}
	switch typ {
	case 'N', 'S', 'A':
		return false, nil
	case 'E':
		pd.parseFailed.Store(true)
		s.mu.Lock()
		retryable := pd.retryable
		s.mu.Unlock()
		if !retryable {
			// A Flush made the server send this before any Sync, or
			// it answers a Query of several statements (never
			// replayed): pass it on now.
			var e pgproto3.ErrorResponse
			if e.Decode(frame[5:]) == nil && rejection(e.Code) && !s.inOtherStatement(pd.after, e.Position) {
				s.p.neverAgain(pd.key, pd.fp)
				s.p.stats.fallbackErrors.Add(1)
				s.p.log.Warn("upstream rejected a rewritten statement after a Flush or in a Query of several statements; error passed on, never rewriting it again", "database", s.db, "code", e.Code)
			}
			s.resolve(pd)
			return false, nil
		}
		pd.held = append([]byte(nil), frame...)
		return true, nil
	}
	pd.answered = true
	s.p.cache.markVerified(pd.key)
	s.resolve(pd)
	return false, nil
}

// passOn relays the held error of pd (its position mapped) and the
// ReadyForQuery frame (transaction status status) that ends its request,
// and resolves pd.
func (s *session) passOn(pd *pending, frame []byte, status byte, rfqSeen *int) {
	if s.cap != nil {
		s.cap.server(pd.held)
		s.cap.server(frame)
	}
	s.cw.add(s.mappedOr(pd.held, pd.after))
	s.cw.add(frame)
	*rfqSeen++
	s.rfqs.Add(1)
	s.txStatus.Store(uint32(status))
	s.resolve(pd)
}

// posEntry is a rewritten simple Query's texts and the map between them.
type posEntry struct {
	original, rewritten string
	m                   rewrite.PositionMap
}

// mapPosition returns the ErrorResponse frame with its position (field
// P, 1-based characters in the Query's text) moved from the rewritten
// text of request req to the client's own, or nil when there is nothing
// to change (no map for req, no position, a malformed frame).
func (s *session) mapPosition(frame []byte, req int) []byte {
	s.posMu.Lock()
	pe := s.posMaps[req]
	s.posMu.Unlock()
	if pe == nil {
		return nil
	}
	var e pgproto3.ErrorResponse
	if e.Decode(frame[5:]) != nil || e.Position <= 0 {
		return nil
	}
	e.Position = int32(pe.m.OriginalChar(pe.original, pe.rewritten, int(e.Position)))
	out, err := e.Encode(nil)
	if err != nil {
		return nil
	}
	return out
}

// forgetPosition drops request req's map: the original text was sent.
func (s *session) forgetPosition(req int) {
	s.posMu.Lock()
	delete(s.posMaps, req)
	s.posAny.Store(len(s.posMaps) > 0)
	s.posMu.Unlock()
}

// inOtherStatement reports whether an error at position pos (1-based
// characters) of request req's rewritten Query lies in one of its
// statements that the rewrite did not change.
func (s *session) inOtherStatement(req int, pos int32) bool {
	s.posMu.Lock()
	pe := s.posMaps[req]
	s.posMu.Unlock()
	return pe != nil && !pe.m.InChangedStatement(pe.original, pe.rewritten, int(pos))
}

// mappedOr is frame with its position mapped (mapPosition), or frame.
func (s *session) mappedOr(frame []byte, req int) []byte {
	if m := s.mapPosition(frame, req); m != nil {
		return m
	}
	return frame
}

// rejection reports whether SQLSTATE code can be the server refusing a
// rewritten text: class 42 (syntax error or access rule violation: parse
// analysis, where a text differs from another). Other errors (25P02 in an
// aborted transaction, run-time errors, cancels) the original would have
// met too; they leave the rewrite in use.
func rejection(code string) bool { return strings.HasPrefix(code, "42") }

func (s *session) resolve(pd *pending) {
	s.mu.Lock()
	if s.pending == pd {
		s.pending = nil
	}
	s.mu.Unlock()
	close(pd.done)
}

// onContext follows a statement that may change the session's name
// resolution (the pre-filter flagged it; see classifyContext). first is
// true for a simple Query that starts a batch. It reports whether the
// text changes anything (then it is not rewritten itself).
//
// It reports too whether the text may change the schema (ddl).
func (s *session) onContext(raw []byte, first bool, m *mutators) (changes, ddl bool) {
	alone := first && int64(s.requests) == s.rfqs.Load() && byte(s.txStatus.Load()) == 'I'
	if rewrite.CheckSize(len(raw)) != nil {
		return s.followContext(tooLargeContext()) // classifyContext's answer, without a copy of the text
	}
	return s.followContext(classifyContext(string(raw), alone, m))
}

// followContext applies what a statement does to the session's context
// (onContext).
func (s *session) followContext(c contextChange) (changes, ddl bool) {
	if c.ddl {
		s.p.invalidate(s.db)
		s.ddlInFlight.Store(true)
	}
	if len(c.names) > 0 {
		s.p.cache.dropNamed(s.db, c.names)
		s.namesMu.Lock()
		s.namesInFlight = append(s.namesInFlight, c.names...)
		s.namesPending.Store(true)
		s.namesMu.Unlock()
	}
	switch {
	case c.unknown:
		s.ctxUnknown.Store(true)
	case c.reset:
		s.path = s.startPath
		s.ctxUnknown.Store(s.startUnknown)
		s.setInFlight.Store(true)
	case c.toDefault:
		s.path = s.startPath
		s.setInFlight.Store(true)
	case c.setPath != "":
		s.path = "sql:" + c.setPath
		s.setInFlight.Store(true)
	}
	return c.ddl || c.unknown || c.reset || c.toDefault || c.setPath != "" || len(c.names) > 0, c.ddl
}

// stmtName returns the statement name of a Parse body, or the portal's
// then the statement's of a Bind body (NUL-terminated; nil when
// malformed).
func stmtName(body []byte) []byte {
	i := bytes.IndexByte(body, 0)
	if i < 0 {
		return nil
	}
	return body[:i]
}

// onBind invalidates the database's decisions when the Bind (frame)
// executes a prepared statement that may change the schema (a Parse
// onStatement classified so); a Parse of another text under that name
// forgets it (onParse). It costs nothing while the session prepared no
// such statement.
func (s *session) onBind(frame []byte) {
	if len(s.ddlStmts) == 0 {
		return
	}
	body := frame[5:]
	i := bytes.IndexByte(body, 0)
	if i < 0 {
		return
	}
	if s.ddlStmts[string(stmtName(body[i+1:]))] {
		s.p.invalidate(s.db)
		s.ddlInFlight.Store(true)
	}
}

// onParse forgets that the statement a Parse (frame) replaces may
// change the schema.
func (s *session) onParse(frame []byte) {
	if len(s.ddlStmts) > 0 {
		delete(s.ddlStmts, string(stmtName(frame[5:])))
	}
	if len(s.conds) > 0 {
		s.condReparse(frame)
	}
}

// neverAgain marks statement k (fingerprint fp) as never to be rewritten
// in its context.
func (p *Proxy) neverAgain(k decisionKey, fp string) {
	p.cache.markFailed(k)
	if fp != "" {
		p.cache.markFailed(neverKey(k, fp))
	}
}

// decide returns the cached or fresh decision for text in session s's
// context; fresh is true when the rules ran for this call. A fresh
// decision is made on a side connection of the session's database and
// user with the session's search_path: the rule learns the server's
// types there, and a rewritten text is used only after the server
// prepared it there (rewrite.Options.Types). A text whose validation
// failed, or that a session's server rejected, is never rewritten again
// in that context (by fingerprint) until a schema change.
func (p *Proxy) decide(ctx context.Context, s *session, text string, paramOIDs []uint32) (key decisionKey, d decision, fresh bool) {
	p.stats.statements.Add(1)
	key = decisionKey{db: s.db, user: s.user, path: s.path, params: paramsKey(paramOIDs), text: text}
	if !mayMatch(text) {
		p.stats.prefilterSkips.Add(1)
		return key, decision{}, false
	}
	if s.ctxUnknown.Load() {
		p.stats.contextUnknown.Add(1)
		return key, decision{explain: "the session changed its search_path or role in a way the proxy does not follow"}, false
	}
	gen := p.genOf(s.state())
	s.keyBuf = appendKey(s.keyBuf[:0], key.db, key.user, key.path, key.params, key.text)
	if d, ok := p.cache.getKey(s.keyBuf); ok && d.current(gen, p.cfg.DecisionTTL) {
		p.stats.cacheHits.Add(1)
		return key, d, false
	}
	p.stats.cacheMisses.Add(1)
	now := time.Now()
	checked, err := rewrite.Check(text, p.cfg.MaxParseTokens)
	if err != nil {
		p.notParsed(s.db, err)
		d := decision{explain: err.Error(), gen: gen, at: now}
		p.cache.put(key, d)
		return key, d, true
	}
	fpv, err := checked.Fingerprint()
	if err != nil {
		p.stats.parseErrors.Add(1)
		d := decision{explain: err.Error(), gen: gen, at: now}
		p.cache.put(key, d)
		return key, d, true
	}
	fp := hex.EncodeToString([]byte{byte(fpv >> 56), byte(fpv >> 48), byte(fpv >> 40), byte(fpv >> 32), byte(fpv >> 24), byte(fpv >> 16), byte(fpv >> 8), byte(fpv)})
	if nd, ok := p.cache.get(neverKey(key, fp)); ok && nd.failed && nd.gen == gen {
		d := decision{explain: "never rewritten: a statement of this fingerprint failed validation", fp: fp, gen: gen, at: now}
		p.cache.put(key, d)
		return key, d, true
	}
	d, err = p.decideOnSide(ctx, s, key, checked, text, paramOIDs)
	if err != nil {
		// Not cached: the side connection is retried later.
		p.stats.sideErrors.Add(1)
		p.log.Info("statement not rewritten: side connection", "database", s.db, "err", err)
		return key, decision{explain: err.Error()}, true
	}
	d.fp, d.gen, d.at = fp, gen, now
	p.cache.put(key, d)
	if d.failed {
		p.cache.put(neverKey(key, fp), decision{failed: true, fp: fp, gen: gen, at: now})
	}
	return key, d, true
}

// notParsed counts and logs a statement of database db that is never
// given to the parser (err, a *rewrite.LimitError): its C code would
// overflow the stack and take every session down, or (too many tokens)
// the decision would cost far more than the server's own parse.
func (p *Proxy) notParsed(db string, err error) {
	if le := (*rewrite.LimitError)(nil); errors.As(err, &le) && le.TooManyTokens {
		p.stats.notParsedTokens.Add(1)
		if !p.tokensLogged.Swap(true) {
			p.log.Warn("statement not parsed: more tokens than --max-parse-tokens; such statements are relayed unchanged (this is logged once; the summary counts them)",
				"database", db, "err", err)
		}
		return
	}
	p.stats.notParsed.Add(1)
	p.log.Info("statement not parsed: too large or too deep", "database", db, "err", err)
}

// decideOnSide runs the rules on a side connection set up like session
// s. d.failed is set when validation failed.
func (p *Proxy) decideOnSide(ctx context.Context, s *session, key decisionKey, checked *rewrite.Checked, text string, paramOIDs []uint32) (decision, error) {
	e, err := p.side(ctx, s.db, s.user)
	if err != nil {
		return decision{}, err
	}
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return decision{}, err
	}
	defer conn.Release()
	ok, err := e.setPath(ctx, conn.Conn(), s.db, s.user, key.path)
	if err != nil {
		return decision{}, err
	}
	if !ok {
		return decision{explain: "the session's default search_path is unknown to the proxy"}, nil
	}
	cat := rewrite.NewPGCatalogConn(conn.Conn()).ShareTypes(e.types)
	t0 := time.Now()
	res, err := rewrite.Rewrite(ctx, text, rewrite.Options{Catalog: cat, Types: cat, ParamOIDs: paramOIDs, Disabled: p.cfg.Disabled, MaxTokens: p.cfg.MaxParseTokens, Checked: checked})
	p.stats.parseNanos.Add(uint64(time.Since(t0).Nanoseconds()))
	p.stats.parses.Add(1)
	if err != nil {
		if _, perr := rewrite.Parse(text); perr != nil {
			p.stats.parseErrors.Add(1)
			p.log.Debug("statement not rewritten", "err", err)
			return decision{explain: err.Error()}, nil
		}
		return decision{}, err
	}
	for _, f := range res.Fired {
		if c := p.ruleFired[f.Rule]; c != nil {
			c.Add(1)
		}
	}
	for _, v := range res.Vetoes {
		if c := p.ruleVetoed[v.Rule]; c != nil {
			c.Add(1)
		}
	}
	if !res.Changed && len(res.Vetoes) > 0 {
		p.stats.vetoes.Add(1)
	}
	if res.Validated {
		p.stats.validated.Add(1)
	}
	if res.ValidationFailed {
		p.stats.validationFailures.Add(1)
		p.log.Info("rewrite failed validation: never rewriting this statement", "database", s.db, "explain", res.Explain())
	}
	return decision{changed: res.Changed, rewritten: res.SQL, pos: res.Positions, explain: res.Explain(), names: res.Relations, checks: res.BindChecks,
		replayable: res.Statements == 1, failed: res.ValidationFailed && !res.Changed}, nil
}

func isIdentStart(c byte) bool {
	return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') || c >= 0x80
}

func isIdentChar(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') || c == '$' }

// eqFold compares ASCII word w with lower-case word lw, ignoring case.
func eqFold[T string | []byte](w T, lw string) bool {
	for i := 0; i < len(w); i++ {
		c := w[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lw[i] {
			return false
		}
	}
	return true
}

func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' || c == '\t' {
			b[i] = ' '
		}
	}
	if len(b) > 500 {
		b = append(b[:500], "..."...)
	}
	return string(b)
}
