package engine

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/record"
	"github.com/erplab/erplab/internal/workload"
)

// OneVU runs one closed-model VU's operations one at a time, as runVU
// does, without the controller: for tests of an operation's own cost.
type OneVU struct {
	e   *run
	ctx context.Context
	vu  *workload.VU
	own *pgxpool.Conn
}

// NewOneVU prepares VU 1 of a run of cfg on pool, recording into rec.
func NewOneVU(ctx context.Context, pool *pgxpool.Pool, cfg Config, rec *record.Recorder) (*OneVU, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	e := &run{cfg: cfg, pool: pool, rec: rec, wake: make(chan struct{}, 1)}
	e.retries, _ = cfg.Workload.(RetryCounter)
	return &OneVU{e: e, ctx: e.traceContext(ctx), vu: &workload.VU{ID: 1, Rand: rand.New(rand.NewPCG(1, 1))}}, nil
}

// Operation runs operation op and reports whether it succeeded.
func (o *OneVU) Operation(op int) bool {
	errs := o.e.errors.Load()
	var next step
	o.own, _, next = o.e.operation(o.ctx, o.vu, op, o.own, time.Time{})
	return next == stepNext && o.e.errors.Load() == errs
}

// Close returns the VU's own connection.
func (o *OneVU) Close() { release(o.own) }

// Another is VU id of the same run, with a connection of its own.
func (o *OneVU) Another(id int) *OneVU {
	return &OneVU{e: o.e, ctx: o.e.traceContext(context.Background()), vu: &workload.VU{ID: id, Rand: rand.New(rand.NewPCG(1, uint64(id)))}}
}
