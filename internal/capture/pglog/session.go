package pglog

import (
	"fmt"

	"github.com/erplab/erplab/internal/capture"
)

// session is one client session of the log.
type session struct {
	id        string
	user, db  string
	app       string
	pid       int32
	received  int64 // µs: its connection received line, 0 when none
	connected bool  // its connect event is made
	logged    bool  // ... from the log's own connection line
	ignored   bool  // a replication connection
	last      int64 // t of its last event
	tx        byte  // transaction status after its last statement
	prepared  map[string]string
	open      *openStmt   // the statement running, logged at its start
	parse     *phaseState // the unnamed statement's logged parse
	bind      *phaseState // a logged bind waiting for its execute
}

// openStmt is a statement whose outcome (duration, error) is still to
// come. Its event is already in the sorter.
type openStmt struct {
	e      *capture.Event
	start  int64 // µs
	sql    string
	cl     class
	before byte  // the transaction status before it
	base   int64 // µs of its parse and bind, added to its duration
}

// phaseState is a logged parse or bind: it ended before the execute.
type phaseState struct {
	name, sql  string
	start, dur int64 // µs
	values     [][]byte
}

// record handles one log record.
func (c *converter) record(r *record) error {
	c.sum.Records++
	t := r.time.UnixMicro()
	if c.first == 0 {
		c.first = t
	}
	c.now = max(c.now, t)
	switch {
	case !client(r):
		c.sum.Ignored++
	case r.severity == "LOG":
		c.log(r, t)
	case r.severity == "ERROR" || r.severity == "FATAL" || r.severity == "PANIC":
		c.failure(r, t)
	default:
		c.sum.Ignored++
	}
	return c.sort.release(c.now)
}

// client reports whether r comes from a client session.
func client(r *record) bool {
	switch r.backend {
	case "", "client backend", "not initialized":
		return r.session != ""
	}
	return false
}

// log handles a LOG message.
func (c *converter) log(r *record, t int64) {
	m, err := parseMessage(r.message)
	if err != nil {
		c.sum.problem(1, r.at, "%v", err)
		return
	}
	if s := c.sessions[r.session]; s != nil && s.ignored {
		c.ignoredSession(s, m)
		return
	}
	switch m.kind {
	case msgReceived:
		c.session(r).received = t
	case msgAuthorized:
		c.connect(r, t, m)
	case msgReplication:
		c.session(r).ignored = true
		c.sum.Ignored++
	case msgDisconnect:
		c.disconnect(r, t)
	case msgStatement, msgExecute:
		c.startLines++
		c.started(r, t, m)
	case msgDuration:
		c.duration(r, t, m)
	case msgFastPath:
		c.sum.FastPath++
	default:
		c.sum.Ignored++
	}
}

// ignoredSession counts a replication session's message, forgetting the
// session at its end.
func (c *converter) ignoredSession(s *session, m message) {
	c.sum.Ignored++
	if m.kind == msgDisconnect {
		delete(c.sessions, s.id)
	}
}

