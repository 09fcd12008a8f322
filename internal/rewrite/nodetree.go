package rewrite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The server's stored query trees (pg_rewrite.ev_action, a pg_node_tree)
// are PostgreSQL's node text format: src/backend/nodes/outfuncs.c writes
// it and read.c's pg_strtok and nodeRead read it. A node is
// "{TAG :field value :field value ...}", a list "(item item ...)" (an
// integer, OID, XID or bitmap list starts with i, o, x or b), "<>" is an
// empty value, a datum is "length [ byte byte ... ]", and a token's
// special characters (white space, parentheses, braces, a backslash, a
// leading digit, quote or "<") are escaped with a backslash. ptree reads
// it into generic values: the guard (guard.go) needs a few fields by name
// in a tree whose other fields it passes through, whatever the server's
// version adds.

// ptNode is one node of a stored tree.
type ptNode struct {
	tag    string
	fields []ptField
}

// ptField is one ":name value" of a node.
type ptField struct {
	name string
	val  any // *ptNode, ptList, ptDatum, string (a token, "" for <>), or nil
}

// ptList is a parenthesised list; kind is "i", "o", "x", "b" or "" (a
// list of nodes or tokens).
type ptList struct {
	kind  string
	items []any
}

// get returns the value of field name, or nil.
func (n *ptNode) get(name string) any {
	for _, f := range n.fields {
		if f.name == name {
			return f.val
		}
	}
	return nil
}

// str returns the token of field name ("" when absent or not a token).
func (n *ptNode) str(name string) string {
	s, _ := n.get(name).(string)
	return s
}

// maxTreeDepth bounds the nesting read from the server: deeper trees
// are refused (the guard then vetoes), not read by unbounded recursion.
const maxTreeDepth = 3000

// errTreeSyntax is the error of a text that is not a node tree.
var errTreeSyntax = errors.New("not a node tree")

// ptReader reads one stored tree.
type ptReader struct {
	s   string
	pos int
	// peeked holds a token read ahead, when ok.
	peeked struct {
		tok string
		ok  bool
	}
}

// parseTree reads a whole stored tree (a node or a list of nodes).
func parseTree(s string) (any, error) {
	r := &ptReader{s: s}
	tok, ok := r.next()
	if !ok {
		return nil, fmt.Errorf("%w: empty", errTreeSyntax)
	}
	v, err := r.value(tok, 0)
	if err != nil {
		return nil, err
	}
	if extra, more := r.next(); more {
		return nil, fmt.Errorf("%w: %q after the end", errTreeSyntax, extra)
	}
	return v, nil
}

// next returns the next raw token (escapes kept), as pg_strtok does.
func (r *ptReader) next() (string, bool) {
	if r.peeked.ok {
		r.peeked.ok = false
		return r.peeked.tok, true
	}
	s := r.s
	for r.pos < len(s) && (s[r.pos] == ' ' || s[r.pos] == '\n' || s[r.pos] == '\t') {
		r.pos++
	}
	if r.pos >= len(s) {
		return "", false
	}
	start := r.pos
	switch s[r.pos] {
	case '(', ')', '{', '}':
		r.pos++
		return s[start:r.pos], true
	}
	for r.pos < len(s) {
		c := s[r.pos]
		if c == ' ' || c == '\n' || c == '\t' || c == '(' || c == ')' || c == '{' || c == '}' {
			break
		}
		if c == '\\' && r.pos+1 < len(s) {
			r.pos += 2
			continue
		}
		r.pos++
	}
	return s[start:r.pos], true
}

func (r *ptReader) peek() (string, bool) {
	if !r.peeked.ok {
		r.peeked.tok, r.peeked.ok = r.next()
		if !r.peeked.ok {
			return "", false
		}
	}
	return r.peeked.tok, true
}

