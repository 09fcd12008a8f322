package pgbench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/pgbench/tables"
	"github.com/erplab/erplab/internal/workload"
)

// TablesOptions returns the table options of `erplab init` for o: the
// workload's init options (--partitions etc.) with o's scale, parallelism
// and force.
func (w *Workload) TablesOptions(o workload.InitOptions) tables.Options {
	t := w.opts.Init
	t.Scale = int(o.Scale)
	t.Parallel = o.Parallel
	t.Force = o.Force
	return t
}

// CheckInit implements workload.Initializer: pgbench's tables have no
// seed; the scale is pgbench's -s, a whole number; the table options are
// those pgbench -i accepts.
func (w *Workload) CheckInit(o workload.InitOptions) error {
	if o.SeedGiven {
		return errors.New("--seed applies to --workload erp only")
	}
	if o.Scale != math.Trunc(o.Scale) || o.Scale < 1 || o.Scale > tables.MaxScale {
		return fmt.Errorf("--scale of --workload pgbench is pgbench's -s: a whole number in 1..%d, got %g", tables.MaxScale, o.Scale)
	}
	if o.Parallel < 0 {
		return fmt.Errorf("--parallel must be >= 0, got %d", o.Parallel)
	}
	if w.opts.EmptyInitSteps {
		return errors.New("--init-steps is empty: no initialization steps specified")
	}
	if err := w.TablesOptions(o).Validate(); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "pgbench init: "))
	}
	return nil
}

// InitConns implements workload.Initializer: one connection per COPY
// stream and one more.
func (w *Workload) InitConns(o workload.InitOptions) int {
	if o.Parallel == 0 {
		return runtime.GOMAXPROCS(0) + 1
	}
	return o.Parallel + 1
}

// InitInterrupted implements workload.Initializer.
func (w *Workload) InitInterrupted() string {
	return "init interrupted; the pgbench tables may be empty or without keys: run init again (it starts by dropping them)"
}

// InitData implements workload.Initializer with tables.Init: like
// pgbench -i it drops and recreates its own tables.
func (w *Workload) InitData(ctx context.Context, pool *pgxpool.Pool, o workload.InitOptions) (workload.InitStats, error) {
	t := w.TablesOptions(o)
	t.Progress = o.Progress
	start := time.Now()
	st, err := tables.Init(ctx, pool, t)
	if err != nil {
		return workload.InitStats{}, err
	}
	wall := time.Since(start)
	size, err := tables.Size(ctx, pool)
	if err != nil {
		return workload.InitStats{}, err
	}
	return workload.InitStats{Rows: st.Rows, Bytes: size, Duration: wall,
		Summary: fmt.Sprintf("pgbench tables ready: scale %d%s, %d rows, %.1f MB in %.2f s on %d connections",
			t.Scale, describeLayout(t), st.Rows, float64(size)/1e6, wall.Seconds(), st.Connections)}, nil
}

func describeLayout(o tables.Options) string {
	if o.Partitions == 0 {
		return ""
	}
	m := o.PartitionMethod
	if m == "" {
		m = tables.PartitionRange
	}
	return fmt.Sprintf(" (%d %s partitions)", o.Partitions, strings.ToLower(m))
}

// DropData implements workload.Dropper with tables.Drop. Tables without
// erplab's marker (tables.Marked: made by pgbench -i or by hand) are
// dropped only with force.
func (w *Workload) DropData(ctx context.Context, pool *pgxpool.Pool, force bool) (string, error) {
	scale, _, ok, err := tables.Installed(ctx, pool)
	if err != nil {
		return "", err
	}
	if !ok {
		return "no pgbench tables in this database; nothing to drop", nil
	}
	if marked, err := tables.Marked(ctx, pool); err != nil {
		return "", err
	} else if !marked && !force {
		return "", fmt.Errorf("init --drop: the pgbench tables were not created by erplab (no erplab marker: made by pgbench -i?): %w", workload.ErrForeignDatabase)
	}
	if err := tables.Drop(ctx, pool); err != nil {
		return "", err
	}
	return fmt.Sprintf("dropped the pgbench tables (scale %d); other tables untouched", scale), nil
}

var (
	_ workload.Initializer = (*Workload)(nil)
	_ workload.Dropper     = (*Workload)(nil)
)
