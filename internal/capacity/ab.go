package capacity

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/experiment"
	"github.com/erplab/erplab/internal/remedy"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/safefile"
	"github.com/erplab/erplab/internal/workload"
)

// ABFormat and ABSchemaVersion name the capacity A/B document
// (docs/results-format.md, "The capacity A/B document").
const (
	ABFormat        = "erplab-capacity-ab"
	ABSchemaVersion = 1
)

// ABConfig is a capacity A/B experiment: the same search for the
// baseline and every variant, on one server, each search from a fresh
// copy of the template database with its variant's remedies applied.
type ABConfig struct {
	// Search is the search every side runs. Its Base.Workload, DSN and
	// Out are set per search (the workload from Experiment.NewWorkload
	// with the remedies' flags; Base.SkipSetup: the data is the
	// template's).
	Search Config
	// Experiment gives the server (Cluster, with its Template built),
	// NewWorkload, Flags, Variants, Rounds (>= 1), the order (Balanced,
	// Interleave), remedy Params and Cold; its Load and OutDir are not
	// used.
	Experiment experiment.Config
	// Out is the A/B document; "" = ./erplab-results/<time>-capacity-ab-
	// <workload>.json. Each search's capacity document is
	// <Out without .json>-searches/<side>-<round>.json (its steps beside
	// it, in <...>-steps/).
	Out string
	// Alpha is the level of the verdict's rank-sum test (0 =
	// compare.DefaultAlpha).
	Alpha float64
}

// ABDocument is the file of a capacity A/B experiment: every search of
// every side (its steps without their run documents, which stay in the
// search's own files), the APDEX of the sides at the loads both ran, and
// a verdict per variant. It is rewritten atomically after every search.
type ABDocument struct {
	Format      string    `json:"format"`
	Schema      int       `json:"schema"`
	Version     string    `json:"erplab_version"`
	CommandLine []string  `json:"command_line"`
	Workload    string    `json:"workload"`
	StartedAt   time.Time `json:"started_at"`
	EndedAt     time.Time `json:"ended_at,omitzero"`
	// Status is "running", then "completed", "interrupted" or
	// "failed: <why>"; Writer is the writing process (a "running"
	// document whose process is gone was killed: StatusText).
	Status string `json:"status"`
	Writer
	// Order is "balanced", "interleaved" or "blocked"; Rounds the
	// searches per side.
	Order  string     `json:"order"`
	Rounds int        `json:"rounds"`
	Model  string     `json:"model"`
	Unit   string     `json:"unit"`
	Target TargetJSON `json:"target"`
	Search SearchJSON `json:"search"`
	// Sides are the baseline, then the variants.
	Sides []ABSide `json:"sides"`
	// Common are the loads every side ran a judged step at.
	Common []CommonLoad `json:"common_loads"`
	// Verdicts compare each variant with the baseline.
	Verdicts []ABVerdict `json:"verdicts"`
	// ForeignLoad are the searches, of every side, whose first bad step
	// was limited by other processes' load (Document.ForeignLimited),
	// e.g. "baseline round 2 (other processes 98 %)".
	ForeignLoad []string `json:"foreign_load_rounds,omitempty"`
}

// ABSide is one configuration: its remedies and its searches by round.
type ABSide struct {
	Name     string     `json:"name"`
	Remedies []string   `json:"remedies"`
	Searches []ABSearch `json:"searches"`
	// Capacity spans the capacities of the finished searches (nil when
	// none finished).
	Capacity *Spread `json:"capacity,omitempty"`
	// Limits are the searches' limiting-resource verdicts, by round.
	Limits []string `json:"limits,omitempty"`
}

// ABSearch is one search: its round, its place in the running order
// (1-based), its capacity document's path, the remedies' records and the
// document itself without the steps' run documents.
type ABSearch struct {
	Round    int             `json:"round"`
	Seq      int             `json:"seq"`
	Path     string          `json:"path"`
	Remedies []remedy.Record `json:"remedies"`
	Doc      *Document       `json:"search"`
}

// Spread is the median, lowest and highest of N values; AtLeast says
// some of them are lower bounds (the search's maximum was good).
type Spread struct {
	Median  float64 `json:"median"`
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	N       int     `json:"n"`
	AtLeast bool    `json:"at_least,omitempty"`
}

