package report

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/erplab/erplab/internal/sampler"
)

// topStatementsShown is how many statements a run's table lists.
const topStatementsShown = 10

// opWaitRow is one key operation of one run in the waits-per-operation
// section: its backend samples and top waits, each with its share (a bar
// of Pct % width in the HTML page).
type opWaitRow struct {
	Run, Op string
	Samples int
	Waits   []sampler.WaitShare
	// Plan, Exec are its statements' ms per execution of the operation
	// ("-" without pg_stat_statements).
	Plan, Exec string
}

// stmtRow is one statement of a run's top list.
type stmtRow struct {
	Run, Query, Ops             string
	Calls                       int64
	PlanMean, ExecMean, TotalMs string
	SharedBlks, TempBlks        string
}

// churnRow is one run's temp-relation churn and invalidation estimate.
type churnRow struct {
	Run                                      string
	RelFiles, RelFilesMax, SInval, SInvalMax string
	Queues, SInvalWait                       string
}

// operationSections builds the waits-per-operation rows, the top
// statements, the statements notes and the churn rows of runs with
// observations.
func operationSections(runs []Run) (waits []opWaitRow, stmts []stmtRow, notes []string, churn []churnRow) {
	for _, r := range runs {
		if r.Obs == nil {
			continue
		}
		var params struct {
			WarmupS float64 `json:"warmup_s"`
		}
		_ = json.Unmarshal(r.Doc.Parameters, &params) // no parameters: from 0
		if c, ok := r.Obs.Churn(params.WarmupS); ok {
			churn = append(churn, churnRow{Run: r.Name, RelFiles: fmt.Sprintf("%.0f", c.RelFilesMean), RelFilesMax: fmt.Sprintf("%.0f", c.RelFilesMax),
				SInval: fmt.Sprintf("%.0f", c.SInvalMean), SInvalMax: fmt.Sprintf("%.0f", c.SInvalMax),
				Queues: fmt.Sprintf("%.2f", c.SInvalQueuesMean), SInvalWait: fmt.Sprintf("%.1f %%", c.SInvalWaitPctMean)})
		}
		st := r.Obs.Statements
		perOp := map[string]sampler.OpStatements{}
		if st != nil {
			for _, o := range st.Operations {
				perOp[o.Operation] = o
			}
			if st.Note != "" {
				notes = append(notes, r.Name+": "+st.Note)
			}
		}
		totals := r.Obs.OpWaitTotals()
		for _, op := range sampler.OpNames(totals) {
			top, n := sampler.TopWaits(totals[op], 5)
			row := opWaitRow{Run: r.Name, Op: op, Samples: n, Waits: top, Plan: "-", Exec: "-"}
			if o, ok := perOp[op]; ok {
				if res := r.op(op); res != nil && res.Count+res.WarmupCount > 0 {
					e := float64(res.Count + res.WarmupCount)
					row.Plan, row.Exec = fmt.Sprintf("%.2f", o.PlanMs/e), fmt.Sprintf("%.2f", o.ExecMs/e)
				}
			}
			waits = append(waits, row)
		}
		if st == nil {
			continue
		}
		for _, s := range st.Top[:min(len(st.Top), topStatementsShown)] {
			ops := make([]string, 0, len(s.Operations))
			for name, f := range s.Operations {
				ops = append(ops, fmt.Sprintf("%s %.0f %%", name, 100*f))
			}
			sort.Strings(ops)
			q := strings.Join(strings.Fields(s.Query), " ")
			if len(q) > 160 {
				q = q[:160] + "…"
			}
			opsText := strings.Join(ops, ", ")
			if opsText == "" {
				opsText = "not attributed to a key operation"
			}
			stmts = append(stmts, stmtRow{Run: r.Name, Query: q, Ops: opsText, Calls: s.Calls,
				PlanMean: fmt.Sprintf("%.3f", s.MeanPlanMs()), ExecMean: fmt.Sprintf("%.3f", s.MeanExecMs()),
				TotalMs: fmt.Sprintf("%.0f", s.PlanMs+s.ExecMs), SharedBlks: fmt.Sprint(s.SharedHit + s.SharedRead),
				TempBlks: fmt.Sprint(s.TempRead + s.TempWritten)})
		}
	}
	return waits, stmts, notes, churn
}

// waitsText is the waits of a row as "LWLock:LockManager 31 %, CPU 25 %".
func (r opWaitRow) WaitsText() string {
	parts := make([]string, 0, len(r.Waits))
	for _, w := range r.Waits {
		parts = append(parts, fmt.Sprintf("%s %.0f %%", w.Wait, w.Pct))
	}
	return strings.Join(parts, ", ")
}

