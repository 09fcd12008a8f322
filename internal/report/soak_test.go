package report

import (
	"bytes"
	"encoding/json"
	"html"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/erplab/erplab/internal/soak"
)

// soakRun is testdata/one.json with the extra.soak of the soak
// recording rec (internal/soak/testdata, kept by erplab run --soak),
// written to a file and read back by Load.
func soakRun(t *testing.T, rec string) Run {
	t.Helper()
	var doc map[string]json.RawMessage
	raw, err := os.ReadFile("testdata/one.json")
	if err == nil {
		err = json.Unmarshal(raw, &doc)
	}
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Extra map[string]json.RawMessage `json:"extra"`
	}
	if raw, err = os.ReadFile(filepath.Join("..", "soak", "testdata", rec)); err == nil {
		err = json.Unmarshal(raw, &r)
	}
	if err != nil {
		t.Fatal(err)
	}
	extra := map[string]json.RawMessage{}
	if doc["extra"] != nil {
		if err := json.Unmarshal(doc["extra"], &extra); err != nil {
			t.Fatal(err)
		}
	}
	extra["soak"] = r.Extra["soak"]
	doc["extra"], _ = json.Marshal(extra)
	path := filepath.Join(t.TempDir(), strings.TrimSuffix(rec, ".json")+".json")
	out, _ := json.Marshal(doc)
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	runs, err := Load([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	if runs[0].Soak == nil {
		t.Fatal("Load did not decode extra.soak")
	}
	return runs[0]
}

// The degrading recording (grow's p95 rising until the APDEX collapse,
// two warnings) gets a soak section: the warnings' lines, the collapse,
// a chart per metric whose caption quotes the slope and interval as
// the warnings print them; a run without extra.soak gets none.
func TestSoakSectionHTML(t *testing.T) {
	r := soakRun(t, "degrading-grow.json")
	var buf bytes.Buffer
	if err := WriteHTML(&buf, []Run{r}); err != nil {
		t.Fatal(err)
	}
	page := html.UnescapeString(buf.String())
	for _, want := range []string{`<h2 id="soak-0">Soak trends: degrading-grow</h2>`,
		"warning 1 (window 10): degrading at 33s: grow p95 +268 %/min [+38, +498]",
		"warning 2 (window 11): degrading at 36s: throughput -46 %/min",
		"collapse at 45 s (window 14): window APDEX 0.63 below --collapse-apdex 0.7",
		`<figure id="chart-soak-0-0"><svg`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	trends := r.Soak.Rule.Trends(r.Soak.Windows) // the recording kept no trends: fitted as the run fits them
	caps := 0
	for _, tr := range trends {
		if tr.Metric != soak.KeyApdex && !strings.HasPrefix(tr.Metric, soak.KeyP95) {
			continue
		}
		want := "<figcaption>" + soak.Describe(tr, 1) + ", over 12 windows"
		if !strings.Contains(page, want) {
			t.Errorf("no caption %q", want)
		}
		caps++
	}
	if caps != 2 || !strings.Contains(page, "<figcaption>grow p95 +165 %/min [+5, +326], over 12 windows; now 60ms; a real trend in its bad direction; named by warning 1 at 33 s.</figcaption>") {
		t.Errorf("grow p95's caption is not the one expected (%d captions checked)", caps)
	}

	runs, err := Load([]string{"testdata/one.json"})
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := WriteHTML(&buf, runs); err != nil {
		t.Fatal(err)
	}
	if runs[0].Soak != nil || strings.Contains(buf.String(), "Soak trends") || strings.Contains(buf.String(), "chart-soak") {
		t.Error("a run without extra.soak got a soak section")
	}
}

// vertRE is a straight line as vgsvg draws it, with its colour, at the
// markers' width (1.4 pt: the axes' ticks are thinner).
var vertRE = regexp.MustCompile(`<path d="M([0-9.]+),([0-9.]+)L([0-9.]+),([0-9.]+)" style="fill:none;stroke:(#[0-9A-F]{6});stroke-width:1.4"`)

// The warnings' and the collapse's vertical lines are drawn where their
// times fall on the chart's time axis.
func TestSoakMarkerX(t *testing.T) {
	r := soakRun(t, "degrading-grow.json")
	s := r.Soak
	ax := soakAxisOf(s)
	p, err := soakPlot(s, soak.KeyApdex, nil, ax)
	if err != nil {
		t.Fatal(err)
	}
	svg, err := render(p, soakChartW, soakChartH)
	if err != nil {
		t.Fatal(err)
	}
	dc := p.DataCanvas(draw.New(vgsvg.New(soakChartW, soakChartH)))
	xs := map[string][]float64{}
	for _, m := range vertRE.FindAllStringSubmatch(svg, -1) {
		if m[1] == m[3] && m[2] != m[4] {
			x, _ := strconv.ParseFloat(m[1], 64)
			xs[m[5]] = append(xs[m[5]], x)
		}
	}
	check := func(what string, clr string, ts []float64) {
		t.Helper()
		if len(xs[clr]) != len(ts) {
			t.Fatalf("%s: %d vertical lines in %s, want %d", what, len(xs[clr]), clr, len(ts))
		}
		for i, ts := range ts {
			want := dc.X(p.X.Norm(ts / ax.Div)).Points()
			if math.Abs(xs[clr][i]-want) > 0.05 {
				t.Errorf("%s %d at x=%.2f pt, want %.2f (t=%g s)", what, i+1, xs[clr][i], want, ts)
			}
		}
	}
	check("warning", "#E69F00", []float64{33, 36})
	check("collapse", "#000000", []float64{45})
	if xs["#E69F00"][0] >= xs["#E69F00"][1] || xs["#E69F00"][1] >= xs["#000000"][0] {
		t.Errorf("markers out of order: %v", xs)
	}
}

// The Markdown page gets a table of the trends and the warnings' lines;
// a steady recording says it had none; a 10-minute one is drawn in
// minutes.
func TestSoakMarkdown(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, []Run{soakRun(t, "degrading-grow.json")}); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	for _, want := range []string{"### Soak trends: degrading-grow",
		"- **warning 1 (window 10): degrading at 33s: grow p95 +268 %/min [+38, +498], APDEX -0.202/min [-0.392, -0.0119]: at this slope APDEX falls below 0.85 in ~20 s**",
		"- **collapse at 45 s (window 14)",
		"| grow p95 | +165 %/min [+5, +326] | 12 | 41ms | 60ms | yes |",
		"| APDEX | -0.548/min [-0.916, -0.18] | 12 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	steady := soakRun(t, "steady-erp-10m.json")
	buf.Reset()
	if err := WriteMarkdown(&buf, []Run{steady}); err != nil {
		t.Fatal(err)
	}
	if md := buf.String(); !strings.Contains(md, "No early warning.") || strings.Contains(md, "| yes |") {
		t.Errorf("steady run's soak section:\n%s", md[strings.Index(md, "### Soak"):])
	}
	if ax := soakAxisOf(steady.Soak); ax.Div != 60 {
		t.Errorf("10-minute soak's axis in %q", ax.Label)
	}
}

// A results document whose extra.soak is of another format is refused
// with its path.
func TestSoakLoadBadFormat(t *testing.T) {
	raw, err := os.ReadFile("testdata/one.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	doc["extra"] = json.RawMessage(`{"soak": {"format": "erplab-soak/9", "windows": []}}`)
	path := filepath.Join(t.TempDir(), "bad.json")
	out, _ := json.Marshal(doc)
	os.WriteFile(path, out, 0o600)
	_, err = Load([]string{path})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `extra.soak: format "erplab-soak/9"`) || strings.Contains(err.Error(), "\n") {
		t.Errorf("Load: %v", err)
	}
}

// testdata/soak-smoke.json is a real soak recorded with
//
//	erplab run --workload smoke --users 2 --duration 40s --soak --window 5s
//
// on a PostgreSQL 15 of this host: its trends as the run recorded them
// are the table's and the captions' (not fitted again), one chart per
// metric not at 0 throughout.
func TestSoakRecordedTrends(t *testing.T) {
	runs, err := Load([]string{"testdata/soak-smoke.json"})
	if err != nil {
		t.Fatal(err)
	}
	s := runs[0].Soak
	if s == nil || len(s.Trends) == 0 || len(s.Warnings) != 0 {
		t.Fatalf("recording: %+v", s)
	}
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, runs); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	for _, want := range []string{"8 windows of 5 s; each trend is fitted over the last 24 steady windows",
		"No early warning.", "| catalog dead tuples | +238 %/min [+120, +356] | 6 | 218 | 325 | no |",
		"| sessions in IO:WALSync | fewer than 3 steady windows | - | - | - | - |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	buf.Reset()
	if err := WriteHTML(&buf, runs); err != nil {
		t.Fatal(err)
	}
	keys, flat := soakKeys(s)
	if n := strings.Count(buf.String(), `<figure id="chart-soak-0-`); n != len(keys) || len(keys) != 15 || len(flat) != 6 {
		t.Errorf("%d soak charts for %d metrics (%d at 0)", n, len(keys), len(flat))
	}
	if !strings.Contains(html.UnescapeString(buf.String()), "<figcaption>catalog dead tuples +238 %/min [+120, +356], over 6 windows; now 325.</figcaption>") {
		t.Error("no caption quoting catalog dead tuples' recorded slope")
	}
}
