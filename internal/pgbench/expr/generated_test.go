package expr

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// exprGen builds random expressions over the whole grammar, mostly valid,
// some deliberately broken.
type exprGen struct{ r *rand.Rand }

var (
	genInts    = []string{"0", "1", "2", "3", "7", "10", "42", "1000", "9223372036854775807", "9223372036854775806", "4611686018427387904", "3037000500", "-9223372036854775808"}
	genDoubles = []string{"0.0", "0.5", "1.5", "2.5", ".25", "1e3", "1.e2", "3.14159", "1e300", "2.0", "1e-5", "7.5"}
	genVars    = []string{":i", ":neg", ":d", ":b", ":f", ":n", ":big", ":small", ":sp", ":nanv", ":infv", ":milli", ":scale", ":client_id"}
	genBinOps  = []string{"+", "-", "*", "/", "%", "=", "<>", "!=", "<", "<=", ">", ">=", "&", "|", "#", "<<", ">>", "AND", "OR", "and", "or"}
	genFuncs   = []struct {
		name       string
		minA, maxA int
	}{
		{"abs", 1, 1}, {"debug", 1, 1}, {"double", 1, 1}, {"exp", 1, 1}, {"greatest", 1, 4}, {"least", 1, 4},
		{"hash", 1, 2}, {"hash_murmur2", 1, 2}, {"hash_fnv1a", 1, 2}, {"int", 1, 1}, {"ln", 1, 1}, {"mod", 2, 2},
		{"permute", 2, 3}, {"pi", 0, 0}, {"pow", 2, 2}, {"power", 2, 2}, {"random", 2, 2},
		{"random_gaussian", 3, 3}, {"random_exponential", 3, 3}, {"random_zipfian", 3, 3}, {"sqrt", 1, 1},
	}
)

func (g *exprGen) pick(s []string) string { return s[g.r.IntN(len(s))] }

func (g *exprGen) expr(depth int) string {
	if depth <= 0 {
		switch g.r.IntN(4) {
		case 0:
			return g.pick(genInts)
		case 1:
			return g.pick(genDoubles)
		case 2:
			return g.pick(genVars)
		default:
			return g.pick([]string{"true", "false", "NULL", "TRUE", "null"})
		}
	}
	switch g.r.IntN(10) {
	case 0:
		return g.pick([]string{"-", "+", "~", "NOT ", "- "}) + g.expr(depth-1)
	case 1, 2, 3:
		return g.expr(depth-1) + " " + g.pick(genBinOps) + " " + g.expr(depth-1)
	case 4:
		return "(" + g.expr(depth-1) + ")"
	case 5:
		return g.expr(depth-1) + g.pick([]string{" IS NULL", " IS NOT NULL", " ISNULL", " NOTNULL", " IS TRUE", " IS NOT FALSE", " is false"})
	case 6, 7:
		f := genFuncs[g.r.IntN(len(genFuncs))]
		n := f.minA + g.r.IntN(f.maxA-f.minA+1)
		if g.r.IntN(20) == 0 {
			n = g.r.IntN(5) // maybe a wrong count
		}
		args := make([]string, n)
		for i := range args {
			args[i] = g.expr(depth - 1)
		}
		if f.name == "abs" && n == 1 {
			// abs() of a boolean reads an uninitialised union in pgbench
			args[0] = g.pick(genInts) + " " + g.pick([]string{"+", "-", "*"}) + " " + g.pick(append(genDoubles, ":i", ":d", ":neg"))
		}
		if strings.HasPrefix(f.name, "random") && n >= 2 {
			args[0], args[1] = g.pick([]string{"1", "-5", "0", ":i"}), g.pick([]string{"10", "1000", "7.4", ":i * 3"})
			if n == 3 {
				args[2] = g.pick([]string{"2.5", "3", "1.5", "1.001", "10", ":d"})
			}
		}
		return f.name + "(" + strings.Join(args, ", ") + ")"
	default:
		s := "CASE"
		for i := 0; i <= g.r.IntN(2); i++ {
			s += " WHEN " + g.expr(depth-1) + " THEN " + g.expr(depth-1)
		}
		if g.r.IntN(2) == 0 {
			s += " ELSE " + g.expr(depth-1)
		}
		return s + " END"
	}
}

