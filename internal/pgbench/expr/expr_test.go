package expr

import (
	"bytes"
	"errors"
	"math"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/pgtest"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

// textVars are variables given as text (like -D), parsed on first use the
// way pgbench's makeVariableValue does, plus assigned values (\set).
type textVars struct {
	text map[string]string
	vals map[string]Value
}

func (v *textVars) Get(name string) (Value, bool, error) {
	if x, ok := v.vals[name]; ok {
		return x, true, nil
	}
	t, ok := v.text[name]
	if !ok {
		return Value{}, false, nil
	}
	x, err := ParseVariable(name, t)
	if err != nil {
		return Value{}, true, err
	}
	v.vals[name] = x
	return x, true, nil
}

// newTestContext is the state of pgbench's client 0 after
// "pgbench -c 1 -j 1 --random-seed=seed -D <testVarTexts>": its random
// state and variables (the -D ones, :scale 1, :client_id 0,
// :default_seed, :random_seed).
func newTestContext(seed uint64, debug *bytes.Buffer) *Context {
	plan := NewSeeds(seed).Plan(1, 1, true)
	vars := &textVars{text: map[string]string{}, vals: map[string]Value{
		"scale":        IntValue(1),
		"client_id":    IntValue(0),
		"default_seed": IntValue(plan.DefaultSeed),
		"random_seed":  IntValue(plan.RandomSeed),
	}}
	for k, t := range testVarTexts {
		vars.text[k] = t
	}
	c := &Context{Vars: vars, Rand: plan.Clients[0], Command: 1}
	if debug != nil {
		c.Debug = debug
	}
	return c
}

func evalString(t *testing.T, src string, ctx *Context) string {
	t.Helper()
	e, err := Parse(src)
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	v, err := e.Eval(ctx)
	if err != nil {
		return "error: " + err.Error()
	}
	return v.DebugString()
}

func TestEval(t *testing.T) {
	for _, c := range append(append([]evalCase(nil), evalCases...), deepValid...) {
		name := c.src
		if len(name) > 60 {
			name = name[:60]
		}
		ctx := newTestContext(1, nil)
		if got := evalString(t, c.src, ctx); got != c.want {
			t.Errorf("%s: got %q, want %q", name, got, c.want)
		}
	}
}

func TestEvalErrorTypes(t *testing.T) {
	ctx := newTestContext(1, nil)
	_, err := MustParse("1/0").Eval(ctx)
	var ee *EvalError
	if !errors.As(err, &ee) || ee.Msg != "division by zero" {
		t.Fatalf("1/0: %#v", err)
	}
	_, err = MustParse(":bad").Eval(ctx)
	var ve *ValueError
	if !errors.As(err, &ve) || ve.Reason != ValueMalformed || ve.Name != "bad" {
		t.Fatalf(":bad: %#v", err)
	}
	// no Vars, no Rand
	_, err = MustParse(":x").Eval(nil)
	if err == nil || err.Error() != `undefined variable "x"` {
		t.Fatalf(":x without vars: %v", err)
	}
	_, err = MustParse("random(1, 2)").Eval(&Context{})
	if err == nil || !strings.Contains(err.Error(), "Context.Rand is nil") {
		t.Fatalf("random without Rand: %v", err)
	}
}

func TestSyntaxErrors(t *testing.T) {
	for _, c := range syntaxCases {
		name := c.src
		if len(name) > 40 {
			name = name[:40]
		}
		e, err := Parse(c.src)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: got %v, %v; want a *SyntaxError", name, e, err)
			continue
		}
		if se.Msg != c.msg || se.Column != c.col {
			t.Errorf("%q: got %q at %d, want %q at %d", name, se.Msg, se.Column, c.msg, c.col)
		}
	}
	_, err := Parse("1 +")
	if err.Error() != "syntax error at column 4" {
		t.Errorf("Error() = %q", err.Error())
	}
	// a newline ends the expression; pgbench would read what follows as
	// another command
	if _, err := Parse("1 + 2\n"); err != nil {
		t.Errorf("trailing newline: %v", err)
	}
	if _, err := Parse("1 + 2\n3"); err == nil || err.(*SyntaxError).Column != 5 {
		t.Errorf("text after newline: %v", err)
	}
	if _, err := Parse("1 +\n 2"); err == nil || err.(*SyntaxError).Msg != "syntax error" || err.(*SyntaxError).Column != 3 {
		t.Errorf("newline inside: %v", err)
	}
	if _, err := Parse("1 +\\\r\n 2"); err != nil {
		t.Errorf("CRLF continuation: %v", err)
	}
}

