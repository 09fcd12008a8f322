package capture

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// Reader reads a capture written by Writer: the header when it is made,
// then the events in order with Next.
//
// A torn tail, what a writer killed between flushes leaves (the gzip
// stream ends early, or the last line has no newline), is not an error:
// Next returns io.EOF after the last whole line and Truncated reports it.
// Everything else is an error of one line naming the input and, for an
// event, its line number (the header is line 1): a file that is not
// gzip, another format or a newer schema, a line that is not an event of
// this schema, events out of order, a corrupt gzip stream.
type Reader struct {
	name      string    // the input's name in messages
	file      io.Closer // the file Open opened; nil for NewReader
	br        *bufio.Reader
	h         Header
	line      int   // lines read, the header included
	lastT     int64 // the previous event's T
	truncated bool
	err       error // io.EOF or the error that ended reading
}

// Open opens the capture file path and reads its header (see Reader).
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	r, err := NewReader(f, path)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	r.file = f
	return r, nil
}

// NewReader reads a capture from in, named name in messages, and reads its
// header. Errors: see Reader; a capture cut before its header's flush is
// one too (it holds nothing).
func NewReader(in io.Reader, name string) (*Reader, error) {
	zr, err := gzip.NewReader(in)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return nil, fmt.Errorf("capture: %s: empty: no header (cut before its first flush?)", name)
	case err != nil:
		return nil, fmt.Errorf("capture: %s: not a capture (%v)", name, err)
	}
	r := &Reader{name: name, br: bufio.NewReaderSize(zr, 64<<10)}
	b, ok, err := r.readLine()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("capture: %s: no whole header line (cut before its first flush?)", name)
	}
	if err := r.header(b); err != nil {
		return nil, err
	}
	return r, nil
}

// header decodes and checks line 1.
func (r *Reader) header(b []byte) error {
	var h Header
	if err := json.Unmarshal(b, &h); err != nil || h.Type != "header" {
		return fmt.Errorf("capture: %s: line 1 is not a capture header (format %q, schema %d)", r.name, Format, Schema)
	}
	if h.Format != Format || h.Schema < 1 || h.Schema > Schema {
		return fmt.Errorf("capture: %s: format %q schema %d: this erplab reads format %q schema %d or older",
			r.name, h.Format, h.Schema, Format, Schema)
	}
	r.h = h
	return nil
}

// Header is the capture's header.
func (r *Reader) Header() Header { return r.h }

// Next returns the next event; io.EOF after the last one (see Truncated),
// or an error naming the line (see Reader). After an error, Next returns
// the same error again.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	b, ok, err := r.readLine()
	if err != nil {
		r.err = err
		return Event{}, err
	}
	if !ok {
		r.err = io.EOF
		return Event{}, io.EOF
	}
	e, err := r.event(b)
	if err != nil {
		r.err = err
		return Event{}, err
	}
	return e, nil
}

// event decodes and checks one event line.
func (r *Reader) event(b []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(b, &e); err != nil {
		return Event{}, r.lineErr("%v", err)
	}
	switch {
	case !e.Kind.valid():
		return Event{}, r.lineErr("unknown event kind %q", e.Kind)
	case e.Session == "":
		return Event{}, r.lineErr("%s event without a session", e.Kind)
	case e.T < r.lastT:
		return Event{}, r.lineErr("event at t=%d µs after one at t=%d µs (events must be in order)", e.T, r.lastT)
	}
	r.lastT = e.T
	return e, nil
}

func (r *Reader) lineErr(format string, a ...any) error {
	return fmt.Errorf("capture: %s: line %d: %s", r.name, r.line, fmt.Sprintf(format, a...))
}

// readLine returns the next whole line without its newline; ok false at
// the end. A torn tail sets r.truncated and ends the input.
func (r *Reader) readLine() (line []byte, ok bool, err error) {
	b, err := r.br.ReadBytes('\n')
	switch {
	case err == nil:
		r.line++
		return bytes.TrimSuffix(b, []byte{'\n'}), true, nil
	case errors.Is(err, io.ErrUnexpectedEOF):
		r.truncated = true // the gzip stream was cut: b is a partial line, if any
		return nil, false, nil
	case errors.Is(err, io.EOF):
		r.truncated = len(b) > 0 // a last line without its newline
		return nil, false, nil
	}
	return nil, false, fmt.Errorf("capture: %s: after line %d: %w", r.name, r.line, err)
}

// Truncated reports whether the capture ended in a torn tail (a writer
// killed between flushes): every event before it was returned. It is
// meaningful once Next has returned io.EOF.
func (r *Reader) Truncated() bool { return r.truncated }

// Line is the number of the line Next returned last (the header is 1).
func (r *Reader) Line() int { return r.line }

// Close closes the file Open opened; for NewReader it does nothing.
func (r *Reader) Close() error {
	if r.file == nil {
		return nil
	}
	err := r.file.Close()
	r.file = nil
	return err
}
