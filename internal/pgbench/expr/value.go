package expr

import (
	"math"
	"math/big"
	"strconv"
	"strings"
)

// IntValue returns an int Value.
func IntValue(i int64) Value { return Value{Kind: Int, I: i} }

// DoubleValue returns a double Value.
func DoubleValue(f float64) Value { return Value{Kind: Double, F: f} }

// BoolValue returns a boolean Value.
func BoolValue(b bool) Value { return Value{Kind: Bool, B: b} }

// NullValue returns the null Value.
func NullValue() Value { return Value{} }

// String is the text pgbench substitutes for a variable holding v
// (pgbench.c getVariable): "NULL", "true"/"false", the integer in decimal,
// or the double as printf("%.15g") (DBL_DIG digits) with PostgreSQL's
// snprintf spelling of "NaN", "Infinity" and "-Infinity".
func (v Value) String() string {
	switch v.Kind {
	case Null:
		return "NULL"
	case Bool:
		if v.B {
			return "true"
		}
		return "false"
	case Int:
		return strconv.FormatInt(v.I, 10)
	case Double:
		return formatG15(v.F)
	}
	return "?"
}

// DebugString is what pgbench's debug() prints after "debug(...): "
// (pgbench.c evalStandardFunc, PGBENCH_DEBUG): "null", "boolean true",
// "int 5", "double 3.14159265358979".
func (v Value) DebugString() string {
	switch v.Kind {
	case Null:
		return "null"
	case Bool:
		return "boolean " + v.String()
	case Int:
		return "int " + v.String()
	case Double:
		return "double " + v.String()
	}
	return "?"
}

// TypeName is pgbench's valueTypeName: "null", "boolean", "int", "double".
func (v Value) TypeName() string {
	switch v.Kind {
	case Null:
		return "null"
	case Bool:
		return "boolean"
	case Int:
		return "int"
	case Double:
		return "double"
	}
	return "none"
}

// Truth is pgbench's valueTruth, the condition of \if and \elif and of
// CASE WHEN: null is false, a boolean is itself, a number is true when
// non-zero.
func (v Value) Truth() bool {
	switch v.Kind {
	case Bool:
		return v.B
	case Int:
		return v.I != 0
	case Double:
		return v.F != 0
	}
	return false
}

// formatG15 is C's printf("%.15g") through PostgreSQL's snprintf
// (src/port/snprintf.c spells NaN and infinities itself).
func formatG15(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	const prec = 15
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', prec-1, 64)
	ei := len(e) - 1
	for e[ei] != 'e' {
		ei--
	}
	x, _ := strconv.Atoi(string(e[ei+1:]))
	if x < -4 || x >= prec {
		mant := trimFracZeros(e[:ei])
		return string(mant) + string(e[ei:])
	}
	fixed := strconv.AppendFloat(buf[:0], f, 'f', prec-1-x, 64)
	return string(trimFracZeros(fixed))
}

// trimFracZeros drops trailing zeros of a fraction, and the point if no
// digit is left after it (the %g rule).
func trimFracZeros(b []byte) []byte {
	dot := -1
	for i, c := range b {
		if c == '.' {
			dot = i
			break
		}
	}
	if dot < 0 {
		return b
	}
	n := len(b)
	for n > dot+1 && b[n-1] == '0' {
		n--
	}
	if n == dot+1 {
		n = dot
	}
	return b[:n]
}

// formatF6 is printf("%f") through PostgreSQL's snprintf, used in
// pgbench's error messages.
func formatF6(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return strconv.FormatFloat(f, 'f', 6, 64)
}

// ValueError is why a variable's text is not a pgbench value
// (pgbench.c makeVariableValue). Error() is pgbench's message for it.
type ValueError struct {
	// Name is the variable's name ("" from ParseValue).
	Name string
	// Text is the variable's text.
	Text string
	// Reason is one of ValueEmpty, ValueIntRange, ValueIntSyntax,
	// ValueMalformed.
	Reason int
}

// ValueError reasons.
const (
	// ValueEmpty: the text is "" (pgbench fails without a message).
	ValueEmpty = iota + 1
	// ValueIntRange: the text looks like an integer but overflows int64.
	ValueIntRange
	// ValueIntSyntax: the text is only a sign and/or white space.
	ValueIntSyntax
	// ValueMalformed: the text is no boolean, null, integer or double.
	ValueMalformed
)

