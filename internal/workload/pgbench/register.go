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
	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/workload"
	"github.com/erplab/erplab/internal/workload/pgbench/script"
	"github.com/erplab/erplab/internal/workload/pgbench/tables"
)

// Description is the pgbench workload's line in `--workload` help.
const Description = "pgbench scripts (-f, -b; default tpcb-like) as key operations on pgbench's tables"

func init() {
	workload.Register(workload.Meta{
		Name: "pgbench", Description: Description, DefaultScale: 1, MaxScale: tables.MaxScale,
		// The scripts' own options of `erplab run -f/-b`; the rest of
		// pgbench's command line is `erplab pgbench`'s.
		Flags: func(fs *pflag.FlagSet) {
			fs.String("protocol", "simple", "pgbench: query protocol of the scripts: simple, extended or prepared (pgbench -M)")
		},
		InitFlags: func(fs *pflag.FlagSet) {
			fs.Int("partitions", 0, "pgbench: partition pgbench_accounts into this many parts (pgbench --partitions)")
			fs.String("partition-method", "", "pgbench: range or hash (default range when --partitions > 0)")
			fs.IntP("fillfactor", "F", 100, "pgbench: fill factor of the tables, 10..100 (pgbench -F)")
			fs.Bool("unlogged-tables", false, "pgbench: create unlogged tables")
			fs.Bool("foreign-keys", false, "pgbench: create foreign keys between the tables")
			fs.StringP("init-steps", "I", "", "pgbench: initialisation steps, letters of dtgGvpf (default dtgvp; pgbench -I)")
		},
		New: newFromFlags,
	})
}

// newFromFlags is Meta.New: the built-in tpcb-like script (`erplab run`
// builds its scripts from -f/-b itself) in the --protocol, and the table
// options of `erplab init`, checked by CheckInit.
func newFromFlags(fs *pflag.FlagSet) (workload.Workload, error) {
	var o tables.Options
	var err error
	mode, err := ScriptMode(fs)
	if err != nil {
		return nil, err
	}
	get := func(name string, dst any) {
		if err != nil {
			return
		}
		switch d := dst.(type) {
		case *int:
			*d, err = fs.GetInt(name)
		case *string:
			*d, err = fs.GetString(name)
		case *bool:
			*d, err = fs.GetBool(name)
		}
	}
	get("partitions", &o.Partitions)
	get("partition-method", &o.PartitionMethod)
	get("fillfactor", &o.FillFactor)
	get("unlogged-tables", &o.Unlogged)
	get("foreign-keys", &o.ForeignKeys)
	get("init-steps", &o.Steps)
	if err != nil {
		return nil, fmt.Errorf("pgbench: %w", err)
	}
	sc, err := script.Builtin("tpcb-like")
	if err != nil {
		return nil, err
	}
	w, err := New(Options{Scripts: []*script.Script{sc}, Mode: mode, Init: o})
	if err != nil {
		return nil, err
	}
	w.emptySteps = fs.Changed("init-steps") && o.Steps == ""
	return w, nil
}

// ScriptMode reads the workload's own run flag --protocol (the query
// mode of the scripts) from fs.
func ScriptMode(fs *pflag.FlagSet) (script.Mode, error) {
	protocol, err := fs.GetString("protocol")
	if err != nil {
		return 0, fmt.Errorf("pgbench: %w", err)
	}
	mode, err := script.ParseMode(protocol)
	if err != nil {
		return 0, fmt.Errorf("--protocol: %w", err)
	}
	return mode, nil
}

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
	if w.emptySteps {
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