// CommonLoad is one load every side ran: each side's APDEX there.
type CommonLoad struct {
	Load  float64     `json:"load"`
	Sides []SideApdex `json:"sides"`
}

// SideApdex is a side's integral APDEX at one load: the last attempt of
// each search that ran it (with its compare.Estimate interval), every
// attempt of each (Attempts, parallel to Rounds, in run order: a step
// repeated because its interval held the target has two), and the
// median over the last attempts.
type SideApdex struct {
	Name     string    `json:"name"`
	Rounds   []int     `json:"rounds"`
	Apdex    []Score   `json:"apdex"`
	Attempts [][]Score `json:"attempts,omitempty"`
	Median   float64   `json:"median"`
}

// Text is the side's APDEX per round with its label, every attempt:
// "r1 0.91 [0.90-0.93], r2 0.84 [0.80-0.88] then 0.86 [0.84-0.88]"
// (a round that did not run the load is absent, its label with it).
func (s SideApdex) Text() string {
	var parts []string
	for k, r := range s.Rounds {
		var vals []string
		if k < len(s.Attempts) {
			for _, a := range s.Attempts[k] {
				vals = append(vals, a.String())
			}
		} else {
			vals = append(vals, s.Apdex[k].String())
		}
		parts = append(parts, fmt.Sprintf("r%d %s", r, strings.Join(vals, " then ")))
	}
	return strings.Join(parts, ", ")
}

// Verdicts of a capacity comparison.
const (
	ABBetter       = "better"
	ABWorse        = "worse"
	ABNoDifference = "no significant difference"
	ABInconclusive = "inconclusive"
)

// ABVerdict is a variant against the baseline (VerdictOf).
type ABVerdict struct {
	Variant  string  `json:"variant"`
	Baseline *Spread `json:"baseline,omitempty"`
	Capacity *Spread `json:"capacity,omitempty"`
	// Verdict is one of the AB* constants; Why its reason; P the exact
	// rank-sum p-value over rounds (absent when not tested).
	Verdict string   `json:"verdict"`
	Why     string   `json:"why,omitempty"`
	P       *float64 `json:"p,omitempty"`
	Line    string   `json:"line"`
	// ForeignLoad are the finished rounds of the two sides whose first
	// bad step was limited by other processes' load
	// (Document.ForeignLimited), e.g. "baseline round 2 (other processes
	// 98 %)": information only (a saturated host reads ~100 % on both
	// sides); the guard judges Starvation.
	ForeignLoad []string `json:"foreign_load_rounds,omitempty"`
	// Starvation is the noise guard of compare applied to the
	// capacities: each side's mean starvation at its searches' knees
	// (Document.KneeStarvation); nil when a finished search has none.
	Starvation *ABStarvation `json:"starvation,omitempty"`
}

// ABStarvation is the starvation of the two sides of a capacity A/B and
// the guard's judgement (compare.StarvationLimit): a better or worse
// verdict whose capacity ratio is within Limit, the more starved side
// carrying fewer users, reads "inconclusive: starvation differed".
type ABStarvation struct {
	A        float64 `json:"a"`
	B        float64 `json:"b"`
	Ratio    float64 `json:"ratio"`
	Limit    float64 `json:"limit_ratio"`
	Withheld bool    `json:"withheld,omitempty"`
}

// Line is the noise line, e.g. "noise: starvation (run delay per ms run
// at the knee) A 4.38 B 11.35, ratio 2.30: capacities within a factor
// 5.30 read inconclusive".
func (s *ABStarvation) Line() string {
	return fmt.Sprintf("noise: starvation (run delay per ms run at the knee) A %.2f B %.2f, ratio %.2f: a capacity change within a factor %.2f toward the less starved side reads inconclusive",
		s.A, s.B, s.Ratio, s.Limit)
}

// starvationOf is the mean knee starvation of the sides' searches; nil
// when a search has none.
func starvationOf(fa, fb []*Document) *ABStarvation {
	mean := func(ds []*Document) (float64, bool) {
		sum := 0.0
		for _, d := range ds {
			v, ok := d.KneeStarvation()
			if !ok {
				return 0, false
			}
			sum += v
		}
		return sum / float64(len(ds)), len(ds) > 0
	}
	a, okA := mean(fa)
	b, okB := mean(fb)
	if !okA || !okB {
		return nil
	}
	s := &ABStarvation{A: a, B: b}
	s.Ratio, s.Limit = compare.StarvationLimit(a, b)
	return s
}

