package compare

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
)

// Statement comparison bounds: a statement is compared when it ran at
// least minStatementCalls times on each side; at most maxSlower are
// listed.
const (
	minStatementCalls = 10
	maxSlower         = 10
)

// StatementChange is one statement that got slower from A to B: its mean
// planning and execution time per call on each side, from the runs'
// pg_stat_statements deltas (extra.observations.statements.top), matched
// across runs by the fingerprint of its normalized text (queryids differ
// between servers: they hash table OIDs).
type StatementChange struct {
	Query      string  `json:"query"`
	CallsA     int64   `json:"calls_a"`
	CallsB     int64   `json:"calls_b"`
	PlanMsA    float64 `json:"plan_ms_per_call_a"`
	PlanMsB    float64 `json:"plan_ms_per_call_b"`
	ExecMsA    float64 `json:"exec_ms_per_call_a"`
	ExecMsB    float64 `json:"exec_ms_per_call_b"`
	SlowerPct  float64 `json:"slower_pct"`
	AddedMs    float64 `json:"added_ms"` // (per call B - per call A) x calls B
	Operations string  `json:"operations,omitempty"`
}

type stmtSide struct {
	query      string
	calls      int64
	plan, exec float64
	ops        map[string]bool
}

// statementSides sums the top statements of docs by key.
func statementSides(ds []*results.Document) map[string]*stmtSide {
	out := map[string]*stmtSide{}
	for _, d := range ds {
		o, err := Observations(d)
		if err != nil || o == nil || o.Statements == nil {
			continue
		}
		for _, s := range o.Statements.Top {
			k := sampler.StatementKey(s.Query)
			x := out[k]
			if x == nil {
				x = &stmtSide{query: s.Query, ops: map[string]bool{}}
				out[k] = x
			}
			x.calls += s.Calls
			x.plan += s.PlanMs
			x.exec += s.ExecMs
			for op := range s.Operations {
				x.ops[op] = true
			}
		}
	}
	return out
}

// slowerStatements lists the statements whose mean time per call (plan +
// exec) rose by more than minEffect from as to bs, most added time first.
func slowerStatements(as, bs []*results.Document, minEffect float64) []StatementChange {
	a, b := statementSides(as), statementSides(bs)
	var out []StatementChange
	for k, y := range b {
		x, ok := a[k]
		if !ok || x.calls < minStatementCalls || y.calls < minStatementCalls {
			continue
		}
		ta, tb := (x.plan+x.exec)/float64(x.calls), (y.plan+y.exec)/float64(y.calls)
		if ta <= 0 || tb <= ta*(1+minEffect) {
			continue
		}
		ops := make([]string, 0, len(y.ops))
		for op := range y.ops {
			ops = append(ops, op)
		}
		sort.Strings(ops)
		out = append(out, StatementChange{Query: strings.Join(strings.Fields(y.query), " "), CallsA: x.calls, CallsB: y.calls,
			PlanMsA: x.plan / float64(x.calls), PlanMsB: y.plan / float64(y.calls),
			ExecMsA: x.exec / float64(x.calls), ExecMsB: y.exec / float64(y.calls),
			SlowerPct: 100 * (tb/ta - 1), AddedMs: (tb - ta) * float64(y.calls), Operations: strings.Join(ops, ", ")})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].AddedMs != out[j].AddedMs {
			return out[i].AddedMs > out[j].AddedMs
		}
		return out[i].Query < out[j].Query
	})
	if len(out) > maxSlower {
		out = out[:maxSlower]
	}
	return out
}

