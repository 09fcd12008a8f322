package expr

import (
	"math"
	"strconv"
)

// EvalError is a run-time error of an expression, with pgbench's message
// (e.g. "division by zero", "bigint add out of range", "cannot coerce
// boolean to int", "undefined variable \"x\""). pgbench then aborts the
// client ("evaluation of meta-command failed") and exits with status 2.
type EvalError struct{ Msg string }

func (e *EvalError) Error() string { return e.Msg }

func evalErr(msg string) error { return &EvalError{Msg: msg} }

// fn identifies a built-in function or operator (pgbench.h PgBenchFunction).
type fn uint8

const (
	fAdd fn = iota
	fSub
	fMul
	fDiv
	fMod
	fEq
	fNe
	fLe
	fLt
	fBitAnd
	fBitOr
	fBitXor
	fShl
	fShr
	fNot
	fIs
	fAbs
	fDebug
	fDouble
	fSqrt
	fLn
	fExp
	fInt
	fPi
	fLeast
	fGreatest
	fRandom
	fRandomGaussian
	fRandomExponential
	fRandomZipfian
	fPow
	fHashMurmur2
	fHashFnv1a
	fPermute
)

// pure reports whether f has no side effect and no dependency on the
// context (so it can be folded when its arguments are constants).
func (f fn) pure() bool {
	switch f {
	case fDebug, fRandom, fRandomGaussian, fRandomExponential, fRandomZipfian:
		return false
	}
	return true
}

// maxFArgs is pgbench's MAX_FARGS: a standard function evaluates at most
// this many arguments, then fails.
const maxFArgs = 16

// Eval evaluates e for one client, like pgbench's evaluateExpr: arguments
// left to right (for a > b and a >= b, b first, as pgbench rewrites them to
// b < a and b <= a), AND, OR and CASE lazily, any other function or
// operator returning null when an argument is null (except IS and
// debug()). random*() draw from ctx.Rand; debug() writes to ctx.Debug.
// Errors are *EvalError, or the error ctx.Vars returned. Eval does not
// allocate unless it fails or calls debug() (given a Vars that does not
// allocate).
func (e *Expr) Eval(ctx *Context) (Value, error) {
	if ctx == nil {
		ctx = &Context{}
	}
	return e.root.eval(ctx)
}

type node interface {
	eval(c *Context) (Value, error)
}

type constNode struct{ v Value }

func (n *constNode) eval(*Context) (Value, error) { return n.v, nil }

type varNode struct{ name string }

func (n *varNode) eval(c *Context) (Value, error) {
	if c.Vars == nil {
		return Value{}, evalErr("undefined variable \"" + n.name + "\"")
	}
	v, ok, err := c.Vars.Get(n.name)
	if err != nil {
		return Value{}, err
	}
	if !ok {
		return Value{}, evalErr("undefined variable \"" + n.name + "\"")
	}
	return v, nil
}

// unNode is a one-argument standard function.
type unNode struct {
	f fn
	x node
}

func (n *unNode) eval(c *Context) (Value, error) {
	v, err := n.x.eval(c)
	if err != nil {
		return Value{}, err
	}
	if v.Kind == Null && n.f != fDebug {
		return Value{}, nil
	}
	a := [1]Value{v}
	return apply(c, n.f, a[:])
}

// binNode is a two-argument standard function or operator.
type binNode struct {
	f    fn
	l, r node
}

func (n *binNode) eval(c *Context) (Value, error) {
	l, err := n.l.eval(c)
	if err != nil {
		return Value{}, err
	}
	r, err := n.r.eval(c)
	if err != nil {
		return Value{}, err
	}
	if (l.Kind == Null || r.Kind == Null) && n.f != fIs {
		return Value{}, nil
	}
	switch n.f { // fast paths of the usual integer arithmetic
	case fAdd:
		if l.Kind == Int && r.Kind == Int {
			s := l.I + r.I
			if (s > l.I) == (r.I > 0) {
				return Value{Kind: Int, I: s}, nil
			}
			return Value{}, evalErr("bigint add out of range")
		}
	case fMul:
		if l.Kind == Int && r.Kind == Int {
			if p, ok := mul64(l.I, r.I); ok {
				return Value{Kind: Int, I: p}, nil
			}
			return Value{}, evalErr("bigint mul out of range")
		}
	case fRandom:
		if l.Kind == Int && r.Kind == Int && l.I <= r.I && c.Rand != nil {
			if d := r.I - l.I; d >= 0 && d < math.MaxInt64 {
				return Value{Kind: Int, I: c.Rand.Rand(l.I, r.I)}, nil
			}
		}
	}
	a := [2]Value{l, r}
	return apply(c, n.f, a[:])
}

// callNode is a standard function with 0 or 3+ arguments (or a variadic
// one).
type callNode struct {
	f    fn
	args []node
}

