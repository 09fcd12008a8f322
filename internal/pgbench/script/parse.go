package script

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/erplab/erplab/internal/pgbench/expr"
)

// Parse parses the text of a pgbench script; file names the script in
// errors. It splits SQL commands the way pgbench does with psql's lexer
// (src/fe_utils/psqlscan.l): a command ends at a ";" outside quotes,
// dollar quotes, comments, parentheses and CREATE FUNCTION ... BEGIN ATOMIC
// bodies, or at a backslash starting a meta-command; "\;" puts a ";" into
// the command without ending it; leading whitespace and "--" comments are
// dropped. Meta-commands end at the end of their line, a backslash-newline
// continuing them. The \if structure is checked as pgbench's
// CheckConditional does.
//
// Errors are *ParseError. Variable names used by \set, \setshell and
// \gset/\aset are checked when the command runs, as pgbench does.
func Parse(file, src string) (*Script, error) {
	p := &parser{file: file, src: src, slots: map[string]int32{}}
	p.lineStarts = lineStarts(src)
	s, err := p.parse()
	if err != nil {
		return nil, err
	}
	s.Name = file
	s.Weight = 1
	return s, nil
}

type parser struct {
	file       string
	src        string
	pos        int
	lineStarts []int

	// psqlscan state
	parenDepth int
	beginDepth int
	identCount int
	idents     [4]byte

	buf      []byte // SQL text being collected
	bufStart int    // source offset of buf[0]

	cmds  []Command
	slots map[string]int32
	vars  []string
}

func lineStarts(src string) []int {
	ls := []int{0}
	for i := 0; i < len(src); i++ {
		if src[i] == '\n' {
			ls = append(ls, i+1)
		}
	}
	return ls
}

// loc converts a byte offset into a 1-based line and column.
func (p *parser) loc(off int) (line, col int) {
	i := sort.Search(len(p.lineStarts), func(i int) bool { return p.lineStarts[i] > off }) - 1
	if i < 0 {
		i = 0
	}
	return i + 1, off - p.lineStarts[i] + 1
}

