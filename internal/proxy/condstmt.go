package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"strconv"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgproto3"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/erplab/erplab/internal/rewrite"
)

// Statements rewritten on condition of their parameters' values
// (rewrite.Result.BindChecks: a moved subquery has a LIKE whose pattern
// is a parameter, which must not end with an escape character). A Parse
// of such a statement that starts a batch is sent as three messages: a
// Close and a Parse of the rewritten text under a private name
// (condPrefix and a number), then the client's Parse as the client sent
// it. Each Bind of the client's name whose checked values all pass
// rewrite.LikePatternSafe is bound to the private rewritten statement
// (condBind); any other Bind, and whatever the proxy is unsure of (the
// Parse failed, a DEALLOCATE of unknown outcome, a Bind relayed as it
// arrives), goes to the client's statement as sent, which is what the
// client would meet directly. Describe sees the client's statement.
//
// The private Close and Parse come first, so that their answers are the
// first after the ReadyForQuery that ends the previous request: the
// upstream loop drops the CloseComplete and the ParseComplete
// (condInjection). An error of the private Parse is the rewritten text
// rejected: the server skips the client's Parse, and the pending
// verdict acts as for any rejected rewrite (the original sent again at
// a batch's start). A Close of the client's name closes the private
// statement too, and the session follows DEALLOCATE and DISCARD ALL
// (condPoison, condAwait).

// condPrefix starts the names of the private statements.
const condPrefix = "erplab_rw_"

// condStmt is a client's statement prepared on condition.
type condStmt struct {
	priv   string // the private rewritten statement's name
	checks []int  // the parameters to check, $n numbers
	params int    // the number of parameters a Bind gives (the server's count)
	pd     *pending
	// poisoned: a DEALLOCATE or DISCARD may have dropped the client's
	// statement (it failed, its outcome unknown): every Bind goes to the
	// client's statement as sent.
	poisoned bool
}

// condInjection is the messages the proxy put before a request's first:
// the answers expected to them, to drop, after ReadyForQuery number after.
type condInjection struct {
	after  int
	expect []byte
}

// condParse returns the frames to send for the client's Parse (frame,
// parse decoded) of a statement rewritten (rewritten: the text) on
// condition of parameters checks, and registers it with pending pd; nil
// when it cannot.
func (s *session) condParse(frame []byte, parse *pgproto3.Parse, rewritten string, checks []int, pd *pending) []byte {
	params, err := rewrite.MaxParam(parse.Query)
	if err != nil {
		return nil
	}
	s.condSeq++
	priv := condPrefix + strconv.Itoa(s.condSeq)
	var out []byte
	var expect []byte
	if old := s.conds[parse.Name]; old != nil { // the unnamed statement, replaced
		s.condDrops = append(s.condDrops, old.priv)
	}
	for _, d := range append(s.condDrops, priv) {
		out, _ = (&pgproto3.Close{ObjectType: 'S', Name: d}).Encode(out) // fails only on a name over 1GB
		expect = append(expect, '3')
	}
	rw := &pgproto3.Parse{Name: priv, Query: rewritten, ParameterOIDs: parse.ParameterOIDs}
	out, err = rw.Encode(out)
	if err != nil {
		return nil
	}
	s.condDrops = s.condDrops[:0]
	expect = append(expect, '1')
	out = append(out, frame...)
	if s.conds == nil {
		s.conds = map[string]*condStmt{}
	}
	s.conds[parse.Name] = &condStmt{priv: priv, checks: checks, params: max(params, len(parse.ParameterOIDs)), pd: pd}
	s.inject(&condInjection{after: s.requests, expect: expect})
	return out
}

// condKeep reports whether a Parse (of statement name) of a statement
// rewritten on condition must be sent as written: a simple Query, not
// at a batch's start or in a batch already awaiting a verdict, a named
// statement that exists (its Parse fails), under --capture.
func (s *session) condKeep(simple, canPend, atBatchStart bool, name string) bool {
	if simple || !canPend || !atBatchStart || s.cap != nil {
		return true
	}
	_, exists := s.conds[name]
	return exists && name != ""
}

