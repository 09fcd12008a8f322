package expr

import (
	"math"
	"strconv"
	"strings"
)

// SyntaxError is a parse error of an expression, as pgbench reports it
// when loading a script (pgbench.c syntax_error; pgbench then exits with
// status 1).
type SyntaxError struct {
	// Msg is pgbench's message including its parenthesised detail, e.g.
	// "syntax error", "unexpected function name (foo)", "unexpected
	// number of arguments (abs)", "unexpected character ($)", "bigint
	// constant overflow (99999999999999999999)".
	Msg string
	// Column is the 0-based byte offset in the source where pgbench puts
	// its "^ error found here" caret: the last byte of the offending token,
	// or len(src) at the end of the expression (as for a line ended by a
	// newline). In a script line, the caret column is the offset of the
	// expression in the line plus Column.
	Column int
}

// Error is Msg followed by the 1-based column.
func (e *SyntaxError) Error() string {
	return e.Msg + " at column " + strconv.Itoa(e.Column+1)
}

// Expr is one compiled pgbench expression. It is immutable and safe for
// concurrent use by goroutines with distinct Contexts.
type Expr struct {
	root node
	vars []string
	src  string
}

// Source is the text the expression was parsed from.
func (e *Expr) Source() string { return e.src }

// Vars returns the names of the variables the expression reads, in order
// of first appearance, without duplicates. It includes "default_seed"
// when hash(), hash_murmur2(), hash_fnv1a() or permute() is called
// without its seed argument (exprparse.y adds :default_seed then).
func (e *Expr) Vars() []string {
	out := make([]string, len(e.vars))
	copy(out, e.vars)
	return out
}

// Parse compiles one expression: the text after "\set name" or after
// "\if" / "\elif" of a pgbench script, up to the end of the line (leading
// and trailing white space allowed; a backslash-newline continues the
// line). It accepts exactly pgbench 15's grammar (exprscan.l, exprparse.y)
// and reports the error pgbench would report, with its column. Errors are
// *SyntaxError. A newline that is not a continuation ends the expression;
// anything but white space after it is an error ("unexpected text after
// end of line"), since pgbench would read it as the next command.
func Parse(src string) (*Expr, error) {
	toks, lexErr, nl := lex(src)
	if lexErr != nil {
		return nil, lexErr
	}
	p := &parser{toks: toks}
	root, err := p.parseTop()
	if err != nil {
		return nil, err
	}
	if nl >= 0 && strings.TrimLeft(src[nl:], " \t\r\f\v\n") != "" {
		return nil, &SyntaxError{Msg: "unexpected text after end of line", Column: nl}
	}
	return &Expr{root: root, vars: p.vars, src: src}, nil
}

// MustParse is Parse for expressions known to be valid (tests, built-in
// scripts); it panics on error.
func MustParse(src string) *Expr {
	e, err := Parse(src)
	if err != nil {
		panic("expr.MustParse(" + strconv.Quote(src) + "): " + err.Error())
	}
	return e
}

type tokKind uint8

const (
	tEOF tokKind = iota
	tInt
	tMaxIntPlusOne
	tDouble
	tBool
	tNull
	tVar
	tFunc
	tAnd
	tOr
	tNot
	tIs
	tIsNull
	tNotNull
	tCase
	tWhen
	tThen
	tElse
	tEnd
	tPlus
	tMinus
	tStar
	tSlash
	tPercent
	tEq
	tNe
	tLt
	tLe
	tGt
	tGe
	tShl
	tShr
	tBitOr
	tBitAnd
	tHash
	tTilde
	tLParen
	tRParen
	tComma
)

type token struct {
	kind       tokKind
	start, end int // byte offsets in src, end exclusive
	i          int64
	f          float64
	b          bool
	s          string
}

var keywords = map[string]tokKind{
	"and": tAnd, "or": tOr, "not": tNot, "case": tCase, "when": tWhen,
	"then": tThen, "else": tElse, "end": tEnd, "true": tBool, "false": tBool,
	"null": tNull, "is": tIs, "isnull": tIsNull, "notnull": tNotNull,
}

func isAlpha(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80
}

func isAlnum(c byte) bool { return isAlpha(c) || isDigit(c) }

