// Package report renders erplab run results (docs/results-format.md) for
// people: one self-contained HTML page (inline CSS and inline SVG charts
// drawn with gonum.org/v1/plot's SVG backend; no scripts, no external
// assets, so it works offline) or Markdown tables for tickets. Several
// runs are shown side by side.
package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/erplab/erplab/internal/apdex"
	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/soak"
)

// Run is one results file to report.
type Run struct {
	// Name labels the run in tables and legends (the file name without
	// extension, made unique).
	Name string
	Path string
	Doc  *results.Document
	// Obs is the decoded extra.observations, nil when the run has none.
	Obs *sampler.Observations
	// Soak is the decoded extra.soak of erplab run --soak, nil when the
	// run has none.
	Soak *soak.Section
}

// Load reads results files (results.Read) and their observations and
// names the runs after their files. It returns the first error, with the
// file's path.
func Load(paths []string) ([]Run, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("report: no results files")
	}
	runs := make([]Run, 0, len(paths))
	used := map[string]int{}
	for _, p := range paths {
		d, err := results.Read(p)
		if err != nil {
			return nil, err
		}
		r := Run{Path: p, Doc: d}
		if raw, ok := d.Extra["observations"]; ok && len(raw) > 0 && string(raw) != "null" {
			o, err := sampler.ReadObservations(raw)
			if err != nil {
				return nil, fmt.Errorf("report: %s: %w", p, err)
			}
			r.Obs = o
		}
		if r.Soak, err = soakOf(d); err != nil {
			return nil, fmt.Errorf("report: %s: %w", p, err)
		}
		name := strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))
		used[name]++
		if used[name] > 1 {
			name = fmt.Sprintf("%s (%d)", name, used[name])
		}
		r.Name = name
		runs = append(runs, r)
	}
	return runs, nil
}

func (r Run) op(name string) *results.OpResult {
	for i := range r.Doc.Operations {
		if r.Doc.Operations[i].Name == name {
			return &r.Doc.Operations[i]
		}
	}
	return nil
}

// intervalSeconds is the run's series interval (parameters.interval_s,
// 1 s when absent).
func (r Run) intervalSeconds() float64 {
	var p struct {
		IntervalS float64 `json:"interval_s"`
	}
	if json.Unmarshal(r.Doc.Parameters, &p) == nil && p.IntervalS > 0 {
		return p.IntervalS
	}
	return 1
}

// end is the run's last time point, seconds since the start.
func (r Run) end() float64 {
	t := 0.0
	if n := len(r.Doc.Series); n > 0 {
		t = r.Doc.Series[n-1].T
	}
	if r.Obs != nil && len(r.Obs.Series) > 0 {
		t = math.Max(t, r.Obs.Series[len(r.Obs.Series)-1].T)
	}
	return t
}

func opNames(runs []Run) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range runs {
		for _, op := range r.Doc.Operations {
			if !seen[op.Name] {
				seen[op.Name] = true
				out = append(out, op.Name)
			}
		}
	}
	return out
}

// summaryRow is one run's line of the summary table.
type summaryRow struct {
	Name, Workload, Status, Started, Duration string
	MaxVUs, Connections                       string
	Integral, Rating, RatingLabel             string
	PerSecond, Count, Errors                  string
	Storms                                    int
}

type params struct {
	MaxVUs      int     `json:"max_vus"`
	Connections int     `json:"connections"`
	Think       string  `json:"think_time"`
	Scale       float64 `json:"scale"`
}

