package rewrite

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"
)

// charPos is the 1-based character position of the n-th (from 0)
// occurrence of sub in s, as PostgreSQL counts an error position.
func charPos(t *testing.T, s, sub string, n int) int {
	t.Helper()
	off := -1
	for i := 0; i <= n; i++ {
		k := strings.Index(s[off+1:], sub)
		if k < 0 {
			t.Fatalf("%q: occurrence %d of %q missing", s, n, sub)
		}
		off += 1 + k
	}
	return utf8.RuneCountInString(s[:off]) + 1
}

// An error position in the rewritten text maps to the same token of the
// client's text: after the edits (a later statement's table), inside the
// arm kept as written, and before the edits; an inserted token maps to
// the arm's operator.
func TestPositionMap(t *testing.T) {
	in := "SELECT 'жж' FROM t\nWHERE t.a = 1 OR t.a IN (SELECT u.x FROM u) OR t.a = ANY (SELECT v.y FROM v); SELECT * FROM nosuch2"
	r, err := Rewrite(context.Background(), in, Options{})
	if err != nil || !r.Changed {
		t.Fatalf("%+v, %v", r, err)
	}
	out := r.SQL
	for _, c := range []struct {
		outTok  string
		outN    int
		inTok   string
		inN     int
		comment string
	}{
		{"nosuch2", 0, "nosuch2", 0, "after the edits"},
		{"'жж'", 0, "'жж'", 0, "before the edits"},
		{"u.x", 0, "u.x", 0, "the kept arm's subquery (the first copy in the rewritten text)"},
		{"u.x", 1, "u.x", 0, "the rewritten arm's subquery (the input's bytes, moved)"},
		{"v.y", 0, "v.y", 0, "the second kept arm"},
		{"ANY (ARRAY", 0, "IN (SELECT", 0, "an inserted token: the arm's operator"},
		{"CASE", 0, "t.a IN", 0, "the guard's start: the arm's start"},
	} {
		got := r.Positions.OriginalChar(in, out, charPos(t, out, c.outTok, c.outN))
		if want := charPos(t, in, c.inTok, c.inN); got != want {
			t.Errorf("%s: %q #%d maps to %d, want %d (%q)", c.comment, c.outTok, c.outN, got, want, c.inTok)
		}
	}
	// Which statement an error is in: the later one was not changed.
	for _, c := range []struct {
		tok  string
		want bool
	}{{"nosuch2", false}, {"u.x", true}, {"ANY (ARRAY", true}, {"'жж'", true}} {
		if got := r.Positions.InChangedStatement(in, out, charPos(t, out, c.tok, 0)); got != c.want {
			t.Errorf("%q in a changed statement: %v, want %v", c.tok, got, c.want)
		}
	}
	if !r.Positions.InChangedStatement(in, out, 0) {
		t.Errorf("no position: want true (it may be the changed statement's)")
	}

	// Past the end, and the identity of an unchanged text.
	if got, want := r.Positions.OriginalChar(in, out, utf8.RuneCountInString(out)+1), utf8.RuneCountInString(in)+1; got != want {
		t.Errorf("end: %d, want %d", got, want)
	}
	if got := (PositionMap{}).OriginalChar("x", "x", 7); got != 7 {
		t.Errorf("identity: %d", got)
	}
}
