package expr

import (
	"errors"
	"io"
	"testing"
)

// BenchmarkEval measures the per-transaction cost of the usual pgbench
// expression (the aid of the built-in tpcb-like script).
func BenchmarkEval(b *testing.B) {
	e := MustParse("random(1, 100000 * :scale)")
	ctx := &Context{Vars: MapVars{"scale": IntValue(10)}, Rand: NewPRNG(1)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Eval(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEvalMixed is a heavier expression: gaussian draw, CASE, hash.
func BenchmarkEvalMixed(b *testing.B) {
	e := MustParse("CASE WHEN :aid % 2 = 0 THEN random_gaussian(1, 100000 * :scale, 2.5) ELSE hash(:aid) % 1000 END")
	ctx := &Context{Vars: MapVars{"scale": IntValue(10), "aid": IntValue(4), "default_seed": IntValue(7)}, Rand: NewPRNG(1)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Eval(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(" random(1, 100000 * :scale)"); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzParse: Parse never panics, reports errors as *SyntaxError with a
// column inside the source, and what it accepts evaluates without panic.
func FuzzParse(f *testing.F) {
	for _, c := range evalCases {
		f.Add(c.src)
	}
	for _, c := range syntaxCases {
		if len(c.src) < 200 {
			f.Add(c.src)
		}
	}
	for _, s := range randomLines {
		f.Add(s)
	}
	vars := MapVars{
		"i": IntValue(7), "d": DoubleValue(2.5), "b": BoolValue(true), "n": NullValue(),
		"default_seed": IntValue(5432), "scale": IntValue(1), "v0": IntValue(3),
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := Parse(src)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q): %T %v", src, err, err)
			}
			if se.Column < 0 || se.Column > len(src) {
				t.Fatalf("Parse(%q): column %d out of range", src, se.Column)
			}
			return
		}
		ctx := &Context{Vars: vars, Rand: NewPRNG(uint64(len(src))), Debug: io.Discard}
		v, err := e.Eval(ctx)
		if err == nil {
			_ = v.String()
			_ = v.DebugString()
		}
		_ = e.Vars()
	})
}