func TestParseVariable(t *testing.T) {
	for _, c := range valueCases {
		v, err := ParseVariable("x", c.text)
		got := ""
		if err != nil {
			got = "error: " + err.Error()
		} else {
			got = v.DebugString()
		}
		if got != c.want {
			t.Errorf("%q: got %q, want %q", c.text, got, c.want)
		}
	}
	_, err := ParseValue("")
	var ve *ValueError
	if !errors.As(err, &ve) || ve.Reason != ValueEmpty {
		t.Errorf("empty: %v", err)
	}
	if _, err := ParseValue("abc"); err == nil || err.Error() != `malformed variable value: "abc"` {
		t.Errorf("ParseValue(abc): %v", err)
	}
	v, err := ParseValue("-0.0")
	if err != nil || !math.Signbit(v.F) {
		t.Errorf("-0.0: %v %v", v, err)
	}
}

func TestValueString(t *testing.T) {
	cases := []struct {
		v    Value
		want string
	}{
		{NullValue(), "NULL"},
		{BoolValue(true), "true"},
		{BoolValue(false), "false"},
		{IntValue(-42), "-42"},
		{DoubleValue(3.14159265358979), "3.14159265358979"},
		{DoubleValue(0.1), "0.1"},
		{DoubleValue(1e21), "1e+21"},
		{DoubleValue(-1.5e-300), "-1.5e-300"},
		{DoubleValue(123456789012345.6), "123456789012346"},
		{DoubleValue(1234567890123456.0), "1.23456789012346e+15"},
		{DoubleValue(math.NaN()), "NaN"},
		{DoubleValue(math.Inf(1)), "Infinity"},
		{DoubleValue(math.Inf(-1)), "-Infinity"},
		{DoubleValue(5e-324), "4.94065645841247e-324"},
		{DoubleValue(100), "100"},
	}
	for _, c := range cases {
		if got := c.v.String(); got != c.want {
			t.Errorf("%#v: got %q, want %q", c.v, got, c.want)
		}
	}
	if !IntValue(2).Truth() || IntValue(0).Truth() || DoubleValue(0).Truth() || !DoubleValue(math.NaN()).Truth() ||
		NullValue().Truth() || !BoolValue(true).Truth() {
		t.Error("Truth differs from pgbench's valueTruth")
	}
}

func TestVars(t *testing.T) {
	cases := []struct {
		src  string
		want []string
	}{
		{"1 + 2", nil},
		{":a + :b * :a", []string{"a", "b"}},
		{"hash(:v)", []string{"v", "default_seed"}},
		{"hash(:v, 5)", []string{"v"}},
		{"permute(:v, :n) + hash_fnv1a(1)", []string{"v", "n", "default_seed"}},
		{"CASE WHEN :c THEN :x ELSE :y END", []string{"c", "x", "y"}},
	}
	for _, c := range cases {
		got := MustParse(c.src).Vars()
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: Vars() = %v, want %v", c.src, got, c.want)
		}
	}
}

// Values from PostgreSQL's own TAP tests (src/bin/pgbench/t/
// 001_pgbench_with_server.pl, --random-seed=5432) and from a pgbench 15.18
// run with --random-seed=42.
func TestKnownRandomValues(t *testing.T) {
	ctx := newTestContext(5432, nil)
	for _, c := range []evalCase{
		{"random(10, 19)", "int 17"},
		{"random_exponential(100, 199, 10.0)", "int 104"},
		{"random_gaussian(1000, 1999, 10.0)", "int 1498"},
		{"random_zipfian(1, 9, 1.3)", "int 3"},
		{":random_seed", "int 5432"},
	} {
		if got := evalString(t, c.src, ctx); got != c.want {
			t.Errorf("seed 5432: %s = %s, want %s", c.src, got, c.want)
		}
	}
	ctx = newTestContext(42, nil)
	if got := evalString(t, ":default_seed", ctx); got != "int 4306334408478191133" {
		t.Errorf("seed 42: default_seed = %s", got)
	}
	if got := evalString(t, "random(1, 1000000)", ctx); got != "int 668251" {
		t.Errorf("seed 42: random = %s", got)
	}
}