// lex splits src into tokens like exprscan.l's EXPR state (flex longest
// match, first rule on ties). pgbench lexes the rest of the line after any
// error and a later lexical error replaces an earlier one, so the lexical
// error reported is the last one of the line (if any). nl is the offset of
// the newline that ended the expression, or -1.
func lex(src string) (toks []token, err *SyntaxError, nl int) {
	n := len(src)
	p := 0
	nl = -1
	lexErr := func(msg, more string, at int) {
		err = &SyntaxError{Msg: msg + " (" + more + ")", Column: at}
	}
	for {
		if p >= n {
			toks = append(toks, token{kind: tEOF, start: n, end: n + 1})
			return toks, err, nl
		}
		c := src[p]
		start := p
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			p++
			continue
		case c == '\n':
			nl = p
			toks = append(toks, token{kind: tEOF, start: p, end: p + 1})
			return toks, err, nl
		case c == '\\':
			if p+1 < n && src[p+1] == '\n' {
				p += 2
				continue
			}
			if p+2 < n && src[p+1] == '\r' && src[p+2] == '\n' {
				p += 3
				continue
			}
			p++
			lexErr("unexpected character", src[start:p], start)
			continue
		case c == ':':
			if p+1 < n && isAlnum(src[p+1]) {
				p++
				for p < n && isAlnum(src[p]) {
					p++
				}
				toks = append(toks, token{kind: tVar, start: start, end: p, s: src[start+1 : p]})
				continue
			}
			p++
			lexErr("unexpected character", src[start:p], start)
			continue
		case isDigit(c) || (c == '.' && p+1 < n && isDigit(src[p+1])):
			j := p
			for j < n && isDigit(src[j]) {
				j++
			}
			intEnd := j
			k := j
			if c != '.' {
				if k < n && src[k] == '.' {
					k++
					for k < n && isDigit(src[k]) {
						k++
					}
				}
			} else {
				k = p + 1
				for k < n && isDigit(src[k]) {
					k++
				}
			}
			if k < n && (src[k] == 'e' || src[k] == 'E') {
				m := k + 1
				if m < n && (src[m] == '+' || src[m] == '-') {
					m++
				}
				if m < n && isDigit(src[m]) {
					for m < n && isDigit(src[m]) {
						m++
					}
					k = m
				}
			}
			if c != '.' && k == intEnd {
				p = intEnd
				text := src[start:p]
				if text == "9223372036854775808" {
					toks = append(toks, token{kind: tMaxIntPlusOne, start: start, end: p})
					continue
				}
				v, reason := strtoint64(text)
				if reason != 0 {
					lexErr("bigint constant overflow", text, p-1)
				}
				toks = append(toks, token{kind: tInt, start: start, end: p, i: v})
				continue
			}
			p = k
			text := src[start:p]
			f, ok := strtodouble(text)
			if !ok {
				lexErr("double constant overflow", text, p-1)
			}
			toks = append(toks, token{kind: tDouble, start: start, end: p, f: f})
			continue
		case isAlpha(c):
			for p < n && isAlnum(src[p]) {
				p++
			}
			word := src[start:p]
			if len(word) <= 7 {
				var lw [7]byte
				for i := 0; i < len(word); i++ {
					lw[i] = lowerASCII(word[i])
				}
				if k, ok := keywords[string(lw[:len(word)])]; ok {
					t := token{kind: k, start: start, end: p}
					if k == tBool {
						t.b = lw[0] == 't'
					}
					toks = append(toks, t)
					continue
				}
			}
			toks = append(toks, token{kind: tFunc, start: start, end: p, s: word})
			continue
		}
		// operators and punctuation
		var k tokKind
		size := 1
		next := byte(0)
		if p+1 < n {
			next = src[p+1]
		}
		switch c {
		case '+':
			k = tPlus
		case '-':
			k = tMinus
		case '*':
			k = tStar
		case '/':
			k = tSlash
		case '%':
			k = tPercent
		case '=':
			k = tEq
		case '<':
			switch next {
			case '>':
				k, size = tNe, 2
			case '=':
				k, size = tLe, 2
			case '<':
				k, size = tShl, 2
			default:
				k = tLt
			}
		case '>':
			switch next {
			case '=':
				k, size = tGe, 2
			case '>':
				k, size = tShr, 2
			default:
				k = tGt
			}
		case '!':
			if next == '=' {
				k, size = tNe, 2
			} else {
				p++
				lexErr("unexpected character", src[start:p], start)
				continue
			}
		case '|':
			k = tBitOr
		case '&':
			k = tBitAnd
		case '#':
			k = tHash
		case '~':
			k = tTilde
		case '(':
			k = tLParen
		case ')':
			k = tRParen
		case ',':
			k = tComma
		default:
			p++
			lexErr("unexpected character", src[start:p], start)
			continue
		}
		p += size
		toks = append(toks, token{kind: k, start: start, end: p})
	}
}