// writeSlower writes the statements that got slower, one line each.
func (c *Comparison) writeSlower(w io.Writer, markdown bool) {
	if len(c.Slower) == 0 {
		return
	}
	fmt.Fprintf(w, "\nstatements that got slower (pg_stat_statements, mean per call, plan + exec; one delta per run, no interval):\n")
	if markdown {
		fmt.Fprintf(w, "\n| statement | key operations | calls A / B | plan ms A → B | exec ms A → B | slower | added ms |\n|---|---|---:|---:|---:|---:|---:|\n")
	}
	for _, s := range c.Slower {
		q := s.Query
		if len(q) > 100 {
			q = q[:100] + "…"
		}
		if markdown {
			fmt.Fprintf(w, "| `%s` | %s | %d / %d | %.3f → %.3f | %.3f → %.3f | +%.0f %% | %.0f |\n", strings.ReplaceAll(q, "`", "'"), mdCell(s.Operations),
				s.CallsA, s.CallsB, s.PlanMsA, s.PlanMsB, s.ExecMsA, s.ExecMsB, s.SlowerPct, s.AddedMs)
			continue
		}
		fmt.Fprintf(w, "  +%.0f %%  plan %.3f -> %.3f ms, exec %.3f -> %.3f ms per call (calls %d / %d, +%.0f ms in all)  %s  [%s]\n",
			s.SlowerPct, s.PlanMsA, s.PlanMsB, s.ExecMsA, s.ExecMsB, s.CallsA, s.CallsB, s.AddedMs, q, s.Operations)
	}
}

// floorStmtMs is the absolute floor of the minimum effect of a planning
// or execution time per execution (ms).
const floorStmtMs = 0.1

// statementSpecs are the rows of the database time per execution of
// each key operation, from the runs' pg_stat_statements deltas
// attributed to the operations by the sampler (by the texts the engine
// saw each operation send, else by sightings;
// extra.observations.statements.operations): plan_ms (when every run
// tracked planning; a run without statement figures, its closing
// snapshot failed, has no value in the rows) and exec_ms, the time summed over the operation's
// statements divided by its executions (warm-up included, as the delta
// is). An operation gets rows when some run of each side attributed
// statements to it. One delta per run: with one run per side the rows
// are untested; with rounds they are tested over the rounds.
func statementSpecs(ra, rb []*runData) []spec {
	plan := true
	seen := map[string]bool{}
	var names []string
	sideHas := map[string]int{}
	for i, side := range [][]*runData{ra, rb} {
		for _, rd := range side {
			if rd.stmts == nil || rd.stmts.Count == 0 {
				continue // no figures (the closing snapshot failed): no value in this run
			}
			plan = plan && rd.stmts.TrackPlanning
			for _, o := range rd.stmts.Operations {
				if o.Operation == "" {
					continue
				}
				if !seen[o.Operation] {
					seen[o.Operation] = true
					names = append(names, o.Operation)
				}
				sideHas[o.Operation] |= 1 << i
			}
		}
	}
	var specs []spec
	for _, name := range names {
		if sideHas[name] != 3 {
			continue
		}
		metrics := []string{"exec_ms"}
		if plan {
			metrics = []string{"plan_ms", "exec_ms"}
		}
		for _, metric := range metrics {
			specs = append(specs, spec{
				row:      Row{Section: "statements", Subject: name, Metric: metric, Unit: "ms", Direction: LowerBetter},
				floor:    floorStmtMs,
				bootNote: "one pg_stat_statements delta per run: not resampled",
				stat:     func(rd *runData, _ *sel) float64 { return opStatementMs(rd, name, metric == "plan_ms") },
			})
		}
	}
	return specs
}

// opStatementMs is operation name's planning (plan) or execution time
// per execution in run rd, NaN when the run has no statements attributed
// to it or no executions.
func opStatementMs(rd *runData, name string, plan bool) float64 {
	op := findOp(rd.doc, name)
	if rd.stmts == nil || rd.stmts.Count == 0 || op == nil || op.Count+op.WarmupCount <= 0 {
		return nan
	}
	for _, o := range rd.stmts.Operations {
		if o.Operation != name {
			continue
		}
		ms := o.ExecMs
		if plan {
			ms = o.PlanMs
		}
		return ms / float64(op.Count+op.WarmupCount)
	}
	return nan
}
