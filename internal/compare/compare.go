package compare

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
)

// Direction says which way of a metric is good.
type Direction int

const (
	// LowerBetter metrics (latency, errors, CPU) improve when they fall.
	LowerBetter Direction = iota
	// HigherBetter metrics (APDEX, throughput) improve when they rise.
	HigherBetter
	// Neutral metrics (the CPU share of active sessions) are only higher
	// or lower.
	Neutral
)

// Verdict is the outcome of one row.
type Verdict string

// Verdicts.
const (
	Better       Verdict = "better"
	Worse        Verdict = "worse"
	Higher       Verdict = "higher"
	Lower        Verdict = "lower"
	NoDifference Verdict = "no significant difference"
	// OneRoundEach is a tested row of a comparison of single runs whose
	// interval does not decide: one run per side cannot separate the
	// variant from the run-to-run variation.
	OneRoundEach Verdict = "inconclusive: one round each"
	// Starved replaces better, worse, higher or lower when the
	// difference in starvation (time the server's tasks and erplab's
	// threads waited for a CPU) between the sides could explain the
	// row's effect (package doc, "Noise guard").
	Starved       Verdict = "inconclusive: starvation differed"
	NotApplicable Verdict = "n/a"
)

// Decided reports whether v is better, worse, higher or lower.
func (v Verdict) Decided() bool { return v == Better || v == Worse || v == Higher || v == Lower }

// Methods, as named in Row.Method.
const (
	// MethodRounds: Welch's t over the per-round values.
	MethodRounds = "welch-t over rounds"
	// MethodBlockBootstrap: moving-block bootstrap over the intervals
	// (observation samples) of one run per side.
	MethodBlockBootstrap = "block bootstrap"
)

// Defaults of Options.
const (
	DefaultAlpha     = 0.05
	DefaultMinEffect = 0.05
	// DefaultReplicates is the number of bootstrap resamples of a
	// comparison of single runs.
	DefaultReplicates = 1000
	// DefaultMaxForeignDiff is the foreign CPU (% of all CPUs) that
	// capacity calls a busy host's (capacity.Document.ForeignLimited);
	// compare's guard judges starvation instead.
	DefaultMaxForeignDiff = 10.0
	// MinPoints is the fewest intervals (observation samples) per run a
	// bootstrap needs.
	MinPoints = 5
	// Level is the confidence level of the rows' intervals.
	Level = 0.95
)

// Options tune the verdicts. The zero value uses the defaults.
type Options struct {
	// Alpha is the family-wise significance level over all tested rows of
	// one comparison (Holm), default DefaultAlpha (0.05).
	Alpha float64
	// MinEffect is the smallest relative difference |B-A|/|A| that counts
	// as better or worse, default DefaultMinEffect (0.05 = 5 %); each
	// metric also has an absolute floor (see the package doc).
	MinEffect float64
	// Replicates is the number of bootstrap resamples for single runs
	// (default DefaultReplicates); Seed seeds them (default 1), so a
	// comparison is reproducible.
	Replicates int
	Seed       uint64
	// NoiseGuardOff turns the noise guard off (starvation is still
	// reported). MaxForeignDiff is the former guard's threshold, kept for
	// recipes recorded with it: negative also turns the guard off, other
	// values are ignored.
	NoiseGuardOff  bool
	MaxForeignDiff float64
	// Primary, when not empty, are the pre-declared primary rows: Holm
	// over them alone decides the comparison's verdict
	// (Comparison.Primary), and every other row is exploratory, with a
	// Holm family of its own (package doc: "Primary and exploratory
	// rows"). Empty: one family of all rows, no primary verdict.
	// PrimarySource names who declared them, for the verdict line.
	Primary       []Key
	PrimarySource string
}

// guardOff reports whether the noise guard is off.
func (o Options) guardOff() bool { return o.NoiseGuardOff || o.MaxForeignDiff < 0 }

