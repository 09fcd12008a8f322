package expr

import (
	"math"
	"math/big"
)

// Correctly rounded exp, log, pow and sin.
//
// pgbench calls the C library's exp(), log(), pow() and sin() (glibc on
// Linux), whose results are correctly rounded except in rare cases (about
// 0.1% of arguments in our measurements), while Go's math package differs
// from glibc in the last bit for 2% (Log) to 45% (Pow) of arguments. To
// print the same digits as pgbench and draw the same random_gaussian,
// random_exponential and random_zipfian values, these functions compute in
// double-double arithmetic (about 100 bits) and round once to the nearest
// double. Special arguments (zeros, infinities, NaN) follow C99 Annex F,
// as glibc does.

// dd is an unevaluated sum hi+lo of two doubles with |lo| <= ulp(hi)/2.
type dd struct{ hi, lo float64 }

func twoSum(a, b float64) (s, e float64) {
	s = a + b
	bb := s - a
	e = (a - (s - bb)) + (b - bb)
	return
}

func quickTwoSum(a, b float64) (s, e float64) {
	s = a + b
	e = b - (s - a)
	return
}

func twoProd(a, b float64) (p, e float64) {
	p = a * b
	e = math.FMA(a, b, -p)
	return
}

func ddAdd(a, b dd) dd {
	s, e := twoSum(a.hi, b.hi)
	t, f := twoSum(a.lo, b.lo)
	e += t
	s, e = quickTwoSum(s, e)
	e += f
	s, e = quickTwoSum(s, e)
	return dd{s, e}
}

func ddAddF(a dd, b float64) dd {
	s, e := twoSum(a.hi, b)
	e += a.lo
	s, e = quickTwoSum(s, e)
	return dd{s, e}
}

func ddNeg(a dd) dd { return dd{-a.hi, -a.lo} }

func ddMul(a, b dd) dd {
	p, e := twoProd(a.hi, b.hi)
	e += a.hi*b.lo + a.lo*b.hi
	p, e = quickTwoSum(p, e)
	return dd{p, e}
}

func ddMulF(a dd, b float64) dd {
	p, e := twoProd(a.hi, b)
	e += a.lo * b
	p, e = quickTwoSum(p, e)
	return dd{p, e}
}

func ddDiv(a, b dd) dd {
	q1 := a.hi / b.hi
	r := ddAdd(a, ddNeg(ddMulF(b, q1)))
	q2 := r.hi / b.hi
	r = ddAdd(r, ddNeg(ddMulF(b, q2)))
	q3 := r.hi / b.hi
	s, e := quickTwoSum(q1, q2)
	return ddAddF(dd{s, e}, q3)
}

// Constants, computed once from decimal expansions.
var (
	ddLn2    dd
	pio2     [3]float64 // π/2 = pio2[0] + pio2[1] + pio2[2] (about 160 bits)
	invFact  [32]dd     // 1/n!
	exp2Tab  [64]dd     // 2^(j/64)
	invFactF [32]float64
	ddOne    = dd{1, 0}
	sqrtHalf = math.Sqrt2 / 2
)

func init() {
	const prec = 320
	parse := func(s string) *big.Float {
		f, _, err := big.ParseFloat(s, 10, prec, big.ToNearestEven)
		if err != nil {
			panic(err)
		}
		return f
	}
	split := func(f *big.Float, parts []float64) {
		rest := new(big.Float).SetPrec(prec).Set(f)
		for i := range parts {
			parts[i], _ = rest.Float64()
			rest.Sub(rest, new(big.Float).SetFloat64(parts[i]))
		}
	}
	var two [2]float64
	split(parse("0.69314718055994530941723212145817656807550013436025525412068000949339362196969472"), two[:])
	ddLn2 = dd{two[0], two[1]}
	pi := parse("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899862803482534211706798214808651")
	split(new(big.Float).SetPrec(prec).Quo(pi, big.NewFloat(2)), pio2[:])
	f := new(big.Float).SetPrec(prec).SetInt64(1)
	for n := range invFact {
		if n > 0 {
			f.Quo(f, new(big.Float).SetInt64(int64(n)))
		}
		split(f, two[:])
		invFact[n] = dd{two[0], two[1]}
		invFactF[n] = two[0]
	}
	// 2^(1/64) by six square roots, then its powers
	root := new(big.Float).SetPrec(prec).SetInt64(2)
	for i := 0; i < 6; i++ {
		root.Sqrt(root)
	}
	p := new(big.Float).SetPrec(prec).SetInt64(1)
	for j := range exp2Tab {
		split(p, two[:])
		exp2Tab[j] = dd{two[0], two[1]}
		p.Mul(p, root)
	}
}