// breakExpr damages an expression: drops, duplicates or inserts a piece.
func (g *exprGen) breakExpr(s string) string {
	if s == "" {
		return ")"
	}
	i := g.r.IntN(len(s))
	switch g.r.IntN(4) {
	case 0:
		return s[:i] + s[i+1:]
	case 1:
		return s[:i] + g.pick([]string{"(", ")", ",", " 1 ", " + ", " IS ", "$", " WHEN ", "99999999999999999999", " foo(", "9223372036854775808", "1e999"}) + s[i:]
	case 2:
		return s + g.pick([]string{" +", " )", " 1", " END", " IS", " ISNULL ISNULL", " < 1 < 2"})
	default:
		j := i + g.r.IntN(len(s)-i)
		return s[:i] + s[j:]
	}
}

// TestConformanceGenerated compares random expressions (fixed seed) with
// pgbench: values, run-time errors and syntax errors.
func TestConformanceGenerated(t *testing.T) {
	bin := pgbenchPath(t)
	g := &exprGen{r: rand.New(rand.NewPCG(2024, 15))}
	const n = 600
	const seed = 77
	var okSrcs, errSrcs, synSrcs []string
	// okSrcs run in one pgbench client one after the other (sharing its
	// random state); errSrcs each in a fresh run
	seq := newTestContext(seed, nil)
	for i := 0; i < n; i++ {
		s := g.expr(1 + g.r.IntN(4))
		if g.r.IntN(4) == 0 {
			s = g.breakExpr(s)
		}
		e, err := Parse(" " + s)
		if err != nil {
			synSrcs = append(synSrcs, s)
			continue
		}
		if _, err := e.Eval(newTestContext(seed, nil)); err != nil {
			errSrcs = append(errSrcs, s)
		}
		saved := *seq.Rand
		if _, err := e.Eval(seq); err != nil {
			*seq.Rand = saved
			continue
		}
		okSrcs = append(okSrcs, s)
	}
	defs := defineArgs(testVarTexts)
	base := append([]string{"-n", "-t", "1", "-c", "1", "--random-seed=" + strconv.Itoa(seed), "-f", "g.sql"}, defs...)

	// values: one run, debug() lines compared
	run := runPgbench(t, bin, map[string]string{"g.sql": setScript(okSrcs)}, base...)
	if run.exit != 0 {
		t.Fatalf("pgbench exit %d: %s", run.exit, truncate(firstError(run.stderr)))
	}
	got, err := emulate(newTestContext(seed, nil), okSrcs)
	if err != nil {
		t.Fatal(err)
	}
	compareLines(t, "generated values", got, debugLines(run.stderr))

	// run-time errors: message and the debug() lines printed before it
	type result struct {
		exit  int
		msg   string
		debug []string
	}
	res := make([]result, len(errSrcs))
	parallel(len(errSrcs), func(i int) {
		r := runPgbench(t, bin, map[string]string{"g.sql": setScript(errSrcs[i : i+1])}, base...)
		res[i] = result{r.exit, firstError(r.stderr), debugLines(r.stderr)}
	})
	for i, s := range errSrcs {
		lines, err := emulate(newTestContext(seed, nil), []string{s})
		if res[i].exit != 2 || err == nil || res[i].msg != err.Error() ||
			strings.Join(res[i].debug, "\n") != strings.Join(lines, "\n") {
			t.Errorf("%q: pgbench exit %d %q %q; ours %v %q", truncate(s), res[i].exit, res[i].msg, res[i].debug, err, lines)
		}
	}

	// syntax errors: message and caret
	type synResult struct {
		exit int
		text string
	}
	sres := make([]synResult, len(synSrcs))
	parallel(len(synSrcs), func(i int) {
		r := runPgbench(t, bin, map[string]string{"g.sql": "\\set x " + synSrcs[i] + "\nSELECT 1;\n"}, "-n", "-t", "1", "-f", "g.sql")
		col := -1
		for _, l := range strings.Split(r.stderr, "\n") {
			if m := caretLine.FindStringSubmatch(l); m != nil {
				col = len(m[1])
			}
		}
		msg := strings.TrimSuffix(strings.TrimPrefix(firstError(r.stderr), "g.sql:1: "), ` in command "set"`)
		sres[i] = synResult{r.exit, fmt.Sprintf("%s @%d", msg, col)}
	})
	for i, s := range synSrcs {
		_, err := Parse(" " + s)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Fatalf("%q: %v", s, err)
		}
		want := fmt.Sprintf("%s @%d", se.Msg, len(`\set x`)+se.Column)
		if sres[i].exit != 1 || sres[i].text != want {
			t.Errorf("%q: pgbench exit %d %q; ours %q", truncate(s), sres[i].exit, sres[i].text, want)
		}
	}
	t.Logf("%d generated expressions: %d values, %d run-time errors, %d syntax errors identical",
		n, len(okSrcs), len(errSrcs), len(synSrcs))
}

