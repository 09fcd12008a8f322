package profile

import (
	"context"
	"errors"
	"time"

	"github.com/erplab/erplab/internal/hostfacts"
)

// Options choose what a Session records.
type Options struct {
	// PIDs are the processes to follow with their descendants; empty =
	// the postmaster of the server at the DSN (Locate).
	PIDs []int
	// Frequency is the sampling frequency in Hz; 0 = DefaultFrequency.
	Frequency int
	// NoCallGraph records leaf functions only (Sampling.NoCallGraph).
	NoCallGraph bool
	// Host is where perf and /proc are (zero value: this host).
	Host Host
}

// Session is a recording of one server's processes.
type Session struct {
	rec   *Recording
	roots []int
	// Warning is Check's warning ("" if none), to print once.
	Warning string
	// poll: the descendants of roots seen in /proc during the recording.
	stop chan struct{}
	done chan []int
}

// pollInterval is how often a Session lists the roots' descendants in
// /proc, besides perf's FORK records (which a busy host can lose).
const pollInterval = 200 * time.Millisecond

// poll lists the descendants of roots in proc until stop, and sends them.
// It reads only the roots' tree (hostfacts.Descendants: the task
// children files), not every process of the host.
func poll(proc string, roots []int, stop <-chan struct{}, done chan<- []int) {
	seen := map[int]bool{}
	fs, err := hostfacts.New(proc, "")
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for err == nil {
		if kids, kerr := fs.Descendants(roots); kerr == nil {
			for _, pid := range kids {
				seen[pid] = true
			}
		}
		select {
		case <-stop:
			err = errors.New("stopped")
		case <-t.C:
		}
	}
	out := make([]int, 0, len(seen))
	for pid := range seen {
		out = append(out, pid)
	}
	done <- out
}

// Begin checks that perf can run (Check), finds the server's postmaster
// from a connection to dsn (Locate) unless opts.PIDs names the processes,
// and starts the recording. Its errors are one line; an *Unavailable
// error says why profiling cannot run here (perf missing or not
// permitted, remote server).
func Begin(ctx context.Context, dsn string, opts Options) (*Session, error) {
	perf, warning, err := Check(ctx, opts.Host)
	if err != nil {
		return nil, err
	}
	roots := opts.PIDs
	if len(roots) == 0 {
		srv, err := LocateDSN(ctx, dsn, opts.Host.Proc)
		if err != nil {
			return nil, err
		}
		roots = []int{srv.Postmaster}
	}
	rec, err := Start(ctx, perf, Sampling{Frequency: opts.Frequency, NoCallGraph: opts.NoCallGraph})
	if err != nil {
		return nil, err
	}
	s := &Session{rec: rec, roots: roots, Warning: warning, stop: make(chan struct{}), done: make(chan []int, 1)}
	proc := opts.Host.Proc
	if proc == "" {
		proc = hostfacts.DefaultProcRoot
	}
	go poll(proc, roots, s.stop, s.done)
	return s, nil
}

// Roots are the followed processes.
func (s *Session) Roots() []int { return s.roots }

// End stops the recording and summarizes it (Recording.Stop).
func (s *Session) End(ctx context.Context) (*Summary, *Parsed, error) {
	close(s.stop)
	return s.rec.Stop(ctx, s.roots, <-s.done)
}

// Abort stops the recording and discards it.
func (s *Session) Abort() {
	close(s.stop)
	<-s.done
	s.rec.Abort()
}
