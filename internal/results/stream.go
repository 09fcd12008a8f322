package results

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/erplab/erplab/internal/safefile"
)

// StreamLine is one line of the JSON Lines stream written during a run:
// first a "header" (Document without results), then one "interval" per
// closed interval, finally a "summary" (the whole Document minus series).
// An interval line also carries, in Extra, the pieces of the document's
// extra sections recorded since the line before (the observers' samples:
// Stream.Pend), so that a killed run's stream keeps them too; readers
// that do not know Extra ignore it.
type StreamLine struct {
	Type     string    `json:"type"`
	Header   *Document `json:"header,omitempty"`
	Interval *Interval `json:"interval,omitempty"`
	Summary  *Document `json:"summary,omitempty"`
	Extra    []Part    `json:"extra,omitempty"`
}

// A Part is a piece of one section of the document's extra (an object)
// written in the stream as the run goes: Set gives fields their values,
// Append adds elements at the end of array fields. A reader applies a
// stream's parts in order, each part's Set before its Append, starting
// from an empty object (ReadStreamContents); a field is either set or
// appended to, not both.
type Part struct {
	Section string                       `json:"section"`
	Set     map[string]json.RawMessage   `json:"set,omitempty"`
	Append  map[string][]json.RawMessage `json:"append,omitempty"`
}

// Stream appends JSON lines to a file, handing every line to the kernel
// as it is written (one write(2) per line, no user-space buffering), so a
// run that is killed leaves every completed interval readable; Close also
// fsyncs. After its first failed write (a full disk: ENOSPC, EFBIG) a
// Stream cuts the file back to its last whole line, so that it stays
// readable, and writes nothing more: every later Write returns that first
// error (Err).
type Stream struct {
	mu   sync.Mutex
	f    *os.File
	path string
	size int64 // bytes of whole lines written
	err  error // the first write failure
	// lines counts the whole lines written; lastT is the t of the last
	// interval written (for "the stream has everything up to t=...").
	lines int
	lastT float64
	// discard: a stream of no file (DiscardStream).
	discard bool
	// pending are the parts for the next interval line (Pend).
	pending []Part
}

// DiscardStream returns a stream that keeps no file: Write counts the
// lines and drops them, Path is "" and Close returns nil (a run whose
// results are not kept, erplab pgbench with ERPLAB_PGBENCH_OUT=none).
func DiscardStream() *Stream { return &Stream{discard: true} }

// CreateStream creates the stream file at path, a new file with mode
// perm (safefile.Create: an existing file or a symbolic link there is
// refused).
func CreateStream(path string, perm fs.FileMode) (*Stream, error) {
	f, err := safefile.Create(path, perm)
	if err != nil {
		return nil, fmt.Errorf("results stream: %w", err)
	}
	return NewStream(f), nil
}

// NewStream is a stream into f, a file the caller created empty for it
// (loadtest reserves the stream's name before the run starts and keeps
// it open); the stream owns f from then on.
func NewStream(f *os.File) *Stream { return &Stream{f: f, path: f.Name()} }

// NewStreamNamed is NewStream with the path to name the file by in
// messages (a file made in a directory held open).
func NewStreamNamed(f *os.File, path string) *Stream { return &Stream{f: f, path: path} }

// Path is the stream's file name.
func (s *Stream) Path() string { return s.path }

// Pend queues p for the next interval line Write writes (parts of one
// section in a row are joined into one). A stream of no file, or one
// stopped by a failed write, drops it: the final document holds the
// whole section.
func (s *Stream) Pend(p Part) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.discard || s.err != nil {
		return
	}
	if n := len(s.pending); n > 0 && s.pending[n-1].Section == p.Section {
		s.pending[n-1].join(p)
		return
	}
	s.pending = append(s.pending, Part{Section: p.Section}) // join copies p's maps
	s.pending[len(s.pending)-1].join(p)
}

// join adds q's fields and elements to p's.
func (p *Part) join(q Part) {
	for k, v := range q.Set {
		if p.Set == nil {
			p.Set = map[string]json.RawMessage{}
		}
		p.Set[k] = v
	}
	for k, v := range q.Append {
		if p.Append == nil {
			p.Append = map[string][]json.RawMessage{}
		}
		p.Append[k] = append(p.Append[k], v...)
	}
}

// Write appends one line; an interval line takes the parts pending
// (Pend), which the stream then no longer holds whatever the outcome.
// Errors: encoding, or the write's (wrapped, e.g. syscall.ENOSPC), which
// stops the stream (see Stream).
func (s *Stream) Write(l StreamLine) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if l.Type == "interval" && len(s.pending) > 0 {
		l.Extra = append(l.Extra, s.pending...)
		s.pending = nil
	}
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("results stream: encode: %w", err)
	}
	if s.discard {
		s.count(l)
		return nil
	}
	n, err := s.f.Write(append(b, '\n'))
	if err != nil {
		s.err = fmt.Errorf("results stream: %w", err) // err names the file
		if n > 0 {
			_ = s.f.Truncate(s.size) // drop the torn line: the file stays readable
		}
		return s.err
	}
	s.size += int64(n)
	s.count(l)
	return nil
}

