package profile

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/opmap"
)

// AttributeOps: a sample belongs to the interval of its pid that holds its
// time (from inclusive, to exclusive, an open interval runs to the end);
// samples outside every interval, of another pid or of an unknown
// operation are unattributed.
func TestAttributeOps(t *testing.T) {
	c := Clock{T0: time.Now(), MonoNs: 1_000_000_000, ErrNs: 150}
	exec := []Frame{{Func: "ExecScan"}}
	smp := func(pid int, at int64) Sample {
		return Sample{PID: pid, Comm: "postgres", TimeNs: c.MonoNs + at, Stack: exec}
	}
	p := &Parsed{PIDs: map[int]bool{10: true, 11: true}, Samples: []Sample{
		smp(10, 100), smp(10, 199), // a
		smp(10, 200),                // between: unattributed (a ends at 200)
		smp(10, 300), smp(10, 9999), // b, open
		smp(11, 150),  // pid 11 has no interval
		smp(10, 50),   // before the first
		smp(10, 1000), // b still
	}}
	ivs := []opmap.Interval{{PID: 10, Op: 0, FromNs: 100, ToNs: 200}, {PID: 10, Op: 1, FromNs: 300, ToNs: -1}, {PID: 12, Op: 5, FromNs: 0, ToNs: -1}}
	s := Summarize(p, []int{1}, Event, 499, 1)
	AttributeOps(s, p, c, ivs, 2, []string{"a", "b"})
	a := s.OpAttribution
	if a.Attributed != 5 || a.Unattributed != 3 || a.ClockErrorUs != 0.15 || a.DroppedExecutions != 2 {
		t.Fatalf("attribution %+v", a)
	}
	if len(s.Operations) != 2 || s.Operations[0].Name != "b" || s.Operations[0].Samples != 3 || s.Operations[1].Name != "a" || s.Operations[1].Samples != 2 {
		t.Fatalf("operations %+v", s.Operations)
	}
	if o := s.Operations[0]; o.SharePct != 37.5 || len(o.Subsystems) != 1 || o.Subsystems[0].Name != SubExecutor || o.Subsystems[0].SharePct != 100 || o.Functions[0].Name != "ExecScan" {
		t.Errorf("b: %+v", o)
	}
	var b bytes.Buffer
	s.WriteOperations(&b)
	if !strings.Contains(b.String(), "by key operation (5 samples on backends running one, 3 others; clocks aligned within 0.1 µs)") || !strings.Contains(b.String(), "executor 100 %") {
		t.Errorf("table:\n%s", b.String())
	}
}

func TestParseTimeNs(t *testing.T) {
	for in, want := range map[string]int64{"22461.138628096": 22461138628096, "5.000001": 5000001000, "7": 7e9} {
		if got, ok := parseTimeNs(in); !ok || got != want {
			t.Errorf("parseTimeNs(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", ".5", "1.1234567890", "x.1", "-1.0"} {
		if _, ok := parseTimeNs(bad); ok {
			t.Errorf("parseTimeNs(%q) accepted", bad)
		}
	}
}

func TestNewClock(t *testing.T) {
	c, err := NewClock()
	if err != nil || c.ErrNs < 0 || c.ErrNs > int64(time.Millisecond) || c.MonoNs <= 0 {
		t.Fatalf("%+v %v", c, err)
	}
}
