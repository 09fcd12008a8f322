package experiment

import (
	"fmt"
	"math"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/workload"
)

// MinPercentileSamples is the fewest executions a run whose p95 is more
// than the run's slowest execution (the 95th percentile of fewer than 20
// values is their maximum).
const MinPercentileSamples = 20

// Plan is what an experiment can decide, computed from its configuration
// alone before the first run (erplab ab prints it; --dry-run prints only
// it): the rounds a side, the running order and, per comparison, its
// primary rows with the smallest p-value each can reach.
type Plan struct {
	// Rounds is the runs of each configuration; Comparisons the
	// comparisons (variants, or --aa's N); Runs all runs; RunLength one
	// run's expected wall time (load profile + RunOverhead; 0 for a
	// workload that drives its own load).
	Rounds, Comparisons, Runs int
	RunLength                 time.Duration
	// Order is the running order of the first rounds by configuration
	// name, e.g. "baseline proxy proxy baseline".
	Order, OrderName string
	// RoundsFrom says where Rounds came from, e.g. "--rounds" (set by the
	// caller; printed when not empty).
	RoundsFrom string
	Alpha      float64
	// Variants has one entry per comparison with the baseline (one for
	// all A/A comparisons, named AAName).
	Variants []VariantPlan

	mix      string             // --mix, for the proposals
	load     loadtest.Options   // the load, for the proposals
	workload string             // the workload's name
	share    map[string]float64 // opShares
}

// VariantPlan is the plan of one comparison: its primary rows, who
// declared them and Holm's family size K (the number of primary rows).
type VariantPlan struct {
	Name, Source string
	K            int
	Rows         []RowPlan
	// AA is set for the A/A comparisons (--primary takes no VARIANT=).
	AA bool
}

// RowPlan is one primary row's prospect.
type RowPlan struct {
	Key compare.Key
	// Executions is the expected number of scored executions a run of the
	// row's operation (all operations for the integral): an upper bound,
	// as if operations took no time (VU time after the warm-up over the
	// mean think time, times the operation's share of the mix). NaN when
	// unknown (a row of no operation, a driven workload, the open model);
	// +Inf without think time.
	Executions float64
	// Constant: the row's per-round values can be the same within each
	// side, so its only p-value is the permutation test's
	// (compare.SeparatedP): an operation's APDEX (every execution of a
	// run in one APDEX zone gives exactly 1, 0.5 or 0), the integral
	// APDEX or an error rate over few executions.
	Constant bool
	// MinP is the smallest two-sided p-value the row's test reaches with
	// the plan's rounds a side: 1 with one round, compare.SeparatedP for
	// a Constant row, 0 for Welch's t (no floor).
	MinP float64
	// Decidable: MinP <= alpha/K (Holm's first step) and the row's
	// operation runs at all.
	Decidable bool
	// Rounds is the fewest rounds a side (2 to compare.MaxRoundsHint)
	// with which MinP reaches alpha/K; 0 when none does.
	Rounds int
	// Resolution is, for an APDEX row, the smallest change of the mean
	// APDEX over the rounds that the runs' own sampling lets Welch's t
	// resolve at alpha/K: max(1/(2·Executions), t·√(0.5/(Executions·n)))
	// with the binomial worst case (score variance 1/4 per execution) and
	// t Student's quantile at 1-alpha/(2K), 2n-2 degrees of freedom; a
	// lower bound, since runs vary more than their executions do. NaN
	// otherwise.
	Resolution float64
	// Missing: the row is an operation's and the workload has no such
	// operation (a remedy's declared row on another workload).
	Missing bool
	// Needs is, for a quantile row whose run has fewer executions than
	// its quantile needs to be tested (compare.QuantileExecutions: 20 for
	// a p95), that number; compare will not test the row. 0 otherwise.
	Needs int64
}

// opMetrics are the metrics of an operation's rows.
var opMetrics = map[string]bool{"apdex": true, "p50_ms": true, "p95_ms": true, "p99_ms": true, "per_second": true, "error_pct": true}