func (o Options) norm() (Options, error) {
	if o.Alpha == 0 {
		o.Alpha = DefaultAlpha
	}
	if o.MinEffect == 0 {
		o.MinEffect = DefaultMinEffect
	}
	if o.Replicates == 0 {
		o.Replicates = DefaultReplicates
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if !(o.Alpha > 0 && o.Alpha < 1) {
		return o, fmt.Errorf("compare: alpha must be in (0, 1), got %g", o.Alpha)
	}
	if !(o.MinEffect >= 0) {
		return o, fmt.Errorf("compare: min effect must be >= 0, got %g", o.MinEffect)
	}
	if o.Replicates < 100 {
		return o, fmt.Errorf("compare: replicates must be >= 100, got %d", o.Replicates)
	}
	return o, nil
}

// Row is one compared figure.
type Row struct {
	// Section is "operation", "integral", "statements" (an operation's
	// plan_ms and exec_ms per execution from pg_stat_statements),
	// "observations" or "profile"; Subject the operation name,
	// "integral", or the observed quantity's name ("wait
	// IO:DataFileRead", "host CPU").
	Section string `json:"section"`
	Subject string `json:"subject"`
	// Metric names the figure ("apdex", "p95_ms", "per_second",
	// "error_pct", "share_pct", "user_pct", ...); Unit its unit.
	Metric string `json:"metric"`
	Unit   string `json:"unit,omitempty"`
	// A and B are the baseline's and the variant's values (the mean of
	// the per-round values with rounds); Delta is the effect B-A and
	// DeltaPct 100·(B-A)/|A| (NaN when A is 0).
	A        float64 `json:"a"`
	B        float64 `json:"b"`
	Delta    float64 `json:"delta"`
	DeltaPct float64 `json:"delta_pct"`
	// Lo and Hi bound the 95 % confidence interval of Delta; MinDelta is
	// the smallest |Delta| that counts (max(MinEffect·|A|, the metric's
	// floor)): better or worse needs the whole interval beyond it.
	Lo       float64 `json:"ci95_low"`
	Hi       float64 `json:"ci95_high"`
	MinDelta float64 `json:"min_delta"`
	// Method is the test used (Method* constants) and P the two-sided
	// p-value of Delta = 0 before Holm's correction; NaN when not tested.
	Method    string    `json:"method,omitempty"`
	P         float64   `json:"p"`
	Direction Direction `json:"-"`
	Verdict   Verdict   `json:"verdict"`
	// Note says why a row was not tested ("too few intervals").
	Note string `json:"note,omitempty"`
	// Role is RolePrimary or RoleExploratory when the comparison has
	// primary rows (Options.Primary), "" otherwise.
	Role string `json:"role,omitempty"`
}

// MarshalJSON writes NaN numbers as null.
func (r Row) MarshalJSON() ([]byte, error) {
	type plain Row
	num := func(v float64) any {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return v
	}
	return json.Marshal(struct {
		plain
		A        any `json:"a"`
		B        any `json:"b"`
		Delta    any `json:"delta"`
		DeltaPct any `json:"delta_pct"`
		Lo       any `json:"ci95_low"`
		Hi       any `json:"ci95_high"`
		MinDelta any `json:"min_delta"`
		P        any `json:"p"`
	}{plain(r), num(r.A), num(r.B), num(r.Delta), num(r.DeltaPct), num(r.Lo), num(r.Hi), num(r.MinDelta), num(r.P)})
}

// Tested reports whether r has a p-value: it takes part in Holm's
// procedure of its family and counts as tested in every count a
// comparison prints (rows with Method set but no p-value, where nothing
// varied, are not tested).
func (r Row) Tested() bool { return !math.IsNaN(r.P) }

// Comparison is a baseline against one variant.
type Comparison struct {
	// Baseline and Variant name the sides (file names, joined by ","
	// for several rounds).
	Baseline string `json:"baseline"`
	Variant  string `json:"variant"`
	// RoundsA and RoundsB are the runs per side; with one each the rows
	// come from a block bootstrap, otherwise from a test over rounds.
	RoundsA int     `json:"rounds_a"`
	RoundsB int     `json:"rounds_b"`
	Alpha   float64 `json:"alpha"`
	// MinEffect is the relative threshold (0.05 = 5 %).
	MinEffect float64 `json:"min_effect"`
	Rows      []Row   `json:"rows"`
	// Noise is the noise guard's account of the two sides.
	Noise NoiseReport `json:"noise"`
	// Warnings say what differs between the runs besides the variant
	// (workload, scale, duration).
	Warnings []string `json:"warnings,omitempty"`
	// Slower are the statements that got slower (statements.go), when
	// both sides recorded pg_stat_statements.
	Slower []StatementChange `json:"statements_slower,omitempty"`
	// RoundsHint, for one run per side (which never decides a row),
	// says how many rounds a side would decide the clearest row (a
	// primary row when declared): RoundsHint.Line.
	RoundsHint *RoundsHint `json:"rounds_hint,omitempty"`
	// Primary is the verdict of the primary rows, nil when none were
	// declared (Options.Primary).
	Primary *PrimaryVerdict `json:"primary,omitempty"`
}

// Count returns how many rows have verdict v.
func (c *Comparison) Count(v Verdict) int {
	n := 0
	for _, r := range c.Rows {
		if r.Verdict == v {
			n++
		}
	}
	return n
}

// Decided returns how many rows are better, worse, higher or lower.
func (c *Comparison) Decided() int {
	n := 0
	for _, r := range c.Rows {
		if r.Verdict.Decided() {
			n++
		}
	}
	return n
}

// Find returns the row of subject and metric, or nil.
func (c *Comparison) Find(subject, metric string) *Row {
	for i := range c.Rows {
		if c.Rows[i].Subject == subject && c.Rows[i].Metric == metric {
			return &c.Rows[i]
		}
	}
	return nil
}

// Compare compares variant run b against baseline run a, one round each
// (moving-block bootstrap over the runs' intervals); names label them
// (file names). It is CompareRounds with one document per side.
func Compare(nameA string, a *results.Document, nameB string, b *results.Document, opts Options) (*Comparison, error) {
	if a == nil || b == nil {
		return nil, errors.New("compare: missing document")
	}
	return CompareRounds([]string{nameA}, []*results.Document{a}, []string{nameB}, []*results.Document{b}, opts)
}

// CompareRounds compares the variant's rounds bs against the baseline's
// rounds as (names label them). With one document per side every row
// comes from a moving-block bootstrap over the two runs' intervals; with
// two or more per side from Welch's t over the per-round values (the
// package doc has the methods). Operations present in only one side are
// rows with NaN values and verdict n/a. It returns an error when a side
// is empty or mixes one round with several (1 against 3), an
// observations section cannot be decoded, or opts are out of range.
func CompareRounds(namesA []string, as []*results.Document, namesB []string, bs []*results.Document, opts Options) (*Comparison, error) {
	opts, err := opts.norm()
	if err != nil {
		return nil, err
	}
	if len(as) == 0 || len(bs) == 0 || len(namesA) != len(as) || len(namesB) != len(bs) {
		return nil, errors.New("compare: each side needs its documents and names")
	}
	if (len(as) == 1) != (len(bs) == 1) {
		return nil, fmt.Errorf("compare: %d rounds against %d: give one run per side or at least two per side", len(as), len(bs))
	}
	ra, err := prepareAll(as)
	if err != nil {
		return nil, fmt.Errorf("compare: baseline: %w", err)
	}
	rb, err := prepareAll(bs)
	if err != nil {
		return nil, fmt.Errorf("compare: variant: %w", err)
	}
	c := &Comparison{Baseline: strings.Join(namesA, ","), Variant: strings.Join(namesB, ","), RoundsA: len(as), RoundsB: len(bs),
		Alpha: opts.Alpha, MinEffect: opts.MinEffect}
	specs := buildSpecs(ra, rb)
	if len(as) == 1 {
		c.Rows = bootstrapRows(specs, ra[0], rb[0], opts)
	} else {
		c.Rows = roundRows(specs, ra, rb)
	}
	c.Noise = noiseReport(ra, rb, opts)
	c.Warnings = warnings(as, bs)
	c.Slower = slowerStatements(as, bs, opts.MinEffect)
	missing := markRoles(c.Rows, opts.Primary)
	decide(c, opts)
	if c.RoundsA == 1 {
		c.RoundsHint = roundsHint(c, opts)
	}
	if len(opts.Primary) > 0 {
		c.Primary = &PrimaryVerdict{Rows: opts.Primary, Source: opts.PrimarySource, Missing: missing}
		_, c.Primary.Family, c.Primary.Exploratory = familySignificance(c.Rows, opts.Alpha)
		c.Primary.ExploratoryRows = len(c.rowsOf(RoleExploratory))
		c.Primary.Untested = untestedRows(c.Rows)
		c.Primary.Verdict = primaryVerdict(c.Rows, c.undecided())
	}
	return c, nil
}

func prepareAll(ds []*results.Document) ([]*runData, error) {
	out := make([]*runData, len(ds))
	for i, d := range ds {
		if d == nil {
			return nil, errors.New("missing document")
		}
		rd, err := prepare(d)
		if err != nil {
			return nil, err
		}
		out[i] = rd
	}
	return out, nil
}

// roundRows fills every row from the per-round values: A and B are the
// means, the estimate Welch's t over rounds.
func roundRows(specs []spec, ra, rb []*runData) []Row {
	rows := make([]Row, len(specs))
	for i, sp := range specs {
		r := sp.row
		r.P, r.Lo, r.Hi = nan, nan, nan
		xa, xb := perRound(sp, ra), perRound(sp, rb)
		r.A, r.B = mean(xa), mean(xb)
		switch {
		case sp.note != "":
			r.Note = sp.note
		case len(xa) < 2 || len(xb) < 2:
			r.Note = fmt.Sprintf("too few rounds with a value (%d, %d; need 2)", len(xa), len(xb))
		default:
			e := welchDiff(xa, xb, Level)
			r.Method, r.P, r.Lo, r.Hi = MethodRounds, e.P, e.Lo, e.Hi
			if math.IsNaN(e.Lo) && !math.IsNaN(e.P) {
				r.Note = "no variation within either side: permutation p-value only"
			}
		}
		r.MinDelta = sp.floor
		rows[i] = r
	}
	return rows
}

func perRound(sp spec, rds []*runData) []float64 {
	var out []float64
	for _, rd := range rds {
		if v := sp.stat(rd, rd.all()); !math.IsNaN(v) {
			out = append(out, v)
		}
	}
	return out
}

// bootstrapRows fills every row from one run per side: A and B are the
// statistics of the whole runs, the estimate the bootstrap standard error
// of B-A over opts.Replicates moving-block resamples of both runs
// (intervals and observation samples resampled independently per side,
// the same resample for every row).
func bootstrapRows(specs []spec, a, b *runData, opts Options) []Row {
	rows := make([]Row, len(specs))
	for i, sp := range specs {
		r := sp.row
		r.P, r.Lo, r.Hi, r.MinDelta = nan, nan, nan, sp.floor
		r.A, r.B = sp.stat(a, a.all()), sp.stat(b, b.all())
		rows[i] = r
	}
	// Which rows can be resampled.
	boot := make([]bool, len(specs))
	for i, sp := range specs {
		r := &rows[i]
		n := func(rd *runData) int {
			if sp.obs {
				return len(rd.obs)
			}
			return len(rd.ivs)
		}
		switch {
		case sp.note != "":
			r.Note = sp.note
		case math.IsNaN(r.A) || math.IsNaN(r.B):
		case n(a) < MinPoints || n(b) < MinPoints:
			r.Note = fmt.Sprintf("too few points (%d, %d; need %d)", n(a), n(b), MinPoints)
		case sp.bootNote != "":
			r.Note = sp.bootNote
		default:
			boot[i] = true
		}
	}

	rng := rand.New(rand.NewPCG(opts.Seed, 0x6572706c6162))
	sum := make([]float64, len(specs))
	sum2 := make([]float64, len(specs))
	cnt := make([]int, len(specs))
	var sa, sb sel
	for k := 0; k < opts.Replicates; k++ {
		a.resample(rng, &sa, k+1)
		b.resample(rng, &sb, k+1)
		for i, sp := range specs {
			if !boot[i] {
				continue
			}
			d := sp.stat(b, &sb) - sp.stat(a, &sa)
			if math.IsNaN(d) {
				continue
			}
			sum[i] += d
			sum2[i] += d * d
			cnt[i]++
		}
	}
	for i := range specs {
		if !boot[i] {
			continue
		}
		r := &rows[i]
		if cnt[i] < opts.Replicates/2 {
			r.Note = "too few resamples with a value"
			continue
		}
		m := sum[i] / float64(cnt[i])
		se := math.Sqrt(max(sum2[i]/float64(cnt[i])-m*m, 0) * float64(cnt[i]) / float64(cnt[i]-1))
		e := normalDiff(r.B-r.A, se, Level)
		r.Method, r.P, r.Lo, r.Hi = MethodBlockBootstrap, e.P, e.Lo, e.Hi
		if se == 0 && r.B != r.A {
			r.Note = "the resamples do not vary: not testable"
		}
	}
	return rows
}

// undecided is the verdict of a tested row that is not decided.
func (c *Comparison) undecided() Verdict {
	if c.RoundsA == 1 {
		return OneRoundEach
	}
	return NoDifference
}

// decide fills Delta, DeltaPct, MinDelta and Verdict of every row; Holm
// runs within each family (all rows, or the primary and the exploratory
// rows apart when Row.Role is set).
func decide(c *Comparison, opts Options) {
	rows := c.Rows
	sig, _, _ := familySignificance(rows, opts.Alpha)
	undecided := c.undecided()
	for i := range rows {
		r := &rows[i]
		r.Delta = r.B - r.A
		r.DeltaPct = nan
		if r.A != 0 {
			r.DeltaPct = 100 * r.Delta / math.Abs(r.A)
		}
		if !math.IsNaN(r.A) {
			r.MinDelta = max(r.MinDelta, opts.MinEffect*math.Abs(r.A))
		}
		switch {
		case math.IsNaN(r.A) || math.IsNaN(r.B):
			r.Verdict = NotApplicable
			continue
		case math.IsNaN(r.P):
			if r.Note != "" {
				r.Verdict = NotApplicable
			} else {
				r.Verdict = NoDifference // nothing varies: equal values
			}
			continue
		}
		up := r.Lo > r.MinDelta
		down := r.Hi < -r.MinDelta
		if !sig[i] || !up && !down || c.RoundsA == 1 {
			// one run per side decides nothing (package doc, "The unit
			// of replication is the round"): RoundsHint says how many
			// rounds would
			r.Verdict = undecided
			continue
		}
		switch r.Direction {
		case HigherBetter:
			r.Verdict = map[bool]Verdict{true: Better, false: Worse}[up]
		case LowerBetter:
			r.Verdict = map[bool]Verdict{true: Worse, false: Better}[up]
		default:
			r.Verdict = map[bool]Verdict{true: Higher, false: Lower}[up]
		}
		c.Noise.guard(r)
	}
}

var nan = math.NaN()

func mean(x []float64) float64 {
	if len(x) == 0 {
		return nan
	}
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// Observations returns the decoded observations section of d, nil
// when the run kept none.
func Observations(d *results.Document) (*sampler.Observations, error) {
	raw, ok := d.Extra["observations"]
	if !ok || len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	return sampler.ReadObservations(raw)
}