// ddExpCore returns exp(a) as a double-double mantissa s and a power of two
// k (exp(a) = s·2^k), for |a.hi| <= 746, with a relative error below
// 2^-85: a = (64e+j)·ln2/64 + r, exp(a) = 2^e·2^(j/64)·exp(r), |r| <= ln2/128.
func ddExpCore(a dd) (dd, int) {
	n := math.Round(a.hi * (64 / math.Ln2))
	r := ddAdd(a, ddNeg(ddMulF(dd{ddLn2.hi / 64, ddLn2.lo / 64}, n)))
	ni := int(n)
	j := ni & 63
	e := (ni - j) >> 6
	// exp(r) - 1 = r + r²/2 + r³/6 (double-double) + r⁴/24 + ... (double)
	x := r.hi
	tail := invFactF[10]
	for i := 9; i >= 4; i-- {
		tail = tail*x + invFactF[i]
	}
	x2 := x * x
	tail *= x2 * x2
	r2 := ddMul(r, r)
	q := ddAdd(r, dd{r2.hi * 0.5, r2.lo * 0.5})
	q = ddAdd(q, ddMul(ddMul(r2, r), invFact[3]))
	q = ddAddF(q, tail)
	t := exp2Tab[j]
	return ddAdd(t, ddMul(t, q)), e
}

// roundScaled rounds s·2^k to the nearest double (s a double-double near 1).
func roundScaled(s dd, k int) float64 {
	if k > -1020 {
		return math.Ldexp(s.hi, k) // hi is s rounded; the scaling is exact
	}
	// subnormal or zero result: round once at the subnormal precision
	b := new(big.Float).SetPrec(160).SetFloat64(s.hi)
	b.Add(b, new(big.Float).SetFloat64(s.lo))
	b.SetMantExp(b, k)
	f, _ := b.Float64()
	return f
}

// crExp is exp(x) correctly rounded.
func crExp(x float64) float64 {
	switch {
	case x != x:
		return x
	case x > 709.8:
		return math.Inf(1)
	case x < -745.2:
		return 0
	case x == 0:
		return 1
	}
	s, k := ddExpCore(dd{x, 0})
	return roundScaled(s, k)
}

// ddLog returns log(x) for finite x > 0 as a double-double.
func ddLog(x float64) dd {
	m, e := math.Frexp(x) // x = m·2^e, m in [0.5, 1)
	if m < sqrtHalf {
		m *= 2
		e--
	}
	f := m - 1 // exact
	var y dd
	if math.Abs(f) < 0x1p-20 {
		// log1p(f) = f - f²/2 + f³/3 - ...
		y = dd{0, 0}
		for n := 7; n >= 1; n-- {
			c := ddDiv(ddOne, dd{float64(n), 0})
			if n%2 == 0 {
				c = ddNeg(c)
			}
			y = ddMulF(ddAdd(y, c), f)
		}
	} else {
		// one Newton step on exp from the double logarithm:
		// y1 = y0 + m·exp(-y0) - 1
		y0 := math.Log(m)
		s, k := ddExpCore(dd{-y0, 0})
		s = dd{math.Ldexp(s.hi, k), math.Ldexp(s.lo, k)}
		t := ddAddF(ddMulF(s, m), -1)
		y = ddAddF(t, y0)
	}
	if e != 0 {
		y = ddAdd(y, ddMulF(ddLn2, float64(e)))
	}
	return y
}

// crLog is log(x) correctly rounded.
func crLog(x float64) float64 {
	switch {
	case x != x || x < 0:
		return math.Log(x) // NaN
	case x == 0:
		return math.Inf(-1)
	case math.IsInf(x, 1):
		return x
	case x == 1:
		return 0
	}
	y := ddLog(x)
	return y.hi + y.lo
}