func TestDebugOutput(t *testing.T) {
	var buf bytes.Buffer
	ctx := newTestContext(1, &buf)
	ctx.Script, ctx.Command = 2, 7
	v, err := MustParse("debug(1) > debug(2.5) OR debug(NULL) IS NULL AND debug(true)").Eval(ctx)
	if err != nil || v.DebugString() != "boolean true" {
		t.Fatalf("got %v, %v", v, err)
	}
	// "a > b" is evaluated as "b < a": b first
	want := "debug(script=2,command=7): double 2.5\n" +
		"debug(script=2,command=7): int 1\n" +
		"debug(script=2,command=7): null\n" +
		"debug(script=2,command=7): boolean true\n"
	if buf.String() != want {
		t.Errorf("debug lines:\n%s\nwant:\n%s", buf.String(), want)
	}
	buf.Reset()
	// NULL OR x and false AND x do not evaluate x
	v, err = MustParse("(NULL OR debug(1)) IS NULL AND (false AND debug(2)) IS FALSE").Eval(ctx)
	if err != nil || v.DebugString() != "boolean true" || buf.Len() != 0 {
		t.Fatalf("lazy AND/OR: %v, %v, %q", v, err, buf.String())
	}
	buf.Reset()
	if _, err := MustParse("least(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,debug(16),debug(17))").Eval(ctx); err == nil {
		t.Fatal("17 arguments: no error")
	}
	if buf.String() != "debug(script=2,command=7): int 16\n" {
		t.Errorf("only 16 arguments are evaluated, got %q", buf.String())
	}
}

func TestPRNG(t *testing.T) {
	r := NewPRNG(0)
	seen := map[uint64]bool{}
	for i := 0; i < 1000; i++ {
		u := r.Uint64()
		if seen[u] {
			t.Fatalf("repeated value %d", u)
		}
		seen[u] = true
		d := r.Double()
		if d < 0 || d >= 1 {
			t.Fatalf("Double() = %v", d)
		}
		v := r.Uint64Range(10, 12)
		if v < 10 || v > 12 {
			t.Fatalf("Uint64Range = %d", v)
		}
		if r.Uint64Range(5, 5) != 5 || r.Uint64Range(7, 3) != 7 {
			t.Fatal("empty range must give rmin")
		}
	}
	a, b := NewPRNG(99), NewPRNG(99)
	for i := 0; i < 100; i++ {
		if a.Uint64() != b.Uint64() {
			t.Fatal("same seed, different sequences")
		}
	}
	if NewPRNG(1).Uint64() == NewPRNG(2).Uint64() {
		t.Error("different seeds, same first value")
	}
	if truncInt64(math.NaN()) != math.MinInt64 || truncInt64(1e19) != math.MinInt64 || truncInt64(-3.9) != -3 {
		t.Error("truncInt64 differs from cvttsd2si")
	}
}

// Distribution properties with fixed seeds (deterministic, no timing).
func TestDistributions(t *testing.T) {
	const n = 200000
	r := NewPRNG(12345)
	var sum, sum2 float64
	counts := make([]int, 10)
	for i := 0; i < n; i++ {
		v := r.Rand(1, 10)
		if v < 1 || v > 10 {
			t.Fatalf("random out of range: %d", v)
		}
		counts[v-1]++
	}
	for i, c := range counts {
		if c < n/10*95/100 || c > n/10*105/100 {
			t.Errorf("uniform: value %d drawn %d times of %d", i+1, c, n)
		}
	}
	// gaussian(1, 1001, 4): mean ~ 501, stddev ~ 1001/8
	for i := 0; i < n; i++ {
		v := float64(r.Gaussian(1, 1001, 4))
		if v < 1 || v > 1001 {
			t.Fatalf("gaussian out of range: %v", v)
		}
		sum += v
		sum2 += v * v
	}
	mean := sum / n
	sd := math.Sqrt(sum2/n - mean*mean)
	if math.Abs(mean-501) > 3 || math.Abs(sd-1001.0/8) > 3 {
		t.Errorf("gaussian: mean %.2f sd %.2f, want ~501 and ~125", mean, sd)
	}
	// exponential(0, 999, 5): P(v < 100) = (1-exp(-0.5))/(1-exp(-5))
	low := 0
	for i := 0; i < n; i++ {
		v := r.Exponential(0, 999, 5)
		if v < 0 || v > 999 {
			t.Fatalf("exponential out of range: %d", v)
		}
		if v < 100 {
			low++
		}
	}
	want := (1 - math.Exp(-0.5)) / (1 - math.Exp(-5))
	if got := float64(low) / n; math.Abs(got-want) > 0.01 {
		t.Errorf("exponential: P(v<100) = %.4f, want %.4f", got, want)
	}
	// zipfian(1, 100, 2): frequency of k is proportional to 1/k^2
	zc := make([]int, 101)
	for i := 0; i < n; i++ {
		v := r.Zipfian(1, 100, 2)
		if v < 1 || v > 100 {
			t.Fatalf("zipfian out of range: %d", v)
		}
		zc[v]++
	}
	if ratio := float64(zc[1]) / float64(zc[2]); math.Abs(ratio-4) > 0.2 {
		t.Errorf("zipfian: f(1)/f(2) = %.3f, want ~4", ratio)
	}
	// permute is a bijection of [0, size)
	for size := int64(1); size <= 70; size++ {
		for _, seed := range []int64{0, 1, -7, 5432} {
			got := make([]int64, 0, size)
			for v := int64(0); v < size; v++ {
				got = append(got, Permute(v, size, seed))
			}
			sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
			for i, p := range got {
				if p != int64(i) {
					t.Fatalf("permute(., %d, %d) is not a permutation: %v", size, seed, got)
				}
			}
		}
	}
}

