package rewrite

import (
	"strings"
	"unicode/utf8"
)

// LineColumn returns the position of byte offset off in text as
// PostgreSQL and psql report positions: line and column both start at 1,
// lines end at '\n', and the column counts characters (UTF-8 code points),
// not bytes, so a Cyrillic letter before off counts once. An offset below
// 0 is taken as 0 and one past the end as the end; an offset inside a
// multibyte character is that character's position.
func LineColumn(text string, off int) (line, column int) {
	off = max(0, min(off, len(text)))
	for off > 0 && off < len(text) && !utf8.RuneStart(text[off]) {
		off--
	}
	before := text[:off]
	lineStart := strings.LastIndexByte(before, '\n') + 1
	return 1 + strings.Count(before, "\n"), 1 + utf8.RuneCountInString(text[lineStart:off])
}

// Relocate recomputes the Line and Column of r's firings and vetoes for a
// caller that gave Rewrite text[start:] of a larger text (erplab rewrite
// trims the white space around a file's statement): their Locations stay
// byte offsets into Rewrite's input, their lines and columns become the
// larger text's.
func (r *Result) Relocate(text string, start int) {
	for i := range r.Fired {
		r.Fired[i].Line, r.Fired[i].Column = LineColumn(text, start+r.Fired[i].Location)
	}
	for i := range r.Vetoes {
		r.Vetoes[i].Line, r.Vetoes[i].Column = LineColumn(text, start+r.Vetoes[i].Location)
	}
}

// locate fills the Line and Column of r's firings and vetoes from their
// byte Locations in text (Rewrite's input).
func (r *Result) locate(text string) { r.Relocate(text, 0) }
