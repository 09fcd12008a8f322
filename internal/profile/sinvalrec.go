package profile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/erplab/erplab/internal/hostfacts"
)

// InvalCounts are counts of the shared-invalidation events.
type InvalCounts struct {
	// Resets are catalog cache resets: a backend found itself reset by
	// the queue (SIGetDataEntries returned -1).
	Resets int64 `json:"resets"`
	// Rebuilds are calls of InvalidateSystemCaches: the resets' cache
	// rebuilds and every parallel worker's start.
	Rebuilds int64 `json:"cache_rebuilds"`
	// Catchups are catch-up interrupts processed
	// (ProcessCatchupInterrupt).
	Catchups int64 `json:"catchups"`
	// Cleanups are queue clean-ups (SICleanupQueue).
	Cleanups int64 `json:"cleanups"`
	// Inserted are messages inserted (SIInsertDataEntries' n; its calls
	// when n could not be read: Invalidation.MessagesCounted).
	Inserted int64 `json:"inserted"`
	// Read are messages read (SIGetDataEntries' return value).
	Read int64 `json:"read"`
}

func (c *InvalCounts) add(ev int, n int64) {
	switch ev {
	case EvReset:
		c.Resets++
	case EvRebuild:
		c.Rebuilds++
	case EvCatchup:
		c.Catchups++
	case EvCleanup:
		c.Cleanups++
	case EvInsert:
		c.Inserted += n
	case EvRead:
		c.Read += n
	}
}

func (c *InvalCounts) plus(o InvalCounts) {
	c.Resets += o.Resets
	c.Rebuilds += o.Rebuilds
	c.Catchups += o.Catchups
	c.Cleanups += o.Cleanups
	c.Inserted += o.Inserted
	c.Read += o.Read
}

// Minus is c less o, event by event.
func (c InvalCounts) Minus(o InvalCounts) InvalCounts {
	return InvalCounts{c.Resets - o.Resets, c.Rebuilds - o.Rebuilds, c.Catchups - o.Catchups,
		c.Cleanups - o.Cleanups, c.Inserted - o.Inserted, c.Read - o.Read}
}

// Zero tells whether no event was counted.
func (c InvalCounts) Zero() bool { return c == InvalCounts{} }

// invalEvent is one event of a server process, kept for attributing it
// to a key operation at the end.
type invalEvent struct {
	t   int64 // ns since the clock's T0
	pid uint32
	ev  uint8
	n   int32
}

// eventsMax bounds the events kept for attribution (24 bytes each);
// later ones are counted but not attributed.
const eventsMax = 1 << 21

// InvalRecording counts the probes' events while a run goes on: `perf
// record -o -` streams them (readPipe decodes its output), each counted
// at once (Snapshot: live totals for top and the progress lines) and
// kept for the summary (End).
type InvalRecording struct {
	probes *Probes
	clock  Clock
	rec    *exec.Cmd
	stderr bytes.Buffer
	// ids are the probes' tracepoints by id
	ids    map[uint16]probeField
	done   chan error
	stop   chan struct{}
	polled chan struct{}

	mu     sync.Mutex
	follow map[int]bool
	root   map[int]bool
	// parallel: processes that started as parallel workers and have not
	// yet rebuilt their caches (their rebuild is no reset)
	parallel map[int]bool
	started  time.Time
	total    InvalCounts
	other    InvalCounts
	series   []InvalCounts
	perPID   map[int]*InvalCounts
	events   []invalEvent
	over     int
	ended    bool
	perfCPU  float64 // CPU seconds of perf record, once ended
	hits     int64   // probe events recorded, every process
	bad      int
}

// probeField is a probe's event and the field of its count ("" none:
// each hit counts 1).
type probeField struct {
	ev int
	f  traceField
}

// InvalOptions choose what BeginInval observes.
type InvalOptions struct {
	// Host is where perf and /proc are (zero value: this host).
	Host Host
	// Reads adds the probe of SIGetDataEntries' return: messages read,
	// and resets from its -1. It fires at every relation lock a backend
	// takes: costly (docs/observe.md).
	Reads bool
	// Clock is the run's time base (zero: NewClock at the start): the
	// per-second series counts from its T0 and the events are attributed
	// to key operations on timelines of the same T0.
	Clock Clock
}

