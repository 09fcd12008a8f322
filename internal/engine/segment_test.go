package engine

import (
	"strconv"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/workload"
)

// Over the pieces of a sequence the shares of every value sum to it, a
// share never decreases as the value grows, and the pieces' run-wide
// indices partition 0..v-1.
func TestSegmentSharesSumExactly(t *testing.T) {
	type seq struct{ spec, points string }
	cases := []seq{{"0:1/2", "0,1/2,3/4,1"}, {"1/3:2/3", "0,1/3,2/3,1"}, {"0:3/5", "0,3/5,1"}, {"1/10:45%", "0,0.1,45%,1"}}
	check := func(t *testing.T, segs []*Segment) {
		t.Helper()
		prev := make([]int, len(segs))
		for v := 0; v <= 500; v++ {
			sum := 0
			for k, s := range segs {
				sh := s.Scale(v)
				if sh < prev[k] {
					t.Fatalf("%s: Scale(%d)=%d < Scale(%d)=%d", s, v, sh, v-1, prev[k])
				}
				prev[k] = sh
				sum += sh
			}
			if sum != v {
				t.Fatalf("%d pieces of %s: shares of %d sum to %d", len(segs), segs[0].Sequence, v, sum)
			}
		}
		seen := map[int]bool{}
		for _, s := range segs {
			for k := 0; k < s.Scale(500); k++ {
				g := s.Global(k)
				if g >= 500 || seen[g] {
					t.Fatalf("%s: Global(%d)=%d repeated or out of range", s, k, g)
				}
				seen[g] = true
			}
		}
		if len(seen) != 500 {
			t.Fatalf("pieces own %d of 500 indices", len(seen))
		}
	}
	for n := 1; n <= 12; n++ {
		var segs []*Segment
		for i := 1; i <= n; i++ {
			s, err := ParseSegment(itoa(i)+"/"+itoa(n), nil)
			if err != nil {
				t.Fatal(err)
			}
			segs = append(segs, s)
		}
		check(t, segs)
	}
	for _, c := range cases {
		pts := strings.Split(c.points, ",")
		var segs []*Segment
		for k := 1; k < len(pts); k++ {
			s, err := ParseExecutionSegment(pts[k-1]+":"+pts[k], c.points)
			if err != nil {
				t.Fatal(err)
			}
			segs = append(segs, s)
		}
		check(t, segs)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// The equal split stripes: piece I of N owns the indices = I-1 mod N,
// and k6's 3/5 + 2/5 sequence spreads its pieces (not 0,1,2 then 3,4).
func TestSegmentStriping(t *testing.T) {
	s, err := ParseSegment("2/3", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := []int{s.Global(0), s.Global(1), s.Global(2)}; got[0] != 1 || got[1] != 4 || got[2] != 7 {
		t.Fatalf("2/3 owns %v, want [1 4 7]", got)
	}
	if s.Scale(10) != 3 || s.Scale(5) != 2 || s.String() != "2/3" || s.From.RatString() != "1/3" {
		t.Fatalf("2/3: Scale(10)=%d Scale(5)=%d %s from %s", s.Scale(10), s.Scale(5), s, s.From.RatString())
	}
	big, err := ParseExecutionSegment("0:3/5", "0,3/5,1")
	if err != nil {
		t.Fatal(err)
	}
	var own []int
	for k := 0; k < 3; k++ {
		own = append(own, big.Global(k))
	}
	if own[0] != 0 || own[1] != 2 || own[2] != 4 {
		t.Fatalf("0:3/5 of 0,3/5,1 owns %v of 0..4, want [0 2 4]", own)
	}
}

func TestSegmentRefusals(t *testing.T) {
	env := func(v string) func(string) string { return func(string) string { return v } }
	for _, c := range []struct {
		arg, env, want string
	}{
		{"0/3", "", "I must be a whole number in 1..3"},
		{"4/3", "", "I must be a whole number in 1..3"},
		{"1/0", "", "want I/N"},
		{"x/3", "", "I must be"},
		{"3", "", "want I/N"},
		{"auto/3", "", "JOB_COMPLETION_INDEX is not set"},
		{"auto/3", "3", "not a number in 0..2"},
		{"auto/3", "a", "not a number in 0..2"},
	} {
		_, err := ParseSegment(c.arg, env(c.env))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s (JOB_COMPLETION_INDEX=%q): %v, want one line with %q", c.arg, c.env, err, c.want)
		}
	}
	s, err := ParseSegment("auto/3", env("2"))
	if err != nil || s.Index != 2 {
		t.Fatalf("auto/3 with index 2: %v %v", s, err)
	}
	for _, c := range [][2]string{{"1/2:1/3", ""}, {"0:1/3", "0,1/2,1"}, {"0:1/2", "0,1/2"}, {"a:1", ""}} {
		if _, err := ParseExecutionSegment(c[0], c[1]); err == nil {
			t.Errorf("--execution-segment %s --execution-segment-sequence %q accepted", c[0], c[1])
		}
	}
	few, _ := ParseSegment("3/3", nil)
	if err := few.CheckShare(2, 0); err == nil {
		t.Error("segment 3/3 of 2 VUs accepted")
	}
	if err := few.CheckShare(3, 2); err == nil {
		t.Error("segment 3/3 of 2 connections accepted")
	}
}

// The VUs of the pieces get, by their run-wide ids, the roles one machine
// would have given the same ids (roleFor replayed over the others' ids).
func TestSegmentRolesAsOneMachine(t *testing.T) {
	roles := []workload.Role{{Name: "a", Share: 0.5}, {Name: "b", Share: 0.3}, {Name: "c", Share: 0.2}}
	mixes := []*mix{{role: "a"}, {role: "b"}, {role: "c"}}
	whole := &run{cfg: Config{Roles: roles}, mixes: mixes}
	want := map[int]string{}
	for id := 1; id <= 60; id++ {
		want[id] = whole.roleOf(id).role
	}
	counts := map[string]int{}
	for i := 1; i <= 4; i++ {
		seg, err := ParseSegment(itoa(i)+"/4", nil)
		if err != nil {
			t.Fatal(err)
		}
		e := &run{cfg: Config{Roles: roles, Segment: seg}, mixes: mixes}
		for k := 0; k < seg.Scale(60); k++ {
			id := seg.Global(k) + 1
			if got := e.roleOf(id).role; got != want[id] {
				t.Fatalf("segment %s: VU %d has role %s, one machine gives %s", seg, id, got, want[id])
			}
			counts[want[id]]++
		}
	}
	if counts["a"] != 30 || counts["b"] != 18 || counts["c"] != 12 {
		t.Fatalf("roles over the pieces %v, want the shares of 60: a 30, b 18, c 12", counts)
	}
}
