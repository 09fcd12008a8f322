package experiment

import (
	"testing"
	"time"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/loadtest"
)

// Balanced order: A B B A A B for two configurations, A B C C B A for
// three; every configuration has as many early as late slots.
func TestBalancedSchedule(t *testing.T) {
	names := func(s [][2]int) string {
		out := ""
		for _, p := range s {
			out += string(rune('A' + p[0]))
		}
		return out
	}
	if got := names(balanced(2, 3)); got != "ABBAAB" {
		t.Fatalf("2 x 3: %s", got)
	}
	if got := names(balanced(3, 2)); got != "ABCCBA" {
		t.Fatalf("3 x 2: %s", got)
	}
	s := balanced(2, 4)
	for i, p := range s {
		if p[1] != i/2+1 {
			t.Fatalf("round numbers: %v", s)
		}
	}
}

// RoundsFor fills the budget with runs of load profile + RunOverhead, at
// least MinRounds.
func TestRoundsFor(t *testing.T) {
	load := loadtest.Options{Stages: []engine.Stage{{Duration: 10 * time.Second, Target: 5}, {Duration: 45 * time.Second, Target: 5}}}
	// a run: 55 s + 5 s = 1 min; 2 configurations: 2 min per round
	if n := RoundsFor(10*time.Minute, 2, load, 0); n != 5 {
		t.Fatalf("10 min, 2 configurations of 1 min: %d rounds, want 5", n)
	}
	if n := RoundsFor(time.Minute, 2, load, 0); n != MinRounds {
		t.Fatalf("1 min: %d rounds, want the minimum %d", n, MinRounds)
	}
	// aged by 1 min: 2 min a run, 4 min a round
	if n := RoundsFor(20*time.Minute, 2, load, time.Minute); n != 5 {
		t.Fatalf("20 min, 2 configurations of 1 min aged 1 min: %d rounds, want 5", n)
	}
	open := loadtest.Options{Stages: []engine.Stage{{Duration: 0, Target: 5}}, Rate: []engine.RateStage{{Duration: 115 * time.Second, Rate: 10}}}
	if n := RoundsFor(20*time.Minute, 2, open, 0); n != 5 {
		t.Fatalf("open model, 2 min runs: %d rounds, want 5", n)
	}
}
