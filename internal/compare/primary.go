package compare

import (
	"encoding/json"
	"fmt"
	"strings"

	"gonum.org/v1/gonum/stat/distuv"
)

// Key names a row of a comparison: its Subject and Metric, e.g.
// {"temp_table_storm", "apdex"} or {"integral", "apdex"}. A declared
// primary row may carry an Aim, the way its remedy means to move a metric
// that has no good direction of its own (a CPU share, a wait share):
// AimLower or AimHigher. On such a row the aimed-for change is "better"
// and the other "worse"; a metric with a direction ignores Aim.
type Key struct {
	Subject string `json:"subject"`
	Metric  string `json:"metric"`
	Aim     string `json:"aim,omitempty"`
}

// The aims a declared primary row may carry (Key.Aim).
const (
	AimLower  = "lower"
	AimHigher = "higher"
)

// String is the key as ParseKey reads it: "SUBJECT:METRIC", then ":AIM"
// when it has one.
func (k Key) String() string {
	if k.Aim != "" {
		return k.Subject + ":" + k.Metric + ":" + k.Aim
	}
	return k.Subject + ":" + k.Metric
}

// Row is k without its Aim: the row it names.
func (k Key) Row() Key { return Key{Subject: k.Subject, Metric: k.Metric} }

// IntegralApdex is the row every comparison has and the primary row of a
// variant whose remedies declare none.
var IntegralApdex = Key{Subject: "integral", Metric: "apdex"}

// ParseKey reads "SUBJECT[:METRIC[:AIM]]": the metric after the last ':'
// (default "apdex"), so "temp_table_storm" is temp_table_storm's APDEX
// and "wait IO:DataFileRead:share_pct" a wait row; a subject that itself
// contains ':' needs its metric. A last part "lower" or "higher" after a
// metric is the row's Aim ("cpu file system:share_pct:lower"). It
// returns an error for an empty subject or metric, or another word after
// a metric than lower or higher ("x:apdex:sideways").
func ParseKey(s string) (Key, error) {
	s = strings.TrimSpace(s)
	k := Key{Subject: s, Metric: "apdex"}
	if i := strings.LastIndex(s, ":"); i >= 0 {
		k = Key{Subject: strings.TrimSpace(s[:i]), Metric: strings.TrimSpace(s[i+1:])}
	}
	if i := strings.LastIndex(k.Subject, ":"); i >= 0 && knownMetric(k.Subject[i+1:]) && !knownMetric(k.Metric) && k.Metric != AimLower && k.Metric != AimHigher {
		// SUBJECT:METRIC:AIM with an aim that is neither
		return Key{}, fmt.Errorf("row %q: the aim after the metric must be lower or higher, got %q", s, k.Metric)
	}
	if (k.Metric == AimLower || k.Metric == AimHigher) && strings.Contains(k.Subject, ":") {
		aim := k.Metric
		if k, _ = ParseKey(k.Subject); k.Aim != "" {
			return Key{}, fmt.Errorf("row %q: two aims", s)
		}
		k.Aim = aim
	}
	if k.Subject == "" || k.Metric == "" {
		return Key{}, fmt.Errorf("row %q: want SUBJECT[:METRIC[:lower|higher]], e.g. integral:apdex or temp_table_storm:p95_ms", s)
	}
	return k, nil
}

// Roles of a row (Row.Role) when a comparison has primary rows.
const (
	// RolePrimary rows are the pre-declared endpoints: Holm over them
	// alone decides the comparison's verdict (Comparison.Primary).
	RolePrimary = "primary"
	// RoleExploratory rows are every other row: Holm over them alone,
	// reported for insight, never the verdict.
	RoleExploratory = "exploratory"
)

// Mixed is the primary verdict when one primary row is better and another
// worse (or higher and lower).
const Mixed Verdict = "mixed: primary rows disagree"