func (n *callNode) eval(c *Context) (Value, error) {
	var a [maxFArgs]Value
	k := len(n.args)
	if k > maxFArgs {
		k = maxFArgs
	}
	hasNull := false
	for i := 0; i < k; i++ {
		v, err := n.args[i].eval(c)
		if err != nil {
			return Value{}, err
		}
		a[i] = v
		hasNull = hasNull || v.Kind == Null
	}
	if len(n.args) > maxFArgs {
		return Value{}, evalErr("too many function arguments, maximum is " + strconv.Itoa(maxFArgs))
	}
	if hasNull && n.f != fDebug && n.f != fIs {
		return Value{}, nil
	}
	return apply(c, n.f, a[:k])
}

type andNode struct{ l, r node }

func (n *andNode) eval(c *Context) (Value, error) {
	a, err := n.l.eval(c)
	if err != nil {
		return Value{}, err
	}
	if a.Kind == Null {
		return Value{}, nil
	}
	if a.Kind != Bool {
		return Value{}, coerceBoolErr(a)
	}
	if !a.B {
		return BoolValue(false), nil
	}
	b, err := n.r.eval(c)
	if err != nil {
		return Value{}, err
	}
	if b.Kind == Null {
		return Value{}, nil
	}
	if b.Kind != Bool {
		return Value{}, coerceBoolErr(b)
	}
	return b, nil
}

type orNode struct{ l, r node }

func (n *orNode) eval(c *Context) (Value, error) {
	a, err := n.l.eval(c)
	if err != nil {
		return Value{}, err
	}
	if a.Kind == Null {
		return Value{}, nil
	}
	if a.Kind != Bool {
		return Value{}, coerceBoolErr(a)
	}
	if a.B {
		return BoolValue(true), nil
	}
	b, err := n.r.eval(c)
	if err != nil {
		return Value{}, err
	}
	if b.Kind == Null {
		return Value{}, nil
	}
	if b.Kind != Bool {
		return Value{}, coerceBoolErr(b)
	}
	return b, nil
}

type caseNode struct {
	conds, thens []node
	els          node
}

func (n *caseNode) eval(c *Context) (Value, error) {
	for i, cond := range n.conds {
		v, err := cond.eval(c)
		if err != nil {
			return Value{}, err
		}
		if v.Truth() {
			return n.thens[i].eval(c)
		}
	}
	return n.els.eval(c)
}

// Constructors fold calls of pure functions on constants when that
// succeeds (a failing one is left to fail at run time, as in pgbench).

func fold(n node, args ...node) node {
	for _, a := range args {
		if _, ok := a.(*constNode); !ok {
			return n
		}
	}
	v, err := n.eval(&Context{})
	if err != nil {
		return n
	}
	return &constNode{v: v}
}

func newBin(f fn, l, r node) node {
	n := &binNode{f: f, l: l, r: r}
	if !f.pure() {
		return n
	}
	return fold(n, l, r)
}

func newNot(x node) node { return fold(&unNode{f: fNot, x: x}, x) }

func newIs(x node, v Value) node { return fold(&binNode{f: fIs, l: x, r: &constNode{v: v}}, x) }

func newCall(f fn, args []node) node {
	var n node
	switch len(args) {
	case 1:
		if f != fLeast && f != fGreatest {
			n = &unNode{f: f, x: args[0]}
		}
	case 2:
		if f != fLeast && f != fGreatest {
			n = &binNode{f: f, l: args[0], r: args[1]}
		}
	}
	if n == nil {
		n = &callNode{f: f, args: args}
	}
	if !f.pure() {
		return n
	}
	return fold(n, args...)
}

// Coercions (pgbench.c coerceToBool, coerceToInt, coerceToDouble).

func coerceBoolErr(v Value) error {
	return evalErr("cannot coerce " + v.TypeName() + " to boolean")
}

func toInt(v Value) (int64, error) {
	switch v.Kind {
	case Int:
		return v.I, nil
	case Double:
		d := math.RoundToEven(v.F) // rint()
		if math.IsNaN(d) || !(d >= -0x1p63 && d < 0x1p63) {
			return 0, evalErr("double to int overflow for " + formatF6(d))
		}
		return int64(d), nil
	}
	return 0, evalErr("cannot coerce " + v.TypeName() + " to int")
}

func toDouble(v Value) (float64, error) {
	switch v.Kind {
	case Double:
		return v.F, nil
	case Int:
		return float64(v.I), nil
	}
	return 0, evalErr("cannot coerce " + v.TypeName() + " to double")
}

// mul64 multiplies with pg_mul_s64_overflow's overflow detection.
func mul64(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	p := a * b
	if (p < 0) != ((a < 0) != (b < 0)) || p/b != a {
		return 0, false
	}
	return p, true
}

