// Package apdex scores response times of key operations with APDEX and
// combines the per-operation scores into the integral APDEX of a load test.
//
// Per-operation scoring follows the Apdex Technical Specification (Apdex
// Alliance, version 1.1, 2007, https://www.apdex.org):
//
//   - every sample is put into one of three performance zones by its
//     response time and the target time T: satisfied (≤ T), tolerating
//     (> T and ≤ F, where F = 4T) and frustrated (> F);
//   - a failed transaction (an error) is frustrated whatever its time;
//   - the score is (Satisfied + Tolerating/2) / Total, a number in [0, 1];
//   - a report group with no samples has no score and is shown as "NS";
//     a group with fewer than 100 samples is a small group and is flagged;
//   - the score is shown together with T in seconds: "0.86 [1.0]";
//   - the rating bands are Excellent 0.94–1.00, Good 0.85–0.93,
//     Fair 0.70–0.84, Poor 0.50–0.69, Unacceptable 0.00–0.49.
//
// The integral score over many key operations follows the performance
// monitoring subsystem of 1C:Enterprise ("Оценка производительности", in the
// 1C standard subsystems library, БСП): the weighted mean of the operation
// scores, where an operation of priority p (1 is the most important) weighs
// 1 - (p-1)/p_max; see [Weight] and [Integral].
package apdex

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// MinSamples is the smallest sample count of a group that is not a small
// group (Apdex specification v1.1: groups of fewer than 100 samples are
// flagged because their score is statistically weak).
const MinSamples = 100

// ToleratingFactor is F/T: the frustration threshold F is 4T (Apdex
// specification v1.1).
const ToleratingFactor = 4

// Zone is the performance zone of one sample.
type Zone int

// The zones of the Apdex specification, best first.
const (
	Satisfied Zone = iota + 1
	Tolerating
	Frustrated
)

// String gives "satisfied", "tolerating" or "frustrated".
func (z Zone) String() string {
	switch z {
	case Satisfied:
		return "satisfied"
	case Tolerating:
		return "tolerating"
	case Frustrated:
		return "frustrated"
	}
	return fmt.Sprintf("Zone(%d)", int(z))
}

// Classify puts a response time into its zone for target time T: Satisfied
// when latency ≤ T, Tolerating when T < latency ≤ 4T, Frustrated above 4T.
// Both boundaries belong to the better zone (latency == T is satisfied,
// latency == 4T is tolerating), as in the Apdex specification. A target of
// zero or less satisfies only non-positive latencies and tolerates none.
func Classify(latency, target time.Duration) Zone {
	if latency <= target {
		return Satisfied
	}
	if target > 0 && latency <= frustrationThreshold(target) {
		return Tolerating
	}
	return Frustrated
}

// frustrationThreshold returns F = 4T, saturating at the largest Duration.
func frustrationThreshold(target time.Duration) time.Duration {
	if target > math.MaxInt64/ToleratingFactor {
		return time.Duration(math.MaxInt64)
	}
	return target * ToleratingFactor
}

// Counts holds the number of samples of one key operation in each zone.
// Frustrated includes failed executions (errors). The zero value is an empty
// group. Counts is not safe for concurrent use.
// In JSON it is {"satisfied":60,"tolerating":30,"frustrated":10}.
type Counts struct {
	Satisfied  int64 `json:"satisfied"`
	Tolerating int64 `json:"tolerating"`
	Frustrated int64 `json:"frustrated"`
}

// Add counts one sample with the given response time against target time T;
// a failed execution counts as frustrated whatever its time (Apdex
// specification v1.1: failed transactions are frustrated).
func (c *Counts) Add(latency, target time.Duration, failed bool) {
	if failed {
		c.Frustrated++
		return
	}
	switch Classify(latency, target) {
	case Satisfied:
		c.Satisfied++
	case Tolerating:
		c.Tolerating++
	default:
		c.Frustrated++
	}
}

// Merge adds the counts of o to c, e.g. to combine the counts of several
// virtual users for the same operation and target.
func (c *Counts) Merge(o Counts) {
	c.Satisfied += o.Satisfied
	c.Tolerating += o.Tolerating
	c.Frustrated += o.Frustrated
}

// Total is the number of samples in all zones.
func (c Counts) Total() int64 {
	return c.Satisfied + c.Tolerating + c.Frustrated
}

