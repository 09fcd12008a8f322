package proxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/erplab/erplab/internal/rewrite"
)

// heapInUse is the process's Go heap in use after a collection, in bytes.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// sendQuery writes a Query message of prefix, fill bytes 'x', and suffix
// to c (the text is garbage once written).
func sendQuery(t *testing.T, c net.Conn, prefix string, fill int, suffix string) {
	t.Helper()
	n := len(prefix) + fill + len(suffix) + 1
	b := make([]byte, 5, 5+n)
	b[0] = 'Q'
	binary.BigEndian.PutUint32(b[1:], uint32(4+n))
	b = append(b, prefix...)
	b = append(b, strings.Repeat("x", fill)...)
	b = append(append(b, suffix...), 0)
	_ = c.SetWriteDeadline(time.Now().Add(2 * time.Minute))
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// readUntilReady reads c's messages up to ReadyForQuery without keeping
// their bodies (but an ErrorResponse's): it returns their types and the
// first ErrorResponse (nil when none).
func readUntilReady(t *testing.T, c net.Conn) ([]byte, *pgproto3.ErrorResponse) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Minute))
	r := bufio.NewReader(c)
	var types []byte
	var first *pgproto3.ErrorResponse
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			t.Fatalf("after %q: %v", types, err)
		}
		types = append(types, hdr[0])
		n := int64(binary.BigEndian.Uint32(hdr[1:])) - 4
		switch hdr[0] {
		case 'E':
			body := make([]byte, n)
			if _, err := io.ReadFull(r, body); err != nil {
				t.Fatal(err)
			}
			var e pgproto3.ErrorResponse
			if err := e.Decode(body); err != nil {
				t.Fatal(err)
			}
			if first == nil {
				first = &e
			}
		case 'Z':
			if _, err := io.CopyN(io.Discard, r, n); err != nil {
				t.Fatal(err)
			}
			if r.Buffered() > 0 {
				t.Fatalf("%d bytes after ReadyForQuery", r.Buffered())
			}
			return types, first
		default:
			if _, err := io.CopyN(io.Discard, r, n); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A large message does not stay in the proxy's memory once relayed: not
// in the session's read buffer while it idles (it was kept until the
// session's next read: here a FunctionCall, which the proxy gathers
// whole), nor as a decision-cache key or the session's key buffer (a
// text the pre-filter passes but too large to parse was decoded, keyed
// and cached: 3 copies of it kept until evicted), in either direction;
// nor once the connection closed.
func TestLargeMessageReleased(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	p, addr := startProxy(t, false)
	_, c := hijacked(t, viaProxy(t, dsn, addr))
	defer c.Close()
	// The session must be collected once it ended.
	var s *session
	p.mu.Lock()
	for k := range p.sessions {
		s = k
	}
	p.mu.Unlock()
	gone := weak.Make(s)
	s = nil
	var length uint32
	if err := direct.QueryRow(ctx, "SELECT 'pg_catalog.length(text)'::regprocedure::oid").Scan(&length); err != nil {
		t.Fatal(err)
	}
	cached := p.cache.len()
	const size = 64 << 20
	const slack = 24 << 20 // well under one copy of a message
	heap0 := heapInUse()
	check := func(what string) {
		t.Helper()
		if h := heapInUse(); h > heap0+slack {
			t.Errorf("%s: Go heap in use %d MiB, %d MiB before: the proxy keeps the message", what, h>>20, heap0>>20)
		} else {
			t.Logf("%s: Go heap in use %d MiB, %d MiB before", what, h>>20, heap0>>20)
		}
	}
	// From the client: a FunctionCall, gathered whole.
	fc, err := (&pgproto3.FunctionCall{Function: length, Arguments: [][]byte{[]byte(strings.Repeat("x", size))}}).Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetWriteDeadline(time.Now().Add(2 * time.Minute))
	if _, err := c.Write(fc); err != nil {
		t.Fatal(err)
	}
	fc = nil
	if types, e := readUntilReady(t, c); e != nil || string(types) != "VZ" {
		t.Fatalf("64 MiB FunctionCall: messages %q, error %v", types, e)
	}
	check("after a 64 MiB FunctionCall, the session idle")
	// A Query and a Parse the pre-filter passes (OR, IN (SELECT),
	// too large to parse: the Query relayed as it arrives, the Parse
	// gathered (its text may be under rewrite.MaxBytes, as far as its
	// length says); neither cached.
	sendQuery(t, c, "SELECT length('", size, "') WHERE 1 = 0 OR 1 IN (SELECT 1)")
	if types, e := readUntilReady(t, c); e != nil || !strings.Contains(string(types), "D") {
		t.Fatalf("64 MiB Query: messages %q, error %v", types, e)
	}
	text := "SELECT length('" + strings.Repeat("x", rewrite.MaxBytes) + "') WHERE 1 = 0 OR 1 IN (SELECT 1)"
	b, err := (&pgproto3.Parse{Query: text}).Encode(nil)
	if err == nil {
		b, err = (&pgproto3.Sync{}).Encode(b)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	if types, e := readUntilReady(t, c); e != nil || string(types) != "1Z" {
		t.Fatalf("1 MiB Parse: messages %q, error %v", types, e)
	}
	if s := p.Stats(); s.NotParsed != 2 || s.Rewrites != 0 || p.cache.len() != cached {
		t.Errorf("stats: not parsed %d, rewrites %d, decisions cached %d (%d before); want both counted as not parsed, none cached", s.NotParsed, s.Rewrites, p.cache.len(), cached)
	}
	check("after a 64 MiB Query, the session idle")
	// From the server: a row of 64 MiB.
	sendQuery(t, c, "SELECT repeat('x', 64 << 20)", 0, "")
	if types, e := readUntilReady(t, c); e != nil || !strings.Contains(string(types), "D") {
		t.Fatalf("64 MiB row: messages %q, error %v", types, e)
	}
	check("after a 64 MiB row, the session idle")
	_ = c.Close()
	deadline := time.Now().Add(time.Minute)
	for p.active.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := p.active.Load(); n > 0 {
		t.Fatalf("%d sessions left a minute after the client closed", n)
	}
	check("after the session ended")
	for deadline := time.Now().Add(time.Minute); gone.Value() != nil; {
		if time.Now().After(deadline) {
			t.Fatalf("the session is still reachable a minute after it ended")
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// flow counts one direction of the proxy's sessions: the bytes it read
// from the source and wrote to the destination, and how many it had
// read when its writes first passed mark.
type flow struct {
	in, out  atomic.Int64
	mark     int64
	inAtMark atomic.Int64 // -1 until then
}

func newFlow(mark int64) *flow {
	f := &flow{mark: mark}
	f.inAtMark.Store(-1)
	return f
}

// countedConn feeds its reads to flow in and its writes to flow out. It
// hides the descriptor: the relay uses Read and Write (plainConn).
type countedConn struct {
	net.Conn
	in, out *flow
}

func (c countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.in.in.Add(int64(n))
	return n, err
}

func (c countedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if c.out.out.Add(int64(n)) >= c.out.mark {
		c.out.inAtMark.CompareAndSwap(-1, c.out.in.Load())
	}
	return n, err
}

type countedListener struct {
	net.Listener
	toServer, toClient *flow
}

func (l countedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countedConn{c, l.toServer, l.toClient}, nil
}

// A message the proxy need not see whole (a server's DataRow, a client's
// CopyData or Bind, a Query or Parse too large to parse) is relayed as it
// arrives: when the proxy had passed 8 MiB of a 64 MiB one on, it had
// read little more (it read the whole message before it wrote a byte of
// it, its buffer as large). What the proxy does with a statement is the
// same either way.
func TestLargeMessagesStreamed(t *testing.T) {
	dsn, direct := setup(t)
	if _, err := direct.Exec(context.Background(), "CREATE TABLE big (v text)"); err != nil {
		t.Fatal(err)
	}
	const size = 64 << 20
	const mark = 8 << 20
	bind := func(text string) []byte {
		b, err := (&pgproto3.Parse{Query: "SELECT length($1::text)"}).Encode(nil)
		if err == nil {
			b, err = (&pgproto3.Bind{Parameters: [][]byte{[]byte(text)}}).Encode(b)
		}
		if err == nil {
			b, err = (&pgproto3.Execute{}).Encode(b)
		}
		if err == nil {
			b, err = (&pgproto3.Sync{}).Encode(b)
		}
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	copyData := func(line string) []byte {
		b, err := (&pgproto3.CopyData{Data: []byte(line)}).Encode(nil)
		if err == nil {
			b, err = (&pgproto3.CopyDone{}).Encode(b)
		}
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	parse := func(text string) []byte {
		b, err := (&pgproto3.Parse{Name: "big", Query: text}).Encode(nil)
		if err == nil {
			b, err = (&pgproto3.Sync{}).Encode(b)
		}
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var p *Proxy
	for _, tc := range []struct {
		name     string
		toServer bool // else to the client
		run      func(c net.Conn)
	}{
		{"client's Query", true, func(c net.Conn) {
			// CREATE: it may change the schema and the session's
			// context (too large to parse, the proxy cannot know):
			// the proxy stops rewriting for the session, as when it
			// gathered the text.
			sendQuery(t, c, "SELECT /* create */ length('", size, "')")
			if types, e := readUntilReady(t, c); e != nil || !strings.Contains(string(types), "D") {
				t.Fatalf("messages %q, error %v", types, e)
			}
			sendQuery(t, c, "SELECT count(*) FROM t WHERE t.a = 1 OR t.a IN (SELECT u.x FROM u)", 0, "")
			if types, e := readUntilReady(t, c); e != nil || !strings.Contains(string(types), "D") {
				t.Fatalf("messages %q, error %v", types, e)
			}
			if st := p.Stats(); st.Rewrites != 0 || st.ContextUnknown != 1 || st.Invalidations == 0 {
				t.Errorf("after a 64 MiB Query with CREATE in it: rewrites %d, context unknown %d, invalidations %d; want 0, 1, some", st.Rewrites, st.ContextUnknown, st.Invalidations)
			}
		}},
		{"client's Parse", true, func(c net.Conn) {
			if _, err := c.Write(parse("SELECT length('" + strings.Repeat("x", size) + "') WHERE 1 = 0 OR 1 IN (SELECT 1)")); err != nil {
				t.Fatal(err)
			}
			if types, e := readUntilReady(t, c); e != nil || string(types) != "1Z" {
				t.Fatalf("messages %q, error %v", types, e)
			}
			if st := p.Stats(); st.NotParsed != 1 || st.Statements != 1 {
				t.Errorf("statements %d, not parsed %d; want 1, 1", st.Statements, st.NotParsed)
			}
		}},
		{"server's DataRow", false, func(c net.Conn) {
			sendQuery(t, c, "SELECT repeat('x', 64 << 20)", 0, "")
			if types, e := readUntilReady(t, c); e != nil || !strings.Contains(string(types), "D") {
				t.Fatalf("messages %q, error %v", types, e)
			}
		}},
		{"client's Bind", true, func(c net.Conn) {
			if _, err := c.Write(bind(strings.Repeat("x", size))); err != nil {
				t.Fatal(err)
			}
			if types, e := readUntilReady(t, c); e != nil || !strings.Contains(string(types), "D") {
				t.Fatalf("messages %q, error %v", types, e)
			}
		}},
		{"client's CopyData", true, func(c net.Conn) {
			sendQuery(t, c, "COPY big FROM STDIN", 0, "")
			if _, err := c.Write(copyData(strings.Repeat("x", size) + "\n")); err != nil {
				t.Fatal(err)
			}
			if types, e := readUntilReady(t, c); e != nil || !strings.Contains(string(types), "C") {
				t.Fatalf("messages %q, error %v", types, e)
			}
			var n int
			if err := direct.QueryRow(context.Background(), "SELECT length(v) FROM big").Scan(&n); err != nil || n != size {
				t.Errorf("the COPY stored %d bytes (%v), want %d", n, err, size)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			toServer, toClient := newFlow(mark), newFlow(mark)
			var err error
			p, err = New(Config{Upstream: srv.DSN(t, "postgres")})
			if err != nil {
				t.Fatal(err)
			}
			p.wrapUp = func(c net.Conn) net.Conn { return countedConn{c, toClient, toServer} }
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			serveProxy(t, p, countedListener{ln, toServer, toClient})
			_, c := hijacked(t, viaProxy(t, dsn, ln.Addr().String()))
			defer c.Close()
			tc.run(c)
			f := toClient
			if tc.toServer {
				f = toServer
			}
			at := f.inAtMark.Load()
			if at < 0 || at > size/2 {
				t.Errorf("the proxy had read %d MiB when it had passed %d MiB on", at>>20, mark>>20)
			} else {
				t.Logf("the proxy had read %.1f MiB when it had passed %d MiB on", float64(at)/(1<<20), mark>>20)
			}
		})
	}
}