// apply runs a standard (non-lazy) function on evaluated, non-null (except
// for IS and debug) arguments: pgbench.c evalStandardFunc.
func apply(c *Context, f fn, a []Value) (Value, error) {
	switch f {
	case fAdd, fSub, fMul, fDiv, fMod, fEq, fNe, fLe, fLt:
		l, r := a[0], a[1]
		if (l.Kind == Double || r.Kind == Double) && f != fMod {
			ld, err := toDouble(l)
			if err != nil {
				return Value{}, err
			}
			rd, err := toDouble(r)
			if err != nil {
				return Value{}, err
			}
			switch f {
			case fAdd:
				return DoubleValue(ld + rd), nil
			case fSub:
				return DoubleValue(ld - rd), nil
			case fMul:
				return DoubleValue(ld * rd), nil
			case fDiv:
				return DoubleValue(ld / rd), nil
			case fEq:
				return BoolValue(ld == rd), nil
			case fNe:
				return BoolValue(ld != rd), nil
			case fLe:
				return BoolValue(ld <= rd), nil
			default:
				return BoolValue(ld < rd), nil
			}
		}
		li, err := toInt(l)
		if err != nil {
			return Value{}, err
		}
		ri, err := toInt(r)
		if err != nil {
			return Value{}, err
		}
		switch f {
		case fAdd:
			s := li + ri
			if (s > li) != (ri > 0) {
				return Value{}, evalErr("bigint add out of range")
			}
			return IntValue(s), nil
		case fSub:
			d := li - ri
			if (d < li) != (ri > 0) {
				return Value{}, evalErr("bigint sub out of range")
			}
			return IntValue(d), nil
		case fMul:
			p, ok := mul64(li, ri)
			if !ok {
				return Value{}, evalErr("bigint mul out of range")
			}
			return IntValue(p), nil
		case fEq:
			return BoolValue(li == ri), nil
		case fNe:
			return BoolValue(li != ri), nil
		case fLe:
			return BoolValue(li <= ri), nil
		case fLt:
			return BoolValue(li < ri), nil
		}
		// fDiv, fMod
		if ri == 0 {
			return Value{}, evalErr("division by zero")
		}
		if ri == -1 {
			if f == fMod {
				return IntValue(0), nil
			}
			if li == math.MinInt64 {
				return Value{}, evalErr("bigint div out of range")
			}
			return IntValue(-li), nil
		}
		if f == fDiv {
			return IntValue(li / ri), nil
		}
		return IntValue(li % ri), nil

	case fBitAnd, fBitOr, fBitXor, fShl, fShr:
		li, err := toInt(a[0])
		if err != nil {
			return Value{}, err
		}
		ri, err := toInt(a[1])
		if err != nil {
			return Value{}, err
		}
		switch f {
		case fBitAnd:
			return IntValue(li & ri), nil
		case fBitOr:
			return IntValue(li | ri), nil
		case fBitXor:
			return IntValue(li ^ ri), nil
		case fShl: // x86-64 masks the shift count to 6 bits
			return IntValue(li << (uint64(ri) & 63)), nil
		default:
			return IntValue(li >> (uint64(ri) & 63)), nil
		}

	case fNot:
		if a[0].Kind != Bool {
			return Value{}, coerceBoolErr(a[0])
		}
		return BoolValue(!a[0].B), nil

	case fIs: // the second argument is the NULL, TRUE or FALSE constant
		return BoolValue(a[0].Kind == a[1].Kind && (a[0].Kind != Bool || a[0].B == a[1].B)), nil

	case fPi:
		return DoubleValue(math.Pi), nil

	case fAbs:
		v := a[0]
		if v.Kind == Int {
			if v.I < 0 {
				return IntValue(-v.I), nil
			}
			return v, nil
		}
		d := v.F
		if v.Kind == Bool { // pgbench reads the union's double: bits 0 or 1
			d = 0
			if v.B {
				d = math.Float64frombits(1)
			}
		}
		if d < 0 {
			d = -d
		}
		return DoubleValue(d), nil

	case fDebug:
		writeDebug(c, a[0])
		return a[0], nil

	case fDouble, fSqrt, fLn, fExp:
		d, err := toDouble(a[0])
		if err != nil {
			return Value{}, err
		}
		switch f {
		case fSqrt:
			d = math.Sqrt(d)
		case fLn:
			d = crLog(d)
		case fExp:
			d = crExp(d)
		}
		return DoubleValue(d), nil

	case fInt:
		i, err := toInt(a[0])
		if err != nil {
			return Value{}, err
		}
		return IntValue(i), nil

	case fLeast, fGreatest:
		haveDouble := false
		for _, v := range a {
			if v.Kind == Double {
				haveDouble = true
				break
			}
		}
		if haveDouble {
			ext, err := toDouble(a[0])
			if err != nil {
				return Value{}, err
			}
			for _, v := range a[1:] {
				d, err := toDouble(v)
				if err != nil {
					return Value{}, err
				}
				if f == fLeast {
					if !(ext < d) { // Min(x, y): x < y ? x : y
						ext = d
					}
				} else if !(ext > d) {
					ext = d
				}
			}
			return DoubleValue(ext), nil
		}
		ext, err := toInt(a[0])
		if err != nil {
			return Value{}, err
		}
		for _, v := range a[1:] {
			i, err := toInt(v)
			if err != nil {
				return Value{}, err
			}
			if f == fLeast {
				if !(ext < i) {
					ext = i
				}
			} else if !(ext > i) {
				ext = i
			}
		}
		return IntValue(ext), nil

	case fRandom, fRandomGaussian, fRandomExponential, fRandomZipfian:
		return randomFunc(c, f, a)

	case fPow:
		x, err := toDouble(a[0])
		if err != nil {
			return Value{}, err
		}
		y, err := toDouble(a[1])
		if err != nil {
			return Value{}, err
		}
		return DoubleValue(crPow(x, y)), nil

	case fHashMurmur2, fHashFnv1a:
		v, err := toInt(a[0])
		if err != nil {
			return Value{}, err
		}
		seed, err := toInt(a[1])
		if err != nil {
			return Value{}, err
		}
		if f == fHashMurmur2 {
			return IntValue(HashMurmur2(v, uint64(seed))), nil
		}
		return IntValue(HashFnv1a(v, uint64(seed))), nil

	case fPermute:
		v, err := toInt(a[0])
		if err != nil {
			return Value{}, err
		}
		size, err := toInt(a[1])
		if err != nil {
			return Value{}, err
		}
		seed, err := toInt(a[2])
		if err != nil {
			return Value{}, err
		}
		if size <= 0 {
			return Value{}, evalErr("permute size parameter must be greater than zero")
		}
		return IntValue(Permute(v, size, seed)), nil
	}
	return Value{}, evalErr("internal error: unknown function " + strconv.Itoa(int(f)))
}

