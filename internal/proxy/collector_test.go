package proxy

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/erplab/erplab/internal/capture"
)

// stepCapture is a Capture writing to out whose collector the test steps
// by hand (no goroutine).
func stepCapture(t *testing.T, limit int64) (*Capture, *bytes.Buffer) {
	t.Helper()
	out := new(bytes.Buffer)
	started := time.Now()
	w, err := capture.NewWriter(out, capture.Header{Source: capture.SourceProxy, Started: started})
	if err != nil {
		t.Fatal(err)
	}
	c := &Capture{w: w, started: started, limit: limit, sessions: map[*capSession]struct{}{}, wake: make(chan struct{}, 1)}
	c.pool.New = func() any { return new(capEvent) }
	return c, out
}

// readBack closes c's writer and reads its events.
func readBack(t *testing.T, c *Capture, out *bytes.Buffer) []capture.Event {
	t.Helper()
	if err := c.w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := capture.NewReader(out, "test")
	if err != nil {
		t.Fatal(err)
	}
	var evs []capture.Event
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return evs
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
}

func frame(t *testing.T, m interface{ Encode([]byte) ([]byte, error) }) []byte {
	t.Helper()
	b, err := m.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// capQuery runs a simple Query on sc as the hooks see it; answer false
// leaves it unanswered.
func capQuery(t *testing.T, sc *capSession, sql string, answer bool) {
	t.Helper()
	sc.client(frame(t, &pgproto3.Query{String: sql}))
	if answer {
		finish(t, sc)
	}
}

func finish(t *testing.T, sc *capSession) {
	t.Helper()
	sc.server(frame(t, &pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")}))
	sc.server(frame(t, &pgproto3.ReadyForQuery{TxStatus: 'I'}))
}

// A session's unanswered statement holds the later events of every
// session; once answered, all are written in send order.
func TestCollectorOrder(t *testing.T) {
	c, out := stepCapture(t, DefaultCaptureMemory)
	rfq := frame(t, &pgproto3.ReadyForQuery{TxStatus: 'I'})
	a := c.open(map[string]string{"user": "a"}).loggedIn()
	a.server(rfq)
	b := c.open(map[string]string{"user": "b"}).loggedIn()
	b.server(rfq)
	capQuery(t, a, "slow", false)
	capQuery(t, b, "fast 1", true)
	capQuery(t, b, "fast 2", true)
	c.step()
	if n := c.w.Count(); n != 2 {
		t.Fatalf("%d events written while the first statement runs, want the 2 connects", n)
	}
	finish(t, a)
	c.step()
	if n := c.w.Count(); n != 5 {
		t.Fatalf("%d events written once it was answered, want 5", n)
	}
	a.close()
	b.close()
	c.step()
	var got []string
	for _, e := range readBack(t, c, out) {
		got = append(got, string(e.Kind)+":"+e.Session+":"+e.SQL)
	}
	want := "[connect:1: connect:2: query:1:slow query:2:fast 1 query:2:fast 2 disconnect:1: disconnect:2:]"
	if s := fmtList(got); s != want {
		t.Errorf("events %s\nwant   %s", s, want)
	}
	if c.held.Load() != 0 {
		t.Errorf("%d bytes still counted as held", c.held.Load())
	}
}

func fmtList(l []string) string {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, s := range l {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s)
	}
	b.WriteByte(']')
	return b.String()
}

// Past the memory bound, a session still logging in has its connect
// written unanswered; when the login then fails, the session still
// ends with a disconnect. A session that fails to log in within the
// bound leaves nothing.
func TestCollectorForcedLogin(t *testing.T) {
	c, out := stepCapture(t, DefaultCaptureMemory)
	quiet := c.open(map[string]string{"user": "never"})
	c.step()
	quiet.close() // never logged in
	c.step()
	c.limit = 1
	sc := c.open(map[string]string{"user": "slow login"})
	c.step()
	if n := c.w.Count(); n != 1 {
		t.Fatalf("%d events written past the bound, want the connect", n)
	}
	sc.close() // the login failed
	c.step()
	evs := readBack(t, c, out)
	if len(evs) != 2 || evs[0].Kind != capture.KindConnect || evs[0].Note != capture.NoteUnanswered || evs[0].Rows != -1 ||
		evs[0].Params["user"] != "slow login" || evs[1].Kind != capture.KindDisconnect || evs[1].Session != evs[0].Session {
		t.Errorf("events %+v", evs)
	}
	if c.early.Load() != 1 {
		t.Errorf("%d events counted as written early, want 1", c.early.Load())
	}
}
