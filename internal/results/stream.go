package results

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
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
// as it is written (no user-space buffering across lines), so a run that
// is killed leaves every completed interval readable; Close also fsyncs.
type Stream struct {
	mu   sync.Mutex
	f    *os.File
	w    *bufio.Writer
	path string
}

// CreateStream creates (truncates) the stream file at path.
func CreateStream(path string) (*Stream, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("results stream: create directory: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("results stream: %w", err)
	}
	return &Stream{f: f, w: bufio.NewWriter(f), path: path}, nil
}

// Path is the stream's file name.
func (s *Stream) Path() string { return s.path }

// Write appends one line and flushes it to the file.
func (s *Stream) Write(l StreamLine) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("results stream: encode: %w", err)
	}
	if _, err := s.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("results stream: write: %w", err)
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("results stream: write: %w", err)
	}
	return nil
}

// Close flushes and closes the file.
func (s *Stream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.w.Flush(); err != nil {
		s.f.Close()
		return fmt.Errorf("results stream: %w", err)
	}
	if err := s.f.Sync(); err != nil {
		s.f.Close()
		return fmt.Errorf("results stream: %w", err)
	}
	return s.f.Close()
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
