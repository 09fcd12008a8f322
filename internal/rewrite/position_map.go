package rewrite

import "unicode/utf8"

// PositionMap maps a position in a rewritten text to the input it was
// rewritten from, so that an error PostgreSQL reports at a position of
// the rewritten text (ErrorResponse field P) can point where the client's
// own text has the same token. Bytes outside the edits map one to one; a
// byte of a kept copy of the input (the arm kept as written, guardOpen)
// maps to the byte it copies; any other inserted byte maps to the start
// of its edit.
type PositionMap struct {
	edits []edit // sorted by start, non-overlapping (as splice applied them)
	// changed are the input byte spans of the statements that have edits
	changed [][2]int
}

// InChangedStatement reports whether the 1-based character position pos
// of rewritten (an error's position) lies in a statement the rewrite
// changed, rather than in another statement of a multi-statement text.
// Without a position (pos < 1) it reports true: the error may be the
// changed statement's.
func (m PositionMap) InChangedStatement(original, rewritten string, pos int) bool {
	if pos < 1 || m.Identity() {
		return pos < 1
	}
	off := charOffset(original, m.OriginalChar(original, rewritten, pos))
	for _, c := range m.changed {
		if off >= c[0] && off < c[1] {
			return true
		}
	}
	return false
}

// Identity reports whether the map changes nothing (no edits).
func (m PositionMap) Identity() bool { return len(m.edits) == 0 }

// Original returns the byte offset in the input of byte offset off of
// the rewritten text (clamped to the texts' lengths by the caller's use:
// an offset past the rewritten text maps past the input's end by the
// same amount).
func (m PositionMap) Original(off int) int {
	in, out := 0, 0 // matching offsets in the input and the rewritten text
	for _, e := range m.edits {
		if off < out+(e.start-in) {
			return in + (off - out)
		}
		out += e.start - in
		in = e.start
		if off < out+len(e.text) {
			k := off - out
			if e.copyLen > 0 && k >= e.copyAt && k < e.copyAt+e.copyLen {
				return e.copyFrom + (k - e.copyAt)
			}
			return e.start
		}
		out += len(e.text)
		in = e.end
	}
	return in + (off - out)
}

// OriginalChar maps a 1-based character position in rewritten (as
// PostgreSQL's error position counts, e.g. ErrorResponse field P) to the
// 1-based character position in original, the text rewritten was made
// from with this map. Positions below 1 are returned as they are.
func (m PositionMap) OriginalChar(original, rewritten string, pos int) int {
	if pos < 1 || m.Identity() {
		return pos
	}
	o := m.Original(charOffset(rewritten, pos))
	if o >= len(original) {
		return utf8.RuneCountInString(original) + 1 + (o - len(original))
	}
	return utf8.RuneCountInString(original[:o]) + 1
}

// charOffset returns the byte offset in s of the 1-based character
// position pos (as PostgreSQL counts error positions); a position past
// the end lies as many bytes past len(s).
func charOffset(s string, pos int) int {
	n := 0
	for i := range s {
		n++
		if n == pos {
			return i
		}
	}
	return len(s) + max(0, pos-n-1)
}