// condClose returns the frames to send for the client's Close (frame)
// and forgets a conditional statement it closes: its private original
// is closed before it when the Close starts a batch, else with the next
// conditional Parse.
func (s *session) condClose(frame []byte, atBatchStart bool) []byte {
	if len(s.conds) == 0 || len(frame) < 7 || frame[5] != 'S' {
		return frame
	}
	name := string(stmtName(frame[6:]))
	c := s.conds[name]
	if c == nil {
		return frame
	}
	delete(s.conds, name)
	if !atBatchStart {
		s.condDrops = append(s.condDrops, c.priv)
		return frame
	}
	out, _ := (&pgproto3.Close{ObjectType: 'S', Name: c.priv}).Encode(nil)
	s.inject(&condInjection{after: s.requests, expect: []byte{'3'}})
	return append(out, frame...)
}

// condPoison follows a Query or Parse text (raw) that may drop
// conditional statements (DEALLOCATE, DISCARD ALL) and returns their
// client names, or nil; single: the text is one statement (an error
// then says it dropped nothing). A text naming the client encoding
// makes every check fail (the values' bytes are checked as UTF-8).
func (s *session) condPoison(raw []byte) (names []string, single bool) {
	if containsFold(raw, "client_encoding") || hasWord(raw, "names") {
		s.encUnknown = true // SET client_encoding, SET NAMES, set_config
	}
	if len(s.conds) == 0 || !(containsFold(raw, "deallocate") || containsFold(raw, "discard")) {
		return nil, false
	}
	all := func() []string {
		var ns []string
		for n := range s.conds {
			ns = append(ns, n)
		}
		return ns
	}
	tree, err := rewrite.Parse(string(raw))
	if err != nil {
		return all(), false
	}
	single = len(tree.Stmts) == 1
	for _, st := range tree.Stmts {
		switch n := st.Stmt.GetNode().(type) {
		case *pg_query.Node_DeallocateStmt:
			if n.DeallocateStmt.Isall || n.DeallocateStmt.Name == "" {
				return all(), single
			}
			if s.conds[n.DeallocateStmt.Name] != nil {
				names = append(names, n.DeallocateStmt.Name)
			}
		case *pg_query.Node_DiscardStmt:
			if n.DiscardStmt.Target == pg_query.DiscardMode_DISCARD_ALL {
				return all(), single
			}
		}
	}
	return names, single
}

// deallocWatch is a simple Query that may drop conditional statements:
// the client loop waits for its answers (after the ReadyForQuery number
// after) before it binds them again.
type deallocWatch struct {
	after  int
	failed bool // an ErrorResponse came: what it dropped is unknown
	done   chan struct{}
}

// condWatch is what the upstream loop does for frame, after
// ReadyForQuery number rfqSeen, when a deallocWatch waits.
func (s *session) condWatch(frame []byte, rfqSeen int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.dealloc
	if w == nil || w.after != rfqSeen {
		return
	}
	switch frame[0] {
	case 'E':
		w.failed = true
	case 'Z':
		s.dealloc = nil
		close(w.done)
	}
}

// watchDealloc starts watching the answers to the Query about to be
// sent when it may drop conditional statements (names), or returns nil.
func (s *session) watchDealloc(names []string) *deallocWatch {
	if len(names) == 0 {
		return nil
	}
	w := &deallocWatch{after: s.requests, done: make(chan struct{})}
	s.mu.Lock()
	s.dealloc = w
	s.deallocAny.Store(true)
	s.mu.Unlock()
	return w
}

// condAwait sends the Query that may drop the conditional statements
// names and waits for its answers (w), then applies them: a Query of one
// statement that failed dropped nothing.
func (s *session) condAwait(ctx context.Context, w *deallocWatch, names []string, single bool) error {
	if err := s.flushUp(); err != nil {
		return err
	}
	select {
	case <-w.done:
	case <-s.closed:
		return errStop
	case <-ctx.Done():
		return errStop
	}
	s.deallocAny.Store(false)
	if !(w.failed && single) {
		s.condDropped(names, !w.failed)
	}
	return nil
}

