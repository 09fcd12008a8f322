package loadtest

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/workload"
)

// crowdSize is the idle sessions the run's workload asks for
// (workload.Crowd), 0 for none.
func crowdSize(w workload.Workload) int {
	if c, ok := w.(workload.Crowd); ok {
		return max(c.IdleSessions(), 0)
	}
	return 0
}

// crowdAttachment holds the workload's idle sessions beside the load
// (workload.Crowd, erp --idle-sessions): opened before the load, each
// runs one statement and then stays idle, not in a transaction, until
// the load ends.
type crowdAttachment struct {
	quiet
	n     int
	conns []*pgx.Conn
}

// crowdOpeners is how many sessions are opened at once.
const crowdOpeners = 8

func (a *crowdAttachment) start(ctx context.Context, r *runState) error {
	if err := checkFDs(a.n + r.maxVUs + 64); err != nil {
		return err
	}
	conns := make([]*pgx.Conn, a.n)
	errs := make([]error, a.n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(crowdOpeners, a.n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				c, err := conninfo.Connect(ctx, r.srv.dsn, "erplab idle session", nil)
				if err == nil {
					if _, err = c.Exec(ctx, "SELECT 1"); err != nil {
						c.Close(context.WithoutCancel(ctx))
						c = nil
					}
				}
				conns[i], errs[i] = c, err
			}
		}()
	}
	for i := range a.n {
		next <- i
	}
	close(next)
	wg.Wait()
	opened := 0
	var first error
	for i, c := range conns {
		if c != nil {
			a.conns = append(a.conns, c)
			opened++
		} else if first == nil {
			first = errs[i]
		}
	}
	if first != nil {
		a.close()
		return fmt.Errorf("idle sessions: opened %d of %d: %s (raise the server's max_connections or lower --idle-sessions)", opened, a.n, conninfo.Describe(first))
	}
	r.say("holding %d idle sessions beside the load (each ran SELECT 1, idle, not in a transaction)", a.n)
	return nil
}

func (a *crowdAttachment) stop(context.Context, *runState, *results.Document) { a.close() }

func (a *crowdAttachment) close() {
	for _, c := range a.conns {
		c.Close(context.Background())
	}
	a.conns = nil
}

// checkFDs refuses, in one line, a run that needs more file descriptors
// than this process may open (RLIMIT_NOFILE's soft limit; Go raises it to
// the hard limit at start).
func checkFDs(need int) error {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return nil // unknown: let the connections fail if they must
	}
	if uint64(need) > rl.Cur {
		return fmt.Errorf("idle sessions: %d connections need more file descriptors than this process's limit %d (ulimit -n; raise the hard limit or lower --idle-sessions)", need, rl.Cur)
	}
	return nil
}