// explains reports whether the starvation difference could explain a
// capacity change from a to b: the side carrying more users is the less
// starved one and max(b/a, a/b) is at most Limit.
func (s *ABStarvation) explains(a, b float64) bool {
	if s == nil || !(a > 0 && b > 0) || a == b {
		return false
	}
	if (b > a) != (s.B < s.A) {
		return false
	}
	return max(b/a, a/b) <= s.Limit
}

// RunAB runs the searches in the experiment's order (experiment.Order),
// each inside its variant (experiment.InVariant: template copy, remedies
// applied for the whole search and undone after it, also on failure and
// Ctrl-C), rewriting the A/B document after every search. It returns
// the document with nil; or with an error wrapping ErrInterrupted or
// ErrServerFailed (finished searches kept) or a remedy's error; or nil
// and an error when nothing could start (bad search, document exists).
func RunAB(ctx context.Context, cfg ABConfig, out io.Writer) (*ABDocument, error) {
	if cfg.Experiment.Cluster == nil {
		return nil, errors.New("capacity A/B: no server")
	}
	path, dir, w, err := cfg.Check(os.Geteuid() == 0)
	if err != nil {
		return nil, err
	}
	ec := cfg.Experiment
	all := append([]experiment.Variant{{Name: experiment.BaselineName}}, ec.Variants...)
	order := "blocked"
	switch {
	case ec.Balanced:
		order = "balanced"
	case ec.Interleave:
		order = "interleaved"
	}
	base := cfg.Search.Base
	doc := &ABDocument{Format: ABFormat, Schema: ABSchemaVersion, Version: base.Version, CommandLine: base.CommandLine,
		Workload: w.Name(), StartedAt: time.Now(), Status: "running", Writer: thisWriter(), Order: order, Rounds: ec.Rounds}
	for _, v := range all {
		s := ABSide{Name: v.Name, Remedies: []string{}}
		for _, r := range v.Remedies {
			s.Remedies = append(s.Remedies, r.String())
		}
		doc.Sides = append(doc.Sides, s)
	}
	perm := cmp.Or(base.OutMode, results.DefaultPerm)
	// The document's directory (opened by the rules Check judged it by)
	// and the searches' directory, held open: every file goes through
	// them.
	parent, name, err := openOut(cfg.Out, path)
	if err != nil {
		return nil, err
	}
	defer parent.Close()
	searches, err := parent.Dir(filepath.Base(dir), 0o755)
	if err != nil {
		return nil, fmt.Errorf("capacity A/B: searches directory: %w", err)
	}
	defer searches.Close()
	if err := doc.WriteIn(parent, name, perm); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "erplab capacity A/B: %d sides x %d round(s) (%s order), results %s (searches in %s)\n", len(all), ec.Rounds, order, path, dir)

	var runErr error
	schedule := experiment.Order(len(all), ec.Rounds, ec.Balanced, ec.Interleave)
	for seq, at := range schedule {
		v, round := all[at[0]], at[1]
		fmt.Fprintf(out, "\n=== capacity search: %s, round %d of %d (search %d of %d): %s\n", v.Name, round, ec.Rounds, seq+1, len(schedule), remedyText(doc.Sides[at[0]].Remedies))
		sc := cfg.Search
		sc.Out, sc.OutRoot = searchPath(dir, v.Name, round), searches
		var sdoc *Document
		recs, err := experiment.InVariant(ctx, ec, v, round, out, func(ctx context.Context, p experiment.Prepared) error {
			w, err := ec.NewWorkload(p.Target.Flags)
			if err != nil {
				return err
			}
			sc.Base.Workload, sc.Base.DSN, sc.Base.EnvGiven, sc.Base.Force, sc.Base.SkipSetup = w, p.Target.DSN, false, true, true
			sc.Base.Keep, sc.Base.OSUser = false, ""
			sdoc, err = Run(ctx, sc, out)
			return err
		})
		if sdoc != nil {
			doc.add(at[0], ABSearch{Round: round, Seq: seq + 1, Path: sc.Out, Remedies: recs, Doc: withoutRuns(sdoc)})
		}
		if err != nil {
			runErr = fmt.Errorf("%s round %d: %w", v.Name, round, err)
			if ctx.Err() != nil && !errors.Is(err, ErrInterrupted) {
				runErr = fmt.Errorf("%w: %w", ErrInterrupted, runErr)
			}
			break
		}
		doc.Conclude(cfg.Alpha)
		if werr := doc.WriteIn(parent, name, perm); werr != nil {
			fmt.Fprintf(out, "warning: %v\n", werr)
		}
	}
	doc.EndedAt, doc.Status = time.Now(), statusOf(runErr)
	doc.Conclude(cfg.Alpha)
	if err := doc.WriteIn(parent, name, perm); err != nil {
		return doc, errors.Join(runErr, err)
	}
	fmt.Fprintln(out)
	doc.WriteText(out)
	fmt.Fprintf(out, "capacity A/B results: %s\n", path)
	return doc, runErr
}