// BeginInval adds the shared-invalidation uprobes to the binary of the
// server at dsn (a local server: Locate) and starts counting their
// events for its processes. Its errors are one line; an *Unavailable
// error says why it cannot run here (not root, perf missing, a remote
// server, a binary without the functions). End or Abort removes the
// probes.
func BeginInval(ctx context.Context, dsn string, opts InvalOptions) (*InvalRecording, error) {
	if _, root := opts.Host.norm(); !root {
		return nil, &Unavailable{"adding uprobes (perf probe) needs root"}
	}
	perf, _, err := Check(ctx, opts.Host)
	if err != nil {
		return nil, err
	}
	srv, err := LocateDSN(ctx, dsn, opts.Host.Proc)
	if err != nil {
		return nil, err
	}
	fs, err := hostfacts.New(opts.Host.norm0().Proc, "")
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	bin, err := fs.Executable(srv.Postmaster)
	if err != nil {
		return nil, &Unavailable{fmt.Sprintf("the server's binary: %v", err)}
	}
	probes, err := AddProbes(ctx, perf, bin, opts.Reads, nil)
	if err != nil {
		return nil, err
	}
	r, err := startInval(ctx, perf, probes, []int{srv.Postmaster}, fs.TracingDir(), opts)
	if err != nil {
		probes.Remove(context.WithoutCancel(ctx)) //nolint:errcheck // the start's error says more
		return nil, err
	}
	go r.poll(fs)
	return r, nil
}

// norm0 is norm without the privilege answer.
func (h Host) norm0() Host { h, _ = h.norm(); return h }

// startInval starts perf record on the probes and waits until events
// flow (its first task event: perf synthesizes those of the processes
// that exist before it enables the probes). tracing is the tracing file
// system (the probes' formats).
func startInval(ctx context.Context, perf string, p *Probes, roots []int, tracing string, opts InvalOptions) (*InvalRecording, error) {
	c := opts.Clock
	if c.T0.IsZero() {
		var err error
		if c, err = NewClock(); err != nil {
			return nil, err
		}
	}
	r := &InvalRecording{probes: p, clock: c, done: make(chan error, 1), stop: make(chan struct{}), polled: make(chan struct{}),
		follow: map[int]bool{}, root: map[int]bool{}, parallel: map[int]bool{}, perPID: map[int]*InvalCounts{}}
	for _, pid := range roots {
		r.follow[pid], r.root[pid] = true, true
	}
	ids, err := p.fields(tracing)
	if err != nil {
		return nil, &Unavailable{err.Error()}
	}
	r.ids = ids
	// -m: 1 MiB a CPU, so that perf wakes up less often
	args := append([]string{"record", "-a", "-k", "CLOCK_MONOTONIC", "--quiet", "-m", "256", "-o", "-"}, p.recordArgs()...)
	r.rec = exec.Command(perf, args...)
	r.rec.Stderr = &r.stderr
	r.rec.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := r.rec.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	if err := r.rec.Start(); err != nil {
		return nil, fmt.Errorf("profile: perf record: %w", err)
	}
	first := make(chan struct{})
	go func() { r.done <- r.read(out, first) }()
	select {
	case <-first:
	case err := <-r.done: // the reader is done: kill would wait for it again
		r.rec.Process.Kill() //nolint:errcheck // may have exited
		r.rec.Wait()         //nolint:errcheck
		return nil, &Unavailable{"perf record on the uprobes failed: " + firstLine(r.stderr.Bytes(), errOr(err))}
	case <-time.After(enableTimeout):
		r.kill()
		return nil, fmt.Errorf("profile: perf record did not start within %s", enableTimeout)
	case <-ctx.Done():
		r.kill()
		return nil, ctx.Err()
	}
	r.started = time.Now()
	return r, nil
}

// kill ends perf record and waits for it and the reader.
func (r *InvalRecording) kill() {
	r.rec.Process.Kill() //nolint:errcheck // may have exited
	<-r.done
	r.rec.Wait() //nolint:errcheck
}

// poll adds the roots' descendants seen in /proc to the followed set
// every pollInterval (perf may lose FORK records on a busy host), until
// stop.
func (r *InvalRecording) poll(fs hostfacts.FS) {
	defer close(r.polled)
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	roots := make([]int, 0, len(r.root))
	for pid := range r.root {
		roots = append(roots, pid)
	}
	for {
		if kids, err := fs.Descendants(roots); err == nil {
			r.mu.Lock()
			for _, pid := range kids {
				r.follow[pid] = true
			}
			r.mu.Unlock()
		}
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
	}
}

// read decodes perf record's output as it comes, closing first at its
// first task event or sample.
func (r *InvalRecording) read(out io.Reader, first chan<- struct{}) error {
	err := readPipe(out, func() { close(first) }, r.item)
	_, _ = io.Copy(io.Discard, out) // perf record must not block on a full pipe
	return err
}

