package report

import (
	"fmt"
	"strings"

	"github.com/erplab/erplab/internal/profile"
)

// profileSection is the server CPU profile of the runs that recorded one
// (erplab run --profile, extra.profile): a row per subsystem with a share
// per run, the top functions and a flame graph per run.
type profileSection struct {
	Runs  []string // the runs' names, "-" columns for runs without a profile
	Rows  []profileRow
	Notes []string // per run: samples, duration, host share
	Flame []flame
}

type profileRow struct {
	Name   string
	Shares []string
}

type flame struct {
	Run, SVG string
	Top      []profile.FunctionShare
	// Ops are the run's samples per key operation (run --profile), OpNote
	// how they were attributed; empty for older documents.
	Ops    []profOpRow
	OpNote string
}

// profOpRow is one key operation's line of the per-operation table.
type profOpRow struct {
	Name, Share, Subsystems, Functions string
	Samples                            int
}

// profOpRows are the per-operation rows of s.
func profOpRows(s *profile.Summary) ([]profOpRow, string) {
	a := s.OpAttribution
	if a == nil {
		return nil, ""
	}
	var rows []profOpRow
	for _, o := range s.Operations {
		var subs, fns []string
		for _, x := range o.Subsystems {
			subs = append(subs, fmt.Sprintf("%s %.0f %%", x.Name, x.SharePct))
		}
		for _, f := range o.Functions {
			fns = append(fns, fmt.Sprintf("%s %.0f %%", f.Name, f.SelfPct))
		}
		rows = append(rows, profOpRow{Name: o.Name, Samples: o.Samples, Share: fmt.Sprintf("%.1f %%", o.SharePct),
			Subsystems: strings.Join(subs, ", "), Functions: strings.Join(fns, ", ")})
	}
	return rows, fmt.Sprintf("%d samples taken while a key operation ran on the sampled backend, %d others (background processes, backends between operations); perf's clock aligned with the run's within %.1f µs",
		a.Attributed, a.Unattributed, a.ClockErrorUs)
}

// profileTop is how many functions the report lists per run.
const profileTop = 15

// profiles builds the section, nil when no run has a profile.
func profiles(runs []Run) (*profileSection, error) {
	sums := make([]*profile.Summary, len(runs))
	any := false
	for i, r := range runs {
		s, err := profile.Read(r.Doc.Extra["profile"])
		if err != nil {
			return nil, fmt.Errorf("report: %s: %w", r.Path, err)
		}
		sums[i], any = s, any || s != nil
	}
	if !any {
		return nil, nil
	}
	sec := &profileSection{}
	for i, r := range runs {
		sec.Runs = append(sec.Runs, r.Name)
		s := sums[i]
		if s == nil {
			sec.Notes = append(sec.Notes, r.Name+": no profile")
			continue
		}
		sec.Notes = append(sec.Notes, fmt.Sprintf("%s: %d samples of %d server processes over %.0f s at %d Hz; the server had %.1f %% of the sampled CPU time",
			r.Name, s.Samples, s.Processes, s.DurationS, s.FrequencyHz, s.HostSharePct))
		var b strings.Builder
		if err := s.FlameGraph(&b, "server CPU: "+r.Name); err != nil {
			return nil, err
		}
		ops, note := profOpRows(s)
		sec.Flame = append(sec.Flame, flame{Run: r.Name, SVG: b.String(), Top: s.Functions[:min(profileTop, len(s.Functions))], Ops: ops, OpNote: note})
	}
	for _, name := range profile.Subsystems {
		row := profileRow{Name: name}
		for _, s := range sums {
			if s == nil {
				row.Shares = append(row.Shares, "-")
				continue
			}
			row.Shares = append(row.Shares, fmt.Sprintf("%.1f %%", s.Share(name)))
		}
		sec.Rows = append(sec.Rows, row)
	}
	return sec, nil
}

// profileHTML is the section of the page (template "profile").
const profileHTML = `{{define "profile"}}{{if .}}<h2 id="profile">Server CPU profile (perf)</h2>
<p class="muted">{{range .Notes}}{{.}}<br>{{end}}Each sample goes to the subsystem of the signature nearest the function on the CPU (internal/profile's table).</p>
<div class="scroll"><table><tr><th class="l">subsystem</th>{{range .Runs}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr><td class="l">{{.Name}}</td>{{range .Shares}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table></div>
{{range .Flame}}<h3>{{.Run}}: top functions and flame graph</h3>
<div class="scroll"><table><tr><th>self %</th><th>total %</th><th class="l">function</th><th class="l">subsystem</th></tr>
{{range .Top}}<tr><td>{{printf "%.1f" .SelfPct}}</td><td>{{printf "%.1f" .TotalPct}}</td><td class="l">{{.Name}}</td><td class="l">{{.Subsystem}}</td></tr>
{{end}}</table></div>
{{if .Ops}}<h3>{{.Run}}: by key operation</h3>
<p class="muted">{{.OpNote}}. Shares of subsystems and functions are of the operation's samples.</p>
<div class="scroll"><table><tr><th class="l">operation</th><th>samples</th><th>share</th><th class="l">top subsystems</th><th class="l">top functions (self)</th></tr>
{{range .Ops}}<tr><td class="l">{{.Name}}</td><td>{{.Samples}}</td><td>{{.Share}}</td><td class="l">{{.Subsystems}}</td><td class="l">{{.Functions}}</td></tr>
{{end}}</table></div>{{end}}
<figure>{{svg .SVG}}</figure>
{{end}}{{end}}{{end}}`

// writeProfileMarkdown writes the subsystem table.
func writeProfileMarkdown(b *strings.Builder, sec *profileSection) {
	if sec == nil {
		return
	}
	b.WriteString("\n### Server CPU profile (perf): share of samples by subsystem\n\n| subsystem |")
	for _, r := range sec.Runs {
		fmt.Fprintf(b, " %s |", md(r))
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(sec.Runs)) + "\n")
	for _, row := range sec.Rows {
		fmt.Fprintf(b, "| %s |", row.Name)
		for _, s := range row.Shares {
			fmt.Fprintf(b, " %s |", s)
		}
		b.WriteString("\n")
	}
	for _, f := range sec.Flame {
		if len(f.Ops) == 0 {
			continue
		}
		fmt.Fprintf(b, "\n#### %s: by key operation\n\n%s.\n\n| operation | samples | share | top subsystems | top functions (self) |\n|---|---:|---:|---|---|\n", md(f.Run), f.OpNote)
		for _, o := range f.Ops {
			fmt.Fprintf(b, "| %s | %d | %s | %s | %s |\n", md(o.Name), o.Samples, o.Share, md(o.Subsystems), md(o.Functions))
		}
	}
}