// Check is everything RunAB checks before it starts anything (the
// server need not exist yet, Experiment.Cluster may be nil): the search,
// the rounds, the variants (names, workload options), that this process
// can apply every remedy (isRoot; each remedy parameter's value, e.g.
// --tmpfs-size) and that neither the A/B document nor a search's
// document exists. It returns the document's path, the searches'
// directory and the baseline's workload; errors are one line (usage
// errors of `erplab capacity --variant`).
func (cfg ABConfig) Check(isRoot bool) (path, dir string, w workload.Workload, err error) {
	if err := cfg.Search.validate(); err != nil {
		return "", "", nil, err
	}
	ec := cfg.Experiment
	if ec.NewWorkload == nil {
		return "", "", nil, errors.New("capacity A/B: no workload")
	}
	if ec.Rounds < 1 {
		return "", "", nil, fmt.Errorf("--rounds must be >= 1, got %d", ec.Rounds)
	}
	if len(ec.Variants) == 0 {
		return "", "", nil, errors.New("capacity A/B: no variant")
	}
	if err := experiment.CheckVariants("", ec.Variants, func(string) bool { return true }); err != nil {
		return "", "", nil, err
	}
	for _, v := range ec.Variants {
		if err := remedy.CheckRunnable("capacity", v.Remedies, ec.Params, isRoot); err != nil {
			return "", "", nil, fmt.Errorf("--variant %s: %w", v.Name, err)
		}
		if err := remedy.CheckCold(v.Remedies, ec.Cold); err != nil {
			return "", "", nil, fmt.Errorf("--variant %s: %w: use erplab ab --cold", v.Name, err)
		}
	}
	w, err = ec.NewWorkload(ec.Flags)
	if err != nil {
		return "", "", nil, err
	}
	if path, err = outPath(cfg.Out, "-capacity-ab-"+w.Name()); err != nil {
		return "", "", nil, err
	}
	if fileExists(path) {
		return "", "", nil, fmt.Errorf("capacity A/B file %s exists; choose another --out or remove it", path)
	}
	dir = strings.TrimSuffix(path, ".json") + "-searches"
	for _, v := range append([]experiment.Variant{{Name: experiment.BaselineName}}, ec.Variants...) {
		for r := 1; r <= ec.Rounds; r++ {
			if p := searchPath(dir, v.Name, r); fileExists(p) {
				return "", "", nil, fmt.Errorf("capacity file %s exists; choose another --out", p)
			}
		}
	}
	return path, dir, w, nil
}

func remedyText(rs []string) string {
	if len(rs) == 0 {
		return "no remedies"
	}
	return strings.Join(rs, ", ")
}

func searchPath(dir, side string, round int) string {
	return filepath.Join(dir, fmt.Sprintf("%s-%d.json", side, round))
}

// fileExists reports whether p exists, a symbolic link (even a dangling
// one) included.
func fileExists(p string) bool { _, err := os.Lstat(p); return err == nil }

// withoutRuns is a copy of d whose steps drop their run documents (they
// stay in the steps' own files, Step.Path).
func withoutRuns(d *Document) *Document {
	c := *d
	c.Steps = make([]Step, len(d.Steps))
	for i, s := range d.Steps {
		s.Run = nil
		c.Steps[i] = s
	}
	return &c
}

