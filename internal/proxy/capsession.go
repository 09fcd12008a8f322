package proxy

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/erplab/erplab/internal/capture"
)

// capEvent is an event being captured.
type capEvent struct {
	e        capture.Event
	sid      int64  // the session's number
	ord      uint64 // order of making within the session
	size     int64  // bytes counted in Capture.held
	portal   []byte // KindExecute: the Bind's portal
	buf      []byte // KindExecute: the bound values' bytes, which Values slice
	executed bool   // KindExecute: an Execute of its portal came
	answered bool   // the server answered it (its outcome is known)
	copyIn   bool   // the server answered CopyInResponse
	released bool   // handed to the collector (completed, or written early)
	snapshot bool   // a copy force made: shares its slices, never recycled
}

// expect is a client message awaiting the server's answer, in the order
// the server answers (protocol-flow.html): typ is the message type
// ('P', 'B', 'E', 'C', 'S', 'Q', 'F'), 'D' for a Describe of a
// statement, 'd' of a portal, '0' for the startup.
type expect struct {
	typ  byte
	ev   *capEvent // the event it belongs to, if any
	upto uint64    // 'S', 'Q', 'F', '0': events made before it complete at its ReadyForQuery
}

// capSession captures one client session (see Capture). The client
// hook (client, from clientLoop) makes events and records which answers
// they await; the server hook (server, from upstreamLoop, for each
// message relayed to the client as the client sees it) fills in their
// outcome; a ReadyForQuery completes the events of its request, with the
// transaction status, and hands them to the collector in order.
//
// Events: Query (KindQuery; KindCopy when the server answers
// CopyInResponse: the CopyData follows as the event's Data), Parse
// (KindPrepare, every one, the unnamed statement's too; the
// ParameterDescription of a Describe of it in the same batch as
// ServerParamOIDs), Bind (KindExecute, written when an Execute of its
// portal came; a Bind never executed in its batch is dropped; the Execute
// continuing a suspended portal adds none), Terminate or the end
// (KindDisconnect). Describe, Close, Sync and Flush make none (see
// docs/capture-format.md), nor does a fast-path FunctionCall. After an
// error in an extended batch the server skips to the Sync: the events of
// the skipped messages get that error's SQLSTATE. A password message is
// never seen (the hooks start after authentication) and startup
// parameters named like a password are left out.
type capSession struct {
	c   *Capture
	id  int64
	sid string

	mu         sync.Mutex
	fifo       []*capEvent // events made and not yet completed, from fh on
	fh         int
	q          []expect // answers awaited, from qh on
	qh         int
	oldest     int64  // send time of the oldest unreleased event, MaxInt64 when none (read by the collector)
	made       uint64 // events made
	live       bool   // logged in
	ended      bool
	last       *capEvent // the event made last
	connect    *capEvent
	bye        *capEvent
	copying    *capEvent // the event CopyData goes to
	unnamedSQL string    // the unnamed statement's text

	rowsSeen int64 // DataRows since the last completion (upstreamLoop only)
}

// open starts the capture of a session whose startup packet carried
// params, now (nil when c is nil, or for a packet the proxy does not
// take). The session counts for the collector from here on; close
// forgets it, writing nothing unless loggedIn was called.
func (c *Capture) open(params map[string]string) *capSession {
	if c == nil || params == nil || c.closed.Load() {
		return nil
	}
	sc := &capSession{c: c, oldest: math.MaxInt64}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	c.sessMu.Lock() // registered before its first event's time is taken (see watermark)
	c.nextID++
	sc.id = c.nextID
	c.sessions[sc] = struct{}{}
	c.sessMu.Unlock()
	sc.sid = strconv.FormatInt(sc.id, 10)
	ev := sc.newEvent(capture.KindConnect)
	ev.e.Params = make(map[string]string, len(params))
	for k, v := range params {
		if !strings.Contains(strings.ToLower(k), "password") {
			ev.e.Params[k] = v
		}
	}
	sc.connect = ev
	sc.await('0', ev, sc.made)
	sc.account(ev)
	return sc
}

// loggedIn marks the session as authenticated and returns it.
func (sc *capSession) loggedIn() *capSession {
	if sc == nil {
		return nil
	}
	sc.mu.Lock()
	sc.live = true
	sc.mu.Unlock()
	sc.c.captured.Add(1)
	return sc
}

