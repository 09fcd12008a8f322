package loadtest

import (
	"context"
	"sync"

	"github.com/erplab/erplab/internal/results"
)

// progressAttachment prints a progress line every --progress period
// (printProgress) from the start of the load until it stops.
type progressAttachment struct {
	quiet
	done    chan struct{}
	wg      sync.WaitGroup
	running bool
}

func (p *progressAttachment) start(_ context.Context, r *runState) error {
	p.done, p.running = make(chan struct{}), true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		printProgress(r.say, r.rec, r.obs, r.health, r.stream, r.opts, p.done)
	}()
	return nil
}

func (p *progressAttachment) stop(context.Context, *runState, *results.Document) { p.close() }

func (p *progressAttachment) close() {
	if p.running {
		p.running = false
		close(p.done)
		p.wg.Wait()
	}
}