func summarize(r Run) summaryRow {
	var p params
	_ = json.Unmarshal(r.Doc.Parameters, &p)
	conns := "one per VU"
	if p.Connections > 0 {
		conns = fmt.Sprint(p.Connections)
	}
	s := summaryRow{
		Name: r.Name, Workload: r.Doc.Workload, Status: string(r.Doc.Status),
		Started:  r.Doc.StartedAt.UTC().Format(time.RFC3339),
		Duration: r.Doc.EndedAt.Sub(r.Doc.StartedAt).Round(100 * time.Millisecond).String(),
		MaxVUs:   fmt.Sprint(p.MaxVUs), Connections: conns,
		Integral: r.Doc.Integral.String(), Rating: r.Doc.Integral.Rating, RatingLabel: ratingLabel(r.Doc.Integral.Rating),
		PerSecond: fmt.Sprintf("%.1f", r.Doc.Totals.PerSecond),
		Count:     fmt.Sprint(r.Doc.Totals.Count), Errors: fmt.Sprint(r.Doc.Totals.Errors),
	}
	if r.Obs != nil {
		s.Storms = len(r.Obs.Storms)
	}
	if x, ok := replayOf(r); ok { // a replay has sessions, not VUs
		s.MaxVUs = fmt.Sprintf("%d sessions x %d", x.Sessions, max(x.UsersX, 1))
		s.Connections = "one per session"
	}
	return s
}

// opCell is one operation's figures in one run.
type opCell struct {
	// Apdex is the score as the run summary prints it (apdex.Score.ValueString:
	// two decimals truncated, "*" under 100 samples, "NS").
	Apdex, Rating, P50, P95, P99, Count, Errors string
	Class                                       string
	Small                                       bool
}

type opRow struct {
	Name, Target string
	Priority     int
	Cells        []opCell
}

func opRows(runs []Run) []opRow {
	var rows []opRow
	for _, name := range opNames(runs) {
		row := opRow{Name: name}
		for _, r := range runs {
			op := r.op(name)
			if op == nil {
				row.Cells = append(row.Cells, opCell{Apdex: "-"})
				continue
			}
			if row.Target == "" {
				row.Target, row.Priority = fmtMs(op.TargetMs), op.Priority
			}
			c := opCell{
				Apdex: op.Apdex.ValueString(), Rating: op.Apdex.Rating().Label(),
				P50: fmtMs(op.Response.P50), P95: fmtMs(op.Response.P95), P99: fmtMs(op.Response.P99),
				Count: fmt.Sprint(op.Count), Errors: fmt.Sprint(op.Errors),
				Class: "r-" + op.Apdex.Rating().String(), Small: op.Apdex.SmallSample(),
			}
			if op.Apdex.NS() {
				c.Rating = "" // "NS" says it already
			}
			row.Cells = append(row.Cells, c)
		}
		rows = append(rows, row)
	}
	return rows
}

// fmtMs prints a latency as the run summary does (results.FormatMs).
func fmtMs(v float64) string { return results.FormatMs(v) }

// ratingLabel prints a rating as the run summary does ("NS" without
// samples).
func ratingLabel(r string) string {
	if r == apdex.NoSample.String() {
		return apdex.NoSample.Label()
	}
	return r
}

// obsRow is one run's observation summary.
type obsRow struct {
	Name                                       string
	TopWaits                                   string
	CPUUser, CPUSystem, CPUIowait, CPUSoftirq  string
	CatalogBefore, CatalogAfter, CatalogGrowth string
	TempFiles                                  string
}