// condDropped applies the outcome of a text that may have dropped the
// conditional statements names: without an error they are gone (their
// private statements closed later), else (a Parse, run later, or a Query
// of several statements that failed) unknown: each Bind then goes to
// the client's statement as sent, which is what the client meets
// directly.
func (s *session) condDropped(names []string, gone bool) {
	for _, n := range names {
		c := s.conds[n]
		if c == nil {
			continue
		}
		if gone {
			delete(s.conds, n)
			s.condDrops = append(s.condDrops, c.priv)
		} else {
			c.poisoned = true
		}
	}
}

// containsFold reports whether b contains ASCII word w (lower case),
// ignoring case.
func containsFold(b []byte, w string) bool {
	for i := 0; i+len(w) <= len(b); i++ {
		if eqFold(b[i:i+len(w)], w) {
			return true
		}
	}
	return false
}

// hasWord reports whether b contains ASCII word w (lower case) between
// characters that cannot continue an identifier, ignoring case.
func hasWord(b []byte, w string) bool {
	for i := 0; i+len(w) <= len(b); i++ {
		if eqFold(b[i:i+len(w)], w) && (i == 0 || !isIdentChar(b[i-1])) && (i+len(w) == len(b) || !isIdentChar(b[i+len(w)])) {
			return true
		}
	}
	return false
}

// condBind returns the Bind frame to send: frame, or frame bound to the
// private original when its statement is conditional and a checked
// value does not pass.
func (s *session) condBind(frame []byte) []byte {
	if len(s.conds) == 0 {
		return frame
	}
	body := frame[5:]
	i := bytes.IndexByte(body, 0)
	if i < 0 {
		return frame
	}
	name := stmtName(body[i+1:])
	c := s.conds[string(name)]
	if c == nil {
		return frame
	}
	if (c.pd != nil && c.pd.parseFailed.Load()) || c.poisoned {
		// The Parse failed (the private statement does not exist), or
		// a DEALLOCATE may have dropped it.
		return frame
	}
	safe, count := bindSafe(body[i+1+len(name)+1:], c.checks)
	if count != c.params {
		// Malformed, or a count the server refuses before running
		// anything, in words that name the client's statement.
		return frame
	}
	if safe && !s.encUnknown && s.clientUTF8.Load() {
		s.p.stats.bindsRewritten.Add(1)
		return renameBind(frame, i, len(name), c.priv)
	}
	s.p.stats.bindsOriginal.Add(1)
	return frame
}

// renameBind is Bind frame (its portal name ending at body offset i, its
// statement name nameLen bytes; the frame may be the head of a Bind
// relayed as it arrives) with statement name priv.
func renameBind(frame []byte, i, nameLen int, priv string) []byte {
	body := frame[5:]
	out := make([]byte, 0, len(frame)+len(priv))
	out = append(out, 'B', 0, 0, 0, 0)
	out = append(out, body[:i+1]...)
	out = append(out, priv...)
	out = append(out, body[i+1+nameLen:]...)
	binary.BigEndian.PutUint32(out[1:5], binary.BigEndian.Uint32(frame[1:5])+uint32(len(priv)-nameLen))
	return out
}

// condBindHead counts a Bind relayed as it arrives (head: its start, its
// values unseen) of a conditional statement: it runs the client's
// statement as sent, the original.
func (s *session) condBindHead(head []byte) {
	if len(s.conds) == 0 {
		return
	}
	body := head[5:]
	i := bytes.IndexByte(body, 0)
	if s.conds[string(stmtName(body[i+1:]))] != nil {
		s.p.stats.bindsOriginal.Add(1)
	}
}