// writeOperationsMarkdown writes the churn, waits-per-operation and top
// statements sections.
func writeOperationsMarkdown(b *strings.Builder, pg page) {
	if len(pg.Churn) > 0 {
		b.WriteString("\n### Temp-relation file churn and shared invalidation (estimate)\n\n| run | rel files/s mean | max | sinval msg/s mean | max | queues/s | SInval waits |\n|---|---:|---:|---:|---:|---:|---:|\n")
		for _, c := range pg.Churn {
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s |\n", md(c.Run), c.RelFiles, c.RelFilesMax, c.SInval, c.SInvalMax, c.Queues, c.SInvalWait)
		}
	}
	if len(pg.OpWaits) > 0 {
		b.WriteString("\n### Waits per key operation\n\n| run | key operation | backend samples | top waits (share) | plan ms / exec | exec ms / exec |\n|---|---|---:|---|---:|---:|\n")
		for _, w := range pg.OpWaits {
			fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s |\n", md(w.Run), md(w.Op), w.Samples, md(w.WaitsText()), w.Plan, w.Exec)
		}
	}
	if len(pg.Statements) > 0 {
		b.WriteString("\n### Top statements (pg_stat_statements over the run)\n\n| run | statement | key operations | calls | plan ms/call | exec ms/call | total ms | shared blks | temp blks |\n|---|---|---|---:|---:|---:|---:|---:|---:|\n")
		for _, s := range pg.Statements {
			fmt.Fprintf(b, "| %s | `%s` | %s | %d | %s | %s | %s | %s | %s |\n", md(s.Run), strings.ReplaceAll(s.Query, "`", "'"), md(s.Ops), s.Calls, s.PlanMean, s.ExecMean, s.TotalMs, s.SharedBlks, s.TempBlks)
		}
	}
	for _, n := range pg.StmtNotes {
		fmt.Fprintf(b, "\n%s\n", md(n))
	}
}

// operationsHTML is the template part of the same sections.
const operationsHTML = `{{if .Churn}}<h2 id="churn">Temp-relation file churn and shared invalidation (estimate)</h2>
<div class="scroll"><table><tr><th class="l">run</th><th>rel files/s mean</th><th>max</th><th>sinval msg/s mean</th><th>max</th><th>queues/s (4096 msgs)</th><th>SInval waits</th></tr>
{{range .Churn}}<tr><td class="l">{{.Run}}</td><td>{{.RelFiles}}</td><td>{{.RelFilesMax}}</td><td>{{.SInval}}</td><td>{{.SInvalMax}}</td><td>{{.Queues}}</td><td>{{.SInvalWait}}</td></tr>
{{end}}</table></div>
<p class="muted">rel files: pg_class inserts + updates per second (new relations and new relfilenodes from TRUNCATE/rewrite). sinval: catalog changes times their catalog caches, an estimate; no server counter exists.</p>{{end}}
{{if .OpWaits}}<h2 id="opwaits">Waits per key operation</h2>
<div class="scroll"><table><tr><th class="l">run</th><th class="l">key operation</th><th>backend samples</th><th class="l">top waits (share of its samples)</th><th>plan ms / exec</th><th>exec ms / exec</th></tr>
{{range .OpWaits}}<tr><td class="l">{{.Run}}</td><td class="l">{{.Op}}</td><td>{{.Samples}}</td><td class="l">{{range .Waits}}<div><span style="display:inline-block;background:#0072b2;height:0.7em;width:{{printf "%.0f" .Pct}}px"></span> {{.Wait}} {{printf "%.0f" .Pct}} %</div>{{end}}</td><td>{{.Plan}}</td><td>{{.Exec}}</td></tr>
{{end}}</table></div>{{end}}
{{if .Statements}}<h2 id="statements">Top statements (pg_stat_statements over the run)</h2>
<div class="scroll"><table><tr><th class="l">run</th><th class="l">statement</th><th class="l">key operations</th><th>calls</th><th>plan ms/call</th><th>exec ms/call</th><th>total ms</th><th>shared blks</th><th>temp blks</th></tr>
{{range .Statements}}<tr><td class="l">{{.Run}}</td><td class="l"><code>{{.Query}}</code></td><td class="l">{{.Ops}}</td><td>{{.Calls}}</td><td>{{.PlanMean}}</td><td>{{.ExecMean}}</td><td>{{.TotalMs}}</td><td>{{.SharedBlks}}</td><td>{{.TempBlks}}</td></tr>
{{end}}</table></div>{{end}}
{{range .StmtNotes}}<p class="muted">{{.}}</p>
{{end}}`
