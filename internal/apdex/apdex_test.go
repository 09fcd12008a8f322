package apdex

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

const eps = 1e-12

func near(a, b float64) bool { return math.Abs(a-b) < eps }

func TestClassifyBoundaries(t *testing.T) {
	T := time.Second
	cases := []struct {
		latency time.Duration
		want    Zone
	}{
		{0, Satisfied},
		{T - time.Nanosecond, Satisfied},
		{T, Satisfied}, // latency == T is satisfied
		{T + time.Nanosecond, Tolerating},
		{4*T - time.Nanosecond, Tolerating},
		{4 * T, Tolerating}, // latency == 4T is tolerating
		{4*T + time.Nanosecond, Frustrated},
		{time.Hour, Frustrated},
	}
	for _, c := range cases {
		if got := Classify(c.latency, T); got != c.want {
			t.Errorf("Classify(%v, %v) = %v, want %v", c.latency, T, got, c.want)
		}
	}
	// A zero target satisfies zero latency only and tolerates nothing.
	if got := Classify(0, 0); got != Satisfied {
		t.Errorf("Classify(0, 0) = %v, want satisfied", got)
	}
	if got := Classify(time.Nanosecond, 0); got != Frustrated {
		t.Errorf("Classify(1ns, 0) = %v, want frustrated", got)
	}
	// A huge target does not overflow 4T.
	huge := time.Duration(math.MaxInt64 / 2)
	if got := Classify(huge+1, huge); got != Tolerating {
		t.Errorf("Classify(huge+1, huge) = %v, want tolerating", got)
	}
}

func TestAddCountsZonesAndErrors(t *testing.T) {
	T := 500 * time.Millisecond
	var c Counts
	c.Add(100*time.Millisecond, T, false)  // satisfied
	c.Add(500*time.Millisecond, T, false)  // satisfied (== T)
	c.Add(2000*time.Millisecond, T, false) // tolerating (== 4T)
	c.Add(2001*time.Millisecond, T, false) // frustrated
	c.Add(time.Millisecond, T, true)       // fast but failed: frustrated
	want := Counts{Satisfied: 2, Tolerating: 1, Frustrated: 2}
	if c != want {
		t.Fatalf("counts = %+v, want %+v", c, want)
	}
	if c.Total() != 5 {
		t.Fatalf("Total = %d, want 5", c.Total())
	}
	// (2 + 1/2) / 5 = 0.5
	if s := c.Score(T); !near(s.Value, 0.5) || s.Samples != 5 || s.Target != T {
		t.Fatalf("Score = %+v, want value 0.5 samples 5 target %v", s, T)
	}
	var m Counts
	m.Merge(c)
	m.Merge(c)
	if m != (Counts{4, 2, 4}) {
		t.Fatalf("Merge twice = %+v", m)
	}
}

func TestSpecExample(t *testing.T) {
	// 100 samples: 60 satisfied, 30 tolerating, 10 frustrated:
	// (60 + 30/2) / 100 = 0.75, Fair, not a small group.
	s := Counts{Satisfied: 60, Tolerating: 30, Frustrated: 10}.Score(time.Second)
	if !near(s.Value, 0.75) {
		t.Fatalf("value = %v, want 0.75", s.Value)
	}
	if s.NS() || s.SmallSample() {
		t.Fatalf("NS=%v SmallSample=%v, want false false", s.NS(), s.SmallSample())
	}
	if s.Rating() != Fair {
		t.Fatalf("rating = %v, want fair", s.Rating())
	}
	if got := s.String(); got != "0.75 [1.0]" {
		t.Fatalf("String = %q, want %q", got, "0.75 [1.0]")
	}
	// All satisfied scores 1, all frustrated 0, all tolerating 0.5.
	for _, c := range []struct {
		counts Counts
		want   float64
	}{
		{Counts{Satisfied: 7}, 1},
		{Counts{Frustrated: 7}, 0},
		{Counts{Tolerating: 7}, 0.5},
		{Counts{Satisfied: 1, Tolerating: 1, Frustrated: 1}, 0.5},
	} {
		if got := c.counts.Score(time.Second).Value; !near(got, c.want) {
			t.Errorf("%+v: value = %v, want %v", c.counts, got, c.want)
		}
	}
}