// bindSafe reports whether the parameters checks ($n) of a Bind (rest:
// its body after the statement name) are each NULL or pass
// rewrite.LikePatternSafe (a text type's value is its bytes in both
// formats), and the number of values it gives (-1: malformed).
func bindSafe(rest []byte, checks []int) (safe bool, count int) {
	rd := func(n int) ([]byte, bool) {
		if n < 0 || len(rest) < n {
			return nil, false
		}
		b := rest[:n]
		rest = rest[n:]
		return b, true
	}
	b, ok := rd(2)
	if ok {
		_, ok = rd(2 * int(binary.BigEndian.Uint16(b))) // format codes
	}
	if ok {
		b, ok = rd(2)
	}
	if !ok {
		return false, -1
	}
	n := int(binary.BigEndian.Uint16(b))
	vals := make([][]byte, n)
	nulls := make([]bool, n)
	for k := range n {
		if b, ok = rd(4); !ok {
			return false, -1
		}
		l := int32(binary.BigEndian.Uint32(b))
		if l < 0 {
			nulls[k] = true
			continue
		}
		if vals[k], ok = rd(int(l)); !ok {
			return false, -1
		}
	}
	safe = true
	for _, c := range checks {
		if c < 1 || c > n || (!nulls[c-1] && !rewrite.LikePatternSafe(vals[c-1])) {
			safe = false
		}
	}
	return safe, n
}

// inject records messages put before a request's first.
func (s *session) inject(inj *condInjection) {
	s.mu.Lock()
	s.injections = append(s.injections, inj)
	s.injAny.Store(true)
	s.mu.Unlock()
}

// condSwallow reports whether frame, an upstream message after
// ReadyForQuery number rfqSeen, answers a message the proxy injected
// (condInjection), and is dropped.
func (s *session) condSwallow(frame []byte, rfqSeen int) bool {
	typ := frame[0]
	if typ == 'N' || typ == 'S' || typ == 'A' {
		return false
	}
	s.mu.Lock()
	defer func() {
		s.injAny.Store(len(s.injections) > 0)
		s.mu.Unlock()
	}()
	for len(s.injections) > 0 && s.injections[0].after < rfqSeen {
		s.injections = s.injections[1:] // its request ended (an error skipped the rest)
	}
	if len(s.injections) == 0 || s.injections[0].after != rfqSeen {
		return false
	}
	inj := s.injections[0]
	if typ != inj.expect[0] {
		// An error (the original's own, passed on) or the request's
		// end: the server skips the rest until Sync.
		s.injections = s.injections[1:]
		return false
	}
	inj.expect = inj.expect[1:]
	if len(inj.expect) == 0 {
		s.injections = s.injections[1:]
	}
	return true
}

// condParamStatus follows the client encoding from a ParameterStatus
// frame: the values' bytes are checked as the server's only when the
// client's encoding is UTF-8.
func (s *session) condParamStatus(frame []byte) {
	var ps pgproto3.ParameterStatus
	if ps.Decode(frame[5:]) == nil && ps.Name == "client_encoding" {
		s.clientUTF8.Store(ps.Value == "UTF8")
	}
}

// condFlags are the session fields condstmt.go uses.
type condFlags struct {
	conds      map[string]*condStmt // by the client's statement name (clientLoop only)
	condSeq    int                  // private names used (clientLoop only)
	condDrops  []string             // private statements to close (clientLoop only)
	encUnknown bool                 // a text may have changed the client encoding (clientLoop only)
	clientUTF8 atomic.Bool          // the server's last client_encoding is UTF8
	injections []*condInjection     // guarded by mu
	injAny     atomic.Bool          // injections is not empty
	dealloc    *deallocWatch        // guarded by mu
	deallocAny atomic.Bool          // dealloc is set
}

// condReparse forgets the conditional statement a Parse (frame) replaces:
// the unnamed one, or one a DEALLOCATE or DISCARD may have dropped (its
// Binds went to the client's statement already; a Parse of a named
// statement that exists fails and changes nothing).
func (s *session) condReparse(frame []byte) {
	name := string(stmtName(frame[5:]))
	if c := s.conds[name]; c != nil && (name == "" || c.poisoned) {
		delete(s.conds, name)
		s.condDrops = append(s.condDrops, c.priv)
	}
}
