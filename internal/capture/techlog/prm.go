package techlog

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// param is one bound value from Prm: its text-format bytes (nil for
// NULL) and its type as written after "::" ("" when none is written).
type param struct {
	value []byte
	typ   string
}

// prmError is a Prm value that does not parse, at byte off of the value.
type prmError struct {
	off int
	msg string
}

func (e *prmError) Error() string { return e.msg }

// parsePrm reads a Prm value: lines "p_<n>: <literal>[::<type>]", n
// counting from 1 in order, blank lines ignored. A literal is a quoted
// string ('...', a quote doubled inside, backslash escapes as PostgreSQL
// reads them with standard_conforming_strings off, which 1C's builds
// run with; an E prefix is accepted), NULL, or a bare token (a number,
// TRUE, FALSE) kept as written.
func parsePrm(v string) ([]param, *prmError) {
	var ps []param
	i := 0
	for {
		i = skipSpace(v, i, true)
		if i >= len(v) {
			return ps, nil
		}
		n, j, pe := prmName(v, i)
		if pe != nil {
			return nil, pe
		}
		if n != len(ps)+1 {
			return nil, &prmError{i, fmt.Sprintf("p_%d out of order: p_%d expected", n, len(ps)+1)}
		}
		p, k, pe := prmLiteral(v, skipSpace(v, j, false))
		if pe != nil {
			return nil, pe
		}
		if p.typ, k, pe = prmType(v, k); pe != nil {
			return nil, pe
		}
		ps = append(ps, p)
		i = k
	}
}

// skipSpace skips blanks and tabs (and line ends when lines is set).
func skipSpace(v string, i int, lines bool) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\r' || lines && v[i] == '\n') {
		i++
	}
	return i
}

// prmName reads "p_<n>:" at i: n and the index after the colon.
func prmName(v string, i int) (int, int, *prmError) {
	if !strings.HasPrefix(v[i:], "p_") {
		return 0, 0, &prmError{i, "p_<n>: expected"}
	}
	j := i + 2
	for j < len(v) && v[j] >= '0' && v[j] <= '9' {
		j++
	}
	n, err := strconv.Atoi(v[i+2 : j])
	if err != nil || j >= len(v) || v[j] != ':' {
		return 0, 0, &prmError{i, "p_<n>: expected"}
	}
	return n, j + 1, nil
}

// prmLiteral reads the literal at i and returns the index after it.
func prmLiteral(v string, i int) (param, int, *prmError) {
	if i < len(v) && (v[i] == 'E' || v[i] == 'e') && i+1 < len(v) && v[i+1] == '\'' {
		i++
	}
	if i < len(v) && v[i] == '\'' {
		b, j, pe := unquote(v, i)
		return param{value: b}, j, pe
	}
	j := i
	for j < len(v) && v[j] != '\n' && !strings.HasPrefix(v[j:], "::") {
		j++
	}
	tok := strings.TrimRight(v[i:j], " \t\r")
	switch {
	case tok == "":
		return param{}, 0, &prmError{i, "value expected after p_<n>:"}
	case strings.EqualFold(tok, "NULL"):
		return param{}, j, nil
	}
	return param{value: []byte(tok)}, j, nil
}

// prmType reads an optional "::type" up to the line end at i and
// returns the type and the index of the line end.
func prmType(v string, i int) (string, int, *prmError) {
	end := strings.IndexByte(v[i:], '\n')
	if end < 0 {
		end = len(v) - i
	}
	rest := strings.TrimSpace(v[i : i+end])
	if rest == "" {
		return "", i + end, nil
	}
	typ, ok := strings.CutPrefix(rest, "::")
	if !ok || strings.TrimSpace(typ) == "" {
		return "", 0, &prmError{i, "::type or the end of the line expected after the value"}
	}
	return strings.TrimSpace(typ), i + end, nil
}

// unquote decodes the string literal whose opening quote is at v[i] and
// returns its bytes and the index after the closing quote.
func unquote(v string, i int) ([]byte, int, *prmError) {
	b := make([]byte, 0, 16)
	j := i + 1
	for j < len(v) {
		c := v[j]
		switch {
		case c == '\'' && j+1 < len(v) && v[j+1] == '\'':
			b = append(b, '\'')
			j += 2
		case c == '\'':
			return b, j + 1, nil
		case c == '\\' && j+1 < len(v):
			b, j = unescape(b, v, j+1)
		default:
			b = append(b, c)
			j++
		}
	}
	return nil, 0, &prmError{i, "no closing ' for this value"}
}

// unescape appends the meaning of the backslash escape whose first
// character after the backslash is v[j] (\b \f \n \r \t, \ooo octal,
// \xhh hex, \uXXXX, \UXXXXXXXX, any other character itself) and
// returns the index after the escape.
func unescape(b []byte, v string, j int) ([]byte, int) {
	c := v[j]
	switch c {
	case 'b':
		return append(b, '\b'), j + 1
	case 'f':
		return append(b, '\f'), j + 1
	case 'n':
		return append(b, '\n'), j + 1
	case 'r':
		return append(b, '\r'), j + 1
	case 't':
		return append(b, '\t'), j + 1
	case '0', '1', '2', '3', '4', '5', '6', '7':
		n, k := digits(v, j, 3, 8)
		return append(b, byte(n)), k
	case 'x':
		if n, k := digits(v, j+1, 2, 16); k > j+1 {
			return append(b, byte(n)), k
		}
	case 'u', 'U':
		width := 4
		if c == 'U' {
			width = 8
		}
		if n, k := digits(v, j+1, width, 16); k == j+1+width {
			return utf8.AppendRune(b, rune(n)), k
		}
	}
	return append(b, c), j + 1
}

// digits reads up to max digits of base from v[j:]: their value and the
// index after them.
func digits(v string, j, max, base int) (int, int) {
	n, k := 0, j
	for k < len(v) && k-j < max {
		d, err := strconv.ParseUint(v[k:k+1], base, 8)
		if err != nil {
			break
		}
		n = n*base + int(d)
		k++
	}
	return n, k
}
