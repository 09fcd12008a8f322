package capacity

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/erplab/erplab/internal/apdex"
	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/results"
)

// Target is what a step must meet to be good.
type Target struct {
	// Apdex is the integral APDEX to reach, in (0, 1].
	Apdex float64
	// ErrorRate is the highest share of failed operations, a fraction
	// (0.01 = 1 %); 0 allows none, a negative value does not check.
	ErrorRate float64
	// P95 are the highest 95th percentiles of response time by
	// operation name.
	P95 map[string]time.Duration
	// GeneratorCPU is the share of the generator's cores
	// (Generator.Cores) at which erplab counts as saturated; 0 = 0.9.
	GeneratorCPU float64
}

// Validate checks the target. Errors, one line: APDEX outside (0, 1],
// an error rate of 100 % or more, a p95 limit <= 0.
func (t Target) Validate() error {
	if !(t.Apdex > 0 && t.Apdex <= 1) {
		return fmt.Errorf("--apdex must be in (0, 1], got %g", t.Apdex)
	}
	if t.ErrorRate >= 1 || math.IsNaN(t.ErrorRate) {
		return fmt.Errorf("--error-rate must be below 100 %%, got %g %%", 100*t.ErrorRate)
	}
	for op, d := range t.P95 {
		if d <= 0 {
			return fmt.Errorf("--p95 %s=%s: the limit must be > 0", op, d)
		}
	}
	return nil
}

// Outcome is the judgement of one step.
type Outcome string

// Outcomes. Generator, Server and DiskFull are hard stops: the step says
// nothing about the server's capacity.
const (
	OutcomeGood      Outcome = "good"
	OutcomeBad       Outcome = "bad"
	OutcomeGenerator Outcome = "load generator saturated"
	OutcomeServer    Outcome = "server failed"
	OutcomeDiskFull  Outcome = "disk full"
)

// Generator is what the executor measured of erplab itself during a
// step: its CPU in cores (CPU seconds per second of the step, NaN when
// unknown) and the cores it may use (GOMAXPROCS).
type Generator struct {
	CPU   float64
	Cores int
}

// Judgement is the verdict on one step.
type Judgement struct {
	Outcome Outcome
	// Apdex is the step's integral APDEX with its interval.
	Apdex compare.Interval
	// Straddles is true when the APDEX interval holds the target and
	// APDEX is the only criterion that decides the step.
	Straddles bool
	// Reasons are every criterion the step missed, e.g. "APDEX 0.74 <
	// 0.85", "errors 3.2 % > 1 %", "p95 post_invoice 812ms > 500ms",
	// "connections refused (53300 too many clients: 12)"; Detail the
	// first one (or why the step is a hard stop).
	Reasons []string
	Detail  string
	// GeneratorCPU is the generator's CPU in cores (NaN unknown).
	GeneratorCPU float64
	// softOnly: the only reasons are interval criteria (the APDEX target
	// and p95 limits); target is the target's APDEX, p95 and p95Limit the
	// limited operations' p95 and limits, ms (for pooling repeated
	// attempts).
	softOnly      bool
	target        float64
	p95, p95Limit map[string]float64
}

// Connection-refusal SQLSTATEs: too many clients (53300), connection
// exceptions (class 08), cannot connect now (57P03).
func refusedState(code string) bool {
	return code == "53300" || code == "57P03" || strings.HasPrefix(code, "08")
}

