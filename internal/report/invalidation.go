package report

import (
	"fmt"
	"strings"

	"github.com/erplab/erplab/internal/profile"
)

// invalRow is one run's, or one key operation's, shared-invalidation
// events counted by the uprobes (extra.invalidation).
type invalRow struct {
	Run, Op                                string
	Resets, BackendsReset, Catchups        int64
	ResetsPerS, CatchupsPerS, CleanupsPerS string
	Inserted, Read                         string
	Unit                                   string
}

// invalSection builds the rows of runs with extra.invalidation: per run
// its totals and rates, then per key operation its counts; a run whose
// probes could not run gives a note saying why.
func invalSection(runs []Run) (rows []invalRow, notes []string) {
	for _, r := range runs {
		raw, ok := r.Doc.Extra["invalidation"]
		if !ok {
			continue
		}
		res, err := profile.ReadInval(raw)
		if err != nil {
			continue
		}
		s := res.Observed
		if s == nil {
			if res.Unavailable != "" {
				notes = append(notes, r.Name+": "+profile.UnavailableLine(res.Unavailable))
			}
			continue
		}
		unit := "msg"
		if !s.MessagesCounted {
			unit = "calls"
		}
		f := func(v float64) string { return fmt.Sprintf("%.2f", v) }
		read := func(v string) string {
			if !s.ReadsCounted {
				return "-"
			}
			return v + " msg"
		}
		rows = append(rows, invalRow{Run: r.Name, Op: "all", Resets: s.Total.Resets, BackendsReset: int64(s.BackendsReset), Catchups: s.Total.Catchups,
			ResetsPerS: f(s.PerS.Resets), CatchupsPerS: f(s.PerS.Catchups), CleanupsPerS: f(s.PerS.Cleanups),
			Inserted: fmt.Sprintf("%.0f/s", s.PerS.Inserted), Read: read(fmt.Sprintf("%.0f/s", s.PerS.Read)), Unit: unit})
		for _, o := range s.Operations {
			rows = append(rows, invalRow{Run: r.Name, Op: o.Name, Resets: o.Resets, Catchups: o.Catchups, ResetsPerS: "", CatchupsPerS: "",
				CleanupsPerS: fmt.Sprint(o.Cleanups), Inserted: fmt.Sprint(o.Inserted), Read: read(fmt.Sprint(o.Read)), Unit: unit})
		}
	}
	return rows, notes
}

// writeInvalMarkdown writes the section.
func writeInvalMarkdown(b *strings.Builder, pg page) {
	if len(pg.Inval) == 0 && len(pg.InvalNotes) == 0 {
		return
	}
	b.WriteString("\n### Shared invalidation observed (perf uprobes)\n")
	if len(pg.Inval) > 0 {
		b.WriteString("\n| run | key operation | resets | backends reset | resets/s | catch-ups | catch-ups/s | clean-ups | inserted | read |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, x := range pg.Inval {
			fmt.Fprintf(b, "| %s | %s | %d | %d | %s | %d | %s | %s | %s %s | %s |\n", md(x.Run), md(x.Op), x.Resets, x.BackendsReset, x.ResetsPerS, x.Catchups, x.CatchupsPerS, x.CleanupsPerS, x.Inserted, x.Unit, x.Read)
		}
	}
	for _, n := range pg.InvalNotes {
		fmt.Fprintf(b, "\n%s\n", md(n))
	}
}

// invalHTML is the template part of the section.
const invalHTML = `{{if or .Inval .InvalNotes}}<h2 id="invalidation">Shared invalidation observed (perf uprobes)</h2>
{{if .Inval}}<div class="scroll"><table><tr><th class="l">run</th><th class="l">key operation</th><th>resets</th><th>backends reset</th><th>resets/s</th><th>catch-ups</th><th>catch-ups/s</th><th>clean-ups</th><th>inserted</th><th>read</th></tr>
{{range .Inval}}<tr><td class="l">{{.Run}}</td><td class="l">{{.Op}}</td><td>{{.Resets}}</td><td>{{.BackendsReset}}</td><td>{{.ResetsPerS}}</td><td>{{.Catchups}}</td><td>{{.CatchupsPerS}}</td><td>{{.CleanupsPerS}}</td><td>{{.Inserted}} {{.Unit}}</td><td>{{.Read}}</td></tr>
{{end}}</table></div>
<p class="muted">resets: catalog cache resets (a backend found itself reset by the queue); catch-ups: catch-up interrupts processed (ProcessCatchupInterrupt); clean-ups: SICleanupQueue; inserted and read: SIInsertDataEntries' and SIGetDataEntries' messages (read only with run --probe-reads, else "-"). The "all" row gives rates per second (clean-ups per second); key operation rows give counts.</p>{{end}}
{{range .InvalNotes}}<p class="muted">{{.}}</p>
{{end}}{{end}}`