// NewPlan computes the plan of cfg (no server: cfg.Cluster is unused).
// cfg.Rounds must be set (ab computes the default from --budget before);
// aa > 0 plans --aa N comparisons of the baseline against itself with
// cfg.AAPrimary. Errors: a remedy's primary row that does not parse, a
// --mix the workload refuses.
func NewPlan(cfg Config, aa int) (*Plan, error) {
	alpha := cfg.Compare.Alpha
	if alpha == 0 {
		alpha = compare.DefaultAlpha
	}
	p := &Plan{Rounds: max(cfg.Rounds, 1), Alpha: alpha, RunLength: RunLength(cfg.Load) + cfg.Age, mix: cfg.Load.Mix, Comparisons: len(cfg.Variants), load: cfg.Load}
	vs := cfg.Variants
	if aa > 0 {
		vs, p.Comparisons = []Variant{{Name: AAName, Primary: cfg.AAPrimary}}, aa
	}
	if _, driven := cfg.Load.Workload.(workload.Driver); driven {
		p.RunLength = 0 // as long as what it replays
	}
	if cfg.Load.Workload != nil {
		p.workload = cfg.Load.Workload.Name()
	}
	p.order(cfg, vs, aa)
	var err error
	if p.share, err = opShares(cfg.Load); err != nil {
		return nil, err
	}
	scored := ScoredExecutions(cfg.Load)
	for _, v := range vs {
		vp, err := p.variant(v, aa > 0, scored)
		if err != nil {
			return nil, err
		}
		p.Variants = append(p.Variants, vp)
	}
	return p, nil
}

// order sets p's Runs, OrderName and Order (the first two rounds by
// configuration name) for variants vs, aa times (once without --aa).
func (p *Plan) order(cfg Config, vs []Variant, aa int) {
	names := []string{BaselineName}
	for _, v := range vs {
		names = append(names, v.Name)
	}
	p.Runs = p.Rounds * len(names) * max(aa, 1)
	p.OrderName = "blocked"
	if cfg.Balanced {
		p.OrderName = "balanced"
	} else if cfg.Interleave {
		p.OrderName = "interleaved"
	}
	var seq []string
	for _, s := range Order(len(names), min(p.Rounds, 2), cfg.Balanced, cfg.Interleave) {
		seq = append(seq, names[s[0]])
	}
	p.Order = strings.Join(seq, " ")
	if p.Rounds > 2 {
		p.Order += " ..."
	}
}

// variant is the plan of v's comparison with the baseline, scored the
// executions a run of all operations.
func (p *Plan) variant(v Variant, aa bool, scored float64) (VariantPlan, error) {
	keys, src, err := Primaries(v)
	if err != nil {
		return VariantPlan{}, err
	}
	vp := VariantPlan{Name: v.Name, Source: src, K: len(keys), AA: aa}
	for _, k := range keys {
		ex := math.NaN()
		f, isOp := p.share[k.Subject]
		switch {
		case p.share != nil && k.Subject == compare.IntegralApdex.Subject:
			ex = scored
		case isOp && f == 0:
			ex = 0 // not a NaN from +Inf·0: the mix never runs it
		case isOp:
			ex = scored * f
		}
		r := PlanRow(k, ex, p.Rounds, p.Alpha, vp.K)
		if p.share != nil && !isOp && k.Subject != compare.IntegralApdex.Subject && opMetrics[k.Metric] {
			r.Missing, r.Decidable, r.Rounds = true, false, 0
		}
		vp.Rows = append(vp.Rows, r)
	}
	return vp, nil
}

// PlanRow is the prospect of primary row k over rounds a side in a Holm
// family of family rows at alpha, ex the expected executions a run of
// its operation (NaN unknown).
func PlanRow(k compare.Key, ex float64, rounds int, alpha float64, family int) RowPlan {
	r := RowPlan{Key: k, Executions: ex, Resolution: math.NaN()}
	few := ex < MinPercentileSamples // false for NaN and +Inf
	switch k.Metric {
	case "apdex":
		r.Constant = k.Subject != compare.IntegralApdex.Subject || few
		if ex > 0 && !math.IsInf(ex, 1) {
			r.Resolution = ApdexResolution(ex, rounds, alpha, family)
		}
	case "error_pct":
		r.Constant = few || math.IsNaN(ex)
	}
	r.MinP = MinP(rounds, r.Constant)
	level := alpha / float64(max(family, 1))
	r.Decidable = r.MinP <= level && ex != 0
	for n := 2; n <= compare.MaxRoundsHint && r.Rounds == 0; n++ {
		if MinP(n, r.Constant) <= level {
			r.Rounds = n
		}
	}
	if need := compare.QuantileExecutions(k.Metric); ex < float64(need) { // false for NaN and +Inf
		r.Needs, r.Decidable, r.Rounds = need, false, 0
	}
	return r
}