// add records search s of side i, the document's model and search from
// the first one.
func (d *ABDocument) add(i int, s ABSearch) {
	if d.Unit == "" && s.Doc != nil {
		d.Model, d.Unit, d.Target, d.Search = s.Doc.Model, s.Doc.Unit, s.Doc.Target, s.Doc.Search
	}
	d.Sides[i].Searches = append(d.Sides[i].Searches, s)
}

// finished reports whether a search's capacity answers for the server:
// the search completed and stopped converged, at its maximum or with
// no good load (not on the load generator, a failed server or Ctrl-C).
func finished(d *Document) (bool, string) {
	if d == nil {
		return false, "no search"
	}
	switch d.Result.Stop.Kind {
	case StopConverged, StopMaxReached, StopNoGood:
		if d.Status == "completed" {
			return true, ""
		}
	}
	why := d.Result.Stop.Kind
	if d.Result.Stop.Detail != "" {
		why += ": " + d.Result.Stop.Detail
	}
	if why == "" {
		why = d.StatusText()
	}
	return false, why
}

// spreadOf is the spread of the searches' capacities (nil for none).
func spreadOf(docs []*Document) *Spread {
	if len(docs) == 0 {
		return nil
	}
	v := make([]float64, len(docs))
	s := &Spread{N: len(docs)}
	for i, d := range docs {
		v[i] = d.Result.Capacity
		s.AtLeast = s.AtLeast || d.Result.Stop.Kind == StopMaxReached
	}
	sort.Float64s(v)
	s.Min, s.Max = v[0], v[len(v)-1]
	if n := len(v); n%2 == 1 {
		s.Median = v[n/2]
	} else {
		s.Median = (v[n/2-1] + v[n/2]) / 2
	}
	return s
}

// text prints "23 users" (one value), "23 users (22-25 over 4
// rounds)", with "at least" when a search's maximum was good.
func (s *Spread) text(unit string) string {
	if s == nil {
		return "not known"
	}
	t := LoadText(s.Median, unit)
	if s.N > 1 {
		t = fmt.Sprintf("%s (%s-%s over %d rounds)", t, fmtLoad(s.Min), fmtLoad(s.Max), s.N)
	}
	if s.AtLeast {
		t = "at least " + t
	}
	return t
}

