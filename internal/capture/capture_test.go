package capture

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var started = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// sample is one event of every kind, with the fields that need care in
// JSON: NULL and empty values, binary bytes, characters HTML escaping
// would change.
func sample() []Event {
	return []Event{
		{Kind: KindConnect, Session: "1", T: 0, Params: map[string]string{"user": "u", "database": "d"}, BackendPID: 42},
		{Kind: KindQuery, Session: "1", T: 10, SQL: "SELECT '<&>'\n", Duration: 5, Rows: 1, Tag: "SELECT 1", TxAfter: "I"},
		{Kind: KindPrepare, Session: "1", T: 10, Name: "s1", SQL: "SELECT $1, $2", ParamOIDs: []uint32{23, 0}},
		{Kind: KindExecute, Session: "1", T: 20, Name: "s1", Formats: []int16{0, 1},
			Values: [][]byte{nil, {0, 1, 0xff}, {}}, ResultFormats: []int16{1}, Rows: -1, SQLState: "23505", TxAfter: "E"},
		{Kind: KindCopy, Session: "1", T: 30, SQL: "COPY t FROM STDIN", Data: []byte("1\tx\n")},
		{Kind: KindDisconnect, Session: "1", T: 40, Where: "f.csv:7"},
	}
}

func readAll(t *testing.T, r *Reader) []Event {
	t.Helper()
	var out []Event
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.erpcap.gz")
	w, err := Create(path, Header{Source: SourcePGLog, Started: started, Origin: map[string]string{"files": "a.csv"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range sample() {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h := r.Header()
	if h.Format != Format || h.Schema != Schema || h.Source != SourcePGLog || !h.Started.Equal(started) || h.Origin["files"] != "a.csv" {
		t.Errorf("header %+v", h)
	}
	got := readAll(t, r)
	if r.Truncated() {
		t.Error("a closed capture reads as truncated")
	}
	if !reflect.DeepEqual(got, sample()) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, sample())
	}
	if got[3].Values[0] != nil || got[3].Values[2] == nil {
		t.Errorf("NULL and empty values not kept apart: %#v", got[3].Values)
	}
}

// TestCutAfterFlush cuts a capture at every byte offset after its first
// flush: every event flushed before the cut is read, the tail is reported
// as truncated, never as an error.
func TestCutAfterFlush(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Source: SourceProxy, Started: started})
	if err != nil {
		t.Fatal(err)
	}
	type point struct{ size, events int }
	flushed := []point{{buf.Len(), 0}} // NewWriter flushes the header
	var all []Event
	for i := range 40 {
		e := sample()[i%len(sample())]
		e.T = int64(100 * i)
		all = append(all, e)
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
		if i%7 == 6 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			flushed = append(flushed, point{buf.Len(), i + 1})
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	for cut := flushed[0].size; cut <= len(data); cut++ {
		r, err := NewReader(bytes.NewReader(data[:cut]), "cut")
		if err != nil {
			t.Fatalf("cut at %d of %d: %v", cut, len(data), err)
		}
		got := readAll(t, r)
		want := 0
		for _, p := range flushed {
			if p.size <= cut {
				want = p.events
			}
		}
		if cut == len(data) {
			want = len(all)
		}
		if len(got) < want || (len(got) > 0 && !reflect.DeepEqual(got, all[:len(got)])) {
			t.Fatalf("cut at %d of %d: read %d events, want the first %d or more", cut, len(data), len(got), want)
		}
		if r.Truncated() != (cut < len(data)) {
			t.Fatalf("cut at %d of %d: Truncated %v", cut, len(data), r.Truncated())
		}
	}
}

// TestTimedFlush: events written and not flushed by hand reach the file
// within FlushInterval, readable while the writer is still open.
func TestTimedFlush(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.erpcap.gz")
	w, err := Create(path, Header{Source: SourceProxy, Started: started})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, e := range sample()[:3] {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewReader(bytes.NewReader(data), path)
		if err != nil {
			t.Fatal(err)
		}
		got := readAll(t, r)
		if len(got) == 3 && r.Truncated() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the open capture holds %d events (truncated %v), want 3", len(got), r.Truncated())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestWriterRefusesOutOfOrder(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Source: SourceProxy, Started: started})
	if err != nil {
		t.Fatal(err)
	}
	ev := func(tt int64) Event { return Event{Kind: KindQuery, Session: "1", T: tt, SQL: "SELECT 1"} }
	if err := w.Write(ev(50)); err != nil {
		t.Fatal(err)
	}
	err = w.Write(ev(49))
	if !errors.Is(err, ErrOrder) || !strings.Contains(err.Error(), "t=49") {
		t.Fatalf("out-of-order write: %v, want ErrOrder naming t=49", err)
	}
	if err := w.Write(ev(50)); err != nil {
		t.Fatalf("after a refused event the writer stopped: %v", err)
	}
	if err := w.Write(Event{Kind: "fetch", Session: "1", T: 60}); err == nil {
		t.Error("an unknown kind was written")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(&buf, "c")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, r); len(got) != 2 || w.Count() != 2 {
		t.Errorf("read %d events, Count %d, want 2 (the refused ones not written)", len(got), w.Count())
	}
}

func TestCreateRefusesExistingAndSymlink(t *testing.T) {
	dir := t.TempDir()
	h := Header{Source: SourceProxy, Started: started}
	existing := filepath.Join(dir, "old")
	if err := os.WriteFile(existing, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(existing, h); err == nil {
		t.Error("Create over an existing file succeeded")
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "target"), link); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(link, h); err == nil {
		t.Error("Create through a dangling symbolic link succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "target")); !os.IsNotExist(err) {
		t.Errorf("the link's target was created: %v", err)
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep" {
		t.Errorf("the existing file was changed: %q", b)
	}
	path := filepath.Join(dir, "new")
	w, err := Create(path, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("capture file mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
}

// gz compresses lines into a whole gzip stream.
func gz(t *testing.T, lines ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	for _, l := range lines {
		if _, err := io.WriteString(zw, l+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestWrongFormat(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		want []string
	}{
		{"other format", gz(t, `{"type":"header","format":"erplab-results","schema":1}`),
			[]string{`format "erplab-results" schema 1`, `reads format "erplab-capture" schema 1`}},
		{"newer schema", gz(t, `{"type":"header","format":"erplab-capture","schema":2}`),
			[]string{`format "erplab-capture" schema 2`, "schema 1 or older"}},
		{"not a header", gz(t, `{"k":"query","s":"1","t":0}`), []string{"line 1 is not a capture header"}},
		{"not gzip", []byte("2026-03-01 10:00:00.000 UTC,,,\n"), []string{"not a capture"}},
		{"empty", nil, []string{"empty: no header"}},
	}
	for _, c := range cases {
		_, err := NewReader(bytes.NewReader(c.data), "x.erpcap.gz")
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		msg := err.Error()
		for _, w := range append(c.want, "x.erpcap.gz") {
			if !strings.Contains(msg, w) || strings.Contains(msg, "\n") {
				t.Errorf("%s: error %q, want one line with %q", c.name, msg, w)
			}
		}
	}
}

func TestCorruptLine(t *testing.T) {
	header := `{"type":"header","format":"erplab-capture","schema":1,"source":"proxy","started":"2026-03-01T10:00:00Z"}`
	good := `{"k":"query","s":"1","t":5,"sql":"SELECT 1"}`
	cases := []struct {
		name, bad, want string
	}{
		{"not JSON", `{"k":"query","s":`, "line 3: "},
		{"unknown kind", `{"k":"fetch","s":"1","t":6}`, `line 3: unknown event kind "fetch"`},
		{"no session", `{"k":"query","t":6}`, "line 3: query event without a session"},
		{"out of order", `{"k":"query","s":"1","t":4}`, "line 3: event at t=4 µs after one at t=5 µs"},
	}
	for _, c := range cases {
		r, err := NewReader(bytes.NewReader(gz(t, header, good, c.bad, good)), "c.gz")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Next(); err != nil {
			t.Fatalf("%s: first event: %v", c.name, err)
		}
		_, err = r.Next()
		if err == nil || !strings.Contains(err.Error(), "capture: c.gz: "+c.want) {
			t.Errorf("%s: error %v, want one naming %q", c.name, err, c.want)
		}
		if _, again := r.Next(); again == nil || again.Error() != err.Error() {
			t.Errorf("%s: Next after the error: %v", c.name, again)
		}
	}
}