// MinP is the smallest two-sided p-value of a row over n rounds a side
// (compare's tests over rounds): 1 with fewer than 2 rounds (one round
// each decides nothing), the exact permutation p-value of completely
// separated sides, 2/C(2n, n), for a row constant within each side, and
// 0 for Welch's t, which has no floor.
func MinP(n int, constant bool) float64 {
	switch {
	case n < 2:
		return 1
	case constant:
		return compare.SeparatedP(n, n)
	}
	return 0
}

// ApdexResolution is the smallest change of an APDEX averaged over n
// rounds a side of ex executions each that Welch's t can resolve at
// alpha/family: the granularity 1/(2·ex) of one run's APDEX, or t·se
// with se = √(2·(1/4)/(ex·n)) (an execution scores 0, ½ or 1: its
// variance is at most 1/4) and t Student's quantile at 1-alpha/(2·family)
// with 2n-2 degrees of freedom, whichever is larger. NaN for n < 2 or ex
// <= 0.
func ApdexResolution(ex float64, n int, alpha float64, family int) float64 {
	if n < 2 || !(ex > 0) {
		return math.NaN()
	}
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(2*n - 2)}
	q := t.Quantile(1 - alpha/(2*float64(max(family, 1))))
	return max(1/(2*ex), q*math.Sqrt(0.5/(ex*float64(n))))
}

// RunLength is one run's expected wall time: its load profile (the
// longer of the closed and open profiles) plus RunOverhead.
func RunLength(load loadtest.Options) time.Duration {
	var closed, open time.Duration
	for _, s := range load.Stages {
		closed += s.Duration
	}
	for _, s := range load.Rate {
		open += s.Duration
	}
	return RunOverhead + max(closed, open)
}

// VUSeconds is the integral of the VU count of stages over the run from
// time from on (each stage ramps linearly from the previous target, the
// first from 0, as engine.TargetAt), in VU-seconds.
func VUSeconds(stages []engine.Stage, from time.Duration) float64 {
	var sum float64
	var at time.Duration
	prev := 0.0
	for _, s := range stages {
		end := at + s.Duration
		target := float64(s.Target)
		if end > from && s.Duration > 0 {
			lo := max(at, from)
			vu := func(t time.Duration) float64 {
				return prev + (target-prev)*float64(t-at)/float64(s.Duration)
			}
			sum += (vu(lo) + vu(end)) / 2 * (end - lo).Seconds()
		}
		at, prev = end, target
	}
	return sum
}