// Score computes the APDEX of the counts for target time T:
// (Satisfied + Tolerating/2) / Total. With no samples the score is NS and its
// Value is 0.
func (c Counts) Score(target time.Duration) Score {
	s := Score{Samples: c.Total(), Target: target}
	if s.Samples > 0 {
		s.Value = (float64(c.Satisfied) + float64(c.Tolerating)/2) / float64(s.Samples)
	}
	return s
}

// Score is the APDEX of one key operation (or any report group).
type Score struct {
	// Value is the score in [0, 1], full precision; 0 when NS.
	Value float64
	// Samples is the number of samples scored, errors included.
	Samples int64
	// Target is the target time T the score was computed with.
	Target time.Duration
}

// NS reports that the score has no samples ("no sample" in the Apdex
// specification).
func (s Score) NS() bool { return s.Samples <= 0 }

// SmallSample reports a small group: at least one but fewer than
// [MinSamples] (100) samples.
func (s Score) SmallSample() bool { return s.Samples > 0 && s.Samples < MinSamples }

// Rating is the quality band of a score.
type Rating int

// The rating bands of the Apdex specification, best first, and NoSample for
// a score without samples.
const (
	Excellent Rating = iota + 1
	Good
	Fair
	Poor
	Unacceptable
	NoSample
)

// String gives "excellent", "good", "fair", "poor", "unacceptable" or "ns".
func (r Rating) String() string {
	switch r {
	case Excellent:
		return "excellent"
	case Good:
		return "good"
	case Fair:
		return "fair"
	case Poor:
		return "poor"
	case Unacceptable:
		return "unacceptable"
	case NoSample:
		return "ns"
	}
	return fmt.Sprintf("Rating(%d)", int(r))
}

// Label is the rating as summaries print it: [Rating.String], except
// "NS" for NoSample (the notation of the Apdex specification).
func (r Rating) Label() string {
	if r == NoSample {
		return "NS"
	}
	return r.String()
}

// RatingOf gives the band of a score value in [0, 1]: Excellent ≥ 0.94,
// Good ≥ 0.85, Fair ≥ 0.70, Poor ≥ 0.50, Unacceptable below (Apdex
// specification v1.1). The comparison is on the full-precision value, so
// 0.9399 is Good. It applies to integral values too.
func RatingOf(value float64) Rating {
	switch {
	case value >= 0.94:
		return Excellent
	case value >= 0.85:
		return Good
	case value >= 0.70:
		return Fair
	case value >= 0.50:
		return Poor
	}
	return Unacceptable
}

// Rating gives the band of the score, NoSample when NS.
func (s Score) Rating() Rating {
	if s.NS() {
		return NoSample
	}
	return RatingOf(s.Value)
}

// String formats the score in the notation of the Apdex specification: the
// value with two decimals, then T in seconds in brackets, e.g. "0.86 [1.0]";
// "NS [1.0]" without samples; a small group gets an asterisk after the value,
// "0.86* [1.0]". The value is truncated, not rounded, to two decimals, so the
// printed number always lies in the band [Score.Rating] names (0.9399 prints
// as "0.93", Good) and "1.00" means every sample was satisfied.
func (s Score) String() string {
	return s.ValueString() + " [" + FormatTarget(s.Target) + "]"
}

// ValueString is the score as [Score.String] prints it, without T: the
// value truncated to two decimals, an asterisk for a small group, "NS"
// without samples ("0.86", "0.86*", "NS"). Every erplab output (run
// summary, compare, report) prints scores with it.
func (s Score) ValueString() string {
	if s.NS() {
		return "NS"
	}
	if s.SmallSample() {
		return FormatValue(s.Value) + "*"
	}
	return FormatValue(s.Value)
}

// FormatValue prints a score value with two decimals, truncated towards zero
// (see [Score.String]), e.g. 0.8567 -> "0.85".
func FormatValue(v float64) string {
	// The small epsilon keeps values such as 0.29, stored as 0.28999...,
	// from dropping a hundredth.
	t := math.Floor(v*100+1e-9) / 100
	return strconv.FormatFloat(t, 'f', 2, 64)
}