// count notes a whole line written.
func (s *Stream) count(l StreamLine) {
	s.lines++
	if l.Interval != nil {
		s.lastT = l.Interval.T
	}
}

// Err is the write failure that stopped the stream, nil while it works.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// LastT is the t (seconds since the start) of the last interval the
// stream holds, 0 before the first.
func (s *Stream) LastT() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastT
}

// Close syncs and closes the file; it returns the first write failure,
// if any, else the sync's or close's error.
func (s *Stream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return s.err
	}
	serr := s.f.Sync()
	cerr := s.f.Close()
	s.f = nil
	switch {
	case s.err != nil:
		return s.err
	case serr != nil:
		return fmt.Errorf("results stream %s: %w", s.path, serr)
	case cerr != nil:
		return fmt.Errorf("results stream %s: %w", s.path, cerr)
	}
	return nil
}

// ReadStream reads a stream file and returns its header, its intervals
// and its summary (nil when the run did not finish): ReadStreamContents
// without the extra sections.
func ReadStream(path string) (header *Document, series []Interval, summary *Document, err error) {
	c, err := ReadStreamContents(path)
	if err != nil {
		return nil, nil, nil, err
	}
	return c.Header, c.Series, c.Summary, nil
}

// StreamContents is what a stream file holds.
type StreamContents struct {
	Header  *Document
	Series  []Interval
	Summary *Document // nil when the run did not finish
	// Extra are the sections the interval lines' parts make (Part), by
	// name; nil when they carry none (streams written before erplab
	// streamed them, runs without observers).
	Extra map[string]json.RawMessage
}

// ReadStreamContents reads a stream file. A last line that does not
// parse (torn by a run killed mid-write) is ignored; any other line that
// does not parse, or whose parts do not apply, is an error naming its
// line number, as is a stream without a header line.
func ReadStreamContents(path string) (*StreamContents, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("results stream: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	var c StreamContents
	var sections extraSections
	var bad error // a line that did not parse, fatal unless it is the last
	line := 0
	for sc.Scan() {
		line++
		if bad != nil {
			return nil, bad
		}
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l StreamLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			bad = fmt.Errorf("results stream: %s: line %d: %w", path, line, err)
			continue
		}
		switch l.Type {
		case "header":
			c.Header = l.Header
		case "interval":
			if l.Interval != nil {
				c.Series = append(c.Series, *l.Interval)
			}
			if err := sections.apply(l.Extra); err != nil {
				return nil, fmt.Errorf("results stream: %s: line %d: %w", path, line, err)
			}
		case "summary":
			c.Summary = l.Summary
		default:
			return nil, fmt.Errorf("results stream: %s: line %d: type %q, want header, interval or summary", path, line, l.Type)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("results stream: %s: %w", path, err)
	}
	if c.Header == nil {
		return nil, fmt.Errorf("results stream: %s: no header line", path)
	}
	if c.Extra, err = sections.objects(); err != nil {
		return nil, fmt.Errorf("results stream: %s: %w", path, err)
	}
	return &c, nil
}

// extraSections gathers a stream's parts: per section, its set fields
// and the elements appended to its arrays.
type extraSections map[string]*section

type section struct {
	fields map[string]json.RawMessage
	arrays map[string][]json.RawMessage
}

// apply adds a line's parts.
func (xs *extraSections) apply(parts []Part) error {
	for _, p := range parts {
		if p.Section == "" {
			return fmt.Errorf("extra: a part without a section")
		}
		if *xs == nil {
			*xs = extraSections{}
		}
		s := (*xs)[p.Section]
		if s == nil {
			s = &section{fields: map[string]json.RawMessage{}, arrays: map[string][]json.RawMessage{}}
			(*xs)[p.Section] = s
		}
		for k, v := range p.Set {
			if _, ok := s.arrays[k]; ok {
				return fmt.Errorf("extra: %s.%s is set after elements were appended to it", p.Section, k)
			}
			s.fields[k] = v
		}
		for k, v := range p.Append {
			if _, ok := s.fields[k]; ok {
				return fmt.Errorf("extra: elements appended to %s.%s, which is set", p.Section, k)
			}
			s.arrays[k] = append(s.arrays[k], v...)
		}
	}
	return nil
}

// objects encodes each section as a JSON object (keys sorted).
func (xs extraSections) objects() (map[string]json.RawMessage, error) {
	if len(xs) == 0 {
		return nil, nil
	}
	out := make(map[string]json.RawMessage, len(xs))
	for name, s := range xs {
		obj := make(map[string]json.RawMessage, len(s.fields)+len(s.arrays))
		for k, v := range s.fields {
			obj[k] = v
		}
		for k, v := range s.arrays {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("extra: %s.%s: %w", name, k, err)
			}
			obj[k] = b
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("extra: %s: %w", name, err)
		}
		out[name] = b
	}
	return out, nil
}
