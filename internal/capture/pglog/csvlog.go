package pglog

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// csvReader reads a csvlog: one record per CSV row, whose quoted fields
// may span lines. A row whose quotes do not close before a line that
// starts a new row (or the end of the file) is a bad line, and reading
// resumes at that new row.
type csvReader struct {
	l    *lines
	z    *zones
	good int64
}

func (c *csvReader) parsed() int64 { return c.good }

// The csvlog columns used (PostgreSQL 13 to 17 have 23 to 26 columns).
const (
	csvTime     = 0
	csvUser     = 1
	csvDB       = 2
	csvPID      = 3
	csvSession  = 5
	csvSeverity = 11
	csvState    = 12
	csvMessage  = 13
	csvDetail   = 14
	csvQuery    = 19
	csvApp      = 22
	csvBackend  = 23
	csvMinCols  = 23
)

func (c *csvReader) next() (*record, *badLine, error) {
	text, start, bad, err := c.row()
	if err != nil || bad != nil || text == "" {
		return nil, bad, err
	}
	fields, err := splitCSV(text)
	if err != nil {
		return nil, &badLine{start, err.Error()}, nil
	}
	r, err := c.record(fields)
	if err != nil {
		return nil, &badLine{start, err.Error()}, nil
	}
	c.good++
	r.at = c.l.at(start)
	return r, nil, nil
}

// row gathers the lines of one CSV row: its text ("" at the end of the
// file) and the number of its first line.
func (c *csvReader) row() (text string, start int64, bad *badLine, err error) {
	line, ok, err := c.l.next()
	if err != nil || !ok {
		return "", 0, nil, err
	}
	start = c.l.n
	var b strings.Builder
	b.WriteString(line)
	open := strings.Count(line, `"`)%2 == 1
	for open && !c.l.cut {
		more, ok, err := c.l.next()
		if err != nil {
			return "", 0, nil, err
		}
		if !ok {
			break
		}
		if csvStart(more) {
			c.l.unread(more)
			return "", 0, &badLine{start, fmt.Sprintf("a quoted field not closed before the row of line %d", c.l.n+1)}, nil
		}
		b.WriteString("\n")
		b.WriteString(more)
		open = open != (strings.Count(more, `"`)%2 == 1)
	}
	if open || c.l.cut {
		return "", 0, &badLine{start, "the row is cut (the file ends inside it)"}, nil
	}
	return b.String(), start, nil, nil
}

// splitCSV splits one row: fields separated by commas, a quoted field
// between double quotes with "" for a quote.
func splitCSV(s string) ([]string, error) {
	var out []string
	for {
		if !strings.HasPrefix(s, `"`) {
			f, rest, more := strings.Cut(s, ",")
			if strings.Contains(f, `"`) {
				return nil, errors.New("a quote inside an unquoted CSV field")
			}
			out = append(out, f)
			if !more {
				return out, nil
			}
			s = rest
			continue
		}
		f, rest, err := quoted(s[1:])
		if err != nil {
			return nil, err
		}
		out = append(out, f)
		if rest == "" {
			return out, nil
		}
		if rest[0] != ',' {
			return nil, errors.New("text after a quoted CSV field")
		}
		s = rest[1:]
	}
}

// quoted reads a quoted field's content after its opening quote.
func quoted(s string) (field, rest string, err error) {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '"')
		if i < 0 {
			return "", "", errors.New("a quoted CSV field not closed")
		}
		b.WriteString(s[:i])
		if i+1 < len(s) && s[i+1] == '"' {
			b.WriteByte('"')
			s = s[i+2:]
			continue
		}
		return b.String(), s[i+1:], nil
	}
}

// record makes a record of a row's fields.
func (c *csvReader) record(f []string) (*record, error) {
	if len(f) < csvMinCols {
		return nil, fmt.Errorf("%d CSV fields, a csvlog row has %d or more", len(f), csvMinCols)
	}
	t, err := c.z.parseTime(f[csvTime])
	if err != nil {
		return nil, err
	}
	pid, err := strconv.ParseInt(f[csvPID], 10, 32)
	if err != nil {
		return nil, fmt.Errorf("process id %q", f[csvPID])
	}
	r := &record{time: t, pid: int32(pid), session: f[csvSession], user: f[csvUser], db: f[csvDB],
		app: f[csvApp], severity: f[csvSeverity], state: f[csvState],
		message: f[csvMessage], detail: f[csvDetail], stmt: f[csvQuery]}
	if len(f) > csvBackend {
		r.backend = f[csvBackend]
	}
	if !isSeverity(r.severity) {
		return nil, fmt.Errorf("severity %q: lc_messages must be 'C' (English)", r.severity)
	}
	return r, nil
}
