package opmap

import (
	"strings"
	"testing"
)

// A recorder counts sends per operation and text whether the text comes
// again as the same string (found by its address) or as a fresh copy;
// beyond MaxTexts distinct texts it counts drops; nil does nothing.
func TestTextsCount(t *testing.T) {
	m := New([]string{"a", "b"})
	r1, r2 := m.Texts().Recorder(), m.Texts().Recorder()
	q := "SELECT " + strings.Repeat("x, ", 100) + "1"
	for range 3 {
		r1.Add(0, q)
	}
	r1.Add(1, q)
	r1.Add(0, strings.Clone(q)) // another copy of the same text
	r1.Add(0, strings.Clone(q))
	r2.Add(0, q)
	r2.Add(Idle, q)
	got, dropped := m.Texts().Counts()
	if got[OpText{0, q}] != 6 || got[OpText{1, q}] != 1 || len(got) != 2 || dropped != 0 {
		t.Fatalf("counts %v, dropped %d: want 6 sends by a, 1 by b", got, dropped)
	}
	for i := range MaxTexts + 2 {
		r2.Add(1, strings.Repeat("x", i))
	}
	if _, dropped = m.Texts().Counts(); dropped != 3 {
		t.Errorf("dropped %d, want 3 (MaxTexts distinct texts per recorder, one already held)", dropped)
	}
	var nilMap *Map
	nilMap.Texts().Recorder().Add(0, q)
	if got, dropped := nilMap.Texts().Counts(); len(got) != 0 || dropped != 0 {
		t.Errorf("nil map counts %v %d", got, dropped)
	}
}