// Parameter bounds of pgbench.c.
const (
	minGaussianParam = 2.0
	minZipfianParam  = 1.001
	maxZipfianParam  = 1000.0
)

func randomFunc(c *Context, f fn, a []Value) (Value, error) {
	imin, err := toInt(a[0])
	if err != nil {
		return Value{}, err
	}
	imax, err := toInt(a[1])
	if err != nil {
		return Value{}, err
	}
	if imin > imax {
		return Value{}, evalErr("empty range given to random")
	}
	if d := imax - imin; d < 0 || d == math.MaxInt64 { // imax-imin+1 overflows
		return Value{}, evalErr("random range is too large")
	}
	if c.Rand == nil {
		return Value{}, evalErr("random function called without a random state (Context.Rand is nil)")
	}
	if f == fRandom {
		return IntValue(c.Rand.Rand(imin, imax)), nil
	}
	param, err := toDouble(a[2])
	if err != nil {
		return Value{}, err
	}
	switch f {
	case fRandomGaussian:
		if param < minGaussianParam {
			return Value{}, evalErr("gaussian parameter must be at least " + formatF6(minGaussianParam) + " (not " + formatF6(param) + ")")
		}
		return IntValue(c.Rand.Gaussian(imin, imax, param)), nil
	case fRandomZipfian:
		// pgbench loops forever on a NaN parameter; reject it instead.
		if param < minZipfianParam || param > maxZipfianParam || math.IsNaN(param) {
			return Value{}, evalErr("zipfian parameter must be in range [1.001, 1000] (not " + formatF6(param) + ")")
		}
		return IntValue(c.Rand.Zipfian(imin, imax, param)), nil
	default:
		if param <= 0.0 {
			return Value{}, evalErr("exponential parameter must be greater than zero (not " + formatF6(param) + ")")
		}
		return IntValue(c.Rand.Exponential(imin, imax, param)), nil
	}
}

// writeDebug writes pgbench's debug() line.
func writeDebug(c *Context, v Value) {
	if c.Debug == nil {
		return
	}
	b := make([]byte, 0, 64)
	b = append(b, "debug(script="...)
	b = strconv.AppendInt(b, int64(c.Script), 10)
	b = append(b, ",command="...)
	b = strconv.AppendInt(b, int64(c.Command), 10)
	b = append(b, "): "...)
	b = append(b, v.DebugString()...)
	b = append(b, '\n')
	_, _ = c.Debug.Write(b)
}

// MapVars is a Vars holding values already parsed (e.g. with
// ParseVariable); a missing name is undefined.
type MapVars map[string]Value

// Get implements Vars.
func (m MapVars) Get(name string) (Value, bool, error) {
	v, ok := m[name]
	return v, ok, nil
}