// FormatTarget prints target time T in seconds with at least one decimal and
// no trailing zeros beyond it: 1s -> "1.0", 2s -> "2.0", 500ms -> "0.5",
// 250ms -> "0.25", 1.5ms -> "0.0015".
func FormatTarget(target time.Duration) string {
	s := strconv.FormatFloat(target.Seconds(), 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// scoreJSON is the wire shape of a Score in results files.
type scoreJSON struct {
	Value       float64 `json:"value"`
	Samples     int64   `json:"samples"`
	TargetMS    float64 `json:"target_ms"`
	Rating      string  `json:"rating"`
	NS          bool    `json:"ns"`
	SmallSample bool    `json:"small_sample"`
}

// MarshalJSON encodes the score as
// {"value":0.86,"samples":123,"target_ms":1000,"rating":"good","ns":false,"small_sample":false}.
// value is the full-precision score, target_ms is T in milliseconds
// (fractional below 1 ms); rating, ns and small_sample are derived and given
// for readers of the file.
func (s Score) MarshalJSON() ([]byte, error) {
	return json.Marshal(scoreJSON{
		Value:       s.Value,
		Samples:     s.Samples,
		TargetMS:    float64(s.Target) / float64(time.Millisecond),
		Rating:      s.Rating().String(),
		NS:          s.NS(),
		SmallSample: s.SmallSample(),
	})
}

// UnmarshalJSON decodes the shape written by [Score.MarshalJSON]. The derived
// fields (rating, ns, small_sample) are ignored and recomputed. It returns an
// error when value is outside [0, 1], samples or target_ms is negative, or
// target_ms does not fit a time.Duration.
func (s *Score) UnmarshalJSON(data []byte) error {
	var w scoreJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("apdex score: %w", err)
	}
	if math.IsNaN(w.Value) || w.Value < 0 || w.Value > 1 {
		return fmt.Errorf("apdex score: value %v outside [0, 1]", w.Value)
	}
	if w.Samples < 0 {
		return fmt.Errorf("apdex score: negative samples %d", w.Samples)
	}
	ns := w.TargetMS * float64(time.Millisecond)
	if math.IsNaN(ns) || ns < 0 || ns >= math.MaxInt64 {
		return fmt.Errorf("apdex score: target_ms %v out of range", w.TargetMS)
	}
	*s = Score{Value: w.Value, Samples: w.Samples, Target: time.Duration(math.Round(ns))}
	return nil
}

// Weighted is one key operation's score with its priority, an input of
// [Integral].
type Weighted struct {
	Score Score
	// Priority ranks the operation: 1 is the most important.
	Priority int
}

// Weight gives the weight of an operation of the given priority in the
// integral APDEX, as 1C's performance monitoring subsystem ("Оценка
// производительности", БСП) computes it: 1 - (priority-1)/maxPriority, where
// maxPriority is the largest priority among the operations. Priorities 1..5
// with maxPriority 5 weigh 1, 0.8, 0.6, 0.4, 0.2. The result is in (0, 1].
// A priority below 1 is taken as 1 and a maxPriority below priority as
// priority, so bad input never gives a zero or negative weight.
func Weight(priority, maxPriority int) float64 {
	if priority < 1 {
		priority = 1
	}
	if maxPriority < priority {
		maxPriority = priority
	}
	return 1 - float64(priority-1)/float64(maxPriority)
}

// Integral computes the integral APDEX of a load test from the scores of its
// key operations, as 1C's performance monitoring subsystem ("Оценка
// производительности", БСП) does: the weighted mean Σ wᵢ·scoreᵢ / Σ wᵢ with
// wᵢ = [Weight](pᵢ, p_max). Every operation counts equally whatever its
// number of samples. p_max is the largest priority among all ops given, so
// an operation's weight does not depend on which others had samples.
// Operations with no samples (NS) are left out of the mean. ok is false when
// ops is empty or every operation is NS; value is then 0. Rate the result
// with [RatingOf].
func Integral(ops []Weighted) (value float64, ok bool) {
	maxPriority := 1
	for _, op := range ops {
		maxPriority = max(maxPriority, op.Priority)
	}
	var sum, weights float64
	for _, op := range ops {
		if op.Score.NS() {
			continue
		}
		w := Weight(op.Priority, maxPriority)
		sum += w * op.Score.Value
		weights += w
	}
	if weights == 0 {
		return 0, false
	}
	return sum / weights, true
}
