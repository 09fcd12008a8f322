package proxy

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/erplab/erplab/internal/rewrite"
)

// Statements rewritten on condition of their parameters' values
// (rewrite.Result.BindChecks: a moved subquery has a LIKE whose pattern
// is a parameter, which must not end with an escape character). A Parse
// of such a statement that starts a batch is sent as three messages: a
// Close and a Parse of the original text under a private name
// (condPrefix and a number), then the client's Parse of the rewritten
// text under the client's name. Each Bind of the client's name goes to
// the rewritten statement when every checked value passes
// rewrite.LikePatternSafe, and to the private original otherwise
// (condBind). Describe sees the rewritten statement, whose parameter and
// result types validation found equal to the original's.
//
// The private Close and Parse come first, so that their answers are the
// first after the ReadyForQuery that ends the previous request: the
// upstream loop drops the CloseComplete and ParseComplete
// (condInjection). Their failure is the original's own: a Parse of the
// client's text (25P02 in a failed transaction, 42P01 ...), passed on
// as the answer to the client's Parse, which the server then skips
// (the pending verdict then acts as for any rejected rewrite). A Close
// of the client's name closes the private statement too; DEALLOCATE and
// DISCARD texts make every Bind go to the private original.

// condPrefix starts the names of the private statements.
const condPrefix = "erplab_orig_"

// condStmt is a client's statement prepared on condition.
type condStmt struct {
	priv   string // the private original's name
	checks []int  // the parameters to check, $n numbers
	pd     *pending
	// poisoned: a DEALLOCATE or DISCARD may have dropped the client's
	// statement: every Bind goes to the private original.
	poisoned bool
}

// condInjection is the messages the proxy put before a request's first:
// the answers expected to them, to drop, after ReadyForQuery number after.
type condInjection struct {
	after  int
	expect []byte
}

// condParse returns the frames to send for the client's Parse (parse, of
// text; rewritten: the rewritten Parse frame) of a statement rewritten on
// condition of parameters checks, and registers it with pending pd.
func (s *session) condParse(parse *pgproto3.Parse, text string, rewritten []byte, checks []int, pd *pending) []byte {
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
	orig := &pgproto3.Parse{Name: priv, Query: text, ParameterOIDs: parse.ParameterOIDs}
	out, err := orig.Encode(out)
	if err != nil {
		return nil
	}
	s.condDrops = s.condDrops[:0]
	expect = append(expect, '1')
	out = append(out, rewritten...)
	if s.conds == nil {
		s.conds = map[string]*condStmt{}
	}
	s.conds[parse.Name] = &condStmt{priv: priv, checks: checks, pd: pd}
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

// condPoison marks every conditional statement as perhaps dropped by a
// DEALLOCATE or DISCARD in text (a Query or Parse): their Binds then go
// to the private originals. A text naming the client encoding makes
// every check fail (the values' bytes are checked as UTF-8).
func (s *session) condPoison(raw []byte) {
	if len(s.conds) > 0 && (containsFold(raw, "deallocate") || containsFold(raw, "discard")) {
		for _, c := range s.conds {
			c.poisoned = true
		}
	}
	if containsFold(raw, "encoding") || containsFold(raw, "names") {
		s.encUnknown = true
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
	if c.pd != nil && c.pd.parseFailed.Load() {
		return frame // the Parse failed: neither statement is the client's
	}
	if !c.poisoned && !s.encUnknown && s.clientUTF8.Load() && bindSafe(body[i+1+len(name)+1:], c.checks) {
		s.p.stats.bindsRewritten.Add(1)
		return frame
	}
	s.p.stats.bindsOriginal.Add(1)
	return renameBind(frame, i, len(name), c.priv)
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

// condBindHead is the head of a Bind relayed as it arrives (its values
// unseen): bound to the private original when its statement is
// conditional.
func (s *session) condBindHead(head []byte) []byte {
	if len(s.conds) == 0 {
		return head
	}
	body := head[5:]
	i := bytes.IndexByte(body, 0)
	name := stmtName(body[i+1:])
	c := s.conds[string(name)]
	if c == nil || (c.pd != nil && c.pd.parseFailed.Load()) {
		return head
	}
	s.p.stats.bindsOriginal.Add(1)
	return renameBind(head, i, len(name), c.priv)
}

// bindSafe reports whether the parameters checks ($n) of a Bind (rest:
// its body after the statement name) are each NULL or pass
// rewrite.LikePatternSafe; false for a malformed Bind. A text type's
// value is its bytes in both formats.
func bindSafe(rest []byte, checks []int) bool {
	rd := func(n int) ([]byte, bool) {
		if len(rest) < n {
			return nil, false
		}
		b := rest[:n]
		rest = rest[n:]
		return b, true
	}
	b, ok := rd(2)
	if !ok {
		return false
	}
	if _, ok = rd(2 * int(binary.BigEndian.Uint16(b))); !ok { // format codes
		return false
	}
	if b, ok = rd(2); !ok {
		return false
	}
	n := int(binary.BigEndian.Uint16(b))
	vals := make([][]byte, n)
	nulls := make([]bool, n)
	for k := range n {
		if b, ok = rd(4); !ok {
			return false
		}
		l := int32(binary.BigEndian.Uint32(b))
		if l < 0 {
			nulls[k] = true
			continue
		}
		if vals[k], ok = rd(int(l)); !ok {
			return false
		}
	}
	for _, c := range checks {
		if c < 1 || c > n {
			return false
		}
		if !nulls[c-1] && !rewrite.LikePatternSafe(vals[c-1]) {
			return false
		}
	}
	return true
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
}

// condReparse forgets the conditional statement a Parse (frame) replaces:
// the unnamed one, or one a DEALLOCATE or DISCARD may have dropped (a
// Parse of a named statement that exists fails and changes nothing).
func (s *session) condReparse(frame []byte) {
	name := string(stmtName(frame[5:]))
	if c := s.conds[name]; c != nil && (name == "" || c.poisoned) {
		delete(s.conds, name)
		s.condDrops = append(s.condDrops, c.priv)
	}
}
