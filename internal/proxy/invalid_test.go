package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
)

// answerTimeout bounds the wait for a FATAL and the close: PostgreSQL
// answers at once; the proxy left such sessions open, silent.
const answerTimeout = 20 * time.Second

// answer is what a peer sent after the test's bytes: its ErrorResponses,
// the types of its other messages, and whether it closed (EOF or reset)
// within answerTimeout.
type answer struct {
	errs   []*pgproto3.ErrorResponse
	others []byte
	closed bool
}

// readAnswer reads c until it closes or answerTimeout passes.
func readAnswer(t *testing.T, c net.Conn) answer {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(answerTimeout))
	b, err := io.ReadAll(c)
	var a answer
	switch {
	case err == nil || errors.Is(err, syscall.ECONNRESET):
		a.closed = true
	case !errors.Is(err, os.ErrDeadlineExceeded):
		t.Fatal(err)
	}
	for len(b) >= 5 {
		n := int(binary.BigEndian.Uint32(b[1:5])) + 1
		if n < 5 || n > len(b) {
			t.Fatalf("malformed answer %q", b)
		}
		if b[0] == 'E' {
			var e pgproto3.ErrorResponse
			if err := e.Decode(b[5:n]); err != nil {
				t.Fatal(err)
			}
			a.errs = append(a.errs, &e)
		} else {
			a.others = append(a.others, b[0])
		}
		b = b[n:]
	}
	if len(b) > 0 {
		t.Fatalf("%d bytes after the last message", len(b))
	}
	return a
}

// backendGone waits until backend pid has left pg_stat_activity.
func backendGone(t *testing.T, direct *pgxpool.Pool, pid uint32) bool {
	t.Helper()
	deadline := time.Now().Add(answerTimeout)
	for {
		var n int
		if err := direct.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", int64(pid)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// msg is a message of type typ with length field n and body.
func msg(typ byte, n uint32, body ...byte) []byte {
	b := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], n)
	return append(b, body...)
}

// randomBytes are 64 bytes of a fixed seed: an invalid message type
// first when invalidType holds, else a valid type with a length invalid
// for it (PostgreSQL waits for the body of a valid length, and so does
// the proxy).
func randomBytes(seed uint64, invalidType bool) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	for {
		b := make([]byte, 64)
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		max := frontendLimit(b[0], maxMessage)
		if invalidType == (max == 0) {
			if _, err := frameSize(b, max); invalidType || err != nil {
				return b
			}
		}
	}
}

// A logged-in client sending an invalid message type or length gets
// PostgreSQL's FATAL 08P01 at once and is disconnected, and its upstream
// backend ends; the proxy left the connection open with no answer (an
// invalid type byte alone: for good; with random bytes, until the
// announced length arrived). For an invalid type the proxy says what
// PostgreSQL says itself (same SQLSTATE and message); for an invalid
// length PostgreSQL only logs "invalid message length" and closes, the
// proxy tells the client so.
func TestInvalidMessageAfterLogin(t *testing.T) {
	dsn, direct := setup(t)
	p, addr := startProxy(t, false)
	cases := []struct {
		name        string
		bytes       []byte
		invalidType bool // else an invalid length
	}{
		{"type z alone", []byte{'z'}, true},
		{"type z with a length", msg('z', 4), true},
		{"type NUL", msg(0, 4), true},
		{"password message", msg('p', 10, []byte("xyzzy\x00")...), true},
		{"random bytes", randomBytes(1, true), true},
		{"random bytes of a valid type", randomBytes(2, false), false},
		{"length below 4", msg('S', 2), false},
		{"negative length", msg('Q', 0xfffffff0), false},
		{"Sync over PostgreSQL's small-message limit", msg('S', smallMessage+1), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pid, c := hijacked(t, dsn)
			defer c.Close()
			if _, err := c.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			want := readAnswer(t, c)
			if !want.closed || len(want.others) > 0 || tc.invalidType != (len(want.errs) == 1) {
				t.Fatalf("PostgreSQL itself: errors %d, other messages %q, closed %v; the test expects one FATAL (invalid type) or none (invalid length), then the close", len(want.errs), want.others, want.closed)
			}
			pid, c = hijacked(t, viaProxy(t, dsn, addr))
			defer c.Close()
			if _, err := c.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			got := readAnswer(t, c)
			if len(got.errs) != 1 || len(got.others) > 0 || !got.closed {
				t.Fatalf("through the proxy: errors %d, other messages %q, closed %v within %v; want one FATAL, then the close", len(got.errs), got.others, got.closed, answerTimeout)
			}
			e := got.errs[0]
			if e.Severity != "FATAL" || e.Code != codeProtocol {
				t.Errorf("through the proxy: %s %s %q, want FATAL %s", e.Severity, e.Code, e.Message, codeProtocol)
			}
			if tc.invalidType {
				if w := want.errs[0]; e.Code != w.Code || e.Message != w.Message || e.Severity != w.Severity {
					t.Errorf("through the proxy %s %s %q, from PostgreSQL %s %s %q", e.Severity, e.Code, e.Message, w.Severity, w.Code, w.Message)
				}
			} else if e.Message != "invalid message length" {
				t.Errorf("through the proxy %q, want PostgreSQL's words %q", e.Message, "invalid message length")
			}
			t.Logf("through the proxy: %s %s %q (%s)", e.Severity, e.Code, e.Message, e.Detail)
			if !backendGone(t, direct, pid) {
				t.Errorf("backend %d still in pg_stat_activity %v after the FATAL", pid, answerTimeout)
			}
		})
	}
	if s := p.Stats(); s.InvalidMessages != uint64(len(cases)) {
		t.Errorf("invalid messages counted %d, want %d", s.InvalidMessages, len(cases))
	}
}