// Judge decides a step from its results document d, its estimates est
// (compare.Estimate of d), its resources (ResourcesOf d) and the
// generator's own CPU g. The order: a status other than "completed"
// (the server failed) or "failed" (every operation failed: judged by the
// criteria, as a step whose operations all time out), the generator
// saturated, then every target criterion.
func Judge(d *results.Document, est *compare.Estimates, res Resources, t Target, g Generator) Judgement {
	j := Judgement{Apdex: est.Integral, target: t.Apdex, GeneratorCPU: math.NaN()}
	if d.Status != results.StatusCompleted && d.Status.Kind() != results.StatusFailed {
		j.Outcome, j.Detail = OutcomeServer, string(d.Status)
		j.Reasons = []string{string(d.Status)}
		return j
	}
	if gen, why := generatorSaturated(res, t, g); gen {
		j.Outcome, j.Detail, j.GeneratorCPU = OutcomeGenerator, why, g.CPU
		j.Reasons = []string{why}
		return j
	}
	j.GeneratorCPU = g.CPU
	var refused int64
	refusedBy := map[string]int64{}
	for _, op := range d.Operations {
		for code, n := range op.ErrorsBySQLState {
			if refusedState(code) {
				refused += n
				refusedBy[code] += n
			}
		}
	}
	apdexMissed := d.Integral.NS() || est.Integral.Value < t.Apdex
	if apdexMissed {
		if d.Integral.NS() {
			j.Reasons = append(j.Reasons, "APDEX NS (no samples)")
		} else {
			j.Reasons = append(j.Reasons, fmt.Sprintf("APDEX %s < %s", fmtApdex(est.Integral.Value), fmtApdex(t.Apdex)))
		}
	}
	if refused > 0 {
		codes := make([]string, 0, len(refusedBy))
		for c, n := range refusedBy {
			codes = append(codes, fmt.Sprintf("%s: %d", c, n))
		}
		sort.Strings(codes)
		j.Reasons = append(j.Reasons, fmt.Sprintf("connections refused (%s)", strings.Join(codes, ", ")))
	}
	if t.ErrorRate >= 0 && d.Totals.Count > 0 {
		if r := float64(d.Totals.Errors) / float64(d.Totals.Count); r > t.ErrorRate {
			j.Reasons = append(j.Reasons, fmt.Sprintf("errors %.1f %% > %g %%", 100*r, 100*t.ErrorRate))
		}
	}
	ops := make([]string, 0, len(t.P95))
	for op := range t.P95 {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	hard := len(j.Reasons) // APDEX, refused connections, errors so far
	if apdexMissed {
		hard--
	}
	soft := est.Integral.Straddles(t.Apdex) // an interval holding its limit
	for _, op := range ops {
		limit := float64(t.P95[op]) / float64(time.Millisecond)
		p, ok := est.P95[op]
		if !ok || math.IsNaN(p.Value) {
			continue
		}
		if j.p95 == nil {
			j.p95, j.p95Limit = map[string]float64{}, map[string]float64{}
		}
		j.p95[op], j.p95Limit[op] = p.Value, limit
		soft = soft || p.Straddles(limit)
		if p.Value > limit {
			j.Reasons = append(j.Reasons, fmt.Sprintf("p95 %s %s > %s", op, results.FormatMs(p.Value), t.P95[op]))
		}
	}
	// Only interval criteria decide (no refused connections, no error
	// rate over its limit, samples): one whose interval holds its limit
	// makes the step worth repeating.
	j.softOnly = hard == 0 && !d.Integral.NS()
	j.Straddles = j.softOnly && soft
	if len(j.Reasons) == 0 {
		j.Outcome = OutcomeGood
		return j
	}
	j.Outcome, j.Detail = OutcomeBad, j.Reasons[0]
	return j
}

// generatorSaturated applies the rule of the package doc: erplab's own
// CPU at GeneratorCPU (0.9) of its cores, or a host whose CPUs are busy
// (>= 95 %) with erplab using a quarter of them or more, and more than
// the server.
func generatorSaturated(res Resources, t Target, g Generator) (bool, string) {
	limit := t.GeneratorCPU
	if limit == 0 {
		limit = 0.9
	}
	if g.Cores > 0 && !math.IsNaN(g.CPU) && g.CPU >= limit*float64(g.Cores) {
		return true, fmt.Sprintf("load generator saturated: erplab used %.2f of its %d cores", g.CPU, g.Cores)
	}
	if res.HostBusy != nil && res.ErplabCPU != nil && res.ServerCPU != nil &&
		*res.HostBusy >= 95 && *res.ErplabCPU >= 25 && *res.ErplabCPU > *res.ServerCPU {
		return true, fmt.Sprintf("load generator saturated: host CPU busy %.0f %%, erplab %.0f %% > server %.0f %%", *res.HostBusy, *res.ErplabCPU, *res.ServerCPU)
	}
	return false, ""
}

// fmtApdex prints an APDEX value as erplab does (two decimals, truncated).
func fmtApdex(v float64) string { return apdex.FormatValue(v) }