// token is a raw token's text: escapes removed, "<>" empty.
func token(raw string) string {
	if raw == "<>" {
		return ""
	}
	if !strings.Contains(raw, `\`) {
		return raw
	}
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		if raw[i] == '\\' && i+1 < len(raw) {
			i++
		}
		b.WriteByte(raw[i])
	}
	return b.String()
}

// value reads the value that starts with token tok.
func (r *ptReader) value(tok string, depth int) (any, error) {
	if depth > maxTreeDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d", errTreeSyntax, maxTreeDepth)
	}
	switch tok {
	case "{":
		return r.node(depth + 1)
	case "(":
		return r.list(depth + 1)
	case ")", "}":
		return nil, fmt.Errorf("%w: unexpected %q", errTreeSyntax, tok)
	case "<>":
		return nil, nil
	}
	// A datum: its length, then its bytes in brackets.
	if p, ok := r.peek(); ok && p == "[" {
		r.peeked.ok = false
		d := ptDatum{length: token(tok)}
		for {
			t, ok := r.next()
			if !ok {
				return nil, fmt.Errorf("%w: unterminated datum", errTreeSyntax)
			}
			if t == "]" {
				break
			}
			// outDatum writes each byte as a signed char.
			b, err := strconv.ParseInt(t, 10, 16)
			if err != nil || b < -128 || b > 255 {
				return nil, fmt.Errorf("%w: datum byte %q", errTreeSyntax, t)
			}
			d.bytes = append(d.bytes, byte(b))
		}
		return d, nil
	}
	return token(tok), nil
}

// ptDatum is a datum of a stored tree (a Const's value): its length
// token and its bytes as the server holds them in memory.
type ptDatum struct {
	length string
	bytes  []byte
}

// varlena is the content of a datum of a variable-length type (text),
// read from its header as PostgreSQL lays it out on a little-endian
// machine (src/include/varatt.h): a 4-byte header with the length
// shifted left by 2, or a 1-byte header with it shifted left by 1. A
// compressed or external value, or a length the bytes do not agree
// with, is not read (ok false).
func (d ptDatum) varlena() (content []byte, ok bool) {
	b := d.bytes
	if n, err := strconv.Atoi(d.length); err != nil || n != len(b) || len(b) == 0 {
		return nil, false
	}
	switch {
	case b[0] == 0x01: // external (a TOAST pointer)
		return nil, false
	case b[0]&0x01 == 0x01: // 1-byte header
		if int(b[0]>>1) != len(b) {
			return nil, false
		}
		return b[1:], true
	case b[0]&0x03 == 0x00 && len(b) >= 4: // 4-byte header, not compressed
		if int(binary.LittleEndian.Uint32(b)>>2) != len(b) {
			return nil, false
		}
		return b[4:], true
	}
	return nil, false
}

// node reads a node after its "{".
func (r *ptReader) node(depth int) (*ptNode, error) {
	tag, ok := r.next()
	if !ok || tag == "}" || strings.HasPrefix(tag, ":") {
		return nil, fmt.Errorf("%w: a node without a tag", errTreeSyntax)
	}
	n := &ptNode{tag: tag}
	for {
		tok, ok := r.next()
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: unterminated node %s", errTreeSyntax, tag)
		case tok == "}":
			return n, nil
		case !strings.HasPrefix(tok, ":"):
			return nil, fmt.Errorf("%w: %q where a field of %s was expected", errTreeSyntax, tok, tag)
		}
		f := ptField{name: tok[1:]}
		// A field's value may be missing (the next field or the end
		// follows): outfuncs writes none for some fields.
		v, ok := r.peek()
		if !ok {
			return nil, fmt.Errorf("%w: unterminated node %s", errTreeSyntax, tag)
		}
		if v != "}" && !strings.HasPrefix(v, ":") {
			r.peeked.ok = false
			val, err := r.value(v, depth)
			if err != nil {
				return nil, err
			}
			f.val = val
		}
		n.fields = append(n.fields, f)
	}
}

// list reads a list after its "(".
func (r *ptReader) list(depth int) (ptList, error) {
	var l ptList
	first := true
	for {
		tok, ok := r.next()
		switch {
		case !ok:
			return l, fmt.Errorf("%w: unterminated list", errTreeSyntax)
		case tok == ")":
			return l, nil
		case first && (tok == "i" || tok == "o" || tok == "x" || tok == "b"):
			l.kind = tok
			first = false
			continue
		}
		first = false
		v, err := r.value(tok, depth)
		if err != nil {
			return l, err
		}
		l.items = append(l.items, v)
	}
}
