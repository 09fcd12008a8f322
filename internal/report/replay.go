package report

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// replayExtra is what the report reads of a replay's extra.replay
// (internal/replay Fidelity, docs/replay.md): the captured durations of
// each group ("as in production") and the replay's fidelity.
type replayExtra struct {
	Source       string           `json:"source"`
	Order        string           `json:"order"`
	Speed        float64          `json:"speed"`
	UsersX       int              `json:"users_x"`
	Sessions     int              `json:"sessions"`
	Statements   int64            `json:"statements"`
	Failed       int64            `json:"failed"`
	NewErrors    map[string]int64 `json:"new_errors"`
	RowsCompared int64            `json:"rows_compared"`
	RowsDiffer   int64            `json:"rows_differ"`
	Reordered    int64            `json:"reordered"`
	Skipped      int64            `json:"skipped"`
	Lag          *struct {
		P50 float64 `json:"p50_ms"`
		P99 float64 `json:"p99_ms"`
	} `json:"lag"`
	Groups []struct {
		Name               string `json:"name"`
		Captured, Replayed struct {
			Count int64   `json:"count"`
			P50   float64 `json:"p50_ms"`
			P95   float64 `json:"p95_ms"`
		}
	} `json:"groups"`
}

// replayOf is the run's extra.replay, false when it is not a replay.
func replayOf(r Run) (replayExtra, bool) {
	var x replayExtra
	raw, ok := r.Doc.Extra["replay"]
	if !ok || json.Unmarshal(raw, &x) != nil {
		return replayExtra{}, false
	}
	return x, true
}

// replaySection is one replayed run: its groups with the captured and
// the replayed durations side by side, and its fidelity in one line.
type replaySection struct {
	Run      string
	Fidelity string
	Rows     []replayRow
}

type replayRow struct {
	Name                        string
	CapCount, CapP50, CapP95    string
	ReplCount, ReplP50, ReplP95 string
	Ratio                       string // replayed p95 / captured p95
}

// replaySections are the sections of the runs that are replays (with
// extra.replay); nil when none is.
func replaySections(runs []Run) []replaySection {
	var out []replaySection
	for _, r := range runs {
		x, ok := replayOf(r)
		if !ok {
			continue
		}
		s := replaySection{Run: r.Name, Fidelity: x.fidelity()}
		for _, g := range x.Groups {
			row := replayRow{Name: g.Name,
				CapCount: fmt.Sprint(g.Captured.Count), CapP50: fmtMs(g.Captured.P50), CapP95: fmtMs(g.Captured.P95),
				ReplCount: fmt.Sprint(g.Replayed.Count), ReplP50: fmtMs(g.Replayed.P50), ReplP95: fmtMs(g.Replayed.P95), Ratio: "-"}
			if g.Captured.P95 > 0 && g.Replayed.Count > 0 {
				row.Ratio = fmt.Sprintf("%.2f", g.Replayed.P95/g.Captured.P95)
			}
			s.Rows = append(s.Rows, row)
		}
		out = append(out, s)
	}
	return out
}

// fidelity is the replay's fidelity in one line.
func (x replayExtra) fidelity() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s replayed with order %s at speed %g, %d sessions x %d: %d statements, %d failed",
		x.Source, x.Order, x.Speed, x.Sessions, x.UsersX, x.Statements, x.Failed)
	if n := len(x.NewErrors); n > 0 {
		var codes []string
		for c, k := range x.NewErrors {
			codes = append(codes, fmt.Sprintf("%s %d", c, k))
		}
		fmt.Fprintf(&b, " (new: %s)", strings.Join(slices.Sorted(slices.Values(codes)), ", "))
	}
	fmt.Fprintf(&b, ", rows differing %d of %d, reordered %d, skipped %d", x.RowsDiffer, x.RowsCompared, x.Reordered, x.Skipped)
	if x.Lag != nil {
		fmt.Fprintf(&b, ", lag p50 %s p99 %s", fmtMs(x.Lag.P50), fmtMs(x.Lag.P99))
	}
	return b.String()
}

// replayHTML is the replay section of the page.
const replayHTML = `{{if .Replays}}
<h2 id="replay">Replay: as in production and replayed</h2>
{{range .Replays}}<p>{{.Run}}: {{.Fidelity}}.</p>
<div class="scroll"><table>
<tr><th class="l" rowspan="2">key operation</th><th colspan="3">captured (as in production)</th><th colspan="3">replayed</th><th rowspan="2">p95 replayed / captured</th></tr>
<tr><th>count</th><th>p50</th><th>p95</th><th>count</th><th>p50</th><th>p95</th></tr>
{{range .Rows}}<tr><td class="l">{{.Name}}</td><td>{{.CapCount}}</td><td>{{.CapP50}}</td><td>{{.CapP95}}</td><td>{{.ReplCount}}</td><td>{{.ReplP50}}</td><td>{{.ReplP95}}</td><td>{{.Ratio}}</td></tr>
{{end}}</table></div>
{{end}}<p class="muted">Captured: the durations the capture recorded for each statement of the group (the proxy's, the server log's or the journal's); replayed: the same statements on this run's server.</p>
{{end}}
`

// writeReplayMarkdown is the replay section in Markdown.
func writeReplayMarkdown(b *strings.Builder, rs []replaySection) {
	for _, s := range rs {
		fmt.Fprintf(b, "\n### Replay of %s: as in production and replayed\n\n%s.\n\n| key operation | captured count | captured p50 | captured p95 | replayed count | replayed p50 | replayed p95 | p95 replayed / captured |\n|---|---:|---:|---:|---:|---:|---:|---:|\n", md(s.Run), md(s.Fidelity))
		for _, r := range s.Rows {
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", md(r.Name), r.CapCount, r.CapP50, r.CapP95, r.ReplCount, r.ReplP50, r.ReplP95, r.Ratio)
		}
	}
}
