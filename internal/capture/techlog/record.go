package techlog

import (
	"strconv"
	"strings"
)

// maxRecord bounds one event's text (bytes): a quote that is never
// closed stops there instead of reading the rest of a large file.
const maxRecord = 64 << 20

// record is one event as written: the lines it spans, the end time
// within the hour (minute, second, microsecond), the duration (µs), the
// event name, the level and the properties in order.
type record struct {
	lines          []rawLine
	min, sec, usec int
	dur            int64
	name           string
	level          int
	props          []prop
}

// prop is one name=value. Value is decoded (quotes removed, a doubled
// quote made single, line ends as "\n"); li and bi locate its first
// character (after an opening quote) in record.lines; quote is the
// quote character, 0 for a bare value.
type prop struct {
	name, value string
	li, bi      int
	quote       byte
}

// posErr is a parse error at byte bi of record line li.
type posErr struct {
	li, bi int
	msg    string
}

// get returns the first property called name.
func (r *record) get(name string) (prop, bool) {
	for _, p := range r.props {
		if p.name == name {
			return p, true
		}
	}
	return prop{}, false
}

// parseRecord reads the event that starts on line first, pulling the
// lines of multi-line values from lr. On a *posErr the lines read so far
// are in the returned record (for the caller to push back); err is a
// read error.
func parseRecord(first rawLine, lr *lineReader) (*record, *posErr, error) {
	r := &record{lines: []rawLine{first}}
	i, pe := r.header()
	if pe != nil {
		return r, pe, nil
	}
	pe, err := r.properties(i, lr)
	return r, pe, err
}

// header parses "mm:ss.uuuuuu-duration,NAME,level" and returns the byte
// index after the comma that follows the level (the line's length when
// no property follows).
func (r *record) header() (int, *posErr) {
	s := r.lines[0].text
	if !isHeader(s) {
		return 0, &posErr{0, 0, "not the start of an event (mm:ss.uuuuuu-duration,EVENT,level,...)"}
	}
	r.min, _ = strconv.Atoi(s[0:2])
	r.sec, _ = strconv.Atoi(s[3:5])
	r.usec, _ = strconv.Atoi(s[6:12])
	if r.min > 59 || r.sec > 59 {
		return 0, &posErr{0, 0, "minute or second out of range in " + strconv.Quote(s[:5])}
	}
	dur, i, pe := field(s, 13, "duration")
	if pe != nil {
		return 0, pe
	}
	var err error
	if r.dur, err = strconv.ParseInt(dur, 10, 64); err != nil {
		return 0, &posErr{0, 13, "duration is not a number of microseconds: " + strconv.Quote(dur)}
	}
	if r.name, i, pe = field(s, i, "event name"); pe != nil {
		return 0, pe
	}
	if !validName(r.name) {
		return 0, &posErr{0, i - len(r.name) - 1, "event name " + strconv.Quote(r.name) + " is not a word"}
	}
	lv, j, pe := field(s, i, "level")
	if pe != nil {
		return 0, pe
	}
	if r.level, err = strconv.Atoi(lv); err != nil {
		return 0, &posErr{0, i, "level is not a number: " + strconv.Quote(lv)}
	}
	return j, nil
}

// field returns s[i:] up to the next comma (or the end) and the index
// after that comma; an empty field is an error naming what.
func field(s string, i int, what string) (string, int, *posErr) {
	if i >= len(s) {
		return "", len(s), &posErr{0, i, what + " missing"}
	}
	end := strings.IndexByte(s[i:], ',')
	if end < 0 {
		end = len(s) - i
	}
	if end == 0 {
		return "", i, &posErr{0, i, what + " missing"}
	}
	return s[i : i+end], min(i+end+1, len(s)), nil
}

// validName reports whether s is an event name: letters, digits, '_'.
func validName(s string) bool {
	for _, c := range s {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return s != ""
}

// properties parses name=value pairs from byte i of the first line to
// the end of the record.
func (r *record) properties(i int, lr *lineReader) (*posErr, error) {
	li := 0
	for {
		s := r.lines[li].text
		if i >= len(s) {
			return nil, nil
		}
		eq := strings.IndexAny(s[i:], "=,")
		if eq <= 0 || s[i+eq] == ',' {
			return &posErr{li, i, "property name=value expected"}, nil
		}
		p := prop{name: s[i : i+eq], li: li, bi: i + eq + 1}
		i = p.bi
		if i < len(s) && (s[i] == '\'' || s[i] == '"') {
			var pe *posErr
			var err error
			if li, i, pe, err = r.quoted(&p, li, i, lr); pe != nil || err != nil {
				return pe, err
			}
		} else {
			end := strings.IndexByte(s[i:], ',')
			if end < 0 {
				end = len(s) - i
			}
			p.value = s[i : i+end]
			i += end
		}
		r.props = append(r.props, p)
		s = r.lines[li].text
		if i >= len(s) {
			return nil, nil
		}
		if s[i] != ',' {
			return &posErr{li, i, "',' or the end of the line expected after the closing quote"}, nil
		}
		i++
	}
}

// quoted decodes the quoted value that opens at byte i of line li into
// p and returns the position after its closing quote.
func (r *record) quoted(p *prop, li, i int, lr *lineReader) (int, int, *posErr, error) {
	q := r.lines[li].text[i]
	p.quote, p.bi = q, i+1
	open := posErr{li, i, "no closing " + string(q) + " for this value before the end of the file"}
	s := r.lines[li].text
	if k := strings.IndexByte(s[i+1:], q); k >= 0 && (i+2+k == len(s) || s[i+2+k] != q) {
		p.value = s[i+1 : i+1+k]
		return li, i + 2 + k, nil, nil
	}
	var b strings.Builder
	j := i + 1
	for {
		s := r.lines[li].text
		k := strings.IndexByte(s[j:], q)
		if k >= 0 {
			b.WriteString(s[j : j+k])
			j += k + 1
			if j < len(s) && s[j] == q {
				b.WriteByte(q)
				j++
				continue
			}
			p.value = b.String()
			return li, j, nil, nil
		}
		b.WriteString(s[j:])
		b.WriteByte('\n')
		l, ok, err := lr.next()
		if err != nil || !ok {
			return li, j, &open, err
		}
		if b.Len() > maxRecord {
			lr.push([]rawLine{l})
			open.msg = "value longer than 64 MiB: no closing " + string(q) + "?"
			return li, j, &open, nil
		}
		r.lines = append(r.lines, l)
		li, j = li+1, 0
	}
}

// locate returns the record position (line index, byte) of byte off of
// p's decoded value.
func (r *record) locate(p prop, off int) (int, int) {
	li, bi := p.li, p.bi
	for v := 0; v < off; v++ {
		s := r.lines[li].text
		switch {
		case bi >= len(s) && li+1 < len(r.lines):
			li, bi = li+1, 0
		case bi+1 < len(s) && p.quote != 0 && s[bi] == p.quote:
			bi += 2
		default:
			bi++
		}
	}
	return li, bi
}