func TestNSAndSmallSample(t *testing.T) {
	ns := Counts{}.Score(time.Second)
	if !ns.NS() || ns.SmallSample() || ns.Rating() != NoSample || ns.Value != 0 {
		t.Fatalf("empty: %+v NS=%v small=%v rating=%v", ns, ns.NS(), ns.SmallSample(), ns.Rating())
	}
	if got := ns.String(); got != "NS [1.0]" {
		t.Fatalf("String = %q, want NS [1.0]", got)
	}
	one := Counts{Satisfied: 1}.Score(time.Second)
	if one.NS() || !one.SmallSample() {
		t.Fatalf("1 sample: NS=%v small=%v", one.NS(), one.SmallSample())
	}
	s99 := Counts{Satisfied: 99}.Score(time.Second)
	if !s99.SmallSample() {
		t.Fatal("99 samples should be a small group")
	}
	s100 := Counts{Satisfied: 100}.Score(time.Second)
	if s100.SmallSample() {
		t.Fatal("100 samples should not be a small group")
	}
}

func TestRatingBands(t *testing.T) {
	cases := []struct {
		v    float64
		want Rating
	}{
		{1, Excellent},
		{0.94, Excellent},
		{0.9399, Good},
		{0.85, Good},
		{0.8499, Fair},
		{0.70, Fair},
		{0.6999, Poor},
		{0.50, Poor},
		{0.4999, Unacceptable},
		{0, Unacceptable},
	}
	for _, c := range cases {
		if got := RatingOf(c.v); got != c.want {
			t.Errorf("RatingOf(%v) = %v, want %v", c.v, got, c.want)
		}
		s := Score{Value: c.v, Samples: 1000, Target: time.Second}
		if got := s.Rating(); got != c.want {
			t.Errorf("Score{%v}.Rating() = %v, want %v", c.v, got, c.want)
		}
	}
	// Band edges reached through counts, not literals: 94/100 and 85/100.
	if r := (Counts{Satisfied: 93, Tolerating: 2, Frustrated: 5}).Score(time.Second).Rating(); r != Excellent {
		t.Errorf("94/100 rating = %v, want excellent", r)
	}
	if r := (Counts{Satisfied: 85, Frustrated: 15}).Score(time.Second).Rating(); r != Good {
		t.Errorf("85/100 rating = %v, want good", r)
	}
	names := map[Rating]string{Excellent: "excellent", Good: "good", Fair: "fair", Poor: "poor",
		Unacceptable: "unacceptable", NoSample: "ns"}
	for r, n := range names {
		if r.String() != n {
			t.Errorf("%d.String() = %q, want %q", int(r), r.String(), n)
		}
	}
}

func TestStringFormats(t *testing.T) {
	cases := []struct {
		s    Score
		want string
	}{
		{Score{Value: 0.86, Samples: 500, Target: time.Second}, "0.86 [1.0]"},
		{Score{Value: 0.86, Samples: 50, Target: time.Second}, "0.86* [1.0]"},
		{Score{Value: 0.86, Samples: 500, Target: 500 * time.Millisecond}, "0.86 [0.5]"},
		{Score{Value: 0.86, Samples: 500, Target: 2 * time.Second}, "0.86 [2.0]"},
		{Score{Value: 0.86, Samples: 500, Target: 250 * time.Millisecond}, "0.86 [0.25]"},
		{Score{Value: 1, Samples: 500, Target: 10 * time.Second}, "1.00 [10.0]"},
		{Score{Value: 0, Samples: 500, Target: time.Second}, "0.00 [1.0]"},
		{Score{Value: 0.9399, Samples: 500, Target: time.Second}, "0.93 [1.0]"}, // truncated, matches Good
		{Score{Value: 0.999, Samples: 1000, Target: time.Second}, "0.99 [1.0]"}, // 1.00 only when all satisfied
		{Score{Value: 0.29, Samples: 500, Target: time.Second}, "0.29 [1.0]"},   // 0.29*100 = 28.999... in float
		{Score{Samples: 0, Target: 1500 * time.Microsecond}, "NS [0.0015]"},
	}
	for _, c := range cases {
		if got := c.s.String(); got != c.want {
			t.Errorf("%+v.String() = %q, want %q", c.s, got, c.want)
		}
	}
	// Every hundredth from counts prints as itself.
	for k := int64(0); k <= 100; k++ {
		s := Counts{Satisfied: k, Frustrated: 100 - k}.Score(time.Second)
		want := FormatTarget(time.Second)
		if got := s.String(); !strings.HasSuffix(got, " ["+want+"]") || got[:4] != FormatValue(float64(k)/100) {
			t.Errorf("k=%d: String = %q", k, got)
		}
		if got, want := FormatValue(s.Value), strings.TrimSpace(strings.Split(s.String(), "[")[0]); got != want {
			t.Errorf("k=%d: FormatValue %q != String value %q", k, got, want)
		}
	}
	if got := FormatValue(0.07); got != "0.07" {
		t.Errorf("FormatValue(0.07) = %q", got)
	}
}

