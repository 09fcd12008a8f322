package proxy

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// wordStream gives scanWords' and calledIn's answers whatever the pieces
// the text comes in: the cases of TestScanWordsAndContext and random
// texts of the words and marks the scan looks at, cut at random places
// (every place for the short ones).
func TestWordStreamAsScanWords(t *testing.T) {
	m := &mutators{names: map[string]struct{}{"f_alter": {}, strings.Repeat("l", 63): {}}}
	texts := []string{
		"SET search_path = s2, public", "select * from t where a=1 or a in (select 1)",
		"SELECT set_config('search_path', 'x', false)", "INSERT INTO t VALUES (1) ON CONFLICT DO NOTHING",
		"SELECT a FROM t WHERE a IN /* c */ (SELECT 1) OR b = 1", "SELECT a FROM t WHERE a IN ( -- c\n SELECT 1) OR b = 1",
		"-- a comment\n do 'begin end'", "/* a */ DO 'begin end'", "select 1; do $x$ begin end $x$",
		"SELECT s.\"F_Alter\" ( 1 )", "SELECT f_alter2(), count(*) FROM t", "x in (in (select", "a or b in",
		"a or b in (sel", "a or b in (select", "a or b in /", "a or b in -", strings.Repeat("L", 70) + "(1)",
	}
	tokens := []string{"in", "IN", "or", "Or", "any", "some", "do", "DO", "select", "with", "values", "table", "tables",
		"create", "f_alter", "F_ALTER", "f_alter2", "x", "(", ")", "\"", " ", "\n", "\t", "--", "-", "/*", "*/", "/", "*", ";",
		"'", "1", "search_path", "set_config", ".", "$1", "\xc3\xa9", "temporary", "authorization", strings.Repeat("l", 64)}
	r := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		for n := 1 + r.IntN(30); n > 0; n-- {
			b.WriteString(tokens[r.IntN(len(tokens))])
		}
		texts = append(texts, b.String())
	}
	for i, text := range texts {
		want, wantCall := scanWords(text), m.calledIn([]byte(text))
		cuts := [][]int{}
		if i < 18 || len(text) < 12 {
			for c := 0; c <= len(text); c++ {
				cuts = append(cuts, []int{c})
			}
		}
		for k := 0; k < 4; k++ { // several cuts at once, 1-byte pieces included
			var cut []int
			for c := 0; c <= len(text); c += 1 + r.IntN(8) {
				cut = append(cut, c)
			}
			cuts = append(cuts, cut)
		}
		for _, cut := range cuts {
			asked := 0
			ws := newWordStream(func() *mutators { asked++; return m })
			at := 0
			for _, c := range cut {
				ws.feed([]byte(text[at:c]))
				at = c
			}
			ws.feed([]byte(text[at:]))
			got, gotCall := ws.end()
			if got != want || gotCall != wantCall || asked > 1 {
				t.Fatalf("%q cut at %v: %+v, call %v (asked %d); scanWords %+v, calledIn %v", text, cut, got, gotCall, asked, want, wantCall)
			}
		}
	}
}
