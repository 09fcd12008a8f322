package techlog

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/capture"
)

func TestPartialFromLogcfg(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{Logcfg: "testdata/logcfg-slow.xml"}, "logcfg.xml keeps only DBPOSTGRS events with duration >= 1s (ge duration 10000)"},
		{Options{Logcfg: "testdata/logcfg-all.xml"}, ""},
		{Options{Logcfg: "testdata/logcfg-slow.xml", Partial: "filtered by the user"}, "filtered by the user"},
		{Options{}, ""},
	} {
		h, _, sum := readAll(t, c.opts, "testdata/journal")
		if h.Partial != c.want || sum.Partial != c.want {
			t.Errorf("%+v: Partial %q, want %q", c.opts, h.Partial, c.want)
		}
	}
}

func TestLogcfgRefusals(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	jsonCfg := write("json.xml", `<config xmlns="http://v8.1c.ru/v8/tech-log"><log location="/x/journal" format="json"><event><eq property="name" value="DBPOSTGRS"/></event></log></config>`)
	if _, err := Open(context.Background(), []string{"testdata/journal"}, Options{Logcfg: jsonCfg}); err == nil || !strings.Contains(err.Error(), "writes the JSON format") {
		t.Errorf("JSON journal config: %v", err)
	}
	broken := write("broken.xml", `<config><log>`)
	if _, err := Open(context.Background(), []string{"testdata/journal"}, Options{Logcfg: broken}); err == nil || !strings.Contains(err.Error(), "broken.xml") {
		t.Errorf("broken logcfg.xml: %v", err)
	}
	locks := write("locks.xml", `<config xmlns="http://v8.1c.ru/v8/tech-log"><log location="/x"><event><eq property="Name" value="TLOCK"/></event><event><like property="name" value="db%"/><ge property="Durationus" value="5000"/></event></log></config>`)
	j, err := Open(context.Background(), []string{"testdata/journal"}, Options{Logcfg: locks})
	if err != nil {
		t.Fatal(err)
	}
	if want := "logcfg.xml keeps only DBPOSTGRS events with duration >= 5ms (ge Durationus 5000)"; j.Summary().Partial != want {
		t.Errorf("like db%% with durationus: %q, want %q", j.Summary().Partial, want)
	}
}

// Without logcfg.xml, a journal of at least 100 statements none shorter
// than 10 ms is said to be filtered; one shorter statement says it is not.
func TestPartialHeuristic(t *testing.T) {
	started := time.Date(2026, 3, 15, 9, 0, 0, 0, time.UTC)
	slow := func(n int, dur func(i int) int64) []capture.Event {
		var evs []capture.Event
		for i := range n {
			evs = append(evs, capture.Event{Kind: capture.KindQuery, Session: "1", T: int64(i) * 100_000, SQL: "SELECT 1", Duration: dur(i), Rows: 1})
		}
		return evs
	}
	_, _, sum := readAll(t, Options{}, writeJournal(t, started, slow(100, func(int) int64 { return 12_000 })))
	if !strings.Contains(sum.Partial, "every one of the 100 DBPOSTGRS statements lasted at least 12ms") {
		t.Errorf("100 statements of 12 ms: Partial %q", sum.Partial)
	}
	_, _, sum = readAll(t, Options{}, writeJournal(t, started, slow(100, func(i int) int64 { return 12_000 - int64(i/99)*11_900 })))
	if sum.Partial != "" {
		t.Errorf("one statement of 100 µs among 100: Partial %q", sum.Partial)
	}
	_, _, sum = readAll(t, Options{}, writeJournal(t, started, slow(99, func(int) int64 { return 12_000 })))
	if sum.Partial != "" {
		t.Errorf("99 statements: Partial %q", sum.Partial)
	}
}

func TestTypeMapOverride(t *testing.T) {
	m, err := ParseTypeMap("mvarchar=text", "MCHAR=")
	if err != nil {
		t.Fatal(err)
	}
	_, evs, sum := readAll(t, Options{TypeMap: m}, "testdata/journal")
	mc := find(t, evs, capture.KindExecute, "rphost_4120/26031509.log:20")
	ins := find(t, evs, capture.KindExecute, "rphost_4120/26031509.log:7")
	if mc.TypeNames[2] != "mchar(5)" || ins.TypeNames[5] != "text" {
		t.Errorf("types with mvarchar=text, mchar unmapped: %q, %q", mc.TypeNames, ins.TypeNames)
	}
	if len(sum.Types) != 1 || sum.Types[0] != (TypeMapping{"mvarchar", "text", 4}) {
		t.Errorf("mapped types = %v", sum.Types)
	}
	for _, bad := range []string{"mvarchar", "=text", "a=b c", "x='y'"} {
		if _, err := ParseTypeMap(bad); err == nil {
			t.Errorf("ParseTypeMap(%q): no error", bad)
		}
	}
	tm := newTypeMap(nil)
	for in, want := range map[string]string{"mvarchar(150)[]": "varchar(150)[]", "public.mchar": "bpchar", `"mvarchar"`: "varchar", "numeric(15,2)": "numeric(15,2)"} {
		if got := tm.apply(in, false); got != want {
			t.Errorf("apply(%q) = %q, want %q", in, got, want)
		}
	}
}
