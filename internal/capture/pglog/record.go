package pglog

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// record is one log message in any format: the main line with its
// DETAIL and STATEMENT parts.
type record struct {
	at       string // "file:line" of its first line
	time     time.Time
	pid      int32
	session  string // "" for a process without a session
	user     string // "" when unknown
	db       string
	app      string
	backend  string // backend_type; "" when the format has none (stderr)
	severity string // LOG, ERROR, FATAL, ...
	state    string // SQLSTATE
	message  string
	detail   string
	stmt     string // the statement an error belongs to
}

// known turns the log's "[unknown]" placeholder into "".
func known(s string) string {
	if s == "[unknown]" {
		return ""
	}
	return s
}

// timeLayout is %m without its zone.
const timeLayout = "2006-01-02 15:04:05.000"

// zones turns the zone names of log times into locations, warning once
// about a name it cannot place.
type zones struct {
	loc   *time.Location // Options.Location
	cache map[string]*time.Location
	warn  func(format string, a ...any)
}

// parseTime reads "2006-01-02 15:04:05.000 ZONE" (%m; csvlog and jsonlog
// too). Errors name what is wrong.
func (z *zones) parseTime(s string) (time.Time, error) {
	if len(s) < len(timeLayout)+2 || s[len(timeLayout)] != ' ' {
		return time.Time{}, fmt.Errorf("no time like %q", "2006-01-02 15:04:05.000 UTC")
	}
	loc, err := z.location(s[len(timeLayout)+1:])
	if err != nil {
		return time.Time{}, err
	}
	t, err := time.ParseInLocation(timeLayout, s[:len(timeLayout)], loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: %w", s, err)
	}
	if name := s[len(timeLayout)+1:]; loc == time.Local && !localAbbrev(t, name) {
		z.warn("time zone %s is not the local zone's at %s: its times are taken as UTC (relative times stay right)", name, t.Format(time.DateOnly))
		return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC), nil
	}
	return t, nil
}

// localAbbrev reports whether the local zone is called name at t.
func localAbbrev(t time.Time, name string) bool {
	abbr, _ := t.Zone()
	return abbr == name
}

// location is the zone called name: UTC, GMT, a numeric offset (+03,
// -0330, +05:30), else Options.Location or the local zone.
func (z *zones) location(name string) (*time.Location, error) {
	if l, ok := z.cache[name]; ok {
		return l, nil
	}
	l, err := z.lookup(name)
	if err != nil {
		return nil, err
	}
	if z.cache == nil {
		z.cache = map[string]*time.Location{}
	}
	z.cache[name] = l
	return l, nil
}

func (z *zones) lookup(name string) (*time.Location, error) {
	switch {
	case name == "":
		return nil, fmt.Errorf("time without a zone")
	case name == "UTC" || name == "GMT" || name == "Z":
		return time.UTC, nil
	case name[0] == '+' || name[0] == '-':
		off, err := offset(name)
		if err != nil {
			return nil, err
		}
		return time.FixedZone(name, off), nil
	case strings.ContainsAny(name, " ,"):
		return nil, fmt.Errorf("time zone %q", name)
	case z.loc != nil:
		return z.loc, nil
	}
	return time.Local, nil
}

// offset reads +hh, +hhmm or +hh:mm in seconds.
func offset(s string) (int, error) {
	digits := strings.ReplaceAll(s[1:], ":", "")
	if len(digits) != 2 && len(digits) != 4 {
		return 0, fmt.Errorf("time zone offset %q", s)
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		return 0, fmt.Errorf("time zone offset %q", s)
	}
	h, m := n, 0
	if len(digits) == 4 {
		h, m = n/100, n%100
	}
	off := h*3600 + m*60
	if s[0] == '-' {
		off = -off
	}
	return off, nil
}