// close ends the session's capture: the disconnect (at the Terminate, or
// now), every event still held (unanswered ones noted), all handed to
// the collector; for a session that never logged in, nothing.
func (sc *capSession) close() {
	if sc == nil {
		return
	}
	c := sc.c
	sc.mu.Lock()
	if !sc.ended {
		// A session that never logged in is written only when its
		// connect was (forced out by the memory bound): then it ends.
		if sc.bye == nil && (sc.live || sc.connect.released) {
			sc.bye = sc.newEvent(capture.KindDisconnect)
			sc.bye.answered = true
			sc.account(sc.bye)
		}
		sc.ended = true
		c.inMu.Lock()
		for sc.fh < len(sc.fifo) {
			ev := sc.popEvent()
			switch {
			case ev.released:
			case ev == sc.bye:
				ev.released = true
				c.inbox = append(c.inbox, ev)
			case !sc.live || ev.e.Kind == capture.KindExecute && !ev.executed:
				c.discard(ev)
			default:
				if !ev.answered {
					ev.e.Rows = -1
					ev.e.Note = addNote(ev.e.Note, capture.NoteUnanswered)
				}
				ev.released = true
				c.inbox = append(c.inbox, ev)
			}
		}
		c.inMu.Unlock()
		sc.oldest = math.MaxInt64
	}
	sc.mu.Unlock()
	c.sessMu.Lock()
	delete(c.sessions, sc)
	c.sessMu.Unlock()
	c.signal()
}

// newEvent makes an event of kind k sent now; sc.mu held. Its time is
// taken under the lock (see Capture.watermark).
func (sc *capSession) newEvent(k capture.Kind) *capEvent {
	ev := sc.c.event()
	ev.e.Kind, ev.e.Session, ev.e.T = k, sc.sid, sc.c.now()
	ev.sid, ev.ord = sc.id, sc.made
	sc.made++
	if sc.fh == len(sc.fifo) {
		sc.oldest = ev.e.T
	}
	sc.fifo = append(sc.fifo, ev)
	sc.last = ev
	return ev
}

// account counts ev's bytes as held, once its fields are filled in.
func (sc *capSession) account(ev *capEvent) {
	e := &ev.e
	ev.size = 200 + int64(len(e.SQL)+len(e.Name)+len(ev.buf)+len(ev.portal)+len(e.Data)+4*len(e.ParamOIDs)+2*len(e.Formats)+24*len(e.Values))
	for k, v := range e.Params {
		ev.size += int64(len(k) + len(v))
	}
	sc.grow(ev.size)
}

// grow adds n bytes to those held, waking the collector over the bound.
func (sc *capSession) grow(n int64) {
	if sc.c.held.Add(n) > sc.c.limit {
		sc.c.signal()
	}
}

// usable reports whether ev may still be changed (not handed over).
func usable(ev *capEvent) bool { return ev != nil && !ev.released }

func (sc *capSession) await(typ byte, ev *capEvent, upto uint64) {
	sc.q = append(sc.q, expect{typ: typ, ev: ev, upto: upto})
}

// head is the answer awaited first; ok false when none.
func (sc *capSession) head() (expect, bool) {
	if sc.qh == len(sc.q) {
		return expect{}, false
	}
	return sc.q[sc.qh], true
}

func (sc *capSession) pop() {
	sc.q[sc.qh] = expect{}
	sc.qh++
	if sc.qh == len(sc.q) {
		sc.q, sc.qh = sc.q[:0], 0
	}
}

func (sc *capSession) popEvent() *capEvent {
	ev := sc.fifo[sc.fh]
	sc.fifo[sc.fh] = nil
	sc.fh++
	if sc.fh == len(sc.fifo) {
		sc.fifo, sc.fh = sc.fifo[:0], 0
	}
	return ev
}

// setOldest recomputes sc.oldest; sc.mu held.
func (sc *capSession) setOldest() {
	sc.oldest = math.MaxInt64
	for _, ev := range sc.fifo[sc.fh:] {
		if !ev.released {
			sc.oldest = ev.e.T
			return
		}
	}
}