func observe(r Run) obsRow {
	o := obsRow{Name: r.Name, TopWaits: "-", CPUUser: "-", CPUSystem: "-", CPUIowait: "-", CPUSoftirq: "-",
		CatalogBefore: "-", CatalogAfter: "-", CatalogGrowth: "-", TempFiles: "-"}
	if raw, ok := r.Doc.Extra["catalog"]; ok {
		var c struct {
			Before map[string]int64 `json:"before_bytes"`
			After  map[string]int64 `json:"after_bytes"`
		}
		if json.Unmarshal(raw, &c) == nil && c.After != nil {
			var b, a int64
			for k, v := range c.After {
				a += v
				b += c.Before[k]
			}
			o.CatalogBefore, o.CatalogAfter, o.CatalogGrowth = fmtBytes(b), fmtBytes(a), fmtBytes(a-b)
		}
	}
	if r.Obs == nil {
		return o
	}
	waits := map[string]int{}
	active := 0
	var cpu [4]float64
	nCPU := 0.0
	var temp float64
	nDB := 0.0
	for _, s := range r.Obs.Series {
		if s.Elapsed <= 0 {
			continue
		}
		w := s.Weight() // a thinned series' coarse sample stands for several
		for k, v := range s.Waits {
			waits[k] += v * int(w)
		}
		active += s.Sessions.Active * int(w)
		if s.Host != nil {
			cpu[0] += w * s.Host.CPU.User
			cpu[1] += w * s.Host.CPU.System
			cpu[2] += w * s.Host.CPU.Iowait
			cpu[3] += w * s.Host.CPU.SoftIRQ
			nCPU += w
		}
		if s.DB != nil {
			temp += w * s.DB.TempFiles
			nDB += w
		}
	}
	if active > 0 {
		keys := sampler.WaitKeys(waits)
		var parts []string
		for _, k := range keys[:min(4, len(keys))] {
			parts = append(parts, fmt.Sprintf("%s %.0f %%", k, 100*float64(waits[k])/float64(active)))
		}
		o.TopWaits = strings.Join(parts, ", ")
	}
	if nCPU > 0 {
		f := func(v float64) string { return fmt.Sprintf("%.1f %%", v/nCPU) }
		o.CPUUser, o.CPUSystem, o.CPUIowait, o.CPUSoftirq = f(cpu[0]), f(cpu[1]), f(cpu[2]), f(cpu[3])
	}
	if nDB > 0 {
		o.TempFiles = fmt.Sprintf("%.2f /s", temp/nDB)
	}
	return o
}

func fmtBytes(b int64) string {
	a := math.Abs(float64(b))
	switch {
	case a >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case a >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case a >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

type stormRow struct {
	Run, At, Span, Wait, Message string
}

func stormRows(runs []Run) []stormRow {
	var out []stormRow
	for _, r := range runs {
		if r.Obs == nil {
			continue
		}
		for _, s := range r.Obs.Storms {
			end := "end of run"
			if s.EndT != nil {
				end = fmt.Sprintf("%.0f s", *s.EndT)
			}
			out = append(out, stormRow{Run: r.Name, At: fmt.Sprintf("%.0f s", s.T),
				Span: fmt.Sprintf("%.0f s - %s", s.StartT, end), Wait: s.WaitEvent, Message: s.Message})
		}
	}
	return out
}

// kv is one flattened setting.
type kv struct{ Key, Value string }

// flatten turns a JSON object into sorted dotted keys and values.
func flatten(raw json.RawMessage) []kv {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return nil
	}
	var out []kv
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch t := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, t[k])
			}
		default:
			b, _ := json.Marshal(t)
			s := string(b)
			if str, ok := t.(string); ok {
				s = str
			}
			out = append(out, kv{prefix, s})
		}
	}
	walk("", v)
	return out
}

type envSection struct {
	Name        string
	CommandLine string
}

type page struct {
	Title     string
	Generated string
	Runs      []string
	// Differs are the configuration items whose values differ between
	// the runs (none for a single run); Remedies the remedies row when
	// any run recorded remedies.
	Differs  []item
	Remedies *item
	Summary  []summaryRow
	Ops      []opRow
	// Small is true when some APDEX comes from fewer than 100 samples.
	Small   bool
	Obs     []obsRow
	Storms  []stormRow
	Charts  []Chart
	Stages  stageTable
	Params  []item // parameters, erplab version and remedies
	Server  []item
	Host    []item
	OpDefs  []opDef
	Env     []envSection
	Palette []string // the runs' colours in the charts, CSS hex
	// OpWaits, Statements, StmtNotes and Churn are the per-operation,
	// statement and churn sections (operations.go).
	OpWaits    []opWaitRow
	Statements []stmtRow
	StmtNotes  []string
	Churn      []churnRow
	// Inval and InvalNotes are the shared-invalidation section
	// (invalidation.go).
	Inval      []invalRow
	InvalNotes []string
	// Profile is the server CPU profile section, nil when no run has one.
	Profile *profileSection
	// Replays are the runs that replay a capture, with the captured
	// durations beside the replayed ones (replay.go).
	Replays []replaySection
	// Verdicts are the primary verdicts of erplab ab experiments among
	// the runs (verdicts.go).
	Verdicts []abVerdict
	// Soak are the soak sections of the runs of erplab run --soak
	// (soak.go).
	Soak []soakSection
}

