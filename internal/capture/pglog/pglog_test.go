package pglog

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/capture"
)

// The recorded logs (testdata/README.md): three runs of one server, each
// written as csvlog, jsonlog and stderr at once.
var runs = []string{"both", "duration", "statement"}

func convert(t *testing.T, opts Options, files ...string) (*Collect, Summary) {
	t.Helper()
	var c Collect
	sum, err := Convert(context.Background(), files, opts, &c)
	if err != nil {
		t.Fatal(err)
	}
	return &c, sum
}

// gunzip is the text of a recorded log.
func gunzip(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeTemp(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// withoutWhere is events without their input locations, which differ
// between formats.
func withoutWhere(es []capture.Event) []capture.Event {
	out := make([]capture.Event, len(es))
	for i, e := range es {
		e.Where = ""
		out[i] = e
	}
	return out
}

// lineOf is the 1-based number of the first line of text containing s.
func lineOf(t *testing.T, text, s string) int {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("no line contains %q", s)
	return 0
}

// TestSameEventsInEveryFormat: the csvlog, jsonlog and stderr log of one
// run give the same events and counts.
func TestSameEventsInEveryFormat(t *testing.T) {
	for _, run := range runs {
		csv, csvSum := convert(t, Options{}, "testdata/"+run+".csv.gz")
		if len(csv.Events) < 100 || csvSum.BadLines != 0 || len(csvSum.Problems) != 0 {
			t.Fatalf("%s.csv: %d events, problems %v", run, len(csv.Events), csvSum.Problems)
		}
		for _, other := range []string{run + ".json.gz", run + ".log.gz"} {
			c, sum := convert(t, Options{}, "testdata/"+other)
			if !reflect.DeepEqual(withoutWhere(c.Events), withoutWhere(csv.Events)) {
				t.Errorf("%s: events differ from %s.csv's", other, run)
			}
			if !c.Header.Started.Equal(csv.Header.Started) {
				t.Errorf("%s: started %v, csv %v", other, c.Header.Started, csv.Header.Started)
			}
			if !reflect.DeepEqual(sum.Events, csvSum.Events) || sum.Failed != csvSum.Failed || sum.Copy != csvSum.Copy ||
				sum.Ignored != csvSum.Ignored || sum.Records != csvSum.Records || sum.BadLines != 0 {
				t.Errorf("%s: summary %+v\ncsv's %+v", other, sum, csvSum)
			}
		}
	}
}

// TestCounts: sessions and statements per kind of the run logged with
// log_statement = all and log_min_duration_statement = 0: 769 "statement:"
// lines less 2 COPY FROM STDIN plus the syntax error (never logged as a
// statement) are 768 queries; 1686 "execute" lines; the parses of 28
// pgbench -M prepared statements (7 by 4 clients), the hand session's
// ins_note and pgx's describe of the COPY table.
func TestCounts(t *testing.T) {
	c, sum := convert(t, Options{}, "testdata/both.csv.gz")
	want := map[capture.Kind]int64{capture.KindConnect: 18, capture.KindDisconnect: 18,
		capture.KindQuery: 768, capture.KindExecute: 1686, capture.KindPrepare: 30}
	if !reflect.DeepEqual(sum.Events, want) {
		t.Errorf("events %v, want %v", sum.Events, want)
	}
	if sum.Sessions != 18 || sum.Copy != 2 || sum.Failed != 5 || sum.Synthetic != 0 || sum.OpenAtEnd != 0 || sum.Late != 0 || sum.Partial != "" {
		t.Errorf("summary %+v", sum)
	}
	apps := map[string]int{}
	for _, e := range c.Events {
		if e.Kind == capture.KindConnect {
			apps[e.Params["application_name"]]++
		}
	}
	if want := map[string]int{"createdb": 1, "pgbench": 16, "hand": 1}; !reflect.DeepEqual(apps, want) {
		t.Errorf("sessions per application %v, want %v", apps, want)
	}
	if c.Header.Source != capture.SourcePGLog || c.Header.Origin["format"] != "csvlog" {
		t.Errorf("header %+v", c.Header)
	}
}

// hand is the events of the hand session (testdata/gen) of a conversion.
func hand(t *testing.T, c *Collect) []capture.Event {
	t.Helper()
	var id string
	var out []capture.Event
	for _, e := range c.Events {
		if e.Kind == capture.KindConnect && e.Params["application_name"] == "hand" {
			id = e.Session
		}
		if id != "" && e.Session == id {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		t.Fatal("no hand session")
	}
	return out
}

// TestHandSession: the hand session's statements, in every run, with
// their kinds, errors, transaction status and parameters.
func TestHandSession(t *testing.T) {
	type step struct {
		kind     capture.Kind
		sql      string // a part of it; the name for a named execute
		err, tx  string
		values   []string // "<NULL>" for NULL
		duration bool     // its duration is known
	}
	null := "<NULL>"
	want := []step{
		{kind: capture.KindConnect},
		{capture.KindQuery, "CREATE TABLE hand", "", "I", nil, true},
		{capture.KindQuery, "SELECT 'it''s a quote' AS q,\n       2 AS \"two\"\n  -- a comment\n", "", "I", nil, true},
		{capture.KindQuery, "BEGIN", "", "T", nil, true},
		{capture.KindQuery, "VALUES (1, 'one')", "", "T", nil, true},
		{capture.KindQuery, "COMMIT", "", "I", nil, true},
		{capture.KindQuery, "SELECT 1/0", "22012", "I", nil, false},
		{capture.KindQuery, "SELEC 1", "42601", "I", nil, false},
		{capture.KindQuery, "BEGIN", "", "T", nil, true},
		{capture.KindQuery, "VALUES (1, 'again')", "23505", "E", nil, false},
		{capture.KindQuery, "SELECT 1", "25P02", "E", nil, false},
		{capture.KindQuery, "ROLLBACK", "", "I", nil, true},
		{capture.KindQuery, "BEGIN; UPDATE hand SET note = 'x' WHERE id = 1; COMMIT", "", "I", nil, true},
		{capture.KindExecute, "VALUES ($1, $2)", "", "I", []string{"2", null}, true},
		{capture.KindExecute, "VALUES ($1, $2)", "", "I", []string{"3", "O'Reilly"}, true},
		{capture.KindExecute, "INSERT INTO hand(id, note)\nVALUES ($1, $2)", "", "I", []string{"4", "two\nlines"}, true},
		{kind: capture.KindPrepare, sql: "INSERT INTO hand(id, note) VALUES ($1, $2)"},
		{capture.KindExecute, "ins_note", "", "I", []string{"10", null}, true},
		{capture.KindExecute, "ins_note", "", "I", []string{"11", "x'y"}, true},
		{capture.KindExecute, "ins_note", "23505", "I", []string{"10", "dup"}, false},
		{kind: capture.KindPrepare, sql: `select "id", "note" from "hand"`}, // pgx describes the COPY table; the COPY is skipped
		{capture.KindQuery, "SELECT count(*) FROM hand", "", "I", nil, true},
		{kind: capture.KindDisconnect},
	}
	for _, run := range runs {
		c, _ := convert(t, Options{}, "testdata/"+run+".csv.gz")
		got := hand(t, c)
		w := want
		if run == "statement" { // log_statement alone logs no parse: ins_note's is made, pgx's describe is not seen
			w = append(append(append([]step{}, want[:16]...), want[16:20]...), want[21:]...)
		}
		if len(got) != len(w) {
			t.Fatalf("%s: %d events, want %d:\n%+v", run, len(got), len(w), got)
		}
		for i, s := range w {
			e := got[i]
			text := e.SQL
			if e.Kind == capture.KindExecute && e.Name != "" {
				text = e.Name
			}
			var vals []string
			for _, v := range e.Values {
				if v == nil {
					vals = append(vals, null)
				} else {
					vals = append(vals, string(v))
				}
			}
			hasDur := e.Duration > 0 || s.duration && run == "statement"
			if e.Kind != s.kind || !strings.Contains(text, s.sql) || e.SQLState != s.err || e.TxAfter != s.tx ||
				!reflect.DeepEqual(vals, s.values) || (run != "statement" && s.duration && !hasDur) {
				t.Errorf("%s: event %d: %+v\nwant %+v", run, i, e, s)
			}
		}
	}
}

// TestStartTimes: a statement logged at its start (log_statement) starts
// at its line's time; one logged with its duration only, at its line's
// time minus the duration; an execute at its bind.
func TestStartTimes(t *testing.T) {
	cases := []struct {
		run, sql, name string
		start          string
		dur            int64
	}{
		// 18:33:24.257 ... statement: CREATE TABLE hand ...; duration: 30.848 ms
		{"both", "CREATE TABLE hand (id int PRIMARY KEY, note text)", "", "18:33:24.257", 30848},
		// 18:33:34.206 ... duration: 9.924 ms  statement: CREATE TABLE hand ...
		{"duration", "CREATE TABLE hand (id int PRIMARY KEY, note text)", "", "18:33:34.196076", 9924},
		// bind ins_note at 18:33:34.222, 0.075 ms; execute 0.043 ms
		{"duration", "", "ins_note", "18:33:34.221925", 118},
	}
	for _, tc := range cases {
		c, _ := convert(t, Options{}, "testdata/"+tc.run+".log.gz")
		want, err := time.Parse("2006-01-02 15:04:05.999999", "2026-12-03 "+tc.start)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range hand(t, c) {
			if tc.sql != "" && e.SQL == tc.sql || tc.name != "" && e.Name == tc.name && e.Kind == capture.KindExecute && string(e.Values[0]) == "11" {
				found = true
				got := c.Header.Started.Add(time.Duration(e.T) * time.Microsecond)
				if !got.Equal(want) || e.Duration != tc.dur {
					t.Errorf("%s %s%s: start %v duration %d µs, want %v and %d", tc.run, tc.sql, tc.name, got, e.Duration, want, tc.dur)
				}
			}
		}
		if !found {
			t.Errorf("%s: no %s%s", tc.run, tc.sql, tc.name)
		}
	}
}

// replaceLine replaces line n (1-based) of text.
func replaceLine(text string, n int, with string) string {
	ls := strings.Split(text, "\n")
	ls[n-1] = with
	return strings.Join(ls, "\n")
}

// TestBadInput: corrupted copies of the recorded logs give one problem
// each, naming file:line, and the rest is converted.
func TestBadInput(t *testing.T) {
	stderr := gunzip(t, "both.log.gz")
	csv := gunzip(t, "both.csv.gz")
	json := gunzip(t, "both.json.gz")
	_, full := convert(t, Options{}, "testdata/both.csv.gz")
	reilly := lineOf(t, stderr, "LOG:  execute <unnamed>: INSERT INTO hand(id, note) VALUES ($1, $2)") + 6
	multi := lineOf(t, csv, `"statement: SELECT 'it''s a quote' AS q,`)
	cases := []struct {
		name, file, text string
		line             int
		why              string
		lost             int64 // statements lost
	}{
		{"a line that does not parse", "x.log", replaceLine(stderr, reilly, "garbage"), reilly,
			"not the log_line_prefix '" + Prefix + "': no time (%m) first", 1},
		{"a csvlog line in a stderr log", "x.log", replaceLine(stderr, reilly, strings.Split(csv, "\n")[0]), reilly,
			"not the log_line_prefix", 1},
		{"a stderr log cut inside a line", "x.log", stderr[:strings.LastIndex(stderr, "pgbench_branches SET bbalance")], 0,
			"the last line is cut", -1},
		{"a csvlog row whose quote does not close", "x.csv", replaceLine(csv, multi+3, ""), multi,
			fmt.Sprintf("a quoted field not closed before the row of line %d", multi+4), 1},
		{"a jsonlog line that does not parse", "x.json", replaceLine(json, 500, "{broken"), 500,
			"not a jsonlog line", -1},
		{"lc_messages not English", "x.log", replaceLine(stderr, reilly, strings.Replace(strings.Split(stderr, "\n")[reilly-1], "LOG:", "СООБЩЕНИЕ:", 1)), reilly,
			"no severity (LOG, ERROR, ...) after the prefix: lc_messages must be 'C'", 1},
	}
	for _, c := range cases {
		path := writeTemp(t, c.file, c.text)
		_, sum := convert(t, Options{}, path)
		line := c.line
		if line == 0 {
			line = strings.Count(c.text, "\n") + 1
		}
		want := fmt.Sprintf("%s:%d: %s", path, line, c.why)
		if len(sum.Problems) != 1 || !strings.HasPrefix(sum.Problems[0], want) || sum.BadLines != 1 {
			t.Errorf("%s: problems %q (%d bad lines), want one starting %q", c.name, sum.Problems, sum.BadLines, want)
			continue
		}
		statements := func(s Summary) int64 { return s.Events[capture.KindQuery] + s.Events[capture.KindExecute] }
		if lost := statements(full) - statements(sum); c.lost >= 0 && lost != c.lost || c.lost < 0 && (lost < 0 || lost > 20) {
			t.Errorf("%s: %d statements lost, want %d", c.name, lost, c.lost)
		}
	}
}

// TestUnknownPrefix: a stderr log written with another log_line_prefix
// (Debian's default, '%m [%p] %q%u@%d ') is refused with one problem
// naming the prefix expected, though its first lines (of processes
// without a session) look the same.
func TestUnknownPrefix(t *testing.T) {
	var b strings.Builder
	for _, l := range strings.Split(gunzip(t, "both.log.gz"), "\n") {
		if i := strings.Index(l, " user="); i > 0 && !strings.HasPrefix(l, "\t") {
			head := strings.SplitN(l, " ", 8) // date time zone [pid] session line state rest
			u, rest, _ := strings.Cut(l[i+len(" user="):], " db=")
			d, rest, _ := strings.Cut(rest, " app=")
			_, msg, _ := strings.Cut(rest, " ")
			l = strings.Join(head[:4], " ") + " " + u + "@" + d + " " + msg
		}
		b.WriteString(l + "\n")
	}
	path := writeTemp(t, "debian.log", b.String())
	c, sum := convert(t, Options{}, path)
	want := path + ":5: not the log_line_prefix '" + Prefix + "': no session id (%c) after [%p]"
	if len(sum.Problems) != 1 || !strings.HasPrefix(sum.Problems[0], want) || !strings.Contains(sum.Problems[0], "the file is skipped") {
		t.Fatalf("problems %q, want one starting %q", sum.Problems, want)
	}
	if len(c.Events) != 0 || sum.BadLines != sum.Lines || sum.Lines < 9000 {
		t.Errorf("%d events, %d bad lines of %d", len(c.Events), sum.BadLines, sum.Lines)
	}
}

// TestSessionsBeforeTheLog: a log that begins in the middle of the
// pgbench runs still replays their sessions, each from a connect made at
// its first statement with the user, database and application of its
// lines.
func TestSessionsBeforeTheLog(t *testing.T) {
	text := gunzip(t, "both.log.gz")
	first := lineOf(t, text, "LOG:  statement: UPDATE pgbench_accounts")
	path := writeTemp(t, "tail.log", strings.Join(strings.Split(text, "\n")[first-1:], "\n"))
	c, sum := convert(t, Options{}, path)
	if sum.Synthetic != 4 || sum.BadLines != 0 {
		t.Fatalf("synthetic connects %d (want the 4 pgbench clients), problems %q", sum.Synthetic, sum.Problems)
	}
	firsts := map[string]int{} // session -> index of its first event
	for i, e := range c.Events {
		if _, ok := firsts[e.Session]; !ok {
			firsts[e.Session] = i
		}
	}
	params := map[string]string{"user": "postgres", "database": "bench", "application_name": "pgbench"}
	synthetic := 0
	for s, i := range firsts {
		e := c.Events[i]
		if e.Kind != capture.KindConnect {
			t.Errorf("session %s begins with %s", s, e.Kind)
			continue
		}
		next := c.Events[i+1:]
		for len(next) > 0 && next[0].Session != s {
			next = next[1:]
		}
		if len(next) > 0 && next[0].Where == e.Where { // made at its first statement
			synthetic++
			if !reflect.DeepEqual(e.Params, params) || e.BackendPID == 0 || e.T != next[0].T {
				t.Errorf("synthetic connect %+v before %+v", e, next[0])
			}
		}
	}
	if synthetic != 4 {
		t.Errorf("%d connects made at a first statement, want 4", synthetic)
	}
}

// durationOnlyOver keeps, of a stderr log written with
// log_min_duration_statement = 0, the statements that took at least 1
// ms: the log log_min_duration_statement = 1 would have written.
func durationOnlyOver(text string) string {
	var b strings.Builder
	drop := false
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, "\t") || strings.Contains(l, " DETAIL:  ") || strings.Contains(l, " STATEMENT:  "):
		default:
			drop = strings.Contains(l, "LOG:  duration: 0.")
		}
		if !drop {
			b.WriteString(l + "\n")
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func TestPartial(t *testing.T) {
	c, sum := convert(t, Options{}, "testdata/duration.log.gz")
	if c.Header.Partial != "" || sum.Partial != "" {
		t.Errorf("the whole log is taken as partial: %q", c.Header.Partial)
	}
	path := writeTemp(t, "slow.log", durationOnlyOver(gunzip(t, "duration.log.gz")))
	c, sum = convert(t, Options{}, path)
	if !strings.Contains(c.Header.Partial, "log_min_duration_statement seems above 0") || sum.Partial != c.Header.Partial || sum.BadLines != 0 {
		t.Errorf("the log of statements over 1 ms: partial %q, problems %q", c.Header.Partial, sum.Problems)
	}
	said := "log_min_duration_statement = 1ms"
	c, _ = convert(t, Options{Partial: said}, "testdata/both.csv.gz")
	if c.Header.Partial != said {
		t.Errorf("partial %q, want the one stated", c.Header.Partial)
	}
}

// TestSortWindow: events leave in order of start even when statements
// outlast the window (then later than they started, counted); a window
// of the whole log moves none.
func TestSortWindow(t *testing.T) {
	whole, sum := convert(t, Options{Window: -1}, "testdata/duration.csv.gz")
	if sum.Late != 0 {
		t.Errorf("whole-log sort: %d late", sum.Late)
	}
	def, _ := convert(t, Options{}, "testdata/duration.csv.gz")
	if !reflect.DeepEqual(def.Events, whole.Events) {
		t.Error("the default window's events differ from the whole log's sort")
	}
	small, sum := convert(t, Options{Window: time.Millisecond}, "testdata/duration.csv.gz")
	if sum.Late == 0 || len(small.Events) != len(whole.Events) {
		t.Errorf("1 ms window: %d late, %d events of %d", sum.Late, len(small.Events), len(whole.Events))
	}
	for _, c := range []*Collect{whole, small} {
		for i := 1; i < len(c.Events); i++ {
			if c.Events[i].T < c.Events[i-1].T {
				t.Fatalf("event %d at %d after one at %d", i, c.Events[i].T, c.Events[i-1].T)
			}
		}
	}
}

// TestCaptureFile: the File sink writes a capture the capture reader reads
// back whole.
func TestCaptureFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.erpcap.gz")
	f := &File{Path: path}
	sum, err := Convert(context.Background(), []string{"testdata/both.json.gz"}, Options{}, f)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want, _ := convert(t, Options{}, "testdata/both.json.gz")
	r, err := capture.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []capture.Event
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	var n int64
	for _, k := range sum.Events {
		n += k
	}
	if !reflect.DeepEqual(got, want.Events) || r.Truncated() || int64(len(got)) != n {
		t.Errorf("read back %d events, want %d", len(got), len(want.Events))
	}
	if h := r.Header(); h.Source != capture.SourcePGLog || !h.Started.Equal(want.Header.Started) {
		t.Errorf("header %+v", h)
	}
}
