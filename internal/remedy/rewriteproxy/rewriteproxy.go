// Package rewriteproxy is the remedy "rewrite-proxy": the run's
// connections go through an in-process erplab proxy (package proxy) that
// listens on 127.0.0.1 (a free port) in front of the run's database and
// rewrites statements on the way. Apply replaces the target's DSN by the
// proxy's; Undo stops the proxy and records its counters (statements,
// rewrites, fallbacks, rules fired).
package rewriteproxy

import (
	"context"
	"fmt"
	"net"

	"github.com/erplab/erplab/internal/proxy"
	"github.com/erplab/erplab/internal/remedy"
)

// Name is the remedy's name on the command line.
const Name = "rewrite-proxy"

func init() {
	remedy.Register(remedy.Kind{
		Name: Name,
		Doc:  "the run's connections go through an in-process erplab proxy",
		// The rewrite targets the ERP report that filters by OR over a
		// subquery; the integral barely moves (45 of 25,025 statements).
		// Its p95 beside its APDEX: the APDEX of one operation can be
		// the same every round of a side (every execution in one zone),
		// which only a permutation p-value tests (#31: p95 268 -> 89 ms
		// with APDEX 0.5 -> 1 in both rounds, p 0.33).
		Primary: []string{"or_subquery_report:p95_ms", "or_subquery_report:apdex"},
		Apply:   apply,
		Undo:    undo,
	})
}

// state is the serving proxy.
type state struct {
	p      *proxy.Proxy
	cancel context.CancelFunc
	done   chan error
}

// apply serves a proxy in front of t.DSN on 127.0.0.1 and points t.DSN
// at it; changed holds listen (the proxy's address).
func apply(ctx context.Context, t *remedy.Target, _ string) (*remedy.Effect, error) {
	p, err := proxy.New(proxy.Config{Upstream: t.DSN})
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("remedy %s: listen: %w", Name, err)
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- p.Serve(pctx, ln) }()
	port := ln.Addr().(*net.TCPAddr).Port
	if t.DSNAt != nil {
		// The run's credentials (the cluster's passfile holds its
		// password for any host:port).
		t.DSN = t.DSNAt("127.0.0.1", port, t.Database)
	} else if t.Cluster != nil {
		// The cluster's passfile holds its password for any host:port.
		t.DSN = t.Cluster.DSNAt("127.0.0.1", port, t.Database)
	} else {
		t.DSN = fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=%s sslmode=disable", port, t.Database)
	}
	return &remedy.Effect{Changed: map[string]any{"listen": ln.Addr().String()}, State: &state{p: p, cancel: cancel, done: done}}, nil
}

// undo stops the proxy and adds its counters to the record.
func undo(_ context.Context, _ *remedy.Target, e *remedy.Effect) error {
	s := e.State.(*state)
	s.cancel()
	err := <-s.done
	st := s.p.Stats()
	e.Changed["statements"] = st.Statements
	e.Changed["rewrites"] = st.Rewrites
	e.Changed["fallbacks"] = st.Fallbacks
	e.Changed["fired"] = st.Fired
	e.Changed["vetoed"] = st.Vetoed
	e.Changed["summary"] = st.String()
	if err != nil {
		return fmt.Errorf("remedy %s: %w", Name, err)
	}
	return nil
}
