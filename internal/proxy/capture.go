package proxy

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/erplab/erplab/internal/capture"
)

// DefaultCaptureMemory is CaptureOptions.Memory's default: 256 MiB of
// events held at once (see Capture).
const DefaultCaptureMemory = 256 << 20

// CaptureOptions configures CreateCapture.
type CaptureOptions struct {
	// Origin goes into the capture's header (the upstream without a
	// password, the erplab version).
	Origin map[string]string
	// Memory bounds, in bytes, the events held at once (0:
	// DefaultCaptureMemory); see Capture.
	Memory int64
	// Logger receives one line when writing fails; nil discards.
	Logger *slog.Logger
}

// Capture writes every client session of a Proxy (Config.Capture) to a
// capture file (package capture, source "proxy"): per session its
// startup parameters (never a password), simple Queries, Parse, Bind with
// Execute (values as sent, binary kept), COPY FROM STDIN with its data,
// and its end, each event at the time the client sent it and with its
// outcome as the server answered (see capSession).
//
// Events of different sessions complete out of order, and the capture
// holds them in order of their send time: a collector between the
// sessions and the writer releases an event once no session has an
// earlier one still unanswered (each session publishes the send time of
// its oldest unfinished event; completed events wait in a heap). A long
// statement so holds every later event of every session; once the events
// held (unfinished and waiting) exceed CaptureOptions.Memory, the oldest
// unfinished ones are written at once without their outcome
// (capture.NoteUnanswered, counted in the summary), which lets the rest
// go.
//
// The relay pays nothing without a Capture (one nil check per message);
// with one, a message costs at most one small allocation (the text of a
// Query or Parse, a Bind's statement name, a command tag) and a lock of
// its own session, and the JSON and gzip work is the collector's.
type Capture struct {
	w       *capture.Writer
	path    string
	started time.Time // the header's Started, with the monotonic clock reading T counts from
	limit   int64
	log     *slog.Logger
	pool    sync.Pool // *capEvent

	held   atomic.Int64 // bytes of the events made and not yet written
	closed atomic.Bool

	sessMu   sync.Mutex // guards sessions and nextID; never held with a capSession's mu
	sessions map[*capSession]struct{}
	nextID   int64

	inMu  sync.Mutex // guards inbox: taken inside a capSession's mu, never the other way
	inbox []*capEvent

	wake      chan struct{}
	stop      chan struct{}
	loopDone  chan struct{}
	closeOnce sync.Once

	// The collector's own (loop only).
	waiting eventHeap
	list    []*capSession
	spare   []*capEvent
	werr    error

	// Counts for the summary.
	captured atomic.Int64 // sessions that logged in
	early    atomic.Int64 // events written before their answer (memory bound)
	dropped  atomic.Int64 // events not written (a write failed)
	closeErr error
}

// CreateCapture creates the capture file path (capture.Create: never
// over an existing file or through a symbolic link, mode 0600), writes
// its header and starts the collector. Close it after the Proxy's Serve
// returned.
func CreateCapture(path string, opts CaptureOptions) (*Capture, error) {
	started := time.Now()
	w, err := capture.Create(path, capture.Header{Source: capture.SourceProxy, Started: started.UTC(), Origin: opts.Origin})
	if err != nil {
		return nil, err
	}
	if opts.Memory <= 0 {
		opts.Memory = DefaultCaptureMemory
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Capture{w: w, path: path, started: started, limit: opts.Memory, log: log,
		sessions: map[*capSession]struct{}{}, wake: make(chan struct{}, 1), stop: make(chan struct{}), loopDone: make(chan struct{})}
	c.pool.New = func() any { return new(capEvent) }
	go c.loop()
	return c, nil
}

// now is the time in microseconds since the header's Started.
func (c *Capture) now() int64 { return time.Since(c.started).Microseconds() }

// signal wakes the collector.
func (c *Capture) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Close writes every event still held (those of sessions still open
// without their outcome), ends the file and waits for it to be synced.
// It returns the first write failure. Idempotent.
func (c *Capture) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		close(c.stop)
		<-c.loopDone
		if err := c.w.Close(); err != nil && c.werr == nil {
			c.werr = err
		}
		c.closeErr = c.werr
	})
	return c.closeErr
}

// CaptureSummary is what a capture wrote.
type CaptureSummary struct {
	Path       string
	Sessions   int64 // sessions that logged in
	Events     int64 // events written
	Bytes      int64 // size of the file (gzip)
	Unanswered int64 // events written before their answer because of the memory bound
	Dropped    int64 // events lost to a write failure
	Err        error // the first write failure
}

// Summary is what was written so far; final after Close.
func (c *Capture) Summary() CaptureSummary {
	s := CaptureSummary{Path: c.path, Sessions: c.captured.Load(), Events: c.w.Count(),
		Unanswered: c.early.Load(), Dropped: c.dropped.Load(), Err: c.closeErr}
	if fi, err := os.Stat(c.path); err == nil {
		s.Bytes = fi.Size()
	}
	return s
}

// String is the summary's line.
func (s CaptureSummary) String() string {
	line := fmt.Sprintf("capture %s: %d session(s), %d event(s), %d bytes", s.Path, s.Sessions, s.Events, s.Bytes)
	if s.Unanswered > 0 {
		line += fmt.Sprintf("; %d written before their answer (an earlier statement held them past --capture-memory)", s.Unanswered)
	}
	if s.Dropped > 0 || s.Err != nil {
		line += fmt.Sprintf("; %d not written: %v", s.Dropped, s.Err)
	}
	return line
}

// collectInterval is the least time between two steps of the collector:
// a step looks at every session, and events come faster than they need
// to be written (the file is flushed once a second).
const collectInterval = 10 * time.Millisecond

