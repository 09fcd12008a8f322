package replay

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Target names a key operation and its APDEX target time T, and says
// which statements belong to it: those whose fingerprint is Match (when
// Match is 16 hexadecimal digits, pg_query's fingerprint) or whose text
// contains Match (case-insensitive); an empty Match only gives T to the
// group of that name (e.g. a 1C Context).
type Target struct {
	Name  string
	T     time.Duration
	Match string
}

// matches reports whether a statement of text sql and fingerprint fp
// ("" when unknown) belongs to the target.
func (t Target) matches(sql, fp string) bool {
	switch {
	case t.Match == "":
		return false
	case isFingerprint(t.Match):
		return strings.EqualFold(t.Match, fp)
	default:
		return strings.Contains(strings.ToLower(sql), strings.ToLower(t.Match))
	}
}

// isFingerprint reports whether s is 16 hexadecimal digits.
func isFingerprint(s string) bool {
	if len(s) != 16 {
		return false
	}
	_, err := strconv.ParseUint(s, 16, 64)
	return err == nil
}

// ParseTargets reads a targets file, named name in errors. One target a
// line:
//
//	NAME T [MATCH]
//
// NAME is one word or a double-quoted string (Go syntax); T a duration
// with its unit (500ms, 1.5s); MATCH the rest of the line: a fingerprint
// (16 hex digits, as pg_query prints it) or a text the statement
// contains. Blank lines and lines starting with # are ignored. The first
// matching line wins; lines of the same name share its group and must
// give the same T. An error names the file, line and column.
func ParseTargets(r io.Reader, name string) ([]Target, error) {
	var out []Target
	seen := map[string]time.Duration{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		col := strings.Index(sc.Text(), line) + 1
		t, err := parseTarget(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d:%d: %w", name, n, col+err.col, err.err)
		}
		if prev, ok := seen[t.Name]; ok && prev != t.T {
			return nil, fmt.Errorf("%s:%d:%d: %q has T %s here and %s above", name, n, col, t.Name, t.T, prev)
		}
		seen[t.Name] = t.T
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// targetError is a line's error at a column (0-based in the line).
type targetError struct {
	col int
	err error
}

// parseTarget reads one non-empty line.
func parseTarget(line string) (Target, *targetError) {
	var t Target
	rest := line
	if strings.HasPrefix(line, `"`) {
		q, err := strconv.QuotedPrefix(line)
		if err != nil {
			return t, &targetError{0, fmt.Errorf("unterminated quoted name")}
		}
		t.Name, _ = strconv.Unquote(q)
		rest = line[len(q):]
		if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			return t, &targetError{len(q), fmt.Errorf("want a space after the quoted name")}
		}
	} else {
		t.Name, rest, _ = strings.Cut(line, " ")
		if i := strings.IndexByte(t.Name, '\t'); i >= 0 {
			t.Name, rest = line[:i], line[i+1:]
		}
	}
	if t.Name == "" {
		return t, &targetError{0, fmt.Errorf("empty name")}
	}
	rest = strings.TrimLeft(rest, " \t")
	at := len(line) - len(rest)
	ts, match, _ := strings.Cut(strings.ReplaceAll(rest, "\t", " "), " ")
	if ts == "" {
		return t, &targetError{at, fmt.Errorf("%q: want NAME T [MATCH]: no T", t.Name)}
	}
	d, err := time.ParseDuration(ts)
	if err != nil || d <= 0 {
		return t, &targetError{at, fmt.Errorf("T %q: want a positive duration with its unit, e.g. 500ms or 1.5s", ts)}
	}
	t.T, t.Match = d, strings.TrimSpace(match)
	return t, nil
}