// VerdictOf compares the capacities of a variant's searches (b) with
// the baseline's (a), unit naming the load. The rule (doc.go, "A/B of
// capacity"): a search that did not finish (generator saturated, server
// failed, interrupted) makes the verdict inconclusive; one search each
// is inconclusive ("one round each"); otherwise the exact two-sided
// Wilcoxon rank-sum test over the rounds' capacities
// (compare.ExactRankSum) at alpha decides better or worse by the
// direction of the medians, and when the rounds cannot reach alpha at
// all (3 against 3: p >= 0.1) the verdict says how many are needed.
func VerdictOf(name, unit string, a, b []*Document, alpha float64) ABVerdict {
	if alpha <= 0 {
		alpha = compare.DefaultAlpha
	}
	v := ABVerdict{Variant: name, Verdict: ABInconclusive}
	var fa, fb []*Document
	for side, docs := range [][]*Document{a, b} {
		for i, d := range docs {
			if ok, why := finished(d); !ok {
				if v.Why == "" {
					sn := experiment.BaselineName
					if side == 1 {
						sn = name
					}
					v.Why = fmt.Sprintf("%s round %d: search ended: %s", sn, i+1, why)
				}
				continue
			}
			sn := experiment.BaselineName
			if side == 0 {
				fa = append(fa, d)
			} else {
				fb, sn = append(fb, d), name
			}
			if f, ok := d.ForeignLimited(); ok {
				v.ForeignLoad = append(v.ForeignLoad, foreignText(sn, i+1, f))
			}
		}
	}
	v.Baseline, v.Capacity = spreadOf(fa), spreadOf(fb)
	head := fmt.Sprintf("capacity %s -> %s", v.Baseline.text(unit), v.Capacity.text(unit)) + change(v.Baseline, v.Capacity)
	switch {
	case v.Why != "":
	case len(fa) == 0 || len(fb) == 0:
		v.Why = "no finished search on a side"
	case allCapped(fa) && allCapped(fb):
		// every round a lower bound at the same maximum: no order known
		v.Why = fmt.Sprintf("both at least %s (every search reached --max-users good): raise --max-users", LoadText(v.Baseline.Min, unit))
	case len(fa) == 1 && len(fb) == 1:
		v.Why = "one round each"
	default:
		ca, cb := make([]float64, len(fa)), make([]float64, len(fb))
		for i, d := range fa {
			ca[i] = d.Result.Capacity
		}
		for i, d := range fb {
			cb[i] = d.Result.Capacity
		}
		p := compare.ExactRankSum(ca, cb)
		v.P = &p
		best := compare.SeparatedP(len(ca), len(cb)) // every round of one side above the other's
		capped := ""
		if v.Baseline.AtLeast || v.Capacity.AtLeast {
			capped = " (capped rounds rank as ties at --max-users)"
		}
		switch {
		case p <= alpha && v.Capacity.Median > v.Baseline.Median:
			v.Verdict, v.Why = ABBetter, fmt.Sprintf("exact rank-sum p %.3g <= %g over %d and %d rounds%s", p, alpha, len(ca), len(cb), capped)
		case p <= alpha && v.Capacity.Median < v.Baseline.Median:
			v.Verdict, v.Why = ABWorse, fmt.Sprintf("exact rank-sum p %.3g <= %g over %d and %d rounds%s", p, alpha, len(ca), len(cb), capped)
		case best > alpha:
			v.Why = fmt.Sprintf("%d and %d rounds cannot reach p <= %g even with every round of one side above the other's (smallest possible p %.3g; the exact rank-sum test needs %d rounds each)",
				len(ca), len(cb), alpha, best, roundsNeeded(alpha))
		default:
			v.Verdict, v.Why = ABNoDifference, fmt.Sprintf("exact rank-sum p %.3g > %g over %d and %d rounds%s", p, alpha, len(ca), len(cb), capped)
		}
	}
	v.Starvation = starvationOf(fa, fb)
	if (v.Verdict == ABBetter || v.Verdict == ABWorse) && v.Starvation.explains(v.Baseline.Median, v.Capacity.Median) {
		// the noise guard of compare: a change the starvation
		// difference could explain may be the neighbours'
		v.Starvation.Withheld = true
		v.Verdict, v.Why = ABInconclusive, fmt.Sprintf("starvation differed: A %.2f B %.2f ms waited per ms run at the knee, the capacity ratio %.2f within %.2f (else %s: %s)",
			v.Starvation.A, v.Starvation.B, max(v.Capacity.Median/v.Baseline.Median, v.Baseline.Median/v.Capacity.Median), v.Starvation.Limit, v.Verdict, v.Why)
	}
	v.Line = head + "; " + v.Verdict
	if v.Why != "" {
		v.Line += ": " + v.Why
	}
	return v
}

// foreignText names a foreign-loaded round: "baseline round 2 (other
// processes 98 %)".
func foreignText(side string, round int, pct float64) string {
	return fmt.Sprintf("%s round %d (other processes %.0f %%)", side, round, pct)
}

// allCapped reports whether every search of ds reached its maximum good
// (its capacity a lower bound).
func allCapped(ds []*Document) bool {
	for _, d := range ds {
		if d.Result.Stop.Kind != StopMaxReached {
			return false
		}
	}
	return len(ds) > 0
}

// change is the relative change of the medians, " (+35 %)", as far as
// it is known: a median that is a lower bound (Spread.AtLeast) makes it
// a bound, " (>= +16 %)" for the variant's, " (<= -10 %)" for the
// baseline's; both lower bounds leave it unknown ("").
func change(a, b *Spread) string {
	if a == nil || b == nil || a.Median <= 0 {
		return ""
	}
	pct := fmt.Sprintf("%+.0f %%", 100*(b.Median-a.Median)/a.Median)
	switch {
	case a.AtLeast && b.AtLeast:
		return ""
	case b.AtLeast:
		return " (>= " + pct + ")"
	case a.AtLeast:
		return " (<= " + pct + ")"
	}
	return " (" + pct + ")"
}

// roundsNeeded is the fewest rounds per side whose complete separation
// reaches alpha in the exact two-sided rank-sum test (4 at 0.05).
func roundsNeeded(alpha float64) int {
	for n := 2; n <= MaxRoundsTested; n++ {
		if compare.SeparatedP(n, n) <= alpha {
			return n
		}
	}
	return MaxRoundsTested
}

