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
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// FlushInterval bounds how long a written event stays in the writer's
// buffers: the gzip stream is flushed at most this long after the first
// event written since the previous flush.
const FlushInterval = time.Second

// ErrOrder is the class of the error Writer.Write returns for an event
// whose T is below the previous event's: errors.Is(err, ErrOrder).
var ErrOrder = errors.New("capture: event out of order")

// Writer writes a capture: the header, then one event per Write, as gzip
// JSON Lines. It is safe for concurrent use. The gzip stream is flushed
// (a deflate sync flush: every byte written so far decodes) at most
// FlushInterval after an event is written, on Flush and on Close, always
// between whole lines, so a writer killed at any moment leaves every line
// written before its last flush readable (see Reader.Truncated).
//
// Events must come in non-decreasing T: Write refuses an event whose T is
// below the previous one's with an error wrapping ErrOrder and writes
// nothing; the writer stays usable (a producer with several sessions
// sorts, or takes T and writes under one lock). A failed write to the
// underlying file is sticky: every later call returns it.
type Writer struct {
	mu    sync.Mutex
	file  *os.File // the file Create made; nil for NewWriter
	buf   *bufio.Writer
	zw    *gzip.Writer
	enc   *json.Encoder
	line  bytes.Buffer // the line being encoded
	lastT int64
	timer *time.Timer // the pending timed flush, nil when none
	err   error       // the first write failure
	done  bool        // Close was called
	count int64       // events written
}

// Create creates the capture file path (O_CREAT|O_EXCL|O_NOFOLLOW, mode
// 0600: never over an existing file, never through a symbolic link) and
// writes h to it. Errors name the path.
func Create(path string, h Header) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("capture: create: %w", err)
	}
	w, err := newWriter(f, f, h)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("capture: %s: %w", path, err)
	}
	return w, nil
}

// NewWriter writes a capture with header h to out (Close does not close
// out). The header line is flushed before NewWriter returns. Errors: a
// header without Started, or out's write error.
func NewWriter(out io.Writer, h Header) (*Writer, error) {
	w, err := newWriter(out, nil, h)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	return w, nil
}

func newWriter(out io.Writer, f *os.File, h Header) (*Writer, error) {
	if h.Started.IsZero() {
		return nil, errors.New("header without a start time")
	}
	h.Type, h.Format, h.Schema = "header", Format, Schema
	w := &Writer{file: f, buf: bufio.NewWriterSize(out, 64<<10)}
	w.zw = gzip.NewWriter(w.buf)
	w.enc = json.NewEncoder(&w.line)
	w.enc.SetEscapeHTML(false)
	if err := w.writeLine(h); err != nil {
		return nil, err
	}
	if err := w.flush(); err != nil {
		return nil, err
	}
	return w, nil
}

// Write appends e. Errors: an event without kind or session, a negative
// T or one below the previous event's (ErrOrder; nothing written, the
// writer stays usable), Write after Close, the first write failure.
func (w *Writer) Write(e Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	if err := w.check(e); err != nil {
		return err
	}
	if err := w.writeLine(e); err != nil {
		return err
	}
	w.lastT = e.T
	w.count++
	if w.timer == nil {
		w.timer = time.AfterFunc(FlushInterval, w.timedFlush)
	}
	return nil
}

// check refuses what a Reader would refuse.
func (w *Writer) check(e Event) error {
	switch {
	case !e.Kind.valid():
		return fmt.Errorf("capture: event of unknown kind %q", e.Kind)
	case e.Session == "":
		return fmt.Errorf("capture: %s event without a session", e.Kind)
	case e.T < 0:
		return fmt.Errorf("capture: %s event of session %s at t=%d µs, before the start", e.Kind, e.Session, e.T)
	case e.T < w.lastT:
		return fmt.Errorf("%w: %s event of session %s at t=%d µs after one at t=%d µs", ErrOrder, e.Kind, e.Session, e.T, w.lastT)
	}
	return nil
}

// usable is the reason no write may happen, nil when one may.
func (w *Writer) usable() error {
	if w.err != nil {
		return w.err
	}
	if w.done {
		return errors.New("capture: write after close")
	}
	return nil
}

// writeLine encodes v as one line into the gzip stream.
func (w *Writer) writeLine(v any) error {
	w.line.Reset()
	if err := w.enc.Encode(v); err != nil { // Encode ends the line with '\n'
		return fmt.Errorf("capture: encode: %w", err)
	}
	if _, err := w.zw.Write(w.line.Bytes()); err != nil {
		w.err = fmt.Errorf("capture: write: %w", err)
		return w.err
	}
	return nil
}

// Count is the number of events written.
func (w *Writer) Count() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.count
}

// Flush hands everything written so far to the file (or the io.Writer):
// a reader then sees every event written.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	return w.flush()
}

// timedFlush is the flush FlushInterval after a write.
func (w *Writer) timedFlush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.usable() == nil {
		_ = w.flush() // a failure is kept in w.err for the next call
	}
}

// flush is Flush with w.mu held.
func (w *Writer) flush() error {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if err := w.zw.Flush(); err != nil {
		w.err = fmt.Errorf("capture: write: %w", err)
		return w.err
	}
	if err := w.buf.Flush(); err != nil {
		w.err = fmt.Errorf("capture: write: %w", err)
		return w.err
	}
	return nil
}

// Close ends the gzip stream, and for a file of Create syncs and closes
// it. It returns the first write failure, if any. Close is idempotent.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return w.err
	}
	w.done = true
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if w.err == nil {
		w.err = w.finish()
	}
	if w.file != nil {
		if err := w.file.Close(); err != nil && w.err == nil {
			w.err = fmt.Errorf("capture: close: %w", err)
		}
	}
	return w.err
}

// finish writes the gzip trailer and syncs the file.
func (w *Writer) finish() error {
	if err := w.zw.Close(); err != nil {
		return fmt.Errorf("capture: write: %w", err)
	}
	if err := w.buf.Flush(); err != nil {
		return fmt.Errorf("capture: write: %w", err)
	}
	if w.file != nil {
		if err := w.file.Sync(); err != nil {
			return fmt.Errorf("capture: sync: %w", err)
		}
	}
	return nil
}

// valid reports whether k is one of the kinds of this schema.
func (k Kind) valid() bool {
	switch k {
	case KindConnect, KindQuery, KindPrepare, KindExecute, KindCopy, KindDisconnect:
		return true
	}
	return false
}
