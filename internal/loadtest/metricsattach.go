package loadtest

import (
	"context"
	"fmt"

	"github.com/erplab/erplab/internal/metrics"
)

// metricsAttachment serves Prometheus metrics of the run at
// --metrics-addr from the start of the load until Run returns (the
// summary and the results written); the samplers feed it too (r.exp).
type metricsAttachment struct {
	quiet
	srv *metrics.Server
}

func (m *metricsAttachment) start(ctx context.Context, r *runState) error {
	exp, err := metrics.New(metrics.Options{})
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	exp.SetOpSource(metrics.RecorderSource(r.rec))
	if m.srv, err = metrics.Serve(ctx, r.opts.MetricsAddr, exp.Handler()); err != nil {
		return err
	}
	r.exp = exp
	r.say("metrics: http://%s/metrics", m.srv.Addr())
	return nil
}

func (m *metricsAttachment) close() {
	if m.srv != nil {
		m.srv.Close()
	}
}
