package compare

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// MaxRoundsHint is the most rounds a side RoundsHint proposes.
const MaxRoundsHint = 50

// RoundsHint is what a comparison of one run per side says instead of a
// verdict: the row rounds would decide soonest and how many rounds a
// side that takes at least (package doc, "The unit of replication is the
// round").
type RoundsHint struct {
	// Subject and Metric name the row (empty when no row could be
	// decided by up to MaxRoundsHint rounds); Rounds is the fewest rounds
	// a side; Family the tested rows of its Holm family.
	Subject string `json:"subject,omitempty"`
	Metric  string `json:"metric,omitempty"`
	Rounds  int    `json:"rounds,omitempty"`
	Family  int    `json:"family"`
	// Line is the one-line account.
	Line string `json:"line"`
}

// roundsNeeded is the fewest rounds a side (2 to MaxRoundsHint) with
// which r's effect would be decided if each run varied as much as the
// bootstrap of this one says: the standard error of B-A over n rounds a
// side is se/√n (se the single runs' bootstrap standard error), Welch's
// degrees of freedom 2n-2, and the row needs p <= alpha/m (Holm's first
// step over m tested rows) and its whole interval beyond the minimum
// effect. 0 when no n up to MaxRoundsHint does.
func roundsNeeded(r *Row, m int, alpha float64) int {
	if math.IsNaN(r.Lo) || math.IsNaN(r.Hi) || math.IsNaN(r.Delta) || m < 1 {
		return 0
	}
	se := (r.Hi - r.Lo) / (2 * distuv.UnitNormal.Quantile(1-(1-Level)/2))
	d := math.Abs(r.Delta)
	if !(se > 0) || d <= r.MinDelta {
		return 0
	}
	for n := 2; n <= MaxRoundsHint; n++ {
		t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(2*n - 2)}
		sn := se / math.Sqrt(float64(n))
		if d/sn >= t.Quantile(1-alpha/(2*float64(m))) && d-t.Quantile(1-(1-Level)/2)*sn > r.MinDelta {
			return n
		}
	}
	return 0
}

// roundsHint picks, among the tested rows of the primary family (all
// rows without primary rows) that the noise guard would not withhold,
// the one the fewest rounds would decide.
func roundsHint(c *Comparison, opts Options) *RoundsHint {
	role := RoleExploratory
	if len(opts.Primary) > 0 {
		role = RolePrimary
	}
	in := func(r *Row) bool { return r.Role == role || role == RoleExploratory && r.Role == "" }
	h := &RoundsHint{}
	for i := range c.Rows {
		if in(&c.Rows[i]) && c.Rows[i].Tested() {
			h.Family++
		}
	}
	var best *Row
	for i := range c.Rows {
		r := &c.Rows[i]
		if !in(r) || c.Noise.guards() && c.Noise.Explains(r) {
			continue // rounds would not decide what starvation explains
		}
		if n := roundsNeeded(r, h.Family, opts.Alpha); n > 0 && (h.Rounds == 0 || n < h.Rounds) {
			h.Rounds, best = n, r
		}
	}
	const head = "rounds: one run per side decides nothing (run-to-run variation is unmeasured)"
	if best == nil {
		h.Line = fmt.Sprintf("%s; no row's effect is clear enough of its minimum effect for %d rounds a side to decide it", head, MaxRoundsHint)
		return h
	}
	h.Subject, h.Metric = best.Subject, best.Metric
	h.Line = fmt.Sprintf("%s; at least %d rounds a side would decide %s %s (B-A %s [%s, %s]), if runs vary as this run's intervals do: erplab ab --rounds %d, or compare A1.json,A2.json,... B1.json,B2.json,...",
		head, h.Rounds, best.Subject, best.metricLabel(), fmtNum(best.Delta), fmtNum(best.Lo), fmtNum(best.Hi), h.Rounds)
	return h
}