// loop is the collector.
func (c *Capture) loop() {
	defer close(c.loopDone)
	pause := time.NewTimer(0)
	for {
		select {
		case <-c.wake:
			c.step()
		case <-c.stop:
			c.finish()
			return
		}
		pause.Reset(collectInterval)
		select {
		case <-pause.C:
		case <-c.stop:
			c.finish()
			return
		}
	}
}

// step writes the events no unfinished event precedes, and while the
// events held exceed the memory bound, writes the oldest unfinished one
// as it is.
func (c *Capture) step() {
	for {
		wm, low := c.watermark()
		c.drain() // after the watermark: an event pushed before its session's oldest moved is in
		c.writeUpTo(wm)
		if c.held.Load() <= c.limit || low == nil || !c.force(low) {
			return
		}
	}
}

// finish writes everything: the unfinished events of sessions still
// open as they are, then every event waiting.
func (c *Capture) finish() {
	_, _ = c.watermark() // fills c.list
	for _, sc := range c.list {
		for c.force(sc) {
		}
	}
	c.drain()
	c.writeUpTo(math.MaxInt64)
}

// watermark returns the send time up to which events can be written: the
// earliest of now and every session's oldest unfinished event, and the
// session holding that event (nil when none is unfinished). The time is
// read before the sessions: an event a session makes after its look-up
// here is sent later (each session takes its events' times under its
// lock, and registers before its first).
func (c *Capture) watermark() (int64, *capSession) {
	wm := c.now()
	c.sessMu.Lock()
	c.list = c.list[:0]
	for sc := range c.sessions {
		c.list = append(c.list, sc)
	}
	c.sessMu.Unlock()
	var low *capSession
	lowT := int64(math.MaxInt64)
	for _, sc := range c.list {
		sc.mu.Lock()
		o := sc.oldest
		sc.mu.Unlock()
		if o < lowT {
			lowT, low = o, sc
		}
	}
	return min(wm, lowT), low
}

// drain moves the completed events the sessions pushed into the heap.
func (c *Capture) drain() {
	c.inMu.Lock()
	in := c.inbox
	c.inbox = c.spare[:0]
	c.inMu.Unlock()
	for i, ev := range in {
		heap.Push(&c.waiting, ev)
		in[i] = nil
	}
	c.spare = in[:0]
}

// writeUpTo writes the waiting events sent at or before wm, in order.
func (c *Capture) writeUpTo(wm int64) {
	for c.waiting.Len() > 0 && c.waiting[0].e.T <= wm {
		ev := heap.Pop(&c.waiting).(*capEvent)
		c.write(ev)
	}
}

// write writes ev and recycles it.
func (c *Capture) write(ev *capEvent) {
	if c.werr == nil {
		if err := c.w.Write(ev.e); err != nil {
			c.dropped.Add(1)
			if !errors.Is(err, capture.ErrOrder) {
				c.werr = err // sticky in the writer too
			}
			c.log.Warn("capture: event not written; the proxy goes on relaying", "file", c.path, "err", err)
		}
	} else {
		c.dropped.Add(1)
	}
	c.held.Add(-ev.size)
	if !ev.snapshot {
		c.recycle(ev)
	}
}

// force writes the oldest unfinished event of sc as it is now (the
// outcome it has so far; unanswered: Rows -1) by putting a copy in the
// heap; the session drops the event when it completes. False when sc has
// no unfinished event.
func (c *Capture) force(sc *capSession) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for i := sc.fh; i < len(sc.fifo); i++ {
		ev := sc.fifo[i]
		if ev.released {
			continue
		}
		snap := &capEvent{e: ev.e, sid: ev.sid, ord: ev.ord, size: ev.size, snapshot: true}
		if !ev.answered {
			snap.e.Rows = -1
			snap.e.Note = addNote(snap.e.Note, capture.NoteUnanswered)
		}
		if sc.copying == ev {
			snap.e.Note = addNote(snap.e.Note, capture.NoteDataCut)
			sc.copying = nil
		}
		ev.released = true
		sc.setOldest()
		c.early.Add(1)
		heap.Push(&c.waiting, snap)
		return true
	}
	return false
}

// event returns a cleared event from the pool.
func (c *Capture) event() *capEvent { return c.pool.Get().(*capEvent) }

// recycle clears ev, keeping its slices' arrays unless large, and puts
// it back in the pool.
func (c *Capture) recycle(ev *capEvent) {
	e := ev.e
	keep := func(b []byte) []byte {
		if cap(b) > 64<<10 {
			return nil
		}
		return b[:0]
	}
	clear(e.Values)
	*ev = capEvent{
		e: capture.Event{ParamOIDs: e.ParamOIDs[:0], ServerParamOIDs: e.ServerParamOIDs[:0], Formats: e.Formats[:0],
			Values: e.Values[:0], ResultFormats: e.ResultFormats[:0], Data: keep(e.Data)},
		portal: ev.portal[:0], buf: keep(ev.buf),
	}
	c.pool.Put(ev)
}

// discard forgets an event that will not be written (a Bind never
// executed, a session that never logged in).
func (c *Capture) discard(ev *capEvent) {
	c.held.Add(-ev.size)
	c.recycle(ev)
}

// eventHeap orders events by send time, then session and order within
// it.
type eventHeap []*capEvent

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.e.T != b.e.T {
		return a.e.T < b.e.T
	}
	if a.sid != b.sid {
		return a.sid < b.sid
	}
	return a.ord < b.ord
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*capEvent)) }
func (h *eventHeap) Pop() any {
	old := *h
	n := len(old) - 1
	ev := old[n]
	old[n] = nil
	*h = old[:n]
	return ev
}

// addNote appends word to a comma-separated note.
func addNote(note, word string) string {
	if note == "" {
		return word
	}
	return note + "," + word
}