// MaxRoundsTested bounds roundsNeeded's answer.
const MaxRoundsTested = 10

// Conclude fills the sides' spreads and limits, the common loads and
// the verdicts from the searches so far.
func (d *ABDocument) Conclude(alpha float64) {
	docsOf := func(s ABSide) []*Document {
		var ds []*Document
		for _, x := range s.Searches {
			ds = append(ds, x.Doc)
		}
		return ds
	}
	for i := range d.Sides {
		s := &d.Sides[i]
		var fin []*Document
		s.Limits = nil
		for _, x := range s.Searches {
			if ok, _ := finished(x.Doc); ok {
				fin = append(fin, x.Doc)
			}
			if x.Doc != nil && x.Doc.Result.Limit != "" {
				s.Limits = append(s.Limits, fmt.Sprintf("round %d: %s", x.Round, x.Doc.Result.Limit))
			}
		}
		s.Capacity = spreadOf(fin)
	}
	d.ForeignLoad = nil
	for _, s := range d.Sides {
		for _, x := range s.Searches {
			if x.Doc == nil {
				continue
			}
			if f, ok := x.Doc.ForeignLimited(); ok {
				d.ForeignLoad = append(d.ForeignLoad, foreignText(s.Name, x.Round, f))
			}
		}
	}
	d.Verdicts = nil
	if len(d.Sides) > 0 {
		a := docsOf(d.Sides[0])
		for _, s := range d.Sides[1:] {
			d.Verdicts = append(d.Verdicts, VerdictOf(s.Name, d.Unit, a, docsOf(s), alpha))
		}
	}
	d.Common = commonLoads(d.Sides)
}

// commonLoads are the loads at which every side has a judged step, each
// side's APDEX there (the last attempt per search).
func commonLoads(sides []ABSide) []CommonLoad {
	per := make([]map[float64]SideApdex, len(sides))
	for i, s := range sides {
		per[i] = map[float64]SideApdex{}
		for _, x := range s.Searches {
			if x.Doc == nil {
				continue
			}
			attempts := map[float64][]Score{}
			for _, st := range x.Doc.Steps {
				if st.Outcome == OutcomeGood || st.Outcome == OutcomeBad {
					attempts[st.Load] = append(attempts[st.Load], st.Apdex)
				}
			}
			for load, as := range attempts {
				sa := per[i][load]
				sa.Name = s.Name
				sa.Rounds = append(sa.Rounds, x.Round)
				sa.Apdex = append(sa.Apdex, as[len(as)-1])
				sa.Attempts = append(sa.Attempts, as)
				per[i][load] = sa
			}
		}
	}
	var out []CommonLoad
	if len(sides) == 0 {
		return out
	}
	for load := range per[0] {
		cl := CommonLoad{Load: load}
		for i := range sides {
			sa, ok := per[i][load]
			if !ok {
				cl.Sides = nil
				break
			}
			vals := make([]float64, len(sa.Apdex))
			for k, sc := range sa.Apdex {
				vals[k] = sc.Value
			}
			sort.Float64s(vals)
			sa.Median = vals[len(vals)/2]
			if len(vals)%2 == 0 {
				sa.Median = (vals[len(vals)/2-1] + vals[len(vals)/2]) / 2
			}
			cl.Sides = append(cl.Sides, sa)
		}
		if cl.Sides != nil {
			out = append(out, cl)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Load < out[j].Load })
	return out
}