func (e *ValueError) Error() string {
	switch e.Reason {
	case ValueEmpty:
		if e.Name == "" {
			return "empty variable value"
		}
		return "variable \"" + e.Name + "\" has an empty value"
	case ValueIntRange:
		return "value \"" + e.Text + "\" is out of range for type bigint"
	case ValueIntSyntax:
		return "invalid input syntax for type bigint: \"" + e.Text + "\""
	}
	if e.Name == "" {
		return "malformed variable value: \"" + e.Text + "\""
	}
	return "malformed variable \"" + e.Name + "\" value: \"" + e.Text + "\""
}

// ParseValue converts the text of a variable (from -D, \gset, \setshell)
// into a value the way pgbench's makeVariableValue does:
//
//   - "null" in any case is null;
//   - a case-insensitive prefix of "true" or "yes", or "on", is true;
//     a prefix of "false" or "no", or "off" or "of", is false;
//   - optional white space, an optional sign and digits is an int
//     (overflow is an error);
//   - anything C's strtod accepts whole (decimal, hex, "inf", "nan",
//     leading white space) is a double; overflow and inexact underflow
//     (ERANGE) are errors.
//
// Errors are *ValueError; use ParseVariable to get pgbench's message
// naming the variable.
func ParseValue(s string) (Value, error) { return ParseVariable("", s) }

// ParseVariable is ParseValue for variable name, whose errors read
// exactly like pgbench's (malformed variable "x" value: "abc").
func ParseVariable(name, s string) (Value, error) {
	if s == "" {
		return Value{}, &ValueError{Name: name, Text: s, Reason: ValueEmpty}
	}
	if equalFoldASCII(s, "null") {
		return Value{}, nil
	}
	if prefixFold(s, "true") || prefixFold(s, "yes") || equalFoldASCII(s, "on") {
		return BoolValue(true), nil
	}
	if prefixFold(s, "false") || prefixFold(s, "no") || equalFoldASCII(s, "off") || equalFoldASCII(s, "of") {
		return BoolValue(false), nil
	}
	if isAnInt(s) {
		i, reason := strtoint64(s)
		if reason != 0 {
			return Value{}, &ValueError{Name: name, Text: s, Reason: reason}
		}
		return IntValue(i), nil
	}
	f, ok := strtodouble(s)
	if !ok {
		return Value{}, &ValueError{Name: name, Text: s, Reason: ValueMalformed}
	}
	return DoubleValue(f), nil
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func equalFoldASCII(s, t string) bool {
	if len(s) != len(t) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if lowerASCII(s[i]) != lowerASCII(t[i]) {
			return false
		}
	}
	return true
}

// prefixFold is pg_strncasecmp(s, word, strlen(s)) == 0 for non-empty s.
func prefixFold(s, word string) bool {
	return len(s) <= len(word) && equalFoldASCII(s, word[:len(s)])
}

func isCSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isAnInt is pgbench's is_an_int: "^\s*[-+]?[0-9]*$" in effect (a lone
// sign or only spaces pass, and then fail in strtoint64).
func isAnInt(s string) bool {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	if i < len(s) && !isDigit(s[i]) {
		return false
	}
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i == len(s)
}

// strtoint64 is pgbench's strtoint64: optional white space, sign, digits,
// optional trailing white space. It returns a ValueError reason on error.
func strtoint64(s string) (int64, int) {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	} else if i < len(s) && s[i] == '+' {
		i++
	}
	if i >= len(s) || !isDigit(s[i]) {
		return 0, ValueIntSyntax
	}
	var tmp int64 // accumulated as a negative number, as pgbench does
	for i < len(s) && isDigit(s[i]) {
		d := int64(s[i] - '0')
		i++
		if tmp < (math.MinInt64+d)/10 {
			return 0, ValueIntRange
		}
		tmp = tmp*10 - d
	}
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	if i != len(s) {
		return 0, ValueIntSyntax
	}
	if !neg {
		if tmp == math.MinInt64 {
			return 0, ValueIntRange
		}
		tmp = -tmp
	}
	return tmp, 0
}