func TestWeight(t *testing.T) {
	want := []float64{1, 0.8, 0.6, 0.4, 0.2}
	for p := 1; p <= 5; p++ {
		if got := Weight(p, 5); math.Abs(got-want[p-1]) > 1e-12 {
			t.Errorf("Weight(%d, 5) = %v, want %v", p, got, want[p-1])
		}
	}
	if got := Weight(1, 1); got != 1 {
		t.Errorf("Weight(1, 1) = %v, want 1", got)
	}
	if got := Weight(2, 2); got != 0.5 {
		t.Errorf("Weight(2, 2) = %v, want 0.5", got)
	}
	// Bad input is clamped, never zero or negative.
	if got := Weight(0, 5); got != 1 {
		t.Errorf("Weight(0, 5) = %v, want 1", got)
	}
	if got := Weight(7, 3); got <= 0 || !near(got, 1-6.0/7) {
		t.Errorf("Weight(7, 3) = %v, want %v", got, 1-6.0/7)
	}
}

func sc(v float64, n int64) Score { return Score{Value: v, Samples: n, Target: time.Second} }

func TestIntegral(t *testing.T) {
	// Priorities 1..5, weights 1, 0.8, 0.6, 0.4, 0.2 (sum 3.0):
	// (1*0.9 + 0.8*0.8 + 0.6*0.7 + 0.4*0.6 + 0.2*0.5) / 3
	// = (0.9 + 0.64 + 0.42 + 0.24 + 0.10) / 3 = 2.30 / 3 = 0.7666...
	ops := []Weighted{
		{sc(0.9, 1000), 1},
		{sc(0.8, 200), 2},
		{sc(0.7, 5000), 3},
		{sc(0.6, 150), 4},
		{sc(0.5, 100), 5},
	}
	v, ok := Integral(ops)
	if !ok || math.Abs(v-2.3/3) > 1e-12 {
		t.Fatalf("Integral = %v, %v; want %v, true", v, ok, 2.3/3)
	}
	if RatingOf(v) != Fair {
		t.Fatalf("rating of %v = %v, want fair", v, RatingOf(v))
	}

	// Sample counts do not matter: the same scores with other counts give the same value.
	ops2 := append([]Weighted(nil), ops...)
	ops2[2].Score.Samples = 1
	if v2, _ := Integral(ops2); math.Abs(v2-v) > 1e-12 {
		t.Fatalf("integral depends on sample counts: %v vs %v", v2, v)
	}

	// An NS operation is left out; p_max still comes from all operations.
	// Ops: p1 0.9, p2 NS, p3 0.6 -> weights 1, (0.666..), 0.333..:
	// (0.9 + 0.6/3) / (1 + 1/3) = 1.1 / (4/3) = 0.825
	withNS := []Weighted{
		{sc(0.9, 1000), 1},
		{Counts{}.Score(time.Second), 2},
		{sc(0.6, 1000), 3},
	}
	if v, ok := Integral(withNS); !ok || math.Abs(v-0.825) > 1e-12 {
		t.Fatalf("Integral with NS = %v, %v; want 0.825, true", v, ok)
	}

	// A single operation gives its own score whatever its priority.
	if v, ok := Integral([]Weighted{{sc(0.42, 10), 3}}); !ok || !near(v, 0.42) {
		t.Fatalf("single op = %v, %v; want 0.42, true", v, ok)
	}

	// Equal priorities give the plain mean.
	if v, ok := Integral([]Weighted{{sc(1, 10), 1}, {sc(0.5, 10), 1}}); !ok || !near(v, 0.75) {
		t.Fatalf("equal priorities = %v, %v; want 0.75", v, ok)
	}

	// All NS or nothing: not ok.
	if v, ok := Integral([]Weighted{{Counts{}.Score(time.Second), 1}, {Counts{}.Score(time.Second), 2}}); ok || v != 0 {
		t.Fatalf("all NS = %v, %v; want 0, false", v, ok)
	}
	if _, ok := Integral(nil); ok {
		t.Fatal("Integral(nil) ok = true")
	}
}

