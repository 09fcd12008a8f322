// Package load reads a replay's input, of any source kind, into memory:
// a capture file as it is, a PostgreSQL server log (package pglog) or a
// 1C technological journal (package techlog) converted on the way; it
// detects the kind when not told, and saves a conversion as a capture.
package load

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/erplab/erplab/internal/capture"
	"github.com/erplab/erplab/internal/capture/pglog"
	"github.com/erplab/erplab/internal/capture/techlog"
)

// Source is a replay's input read into memory, whatever its kind: the
// header and events of a capture, or of a server log or a technological
// journal converted on the way.
type Source struct {
	Kind   capture.Source
	Header capture.Header
	Events []capture.Event
	// BadLines counts the input lines skipped as bad; Problems names the
	// first of them ("file:line: why").
	BadLines int64
	Problems []string
	// Notes are the conversion's lines for the user (counts, mapped
	// types, skipped statements).
	Notes []string
	// Truncated: a capture whose writer was killed (its torn tail dropped).
	Truncated bool
}

// Options tune Read.
type Options struct {
	// From is the kind of the input ("" detects it: Detect).
	From capture.Source
	// TypeMap overrides techlog.DefaultTypeMap (techlog only).
	TypeMap map[string]string
}

// journalLine is the start of a 1C technological journal event:
// mm:ss.uuuuuu-<duration>,<EVENT>, (a log line's shape, not SQL).
var journalLine = regexp.MustCompile(`^\x{FEFF}?\d\d:\d\d\.\d{4,6}-\d+,[A-Za-z]+,`)

// journalFile is a journal file's name: YYMMDDHH.log.
var journalFile = regexp.MustCompile(`^\d{8}\.log$`)

// Detect says what path holds: a capture (gzip with an
// erplab-capture header), a technological journal (a directory of
// rphost_* folders or YYMMDDHH.log files, or such a file whose first line
// has the journal's shape), else a PostgreSQL server log.
func Detect(path string) (capture.Source, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		return capture.SourceTechLog, nil
	}
	first, gz, err := firstLine(path)
	if err != nil {
		return "", err
	}
	switch {
	case gz && bytes.Contains(first, []byte(`"format":"`+capture.Format+`"`)):
		return capture.SourceProxy, nil // any capture file: read as one
	case journalFile.MatchString(filepath.Base(path)) && journalLine.Match(first):
		return capture.SourceTechLog, nil
	}
	return capture.SourcePGLog, nil
}

// firstLine reads the first line of path (of its content when gzip).
func firstLine(path string) (line []byte, gz bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, true, nil
		}
		br, gz = bufio.NewReader(zr), true
	}
	line, err = br.ReadSlice('\n')
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, gz, nil
	}
	return line, gz, nil
}

// Read reads paths (several files or folders of one kind) into
// memory. A capture is read as it is; a server log (pglog.Convert, the
// whole log sorted in memory) or a journal (techlog.Read) is converted.
// Bad input lines are counted and named, not errors; an input of which
// nothing could be read is one, naming its first bad line.
func Read(ctx context.Context, paths []string, opts Options) (*Source, error) {
	if len(paths) == 0 {
		return nil, errors.New("no source given")
	}
	kind := opts.From
	if kind == "" {
		k, err := Detect(paths[0])
		if err != nil {
			return nil, err
		}
		kind = k
	}
	var (
		s   *Source
		err error
	)
	switch kind {
	case capture.SourceProxy, "capture":
		s, err = loadCaptures(paths)
	case capture.SourcePGLog:
		s, err = loadPGLog(ctx, paths)
	case capture.SourceTechLog:
		s, err = loadTechLog(ctx, paths, opts.TypeMap)
	default:
		return nil, fmt.Errorf("source kind %q: want capture, pglog or techlog", kind)
	}
	if err != nil {
		return nil, err
	}
	if !hasStatement(s.Events) {
		msg := fmt.Sprintf("%s: no statement to replay (read as %s)", strings.Join(paths, ", "), s.Kind)
		if len(s.Problems) > 0 {
			msg += "; first bad line: " + s.Problems[0]
		}
		return nil, errors.New(msg)
	}
	return s, nil
}

func hasStatement(evs []capture.Event) bool {
	for _, e := range evs {
		switch e.Kind {
		case capture.KindQuery, capture.KindExecute, capture.KindCopy:
			return true
		}
	}
	return false
}

// loadCaptures reads capture files, one after the other (one file is the
// usual case; several must not overlap in time).
func loadCaptures(paths []string) (*Source, error) {
	s := &Source{Kind: capture.SourceProxy}
	for i, p := range paths {
		r, err := capture.Open(p)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			s.Header = r.Header()
			s.Kind = s.Header.Source
		}
		for {
			e, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				_ = r.Close()
				return nil, err
			}
			s.Events = append(s.Events, e)
		}
		s.Truncated = s.Truncated || r.Truncated()
		_ = r.Close()
	}
	if s.Truncated {
		s.Notes = append(s.Notes, "the capture ends torn (its writer was killed): replayed up to its last whole line")
	}
	return s, nil
}

// loadPGLog converts a server log in memory.
func loadPGLog(ctx context.Context, paths []string) (*Source, error) {
	var c pglog.Collect
	sum, err := pglog.Convert(ctx, paths, pglog.Options{Window: -1}, &c)
	if err != nil {
		return nil, err
	}
	s := &Source{Kind: capture.SourcePGLog, Header: c.Header, Events: c.Events, BadLines: sum.BadLines, Problems: sum.Problems}
	s.Notes = append(s.Notes, fmt.Sprintf("%d log lines, %d sessions, %d records ignored (not client statements)", sum.Lines, sum.Sessions, sum.Ignored))
	if n := sum.Copy + sum.FastPath + sum.Fetch; n > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("not replayable, skipped: COPY FROM STDIN %d, fast-path calls %d, fetch from a portal %d", sum.Copy, sum.FastPath, sum.Fetch))
	}
	if sum.Partial != "" {
		s.Notes = append(s.Notes, "partial log: "+sum.Partial)
	}
	s.Notes = append(s.Notes, sum.Warnings...)
	return s, nil
}

// loadTechLog reads a technological journal in memory.
func loadTechLog(ctx context.Context, paths []string, typeMap map[string]string) (*Source, error) {
	s := &Source{Kind: capture.SourceTechLog}
	sum, err := techlog.Read(ctx, paths, techlog.Options{TypeMap: typeMap},
		func(h capture.Header) error { s.Header = h; return nil },
		func(e capture.Event) error { s.Events = append(s.Events, e); return nil })
	if err != nil {
		return nil, err
	}
	s.BadLines = int64(sum.BadLines)
	for _, e := range sum.Errors {
		s.Problems = append(s.Problems, e.Error())
	}
	s.Notes = sum.Notes()
	return s, nil
}

// Save writes the source as a capture file (never over an existing one).
func (s *Source) Save(path string) error {
	w, err := capture.Create(path, s.Header)
	if err != nil {
		return err
	}
	for _, e := range s.Events {
		if err := w.Write(e); err != nil {
			_ = w.Close()
			return err
		}
	}
	return w.Close()
}
