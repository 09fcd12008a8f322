package pglog

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// badLine is a line that does not parse: its number and why.
type badLine struct {
	n   int64
	why string
}

// recordReader yields the records of one file in order: a record, a bad
// line (skipped), or both nil at the end; err is a read error.
type recordReader interface {
	next() (*record, *badLine, error)
	// parsed is the number of lines parsed so far.
	parsed() int64
}

// stderrReader reads a stderr log written with Prefix: one record per
// message, its DETAIL and STATEMENT lines attached, continuation lines
// (a tab first) appended to the part they continue.
type stderrReader struct {
	l       *lines
	z       *zones
	pending *record // the message whose parts may follow
	field   *string // where continuation lines go; nil: dropped
	drop    bool    // the continuation and part lines of a bad line follow
	good    int64   // lines of a session parsed
}

// parsed counts the lines of sessions only: the lines of processes
// without a session ("%m [%p] " then the severity) are the same under
// most prefixes and prove nothing.
func (s *stderrReader) parsed() int64 { return s.good }

func (s *stderrReader) next() (*record, *badLine, error) {
	for {
		line, ok, err := s.l.next()
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			r := s.pending
			s.pending = nil
			return r, nil, nil
		}
		if s.l.cut {
			s.drop = true
			return nil, &badLine{s.l.n, "the last line is cut (no newline at the end of the file)"}, nil
		}
		if out, bad := s.line(line); out != nil || bad != nil {
			return out, bad, nil
		}
	}
}

// line takes one physical line; it returns a finished record or a bad
// line, or nil, nil when the line was absorbed.
func (s *stderrReader) line(line string) (*record, *badLine) {
	if strings.HasPrefix(line, "\t") {
		switch {
		case s.drop:
		case s.pending == nil:
			return nil, &badLine{s.l.n, "a continuation line (tab first) without a message before it"}
		case s.field != nil:
			*s.field += "\n" + line[1:]
		}
		return nil, nil
	}
	r, err := s.parse(line)
	if err != nil {
		s.drop = true
		return nil, &badLine{s.l.n, err.Error()}
	}
	r.at = s.l.at(s.l.n)
	if r.session != "" {
		s.good++
	}
	if isPart(r.severity) {
		if p := s.pending; !s.drop && p != nil && p.pid == r.pid && p.session == r.session {
			s.field = p.attach(r)
			return nil, nil
		}
		if s.drop {
			return nil, nil // a part of the bad line before
		}
	}
	s.drop = false
	out := s.pending
	s.pending, s.field = r, &r.message
	return out, nil
}

// attach sets the part p of r (DETAIL, STATEMENT) and returns the field
// its continuation lines go to (nil for parts not kept: HINT, CONTEXT...).
func (r *record) attach(p *record) *string {
	switch p.severity {
	case "DETAIL":
		r.detail = p.message
		return &r.detail
	case "STATEMENT":
		r.stmt = p.message
		return &r.stmt
	}
	return nil
}

var (
	mainSeverities = []string{"LOG", "ERROR", "FATAL", "PANIC", "WARNING", "NOTICE", "INFO", "DEBUG"}
	partSeverities = []string{"DETAIL", "STATEMENT", "HINT", "CONTEXT", "QUERY", "LOCATION", "BACKTRACE"}
)

func isPart(sev string) bool {
	for _, p := range partSeverities {
		if sev == p {
			return true
		}
	}
	return false
}

func isSeverity(sev string) bool {
	if isPart(sev) {
		return true
	}
	for _, m := range mainSeverities {
		if sev == m {
			return true
		}
	}
	return false
}

// prefixError says how a line differs from Prefix.
func prefixError(what string) error {
	return fmt.Errorf("not the log_line_prefix '%s': %s", Prefix, what)
}