func TestJSONRoundTrip(t *testing.T) {
	s := Counts{Satisfied: 100, Tolerating: 12, Frustrated: 11}.Score(time.Second) // 106/123
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["samples"] != float64(123) || m["target_ms"] != float64(1000) || m["rating"] != "good" ||
		m["ns"] != false || m["small_sample"] != false || !near(m["value"].(float64), 106.0/123) {
		t.Fatalf("JSON = %s", b)
	}
	var back Score
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back != s {
		t.Fatalf("round trip: %+v != %+v", back, s)
	}

	// NS, small sample and a sub-millisecond target round-trip too.
	for _, s := range []Score{
		Counts{}.Score(250 * time.Millisecond),
		Counts{Satisfied: 3, Frustrated: 1}.Score(1500 * time.Microsecond),
	} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var back Score
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back != s {
			t.Fatalf("round trip of %s: %+v != %+v", b, back, s)
		}
	}
	b, _ = json.Marshal(Counts{}.Score(time.Second))
	if want := `{"value":0,"samples":0,"target_ms":1000,"rating":"ns","ns":true,"small_sample":false}`; string(b) != want {
		t.Fatalf("NS JSON = %s, want %s", b, want)
	}

	// Inside a struct, as a results file would hold it.
	type row struct {
		Op    string `json:"op"`
		APDEX Score  `json:"apdex"`
	}
	b, err = json.Marshal(row{"post_invoice", sc(0.86, 50)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"small_sample":true`) {
		t.Fatalf("row JSON = %s", b)
	}
}

func TestUnmarshalRejectsBadInput(t *testing.T) {
	for _, in := range []string{
		`{"value":1.5,"samples":1,"target_ms":1000}`,
		`{"value":-0.1,"samples":1,"target_ms":1000}`,
		`{"value":0.5,"samples":-1,"target_ms":1000}`,
		`{"value":0.5,"samples":1,"target_ms":-1}`,
		`{"value":0.5,"samples":1,"target_ms":1e300}`,
		`{"value":"x"}`,
	} {
		var s Score
		err := json.Unmarshal([]byte(in), &s)
		if err == nil {
			t.Errorf("%s: no error", in)
			continue
		}
		if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "apdex score") {
			t.Errorf("%s: error %q", in, err)
		}
	}
}

func BenchmarkCountsAdd(b *testing.B) {
	lat := [...]time.Duration{100 * time.Millisecond, 900 * time.Millisecond, 3 * time.Second, 5 * time.Second}
	var c Counts
	for i := 0; b.Loop(); i++ {
		c.Add(lat[i&3], time.Second, i&15 == 0)
	}
	if c.Total() == 0 {
		b.Fatal("nothing counted")
	}
}

func TestCountsJSON(t *testing.T) {
	c := Counts{Satisfied: 60, Tolerating: 30, Frustrated: 10}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"satisfied":60,"tolerating":30,"frustrated":10}`; string(b) != want {
		t.Fatalf("Counts JSON = %s, want %s", b, want)
	}
	var back Counts
	if err := json.Unmarshal(b, &back); err != nil || back != c {
		t.Fatalf("round trip = %+v, %v", back, err)
	}
}