// Operator precedence levels of exprparse.y, lowest first.
const (
	precNone    = 0
	precOr      = 1 // left
	precAnd     = 2 // left
	precNot     = 3 // right
	precIs      = 4 // nonassoc: IS ISNULL NOTNULL
	precCmp     = 5 // nonassoc: < > = <= >= <> !=
	precBit     = 6 // left: | # & << >> ~
	precAdd     = 7 // left: + -
	precMul     = 8 // left: * / %
	precUnary   = 9 // right
	assocLeft   = 0
	assocRight  = 1
	assocNonAss = 2
)

// infixPrec is the precedence of a token that can follow an expression
// (binary operator or IS-family postfix), 0 for any other token.
func infixPrec(k tokKind) int {
	switch k {
	case tOr:
		return precOr
	case tAnd:
		return precAnd
	case tIs, tIsNull, tNotNull:
		return precIs
	case tLt, tGt, tEq, tLe, tGe, tNe:
		return precCmp
	case tBitOr, tHash, tBitAnd, tShl, tShr:
		return precBit
	case tPlus, tMinus:
		return precAdd
	case tStar, tSlash, tPercent:
		return precMul
	}
	return precNone
}

func precAssoc(prec int) int {
	switch prec {
	case precNot, precUnary:
		return assocRight
	case precIs, precCmp:
		return assocNonAss
	}
	return assocLeft
}

// parser is a precedence-climbing parser that accepts the same language as
// exprparse.y's LALR(1) grammar with its %left/%right/%nonassoc
// resolutions, detects errors on the same token bison does, and runs the
// semantic checks (function names, argument counts) at the same points as
// bison's reductions. depth mirrors the size of bison's state stack so that
// deep nesting fails with "memory exhausted" where pgbench's parser does
// (YYMAXDEPTH 10000).
type parser struct {
	toks  []token
	pos   int
	vars  []string
	depth int
}

// maxStack is bison's YYMAXDEPTH: the state stack may hold 9999 entries.
const maxStack = 10000

func (p *parser) peek() *token { return &p.toks[p.pos] }

func (p *parser) next() *token {
	t := &p.toks[p.pos]
	if t.kind != tEOF {
		p.pos++
	}
	return t
}

// push accounts one entry pushed on bison's stack while t is the last
// token read.
func (p *parser) push(t *token) error {
	p.depth++
	if p.depth >= maxStack {
		return errAt(t, "memory exhausted")
	}
	return nil
}

func errAt(t *token, msg string) *SyntaxError {
	return &SyntaxError{Msg: msg, Column: t.end - 1}
}

func syntaxErrAt(t *token) *SyntaxError { return errAt(t, "syntax error") }

// shift consumes a token of kind k (a syntax error otherwise) and pushes
// it.
func (p *parser) shift(k tokKind) (*token, error) {
	t := p.peek()
	if t.kind != k {
		return nil, syntaxErrAt(t)
	}
	p.next()
	return t, p.push(t)
}

func (p *parser) parseTop() (node, error) {
	p.depth = 1
	e, err := p.expr(precNone)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, syntaxErrAt(t)
	}
	return e, nil
}

// expr parses an expression that is the right operand of a pending rule of
// precedence rulePrec (precNone: no pending rule), stopping where bison
// would reduce that rule. It leaves one more entry on the stack.
func (p *parser) expr(rulePrec int) (node, error) {
	left, err := p.primary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		tp := infixPrec(t.kind)
		if tp == precNone {
			return left, nil
		}
		if rulePrec != precNone {
			if tp < rulePrec {
				return left, nil
			}
			if tp == rulePrec {
				switch precAssoc(tp) {
				case assocLeft:
					return left, nil
				case assocNonAss:
					return nil, syntaxErrAt(t)
				}
			}
		}
		p.next()
		if err := p.push(t); err != nil {
			return nil, err
		}
		switch t.kind {
		case tIsNull:
			left = newIs(left, Value{})
			p.depth--
		case tNotNull:
			left = newNot(newIs(left, Value{}))
			p.depth--
		case tIs:
			t2 := p.peek()
			if t2.kind != tNot && t2.kind != tNull && t2.kind != tBool {
				return nil, syntaxErrAt(t2)
			}
			p.next()
			if err := p.push(t2); err != nil {
				return nil, err
			}
			negate := t2.kind == tNot
			if negate {
				t2 = p.peek()
				if t2.kind != tNull && t2.kind != tBool {
					return nil, syntaxErrAt(t2)
				}
				p.next()
				if err := p.push(t2); err != nil {
					return nil, err
				}
				p.depth--
			}
			var v Value
			if t2.kind == tBool {
				v = BoolValue(t2.b)
			}
			left = newIs(left, v)
			if negate {
				left = newNot(left)
			}
			p.depth -= 2
		default:
			right, err := p.expr(tp)
			if err != nil {
				return nil, err
			}
			left = makeBinary(t.kind, left, right)
			p.depth -= 2
		}
	}
}