// query is a simple-protocol Query message of sql.
func query(sql string) []byte {
	return msg('Q', uint32(4+len(sql)+1), append([]byte(sql), 0)...)
}

// extended is Parse, Bind, Execute of sql (unnamed), without Sync: the
// server runs them and keeps their answers in its output buffer.
func extended(t *testing.T, sql string) []byte {
	t.Helper()
	var b []byte
	var err error
	for _, m := range []pgproto3.FrontendMessage{&pgproto3.Parse{Query: sql}, &pgproto3.Bind{}, &pgproto3.Execute{}} {
		if b, err = m.Encode(b); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// Valid messages pipelined before an invalid type are answered first, as
// PostgreSQL answers them (it runs them one by one, then finds the
// invalid type, and its FATAL flushes the results it held): the client
// gets the same messages and errors through the proxy as directly. The
// proxy ended the session with a Terminate and its own FATAL: the
// results of an extended batch without Sync were lost, and during COPY
// IN the client got PostgreSQL's ERROR and FATAL for the Terminate and
// then the proxy's FATAL. An invalid length after a query: its results,
// then the proxy's FATAL (PostgreSQL closes without a word, and without
// the results of an extended batch it had not flushed: neither does the
// proxy send them).
func TestInvalidMessageAfterPipelined(t *testing.T) {
	dsn, _ := setup(t)
	_, addr := startProxy(t, false)
	cases := []struct {
		name    string
		bytes   []byte
		ownLast bool // the proxy's FATAL "invalid message length" comes last, not PostgreSQL's
		unsent  bool // PostgreSQL closes without sending the results it held (an invalid length)
	}{
		{"two queries then type z", append(append(query("SELECT 1"), query("SELECT 2")...), 'z'), false, false},
		{"extended batch without Sync then type z", append(extended(t, "SELECT 1"), msg('z', 4)...), false, false},
		{"COPY IN then type z", append(append(query("CREATE TEMP TABLE ci(a int); COPY ci FROM STDIN"), msg('d', 6, '1', '\n')...), msg('z', 4)...), false, false},
		{"query then invalid length", append(query("SELECT 1"), msg('S', 2)...), true, false},
		{"extended batch without Sync then invalid length", append(extended(t, "SELECT 1"), msg('S', 2)...), true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			answers := map[string]answer{}
			for _, via := range []string{"direct", "proxy"} {
				d := dsn
				if via == "proxy" {
					d = viaProxy(t, dsn, addr)
				}
				_, c := hijacked(t, d)
				defer c.Close()
				if _, err := c.Write(tc.bytes); err != nil {
					t.Fatal(err)
				}
				answers[via] = readAnswer(t, c)
			}
			want, got := answers["direct"], answers["proxy"]
			if tc.ownLast && len(got.errs) > 0 {
				if e := got.errs[len(got.errs)-1]; e.Code == codeProtocol && e.Message == "invalid message length" {
					got.errs = got.errs[:len(got.errs)-1]
				}
			}
			if string(got.others) != string(want.others) || !got.closed || errorsText(got.errs) != errorsText(want.errs) {
				t.Errorf("through the proxy: messages %q, errors %s, closed %v; PostgreSQL itself: messages %q, errors %s",
					got.others, errorsText(got.errs), got.closed, want.others, errorsText(want.errs))
			}
			if len(want.others) < 2 && !tc.unsent {
				t.Errorf("PostgreSQL answered %q only: the test's messages before the invalid one were not run", want.others)
			}
		})
	}
}

// errorsText is "SEVERITY CODE message; ..." of es.
func errorsText(es []*pgproto3.ErrorResponse) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "%s %s %q; ", e.Severity, e.Code, e.Message)
	}
	return b.String()
}