// session is r's session, new (not yet connected) when it has none.
func (c *converter) session(r *record) *session {
	s := c.sessions[r.session]
	if s == nil {
		s = &session{id: r.session, pid: r.pid, tx: txIdle, prepared: map[string]string{}}
		c.sessions[r.session] = s
	}
	s.user = cmpOr(r.user, s.user)
	s.db = cmpOr(r.db, s.db)
	s.app = cmpOr(r.app, s.app)
	return s
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// push hands e, starting at t (µs), to the sorter for s, after s's
// previous event at the latest, making s's connect first when it has
// none. It returns the t used.
func (c *converter) push(s *session, t int64, e *capture.Event) int64 {
	t = max(t, s.last)
	if !s.connected {
		s.connected = true
		c.sum.Synthetic++
		c.sort.push(t, &capture.Event{Kind: capture.KindConnect, Session: s.id, Params: s.params(),
			BackendPID: s.pid, Where: e.Where})
	}
	s.last = t
	e.Session = s.id
	c.sort.push(t, e)
	return t
}

// params are the startup parameters known from the log lines.
func (s *session) params() map[string]string {
	p := map[string]string{}
	for k, v := range map[string]string{"user": s.user, "database": s.db, "application_name": s.app} {
		if v != "" {
			p[k] = v
		}
	}
	return p
}

// connect handles "connection authorized".
func (c *converter) connect(r *record, t int64, m message) {
	s := c.session(r)
	if s.connected {
		c.sum.problem(1, r.at, "a second connection line for session %s", s.id)
		return
	}
	p := authorized(m.rest)
	p["user"] = cmpOr(p["user"], s.user)
	p["database"] = cmpOr(p["database"], s.db)
	if p["application_name"] != "" {
		s.app = p["application_name"]
	}
	s.connected, s.logged = true, true
	if s.received != 0 {
		t = s.received
	}
	c.push(s, t, &capture.Event{Kind: capture.KindConnect, Params: p, BackendPID: r.pid, Where: r.at})
}

// disconnect handles "disconnection".
func (c *converter) disconnect(r *record, t int64) {
	s := c.sessions[r.session]
	if s == nil || !s.connected {
		delete(c.sessions, r.session)
		c.sum.Ignored++ // a session with nothing in the log
		return
	}
	s.open = nil
	c.push(s, t, &capture.Event{Kind: capture.KindDisconnect, Where: r.at})
	delete(c.sessions, s.id)
}

// started handles a statement logged at its start (log_statement):
// "statement: SQL" and "execute NAME: SQL".
func (c *converter) started(r *record, t int64, m message) {
	s := c.session(r)
	s.open = nil // a new statement: the previous one is over
	if m.kind == msgStatement {
		c.query(s, r, t, m.sql, false, 0)
		return
	}
	c.execute(s, r, t, m, false)
}

// duration handles "duration: D ms", alone (the end of the statement
// logged at its start) or with its statement (logged at its end).
func (c *converter) duration(r *record, t int64, m message) {
	if m.phase == "" {
		c.ended(r, m.dur)
		return
	}
	s := c.session(r)
	start := t - m.dur
	switch m.phase {
	case "parse":
		c.parsed(s, r, start, m)
	case "bind":
		values, err := parseParams(r.detail)
		if err != nil {
			c.sum.problem(1, r.at, "%v", err)
			return
		}
		s.bind = &phaseState{name: m.name, sql: m.sql, start: start, dur: m.dur, values: values}
	case "statement":
		s.open = nil
		c.noteDuration(m.dur)
		c.query(s, r, start, m.sql, true, m.dur)
	case "execute":
		s.open = nil
		c.noteDuration(m.dur)
		c.execute(s, r, start, m, true)
	}
}

// ended gives the open statement of r's session its duration.
func (c *converter) ended(r *record, dur int64) {
	s := c.sessions[r.session]
	if s == nil || s.open == nil {
		c.sum.Ignored++ // a fetch, or a statement begun before the log
		return
	}
	c.outcome(s.open)
	s.open.e.Duration = s.open.base + dur
	s.open = nil
}

// outcome counts an outcome that comes after its event was written (a
// statement running longer than the sorting window): it is lost.
func (c *converter) outcome(o *openStmt) {
	if o.e.T != 0 {
		c.sum.warn("an outcome came after its statement was written (it ran longer than the sorting window): raise Options.Window")
	}
}

// noteDuration keeps the evidence of a partial log.
func (c *converter) noteDuration(dur int64) {
	c.durStmts++
	if c.minDur < 0 || dur < c.minDur {
		c.minDur = dur
	}
}

// parsed handles "parse NAME: SQL": a named statement's prepare; an
// unnamed one's start waits for its execute.
func (c *converter) parsed(s *session, r *record, start int64, m message) {
	if m.name == "" {
		s.parse = &phaseState{sql: m.sql, start: start, dur: m.dur}
		return
	}
	s.prepared[m.name] = m.sql
	c.push(s, start, &capture.Event{Kind: capture.KindPrepare, Name: m.name, SQL: m.sql, Duration: m.dur, Where: r.at})
}

// query makes a simple-protocol statement starting at start; done: its
// duration dur is known.
func (c *converter) query(s *session, r *record, start int64, sql string, done bool, dur int64) {
	cl := c.class.classify(sql)
	if cl.copyIn {
		c.sum.Copy++
		return
	}
	e := &capture.Event{Kind: capture.KindQuery, SQL: sql, Rows: -1, Where: r.at}
	c.statement(s, start, e, sql, cl, 0)
	if done {
		e.Duration = dur
		s.open = nil
	}
}

// execute makes an extended-protocol execute starting at start (done: m.dur
// is its execution time), with its bind and parse when they are logged.
func (c *converter) execute(s *session, r *record, start int64, m message, done bool) {
	if m.fetch {
		c.sum.Fetch++
		return
	}
	values, err := parseParams(r.detail)
	if err != nil {
		c.sum.problem(1, r.at, "%v", err)
		return
	}
	start, base := s.phases(m, start)
	cl := c.class.classify(m.sql)
	if cl.copyIn {
		c.sum.Copy++
		return
	}
	c.prepare(s, m.name, m.sql, start, r.at)
	e := &capture.Event{Kind: capture.KindExecute, Name: m.name, Values: values, Rows: -1, Where: r.at}
	if m.name == "" {
		e.SQL = m.sql
	}
	c.statement(s, start, e, m.sql, cl, base)
	if done {
		e.Duration = base + m.dur
		s.open = nil
	}
}

// phases takes the logged bind (and, for the unnamed statement, parse)
// of the execute m: its start and their duration.
func (s *session) phases(m message, start int64) (int64, int64) {
	var base int64
	if b := s.bind; b != nil && b.name == m.name && b.sql == m.sql {
		start, base = min(start, b.start), b.dur
	}
	if p := s.parse; m.name == "" && p != nil && p.sql == m.sql {
		start, base = min(start, p.start), base+p.dur
	}
	s.bind, s.parse = nil, nil
	return start, base
}

// prepare makes the prepare of a named statement whose parse is not in
// the log (log_statement logs none; the session began before the log).
func (c *converter) prepare(s *session, name, sql string, t int64, at string) {
	if name == "" || s.prepared[name] == sql {
		return
	}
	if s.logged && c.startLines == 0 && c.gap == "" {
		c.gap = fmt.Sprintf("the parse of prepared statement %s executed at %s is not in the log: log_min_duration_statement seems above 0", name, at)
	}
	s.prepared[name] = sql
	c.push(s, t, &capture.Event{Kind: capture.KindPrepare, Name: name, SQL: sql, Where: at})
}

// statement pushes e, a statement of class cl starting at start, as s's
// open statement, with the transaction status it leaves on success.
func (c *converter) statement(s *session, start int64, e *capture.Event, sql string, cl class, base int64) {
	before := s.tx
	s.tx = cl.after(before)
	e.TxAfter = string(s.tx)
	start = c.push(s, start, e)
	s.open = &openStmt{e: e, start: start, sql: sql, cl: cl, before: before, base: base}
}

// failure handles ERROR, FATAL and PANIC: the statement they belong to
// gets their SQLSTATE (see the package doc).
func (c *converter) failure(r *record, t int64) {
	s := c.sessions[r.session]
	if s == nil && r.stmt == "" {
		c.sum.Ignored++
		return
	}
	s = c.session(r)
	bare := r.stmt == "" && r.severity == "ERROR"
	switch {
	case s.open != nil && (r.stmt == s.open.sql || bare):
		c.fail(s, r, t)
	case s.bind != nil && (r.stmt == s.bind.sql || bare):
		b := s.bind
		s.open = nil
		c.execute(s, r, b.start, message{phase: "execute", name: b.name, sql: b.sql}, false)
		if s.open != nil {
			s.open.e.Values = b.values
			c.fail(s, r, t)
		}
	case r.stmt != "":
		s.open = nil
		c.query(s, r, t, r.stmt, false, 0)
		if s.open != nil {
			c.fail(s, r, t)
		}
	default:
		c.sum.Ignored++
	}
	if r.severity != "ERROR" && !s.connected {
		delete(c.sessions, s.id) // a connection that failed before it was authorized
	}
}

// fail gives s's open statement the error r at t and closes it.
func (c *converter) fail(s *session, r *record, t int64) {
	o := s.open
	s.open = nil
	c.outcome(o)
	o.e.SQLState = cmpOr(r.state, "XX000")
	if o.e.Duration == 0 {
		o.e.Duration = max(0, t-o.start)
	}
	s.tx = o.cl.failed(o.before)
	o.e.TxAfter = string(s.tx)
}
