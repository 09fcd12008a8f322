package rewrite

import (
	"errors"
	"fmt"
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
	val  any // *ptNode, ptList, string (a token, "" for <>), or nil
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
		for {
			t, ok := r.next()
			if !ok {
				return nil, fmt.Errorf("%w: unterminated datum", errTreeSyntax)
			}
			if t == "]" {
				break
			}
		}
	}
	return token(tok), nil
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