// PrimaryVerdict is the confirmatory result of a comparison with primary
// rows (Options.Primary): the package doc's "Primary and exploratory
// rows".
type PrimaryVerdict struct {
	// Rows are the declared primary rows, in declaration order; Source
	// says who declared them (a remedy's registration, --primary).
	Rows   []Key  `json:"rows"`
	Source string `json:"source,omitempty"`
	// Missing are declared rows the comparison does not have (an
	// operation the workload lacks); they take no part.
	Missing []Key `json:"missing,omitempty"`
	// Untested are the primary rows the comparison has but could not
	// test (no p-value), each with the reason (Row.UntestedReason); they
	// take no part in Holm's procedure.
	Untested []UntestedRow `json:"untested,omitempty"`
	// Family is the number of tested primary rows (Holm's m of the
	// primary family); Exploratory that of the tested exploratory rows,
	// out of ExploratoryRows listed.
	Family          int `json:"family"`
	Exploratory     int `json:"exploratory_family"`
	ExploratoryRows int `json:"exploratory_rows"`
	// Verdict is better or worse (higher, lower) when every decided
	// primary row says the same and at least one is decided; Mixed when
	// the decided rows say different things; Starved when the noise
	// guard fired on a primary row; n/a when no declared row has a value
	// on both sides; otherwise the comparison's undecided verdict: no
	// significant difference (rounds) or inconclusive: one round each.
	Verdict Verdict `json:"verdict"`
}

// MarshalJSON writes the fields and "line": Line(), the verdict line
// compare's text and Markdown print.
func (p PrimaryVerdict) MarshalJSON() ([]byte, error) {
	type plain PrimaryVerdict
	return json.Marshal(struct {
		plain
		Line string `json:"line"`
	}{plain(p), p.Line()})
}

// UntestedRow is a primary row without a p-value and why (JSON: subject,
// metric, reason).
type UntestedRow struct {
	Key
	Reason string `json:"reason"`
}

// PrimaryRows returns the comparison's primary rows (Role RolePrimary),
// in row order; none without Options.Primary.
func (c *Comparison) PrimaryRows() []Row { return c.rowsOf(RolePrimary) }

// markRoles sets Row.Role from keys and returns the declared keys no row
// has; with no keys it leaves every Role empty. A declared key's Aim gives
// its row, when the metric has no direction (Neutral), the direction the
// aim calls better.
func markRoles(rows []Row, keys []Key) (missing []Key) {
	if len(keys) == 0 {
		return nil
	}
	want := map[Key]string{}
	for _, k := range keys {
		if a, ok := want[k.Row()]; !ok || a == "" {
			want[k.Row()] = k.Aim
		}
	}
	found := map[Key]bool{}
	for i := range rows {
		k := Key{Subject: rows[i].Subject, Metric: rows[i].Metric}
		aim, ok := want[k]
		if !ok {
			rows[i].Role = RoleExploratory
			continue
		}
		rows[i].Role = RolePrimary
		found[k] = true
		if rows[i].Direction == Neutral && aim != "" {
			rows[i].Direction = map[string]Direction{AimLower: LowerBetter, AimHigher: HigherBetter}[aim]
		}
	}
	for _, k := range keys {
		if !found[k.Row()] {
			missing = append(missing, k)
			found[k.Row()] = true // once
		}
	}
	return missing
}

// familySignificance runs Holm's procedure within each family of rows
// (all rows, or primary and exploratory rows apart) and returns per row
// whether it is significant, plus the tested rows per family (primary,
// exploratory; without roles everything counts as exploratory).
func familySignificance(rows []Row, alpha float64) (sig []bool, primary, exploratory int) {
	sig = make([]bool, len(rows))
	for _, role := range []string{RolePrimary, RoleExploratory} {
		var idx []int
		var ps []float64
		for i, r := range rows {
			if r.Role == role || role == RoleExploratory && r.Role == "" {
				idx = append(idx, i)
				ps = append(ps, r.P)
			}
		}
		for j, s := range holm(ps, alpha) {
			sig[idx[j]] = s
		}
		n := 0
		for _, i := range idx {
			if rows[i].Tested() {
				n++
			}
		}
		if role == RolePrimary {
			primary = n
		} else {
			exploratory = n
		}
	}
	return sig, primary, exploratory
}

// primaryVerdict combines the decided primary rows into one verdict (see
// PrimaryVerdict.Verdict).
func primaryVerdict(rows []Row, undecided Verdict) Verdict {
	var decided []Verdict
	present := false
	for _, r := range rows {
		if r.Role != RolePrimary {
			continue
		}
		if r.Verdict != NotApplicable {
			present = true
		}
		switch {
		case r.Verdict == Starved:
			return Starved
		case r.Verdict.Decided():
			decided = append(decided, r.Verdict)
		}
	}
	if len(decided) == 0 {
		if !present {
			return NotApplicable
		}
		return undecided
	}
	for _, v := range decided[1:] {
		if v != decided[0] {
			return Mixed
		}
	}
	return decided[0]
}

