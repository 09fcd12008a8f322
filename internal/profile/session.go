package profile

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options choose what a Session records.
type Options struct {
	// PIDs are the processes to follow with their descendants; empty =
	// the postmaster of the server at the DSN (Locate).
	PIDs []int
	// Frequency is the sampling frequency in Hz; 0 = DefaultFrequency.
	Frequency int
	// Host is where perf and /proc are (zero value: this host).
	Host Host
}

// Session is a recording of one server's processes.
type Session struct {
	rec   *Recording
	roots []int
	// Warning is Check's warning ("" if none), to print once.
	Warning string
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
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(cctx, dsn)
		if err != nil {
			return nil, fmt.Errorf("profile: connect: %w", err)
		}
		srv, err := Locate(cctx, conn, opts.Host.Proc)
		conn.Close(context.WithoutCancel(ctx))
		if err != nil {
			return nil, err
		}
		roots = []int{srv.Postmaster}
	}
	rec, err := Start(ctx, perf, opts.Frequency)
	if err != nil {
		return nil, err
	}
	return &Session{rec: rec, roots: roots, Warning: warning}, nil
}

// Roots are the followed processes.
func (s *Session) Roots() []int { return s.roots }

// End stops the recording and summarizes it (Recording.Stop).
func (s *Session) End(ctx context.Context) (*Summary, *Parsed, error) {
	return s.rec.Stop(ctx, s.roots)
}

// Abort stops the recording and discards it.
func (s *Session) Abort() { s.rec.Abort() }
