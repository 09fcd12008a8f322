package engine

import (
	"testing"
	"time"
)

// maxTargetFrom looks ahead over the rest of the profile: a later ramp-up
// counts, a past peak does not, and nothing is asked for after the end.
func TestMaxTargetFrom(t *testing.T) {
	s := time.Second
	dip := []Stage{{0, 4}, {5 * s, 4}, {0, 0}, {5 * s, 0}, {0, 6}, {5 * s, 6}}
	down := []Stage{{0, 4}, {5 * s, 4}, {0, 2}, {5 * s, 2}}
	for _, c := range []struct {
		stages []Stage
		at     time.Duration
		want   int
	}{
		{dip, 0, 6},
		{dip, 7 * s, 6},
		{dip, 12 * s, 6},
		{dip, 15 * s, 0},
		{down, 1 * s, 4},
		{down, 6 * s, 2},
		{[]Stage{{10 * s, 4}}, 5 * s, 4},
		{[]Stage{{10 * s, 4}, {10 * s, 0}}, 15 * s, 2},
	} {
		if got := maxTargetFrom(c.stages, c.at); got != c.want {
			t.Errorf("%v at %s: %d, want %d", c.stages, c.at, got, c.want)
		}
	}
}
