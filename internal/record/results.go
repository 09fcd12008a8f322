package record

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/erplab/erplab/internal/apdex"
)

// Format names the version of the results document and stream.
const Format = "erplab-run/1"

// IntegralScore is the integral APDEX of a run, as written to the results.
type IntegralScore struct {
	// Value is the priority-weighted mean of the per-operation scores.
	Value float64 `json:"value"`
	// Rating is the APDEX band of Value ("excellent" ... "unacceptable"),
	// or "ns" when no operation had samples.
	Rating string `json:"rating"`
}

// NS reports that no operation had samples.
func (i IntegralScore) NS() bool { return i.Rating == apdex.NoSample.String() }

// NewIntegralScore wraps an integral value for the document.
func NewIntegralScore(v float64, ok bool) IntegralScore {
	if !ok {
		return IntegralScore{Rating: apdex.NoSample.String()}
	}
	return IntegralScore{Value: v, Rating: apdex.RatingOf(v).String()}
}

// Totals sums a run over all operations.
type Totals struct {
	Count  int64 `json:"count"`
	Errors int64 `json:"errors"`
	// PerSecond is executions per second over the scored duration (the
	// load test's "tps" for key operations).
	PerSecond float64 `json:"per_second"`
	// ScoredSeconds is the run length minus warm-up, in seconds.
	ScoredSeconds float64 `json:"scored_seconds"`
	// Skipped, Late and Retries sum the operations' figures (see
	// OpResult).
	Skipped int64 `json:"skipped,omitempty"`
	Late    int64 `json:"late,omitempty"`
	Retries int64 `json:"retries,omitempty"`
	Retried int64 `json:"retried,omitempty"`
	// BacklogLeft (open model) counts the arrivals that were due by the
	// end of the run and never started: neither executed nor skipped. No
	// operation was picked for them, so they are in no operation's APDEX.
	BacklogLeft int64 `json:"backlog_left,omitempty"`
	// AbortedVUs counts the virtual users that stopped themselves for the
	// rest of the run after an operation failed with workload.ErrStopVU
	// (like pgbench's aborted clients); that failure is in Errors.
	AbortedVUs int `json:"aborted_vus,omitempty"`
}

// Document is the final results file of `erplab run` (docs/results-format.md).
type Document struct {
	Format      string    `json:"format"`
	Version     string    `json:"erplab_version"`
	CommandLine []string  `json:"command_line"`
	Workload    string    `json:"workload"`
	StartedAt   time.Time `json:"started_at"`
	EndedAt     time.Time `json:"ended_at"`
	// Status is "completed", "interrupted" (Ctrl-C), or "aborted: <why>".
	Status      string          `json:"status"`
	Environment json.RawMessage `json:"environment,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Operations  []OpResult      `json:"operations"`
	Integral    IntegralScore   `json:"apdex_integral"`
	Totals      Totals          `json:"totals"`
	Series      []Interval      `json:"series,omitempty"`
	// Extra holds sections other packages add (observations, remedies).
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
}

// WriteFile writes the document as indented JSON to path atomically
// (a temp file in the same directory, then rename), creating the
// directory if needed.
func (d *Document) WriteFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("results: create directory: %w", err)
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return fmt.Errorf("results: encode: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("results: write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("results: rename to %s: %w", path, err)
	}
	return nil
}

// ReadFile reads a results document.
func ReadFile(path string) (*Document, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	var d Document
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("results: %s: %w", path, err)
	}
	if d.Format != Format {
		return nil, fmt.Errorf("results: %s: format %q, want %q", path, d.Format, Format)
	}
	return &d, nil
}

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

// ReadStream reads a stream file, tolerating a truncated last line (a run
// killed mid-write), and returns header, intervals and summary (nil when
// the run did not finish).
func ReadStream(path string) (header *Document, series []Interval, summary *Document, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("results stream: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var l StreamLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			break // a torn last line
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
		}
	}
	if err := sc.Err(); err != nil {
		return header, series, summary, fmt.Errorf("results stream: %w", err)
	}
	return header, series, summary, nil
}
