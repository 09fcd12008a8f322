package experiment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/runenv"
	"github.com/erplab/erplab/internal/workload"
)

// Aging is what the aging run of a run database did (extra.experiment.aging):
// Config.Age of the load, run in the run database after the remedies
// were applied and before the measured run, as a run of its own that
// writes no results, observes nothing and is not profiled, so that no
// figure of the measured run (operations, observations, statement and
// wait deltas, churn, starvation, the perf profile) contains it.
type Aging struct {
	Seconds    float64 `json:"seconds"`
	Users      int     `json:"users"`
	Operations int64   `json:"operations"`
	Errors     int64   `json:"errors"`
	Status     string  `json:"status"`
	// StartedAt and EndedAt are the aging run's load span; the measured
	// run starts after EndedAt.
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
	// Catalog is the run database's catalog sizes (bytes,
	// pg_total_relation_size of runenv.CatalogTables) before and after
	// the aging run: the measured run starts from After.
	Catalog *loadtest.CatalogGrowth `json:"catalog,omitempty"`
}

// ageLoad is the aging run's load: cfg.Load's peak, held for age, with
// no warm-up, results, observations, profile or progress lines.
func ageLoad(load loadtest.Options, age time.Duration) loadtest.Options {
	o := load
	users := engine.MaxTarget(load.Stages)
	o.Stages = []engine.Stage{{Duration: 0, Target: users}, {Duration: age, Target: users}} // engine.SimpleStages(users, 0, age)
	if len(load.Rate) > 0 {
		peak := 0.0
		for _, r := range load.Rate {
			peak = max(peak, r.Rate)
		}
		o.Rate = []engine.RateStage{{Duration: age, Rate: peak}}
	}
	o.Warmup, o.NoResults, o.Out, o.OutRoot, o.OutDir = 0, true, "", nil, ""
	o.Observe, o.Profile, o.Progress, o.MetricsAddr, o.Stress = false, false, 0, "", nil
	o.OnSample, o.OnSkip, o.AbortedBy = nil, nil, nil
	return o
}

// runAge runs cfg.Age of the load in the prepared run database p
// (ageLoad) and says so on out in two lines. A failed or interrupted
// aging run is an error: the measured run would not start aged.
func runAge(ctx context.Context, cfg Config, p Prepared, out io.Writer) (*Aging, error) {
	w, err := cfg.NewWorkload(p.Target.Flags)
	if err != nil {
		return nil, err
	}
	if _, driven := w.(workload.Driver); driven {
		return nil, fmt.Errorf("age: workload %s drives its own load and cannot be aged", w.Name())
	}
	opts := ageLoad(cfg.Load, cfg.Age)
	opts.DSN, opts.EnvGiven, opts.Force, opts.Keep, opts.OSUser = p.Target.DSN, false, true, false, ""
	opts.Workload = w
	users := engine.MaxTarget(opts.Stages)
	fmt.Fprintf(out, "age: %s of the load at %d users in %s before the measured run (not measured)\n", cfg.Age, users, p.Database)
	res, err := loadtest.Run(ctx, opts, io.Discard)
	if err == nil && res != nil && res.Doc.Status == results.StatusInterrupted {
		err = errors.New("interrupted")
	}
	if err != nil {
		return nil, fmt.Errorf("age: %w", err)
	}
	a := &Aging{Seconds: cfg.Age.Seconds(), Users: users, Status: string(res.Doc.Status), StartedAt: res.Doc.StartedAt, EndedAt: res.Doc.EndedAt}
	for _, op := range res.Doc.Operations {
		a.Operations += op.Count + op.WarmupCount
		a.Errors += op.Errors
	}
	if raw, ok := res.Doc.Extra["catalog"]; ok {
		var c loadtest.CatalogGrowth
		if json.Unmarshal(raw, &c) == nil {
			a.Catalog = &c
		}
	}
	fmt.Fprintf(out, "age: %d operations (%d failed), %s\n", a.Operations, a.Errors, a.catalogLine())
	if a.Operations == 0 {
		return a, errors.New("age: the aging run executed no operation")
	}
	return a, nil
}

// catalogLine is "catalog before -> after aging: pg_class 1 MB -> 3 MB, ...".
func (a *Aging) catalogLine() string {
	if a.Catalog == nil {
		return "catalog sizes not measured"
	}
	var parts []string
	for _, name := range runenv.CatalogTables() {
		parts = append(parts, fmt.Sprintf("%s %d -> %d kB", name, a.Catalog.Before[name]>>10, a.Catalog.After[name]>>10))
	}
	return "catalog before -> after aging: " + strings.Join(parts, ", ")
}