func buildPage(runs []Run, charts []Chart) page {
	pg := page{Title: "erplab report", Generated: time.Now().UTC().Format(time.RFC3339), Charts: charts}
	for i, r := range runs {
		pg.Runs = append(pg.Runs, r.Name)
		pg.Summary = append(pg.Summary, summarize(r))
		pg.Obs = append(pg.Obs, observe(r))
		pg.Env = append(pg.Env, envSection{Name: r.Name, CommandLine: commandLine(r.Doc.CommandLine)})
		pg.Palette = append(pg.Palette, hexColor(palette(i)))
	}
	pg.Title += ": " + strings.Join(pg.Runs, " vs ")
	for _, it := range configItems(runs) {
		if it.Differs && len(runs) > 1 {
			pg.Differs = append(pg.Differs, it)
		}
		switch it.Section {
		case secRemedies:
			if it.Key == "remedies" && !allDash(it.Values) {
				c := it
				pg.Remedies = &c
			}
			pg.Params = append(pg.Params, it)
		case secVersion, secParams:
			pg.Params = append(pg.Params, it)
		case secServer:
			pg.Server = append(pg.Server, it)
		case secHost:
			pg.Host = append(pg.Host, it)
		}
	}
	pg.Ops = opRows(runs)
	for _, o := range pg.Ops {
		for _, c := range o.Cells {
			pg.Small = pg.Small || c.Small
		}
	}
	pg.OpDefs = operationRows(runs)
	pg.Stages = stageRows(runs)
	pg.Storms = stormRows(runs)
	pg.OpWaits, pg.Statements, pg.StmtNotes, pg.Churn = operationSections(runs)
	pg.Inval, pg.InvalNotes = invalSection(runs)
	pg.Verdicts = abVerdicts(runs)
	pg.Replays = replaySections(runs)
	return pg
}

// stageTable holds the per-step figures of the runs that have several
// steps (results' stages[]): a row per run and step, a column per key
// operation.
type stageTable struct {
	Ops  []string
	Rows []stageRow
}

type stageRow struct {
	Run, Stage, Span, VUs, PerSecond, Integral, Rating string
	Cells                                              []stageCell
}

type stageCell struct{ Apdex, P95, Class string }

func stageRows(runs []Run) stageTable {
	var t stageTable
	for _, r := range runs {
		if len(r.Doc.Stages) > 0 {
			t.Ops = opNames(runs)
			break
		}
	}
	for _, r := range runs {
		for _, st := range r.Doc.Stages {
			vus := fmt.Sprint(st.TargetVUs)
			if st.FromVUs != st.TargetVUs {
				vus = fmt.Sprintf("%d → %d", st.FromVUs, st.TargetVUs)
			}
			row := stageRow{Run: r.Name, Stage: fmt.Sprint(st.Stage), Span: fmt.Sprintf("%.1f–%.1f s", st.StartS, st.EndS), VUs: vus,
				PerSecond: fmt.Sprintf("%.1f", st.PerSecond), Integral: st.Integral.String(), Rating: st.Integral.Rating}
			for _, name := range t.Ops {
				c := stageCell{Apdex: "-"}
				for _, op := range st.Operations {
					if op.Name == name {
						c = stageCell{Apdex: op.Apdex.ValueString(), P95: fmtMs(op.Response.P95), Class: "r-" + op.Apdex.Rating().String()}
					}
				}
				row.Cells = append(row.Cells, c)
			}
			t.Rows = append(t.Rows, row)
		}
	}
	return t
}

func allDash(vs []string) bool {
	for _, v := range vs {
		if v != "-" {
			return false
		}
	}
	return true
}