func TestSeeds(t *testing.T) {
	s := NewSeeds(7)
	p := s.Plan(3, 2, true)
	base := NewPRNG(7)
	for i, c := range p.Clients {
		if *c != *NewPRNG(base.Uint64()) {
			t.Fatalf("client %d state differs", i)
		}
	}
	if p.DefaultSeed != int64(base.Uint64()) || !p.DefaultSeedDrawn || p.RandomSeed != 7 {
		t.Fatalf("default seed drawn out of order: %+v", p)
	}
	for i, th := range p.Threads {
		for _, r := range []*PRNG{th.Choose, th.Throttle, th.Sample} {
			if *r != *NewPRNG(base.Uint64()) {
				t.Fatalf("thread %d state differs", i)
			}
		}
	}
	q := NewSeeds(7).Plan(3, 2, false)
	if q.DefaultSeedDrawn || *q.Threads[0].Choose != *NewSeeds(7).Plan(4, 0, false).Clients[3] {
		t.Fatal("without default_seed the threads take its draw")
	}
	if NewSeeds(math.MaxUint64).RandomSeed() != -1 {
		t.Fatal("RandomSeed is the uint64 bits as int64")
	}
}

func TestParseSeed(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"5432", 5432, true},
		{" 12", 12, true},
		{"+3", 3, true},
		{"-1", math.MaxUint64, true},
		{"18446744073709551615", math.MaxUint64, true},
		{"99999999999999999999999", math.MaxUint64, true},
		{"12 ", 0, false},
		{"x", 0, false},
		{"", 0, false},
		{"0x10", 0, false},
		{"time", 0, false},
	}
	for _, c := range cases {
		got, err := ParseSeed(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseSeed(%q) = %d, %v", c.in, got, err)
		}
	}
}

func TestEvalNoAllocation(t *testing.T) {
	ctx := &Context{Vars: MapVars{"scale": IntValue(10), "aid": IntValue(5), "default_seed": IntValue(3)}, Rand: NewPRNG(1)}
	for _, src := range []string{
		"random(1, 100000 * :scale)",
		"random_gaussian(1, 100000 * :scale, 2.5) + random_zipfian(1, 1000, 1.07)",
		"CASE WHEN :aid % 2 = 0 THEN permute(:aid, 1000) ELSE hash(:aid) END",
		"least(:aid, 3, 7.5) * 2 > 1 AND NOT :aid IS NULL",
	} {
		e := MustParse(src)
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := e.Eval(ctx); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per Eval", src, allocs)
		}
	}
}

func TestConstantFolding(t *testing.T) {
	e := MustParse("100000 * 10 + 1")
	if _, ok := e.root.(*constNode); !ok {
		t.Errorf("pure constant expression not folded: %T", e.root)
	}
	for _, src := range []string{"1 / 0", "random(1, 2)", "debug(1)", "CASE WHEN true THEN 1 END"} {
		if _, ok := MustParse(src).root.(*constNode); ok {
			t.Errorf("%s must not be folded", src)
		}
	}
}
