package proxy

import (
	"bytes"
	"compress/gzip"
	"container/heap"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/erplab/erplab/internal/capture"
)

// capturing is a proxy with a capture in front of the test cluster.
type capturing struct {
	p    *Proxy
	addr string
	c    *Capture
	path string
	stop func() // ends Serve and closes the capture (once)
}

// startCapturing runs a proxy to upstream with a capture (memory bound
// mem, 0 the default) until stop or the test's end.
func startCapturing(t testing.TB, upstream string, mem int64) *capturing {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.erpcap.gz")
	c, err := CreateCapture(path, CaptureOptions{Origin: map[string]string{"test": t.Name()}, Memory: mem})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Upstream: upstream, Capture: c})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := p.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("capture close: %v", err)
		}
	}
	t.Cleanup(stop)
	return &capturing{p: p, addr: ln.Addr().String(), c: c, path: path, stop: stop}
}

// events stops the proxy and reads the capture back, checking the header
// and that times never decrease.
func (k *capturing) events(t *testing.T) []capture.Event {
	t.Helper()
	k.stop()
	if s := k.c.Summary(); s.Dropped != 0 || s.Err != nil {
		t.Fatalf("summary: %s", s)
	}
	r, err := capture.Open(k.path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if h := r.Header(); h.Source != capture.SourceProxy || h.Origin["test"] != t.Name() {
		t.Errorf("header %+v", h)
	}
	var out []capture.Event
	last := int64(0)
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.T < last {
			t.Fatalf("event %+v before the previous one's t=%d", e, last)
		}
		last = e.T
		out = append(out, e)
	}
	if r.Truncated() {
		t.Error("a capture closed normally reads as truncated")
	}
	if got := k.c.Summary().Events; got != int64(len(out)) {
		t.Errorf("summary says %d events, the file has %d", got, len(out))
	}
	return out
}

// sessionsOf groups events by session, keeping their order.
func sessionsOf(evs []capture.Event) map[string][]capture.Event {
	m := map[string][]capture.Event{}
	for _, e := range evs {
		m[e.Session] = append(m[e.Session], e)
	}
	return m
}

// count is the number of events of kind k whose SQL starts with prefix.
func count(evs []capture.Event, k capture.Kind, prefix string) int {
	n := 0
	for _, e := range evs {
		if e.Kind == k && strings.HasPrefix(e.SQL, prefix) {
			n++
		}
	}
	return n
}

func pgbenchBin(t *testing.T) string {
	t.Helper()
	if path := filepath.Join(srv.BinDir(t), "pgbench"); fileExists(path) {
		return path
	}
	return "pgbench"
}

