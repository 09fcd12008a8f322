package erp

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/workload"
)

// CheckInit implements workload.Initializer: 0 < scale <= MaxScale,
// parallel >= 0.
func (w *Workload) CheckInit(o workload.InitOptions) error {
	if o.Scale <= 0 || o.Scale > MaxScale {
		return fmt.Errorf("--scale must be in (0, %d], got %g", MaxScale, o.Scale)
	}
	if o.Parallel < 0 {
		return fmt.Errorf("--parallel must be >= 0, got %d", o.Parallel)
	}
	return nil
}

// InitConns implements workload.Initializer.
func (w *Workload) InitConns(o workload.InitOptions) int { return 2*max(o.Parallel, 2) + 2 }

// InitInterrupted implements workload.Initializer: Init removes what it
// created when it is interrupted.
func (w *Workload) InitInterrupted() string {
	return "init interrupted; what it had created was removed"
}

// InitData implements workload.Initializer with [Init] (the workload's
// separator option, o's scale, seed, parallelism and force).
func (w *Workload) InitData(ctx context.Context, pool *pgxpool.Pool, o workload.InitOptions) (workload.InitStats, error) {
	st, err := Init(ctx, pool, Options{Scale: o.Scale, Seed: o.Seed, Separator: w.opts.Separator, Parallel: o.Parallel, Force: o.Force, Progress: o.Progress})
	if err != nil {
		return workload.InitStats{}, err
	}
	out := workload.InitStats{Rows: st.Rows, Bytes: st.Bytes, Duration: st.Duration, Reused: st.Reused}
	if st.Reused {
		out.Summary = fmt.Sprintf("the database already holds an erplab ERP data set of scale %g, seed %d (%d rows; runs may have changed it since: 'erplab check' verifies it, 'init --drop' then 'init' rebuilds it); nothing done", o.Scale, o.Seed, st.Rows)
	} else {
		out.Summary = fmt.Sprintf("loaded %d rows, %.1f MB in %s (COPY %s, indexes %s, analyze %s): %.0f rows/s, %.1f MB/s",
			st.Rows, float64(st.Bytes)/1e6, st.Duration.Round(10*time.Millisecond), st.CopyDuration.Round(10*time.Millisecond),
			st.IndexDuration.Round(10*time.Millisecond), st.AnalyzeDuration.Round(10*time.Millisecond),
			float64(st.Rows)/st.Duration.Seconds(), float64(st.Bytes)/1e6/st.Duration.Seconds())
	}
	return out, nil
}

// DropData implements workload.Dropper with [Drop].
func (w *Workload) DropData(ctx context.Context, pool *pgxpool.Pool, _ bool) (string, error) {
	meta, ok, err := Installed(ctx, pool)
	if err != nil {
		return "", err
	}
	if !ok {
		return "no erplab ERP data in this database; nothing to drop", nil
	}
	if err := Drop(ctx, pool); err != nil {
		return "", err
	}
	return fmt.Sprintf("dropped erplab ERP data (scale %g, %d tables); other tables untouched", meta.Scale, len(meta.Tables)), nil
}

// CheckData implements workload.Checker with [Check]: one line per
// register; an error wrapping workload.ErrCheckFailed when a totals row
// differs from the sums of its movements.
func (w *Workload) CheckData(ctx context.Context, pool *pgxpool.Pool, out io.Writer) error {
	meta, ok, err := Installed(ctx, pool)
	if err != nil {
		return err
	}
	if !ok || !meta.Ready {
		return fmt.Errorf("no complete erplab ERP data set in this database (create one with 'erplab init')")
	}
	rep, err := Check(ctx, pool)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "erplab ERP data, scale %g seed %d, created %s\n", meta.Scale, meta.Seed, meta.CreatedAt.Format("2006-01-02 15:04"))
	fmt.Fprint(out, rep.String())
	if !rep.OK() {
		return workload.CheckFailed(fmt.Sprintf("%d totals rows differ from their movements", rep.Mismatches))
	}
	fmt.Fprintln(out, "OK: every totals row equals the sums of its movements")
	return nil
}

var (
	_ workload.Initializer = (*Workload)(nil)
	_ workload.Dropper     = (*Workload)(nil)
	_ workload.Checker     = (*Workload)(nil)
)