// client records a message the client sent (frame: type, length, body),
// before it is relayed.
func (sc *capSession) client(frame []byte) {
	typ, body := frame[0], frame[5:]
	switch typ {
	case 'H', 'p': // Flush: no answer; a password message: never captured
		return
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.ended {
		return
	}
	switch typ {
	case 'd':
		if !usable(sc.copying) {
			// Clients such as pgx send the data right after the
			// COPY, before the server's CopyInResponse.
			if ev := sc.last; usable(ev) && !ev.answered && (ev.e.Kind == capture.KindQuery || ev.e.Kind == capture.KindExecute) {
				sc.copying = ev
			}
		}
		if ev := sc.copying; usable(ev) {
			ev.e.Data = append(ev.e.Data, body...)
			ev.size += int64(len(body))
			sc.grow(int64(len(body)))
		}
	case 'c', 'f':
		if typ == 'f' && usable(sc.copying) {
			sc.copying.e.Note = addNote(sc.copying.e.Note, capture.NoteCopyFail)
		}
		sc.copying = nil
	case 'Q':
		ev := sc.newEvent(capture.KindQuery)
		if i := bytes.IndexByte(body, 0); i >= 0 {
			ev.e.SQL = string(body[:i])
		}
		sc.account(ev)
		sc.await('Q', ev, sc.made)
	case 'P':
		ev := sc.newEvent(capture.KindPrepare)
		ev.parse(body)
		if ev.e.Name == "" {
			sc.unnamedSQL = ev.e.SQL
		}
		sc.account(ev)
		sc.await('P', ev, 0)
	case 'B':
		ev := sc.newEvent(capture.KindExecute)
		ev.bind(body)
		if ev.e.Name == "" {
			ev.e.SQL = sc.unnamedSQL
		}
		sc.account(ev)
		sc.await('B', ev, 0)
	case 'E':
		sc.await('E', sc.execute(cstring(body)), 0)
	case 'D':
		if len(body) > 0 && body[0] == 'S' {
			sc.await('D', sc.prepared(cstring(body[1:])), 0)
		} else {
			sc.await('d', nil, 0)
		}
	case 'C', 'F':
		sc.await(typ, nil, sc.made)
	case 'S':
		sc.await('S', sc.last, sc.made)
	case 'X':
		if sc.bye == nil {
			sc.bye = sc.newEvent(capture.KindDisconnect)
			sc.bye.answered = true
			sc.account(sc.bye)
		}
	}
}

// execute returns the event of the latest Bind of portal not yet
// executed, marked executed (nil when none: the Execute continues a
// suspended portal).
func (sc *capSession) execute(portal []byte) *capEvent {
	for i := len(sc.fifo) - 1; i >= sc.fh; i-- {
		ev := sc.fifo[i]
		if ev.e.Kind == capture.KindExecute && !ev.executed && bytes.Equal(ev.portal, portal) {
			ev.executed = true
			return ev
		}
	}
	return nil
}

// prepared returns the unfinished Parse of statement name (nil when it
// was in an earlier batch).
func (sc *capSession) prepared(name []byte) *capEvent {
	for i := len(sc.fifo) - 1; i >= sc.fh; i-- {
		ev := sc.fifo[i]
		if ev.e.Kind == capture.KindPrepare && ev.e.Name == string(name) {
			return ev
		}
	}
	return nil
}

// rewritten notes that the proxy sent the last Query or Parse rewritten.
func (sc *capSession) rewritten() {
	sc.mu.Lock()
	if ev := sc.last; usable(ev) && (ev.e.Kind == capture.KindQuery || ev.e.Kind == capture.KindPrepare) {
		ev.e.Note = addNote(ev.e.Note, capture.NoteRewritten)
	}
	sc.mu.Unlock()
}

// server records a message of the server as relayed to the client.
func (sc *capSession) server(frame []byte) {
	switch frame[0] {
	case 'D':
		sc.rowsSeen++
		return
	case '1', '2', '3', 't', 'T', 'n', 'C', 'I', 's', 'G', 'E', 'Z', 'K':
	default:
		return
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if !sc.ended {
		sc.answer(frame[0], frame[5:])
	}
}

// answer applies one server message; sc.mu held.
func (sc *capSession) answer(typ byte, body []byte) {
	switch typ {
	case 'K':
		if ev := sc.connect; usable(ev) && len(body) >= 4 {
			ev.e.BackendPID = int32(binary.BigEndian.Uint32(body))
		}
		return
	case 'Z':
		sc.ready(body)
		return
	}
	h, ok := sc.head()
	if !ok {
		return
	}
	ev := h.ev
	switch typ {
	case '1':
		if h.typ == 'P' {
			sc.done(ev)
			sc.pop()
		}
	case '2':
		if h.typ == 'B' {
			sc.pop()
		}
	case '3':
		if h.typ == 'C' {
			sc.pop()
		}
	case 't':
		if h.typ == 'D' && usable(ev) && len(body) >= 2 {
			n := int(binary.BigEndian.Uint16(body))
			if len(body) >= 2+4*n {
				oids := ev.e.ServerParamOIDs[:0]
				for i := range n {
					oids = append(oids, binary.BigEndian.Uint32(body[2+4*i:]))
				}
				ev.e.ServerParamOIDs = oids
			}
		}
	case 'T', 'n':
		if h.typ == 'D' || h.typ == 'd' {
			sc.pop()
		}
	case 'C':
		sc.complete(h, cstring(body))
	case 'I', 's':
		if h.typ == 'E' || h.typ == 'Q' {
			if typ == 's' && usable(ev) {
				ev.e.Rows += sc.rowsSeen
			}
			sc.done(ev)
			if h.typ == 'E' {
				sc.pop()
			}
		}
		sc.rowsSeen = 0
	case 'G':
		if (h.typ == 'Q' || h.typ == 'E') && usable(ev) {
			if h.typ == 'Q' {
				ev.e.Kind = capture.KindCopy
			}
			ev.copyIn = true
			if len(ev.e.Data) == 0 { // else the data came first, and may be complete
				sc.copying = ev
			}
		}
	case 'E':
		sc.failed(h, errorCode(body))
	}
}

// done records that ev was answered now.
func (sc *capSession) done(ev *capEvent) {
	if usable(ev) {
		ev.answered = true
		ev.e.Duration = sc.c.now() - ev.e.T
	}
}

// complete applies a CommandComplete (tag) to the Execute or Query h.
func (sc *capSession) complete(h expect, tag []byte) {
	sc.rowsSeen = 0
	if h.typ != 'E' && h.typ != 'Q' {
		return
	}
	if ev := h.ev; usable(ev) {
		if !ev.copyIn {
			ev.e.Data = ev.e.Data[:0] // CopyData the server ignored
		}
		ev.e.Tag = string(tag)
		ev.e.Rows += tagRows(tag)
		sc.done(ev)
		if sc.copying == ev {
			sc.copying = nil
		}
	}
	if h.typ == 'E' {
		sc.pop()
	}
}

// failed applies an ErrorResponse of SQLSTATE code to the request h.
func (sc *capSession) failed(h expect, code string) {
	sc.copying = nil
	sc.rowsSeen = 0
	mark := func(ev *capEvent) {
		if usable(ev) && ev.e.SQLState == "" {
			if !ev.copyIn {
				ev.e.Data = ev.e.Data[:0] // a COPY refused before its CopyInResponse
			}
			ev.e.SQLState = code
			sc.done(ev)
		}
	}
	switch h.typ {
	case 'Q', '0', 'S': // 'S': the implicit transaction's commit at the Sync, its last statement's
		mark(h.ev)
	case 'F':
	default:
		// An extended-protocol message: the server skips the rest of
		// the batch up to its Sync; what it skipped failed with it.
		for {
			mark(h.ev)
			sc.pop()
			var ok bool
			if h, ok = sc.head(); !ok || h.typ == 'S' {
				return
			}
		}
	}
}

// ready applies a ReadyForQuery (body: the transaction status): the
// request it ends is the first Sync, Query, FunctionCall or startup
// awaited (answers still awaited before it are dropped), and the events
// made before that request complete.
func (sc *capSession) ready(body []byte) {
	sc.copying, sc.rowsSeen = nil, 0
	for {
		h, ok := sc.head()
		if !ok {
			return
		}
		sc.pop()
		switch h.typ {
		case '0':
			sc.done(h.ev)
			fallthrough
		case 'S', 'Q', 'F':
			var status byte
			if len(body) > 0 {
				status = body[0]
			}
			sc.release(h.upto, txStatus(status))
			return
		}
	}
}

// release hands the events made before event number upto to the
// collector, with transaction status tx.
func (sc *capSession) release(upto uint64, tx string) {
	c := sc.c
	pushed := false
	c.inMu.Lock()
	for sc.fh < len(sc.fifo) && sc.fifo[sc.fh].ord < upto {
		ev := sc.popEvent()
		switch {
		case ev.released: // written early
		case ev.e.Kind == capture.KindExecute && !ev.executed:
			c.discard(ev)
		default:
			ev.e.TxAfter = tx
			ev.released = true
			c.inbox = append(c.inbox, ev)
			pushed = true
		}
	}
	c.inMu.Unlock()
	sc.setOldest()
	if pushed {
		c.signal()
	}
}

// parse fills a KindPrepare event from a Parse body (name, text, the
// parameter type OIDs): the name and text share one string.
func (ev *capEvent) parse(body []byte) {
	i := bytes.IndexByte(body, 0)
	if i < 0 {
		return
	}
	j := bytes.IndexByte(body[i+1:], 0)
	if j < 0 {
		return
	}
	s := string(body[:i+1+j])
	ev.e.Name, ev.e.SQL = s[:i], s[i+1:]
	rest := body[i+1+j+1:]
	if len(rest) < 2 {
		return
	}
	n := int(binary.BigEndian.Uint16(rest))
	if len(rest) < 2+4*n {
		return
	}
	for k := range n {
		ev.e.ParamOIDs = append(ev.e.ParamOIDs, binary.BigEndian.Uint32(rest[2+4*k:]))
	}
}

// bind fills a KindExecute event from a Bind body: portal, statement,
// parameter formats, values (copied into ev.buf), result formats. A
// malformed body leaves the rest empty (the server refuses it).
func (ev *capEvent) bind(body []byte) {
	portal := cstring(body)
	ev.portal = append(ev.portal[:0], portal...)
	body = body[min(len(portal)+1, len(body)):]
	stmt := cstring(body)
	if len(stmt) > 0 {
		ev.e.Name = string(stmt)
	}
	r := reader{b: body[min(len(stmt)+1, len(body)):], ok: true}
	for n := r.int16(); n > 0 && r.ok; n-- {
		ev.e.Formats = append(ev.e.Formats, int16(r.int16()))
	}
	n := r.int16()
	size, start := 0, r.b
	for k := 0; k < n && r.ok; k++ { // first pass: the values' size
		if l := r.int32(); l > 0 {
			size += l
			r.skip(l)
		}
	}
	if !r.ok {
		return
	}
	if cap(ev.buf) < size {
		ev.buf = make([]byte, 0, size)
	}
	buf := ev.buf[:0]
	r = reader{b: start, ok: true}
	for range n {
		l := r.int32()
		if l < 0 {
			ev.e.Values = append(ev.e.Values, nil)
			continue
		}
		buf = append(buf, r.b[:l]...)
		r.skip(l)
		ev.e.Values = append(ev.e.Values, buf[len(buf)-l:len(buf):len(buf)])
	}
	ev.buf = buf
	for n := r.int16(); n > 0 && r.ok; n-- {
		ev.e.ResultFormats = append(ev.e.ResultFormats, int16(r.int16()))
	}
}

// reader reads big-endian integers from a message body; ok turns false
// at the first read past its end.
type reader struct {
	b  []byte
	ok bool
}

func (r *reader) int16() int {
	if len(r.b) < 2 {
		r.ok = false
		return 0
	}
	v := int(int16(binary.BigEndian.Uint16(r.b)))
	r.b = r.b[2:]
	return v
}

func (r *reader) int32() int {
	if len(r.b) < 4 {
		r.ok = false
		return 0
	}
	v := int(int32(binary.BigEndian.Uint32(r.b)))
	r.b = r.b[4:]
	return v
}

func (r *reader) skip(n int) {
	if n > len(r.b) {
		r.ok = false
		r.b = nil
		return
	}
	r.b = r.b[n:]
}

// cstring is b up to its first NUL (all of b when none).
func cstring(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// tagRows is the row count of a command tag ("INSERT 0 5", "SELECT 3":
// its last word when a number), 0 for tags without one.
func tagRows(tag []byte) int64 {
	i := bytes.LastIndexByte(tag, ' ')
	if i < 0 || i == len(tag)-1 || len(tag)-i > 19 {
		return 0
	}
	var n int64
	for _, c := range tag[i+1:] {
		if c < '0' || c > '9' {
			return 0
		}
		n = 10*n + int64(c-'0')
	}
	return n
}

// errorCode is the SQLSTATE (field C) of an ErrorResponse body.
func errorCode(body []byte) string {
	for len(body) > 1 {
		f := body[0]
		v := cstring(body[1:])
		if f == 'C' {
			return string(v)
		}
		body = body[min(1+len(v)+1, len(body)):]
	}
	return ""
}

// txStatus is a ReadyForQuery status as TxAfter.
func txStatus(b byte) string {
	switch b {
	case 'I':
		return "I"
	case 'T':
		return "T"
	case 'E':
		return "E"
	}
	return ""
}