// item counts one record of perf record: a task event updates the
// followed processes, a probe's sample is counted for its process.
func (r *InvalRecording) item(it pipeItem) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if it.kind != recSample {
		applyTask(it.kind == recFork, it.pid, it.ppid, r.follow, r.root)
		return
	}
	pf, ok := r.ids[it.typ]
	if !ok {
		return
	}
	n := int64(1)
	if pf.f.off >= 0 {
		if n, ok = pf.f.value(it.raw); !ok {
			r.bad++
			return
		}
	}
	r.hit(it.pid, it.t, pf.ev, n)
}

// hit counts a probe's hit of event ev with count n in process pid at
// perf time ts (r.mu held).
func (r *InvalRecording) hit(pid int, ts int64, ev int, n int64) {
	r.hits++
	if ev == EvRead && n < 0 { // -1: the backend was reset
		ev, n = EvReset, 1
	}
	if !r.follow[pid] {
		r.other.add(ev, n)
		return
	}
	switch {
	case ev == EvParallel:
		r.parallel[pid] = true
		return
	case ev == EvRebuild && r.parallel[pid]:
		delete(r.parallel, pid) // the worker's start, not a reset
	case ev == EvRebuild && r.probes.events[EvRead] == "":
		r.count(pid, t0(ts, r.clock), EvReset, 1)
	}
	r.count(pid, t0(ts, r.clock), ev, n)
}

// t0 is a perf time as ns since the clock's T0.
func t0(ts int64, c Clock) int64 { return ts - c.MonoNs }

// count counts one event of a followed process at t (ns since T0): the
// total, its second, its process, and the events kept for attribution
// (r.mu held).
func (r *InvalRecording) count(pid int, t int64, ev int, n int64) {
	r.total.add(ev, n)
	if s := int(max(t, 0) / 1e9); s < 1<<20 {
		for len(r.series) <= s {
			r.series = append(r.series, InvalCounts{})
		}
		r.series[s].add(ev, n)
	}
	c := r.perPID[pid]
	if c == nil {
		c = &InvalCounts{}
		r.perPID[pid] = c
	}
	c.add(ev, n)
	if len(r.events) < eventsMax {
		r.events = append(r.events, invalEvent{t: t, pid: uint32(pid), ev: uint8(ev), n: int32(n)})
	} else {
		r.over++
	}
}

// Snapshot returns the counts of the server's processes so far and the
// seconds since the recording started.
func (r *InvalRecording) Snapshot() (InvalCounts, float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total, time.Since(r.started).Seconds()
}

// Clock is the recording's time base.
func (r *InvalRecording) Clock() Clock { return r.clock }

// finish stops perf record (SIGINT: it flushes), reads the rest, stops the poll and removes the probes.
func (r *InvalRecording) finish(ctx context.Context) error {
	r.mu.Lock()
	ended := r.ended
	r.ended = true
	r.mu.Unlock()
	if ended {
		return nil
	}
	close(r.stop)
	r.rec.Process.Signal(syscall.SIGINT) //nolint:errcheck // reported by Wait
	var err error
	select {
	case err = <-r.done:
	case <-time.After(60 * time.Second):
		r.rec.Process.Kill() //nolint:errcheck
		<-r.done
		err = errors.New("perf did not stop within 60 s of SIGINT")
	}
	r.rec.Wait() //nolint:errcheck // SIGINT's status
	r.mu.Lock()
	if st := r.rec.ProcessState; st != nil {
		r.perfCPU += (st.UserTime() + st.SystemTime()).Seconds()
	}
	r.mu.Unlock()
	<-r.polled
	if rerr := r.probes.Remove(context.WithoutCancel(ctx)); err == nil {
		err = rerr
	}
	return err
}

// Abort stops counting and removes the probes.
func (r *InvalRecording) Abort() {
	_ = r.finish(context.Background())
}

// End stops counting, removes the probes and summarizes the counts
// (Summarize with no key operations: the caller attributes them with
// Attribute).
func (r *InvalRecording) End(ctx context.Context) (*Invalidation, error) {
	err := r.finish(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.summary(time.Since(r.started).Seconds())
	if err != nil {
		return s, fmt.Errorf("profile: %w", err)
	}
	return s, nil
}

// Rebase restarts the counts on clock c (the run's time base, taken
// when its load starts): what was counted before is dropped.
func (r *InvalRecording) Rebase(c Clock) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clock, r.started = c, c.T0
	r.total, r.other, r.series, r.events, r.over, r.hits = InvalCounts{}, InvalCounts{}, nil, nil, 0, 0
	clear(r.perPID)
}
