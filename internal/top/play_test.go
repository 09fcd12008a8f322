package top

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

var update = flag.Bool("update", false, "rewrite testdata/top-play.golden from testdata/top.rec")

// playGolden plays testdata/top.rec's sixth sample in the three views.
func playGolden(t *testing.T, r *Recording) string {
	t.Helper()
	var out bytes.Buffer
	for _, o := range []PlayOptions{{From: 5, To: 6}, {View: ViewBlocking, From: 5, Count: 1}, {View: ViewSessions, From: 5, To: 6, Filter: Filter{Application: "1C posting"}}} {
		if err := PrintPlay(&out, r, o); err != nil {
			t.Fatal(err)
		}
		out.WriteString("\n")
	}
	return out.String()
}

// TestPlayGolden: testdata/top.rec, recorded by `erplab top --record`
// from a server with a lock chain of three and two long reports, plays
// its sixth sample as the exact screens of testdata/top-play.golden
// (overview, blocking, sessions filtered by application).
func TestPlayGolden(t *testing.T) {
	r, err := Open("testdata/top.rec")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Len() != 8 || r.Note != "" {
		t.Fatalf("%d samples, note %q", r.Len(), r.Note)
	}
	got := playGolden(t, r)
	if *update {
		if err := os.WriteFile("testdata/top-play.golden", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/top-play.golden")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("played:\n%s\nwant (testdata/top-play.golden):\n%s", got, want)
	}
}

// TestPlayTornGolden: testdata/top.rec with its last record torn (the
// file cut 40 bytes short, as a kill during a write leaves it) plays
// up to the last whole sample, the seventh, with a one-line note.
func TestPlayTornGolden(t *testing.T) {
	b, err := os.ReadFile("testdata/top.rec")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "torn.rec")
	if err := os.WriteFile(path, b[:len(b)-40], 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Len() != 7 || strings.Count(r.Note, "\n") != 0 || !strings.Contains(r.Note, "the record after sample 7 is cut short or damaged") {
		t.Fatalf("%d samples, note %q", r.Len(), r.Note)
	}
	var out bytes.Buffer
	if err := PrintPlay(&out, r, PlayOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), TitleSessions); n != 7 || !strings.Contains(out.String(), "sample 7/7") {
		t.Errorf("%d screens:\n%s", n, out.String())
	}
	// The samples before the tear are the whole file's.
	if got, want := playGolden(t, r), string(must(os.ReadFile("testdata/top-play.golden"))); got != strings.ReplaceAll(want, "/8", "/7") {
		t.Errorf("torn file's sixth sample:\n%s\nwant:\n%s", got, want)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestPlayKeys drives the player: it steps, jumps a minute, pauses,
// changes speed and view, and shows the selected session's query.
func TestPlayKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "top.rec")
	liveFrames(t, path, 130)
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := &playModel{r: r, i: 0, speed: 1, width: 160, height: 60}
	key := func(k string) tea.Cmd {
		t.Helper()
		var msg tea.KeyMsg
		switch k {
		case "left", "right", "home", "end", "up", "down", "enter":
			msg = tea.KeyMsg{Type: map[string]tea.KeyType{"left": tea.KeyLeft, "right": tea.KeyRight, "home": tea.KeyHome, "end": tea.KeyEnd,
				"up": tea.KeyUp, "down": tea.KeyDown, "enter": tea.KeyEnter}[k]}
		default:
			msg = tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
		}
		_, cmd := m.Update(msg)
		return cmd
	}
	if cmd := m.Init(); cmd == nil {
		t.Fatal("playing: no tick")
	}
	m.Update(playTick{gen: m.gen})
	if m.i != 1 {
		t.Errorf("a tick: sample %d", m.i)
	}
	m.Update(playTick{gen: m.gen - 1})
	if m.i != 1 {
		t.Errorf("a stale tick moved to %d", m.i)
	}
	key("]")
	if m.i != 61 || !strings.Contains(m.View(), "replay +1m01s, sample 62/130") {
		t.Errorf("] from sample 2: %d\n%s", m.i, m.View())
	}
	key("[")
	if m.i != 1 {
		t.Errorf("[ back: %d", m.i)
	}
	key("right")
	if m.i != 2 || !m.paused || !strings.Contains(m.View(), "PAUSED") {
		t.Errorf("right: %d paused %v", m.i, m.paused)
	}
	if _, cmd := m.Update(playTick{gen: m.gen}); cmd != nil || m.i != 2 {
		t.Errorf("a tick while paused moved to %d", m.i)
	}
	key("left")
	key("left")
	key("left")
	if m.i != 0 {
		t.Errorf("left past the start: %d", m.i)
	}
	key("x")
	if m.speed != 10 || !strings.Contains(m.View(), "x speed (x10)") {
		t.Errorf("x: speed %d", m.speed)
	}
	if cmd := key(" "); m.paused || cmd == nil {
		t.Error("space does not resume")
	}
	key("end")
	if m.i != 129 || !strings.Contains(m.View(), "sample 130/130 x10, end") {
		t.Errorf("end: %d", m.i)
	}
	if cmd := key(" "); cmd != nil { // pause
		t.Error("pause ticks")
	}
	if cmd := key(" "); cmd != nil {
		t.Error("resume at the end ticks")
	}
	key("home")
	key("v")
	key("down")
	key("enter")
	if v := m.View(); m.view != ViewSessions || !strings.Contains(v, "> 4101") || !strings.Contains(v, "full query of pid 4101") {
		t.Errorf("sessions view, second row's query:\n%s", v)
	}
	key("v")
	if v := m.View(); !strings.Contains(v, "blocking: 1 root blockers, 1 blocked sessions") {
		t.Errorf("blocking view:\n%s", v)
	}
	if d := time.Duration(0); m.tick() == nil && d == 0 && !m.paused {
		t.Error("no tick while playing")
	}
	if cmd := key("q"); cmd == nil {
		t.Error("q does not quit")
	}
}