// WriteText prints the summary: per side the capacity and the limiting
// resource, the APDEX of the sides at the loads all ran, and a line
// "VERDICT NAME: capacity ..." per variant.
func (d *ABDocument) WriteText(w io.Writer) {
	fmt.Fprintf(w, "=== erplab capacity A/B: %d round(s) per side (%s order), status %s\n", d.Rounds, d.Order, d.StatusText())
	for _, s := range d.Sides {
		var caps []string
		for _, x := range s.Searches {
			if x.Doc != nil {
				c := fmtLoad(x.Doc.Result.Capacity)
				if ok, why := finished(x.Doc); !ok {
					if x.Doc.Result.Capacity == 0 {
						c = "not known"
					} else {
						c += " so far"
					}
					c += " (" + why + ")"
				} else if x.Doc.Result.Stop.Kind == StopMaxReached {
					c = ">= " + c
				}
				caps = append(caps, fmt.Sprintf("round %d: %s", x.Round, c))
			}
		}
		line := fmt.Sprintf("  %s (%s): capacity %s", s.Name, remedyText(s.Remedies), s.Capacity.text(d.Unit))
		if len(caps) > 0 {
			line += "; " + strings.Join(caps, "; ")
		}
		fmt.Fprintln(w, line)
		for _, l := range s.Limits {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	if len(d.Common) > 0 {
		fmt.Fprintf(w, "  APDEX at the loads every side ran (95 %% interval of each search's step):\n")
	}
	for _, c := range d.Common {
		var parts []string
		for _, s := range c.Sides {
			p := s.Name + " " + s.Text()
			if len(s.Apdex) > 1 {
				p += " (median " + fmtApdex(s.Median) + ")"
			}
			parts = append(parts, p)
		}
		fmt.Fprintf(w, "    at %s %s: %s\n", fmtLoad(c.Load), d.Unit, strings.Join(parts, "; "))
	}
	if len(d.ForeignLoad) > 0 {
		fmt.Fprintf(w, "warning: %s\n", d.ForeignText())
	}
	for _, v := range d.Verdicts {
		if v.Starvation != nil {
			fmt.Fprintf(w, "%s: %s\n", v.Variant, v.Starvation.Line())
		}
		fmt.Fprintf(w, "VERDICT %s: %s\n", v.Variant, v.Line)
	}
}

// ForeignText is the warning about ForeignLoad ("" without it):
// "foreign load: baseline round 2 (other processes 98 %) limited by
// other processes' load, not the server: ...".
func (d *ABDocument) ForeignText() string {
	if len(d.ForeignLoad) == 0 {
		return ""
	}
	return "foreign load: " + strings.Join(d.ForeignLoad, ", ") + " limited by other processes' load, not the server's own (information: the verdict's guard judges starvation)"
}

// StatusText is Status as a reader should see it (Writer.Describe):
// "incomplete (the writing process, pid N, is gone)" for a killed
// experiment.
func (d *ABDocument) StatusText() string { return d.Writer.Describe(d.Status) }

// Write writes the document atomically to path.
func (d *ABDocument) Write(path string, perm fs.FileMode) error {
	return results.ReplaceJSON(path, d, perm)
}

// WriteIn is Write for the file name in the directory dir, held open.
func (d *ABDocument) WriteIn(dir *safefile.Root, name string, perm fs.FileMode) error {
	return results.ReplaceJSONIn(dir, name, d, perm)
}

// ReadAB reads a capacity A/B document. Errors: unreadable, not JSON,
// not a capacity A/B document of a schema this erplab reads.
func ReadAB(path string) (*ABDocument, error) {
	var d ABDocument
	if err := readDocument(path, "capacity A/B", ABFormat, ABSchemaVersion, &d, func() (string, int) { return d.Format, d.Schema }); err != nil {
		return nil, err
	}
	return &d, nil
}

// Separate is the A/B view of separate searches (e.g. `erplab report
// a.json b.json`): one side per document, named by names, without
// verdicts (separate searches are not a controlled experiment: their
// servers, data and times may differ), Order "" and Status "separate
// searches". The target and unit are the first document's.
func Separate(names []string, docs []*Document) *ABDocument {
	d := &ABDocument{Format: ABFormat, Schema: ABSchemaVersion, Status: "separate searches", Rounds: 1}
	for i, doc := range docs {
		if i == 0 {
			d.Workload = doc.Workload
		} else if doc.Workload != d.Workload {
			d.Workload += ", " + doc.Workload
		}
		d.Sides = append(d.Sides, ABSide{Name: names[i]}) // Remedies nil: not known
		d.add(i, ABSearch{Round: 1, Seq: i + 1, Path: names[i], Doc: doc})
	}
	d.Conclude(0)
	d.Verdicts = nil
	return d
}

// IsABDocument reports whether the file at path looks like a capacity
// A/B document (its "format" field), reading only its start.
func IsABDocument(path string) bool { return hasFormat(path, ABFormat) }
