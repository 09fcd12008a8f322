package top

import (
	"bufio"
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/storm"
)

// liveFrames feeds n made-up samples to a live state (a storm at sample
// 70, other catalogs every 10th, two sessions) and records each frame;
// it returns the screens the live view drew, one per sample, and the
// file's size after each.
func liveFrames(t *testing.T, path string, n int) (screens []string, sizes []int64) {
	t.Helper()
	info := sampler.Info{Version: "15.18 (Debian)", Database: "erp", Local: true, StatsPrivileged: true}
	st, err := newState(info, storm.Rule{}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.start = time.Date(2026, 12, 4, 9, 0, 0, 0, time.FixedZone("MSK", 3*3600))
	rec, err := Create(path, Header{Erplab: "test", HostCPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.begin(info, st.start, time.Second, true); err != nil {
		t.Fatal(err)
	}
	list := []Session{
		{PID: 4100, Database: "erp", User: "erp", Application: "1C posting", State: "idle in transaction", Wait: "Client:ClientRead", Duration: 2 * time.Second, Query: "UPDATE stock SET qty = qty - $1"},
		{PID: 4101, Database: "erp", User: "erp", Application: "1C posting", State: "active", Wait: "Lock:transactionid", Duration: time.Second, BlockedBy: []int{4100}, Query: "UPDATE stock SET qty = qty - $1"},
	}
	for i := range n {
		w := map[string]int{"CPU": 10 + i%3}
		active := 12
		if i >= 70 && i < 90 {
			w, active = map[string]int{"LWLock:LockManager": 200, "CPU": 40}, 240
		}
		if i%7 == 0 {
			w["IO:DataFileRead"] = 1
		}
		s := fakeSample(st.start.Add(time.Duration(i+1)*time.Second), active, w)
		if i%10 == 0 {
			s.OtherCatalogs = []sampler.DatabaseCatalog{{Database: "buh", Catalog: []sampler.CatalogRel{{Name: "pg_class", Bytes: int64(i) << 20, InsPerS: float64(i)}}}}
		}
		st.add(s)
		st.inval = ""
		if i%5 == 0 { // top --probes' line, when perf delivered one
			st.inval = fmt.Sprintf("invalidation: resets %d.0/s, catch-ups 0.0/s, clean-ups 0.0/s, inserted 0 msg/s (perf uprobes)", i)
		}
		if err := rec.Add(frameOf(st, list)); err != nil {
			t.Fatal(err)
		}
		screens = append(screens, render(st, viewOpts{width: 120, interval: time.Second}))
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, fi.Size())
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	return screens, sizes
}

// TestRecordPlayMatchesLive: every frame of a recording of 130 samples
// (three segments, a storm, other databases' catalogs) plays back as
// the screen top drew live, the trend and the invalidation line included; the file is mode 0600
// and a second Create at its name is refused.
func TestRecordPlayMatchesLive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "top.rec")
	live, _ := liveFrames(t, path, 130)
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Len() != 130 || r.Note != "" || r.Header.HostCPUs != 8 || r.Header.Server.Database != "erp" || !r.Header.Sessions {
		t.Fatalf("len %d note %q header %+v", r.Len(), r.Note, r.Header)
	}
	for _, i := range []int{0, 1, 19, 20, 59, 60, 61, 75, 95, 129, 3} { // out of order: segments re-decoded
		st, _, err := r.stateAt(i)
		if err != nil {
			t.Fatal(err)
		}
		if got := render(st, viewOpts{width: 120, interval: time.Second}); got != live[i] {
			t.Errorf("sample %d plays as\n%s\nlive it was\n%s", i, got, live[i])
		}
	}
	if !strings.Contains(live[75], "STORM LWLock:LockManager storm") || !strings.Contains(live[95], "last storm: ") {
		t.Errorf("no storm in the made-up samples:\n%s", live[95])
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != RecordPerm {
		t.Errorf("mode %v %v", fi.Mode(), err)
	}
	if _, err := Create(path, Header{}); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Create over an existing file: %v", err)
	}
	for when, want := range map[string]int{"0s": 0, "1m": 60, "1m0.4s": 60, "1m0.6s": 61, "09:01:01": 60, "2m9s": 129} {
		if i, err := r.Find(when, true); err != nil || i != want {
			t.Errorf("Find(%q) = %d, %v; want %d", when, i, err, want)
		}
	}
	if i, err := r.Find("1m0.6s", false); err != nil || i != 61 {
		t.Errorf("Find(1m0.6s, after) = %d, %v", i, err)
	}
	for _, bad := range []string{"-5s", "3m", "08:59:00", "soon"} {
		if _, err := r.Find(bad, true); err == nil {
			t.Errorf("Find(%q) accepted", bad)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("Find(%q): error of more than a line: %v", bad, err)
		}
	}
}

// TestRecordTorn: a recording cut at any byte plays exactly the samples
// whose records were whole in the file at that size (as a kill -9 then
// leaves it), with a one-line note: "cut short" when a record is torn,
// "not closed" when the cut falls between records.
func TestRecordTorn(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "top.rec")
	_, sizes := liveFrames(t, path, 70)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	notes := map[string]int{}
	for cut := int64(len(b)) - 1; cut >= sizes[0]; cut -= 7 {
		want := 0
		for want < len(sizes) && sizes[want] <= cut {
			want++
		}
		p := filepath.Join(dir, "cut")
		os.Remove(p)
		if err := os.WriteFile(p, b[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Open(p)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		// A record's data comes before its block's end code and the sync
		// flush's empty block (up to 8 bytes): cut inside those, the
		// record is whole (its checksum says so).
		if r.Len() != want && (r.Len() != want+1 || cut < sizes[want]-8) {
			t.Errorf("cut at byte %d: %d samples, want %d (sizes %v)", cut, r.Len(), want, sizes[max(want-1, 0):min(want+2, len(sizes))])
		}
		switch {
		case strings.Contains(r.Note, "\n"):
			t.Errorf("cut at %d: note of more than a line %q", cut, r.Note)
		case strings.Contains(r.Note, "is cut short or damaged"):
			notes["torn"]++
		case strings.Contains(r.Note, "was not closed"):
			notes["not closed"]++
		default:
			t.Errorf("cut at %d: note %q", cut, r.Note)
		}
		var out bytes.Buffer
		if err := PrintPlay(&out, r, PlayOptions{From: r.Len() - 1}); err != nil || !strings.Contains(out.String(), TitleSessions) {
			t.Errorf("cut at %d: the last whole sample: %v", cut, err)
		}
		r.Close()
	}
	if notes["torn"] == 0 || notes["not closed"] == 0 {
		t.Errorf("notes %v: want both kinds", notes)
	}
	// A damaged byte inside a record: the samples before it play.
	bad := append([]byte(nil), b...)
	bad[sizes[65]+3] ^= 0xff
	p := filepath.Join(dir, "bad")
	if err := os.WriteFile(p, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if r, err := Open(p); err != nil || r.Len() < 60 || r.Len() > 66 || !strings.Contains(r.Note, "cut short or damaged") {
		t.Errorf("a damaged byte: %v", err)
	} else {
		r.Close()
	}
	if _, err := Open(filepath.Join(dir, "none")); err == nil {
		t.Error("a missing file opened")
	}
	if err := os.WriteFile(filepath.Join(dir, "junk"), []byte("{\"format\":\"other\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(filepath.Join(dir, "junk")); err == nil || !strings.Contains(err.Error(), "not an erplab top record") {
		t.Errorf("another format: %v", err)
	}
}

// replayStatus is the header's replay part, which live screens lack.
var replayStatus = regexp.MustCompile(`, replay \+[0-9hms]+, sample \d+/\d+`)

// TestRecordServer records four screens of a real server with a lock
// chain (a transaction holding a row lock, a session blocked behind it)
// and plays them back: the file holds the first sample too, every
// client session, and the played blocking and overview screens are the
// ones top printed live.
func TestRecordServer(t *testing.T) {
	pgtest.SkipShort(t)
	dsn := srv.NewDatabase(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	holder, waiter, mon := connect(t, dsn), connect(t, dsn), connect(t, dsn)
	for _, q := range []string{"CREATE TABLE stock (item int PRIMARY KEY, qty int)", "INSERT INTO stock VALUES (1, 10)", "BEGIN", "UPDATE stock SET qty = qty - 1 WHERE item = 1"} {
		if _, err := holder.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	wg.Add(1)
	go func() { defer wg.Done(); _, _ = waiter.Exec(ctx, "UPDATE stock SET qty = qty - 2 WHERE item = 1") }()
	waitFor(t, mon, Filter{}, "waiter blocked", func(ss []Session) bool {
		for _, s := range ss {
			if len(s.BlockedBy) > 0 {
				return true
			}
		}
		return false
	})
	s, err := sampler.Connect(ctx, dsn, sampler.Options{Queries: DefaultQueries})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	path := filepath.Join(t.TempDir(), "top.rec")
	rec, err := Create(path, Header{Erplab: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var live bytes.Buffer
	opts := Options{Interval: 200 * time.Millisecond, Width: 160, Conn: mon, View: ViewBlocking, Record: rec}
	if err := Print(ctx, &live, s, opts, 4); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Len() != 5 || r.Note != "" || !r.Header.Sessions || r.Header.Server.VersionNum < 150000 || r.Header.IntervalNs != 200*time.Millisecond {
		t.Fatalf("%d samples, note %q, header %+v", r.Len(), r.Note, r.Header)
	}
	var played bytes.Buffer
	if err := PrintPlay(&played, r, PlayOptions{View: ViewBlocking, From: 1}); err != nil {
		t.Fatal(err)
	}
	if got := replayStatus.ReplaceAllString(played.String(), ""); got != live.String() {
		t.Errorf("played:\n%s\nlive:\n%s", got, live.String())
	}
	if !strings.Contains(live.String(), "blocking: 1 root blockers, 1 blocked sessions") || !strings.Contains(played.String(), "replay +") {
		t.Errorf("blocking view:\n%s", played.String())
	}
	f, err := r.Frame(4)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.List) != 3 || f.Sessions.Active < 1 || f.Time.IsZero() {
		t.Errorf("last frame: %d sessions listed (want holder, waiter, the sampler), %+v", len(f.List), f.Sessions)
	}
	// The overview of the last sample as the live state drew it.
	played.Reset()
	if err := PrintPlay(&played, r, PlayOptions{From: 4, To: 5, Width: 160}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(local) - ", ", replay +", "sample 5/5", TitleWaits, "UPDATE stock SET qty = qty - 2 WHERE item = 1"} {
		if !strings.Contains(played.String(), want) {
			t.Errorf("overview lacks %q:\n%s", want, played.String())
		}
	}
}

// TestRecordTextsOncePerSegment: a query text is written once a segment
// however many sessions and samples show it (130 samples: 3 segments).
func TestRecordTextsOncePerSegment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "top.rec")
	liveFrames(t, path, 130)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	if _, err := br.ReadBytes('\n'); err != nil {
		t.Fatal(err)
	}
	var all []byte
	cr := &countingReader{r: br}
	for {
		if _, err := br.Peek(1); err == io.EOF {
			break
		}
		b, err := io.ReadAll(flate.NewReader(cr))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	for text, want := range map[string]int{"UPDATE stock SET qty = qty - $1": 3, "CREATE TEMPORARY TABLE tt_": 3} {
		if n := bytes.Count(all, []byte(text)); n != want {
			t.Errorf("%q written %d times, want %d", text, n, want)
		}
	}
}

// TestRunRecords: the interactive model records every sample with every
// session while its sessions view shows the filtered ones; paused, the
// screen stays and the recording goes on.
func TestRunRecords(t *testing.T) {
	pgtest.SkipShort(t)
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	mon := connect(t, dsn)
	s, err := sampler.Connect(ctx, dsn, sampler.Options{Queries: DefaultQueries})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	path := filepath.Join(t.TempDir(), "top.rec")
	rec, err := Create(path, Header{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := newState(s.Info(), storm.Rule{}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Interval: time.Second, Conn: mon, Filter: Filter{State: "active"}, Record: rec}
	if err := rec.begin(s.Info(), st.start, opts.Interval, true); err != nil {
		t.Fatal(err)
	}
	m := &model{ctx: ctx, s: s, st: st, opts: opts, interval: time.Second, width: 160, height: 60, view: ViewSessions}
	step := func() {
		t.Helper()
		cmd := m.sample()
		if cmd == nil {
			t.Fatal("busy")
		}
		m.Update(cmd())
		if m.errLine != "" {
			t.Fatal(m.errLine)
		}
	}
	step()
	step()
	if len(m.sessions) != 0 || !strings.Contains(m.View(), "filter state=active: 0 shown") {
		t.Errorf("filtered view: %d sessions\n%s", len(m.sessions), m.View())
	}
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("p")})
	frozen := m.View()
	if m.Update(tickMsg{gen: m.gen}); !m.busy {
		t.Error("paused while recording: no sample asked")
	}
	m.busy = false
	step()
	if m.View() != frozen || !strings.Contains(frozen, "PAUSED") {
		t.Errorf("paused screen changed:\n%s\nwas\n%s", m.View(), frozen)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, err := r.Frame(2)
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 3 || len(f.List) != 1 || f.List[0].State != "idle" || f.List[0].Application != sampler.ApplicationName {
		t.Errorf("%d frames, the last lists %+v (want the sampler's idle session)", r.Len(), f.List)
	}
}