// crPow is pow(x, y) correctly rounded for finite non-zero x and y; the
// special cases are C99's (as math.Pow implements them).
func crPow(x, y float64) float64 {
	if x == 0 || y == 0 || x == 1 || math.IsInf(x, 0) || math.IsInf(y, 0) || x != x || y != y {
		return math.Pow(x, y)
	}
	neg := false
	if x < 0 {
		if y != math.Trunc(y) {
			return math.NaN()
		}
		// odd integer exponent keeps the sign
		if math.Abs(y) < 0x1p53 && math.Mod(y, 2) != 0 {
			neg = true
		}
		x = -x
	}
	var r float64
	if y == math.Trunc(y) && math.Abs(y) <= 64 {
		r = powInt(x, int(y))
	} else {
		p := ddMulF(ddLog(x), y)
		switch {
		case p.hi > 709.8:
			r = math.Inf(1)
		case p.hi < -745.2:
			r = 0
		default:
			s, k := ddExpCore(p)
			r = roundScaled(s, k)
		}
	}
	if neg {
		return -r
	}
	return r
}

// powInt is x^n for a small integer n by double-double squaring, exact
// when the result fits in 106 bits.
func powInt(x float64, n int) float64 {
	neg := n < 0
	if neg {
		n = -n
	}
	// keep the mantissa near 1 and the exponent apart to avoid overflow
	m, e := math.Frexp(x)
	acc, base := ddOne, dd{m, 0}
	ke, be := 0, e
	for n > 0 {
		if n&1 == 1 {
			acc = ddMul(acc, base)
			ke += be
			am, ae := math.Frexp(acc.hi)
			acc = dd{am, math.Ldexp(acc.lo, -ae)}
			ke += ae
		}
		n >>= 1
		if n > 0 {
			base = ddMul(base, base)
			be *= 2
			bm, bx := math.Frexp(base.hi)
			base = dd{bm, math.Ldexp(base.lo, -bx)}
			be += bx
		}
	}
	if neg {
		acc = ddDiv(ddOne, acc)
		ke = -ke
		am, ae := math.Frexp(acc.hi)
		acc = dd{am, math.Ldexp(acc.lo, -ae)}
		ke += ae
	}
	switch {
	case ke > 1025:
		return math.Inf(1)
	case ke < -1080:
		return 0
	}
	return roundScaled(acc, ke)
}

// crSin is sin(x) correctly rounded for |x| <= 2^20 (pgbench only takes
// sin(2π·u), u in (0, 1]); larger arguments use math.Sin.
func crSin(x float64) float64 {
	if x != x || math.IsInf(x, 0) {
		return math.NaN()
	}
	if x == 0 || math.Abs(x) > 0x1p20 {
		return math.Sin(x)
	}
	k := math.Round(x / (math.Pi / 2))
	p1, e1 := twoProd(k, pio2[0])
	p2, e2 := twoProd(k, pio2[1])
	r := ddAdd(dd{x, 0}, ddNeg(dd{p1, e1}))
	r = ddAdd(r, ddNeg(dd{p2, e2}))
	r = ddAddF(r, -k*pio2[2])
	var v dd
	switch int64(k) & 3 {
	case 0:
		v = ddSinTaylor(r)
	case 1:
		v = ddCosTaylor(r)
	case 2:
		v = ddNeg(ddSinTaylor(r))
	default:
		v = ddNeg(ddCosTaylor(r))
	}
	return v.hi + v.lo
}

// ddSinTaylor is sin(r) for |r| <= π/4 (+ rounding): the terms from r¹³
// on are summed in double precision (they are below 2^-32).
func ddSinTaylor(r dd) dd {
	r2 := ddMul(r, r)
	x := r2.hi
	tail := signedInvFact(29).hi
	for n := 27; n >= 13; n -= 2 {
		tail = tail*x + signedInvFact(n).hi
	}
	s := dd{tail, 0}
	for n := 11; n >= 1; n -= 2 {
		s = ddAdd(ddMul(s, r2), signedInvFact(n))
	}
	return ddMul(s, r)
}

// ddCosTaylor is cos(r) for |r| <= π/4 (+ rounding), likewise.
func ddCosTaylor(r dd) dd {
	r2 := ddMul(r, r)
	x := r2.hi
	tail := signedInvFact(30).hi
	for n := 28; n >= 12; n -= 2 {
		tail = tail*x + signedInvFact(n).hi
	}
	s := dd{tail, 0}
	for n := 10; n >= 0; n -= 2 {
		s = ddAdd(ddMul(s, r2), signedInvFact(n))
	}
	return s
}

// signedInvFact is the Taylor coefficient of sin/cos for x^n: ±1/n!.
func signedInvFact(n int) dd {
	if (n/2)%2 == 1 {
		return ddNeg(invFact[n])
	}
	return invFact[n]
}
