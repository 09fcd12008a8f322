package pglog

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/erplab/erplab/internal/capture"
)

// refuseAfter is how many failing lines at the start of a file make it
// refused whole (an unknown prefix, not a log).
const refuseAfter = 10

// converter holds a conversion's state across its files.
type converter struct {
	opts     Options
	sink     Sink
	files    []string
	sum      Summary
	zones    zones
	class    classifier
	sessions map[string]*session
	sort     sorter
	now      int64 // the latest log time seen, µs since the Unix epoch
	first    int64 // the first log time seen
	// Evidence of a partial log (see partial).
	startLines int64  // statements logged at their start (log_statement)
	durStmts   int64  // statements logged with their duration
	minDur     int64  // the shortest of those, µs
	gap        string // a prepared statement executed without its parse
}

// Convert reads the server log files, in order, and hands their client
// sessions to sink as capture events (see the package doc): sink.Begin
// once the first event is due (after Options.Window of log, or at the
// end), then the events in order. Bad input is counted and named in the
// Summary, not returned; errors are a file that cannot be read, ctx's, or
// the sink's.
func Convert(ctx context.Context, files []string, opts Options, sink Sink) (Summary, error) {
	c := &converter{opts: opts, sink: sink, files: files, sessions: map[string]*session{}, minDur: -1}
	c.sum.Files = files
	c.sum.Format = map[string]Format{}
	c.sum.Events = map[capture.Kind]int64{}
	c.zones = zones{loc: opts.Location, warn: c.sum.warn}
	c.sort = sorter{window: window(opts.Window), begin: c.begin, out: c.out}
	for _, f := range files {
		if err := c.file(ctx, f); err != nil {
			return c.sum, err
		}
	}
	err := c.finish()
	return c.sum, err
}

func window(w time.Duration) int64 {
	if w == 0 {
		w = DefaultWindow
	}
	if w < 0 {
		return -1
	}
	return w.Microseconds()
}

// file converts one file.
func (c *converter) file(ctx context.Context, name string) error {
	l, closeFile, err := openFile(name)
	if err != nil {
		return fmt.Errorf("pglog: %w", err)
	}
	defer closeFile()
	first, ok, err := l.next()
	if err != nil || !ok {
		return err
	}
	l.unread(first)
	f := c.opts.Format
	if f == "" {
		f = detect(name, first)
	}
	c.sum.Format[name] = f
	err = c.records(ctx, l, newReader(f, l, &c.zones))
	c.sum.Lines += l.n
	return err
}

func newReader(f Format, l *lines, z *zones) recordReader {
	switch f {
	case FormatCSV:
		return &csvReader{l: l, z: z}
	case FormatJSON:
		return &jsonReader{l: l, z: z}
	}
	return &stderrReader{l: l, z: z}
}

// records converts the records of one file. Bad lines before the first
// good line of a session are held: refuseAfter of them refuse the file.
func (c *converter) records(ctx context.Context, l *lines, rr recordReader) error {
	var held []badLine
	for n := 0; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		r, bad, err := rr.next()
		if err != nil {
			return fmt.Errorf("pglog: %w", err)
		}
		if bad != nil {
			held = append(held, *bad)
			if rr.parsed() == 0 && len(held) >= refuseAfter {
				return c.refuse(l, held[0])
			}
			if rr.parsed() > 0 {
				c.report(l, &held)
			}
			continue
		}
		c.report(l, &held)
		if r == nil {
			return nil
		}
		if err := c.record(r); err != nil {
			return err
		}
	}
}

// report turns held bad lines into problems.
func (c *converter) report(l *lines, held *[]badLine) {
	for _, b := range *held {
		c.sum.problem(1, l.at(b.n), "%s", b.why)
	}
	*held = (*held)[:0]
}

// refuse skips the rest of a file whose first lines all fail.
func (c *converter) refuse(l *lines, first badLine) error {
	for {
		_, ok, err := l.next()
		if err != nil {
			return fmt.Errorf("pglog: %w", err)
		}
		if !ok {
			break
		}
	}
	c.sum.problem(l.n, l.at(first.n), "%s; %d lines fail before any session's line parses: the file is skipped", first.why, refuseAfter)
	return nil
}

// begin writes the header, when the first event is due.
func (c *converter) begin(origin int64) error {
	formats := []string{}
	for _, f := range c.files {
		if ft, ok := c.sum.Format[f]; ok && !slices.Contains(formats, string(ft)) {
			formats = append(formats, string(ft))
		}
	}
	h := capture.Header{Source: capture.SourcePGLog, Started: time.UnixMicro(origin).UTC(),
		Origin:  map[string]string{"files": strings.Join(c.files, ", "), "format": strings.Join(formats, ", ")},
		Partial: c.partial()}
	if slices.Contains(formats, string(FormatStderr)) {
		h.Origin["log_line_prefix"] = Prefix
	}
	c.sum.Partial = h.Partial
	return c.sink.Begin(h)
}

// out counts and hands on one event.
func (c *converter) out(e capture.Event) error {
	c.sum.Events[e.Kind]++
	if e.Kind == capture.KindConnect {
		c.sum.Sessions++
	}
	if e.SQLState != "" {
		c.sum.Failed++
	}
	return c.sink.Event(e)
}

// partial is why the log is taken as partial, "" when it is not.
func (c *converter) partial() string {
	switch {
	case c.opts.Partial != "":
		return c.opts.Partial
	case c.startLines == 0 && c.durStmts >= 10 && c.minDur >= 1000:
		return fmt.Sprintf("no statement under 1 ms among %d logged with their duration: log_min_duration_statement seems above 0", c.durStmts)
	case c.startLines == 0 && c.gap != "":
		return c.gap
	}
	return ""
}

// finish ends the sessions still open, writes what is pending and, for a
// log without events, the header.
func (c *converter) finish() error {
	ids := make([]string, 0, len(c.sessions))
	for id, s := range c.sessions {
		if s.connected && !s.ignored {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		s := c.sessions[id]
		s.open = nil
		c.push(s, c.now, &capture.Event{Kind: capture.KindDisconnect, Where: "end of input"})
		c.sum.OpenAtEnd++
	}
	if err := c.sort.drain(); err != nil {
		return err
	}
	c.sum.Late = c.sort.late
	if !c.sort.started {
		return c.begin(c.first)
	}
	if p := c.partial(); c.sum.Partial == "" && p != "" {
		c.sum.Partial = p
		c.sum.warn("the log looks partial only after the capture's header was written: %s", p)
	}
	return nil
}