// Line is the verdict line, the same in every output (compare's text and
// Markdown, ab's VERDICT line), e.g. "primary verdict: better (Holm over 2
// tested primary rows declared by tmpfs-temp-tablespace; exploratory: 63
// rows, 60 tested, in a Holm family of their own that does not decide
// it)". When no primary row could be tested it says so and why: "primary
// verdict: n/a (no primary row could be tested: repost_day:apdex (no
// value on either side: no samples); ...)".
func (p *PrimaryVerdict) Line() string {
	untested := make([]string, len(p.Untested))
	for i, u := range p.Untested {
		untested[i] = u.Key.String() + " (" + u.Reason + ")"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "primary verdict: %s (", p.Verdict)
	if p.Family == 0 {
		b.WriteString("no primary row could be tested")
		if len(untested) > 0 {
			b.WriteString(": " + strings.Join(untested, ", "))
		}
		if p.Source != "" {
			b.WriteString("; declared by " + p.Source)
		}
	} else {
		fmt.Fprintf(&b, "Holm over %s", plural(p.Family, "tested primary row", "tested primary rows"))
		if p.Source != "" {
			b.WriteString(" declared by " + p.Source)
		}
		if len(untested) > 0 {
			b.WriteString("; not tested: " + strings.Join(untested, ", "))
		}
	}
	if len(p.Missing) > 0 {
		names := make([]string, len(p.Missing))
		for i, k := range p.Missing {
			names[i] = k.String()
		}
		b.WriteString("; declared but not in this comparison: " + strings.Join(names, ", "))
	}
	fmt.Fprintf(&b, "; exploratory: %s, in a Holm family of their own that does not decide it)", p.exploratoryCount())
	return b.String()
}

// Choices says in one clause which rows the comparison has instead of
// k (a declared row it lacks, PrimaryVerdict.Missing): the metrics of
// k's subject when it has rows, e.g. "post_order has no metric p95; its
// metrics: apdex, p50_ms, p95_ms, ..."; else the operations with their
// metrics and the integral's, e.g. "no subject op; operations:
// item_lookup, post_order; their metrics: apdex, ...; integral: apdex,
// per_second, error_pct".
func (c *Comparison) Choices(k Key) string {
	var subject, opMetrics, ops, integral []string
	seen := map[string]bool{}
	add := func(list []string, key, v string) []string {
		if seen[key] {
			return list
		}
		seen[key] = true
		return append(list, v)
	}
	for _, r := range c.Rows {
		if r.Subject == k.Subject {
			subject = add(subject, "s:"+r.Metric, r.Metric)
		}
		switch r.Section {
		case "operation":
			ops = add(ops, "o:"+r.Subject, r.Subject)
			opMetrics = add(opMetrics, "m:"+r.Metric, r.Metric)
		case "integral":
			integral = add(integral, "i:"+r.Metric, r.Metric)
		}
	}
	if len(subject) > 0 {
		return fmt.Sprintf("%s has no metric %s; its metrics: %s", k.Subject, k.Metric, strings.Join(subject, ", "))
	}
	if strings.HasPrefix(k.Subject, ProfileSubject) {
		return c.profileChoices(k)
	}
	return fmt.Sprintf("no subject %s; operations: %s; their metrics: %s; integral: %s", k.Subject,
		strings.Join(ops, ", "), strings.Join(opMetrics, ", "), strings.Join(integral, ", "))
}

// ProfileSubject begins the subject of every profile row ("cpu
// executor"): rows of runs made with --profile only.
const ProfileSubject = "cpu "

// profileChoices is Choices for a profile row k ("cpu <subsystem>") the
// comparison lacks: the profile rows it has, or that it has none
// because a run was made without --profile.
func (c *Comparison) profileChoices(k Key) string {
	var cpu []string
	for _, r := range c.Rows {
		if r.Section == "profile" && (len(cpu) == 0 || cpu[len(cpu)-1] != r.Subject) {
			cpu = append(cpu, r.Subject)
		}
	}
	if len(cpu) == 0 {
		return fmt.Sprintf("no subject %s: the rows 'cpu <subsystem>' exist only when every run of both sides was made with --profile (erplab run --profile, erplab ab --profile), and a run here has no CPU profile", k.Subject)
	}
	return fmt.Sprintf("no subject %s; the profile's rows: %s", k.Subject, strings.Join(cpu, ", "))
}

