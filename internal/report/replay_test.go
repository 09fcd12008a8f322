package report_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/report"
)

// TestReplaySection: a replay's results (recorded: a pgbench capture
// replayed at speed 1) get the captured durations beside the replayed
// ones per group, and the fidelity line, in HTML and Markdown; a run
// that is not a replay gets no such section.
func TestReplaySection(t *testing.T) {
	runs, err := report.Load([]string{filepath.Join("testdata", "replay.json"), filepath.Join("testdata", "one.json")})
	if err != nil {
		t.Fatal(err)
	}
	var h bytes.Buffer
	if err := report.WriteHTML(&h, runs); err != nil {
		t.Fatal(err)
	}
	html := h.String()
	for _, want := range []string{
		"Replay: as in production and replayed",
		// BEGIN's group: captured 600, p50 0.126 ms, p95 1.1 ms; replayed p95 0.596 ms
		"<td class=\"l\">BEGIN; #b16b4319</td><td>600</td><td>126µs</td><td>1.10ms</td><td>600</td>",
		"4205 statements, 0 failed, rows differing 0 of 4205, reordered 144",
		"<td>5 sessions x 1</td><td>one per session</td>",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if n := strings.Count(html, "as in production and replayed"); n != 1 {
		t.Errorf("%d replay sections, want 1 (one.json is not a replay)", n)
	}
	var m bytes.Buffer
	if err := report.WriteMarkdown(&m, runs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.String(), "| BEGIN; #b16b4319 | 600 | 126µs | 1.10ms | 600 |") {
		t.Errorf("Markdown lacks BEGIN's row:\n%s", m.String())
	}
}