// pgbench's tpcb-like transaction through the proxy in each protocol
// mode: every session is captured (pgbench's own connection and its
// clients'), each statement once per transaction with its protocol (a
// Query; an unnamed Parse and its execution; one named Parse per client
// and its executions), rows from the command tags, the transaction
// status after BEGIN and END, and every statement answered.
func TestCapturePgbench(t *testing.T) {
	dsn := srv.NewDatabase(t)
	if out, err := exec.Command(pgbenchBin(t), "-i", "-s", "1", "-q", dsn).CombinedOutput(); err != nil {
		t.Fatalf("pgbench -i: %v\n%s", err, out)
	}
	const clients, txs = 2, 15
	for _, mode := range []string{"simple", "extended", "prepared"} {
		t.Run(mode, func(t *testing.T) {
			k := startCapturing(t, srv.DSN(t, "postgres"), 0)
			out, err := exec.Command(pgbenchBin(t), "-M", mode, "-c", "2", "-t", "15", "-n", viaProxy(t, dsn, k.addr)).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "processed: 30/30") {
				t.Fatalf("pgbench -M %s: %v\n%s", mode, err, out)
			}
			evs := k.events(t)
			sessions := sessionsOf(evs)
			workers := 0
			for id, s := range sessions {
				if s[0].Kind != capture.KindConnect || s[len(s)-1].Kind != capture.KindDisconnect {
					t.Errorf("session %s: from %s to %s, want connect to disconnect", id, s[0].Kind, s[len(s)-1].Kind)
				}
				if s[0].BackendPID == 0 || s[0].Params["user"] != "postgres" || s[0].TxAfter != "I" {
					t.Errorf("session %s connect: %+v", id, s[0])
				}
				if count(s, capture.KindQuery, "BEGIN")+count(s, capture.KindExecute, "BEGIN") > 0 || count(s, capture.KindExecute, "") > 0 {
					workers++
				}
			}
			// pgbench's own connection (the scale check) and one per client.
			if len(sessions) != clients+1 || workers != clients {
				t.Fatalf("%d sessions, %d with transactions; want %d and %d", len(sessions), workers, clients+1, clients)
			}
			const update = "UPDATE pgbench_accounts SET abalance"
			switch mode {
			case "simple":
				if n := count(evs, capture.KindQuery, update); n != clients*txs {
					t.Errorf("%d Queries updating accounts, want %d", n, clients*txs)
				}
				if n := count(evs, capture.KindPrepare, "") + count(evs, capture.KindExecute, ""); n != 0 {
					t.Errorf("%d extended-protocol events in simple mode", n)
				}
			case "extended":
				if p, e := count(evs, capture.KindPrepare, update), count(evs, capture.KindExecute, update); p != clients*txs || e != clients*txs {
					t.Errorf("accounts update: %d prepares, %d executes (with the unnamed statement's text), want %d each", p, e, clients*txs)
				}
			case "prepared":
				if p := count(evs, capture.KindPrepare, update); p != clients {
					t.Errorf("%d prepares of the accounts update, want one per client", p)
				}
				named := 0
				for _, e := range evs {
					if e.Kind == capture.KindExecute && e.Name != "" && e.SQL == "" {
						named++
					}
				}
				if named != 7*clients*txs {
					t.Errorf("%d executions of named statements, want %d", named, 7*clients*txs)
				}
			}
			for _, e := range evs {
				if e.Kind == capture.KindDisconnect || e.Kind == capture.KindConnect {
					continue
				}
				if e.SQLState != "" || e.Note != "" || e.Duration <= 0 {
					t.Errorf("statement not answered as expected: %+v", e)
				}
				if e.Kind == capture.KindPrepare {
					continue
				}
				text := e.SQL
				if text == "" {
					text = namedText(evs, e)
				}
				switch {
				case strings.HasPrefix(text, "BEGIN"):
					if e.TxAfter != "T" {
						t.Errorf("after BEGIN tx %q: %+v", e.TxAfter, e)
					}
				case strings.HasPrefix(text, "END"):
					if e.TxAfter != "I" || e.Tag != "COMMIT" {
						t.Errorf("after END tx %q tag %q: %+v", e.TxAfter, e.Tag, e)
					}
				case strings.HasPrefix(text, update), strings.HasPrefix(text, "SELECT abalance"), strings.HasPrefix(text, "INSERT"):
					if e.Rows != 1 || e.TxAfter != "T" {
						t.Errorf("rows %d tx %q: %+v", e.Rows, e.TxAfter, e)
					}
				}
			}
		})
	}
}

// namedText is the text of the prepared statement an execute names (its
// latest prepare in the session before it).
func namedText(evs []capture.Event, x capture.Event) string {
	text := ""
	for _, e := range evs {
		if e.Session == x.Session && e.Kind == capture.KindPrepare && e.Name == x.Name && e.T <= x.T {
			text = e.SQL
		}
	}
	return text
}

