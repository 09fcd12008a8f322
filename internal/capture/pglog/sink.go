package pglog

import (
	"fmt"

	"github.com/erplab/erplab/internal/capture"
)

// Sink takes a conversion's output: Begin once with the header, before
// the first event (the header's start time and Partial are known only
// then: see Convert), then every event in capture order.
type Sink interface {
	Begin(capture.Header) error
	Event(capture.Event) error
}

// Collect is a Sink keeping the output in memory.
type Collect struct {
	Header capture.Header
	Events []capture.Event
}

func (c *Collect) Begin(h capture.Header) error { c.Header = h; return nil }
func (c *Collect) Event(e capture.Event) error  { c.Events = append(c.Events, e); return nil }

// File is a Sink writing the capture file Path: Begin creates it with
// capture.Create (never over an existing file); Close closes it.
type File struct {
	Path string
	w    *capture.Writer
}

func (f *File) Begin(h capture.Header) error {
	w, err := capture.Create(f.Path, h)
	if err != nil {
		return err
	}
	f.w = w
	return nil
}

func (f *File) Event(e capture.Event) error {
	if f.w == nil {
		return fmt.Errorf("capture %s: event before the header", f.Path)
	}
	return f.w.Write(e)
}

// Close closes the capture file, if Begin made one.
func (f *File) Close() error {
	if f.w == nil {
		return nil
	}
	return f.w.Close()
}
