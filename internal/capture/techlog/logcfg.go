package techlog

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Heuristic for a journal filtered by duration when no logcfg.xml says
// so: at least heurMinStatements statements and not one shorter than
// heurMinDuration µs. An unfiltered journal of 1C always holds
// sub-millisecond calls (BEGIN, COMMIT, reads by key).
const (
	heurMinStatements = 100
	heurMinDuration   = 10_000
)

// partial sets Summary.Partial: Options.Partial, else what logcfg.xml
// says, else the heuristic.
func (j *Journal) partial(paths []string) error {
	if j.opts.Partial != "" {
		j.sum.Partial = j.opts.Partial
		return nil
	}
	if j.opts.Logcfg != "" {
		p, note, err := logcfgPartial(j.opts.Logcfg, paths)
		if err != nil {
			return err
		}
		j.sum.Partial, j.sum.Logcfg = p, note
		return nil
	}
	if j.sum.Statements >= heurMinStatements && j.minDur >= heurMinDuration {
		j.sum.Partial = fmt.Sprintf("every one of the %d DBPOSTGRS statements lasted at least %v: the journal looks filtered by duration (logcfg.xml), so it holds only the slow ones",
			j.sum.Statements, time.Duration(j.minDur)*time.Microsecond)
	}
	return nil
}

// The parts of logcfg.xml that decide which DBPOSTGRS events a journal
// holds: <config><log location=... format=...><event><eq property=...
// value=.../>...</event></log></config>. Conditions in one <event> all
// hold (and); the <event> elements are alternatives (or).
type xmlConfig struct {
	Logs []xmlLog `xml:"log"`
}

type xmlLog struct {
	Location string     `xml:"location,attr"`
	Format   string     `xml:"format,attr"`
	Events   []xmlEvent `xml:"event"`
}

type xmlEvent struct {
	Conds []xmlCond `xml:",any"`
}

type xmlCond struct {
	XMLName  xml.Name
	Property string    `xml:"property,attr"`
	Value    string    `xml:"value,attr"`
	Inner    []xmlCond `xml:",any"`
}

// logcfgPartial reads logcfg.xml at path: the <log> elements whose
// location ends in the name of one of paths (all of them when none
// does), and in them the <event> elements that select DBPOSTGRS. When
// every one of those is restricted (a duration threshold, a condition
// on another property), the journal is partial and the result says by
// what; when one is not, "". note is set when no <event> selects
// DBPOSTGRS. Units as 1C documents them: duration in 1/10000 s,
// durationus in µs.
func logcfgPartial(path string, paths []string) (partial, note string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	var cfg xmlConfig
	if err := xml.Unmarshal(data, &cfg); err != nil {
		return "", "", fmt.Errorf("%s: %w", path, err)
	}
	logs := logsFor(cfg.Logs, paths)
	var limits []string
	for _, l := range logs {
		if strings.EqualFold(l.Format, "json") {
			return "", "", fmt.Errorf("%s: <log location=%q> writes the JSON format; only the text format is read", path, l.Location)
		}
		for _, ev := range l.Events {
			conds := flatten(ev.Conds)
			if !selectsDBPOSTGRS(conds) {
				continue
			}
			lim := restrictions(conds)
			if lim == "" {
				return "", "", nil
			}
			limits = append(limits, lim)
		}
	}
	if limits == nil {
		return "", path + " selects no DBPOSTGRS events for this journal", nil
	}
	return "logcfg.xml keeps only DBPOSTGRS events with " + strings.Join(limits, ", or with "), "", nil
}

// logsFor picks the <log> elements whose location's last element is
// the last element of one of paths, all of them when none is.
func logsFor(logs []xmlLog, paths []string) []xmlLog {
	var picked []xmlLog
	for _, l := range logs {
		loc := filepath.Base(strings.ReplaceAll(strings.TrimRight(l.Location, `/\`), `\`, "/"))
		for _, p := range paths {
			if strings.EqualFold(loc, filepath.Base(filepath.Clean(p))) {
				picked = append(picked, l)
				break
			}
		}
	}
	if picked == nil {
		return logs
	}
	return picked
}

// flatten lifts the conditions of <and> elements to their parent's
// level; an <or> stays one condition (an unknown restriction).
func flatten(cs []xmlCond) []xmlCond {
	var out []xmlCond
	for _, c := range cs {
		if strings.EqualFold(c.XMLName.Local, "and") {
			out = append(out, flatten(c.Inner)...)
		} else {
			out = append(out, c)
		}
	}
	return out
}

// selectsDBPOSTGRS reports whether the conditions on the event name
// let DBPOSTGRS through (eq, ne and like are read; others let it).
func selectsDBPOSTGRS(conds []xmlCond) bool {
	for _, c := range conds {
		if !strings.EqualFold(c.Property, "name") {
			continue
		}
		is := strings.EqualFold(c.Value, "DBPOSTGRS")
		switch strings.ToLower(c.XMLName.Local) {
		case "eq":
			if !is {
				return false
			}
		case "ne":
			if is {
				return false
			}
		case "like":
			if !like(strings.ToUpper(c.Value), "DBPOSTGRS") {
				return false
			}
		}
	}
	return true
}

// like matches s against a pattern with % (any run) and _ (one
// character).
func like(pat, s string) bool {
	if pat == "" {
		return s == ""
	}
	switch pat[0] {
	case '%':
		for i := 0; i <= len(s); i++ {
			if like(pat[1:], s[i:]) {
				return true
			}
		}
		return false
	case '_':
		return s != "" && like(pat[1:], s[1:])
	}
	return s != "" && s[0] == pat[0] && like(pat[1:], s[1:])
}

// restrictions describes the conditions that drop some DBPOSTGRS
// events: those on duration and on any property but the event name,
// the process and the infobase ("" when none).
func restrictions(conds []xmlCond) string {
	var rs []string
	for _, c := range conds {
		prop := strings.ToLower(c.Property)
		switch prop {
		case "name", "process", "p:processname", "database":
			continue
		case "duration", "durationus":
			rs = append(rs, durationLimit(c, prop))
		default:
			rs = append(rs, fmt.Sprintf("%s %s %q", c.Property, c.XMLName.Local, c.Value))
		}
	}
	return strings.Join(rs, " and ")
}

// durationLimit describes a condition on duration (1/10000 s) or
// durationus (µs) as a time.
func durationLimit(c xmlCond, prop string) string {
	ops := map[string]string{"ge": ">=", "gt": ">", "le": "<=", "lt": "<", "eq": "=", "ne": "!="}
	op, ok := ops[strings.ToLower(c.XMLName.Local)]
	n, err := strconv.ParseInt(c.Value, 10, 64)
	if !ok || err != nil {
		return fmt.Sprintf("%s %s %q", c.Property, c.XMLName.Local, c.Value)
	}
	unit := 100 * time.Microsecond
	if prop == "durationus" {
		unit = time.Microsecond
	}
	return fmt.Sprintf("duration %s %v (%s %s %s)", op, time.Duration(n)*unit, c.XMLName.Local, c.Property, c.Value)
}
