package results

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func set(section, field, value string) Part {
	return Part{Section: section, Set: map[string]json.RawMessage{field: json.RawMessage(value)}}
}

func appendTo(section, field string, elems ...string) Part {
	p := Part{Section: section, Append: map[string][]json.RawMessage{}}
	for _, e := range elems {
		p.Append[field] = append(p.Append[field], json.RawMessage(e))
	}
	return p
}

// TestStreamParts: the parts pended between interval lines ride on the
// next interval line only (not the header, not the summary); a killed
// run's stream reads as the document rebuilt with the section they make;
// every line still decodes for a reader that knows no parts (each is a
// header, an interval with its interval, or the summary).
func TestStreamParts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	s, err := CreateStream(path, DefaultPerm)
	if err != nil {
		t.Fatal(err)
	}
	s.Pend(set("obs", "format", `"x/1"`)) // before the header: waits for the first interval
	if err := s.Write(StreamLine{Type: "header", Header: &Document{Format: Format, Schema: SchemaVersion, Workload: "w", Status: StatusRunning, StartedAt: time.Unix(1e9, 0)}}); err != nil {
		t.Fatal(err)
	}
	s.Pend(appendTo("obs", "series", `{"t":0}`))
	s.Pend(set("other", "n", `1`))
	s.Pend(appendTo("obs", "series", `{"t":1}`))
	for i := 1; i <= 3; i++ {
		if i == 3 {
			s.Pend(appendTo("obs", "series", `{"t":2}`, `{"t":3}`))
			s.Pend(set("obs", "storms", `[{"t":2}]`))
		}
		iv := Interval{T: float64(i), Count: int64(i)}
		if err := s.Write(StreamLine{Type: "interval", Interval: &iv}); err != nil {
			t.Fatal(err)
		}
	}
	s.Pend(appendTo("obs", "series", `{"t":4}`)) // after the last interval: only the summary would have it
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	c, err := ReadStreamContents(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"obs":   `{"format":"x/1","series":[{"t":0},{"t":1},{"t":2},{"t":3}],"storms":[{"t":2}]}`,
		"other": `{"n":1}`,
	}
	if len(c.Extra) != len(want) || len(c.Series) != 3 || c.Summary != nil {
		t.Fatalf("extra %s, %d intervals, summary %v", c.Extra, len(c.Series), c.Summary)
	}
	for k, v := range want {
		if string(c.Extra[k]) != v {
			t.Errorf("extra.%s = %s, want %s", k, c.Extra[k], v)
		}
	}
	d, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Extra["obs"]) != want["obs"] || !strings.HasPrefix(string(d.Status), "killed: ") {
		t.Fatalf("read: status %q, extra %s", d.Status, d.Extra)
	}

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for n := 1; sc.Scan(); n++ {
		var l StreamLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if want := n == 2 || n == 4; (len(l.Extra) > 0) != want || l.Type == "interval" && l.Interval == nil {
			t.Errorf("line %d: %s", n, sc.Bytes())
		}
	}
}

// TestStreamPartsDropped: a stream of no file and one stopped by a failed
// write keep no parts (a soak's would otherwise grow for hours).
func TestStreamPartsDropped(t *testing.T) {
	d := DiscardStream()
	d.Pend(set("obs", "format", `"x/1"`))
	if len(d.pending) != 0 {
		t.Errorf("a discarding stream holds %d parts", len(d.pending))
	}
	path := filepath.Join(t.TempDir(), "run.jsonl")
	s, err := CreateStream(path, DefaultPerm)
	if err != nil {
		t.Fatal(err)
	}
	s.f.Close() // every write fails from here on
	iv := Interval{T: 1}
	if err := s.Write(StreamLine{Type: "interval", Interval: &iv}); err == nil {
		t.Fatal("a write to a closed file succeeded")
	}
	s.Pend(set("obs", "format", `"x/1"`))
	if len(s.pending) != 0 {
		t.Errorf("a stopped stream holds %d parts", len(s.pending))
	}
}

// TestStreamPartsBad: parts that do not apply are an error naming the
// line.
func TestStreamPartsBad(t *testing.T) {
	head := `{"type":"header","header":{"format":"erplab-run/1","schema":5,"workload":"w","status":"running","started_at":"2026-12-04T13:00:00Z"}}` + "\n"
	for name, c := range map[string]struct{ lines, want string }{
		"no section": {`{"type":"interval","interval":{"t":1},"extra":[{"set":{"a":1}}]}`, "line 2: extra: a part without a section"},
		"set after append": {`{"type":"interval","interval":{"t":1},"extra":[{"section":"s","append":{"a":[1]}}]}` + "\n" +
			`{"type":"interval","interval":{"t":2},"extra":[{"section":"s","set":{"a":[]}}]}`, "line 3: extra: s.a is set after elements were appended to it"},
		"append to a set field": {`{"type":"interval","interval":{"t":1},"extra":[{"section":"s","set":{"a":[]},"append":{"a":[1]}}]}`, "line 2: extra: elements appended to s.a, which is set"},
		"append not an array":   {`{"type":"interval","interval":{"t":1},"extra":[{"section":"s","append":{"a":1}}]}` + "\n" + `{"type":"interval","interval":{"t":2}}`, "line 2: json: cannot unmarshal"},
	} {
		path := filepath.Join(t.TempDir(), "bad.jsonl")
		if err := os.WriteFile(path, []byte(head+c.lines+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Read(path)
		if err == nil || !strings.Contains(err.Error(), path+": "+c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want %q", name, err, c.want)
		}
	}
}