// exploratoryCount is "36 rows, 15 tested": the exploratory rows listed
// and tested.
func (p *PrimaryVerdict) exploratoryCount() string {
	return fmt.Sprintf("%s, %d tested", plural(p.ExploratoryRows, "row", "rows"), p.Exploratory)
}

// plural is "1 row" or "n rows".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// untestedRows lists the primary rows without a p-value and why.
func untestedRows(rows []Row) []UntestedRow {
	var out []UntestedRow
	for _, r := range rows {
		if r.Role == RolePrimary && !r.Tested() {
			out = append(out, UntestedRow{Key: Key{Subject: r.Subject, Metric: r.Metric}, Reason: r.UntestedReason()})
		}
	}
	return out
}

// BinomialCI is the Clopper-Pearson interval of a binomial proportion
// k/n at level (0.95 for 95 %): the exact interval from beta quantiles
// (C. J. Clopper, E. S. Pearson, Biometrika 26(4), 1934). It returns
// [0, 1] for n = 0.
func BinomialCI(k, n int, level float64) (lo, hi float64) {
	if n <= 0 || k < 0 || k > n {
		return 0, 1
	}
	a := (1 - level) / 2
	lo, hi = 0, 1
	if k > 0 {
		lo = distuv.Beta{Alpha: float64(k), Beta: float64(n - k + 1)}.Quantile(a)
	}
	if k < n {
		hi = distuv.Beta{Alpha: float64(k + 1), Beta: float64(n - k)}.Quantile(1 - a)
	}
	return lo, hi
}

// OperationMetrics are the metrics of an operation's rows (its
// statements' plan_ms and exec_ms included); IntegralMetrics the
// integral's; otherMetrics those of the observation and profile rows.
var (
	OperationMetrics = []string{"apdex", "p50_ms", "p95_ms", "p99_ms", "per_second", "error_pct", "plan_ms", "exec_ms"}
	IntegralMetrics  = []string{"apdex", "per_second", "error_pct"}
	otherMetrics     = []string{"share_pct", "growth_bytes", "user_pct", "system_pct", "temp_files_per_s", "temp_bytes_per_s"}
)

// knownMetric reports whether m is the metric of some row.
func knownMetric(m string) bool {
	m = strings.TrimSpace(m)
	for _, list := range [][]string{OperationMetrics, IntegralMetrics, otherMetrics} {
		for _, x := range list {
			if x == m {
				return true
			}
		}
	}
	return false
}

// ImpossibleKey says why no comparison of runs of a workload with
// operations ops (nil: unknown, e.g. a replay's) can have row k, or ""
// when one can: an operation row of an operation ops lack, an integral
// or operation row of a metric such rows do not have, a metric no row
// has. Observation and profile subjects are open-ended (they exist once
// the runs observe them) and are not checked.
func ImpossibleKey(k Key, ops []string) string {
	has := func(list []string, s string) bool {
		for _, x := range list {
			if x == s {
				return true
			}
		}
		return false
	}
	switch {
	case k.Subject == IntegralApdex.Subject:
		if !has(IntegralMetrics, k.Metric) {
			return fmt.Sprintf("the integral has no metric %q (it has: %s)", k.Metric, strings.Join(IntegralMetrics, ", "))
		}
	case ops != nil && has(ops, k.Subject):
		if !has(OperationMetrics, k.Metric) {
			return fmt.Sprintf("operation %s has no metric %q (it has: %s)", k.Subject, k.Metric, strings.Join(OperationMetrics, ", "))
		}
	case has(OperationMetrics, k.Metric):
		if ops != nil {
			return fmt.Sprintf("no operation %q (operations: %s)", k.Subject, strings.Join(ops, ", "))
		}
	case !has(otherMetrics, k.Metric):
		return fmt.Sprintf("no row has metric %q (metrics: %s, %s)", k.Metric, strings.Join(OperationMetrics, ", "), strings.Join(otherMetrics, ", "))
	}
	return ""
}