func (p *parser) errAt(off int, format string, args ...any) *ParseError {
	line, col := p.loc(off)
	return &ParseError{File: p.file, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

// slot interns a variable name.
func (p *parser) slot(name string) int32 {
	if s, ok := p.slots[name]; ok {
		return s
	}
	s := int32(len(p.vars))
	p.vars = append(p.vars, name)
	p.slots[name] = s
	return s
}

type scanResult uint8

const (
	scanEOF scanResult = iota
	scanSemicolon
	scanBackslash
)

func (p *parser) parse() (*Script, error) {
	for {
		sr := p.scanSQL()
		p.flushSQL()
		if sr == scanBackslash {
			bs := p.pos - 1
			cmd, err := p.metaCommand(bs)
			if err != nil {
				return nil, err
			}
			if cmd != nil {
				if cmd.Meta == metaGset || cmd.Meta == metaAset {
					if err := p.attachGset(cmd, bs); err != nil {
						return nil, err
					}
				} else {
					p.cmds = append(p.cmds, *cmd)
				}
			}
		}
		if sr == scanEOF {
			break
		}
	}
	if len(p.cmds) == 0 {
		return nil, &ParseError{File: p.file, Line: 1, Column: 1,
			Msg: fmt.Sprintf("empty command list for script %q", p.file)}
	}
	depth, err := p.checkConditional()
	if err != nil {
		return nil, err
	}
	p.linkPipelines()
	return &Script{Commands: p.cmds, vars: p.vars, maxDepth: depth}, nil
}

// Pseudo meta kinds used only while parsing.
const (
	metaGset Meta = 100 + iota
	metaAset
)

func (p *parser) attachGset(cmd *Command, bs int) error {
	const msg = `\gset must follow an SQL command`
	if len(p.cmds) == 0 {
		return p.errAt(bs, "%s", msg)
	}
	prev := &p.cmds[len(p.cmds)-1]
	if prev.Meta != SQL || prev.Gset || prev.Aset {
		return p.errAt(bs, "%s (%s)", msg, prev.FirstLine)
	}
	if len(cmd.args) > 0 {
		prev.Prefix = cmd.args[0]
	}
	prev.Gset = cmd.Meta == metaGset
	prev.Aset = cmd.Meta == metaAset
	return nil
}

// checkConditional is pgbench's CheckConditional; it returns the deepest
// nesting.
func (p *parser) checkConditional() (int, error) {
	type frame struct {
		cmd     int
		hasElse bool
	}
	var stack []frame
	depth := 0
	for i := range p.cmds {
		c := &p.cmds[i]
		at := func(msg string) error {
			return &ParseError{File: p.file, Line: c.Line, Column: c.Column, Msg: msg}
		}
		switch c.Meta {
		case If:
			stack = append(stack, frame{cmd: i})
			depth = max(depth, len(stack))
		case Elif:
			if len(stack) == 0 {
				return 0, at(`\elif without matching \if`)
			}
			if stack[len(stack)-1].hasElse {
				return 0, at(`\elif after \else`)
			}
		case Else:
			if len(stack) == 0 {
				return 0, at(`\else without matching \if`)
			}
			if stack[len(stack)-1].hasElse {
				return 0, at(`\else after \else`)
			}
			stack[len(stack)-1].hasElse = true
		case Endif:
			if len(stack) == 0 {
				return 0, at(`\endif without matching \if`)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 {
		c := &p.cmds[stack[len(stack)-1].cmd]
		return 0, &ParseError{File: p.file, Line: c.Line, Column: c.Column, Msg: `\if without matching \endif`}
	}
	return depth, nil
}

// linkPipelines records, for each \startpipeline, the first \endpipeline
// after it (pgbench's prepareCommandsInPipeline range).
func (p *parser) linkPipelines() {
	for i := range p.cmds {
		p.cmds[i].pipeEnd = -1
		if p.cmds[i].Meta != StartPipeline {
			continue
		}
		p.cmds[i].pipeEnd = len(p.cmds)
		for j := i + 1; j < len(p.cmds); j++ {
			if p.cmds[j].Meta == EndPipeline {
				p.cmds[i].pipeEnd = j
				break
			}
		}
	}
}

// ---- SQL lexing (psqlscan.l) ----

func isIdentStart(c byte) bool { return varStart(c) }
func isIdentCont(c byte) bool  { return varChar(c) || c == '$' }

func (p *parser) emit(from, to int) {
	if len(p.buf) == 0 {
		p.bufStart = from
	}
	p.buf = append(p.buf, p.src[from:to]...)
}

// scanSQL collects SQL text into p.buf until a command-ending semicolon, a
// backslash command (p.pos is then just after the backslash) or the end.
func (p *parser) scanSQL() scanResult {
	src := p.src
	n := len(src)
	for p.pos < n {
		c := src[p.pos]
		start := p.pos
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			for p.pos < n && isSQLSpace(src[p.pos]) {
				p.pos++
			}
			if len(p.buf) > 0 {
				p.emit(start, p.pos)
			}
		case c == '-' && p.pos+1 < n && src[p.pos+1] == '-':
			p.pos = lineEnd(src, p.pos)
			if len(p.buf) > 0 { // PostgreSQL 15+: keep comments inside a query
				p.emit(start, p.pos)
			}
		case c == '/' && p.pos+1 < n && src[p.pos+1] == '*':
			p.skipBlockComment()
			p.emit(start, p.pos)
		case c == '\'':
			p.pos++
			p.skipQuoted(quoteStd)
			p.emit(start, p.pos)
		case c == '"':
			p.pos++
			p.skipDelimited()
			p.emit(start, p.pos)
		case c == '$':
			p.scanDollar()
			p.emit(start, p.pos)
		case c == '(':
			p.parenDepth++
			p.pos++
			p.emit(start, p.pos)
		case c == ')':
			if p.parenDepth > 0 {
				p.parenDepth--
			}
			p.pos++
			p.emit(start, p.pos)
		case c == ';':
			p.pos++
			p.emit(start, p.pos)
			if p.parenDepth == 0 && p.beginDepth == 0 {
				p.identCount = 0
				return scanSemicolon
			}
		case c == '\\':
			if p.pos+1 < n && (src[p.pos+1] == ';' || src[p.pos+1] == ':') {
				if src[p.pos+1] == ';' {
					p.identCount = 0
				}
				p.pos += 2
				p.emit(start+1, p.pos)
				continue
			}
			p.pos++
			return scanBackslash
		case c == ':':
			p.scanColon()
			p.emit(start, p.pos)
		case isIdentStart(c):
			p.scanWord()
			p.emit(start, p.pos)
		case c >= '0' && c <= '9':
			for p.pos < n && src[p.pos] >= '0' && src[p.pos] <= '9' {
				p.pos++
			}
			p.emit(start, p.pos)
		default:
			p.pos++
			p.emit(start, p.pos)
		}
	}
	return scanEOF
}

func isSQLSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

// lineEnd returns the offset of the next '\n' or '\r' at or after i, or len.
func lineEnd(s string, i int) int {
	for i < len(s) && s[i] != '\n' && s[i] != '\r' {
		i++
	}
	return i
}

func (p *parser) skipBlockComment() {
	src := p.src
	p.pos += 2
	depth := 0
	for p.pos < len(src) {
		switch {
		case src[p.pos] == '/' && p.pos+1 < len(src) && src[p.pos+1] == '*':
			depth++
			p.pos += 2
		case src[p.pos] == '*' && p.pos+1 < len(src) && src[p.pos+1] == '/':
			p.pos += 2
			if depth == 0 {
				return
			}
			depth--
		default:
			p.pos++
		}
	}
}

type quoteKind uint8

const (
	quoteStd    quoteKind = iota // '...' with standard_conforming_strings: '' only
	quoteEscape                  // E'...': backslash escapes too
	quoteRaw                     // B'...' X'...': ends at the next quote
)

// skipQuoted skips the body of a single-quoted literal (p.pos just after the
// opening quote) and its closing quote, following psqlscan's xqs rule: a
// closing quote followed by whitespace containing a newline and another
// quote continues the literal.
func (p *parser) skipQuoted(kind quoteKind) {
	src := p.src
	for p.pos < len(src) {
		c := src[p.pos]
		switch {
		case c == '\\' && kind == quoteEscape:
			p.pos += 2
		case c == '\'':
			if kind != quoteRaw && p.pos+1 < len(src) && src[p.pos+1] == '\'' {
				p.pos += 2
				continue
			}
			p.pos++
			if next, ok := quoteContinue(src, p.pos); ok {
				p.pos = next
				continue
			}
			return
		default:
			p.pos++
		}
	}
	if p.pos > len(src) {
		p.pos = len(src)
	}
}

// quoteContinue matches psqlscan's {quotecontinue} at i: horizontal
// whitespace or comments, a newline, any whitespace or comment lines, then
// a quote. It returns the offset after that quote.
func quoteContinue(s string, i int) (int, bool) {
	n := len(s)
	for i < n {
		if s[i] == ' ' || s[i] == '\t' || s[i] == '\f' {
			i++
		} else if s[i] == '-' && i+1 < n && s[i+1] == '-' {
			i = lineEnd(s, i)
		} else {
			break
		}
	}
	if i >= n || (s[i] != '\n' && s[i] != '\r') {
		return 0, false
	}
	i++
	for i < n {
		if isSQLSpace(s[i]) {
			i++
		} else if s[i] == '-' && i+1 < n && s[i+1] == '-' {
			e := lineEnd(s, i)
			if e >= n {
				return 0, false
			}
			i = e + 1
		} else {
			break
		}
	}
	if i < n && s[i] == '\'' {
		return i + 1, true
	}
	return 0, false
}

// skipDelimited skips a double-quoted identifier body and its closing quote.
func (p *parser) skipDelimited() {
	src := p.src
	for p.pos < len(src) {
		if src[p.pos] == '"' {
			if p.pos+1 < len(src) && src[p.pos+1] == '"' {
				p.pos += 2
				continue
			}
			p.pos++
			return
		}
		p.pos++
	}
}

// scanDollar handles "$": a dollar-quote delimiter $tag$ (whose body is
// skipped to the same delimiter), a parameter $n, or a lone "$".
func (p *parser) scanDollar() {
	src := p.src
	i := p.pos + 1
	if i < len(src) && isIdentStart(src[i]) {
		i++
		for i < len(src) && varChar(src[i]) {
			i++
		}
	}
	if i < len(src) && src[i] == '$' {
		delim := src[p.pos : i+1]
		body := i + 1
		if k := strings.Index(src[body:], delim); k >= 0 {
			p.pos = body + k + len(delim)
		} else {
			p.pos = len(src)
		}
		return
	}
	p.pos++
	for p.pos < len(src) && src[p.pos] >= '0' && src[p.pos] <= '9' {
		p.pos++
	}
}

// scanColon handles ":" tokens: "::", :name, :'name', :"name", :{?name}.
func (p *parser) scanColon() {
	src := p.src
	n := len(src)
	i := p.pos + 1
	if i < n && src[i] == ':' {
		p.pos += 2
		return
	}
	if i < n && varChar(src[i]) {
		for i < n && varChar(src[i]) {
			i++
		}
		p.pos = i
		return
	}
	if i < n && (src[i] == '\'' || src[i] == '"') {
		q := src[i]
		j := i + 1
		for j < n && varChar(src[j]) {
			j++
		}
		if j > i+1 && j < n && src[j] == q {
			p.pos = j + 1
			return
		}
	}
	if i+1 < n && src[i] == '{' && src[i+1] == '?' {
		j := i + 2
		for j < n && varChar(src[j]) {
			j++
		}
		if j > i+2 && j < n && src[j] == '}' {
			p.pos = j + 1
			return
		}
	}
	p.pos++
}

// scanWord handles an identifier, or a prefixed literal: B'..', X'..',
// E'..', N'..', U&'..', U&"..".
func (p *parser) scanWord() {
	src := p.src
	n := len(src)
	c := src[p.pos] | 0x20
	if p.pos+1 < n && src[p.pos+1] == '\'' {
		switch c {
		case 'b', 'x':
			p.pos += 2
			p.skipQuoted(quoteRaw)
			return
		case 'e':
			p.pos += 2
			p.skipQuoted(quoteEscape)
			return
		case 'n':
			p.pos++ // the quote is lexed next
			return
		}
	}
	if c == 'u' && p.pos+2 < n && src[p.pos+1] == '&' {
		switch src[p.pos+2] {
		case '\'':
			p.pos += 3
			p.skipQuoted(quoteStd)
			return
		case '"':
			p.pos += 3
			p.skipDelimited()
			return
		}
	}
	start := p.pos
	p.pos++
	for p.pos < n && isIdentCont(src[p.pos]) {
		p.pos++
	}
	p.trackIdentifier(src[start:p.pos])
}

// trackIdentifier is psqlscan's heuristic for CREATE [OR REPLACE]
// FUNCTION|PROCEDURE ... BEGIN ... END bodies, whose semicolons do not end
// the command.
func (p *parser) trackIdentifier(word string) {
	if p.identCount == 0 {
		p.idents = [4]byte{}
	}
	for _, kw := range [...]string{"create", "function", "procedure", "or", "replace"} {
		if strings.EqualFold(word, kw) {
			if p.identCount < len(p.idents) {
				p.idents[p.identCount] = kw[0]
			}
			break
		}
	}
	p.identCount++
	id := p.idents
	if id[0] == 'c' && (id[1] == 'f' || id[1] == 'p' || (id[1] == 'o' && id[2] == 'r' && (id[3] == 'f' || id[3] == 'p'))) &&
		p.parenDepth == 0 {
		switch {
		case strings.EqualFold(word, "begin"):
			p.beginDepth++
		case strings.EqualFold(word, "case"):
			if p.beginDepth >= 1 {
				p.beginDepth++
			}
		case strings.EqualFold(word, "end"):
			if p.beginDepth > 0 {
				p.beginDepth--
			}
		}
	}
}

// flushSQL turns the collected SQL text into a command, like pgbench's
// create_sql_command and postprocess_sql_command.
func (p *parser) flushSQL() {
	text := string(p.buf)
	start := p.bufStart
	p.buf = p.buf[:0]
	// skip_sql_comments: leading whitespace (C isspace) and "--" lines
	i := 0
	for i < len(text) {
		c := text[i]
		if c == ' ' || (c >= '\t' && c <= '\r') {
			i++
		} else if strings.HasPrefix(text[i:], "--") {
			k := strings.IndexByte(text[i:], '\n')
			if k < 0 {
				return
			}
			i += k + 1
		} else {
			break
		}
	}
	if i >= len(text) {
		return
	}
	text = text[i:]
	// The offset is exact unless "\;" or "\:" preceded: good enough for a
	// line number.
	line, col := p.loc(min(start+i, len(p.src)))
	first := text
	if len(first) > 127 {
		first = first[:127]
	}
	if k := strings.IndexAny(first, "\n\r"); k >= 0 {
		first = first[:k]
	}
	cmd := Command{Meta: SQL, Line: line, Column: col, FirstLine: first, Text: text,
		target: -1, sleepVar: -1}
	cmd.refs, cmd.paramSQL = p.sqlRefs(text)
	cmd.copyStdio = copyStdio(cmd.paramSQL)
	p.cmds = append(p.cmds, cmd)
}

// sqlRefs finds the :name references of a SQL command like pgbench's
// parseVariable/assignVariables/parseQuery: every ":" followed by a name
// character, anywhere in the text (also inside quotes and comments, as
// pgbench does); "::" and longer runs of colons are skipped. It also builds
// the $n form of the text for the extended and prepared modes.
func (p *parser) sqlRefs(text string) ([]sqlRef, string) {
	var refs []sqlRef
	var ps strings.Builder
	last := 0
	for i := 0; i < len(text); {
		if text[i] != ':' {
			i++
			continue
		}
		if i+1 < len(text) && varStart(text[i+1]) {
			j := i + 2
			for j < len(text) && varChar(text[j]) {
				j++
			}
			refs = append(refs, sqlRef{off: i, end: j, slot: p.slot(text[i+1 : j])})
			ps.WriteString(text[last:i])
			ps.WriteByte('$')
			ps.WriteString(strconv.Itoa(len(refs)))
			last = j
			i = j
			continue
		}
		for i < len(text) && text[i] == ':' {
			i++
		}
	}
	if refs == nil {
		return nil, text
	}
	ps.WriteString(text[last:])
	return refs, ps.String()
}

// ---- meta-commands (exprscan.l INITIAL state, process_backslash_command) ----

type word struct {
	text string
	off  int
}

// nextWord lexes one whitespace-separated word of a backslash command. At
// the end of the command (newline, consumed, or end of input) ok is false.
func (p *parser) nextWord() (w word, ok bool) {
	src := p.src
	n := len(src)
	for p.pos < n {
		c := src[p.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			p.pos++
		case c == '\\' && p.pos+1 < n && src[p.pos+1] == '\n':
			p.pos += 2
		case c == '\n':
			p.pos++
			return word{}, false
		default:
			start := p.pos
			for p.pos < n && !isMetaSpace(src[p.pos]) {
				p.pos++
			}
			end := p.pos
			if end-start > 1 && src[end-1] == '\\' && end < n && src[end] == '\n' {
				end--
				p.pos++ // the continuation's newline
			}
			return word{text: src[start:end], off: start}, true
		}
	}
	return word{}, false
}

func isMetaSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v' || c == '\n'
}

// commandText returns the meta-command's text from its backslash to end,
// without trailing newlines (pgbench's first_line).
func (p *parser) commandText(bs, end int) string {
	s := p.src[bs:min(end, len(p.src))]
	return strings.TrimRight(s, "\r\n")
}

func (p *parser) metaCommand(bs int) (*Command, error) {
	name, ok := p.nextWord()
	if !ok {
		return nil, nil // a lone backslash: pgbench ignores it
	}
	line, col := p.loc(bs)
	cmd := &Command{Line: line, Column: col, target: -1, sleepVar: -1, pipeEnd: -1}
	lower := strings.ToLower(name.text)
	inCmd := fmt.Sprintf(" in command %q", name.text)
	switch lower {
	case "set", "if", "elif":
		switch lower {
		case "set":
			cmd.Meta = Set
			v, ok := p.nextWord()
			if !ok {
				return nil, p.errAt(bs, "missing argument%s", inCmd)
			}
			cmd.args = []string{v.text}
			cmd.target = p.slot(v.text)
		case "if":
			cmd.Meta = If
		default:
			cmd.Meta = Elif
		}
		return cmd, p.parseExpr(cmd, bs, name.text)
	}
	var words []word
	for {
		w, ok := p.nextWord()
		if !ok {
			break
		}
		words = append(words, w)
	}
	cmd.FirstLine = p.commandText(bs, p.pos)
	if len(words)+1 > MaxArgs {
		return nil, p.errAt(words[MaxArgs-1].off, "too many arguments%s", inCmd)
	}
	cmd.args = make([]string, len(words))
	for i, w := range words {
		cmd.args[i] = w.text
	}
	switch lower {
	case "sleep":
		cmd.Meta = Sleep
		return cmd, p.parseSleep(cmd, bs, words, inCmd)
	case "setshell":
		cmd.Meta = SetShell
		if len(words) < 2 {
			return nil, p.errAt(bs, "missing argument%s", inCmd)
		}
		cmd.target = p.slot(words[0].text)
		cmd.shellWords = p.shellWords(words[1:])
	case "shell":
		cmd.Meta = Shell
		if len(words) < 1 {
			return nil, p.errAt(bs, "missing command%s", inCmd)
		}
		cmd.shellWords = p.shellWords(words)
	case "else", "endif", "startpipeline", "syncpipeline", "endpipeline":
		cmd.Meta = map[string]Meta{"else": Else, "endif": Endif, "startpipeline": StartPipeline,
			"syncpipeline": SyncPipeline, "endpipeline": EndPipeline}[lower]
		if len(words) > 0 {
			return nil, p.errAt(words[0].off, "unexpected argument%s", inCmd)
		}
	case "gset", "aset":
		cmd.Meta = metaGset
		if lower == "aset" {
			cmd.Meta = metaAset
		}
		if len(words) > 1 {
			return nil, p.errAt(words[1].off, "too many arguments%s", inCmd)
		}
	default:
		return nil, p.errAt(bs, "invalid command%s", inCmd)
	}
	return cmd, nil
}

func (p *parser) shellWords(words []word) []shellWord {
	out := make([]shellWord, len(words))
	for i, w := range words {
		switch {
		case w.text[0] != ':':
			out[i] = shellWord{text: w.text, slot: -1}
		case len(w.text) > 1 && w.text[1] == ':':
			out[i] = shellWord{text: w.text[1:], slot: -1}
		default:
			out[i] = shellWord{text: w.text, slot: p.slot(w.text[1:])}
		}
	}
	return out
}

// parseSleep checks \sleep's arguments like process_backslash_command:
// "\sleep N [us|ms|s]", "\sleep Nms", "\sleep :var [unit]".
func (p *parser) parseSleep(cmd *Command, bs int, words []word, inCmd string) error {
	if len(words) < 1 {
		return p.errAt(bs, "missing argument%s", inCmd)
	}
	if len(words) > 2 {
		return p.errAt(words[2].off, "too many arguments%s", inCmd)
	}
	arg := words[0].text
	unit := ""
	unitOff := 0
	if len(words) == 2 {
		unit, unitOff = words[1].text, words[1].off
	}
	if arg[0] == ':' {
		cmd.sleepVar = p.slot(arg[1:])
	} else {
		i := 0
		if arg[0] == '+' || arg[0] == '-' {
			i++
		}
		digits := i
		for i < len(arg) && arg[i] >= '0' && arg[i] <= '9' {
			i++
		}
		haveDigit := i > digits
		if i < len(arg) {
			if len(words) == 1 && haveDigit {
				unit, unitOff = arg[i:], words[0].off+i
			} else {
				return p.errAt(words[0].off, "invalid sleep time, must be an integer (%s)%s", arg, inCmd)
			}
		}
		cmd.sleepUS = atoi(arg)
	}
	switch strings.ToLower(unit) {
	case "":
		cmd.sleepUnit = 1_000_000
	case "us":
		cmd.sleepUnit = 1
	case "ms":
		cmd.sleepUnit = 1000
	case "s":
		cmd.sleepUnit = 1_000_000
	default:
		return p.errAt(unitOff, "unrecognized time unit, must be us, ms or s (%s)%s", unit, inCmd)
	}
	return nil
}

// atoi is C's atoi on 64 bits: optional leading whitespace and sign, then
// digits up to the first non-digit; 0 when there is none.
func atoi(s string) int64 {
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	var v int64
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		v = v*10 + int64(s[i]-'0')
		i++
	}
	if neg {
		return -v
	}
	return v
}

// parseExpr parses the expression of \set, \if or \elif: the rest of the
// command's line(s), backslash-newline continuing it.
func (p *parser) parseExpr(cmd *Command, bs int, name string) error {
	src := p.src
	start := p.pos
	end := start
	for end < len(src) {
		if src[end] == '\\' && end+1 < len(src) && src[end+1] == '\n' {
			end += 2
			continue
		}
		if src[end] == '\n' {
			break
		}
		end++
	}
	text := src[start:end]
	if strings.Contains(text, "\\\n") {
		text = strings.ReplaceAll(text, "\\\n", "  ") // same length: columns map back
	}
	p.pos = min(end+1, len(src))
	cmd.FirstLine = p.commandText(bs, end)
	e, err := expr.Parse(text)
	if err != nil {
		var se *expr.SyntaxError
		if errors.As(err, &se) {
			off := start + min(max(se.Column, 0), len(text))
			return p.errAt(off, "%s in command %q", se.Msg, name)
		}
		return p.errAt(start, "%v in command %q", err, name)
	}
	cmd.expr = e
	names := e.Vars()
	cmd.exprVars = make([]int32, len(names))
	for i, v := range names {
		cmd.exprVars[i] = p.slot(v)
	}
	return nil
}