// TestConformanceTokenSoup feeds pgbench and Parse random strings of
// tokens and characters (fixed seed): both must accept the same ones and
// report the same error at the same column for the others.
func TestConformanceTokenSoup(t *testing.T) {
	bin := pgbenchPath(t)
	rng := rand.New(rand.NewPCG(99, 1))
	pieces := []string{"0", "1", "9", "12", ".", "e", "E", "+", "-", "*", "/", "%", "(", ")", "<", ">", "=", "!", "|", "&", "#", "~", ",", ":", " ", "a", "x", "_", "\\", "\t", "'", "$", "and", "OR", "not", "is", "null", "true", "case", "when", "then", "else", "end", "isnull", "notnull", "abs", "pi", "hash", "9223372036854775808", "é", "1e5", ".5", ":i", "least", "<>", ">=", "<<", "!="}
	var srcs []string
	for i := 0; i < 500; i++ {
		var b strings.Builder
		for j := 0; j < 1+rng.IntN(10); j++ {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s := b.String()
		if strings.HasSuffix(s, "\\") {
			s += " "
		}
		srcs = append(srcs, s)
	}
	res := make([]string, len(srcs))
	parallel(len(srcs), func(i int) {
		r := runPgbench(t, bin, map[string]string{"z.sql": "\\set x " + srcs[i] + "\nSELECT 1;\n"}, append([]string{"-n", "-t", "1", "-f", "z.sql"}, defineArgs(testVarTexts)...)...)
		if r.exit != 1 {
			res[i] = "ok"
			return
		}
		col := -1
		for _, l := range strings.Split(r.stderr, "\n") {
			if m := caretLine.FindStringSubmatch(l); m != nil {
				col = len(m[1])
			}
		}
		msg := strings.TrimSuffix(strings.TrimPrefix(firstError(r.stderr), "z.sql:1: "), ` in command "set"`)
		res[i] = fmt.Sprintf("%s @%d", msg, col)
	})
	bad := 0
	for i, s := range srcs {
		_, err := Parse(" " + s)
		want := "ok"
		var se *SyntaxError
		if errors.As(err, &se) {
			want = fmt.Sprintf("%s @%d", se.Msg, len(`\set x`)+se.Column)
		}
		if want != res[i] {
			bad++
			t.Errorf("%q: pgbench %q ours %q", s, res[i], want)
		}
	}
	t.Logf("%d token strings: %d differ", len(srcs), bad)
}
