package techlog

import (
	"fmt"
	"sort"
	"strings"
)

// Notes are the summary's lines for the user, one fact each: the
// counts, each mapped type once, 1C's own lock conflicts (TDEADLOCK,
// TTIMEOUT), a partial journal, the skipped lines with the first error.
func (s *Summary) Notes() []string {
	notes := []string{fmt.Sprintf("%s (%d with parameters) in %s from %s in %s",
		plural(s.Statements, "statement"), s.Executes, plural(s.Sessions, "session"), plural(s.Records, "event"), plural(s.Files, "file"))}
	for _, t := range s.Types {
		notes = append(notes, fmt.Sprintf("type %s (1C's PostgreSQL build) is bound as %s (%s)", t.From, t.To, plural(t.Params, "parameter")))
	}
	if n := s.Other["TDEADLOCK"]; n > 0 {
		notes = append(notes, fmt.Sprintf("%s: deadlocks on 1C's managed locks, which a replay on the server alone does not reproduce", plural(n, "TDEADLOCK event")))
	}
	if n := s.Other["TTIMEOUT"]; n > 0 {
		notes = append(notes, fmt.Sprintf("%s: waits on 1C's managed locks that timed out, not reproduced by a replay", plural(n, "TTIMEOUT event")))
	}
	if other := s.otherLine(); other != "" {
		notes = append(notes, "skipped events: "+other)
	}
	if s.NoSQLState > 0 {
		notes = append(notes, fmt.Sprintf("%d of %d failed statements had no SQLSTATE in the journal: recorded as %s", s.NoSQLState, s.Failed, UnknownSQLState))
	}
	if s.Partial != "" {
		notes = append(notes, "partial journal: "+s.Partial)
	}
	if s.Logcfg != "" {
		notes = append(notes, s.Logcfg)
	}
	if s.BadLines > 0 && len(s.Errors) > 0 {
		notes = append(notes, fmt.Sprintf("%s skipped as bad input; first: %v", plural(s.BadLines, "line"), s.Errors[0]))
	}
	return notes
}

// otherLine lists the skipped events by name: "CALL 3, TLOCK 2".
func (s *Summary) otherLine() string {
	names := make([]string, 0, len(s.Other))
	for n := range s.Other {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, s.Other[n])
	}
	return strings.Join(parts, ", ")
}

// plural is "1 word" or "n words".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