// parse reads one line that is not a continuation: "%m [%p] " and
// either a severity (a process without a session) or the session part.
func (s *stderrReader) parse(line string) (*record, error) {
	if len(line) < len(timeLayout)+2 {
		return nil, prefixError("no time (%m) first")
	}
	zone, rest, _ := strings.Cut(line[len(timeLayout)+1:], " ")
	t, err := s.z.parseTime(line[:len(timeLayout)+1+len(zone)])
	if err != nil {
		return nil, prefixError(err.Error())
	}
	pid, rest, err := cutPID(rest)
	if err != nil {
		return nil, err
	}
	r := &record{time: t, pid: pid}
	if sev, msg, ok := severityAt(rest); ok {
		r.severity, r.message = sev, msg
		if clientMessage(msg) {
			return nil, prefixError("a client session's message without the session part (%q%c %l %e user=%u db=%d app=%a)")
		}
		return r, nil
	}
	if err := r.sessionPart(rest); err != nil {
		return nil, err
	}
	return r, nil
}

// cutPID reads "[pid] ".
func cutPID(s string) (int32, string, error) {
	inner, rest, ok := strings.Cut(s, "] ")
	if !ok || !strings.HasPrefix(inner, "[") {
		return 0, "", prefixError("no [%p] after the time")
	}
	pid, err := strconv.ParseInt(inner[1:], 10, 32)
	if err != nil {
		return 0, "", prefixError("no [%p] after the time")
	}
	return int32(pid), rest, nil
}

// severityAt splits "SEVERITY:  message".
func severityAt(s string) (sev, msg string, ok bool) {
	sev, msg, ok = strings.Cut(s, ":  ")
	if !ok || !isSeverity(sev) {
		return "", "", false
	}
	return sev, msg, true
}

// sessionPart reads "%c %l %e user=%u db=%d app=%a SEVERITY:  message".
func (r *record) sessionPart(s string) error {
	f := strings.SplitN(s, " ", 4)
	if len(f) < 4 || !sessionID(f[0]) {
		return prefixError("no session id (%c) after [%p]")
	}
	if _, err := strconv.ParseUint(f[1], 10, 64); err != nil {
		return prefixError("no line number (%l) after the session id")
	}
	if len(f[2]) != 5 {
		return prefixError("no SQLSTATE (%e) after the line number")
	}
	r.session, r.state = f[0], f[2]
	rest, ok := strings.CutPrefix(f[3], "user=")
	if !ok {
		return prefixError("no user=%u after the SQLSTATE")
	}
	user, rest, ok := strings.Cut(rest, " db=")
	if !ok {
		return prefixError("no db=%d after user=%u")
	}
	db, rest, ok := strings.Cut(rest, " app=")
	if !ok {
		return prefixError("no app=%a after db=%d")
	}
	app, sev, msg, err := cutApp(rest)
	if err != nil {
		return err
	}
	r.user, r.db, r.app, r.severity, r.message = known(user), known(db), known(app), sev, msg
	return nil
}

// cutApp splits "app SEVERITY:  message" at the first severity.
func cutApp(s string) (app, sev, msg string, err error) {
	for from := 0; ; {
		i := strings.Index(s[from:], ":  ")
		if i < 0 {
			break
		}
		i += from
		j := strings.LastIndexByte(s[:i], ' ') + 1
		if j > 0 && isSeverity(s[j:i]) {
			return s[:j-1], s[j:i], s[i+3:], nil
		}
		from = i + 3
	}
	return "", "", "", errors.New("no severity (LOG, ERROR, ...) after the prefix: lc_messages must be 'C' (English)")
}

// sessionID reports whether s looks like %c: hex "." hex.
func sessionID(s string) bool {
	a, b, ok := strings.Cut(s, ".")
	return ok && a != "" && b != "" && isHex(a) && isHex(b)
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// clientMessage reports whether msg is one only client sessions log.
func clientMessage(msg string) bool {
	for _, p := range []string{"statement: ", "duration: ", "execute ", "connection authorized: ", "disconnection: "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