// WriteHTML writes the report page for runs: summary, APDEX table,
// observation summary, storms, every chart of Charts inline, and the
// environment and parameters. The page loads nothing: no scripts, no
// links to other files.
func WriteHTML(w io.Writer, runs []Run) error {
	charts, err := Charts(runs)
	if err != nil {
		return err
	}
	pg := buildPage(runs, charts)
	if pg.Profile, err = profiles(runs); err != nil {
		return err
	}
	if pg.Soak, err = soakSections(runs, true); err != nil {
		return err
	}
	t, err := template.New("page").Funcs(template.FuncMap{
		"svg":          func(s string) template.HTML { return template.HTML(s) }, // our own renderer's output
		"verdictsNote": func() string { return verdictsNote },
		"dict": func(kv ...any) map[string]any {
			m := make(map[string]any, len(kv)/2)
			for i := 0; i+1 < len(kv); i += 2 {
				m[fmt.Sprint(kv[i])] = kv[i+1]
			}
			return m
		},
	}).Parse(pageHTML + profileHTML)
	if err != nil {
		return fmt.Errorf("report: template: %w", err)
	}
	if err := t.Execute(w, pg); err != nil {
		return fmt.Errorf("report: write: %w", err)
	}
	return nil
}

// WriteMarkdown writes the summary, APDEX and observation tables and the
// storms as Markdown (no charts), for tickets.
func WriteMarkdown(w io.Writer, runs []Run) error {
	pg := buildPage(runs, nil)
	prof, err := profiles(runs)
	if err != nil {
		return err
	}
	soaks, err := soakSections(runs, false)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", pg.Title)
	writeItemsMarkdown(&b, pg, "What differs between the runs", pg.Differs, true)
	writeVerdictsMarkdown(&b, pg.Verdicts)
	b.WriteString("| run | workload | status | started | duration | VUs | connections | integral APDEX | ops/s | executions | errors | storms |\n")
	b.WriteString("|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range pg.Summary {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s (%s) | %s | %s | %s | %d |\n", md(s.Name), md(s.Workload), md(s.Status),
			s.Started, s.Duration, s.MaxVUs, s.Connections, s.Integral, s.RatingLabel, s.PerSecond, s.Count, s.Errors, s.Storms)
	}
	b.WriteString("\n### APDEX per key operation\n\n| operation | T | priority |")
	for _, r := range pg.Runs {
		fmt.Fprintf(&b, " %s APDEX | %s p50 / p95 / p99 | %s n (err) |", md(r), md(r), md(r))
	}
	b.WriteString("\n|---|---:|---:|" + strings.Repeat("---:|---:|---:|", len(pg.Runs)) + "\n")
	for _, o := range pg.Ops {
		fmt.Fprintf(&b, "| %s | %s | %d |", md(o.Name), o.Target, o.Priority)
		for _, c := range o.Cells {
			if c.Apdex == "-" {
				b.WriteString(" - | - | - |")
				continue
			}
			a := c.Apdex
			if c.Rating != "" {
				a += " (" + c.Rating + ")"
			}
			fmt.Fprintf(&b, " %s | %s / %s / %s | %s (%s) |", a, c.P50, c.P95, c.P99, c.Count, c.Errors)
		}
		b.WriteString("\n")
	}
	if pg.Small {
		b.WriteString("\n\\* fewer than 100 samples: APDEX of such operations is indicative only\n")
	}
	if len(pg.Stages.Rows) > 0 {
		b.WriteString("\n### APDEX per stage (APDEX, p95)\n\n| run | stage | span | VUs | ops/s | integral APDEX |")
		for _, op := range pg.Stages.Ops {
			fmt.Fprintf(&b, " %s |", md(op))
		}
		b.WriteString("\n|---|---:|---:|---:|---:|---:|" + strings.Repeat("---:|", len(pg.Stages.Ops)) + "\n")
		for _, r := range pg.Stages.Rows {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |", md(r.Run), r.Stage, r.Span, r.VUs, r.PerSecond, r.Integral)
			for _, c := range r.Cells {
				if c.P95 != "" {
					fmt.Fprintf(&b, " %s, %s |", c.Apdex, c.P95)
				} else {
					fmt.Fprintf(&b, " %s |", c.Apdex)
				}
			}
			b.WriteString("\n")
		}
	}
	writeReplayMarkdown(&b, pg.Replays)
	b.WriteString("\n### Observations (means over the run)\n\n| run | top wait events (share of active sessions) | CPU user | CPU system | iowait | softirq | catalog before → after (growth) | temp files |\n|---|---|---:|---:|---:|---:|---|---:|\n")
	for _, o := range pg.Obs {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s → %s (%s) | %s |\n", md(o.Name), md(o.TopWaits), o.CPUUser, o.CPUSystem,
			o.CPUIowait, o.CPUSoftirq, o.CatalogBefore, o.CatalogAfter, o.CatalogGrowth, o.TempFiles)
	}
	writeOperationsMarkdown(&b, pg)
	writeInvalMarkdown(&b, pg)
	if len(pg.Storms) > 0 {
		b.WriteString("\n### Storms\n\n| run | fired at | span | wait event | message |\n|---|---:|---|---|---|\n")
		for _, s := range pg.Storms {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", md(s.Run), s.At, s.Span, md(s.Wait), md(s.Message))
		}
	}
	writeSoakMarkdown(&b, soaks)
	writeProfileMarkdown(&b, prof)
	b.WriteString("\n")
	writeItemsMarkdown(&b, pg, "Parameters", pg.Params, false)
	b.WriteString("### Command lines\n\n")
	for _, e := range pg.Env {
		fmt.Fprintf(&b, "- %s: `%s`\n", md(e.Name), strings.ReplaceAll(e.CommandLine, "`", "'"))
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("report: write: %w", err)
	}
	return nil
}

