package pglog

import (
	"container/heap"

	"github.com/erplab/erplab/internal/capture"
)

// pendingEvent is an event waiting in the sorting window: its start t in
// µs since the Unix epoch, and seq, the order it was made in. Events of
// equal t are ordered by session (the log's order of lines from several
// processes within a millisecond differs between its destinations), then
// by seq (a session's own order).
type pendingEvent struct {
	t   int64
	seq uint64
	e   *capture.Event
}

type eventHeap []pendingEvent

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.t != b.t {
		return a.t < b.t
	}
	if a.e.Session != b.e.Session {
		return a.e.Session < b.e.Session
	}
	return a.seq < b.seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(pendingEvent)) }
func (h *eventHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	*h = old[:len(old)-1]
	return p
}

// sorter writes events in order of t: an event leaves once the log's time
// has passed its t by the window. An event still pending may be changed
// (its outcome) through its pointer, never its t; its T is 0 until it is
// written, -1 after (a change then comes too late).
type sorter struct {
	h       eventHeap
	seq     uint64
	window  int64 // µs; negative: everything waits for drain
	started bool
	origin  int64 // t of the first event written: capture.Header.Started
	last    int64 // t of the last event written
	late    int64 // events written later than their t
	// begin is called once, before the first event, with its t; out
	// takes each event with T relative to it.
	begin func(origin int64) error
	out   func(capture.Event) error
}

func (s *sorter) push(t int64, e *capture.Event) {
	s.seq++
	heap.Push(&s.h, pendingEvent{t: t, seq: s.seq, e: e})
}

// release writes the events whose t is at or before now minus the window.
func (s *sorter) release(now int64) error {
	if s.window < 0 {
		return nil
	}
	for len(s.h) > 0 && s.h[0].t <= now-s.window {
		if err := s.emit(heap.Pop(&s.h).(pendingEvent)); err != nil {
			return err
		}
	}
	return nil
}

// drain writes every pending event.
func (s *sorter) drain() error {
	for len(s.h) > 0 {
		if err := s.emit(heap.Pop(&s.h).(pendingEvent)); err != nil {
			return err
		}
	}
	return nil
}

func (s *sorter) emit(p pendingEvent) error {
	if !s.started {
		if err := s.begin(p.t); err != nil {
			return err
		}
		s.started, s.origin, s.last = true, p.t, p.t
	}
	if p.t < s.last { // it arrived after the window: written at its edge
		p.t = s.last
		s.late++
	}
	s.last = p.t
	e := *p.e
	e.T = p.t - s.origin
	p.e.T = -1
	return s.out(e)
}