func makeBinary(k tokKind, l, r node) node {
	switch k {
	case tPlus:
		return newBin(fAdd, l, r)
	case tMinus:
		return newBin(fSub, l, r)
	case tStar:
		return newBin(fMul, l, r)
	case tSlash:
		return newBin(fDiv, l, r)
	case tPercent:
		return newBin(fMod, l, r)
	case tLt:
		return newBin(fLt, l, r)
	case tLe:
		return newBin(fLe, l, r)
	case tGt: // a > b is "<"(b, a): b is evaluated first
		return newBin(fLt, r, l)
	case tGe:
		return newBin(fLe, r, l)
	case tEq:
		return newBin(fEq, l, r)
	case tNe:
		return newBin(fNe, l, r)
	case tBitAnd:
		return newBin(fBitAnd, l, r)
	case tBitOr:
		return newBin(fBitOr, l, r)
	case tHash:
		return newBin(fBitXor, l, r)
	case tShl:
		return newBin(fShl, l, r)
	case tShr:
		return newBin(fShr, l, r)
	case tAnd:
		return &andNode{l: l, r: r}
	case tOr:
		return &orNode{l: l, r: r}
	}
	panic("expr: unknown binary token")
}

func (p *parser) addVar(name string) {
	for _, v := range p.vars {
		if v == name {
			return
		}
	}
	p.vars = append(p.vars, name)
}

// primary parses an operand (constant, variable, function call, CASE,
// parenthesised or prefix-operator expression), leaving one more entry on
// the stack.
func (p *parser) primary() (node, error) {
	t := p.peek()
	switch t.kind {
	case tLParen, tPlus, tMinus, tTilde, tNot, tNull, tBool, tInt, tDouble, tVar, tFunc, tCase:
	default:
		return nil, syntaxErrAt(t)
	}
	p.next()
	if err := p.push(t); err != nil {
		return nil, err
	}
	switch t.kind {
	case tLParen:
		e, err := p.expr(precNone)
		if err != nil {
			return nil, err
		}
		if _, err := p.shift(tRParen); err != nil {
			return nil, err
		}
		p.depth -= 2
		return e, nil
	case tPlus:
		e, err := p.expr(precUnary)
		if err != nil {
			return nil, err
		}
		p.depth--
		return e, nil
	case tMinus:
		if n := p.peek(); n.kind == tMaxIntPlusOne {
			p.next()
			if err := p.push(n); err != nil {
				return nil, err
			}
			p.depth--
			return &constNode{v: IntValue(math.MinInt64)}, nil
		}
		e, err := p.expr(precUnary)
		if err != nil {
			return nil, err
		}
		p.depth--
		return newBin(fSub, &constNode{v: IntValue(0)}, e), nil
	case tTilde:
		e, err := p.expr(precBit)
		if err != nil {
			return nil, err
		}
		p.depth--
		return newBin(fBitXor, &constNode{v: IntValue(-1)}, e), nil
	case tNot:
		e, err := p.expr(precNot)
		if err != nil {
			return nil, err
		}
		p.depth--
		return newNot(e), nil
	case tNull:
		return &constNode{}, nil
	case tBool:
		return &constNode{v: BoolValue(t.b)}, nil
	case tInt:
		return &constNode{v: IntValue(t.i)}, nil
	case tDouble:
		return &constNode{v: DoubleValue(t.f)}, nil
	case tVar:
		p.addVar(t.s)
		return &varNode{name: t.s}, nil
	case tFunc:
		return p.call(t)
	default: // tCase
		return p.caseExpr()
	}
}

// Argument-count classes of exprparse.y's PGBENCH_FUNCTIONS.
const (
	nargsVariable = -1 // least, greatest: >= 1
	nargsHash     = -3 // 1 or 2, default_seed added
	nargsPermute  = -4 // 2 or 3, default_seed added
)

type funcDef struct {
	name  string
	nargs int
	f     fn
}