// A pgx session (binary binds after describing the statement), psql's
// \copy, errors, a transaction and a rewritten statement: the capture
// holds the bound values' bytes and the server's parameter types, the
// COPY data, each error's SQLSTATE with the statements the server
// skipped, the transaction status after each statement, and the client's
// text of a statement the proxy rewrote.
func TestCaptureExtendedCopyErrors(t *testing.T) {
	dsn, direct := setup(t)
	ctx := context.Background()
	if _, err := direct.Exec(ctx, "CREATE TABLE cap (a int, b text, c bytea)"); err != nil {
		t.Fatal(err)
	}
	k := startCapturing(t, srv.DSN(t, "postgres"), 0)
	conn, err := pgx.Connect(ctx, viaProxy(t, dsn, k.addr))
	if err != nil {
		t.Fatal(err)
	}
	const insert = "INSERT INTO cap (a, b, c) VALUES ($1, $2, $3)"
	if _, err := conn.Exec(ctx, insert, int64(42), "forty-two", []byte{0, 1, 0xff}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT 1/$1::int", 0); err == nil {
		t.Fatal("division by zero succeeded")
	}
	for _, q := range []string{"BEGIN", "INSERT INTO cap (a) VALUES (1)"} {
		if _, err := conn.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, "SELECT nosuch FROM cap", pgx.QueryExecModeSimpleProtocol); err == nil {
		t.Fatal("unknown column accepted")
	}
	if _, err := conn.Exec(ctx, "ROLLBACK", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	const rewritten = "SELECT count(*) FROM t WHERE t.a = 1 OR t.a IN (SELECT u.x FROM u)"
	var n int
	if err := conn.QueryRow(ctx, rewritten, pgx.QueryExecModeSimpleProtocol).Scan(&n); err != nil || n != 31 {
		t.Fatalf("rewritten statement: %d, %v", n, err)
	}
	if k.p.Stats().Rewrites == 0 {
		t.Fatal("the statement was not rewritten")
	}
	copied, err := conn.CopyFrom(ctx, pgx.Identifier{"cap"}, []string{"a", "b"}, pgx.CopyFromRows([][]any{{7, "seven"}, {8, "eight"}}))
	if err != nil || copied != 2 {
		t.Fatalf("CopyFrom: %d, %v", copied, err)
	}
	if err := conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	psql := exec.Command(filepath.Join(srv.BinDir(t), "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", viaProxy(t, dsn, k.addr), "-c", `\copy cap (a, b) FROM STDIN`)
	psql.Stdin = strings.NewReader("1\tone\n2\t\\N\n3\tthree\n")
	if out, err := psql.CombinedOutput(); err != nil {
		t.Fatalf("psql \\copy: %v\n%s", err, out)
	}
	evs := k.events(t)
	if s := sessionsOf(evs); len(s) != 2 {
		t.Fatalf("%d sessions, want 2 (pgx, psql)", len(s))
	}

	var prep, ex *capture.Event
	for i, e := range evs {
		if e.Kind == capture.KindPrepare && e.SQL == insert {
			prep = &evs[i]
		}
		if e.Kind == capture.KindExecute && prep != nil && e.Name == prep.Name && ex == nil {
			ex = &evs[i]
		}
	}
	if prep == nil || ex == nil {
		t.Fatalf("no prepare and execute of %q", insert)
	}
	if !slices.Equal(prep.ServerParamOIDs, []uint32{23, 25, 17}) || len(prep.ParamOIDs) != 0 || prep.Name == "" {
		t.Errorf("prepare: name %q client OIDs %v server OIDs %v, want a named statement, none, [23 25 17]", prep.Name, prep.ParamOIDs, prep.ServerParamOIDs)
	}
	wantValues := [][]byte{{0, 0, 0, 42}, []byte("forty-two"), {0, 1, 0xff}}
	if !slices.EqualFunc(ex.Values, wantValues, bytes.Equal) || len(ex.Formats) == 0 || ex.Formats[0] != 1 {
		t.Errorf("execute: values %q formats %v, want %q in binary", ex.Values, ex.Formats, wantValues)
	}
	if ex.Tag != "INSERT 0 1" || ex.Rows != 1 || ex.TxAfter != "I" || ex.Duration <= 0 {
		t.Errorf("execute outcome: %+v", *ex)
	}

	want := []struct {
		kind   capture.Kind
		prefix string
		state  string
		tx     string
		note   string
	}{
		{capture.KindExecute, "SELECT 1/$1::int", "22012", "I", ""},
		{capture.KindQuery, "BEGIN", "", "T", ""},
		{capture.KindQuery, "INSERT INTO cap (a) VALUES (1)", "", "T", ""},
		{capture.KindQuery, "SELECT nosuch", "42703", "E", ""},
		{capture.KindQuery, "ROLLBACK", "", "I", ""},
		{capture.KindQuery, rewritten, "", "I", capture.NoteRewritten},
	}
	for _, w := range want {
		found := false
		for _, e := range evs {
			text := e.SQL
			if e.Kind == capture.KindExecute && text == "" {
				text = namedText(evs, e)
			}
			if e.Kind == w.kind && strings.HasPrefix(text, w.prefix) {
				found = true
				if e.SQLState != w.state || e.TxAfter != w.tx || e.Note != w.note {
					t.Errorf("%s %q: err %q tx %q note %q, want %q %q %q", w.kind, w.prefix, e.SQLState, e.TxAfter, e.Note, w.state, w.tx, w.note)
				}
			}
		}
		if !found {
			t.Errorf("no %s event %q", w.kind, w.prefix)
		}
	}
	var copies []capture.Event
	for _, e := range evs {
		if e.Kind == capture.KindCopy {
			copies = append(copies, e)
		}
	}
	if len(copies) != 2 {
		t.Fatalf("%d copy events, want 2 (pgx CopyFrom, psql \\copy)", len(copies))
	}
	if !bytes.HasPrefix(copies[0].Data, []byte("PGCOPY\n\xff\r\n\x00")) || copies[0].Rows != 2 || copies[0].Tag != "COPY 2" {
		t.Errorf("pgx CopyFrom: rows %d tag %q data %q", copies[0].Rows, copies[0].Tag, copies[0].Data)
	}
	if string(copies[1].Data) != "1\tone\n2\t\\N\n3\tthree\n" || copies[1].Rows != 3 || !strings.HasPrefix(copies[1].SQL, "COPY  cap") && !strings.HasPrefix(copies[1].SQL, "COPY cap") {
		t.Errorf("psql \\copy: sql %q rows %d data %q", copies[1].SQL, copies[1].Rows, copies[1].Data)
	}
}

// An extended batch whose Bind fails: the server skips the Execute, and
// the execution's event gets the Bind's SQLSTATE; a Parse that fails
// gives its event the error and the batch's other events too.
func TestCaptureSkippedAfterError(t *testing.T) {
	dsn, _ := setup(t)
	ctx := context.Background()
	k := startCapturing(t, srv.DSN(t, "postgres"), 0)
	c, err := pgconn.Connect(ctx, viaProxy(t, dsn, k.addr))
	if err != nil {
		t.Fatal(err)
	}
	// A binary int4 of 3 bytes: Bind fails with 08P01 (invalid binary data).
	rr := c.ExecParams(ctx, "SELECT $1::int", [][]byte{{0, 0, 1}}, []uint32{23}, []int16{1}, nil).Read()
	if rr.Err == nil {
		t.Fatal("a 3-byte int4 was accepted")
	}
	rr = c.ExecParams(ctx, "SELEC 1", nil, nil, nil, nil).Read()
	if rr.Err == nil {
		t.Fatal("a syntax error was accepted")
	}
	code := func(err error) string {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return pe.Code
		}
		return ""
	}
	bindErr := code(c.ExecParams(ctx, "SELECT $1::int", [][]byte{{0, 0, 1}}, []uint32{23}, []int16{1}, nil).Read().Err)
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	evs := k.events(t)
	var got []string
	for _, e := range evs {
		if e.Kind == capture.KindPrepare || e.Kind == capture.KindExecute {
			got = append(got, string(e.Kind)+" "+e.SQL+" "+e.SQLState+" "+e.TxAfter)
		}
	}
	want := []string{
		"prepare SELECT $1::int  I", "execute SELECT $1::int " + bindErr + " I",
		"prepare SELEC 1 42601 I", "execute SELEC 1 42601 I",
		"prepare SELECT $1::int  I", "execute SELECT $1::int " + bindErr + " I",
	}
	if bindErr == "" || !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A statement that completes after later ones of another session is
// written before them (events in send order), with its outcome.
func TestCaptureOrderAcrossSessions(t *testing.T) {
	dsn, direct := setup(t)
	ctx := context.Background()
	k := startCapturing(t, srv.DSN(t, "postgres"), 0)
	lock, err := direct.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	if _, err := lock.Exec(ctx, "SELECT pg_advisory_lock(4242)"); err != nil {
		t.Fatal(err)
	}
	a, b := proxiedConn(t, dsn, k.addr), proxiedConn(t, dsn, k.addr)
	const blocked = "SELECT pg_advisory_lock(4242) /* a */"
	done := make(chan error, 1)
	go func() {
		_, err := a.Exec(ctx, blocked, pgx.QueryExecModeSimpleProtocol)
		done <- err
	}()
	waitActive(t, direct, blocked)
	for range 3 {
		if _, err := b.Exec(ctx, "SELECT 2 /* b */", pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lock.Exec(ctx, "SELECT pg_advisory_unlock(4242)"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_ = a.Close(ctx)
	_ = b.Close(ctx)
	evs := k.events(t)
	ia, ib := -1, -1
	for i, e := range evs {
		switch {
		case e.SQL == blocked:
			ia = i
		case strings.HasSuffix(e.SQL, "/* b */") && ib < 0:
			ib = i
		}
	}
	if ia < 0 || ib < 0 || ia > ib {
		t.Fatalf("the blocked statement at %d, the other session's first at %d: want it first", ia, ib)
	}
	if e := evs[ia]; e.Note != "" || e.Tag != "SELECT 1" || e.Duration < evs[ib].T-e.T {
		t.Errorf("the blocked statement: %+v (the other session's ran %d µs after it was sent)", e, evs[ib].T-e.T)
	}
}

// waitActive waits until a backend runs statement q.
func waitActive(t *testing.T, pool interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, q string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE query = $1 AND state = 'active'", q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q does not run", q)
		}
	}
}

// Past the memory bound, the unfinished statement holding the others is
// written at once without its outcome (noted unanswered, rows -1), and
// once only: the later statements of another session reach the file
// while it still waits.
func TestCaptureMemoryBound(t *testing.T) {
	dsn, direct := setup(t)
	ctx := context.Background()
	k := startCapturing(t, srv.DSN(t, "postgres"), 1)
	lock, err := direct.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	if _, err := lock.Exec(ctx, "SELECT pg_advisory_lock(4243)"); err != nil {
		t.Fatal(err)
	}
	a, b := proxiedConn(t, dsn, k.addr), proxiedConn(t, dsn, k.addr)
	const blocked = "SELECT pg_advisory_lock(4243) /* a */"
	done := make(chan error, 1)
	go func() {
		_, err := a.Exec(ctx, blocked, pgx.QueryExecModeSimpleProtocol)
		done <- err
	}()
	waitActive(t, direct, blocked)
	if _, err := b.Exec(ctx, "SELECT 2 /* b */", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	// The file (flushed within a second) shows b's statement while a's
	// still waits.
	for deadline := time.Now().Add(30 * time.Second); !fileHas(t, k.path, "/* b */"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the other session's statement was not written while the first waited")
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the blocked statement returned (%v) before the lock was released", err)
	default:
	}
	if _, err := lock.Exec(ctx, "SELECT pg_advisory_unlock(4243)"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_ = a.Close(ctx)
	_ = b.Close(ctx)
	evs := k.events(t)
	var held []capture.Event
	for _, e := range evs {
		if e.SQL == blocked {
			held = append(held, e)
		}
	}
	if len(held) != 1 || held[0].Note != capture.NoteUnanswered || held[0].Rows != -1 || held[0].Tag != "" {
		t.Errorf("the held statement: %+v, want it once, unanswered", held)
	}
	if k.c.Summary().Unanswered == 0 {
		t.Error("the summary counts no event written before its answer")
	}
}

// fileHas reports whether the capture at path, as far as it is flushed,
// holds s.
func fileHas(t *testing.T, path, s string) bool {
	t.Helper()
	return strings.Contains(string(gunzipped(t, path)), s)
}

// gunzipped is the capture file's text as far as it decodes.
func gunzipped(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil
	}
	b, _ := io.ReadAll(zr) // a file still written ends early
	return b
}

// A password login (SCRAM over TCP) through the proxy leaves no trace of
// the exchange, and a startup parameter named like a password is not
// captured.
func TestCaptureNoPassword(t *testing.T) {
	dsn, _ := setup(t)
	ctx := context.Background()
	cl := srv.Cluster(t)
	k := startCapturing(t, tcpUpstream(t, dsn), 0)
	c, err := pgconn.Connect(ctx, viaProxy(t, tcpUpstream(t, dsn), k.addr))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "SELECT 1").ReadAll(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A raw startup with a "password" parameter: the server refuses it
	// (an unknown setting) after authenticating over the trust socket.
	k2 := startCapturing(t, srv.DSN(t, "postgres"), 0)
	raw, err := net.Dial("tcp", k2.addr)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "s3cr3t-startup-value"
	if _, err := raw.Write(startupPacket(3, 0, "user", "postgres", "database", dbName(t, dsn), "password", secret)); err != nil {
		t.Fatal(err)
	}
	_ = raw.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, _ = io.ReadAll(raw)
	raw.Close()

	evs := k.events(t)
	if len(sessionsOf(evs)) != 1 || evs[0].Kind != capture.KindConnect {
		t.Fatalf("events: %+v", evs)
	}
	text := string(gunzipped(t, k.path))
	for _, s := range []string{cl.Password(), "SCRAM-SHA-256", "n,,n=", ",p="} {
		if strings.Contains(text, s) {
			t.Errorf("the capture holds %q", s)
		}
	}
	evs2 := k2.events(t)
	if len(evs2) != 2 || evs2[0].SQLState == "" || evs2[0].Params["user"] != "postgres" {
		t.Fatalf("refused startup: %+v", evs2)
	}
	if _, ok := evs2[0].Params["password"]; ok || strings.Contains(string(gunzipped(t, k2.path)), secret) {
		t.Errorf("the startup parameter password was captured: %+v", evs2[0])
	}
}

// backendFrames encodes backend messages.
func backendFrames(tb testing.TB, msgs ...pgproto3.BackendMessage) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, m := range msgs {
		b, err := m.Encode(nil)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// frontendFrames encodes frontend messages one frame each.
func frontendFrames(tb testing.TB, msgs ...pgproto3.FrontendMessage) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, m := range msgs {
		out = append(out, encode(tb, m))
	}
	return out
}

// With a capture, the hooks cost a round trip at most one allocation
// per message that carries text of its own (a Query's SQL, a Bind's
// statement name, a command tag), none for the others: events come
// from a pool, bound values go to the event's own reused buffer.
func TestCaptureHookAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts of pooled events do not hold under the race detector")
	}
	c := &Capture{started: time.Now(), limit: DefaultCaptureMemory, sessions: map[*capSession]struct{}{}, wake: make(chan struct{}, 1)}
	c.pool.New = func() any { return new(capEvent) }
	sc := c.open(map[string]string{"user": "u"}).loggedIn()
	ready := backendFrames(t, &pgproto3.ReadyForQuery{TxStatus: 'I'})[0]
	sc.server(ready) // the startup's
	rows := []pgproto3.BackendMessage{&pgproto3.DataRow{Values: [][]byte{[]byte("1")}}, &pgproto3.DataRow{Values: [][]byte{[]byte("2")}},
		&pgproto3.CommandComplete{CommandTag: []byte("SELECT 2")}, &pgproto3.ReadyForQuery{TxStatus: 'I'}}
	for _, tc := range []struct {
		name       string
		client     [][]byte
		server     [][]byte
		wantAllocs float64
	}{
		{"simple", frontendFrames(t, &pgproto3.Query{String: "SELECT g FROM generate_series(1, 2) g"}),
			backendFrames(t, append([]pgproto3.BackendMessage{&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{Name: []byte("g")}}}}, rows...)...), 2},
		{"prepared", frontendFrames(t, &pgproto3.Bind{PreparedStatement: "s1", ParameterFormatCodes: []int16{1}, Parameters: [][]byte{{0, 0, 0, 7}}},
			&pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Sync{}),
			backendFrames(t, append([]pgproto3.BackendMessage{&pgproto3.BindComplete{}, &pgproto3.NoData{}}, rows...)...), 2},
		{"unnamed", frontendFrames(t, &pgproto3.Parse{Query: "SELECT $1::int"}, &pgproto3.Bind{Parameters: [][]byte{[]byte("7")}},
			&pgproto3.Execute{}, &pgproto3.Sync{}),
			backendFrames(t, append([]pgproto3.BackendMessage{&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}}, rows...)...), 2},
	} {
		trip := func() {
			for _, f := range tc.client {
				sc.client(f)
			}
			for _, f := range tc.server {
				sc.server(f)
			}
			c.drain()
			for c.waiting.Len() > 0 { // the collector's part, without its JSON
				ev := heap.Pop(&c.waiting).(*capEvent)
				c.held.Add(-ev.size)
				c.recycle(ev)
			}
		}
		for range 20 {
			trip()
		}
		if allocs := testing.AllocsPerRun(500, trip); allocs > tc.wantAllocs {
			t.Errorf("%s: %.1f allocations per round trip, want at most %.0f", tc.name, allocs, tc.wantAllocs)
		}
	}
	if sc.fh != len(sc.fifo) || sc.qh != len(sc.q) || c.held.Load() > 1000 {
		t.Errorf("left: %d events, %d answers awaited, %d bytes held", len(sc.fifo)-sc.fh, len(sc.q)-sc.qh, c.held.Load())
	}
}

// BenchmarkRelayRoundTripCapture is BenchmarkRelayRoundTrip's proxy
// target with a capture: what capturing adds to a round trip (the
// collector's JSON and gzip work included, on other goroutines).
func BenchmarkRelayRoundTripCapture(b *testing.B) {
	k := startCapturing(b, srv.DSN(b, "postgres"), 0)
	simple, prepared, prepare := relayRequests(b)
	for _, req := range []struct {
		name string
		msg  []byte
	}{{"simple", simple}, {"prepared", prepared}} {
		b.Run(req.name, func(b *testing.B) {
			rc := dialRaw(b, "tcp", k.addr)
			if _, err := rc.roundTrip(prepare); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rc.roundTrip(req.msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
