package erp

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// genTask is one independent unit of generation: a warehouse stream or a
// chunk of a catalog. Its output depends only on (seed, scale, task), never
// on scheduling.
type genTask struct {
	name string
	run  func(ctx context.Context, e *emitter) error
}

// tasks lists every generation task, the longest first (warehouse streams
// by decreasing size; warehouse 0 is the largest), so that parallel workers
// finish together.
func (p *plan) tasks(docs *atomic.Int64) []genTask {
	demand := p.itemDemand()
	var ts []genTask
	for w := 0; w < p.warehouses; w++ {
		w := w
		ts = append(ts, genTask{name: "warehouse " + whCode(w), run: func(ctx context.Context, e *emitter) error {
			return p.genWarehouse(ctx, w, demand, e, docs)
		}})
	}
	for c := 0; c*catalogChunk < p.items; c++ {
		c := c
		ts = append(ts, genTask{name: "prices", run: func(ctx context.Context, e *emitter) error { return p.genPrices(ctx, e, c) }})
		ts = append(ts, genTask{name: "items", run: func(ctx context.Context, e *emitter) error { return p.genItems(ctx, e, c) }})
	}
	for c := 0; c*catalogChunk < p.counterparties; c++ {
		c := c
		ts = append(ts, genTask{name: "counterparties", run: func(ctx context.Context, e *emitter) error {
			return p.genCounterparties(ctx, e, c)
		}})
	}
	ts = append(ts, genTask{name: "small catalogs", run: p.genSmallCatalogs})
	return ts
}

// totalSales is the number of sales invoices the plan generates (for
// progress reports; receipts follow demand and are not known in advance).
func (p *plan) totalSales() int64 { return int64(p.salesDocs) }

// generate runs every task on workers goroutines; each full table buffer
// goes to send, which owns it afterwards. newBuf supplies (possibly
// recycled) buffer storage. The first error cancels the rest.
func (p *plan) generate(ctx context.Context, workers int, docs *atomic.Int64,
	send func(*copyBuf) error, newBuf func() []byte) error {
	return p.generateLimit(ctx, workers, docs, send, newBuf, flushBytes)
}

// generateLimit is generate with buffers handed on at limit bytes.
func (p *plan) generateLimit(ctx context.Context, workers int, docs *atomic.Int64,
	send func(*copyBuf) error, newBuf func() []byte, limit int) error {
	tasks := p.tasks(docs)
	g, gctx := errgroup.WithContext(ctx)
	next := atomic.Int64{}
	for i := 0; i < max(1, workers); i++ {
		g.Go(func() error {
			e := newEmitter(p.sep, send, newBuf)
			e.limit = limit
			for {
				k := int(next.Add(1)) - 1
				if k >= len(tasks) {
					return nil
				}
				if err := gctx.Err(); err != nil {
					return err
				}
				if err := tasks[k].run(gctx, e); err != nil {
					return err
				}
			}
		})
	}
	return g.Wait()
}