// functions are the names find_func accepts (exprparse.y PGBENCH_FUNCTIONS;
// the operator entries cannot be spelt as identifiers, except "mod").
var functions = []funcDef{
	{"mod", 2, fMod},
	{"abs", 1, fAbs},
	{"least", nargsVariable, fLeast},
	{"greatest", nargsVariable, fGreatest},
	{"debug", 1, fDebug},
	{"pi", 0, fPi},
	{"sqrt", 1, fSqrt},
	{"ln", 1, fLn},
	{"exp", 1, fExp},
	{"int", 1, fInt},
	{"double", 1, fDouble},
	{"random", 2, fRandom},
	{"random_gaussian", 3, fRandomGaussian},
	{"random_exponential", 3, fRandomExponential},
	{"random_zipfian", 3, fRandomZipfian},
	{"pow", 2, fPow},
	{"power", 2, fPow},
	{"hash", nargsHash, fHashMurmur2},
	{"hash_murmur2", nargsHash, fHashMurmur2},
	{"hash_fnv1a", nargsHash, fHashFnv1a},
	{"permute", nargsPermute, fPermute},
}

func findFunc(name string) *funcDef {
	for i := range functions {
		if equalFoldASCII(name, functions[i].name) {
			return &functions[i]
		}
	}
	return nil
}

// call parses the rest of a function call after its name (already
// pushed): function '(' elist ')'.
func (p *parser) call(name *token) (node, error) {
	def := findFunc(name.s)
	if def == nil {
		return nil, errAt(name, "unexpected function name ("+name.s+")")
	}
	if _, err := p.shift(tLParen); err != nil {
		return nil, err
	}
	var args []node
	// elist: empty | expr | elist ',' expr — so "f(, x)" is f(x).
	switch la := p.peek(); la.kind {
	case tRParen, tComma: // reduce the empty elist
		if err := p.push(la); err != nil {
			return nil, err
		}
		if la.kind == tRParen {
			break
		}
		if _, err := p.shift(tComma); err != nil {
			return nil, err
		}
		e, err := p.expr(precNone)
		if err != nil {
			return nil, err
		}
		args = append(args, e)
		p.depth -= 2
	default:
		e, err := p.expr(precNone)
		if err != nil {
			return nil, err
		}
		args = append(args, e)
	}
	for p.peek().kind == tComma {
		if _, err := p.shift(tComma); err != nil {
			return nil, err
		}
		e, err := p.expr(precNone)
		if err != nil {
			return nil, err
		}
		args = append(args, e)
		p.depth -= 2
	}
	rp, err := p.shift(tRParen)
	if err != nil {
		return nil, err
	}
	p.depth -= 3
	n := len(args)
	switch def.nargs {
	case nargsVariable:
		if n == 0 {
			return nil, errAt(rp, "at least one argument expected ("+def.name+")")
		}
	case nargsHash:
		if n < 1 || n > 2 {
			return nil, errAt(rp, "unexpected number of arguments ("+def.name+")")
		}
		if n == 1 {
			p.addVar("default_seed")
			args = append(args, &varNode{name: "default_seed"})
		}
	case nargsPermute:
		if n < 2 || n > 3 {
			return nil, errAt(rp, "unexpected number of arguments ("+def.name+")")
		}
		if n == 2 {
			p.addVar("default_seed")
			args = append(args, &varNode{name: "default_seed"})
		}
	default:
		if n != def.nargs {
			return nil, errAt(rp, "unexpected number of arguments ("+def.name+")")
		}
	}
	return newCall(def.f, args), nil
}

// caseExpr parses the rest of CASE (already pushed) ... END.
func (p *parser) caseExpr() (node, error) {
	c := &caseNode{}
	if t := p.peek(); t.kind != tWhen {
		return nil, syntaxErrAt(t)
	}
	for first := true; p.peek().kind == tWhen; first = false {
		if _, err := p.shift(tWhen); err != nil {
			return nil, err
		}
		cond, err := p.expr(precNone)
		if err != nil {
			return nil, err
		}
		if _, err := p.shift(tThen); err != nil {
			return nil, err
		}
		then, err := p.expr(precNone)
		if err != nil {
			return nil, err
		}
		c.conds = append(c.conds, cond)
		c.thens = append(c.thens, then)
		if first {
			p.depth -= 3 // WHEN expr THEN expr -> when_then_list
		} else {
			p.depth -= 4 // when_then_list WHEN expr THEN expr
		}
	}
	c.els = &constNode{}
	if p.peek().kind == tElse {
		if _, err := p.shift(tElse); err != nil {
			return nil, err
		}
		e, err := p.expr(precNone)
		if err != nil {
			return nil, err
		}
		c.els = e
		if _, err := p.shift(tEnd); err != nil {
			return nil, err
		}
		p.depth -= 4
		return c, nil
	}
	if _, err := p.shift(tEnd); err != nil {
		return nil, err
	}
	p.depth -= 2
	return c, nil
}
