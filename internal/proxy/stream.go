package proxy

import (
	"bytes"
	"context"

	"github.com/erplab/erplab/internal/rewrite"
)

// Messages relayed as they arrive (streamMin): a session gathers a
// client message whole only when the proxy needs to see it whole, which
// a CopyData never is, a Bind only up to its statement name, and a Query
// or Parse only while its text may be parsed: one over rewrite.MaxBytes
// never is, and the word pre-filter, which decides what the proxy does
// with it, runs on the pieces (wordStream).

// maxParamTypes is the most room a Parse message gives parameter types
// after its text (an int16 count of 4-byte OIDs).
const maxParamTypes = 2 + 4*65535

// streamedStatement is a Query or Parse relayed as it arrives: what its
// bytes so far said.
type streamedStatement struct {
	simple  bool
	name    string // a Parse's statement name
	part    int    // 0: the statement name (Parse), 1: the text, 2: after it
	textLen int
	scan    *wordStream
}

// feed takes the next bytes of the message body.
func (st *streamedStatement) feed(b []byte) {
	for len(b) > 0 && st.part < 2 {
		i := bytes.IndexByte(b, 0)
		end := i
		if i < 0 {
			end = len(b)
		}
		if st.part == 1 {
			st.scan.feed(b[:end])
			st.textLen += end
		}
		if i < 0 {
			return
		}
		st.part++
		b = b[i+1:]
	}
}

// streamClient starts relaying the incomplete client message at the
// start of head as it arrives (inbound.skip; see streamMin) when the
// proxy need not see it whole: a CopyData; a Bind (its statement name,
// which onBind looks at, comes first); a Query or Parse whose text is
// over rewrite.MaxBytes, never parsed. Not under a capture, nor in a batch whose rewritten
// statement awaits its verdict (the batch's messages are kept to be sent
// again), nor during a shutdown (an idle session's next request ends it
// instead). It does what fromClient does for such a message, a Query's
// or Parse's part at its end (streamMore).
func (s *session) streamClient(ctx context.Context, head []byte, atBatchStart *bool) bool {
	rest := streamRest(head)
	if rest == 0 || s.p.draining.Load() || s.cap != nil {
		// Under --capture every message is gathered whole: the capture
		// hook takes whole messages (its events hold the bound values
		// and the COPY data), bounded by --capture-memory.
		return false
	}
	typ, body, total := head[0], head[5:], len(head)+rest
	var st *streamedStatement
	switch typ {
	case 'd':
	case 'B':
		i := bytes.IndexByte(body, 0)
		if i < 0 || bytes.IndexByte(body[i+1:], 0) < 0 {
			return false // the names are not all there yet
		}
	case 'Q':
		if rewrite.CheckSize(total-6) == nil {
			return false
		}
		st = &streamedStatement{simple: true, part: 1}
	case 'P':
		i := bytes.IndexByte(body, 0)
		if i < 0 || rewrite.CheckSize(total-5-(i+1)-1-maxParamTypes) == nil {
			return false
		}
		st = &streamedStatement{name: string(body[:i])}
	default:
		return false
	}
	s.mu.Lock()
	building := s.pending
	s.mu.Unlock()
	if building != nil && !building.sealed {
		return false
	}
	switch typ {
	case 'B':
		s.onBind(head)
		s.condBindHead(head)
	case 'P':
		s.onParse(head)
	}
	if st != nil {
		st.scan = newWordStream(func() *mutators { return s.p.mutatorsIn(ctx, s.db, s.state()) })
		st.feed(body)
		s.streamed = st
	}
	s.writeUp(head)
	s.publishSent(false) // a request under way, whatever the type
	if typ != 'Q' {
		*atBatchStart = false
	}
	s.cin.skip = rest
	return true
}

// streamMore relays the bytes at the start of data that belong to the
// message being relayed as it arrives, and returns how many. Before the
// last of a Query or Parse go upstream (the server runs nothing before),
// the session follows what its text does (see onStatement).
func (s *session) streamMore(data []byte, atBatchStart *bool) int {
	n := min(s.cin.skip, len(data))
	s.cin.skip -= n
	if st := s.streamed; st != nil {
		st.feed(data[:n])
		if s.cin.skip == 0 {
			s.streamed = nil
			s.endStreamed(st, atBatchStart)
		}
	}
	s.writeUp(data[:n])
	return n
}

// endStreamed is onStatement and fromClient for a Query or Parse relayed
// as it arrived, once all of its text was seen.
func (s *session) endStreamed(st *streamedStatement, atBatchStart *bool) {
	w, mutator := st.scan.end()
	s.p.stats.statements.Add(1)
	switch err := rewrite.CheckSize(st.textLen); {
	case w.context || (w.calls && mutator):
		// What classifyContext says of a text too large to parse.
		if _, ddl := s.followContext(tooLargeContext()); ddl && !st.simple {
			if s.ddlStmts == nil {
				s.ddlStmts = map[string]bool{}
			}
			s.ddlStmts[st.name] = true
		}
	case !w.match || err == nil: // err: a malformed message, the server rejects it
		s.p.stats.prefilterSkips.Add(1)
	default:
		s.p.notParsed(s.db, err)
	}
	if st.simple {
		s.requests++
		*atBatchStart = true
	}
	s.publishSent(*atBatchStart)
}