// strtodouble is pgbench's strtodouble: glibc strtod over the whole
// string, failing on ERANGE (overflow, or an inexact result below
// DBL_MIN) or on trailing characters.
func strtodouble(s string) (float64, bool) {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	start := i
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	rest := s[i:]
	switch {
	case hasPrefixFold(rest, "inf"):
		n := 3
		if hasPrefixFold(rest, "infinity") {
			n = 8
		}
		if n != len(rest) {
			return 0, false
		}
		if neg {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	case hasPrefixFold(rest, "nan"):
		n := 3
		if n < len(rest) && rest[n] == '(' {
			j := n + 1
			for j < len(rest) && (isDigit(rest[j]) || rest[j] == '_' || (lowerASCII(rest[j]) >= 'a' && lowerASCII(rest[j]) <= 'z')) {
				j++
			}
			if j < len(rest) && rest[j] == ')' {
				n = j + 1
			}
		}
		if n != len(rest) {
			return 0, false
		}
		if neg {
			return math.Copysign(math.NaN(), -1), true
		}
		return math.NaN(), true
	case len(rest) >= 2 && rest[0] == '0' && (rest[1] == 'x' || rest[1] == 'X') &&
		(len(rest) > 2 && (isHex(rest[2]) || (rest[2] == '.' && len(rest) > 3 && isHex(rest[3])))):
		return strtodHex(neg, rest[2:])
	}
	// decimal: digits [. digits] [e [sign] digits]
	j := 0
	nd := 0
	nonzero := false
	for j < len(rest) && isDigit(rest[j]) {
		nonzero = nonzero || rest[j] != '0'
		j++
		nd++
	}
	if j < len(rest) && rest[j] == '.' {
		j++
		for j < len(rest) && isDigit(rest[j]) {
			nonzero = nonzero || rest[j] != '0'
			j++
			nd++
		}
	}
	if nd == 0 {
		return 0, false
	}
	if j < len(rest) && (rest[j] == 'e' || rest[j] == 'E') {
		k := j + 1
		if k < len(rest) && (rest[k] == '+' || rest[k] == '-') {
			k++
		}
		if k < len(rest) && isDigit(rest[k]) {
			for k < len(rest) && isDigit(rest[k]) {
				k++
			}
			j = k
		}
	}
	if j != len(rest) {
		return 0, false
	}
	text := s[start:]
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !math.IsInf(f, 0) {
		return 0, false
	}
	if math.IsInf(f, 0) {
		return 0, false // overflow: ERANGE
	}
	if f == 0 {
		return f, !nonzero // underflow to zero of a non-zero number: ERANGE
	}
	if math.Abs(f) < 0x1p-1022 {
		r, ok := new(big.Rat).SetString(text)
		if !ok {
			return 0, false
		}
		if _, exact := r.Float64(); !exact {
			return 0, false // inexact subnormal: ERANGE
		}
	}
	return f, true
}

func hasPrefixFold(s, p string) bool {
	return len(s) >= len(p) && equalFoldASCII(s[:len(p)], p)
}

func isHex(c byte) bool {
	return isDigit(c) || (lowerASCII(c) >= 'a' && lowerASCII(c) <= 'f')
}

// strtodHex converts the part after "0x" of a C hexadecimal float.
func strtodHex(neg bool, s string) (float64, bool) {
	j := 0
	var mant strings.Builder
	frac := 0
	nonzero := false
	for j < len(s) && isHex(s[j]) {
		nonzero = nonzero || s[j] != '0'
		mant.WriteByte(s[j])
		j++
	}
	if j < len(s) && s[j] == '.' {
		j++
		for j < len(s) && isHex(s[j]) {
			nonzero = nonzero || s[j] != '0'
			mant.WriteByte(s[j])
			frac++
			j++
		}
	}
	exp := int64(0)
	if j < len(s) && (s[j] == 'p' || s[j] == 'P') {
		k := j + 1
		eneg := false
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			eneg = s[k] == '-'
			k++
		}
		if k < len(s) && isDigit(s[k]) {
			for k < len(s) && isDigit(s[k]) {
				if exp < 1<<40 {
					exp = exp*10 + int64(s[k]-'0')
				}
				k++
			}
			if eneg {
				exp = -exp
			}
			j = k
		}
	}
	if j != len(s) {
		return 0, false
	}
	if !nonzero {
		if neg {
			return math.Copysign(0, -1), true
		}
		return 0, true
	}
	m, _ := new(big.Int).SetString(mant.String(), 16)
	e2 := exp - 4*int64(frac)
	// Values far outside the double range need no big arithmetic.
	bl := int64(m.BitLen())
	if bl+e2 > 1100 {
		return 0, false
	}
	if bl+e2 < -1100 {
		return 0, false
	}
	bf := new(big.Float).SetInt(m)
	bf.SetMantExp(bf, int(e2))
	f, acc := bf.Float64()
	if math.IsInf(f, 0) {
		return 0, false
	}
	if acc != big.Exact && math.Abs(f) < 0x1p-1022 {
		return 0, false
	}
	if neg {
		f = -f
	}
	return f, true
}