// writeItemsMarkdown writes a table of configuration items, a column per
// run. With differsOnly (the "what differs" table, only for several runs)
// an empty list says that nothing differs; otherwise the differing rows
// are marked.
func writeItemsMarkdown(b *strings.Builder, pg page, title string, items []item, differsOnly bool) {
	if len(pg.Runs) < 2 && differsOnly {
		return
	}
	fmt.Fprintf(b, "### %s\n\n", title)
	if len(items) == 0 {
		b.WriteString("Nothing recorded differs: same remedies, erplab version, parameters, server settings and host.\n\n")
		return
	}
	b.WriteString("| | |")
	for _, r := range pg.Runs {
		fmt.Fprintf(b, " %s |", md(r))
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(pg.Runs)) + "\n")
	for _, it := range items {
		key := md(it.Key)
		if it.Differs && !differsOnly {
			key = "**" + key + "** (differs)"
		}
		fmt.Fprintf(b, "| %s | %s |", it.Section, key)
		for _, v := range it.Values {
			fmt.Fprintf(b, " %s |", md(v))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

func md(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// commandLine is a document's command line as one string, passwords hidden
// (documents written before erplab redacted every command line may hold
// one).
func commandLine(args []string) string {
	return strings.Join(conninfo.RedactArgs(args), " ")
}

// verdictsNote explains the verdicts section of HTML and Markdown.
const verdictsNote = "Each variant of an erplab ab experiment against its baseline over the rounds given, with the primary rows " +
	"and verdict options ab recorded in the runs (extra.experiment.compare): the lines erplab ab ended with for the same files. " +
	"Every row of the comparison: erplab compare."

// writeVerdictsMarkdown writes the verdicts of erplab ab experiments, if
// any: the VERDICT line of each variant and its primary rows.
func writeVerdictsMarkdown(b *strings.Builder, vs []abVerdict) {
	if len(vs) == 0 {
		return
	}
	fmt.Fprintf(b, "### Verdicts of erplab ab\n\n%s\n\n", verdictsNote)
	for _, v := range vs {
		rounds := ""
		if v.Rounds != "" {
			rounds = " (" + v.Rounds + ")"
		}
		if v.Note != "" {
			fmt.Fprintf(b, "**VERDICT %s**%s: not computed: %s\n\n", md(v.Variant), rounds, md(v.Note))
			continue
		}
		fmt.Fprintf(b, "**VERDICT %s**%s: %s\n\n", md(v.Variant), rounds, md(v.Line))
		for _, r := range v.Rows {
			fmt.Fprintf(b, "- %s\n", md(r))
		}
		b.WriteString("\n")
	}
}
