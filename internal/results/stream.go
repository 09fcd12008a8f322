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
type StreamLine struct {
	Type     string    `json:"type"`
	Header   *Document `json:"header,omitempty"`
	Interval *Interval `json:"interval,omitempty"`
	Summary  *Document `json:"summary,omitempty"`
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

// Write appends one line. Errors: encoding, or the write's (wrapped, e.g.
// syscall.ENOSPC), which stops the stream (see Stream).
func (s *Stream) Write(l StreamLine) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
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
// and its summary (nil when the run did not finish). A last line that does
// not parse (torn by a run killed mid-write) is ignored; any other line
// that does not parse is an error naming its line number, as is a stream
// without a header line.
func ReadStream(path string) (header *Document, series []Interval, summary *Document, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("results stream: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	var bad error // a line that did not parse, fatal unless it is the last
	line := 0
	for sc.Scan() {
		line++
		if bad != nil {
			return nil, nil, nil, bad
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
			header = l.Header
		case "interval":
			if l.Interval != nil {
				series = append(series, *l.Interval)
			}
		case "summary":
			summary = l.Summary
		default:
			return nil, nil, nil, fmt.Errorf("results stream: %s: line %d: type %q, want header, interval or summary", path, line, l.Type)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, nil, fmt.Errorf("results stream: %s: %w", path, err)
	}
	if header == nil {
		return nil, nil, nil, fmt.Errorf("results stream: %s: no header line", path)
	}
	return header, series, summary, nil
}