// ScoredExecutions is the expected number of executions a run scores
// (after the warm-up) in the closed model, as if operations took no
// time: VUSeconds after Warmup over the mean think time; +Inf without
// think time, NaN for the open model (Rate) or a workload that drives its
// own load.
func ScoredExecutions(load loadtest.Options) float64 {
	if _, driven := load.Workload.(workload.Driver); driven || load.Workload == nil || len(load.Rate) > 0 {
		return math.NaN()
	}
	vs := VUSeconds(load.Stages, load.Warmup)
	think := load.Think.Mean().Seconds()
	if think <= 0 {
		if vs == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return vs / think
}

// opShares is each operation's expected share of a run's executions:
// over the roles (load.Mix's single role when set) weighted by their
// share of the VUs, the operation's weight over the role's total. nil
// when the workload drives its own load or is unset.
func opShares(load loadtest.Options) (map[string]float64, error) {
	w := load.Workload
	if _, driven := w.(workload.Driver); driven || w == nil {
		return nil, nil
	}
	roles := w.Roles()
	if load.Mix != "" {
		var err error
		if roles, err = workload.OverrideMix(w, load.Mix); err != nil {
			return nil, err
		}
	}
	out := map[string]float64{}
	for _, op := range w.Operations() {
		out[op.Name] = 0
	}
	var shares float64
	for _, r := range roles {
		shares += r.Share
	}
	for _, r := range roles {
		var total float64
		for _, wt := range r.Mix {
			total += wt
		}
		if total <= 0 || shares <= 0 {
			continue
		}
		for name, wt := range r.Mix {
			out[name] += r.Share / shares * wt / total
		}
	}
	return out, nil
}

// fmtCount prints an expected count: "~4", "~1,200", "unbounded".
func fmtCount(x float64) string {
	switch {
	case math.IsInf(x, 1):
		return "unbounded (no think time)"
	case x >= 10:
		return fmt.Sprintf("~%.0f", x)
	}
	return fmt.Sprintf("~%.2g", x)
}

// Lines is the plan as ab prints it before the first run: the rounds,
// order and runs; per comparison its primary rows and what each can
// reach; then one line per primary row that cannot be decided, saying
// why and the change that would decide it.
func (p *Plan) Lines() []string {
	from := ""
	if p.RoundsFrom != "" {
		from = " (" + p.RoundsFrom + ")"
	}
	runs := fmt.Sprintf("%d runs", p.Runs)
	if p.RunLength > 0 {
		runs += fmt.Sprintf(" of ~%s, ~%s in all", p.RunLength.Round(time.Second), (p.RunLength * time.Duration(p.Runs)).Round(time.Second))
	}
	lines := []string{fmt.Sprintf("plan: %d round%s a side%s, %s order %s; %s; executions a run are upper bounds (operations taking no time)",
		p.Rounds, plural(p.Rounds), from, p.OrderName, p.Order, runs)}
	var undecided []string
	for _, v := range p.Variants {
		var rows []string
		missing := map[string][]string{} // by operation
		var ops []string
		for _, r := range v.Rows {
			rows = append(rows, r.Key.String()+" "+r.brief())
			switch {
			case r.Missing:
				if missing[r.Key.Subject] == nil {
					ops = append(ops, r.Key.Subject)
				}
				missing[r.Key.Subject] = append(missing[r.Key.Subject], r.Key.String())
			case !r.Decidable:
				undecided = append(undecided, p.undecided(v, r))
			}
		}
		for _, op := range ops {
			undecided = append(undecided, p.missingLine(v, op, missing[op]))
		}
		name := v.Name
		if v.AA {
			name = fmt.Sprintf("A/A (%s)", v.Name)
		}
		lines = append(lines, fmt.Sprintf("plan: %s: Holm over %d primary row%s (%s) at %g/%d: %s",
			name, v.K, plural(v.K), v.Source, p.Alpha, v.K, strings.Join(rows, "; ")))
	}
	return append(lines, undecided...)
}

// brief is what a row can reach, e.g. "Welch's t (no floor), ~600
// executions a run" or "smallest p 0.33 (constant within each side)".
func (r RowPlan) brief() string {
	if r.Missing {
		return "missing"
	}
	if r.Needs > 0 {
		return fmt.Sprintf("%s executions a run, not tested: a %s needs %d", fmtCount(r.Executions), strings.TrimSuffix(r.Key.Metric, "_ms"), r.Needs)
	}
	var parts []string
	switch {
	case r.MinP == 0:
		parts = append(parts, "Welch's t (no floor)")
	case r.Constant && r.MinP < 1:
		parts = append(parts, fmt.Sprintf("smallest p %.2g when constant within each side", r.MinP))
	default:
		parts = append(parts, fmt.Sprintf("smallest p %.2g", r.MinP))
	}
	if !math.IsNaN(r.Executions) {
		parts = append(parts, fmtCount(r.Executions)+" executions a run")
	}
	if !math.IsNaN(r.Resolution) {
		parts = append(parts, fmt.Sprintf("resolves APDEX changes >= %.2f", r.Resolution))
	}
	return strings.Join(parts, ", ")
}

// undecided is the one line of row r of v that cannot be decided: why,
// and the changes that would decide it.
func (p *Plan) undecided(v VariantPlan, r RowPlan) string {
	op := r.Key.Subject
	_, isOp := p.share[op]
	scope := v.Name + "="
	if v.AA {
		scope = ""
	}
	if r.Executions == 0 {
		return fmt.Sprintf("plan: %s: %s cannot be decided: the load never runs %s; give it a weight (--mix %s=1)", v.Name, r.Key, op, op)
	}
	if r.Needs > 0 {
		line := fmt.Sprintf("plan: %s: %s cannot be decided: %s executions a run, a %s needs %d", v.Name, r.Key, fmtCount(r.Executions), strings.TrimSuffix(r.Key.Metric, "_ms"), r.Needs)
		if fix := p.moreExecutions(op, r.Executions, r.Needs); fix != "" {
			line += "; use " + fix
		}
		return line
	}
	why := fmt.Sprintf("%d round%s a side decides nothing", p.Rounds, plural(p.Rounds))
	if p.Rounds >= 2 {
		why = fmt.Sprintf("%d rounds a side (smallest p %.2g > %g/%d", p.Rounds, r.MinP, p.Alpha, v.K)
		if r.Key.Metric == "apdex" && r.Key.Subject != compare.IntegralApdex.Subject {
			why += " when each side's executions stay in one APDEX zone"
		}
		why += ")"
	}
	if !math.IsNaN(r.Executions) {
		why = fmtCount(r.Executions) + " executions a run, " + why
	}
	var fix []string
	if r.Rounds > p.Rounds {
		fix = append(fix, fmt.Sprintf("--rounds %d", r.Rounds))
	}
	p95 := compare.Key{Subject: op, Metric: "p95_ms"}
	if r.Key.Metric == "apdex" && isOp && !v.has(p95) && p.Rounds >= 2 && !(r.Executions < float64(compare.QuantileExecutions(p95.Metric))) {
		fix = append(fix, "--primary "+scope+p95.String())
	}
	if isOp && r.Executions < MinPercentileSamples {
		more := "--users, --duration"
		if p.share[op] < 1 {
			more += ", --mix " + op + "=1"
		}
		fix = append(fix, fmt.Sprintf("more executions of %s (%s)", op, more))
	}
	line := fmt.Sprintf("plan: %s: %s cannot be decided: %s", v.Name, r.Key, why)
	if len(fix) > 0 {
		line += "; use " + strings.Join(fix, ", or ")
	}
	if r.Key.Metric == "apdex" && v.decides(p95) {
		line += fmt.Sprintf(" (%s, also primary, can decide the verdict)", p95)
	}
	return line
}

// missingLine is the one line of v's primary rows keys of operation op,
// which the workload lacks: they will be missing, and when they are all
// of v's rows, v's primary verdict can only be n/a.
func (p *Plan) missingLine(v VariantPlan, op string, keys []string) string {
	scope := v.Name + "="
	if v.AA {
		scope = ""
	}
	what := "the row"
	if len(keys) > 1 {
		what = "the rows"
	}
	then := what + " will be missing and cannot decide the verdict"
	if len(keys) == len(v.Rows) {
		then = what + " will be missing and the primary verdict can only be n/a"
	}
	return fmt.Sprintf("plan: %s: %s: workload %s has no operation %s, so %s; use --primary %sSUBJECT[:METRIC]", v.Name, strings.Join(keys, ", "), p.workload, op, then, scope)
}

// moreExecutions is the changes of the load that give operation op need
// executions a run where it has ex (0 < ex < need): a longer --duration
// or more --users when the load is --users held for --duration, and
// --mix op=1 when the whole load would run need; "" when none applies.
func (p *Plan) moreExecutions(op string, ex float64, need int64) string {
	var fix []string
	st, share := p.load.Stages, p.share[op]
	think := p.load.Think.Mean().Seconds()
	if n := len(st); n >= 2 && st[n-1].Target == st[n-2].Target && st[n-1].Target > 0 && think > 0 && share > 0 {
		rate := share * float64(st[n-1].Target) / think // executions a second of the hold
		d := st[n-1].Duration + time.Duration(math.Ceil((float64(need)-ex)/rate))*time.Second
		fix = append(fix, "--duration "+d.String(), fmt.Sprintf("--users %d", int(math.Ceil(float64(st[n-1].Target)*float64(need)/ex))))
	}
	if share > 0 && share < 1 && ex/share >= float64(need) {
		fix = append(fix, "--mix "+op+"=1")
	}
	return strings.Join(fix, ", or ")
}

// has reports whether k is one of v's primary rows.
func (v VariantPlan) has(k compare.Key) bool {
	for _, r := range v.Rows {
		if r.Key == k {
			return true
		}
	}
	return false
}

// decides reports whether k is one of v's primary rows and decidable.
func (v VariantPlan) decides(k compare.Key) bool {
	for _, r := range v.Rows {
		if r.Key == k && r.Decidable {
			return true
		}
	}
	return false
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
