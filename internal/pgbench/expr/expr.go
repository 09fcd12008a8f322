// Package expr is pgbench's expression language (the \set and \if
// expressions of pgbench 15-17 scripts): values, parsing, evaluation, the
// built-in functions and pgbench's pseudo-random generator, giving the same
// values as pgbench for the same inputs and seed.
//
// Sources: src/bin/pgbench/exprparse.y, exprscan.l, pgbench.c (evalFunc,
// makeVariableValue, getHashMurmur2, permute, ...) and src/common/pg_prng.c
// of PostgreSQL 15; the "pgbench" reference page.
//
// Use: Parse the text after "\set name" (or "\if") once, then Eval it per
// transaction with the client's Context: Eval does not allocate. Parse
// reports what pgbench reports for a bad script line (*SyntaxError, with
// pgbench's message and caret column); Eval reports pgbench's run-time
// messages (*EvalError, or the *ValueError of a malformed variable).
// Seeds derives every random state from --random-seed in pgbench's order,
// so a run with the same seed, clients and threads draws the same values.
//
// Exactness: the conformance tests run the real pgbench 15 on the same
// expressions and compare every debug() line, error message and caret
// column. exp(), ln(), pow() and the sine and logarithms of the random
// distributions are correctly rounded (see mathcr.go); glibc's are too
// except for about 0.1% of arguments, where the last bit may differ (this
// shows in a printed 15-digit value for about one argument in 10^5, and
// practically never in a random integer). abs() of a boolean reads an
// uninitialised union in pgbench (its result depends on earlier stack
// contents); here it is the double whose bits are 0 or 1, which is what
// pgbench prints for a boolean constant. random_zipfian() with a NaN
// parameter loops forever in pgbench; here it is the parameter error.
package expr

import "io"

// Kind is the type of a Value (pgbench.h PgBenchValueType).
type Kind uint8

// The kinds of pgbench values.
const (
	Null Kind = iota
	Bool
	Int
	Double
)

// Value is one pgbench value. Only the field of its Kind is meaningful.
type Value struct {
	Kind Kind
	I    int64
	F    float64
	B    bool
}

// Vars gives an expression the client's variables.
type Vars interface {
	// Get returns the value of variable name; ok is false when it is not
	// defined; err is non-nil when its text is not a valid value
	// (pgbench: malformed variable "x" value: "abc").
	Get(name string) (v Value, ok bool, err error)
}

// Context is what one evaluation needs besides the expression.
type Context struct {
	Vars Vars
	// Rand is the client's random state (pgbench's cs_func_rs), used by
	// random*, and advanced by them.
	Rand *PRNG
	// Debug receives debug() lines ("debug(script=0,command=1): int 5").
	Debug io.Writer
	// Script and Command number the debug() lines (0-based script,
	// 1-based command, as pgbench prints them).
	Script, Command int
}
