package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/versus/pgbenchinit"
	"github.com/erplab/erplab/internal/workload/pgbench/tables"
)

// pgbenchInitFlags are the flags of 'erplab init --workload pgbench',
// named after pgbench -i's.
type pgbenchInitFlags struct {
	partitions      int
	partitionMethod string
	fillFactor      int
	unlogged        bool
	foreignKeys     bool
	steps           string
}

// pgbenchOnlyFlags and erpOnlyFlags are refused with the other workload.
var (
	pgbenchOnlyFlags = []string{"partitions", "partition-method", "fillfactor", "unlogged-tables", "foreign-keys", "init-steps"}
	erpOnlyFlags     = []string{"seed", "separator"}
)

func addPgbenchInitFlags(fl *pflag.FlagSet, f *pgbenchInitFlags) {
	fl.IntVar(&f.partitions, "partitions", 0, "pgbench: partition pgbench_accounts into this many parts (pgbench --partitions)")
	fl.StringVar(&f.partitionMethod, "partition-method", "", "pgbench: range or hash (default range when --partitions > 0)")
	fl.IntVarP(&f.fillFactor, "fillfactor", "F", 100, "pgbench: fill factor of the tables, 10..100 (pgbench -F)")
	fl.BoolVar(&f.unlogged, "unlogged-tables", false, "pgbench: create unlogged tables")
	fl.BoolVar(&f.foreignKeys, "foreign-keys", false, "pgbench: create foreign keys between the tables")
	fl.StringVarP(&f.steps, "init-steps", "I", "", "pgbench: initialisation steps, letters of dtgGvpf (default dtgvp; pgbench -I)")
}

// rejectPgbenchFlags refuses pgbench's flags with another workload.
func rejectPgbenchFlags(cmd *cobra.Command) error {
	for _, name := range pgbenchOnlyFlags {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s applies to --workload pgbench only", name)
		}
	}
	return nil
}

// pgbenchOptions turns the flags into tables.Options, or a one-line usage
// error.
func pgbenchOptions(cmd *cobra.Command, f initFlags) (tables.Options, error) {
	for _, name := range erpOnlyFlags {
		if cmd.Flags().Changed(name) {
			return tables.Options{}, fmt.Errorf("--%s applies to --workload erp only", name)
		}
	}
	scale := 1.0
	if cmd.Flags().Changed("scale") {
		scale = f.scale
	}
	if scale != math.Trunc(scale) || scale < 1 || scale > tables.MaxScale {
		return tables.Options{}, fmt.Errorf("--scale of --workload pgbench is pgbench's -s: a whole number in 1..%d, got %g", tables.MaxScale, scale)
	}
	if f.parallel < 0 {
		return tables.Options{}, fmt.Errorf("--parallel must be >= 0, got %d", f.parallel)
	}
	o := tables.Options{
		Scale:           int(scale),
		Partitions:      f.pgbench.partitions,
		PartitionMethod: f.pgbench.partitionMethod,
		FillFactor:      f.pgbench.fillFactor,
		Unlogged:        f.pgbench.unlogged,
		ForeignKeys:     f.pgbench.foreignKeys,
		Steps:           f.pgbench.steps,
		Parallel:        f.parallel,
		Force:           f.force,
	}
	if cmd.Flags().Changed("init-steps") && o.Steps == "" {
		return o, errors.New("--init-steps is empty: no initialization steps specified")
	}
	if err := o.Validate(); err != nil {
		return o, errors.New(strings.TrimPrefix(err.Error(), "pgbench init: "))
	}
	return o, nil
}

// runPgbenchInitCmd is 'erplab init --workload pgbench'.
func runPgbenchInitCmd(cmd *cobra.Command, f initFlags) error {
	o, err := pgbenchOptions(cmd, f)
	if err != nil {
		return withCode(exitUsage, err)
	}
	dsn, envGiven := conninfo.FromEnvOrFlag(f.dsn)
	embedded := dsn == "" && !envGiven
	if !embedded && (f.keep || f.osUser != "") {
		return withCode(exitUsage, errors.New("--keep and --os-user apply to the throwaway server only; drop them or drop --dsn"))
	}
	if embedded && !f.keep && !f.vsPgbench {
		return withCode(exitUsage, errors.New("init without --dsn would load a throwaway server and remove it at once: pass --dsn, --keep or --vs-pgbench"))
	}
	if f.drop && f.vsPgbench {
		return withCode(exitUsage, errors.New("--drop and --vs-pgbench do not go together"))
	}
	ctx := cmd.Context()
	err = runPgbenchInit(ctx, cmd.OutOrStdout(), f, o, dsn, embedded)
	if err != nil && ctx.Err() != nil {
		return withCode(exitInterrupted, errors.New("init interrupted; the pgbench tables may be empty or without keys: run init again (it starts by dropping them)"))
	}
	return err
}

func runPgbenchInit(ctx context.Context, out io.Writer, f initFlags, o tables.Options, dsn string, embedded bool) error {
	var cluster *pgcluster.Cluster
	if embedded {
		c, err := loadtest.StartEmbedded(ctx, out, f.osUser, 50, f.keep)
		if err != nil {
			return err
		}
		cluster = c
		defer func() {
			if f.keep {
				fmt.Fprintln(out, c.Keep("erplab"))
				return
			}
			c.Stop()
		}()
		dsn = c.DSN("erplab")
		o.Force = true
	}
	par := o.Parallel
	if par == 0 {
		par = runtime.GOMAXPROCS(0)
	}
	pool, err := conninfo.OpenPool(ctx, dsn, par+1)
	if err != nil {
		return err
	}
	defer pool.Close()
	if f.drop {
		scale, _, ok, err := tables.Installed(ctx, pool)
		if err != nil {
			return err
		}
		if !ok {
			fmt.Fprintln(out, "no pgbench tables in this database; nothing to drop")
			return nil
		}
		if err := tables.Drop(ctx, pool); err != nil {
			return err
		}
		fmt.Fprintf(out, "dropped the pgbench tables (scale %d); other tables untouched\n", scale)
		return nil
	}
	o.Progress = func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	if f.vsPgbench {
		checkpoint(ctx, pool)
	}
	start := time.Now()
	st, err := tables.Init(ctx, pool, o)
	if err != nil {
		return err
	}
	wall := time.Since(start)
	size, err := tables.Size(ctx, pool)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "pgbench tables ready: scale %d%s, %d rows, %.1f MB in %.2f s on %d connections\n",
		o.Scale, describeLayout(o), st.Rows, float64(size)/1e6, wall.Seconds(), st.Connections)
	if !f.vsPgbench {
		return nil
	}
	ours := pgbenchinit.Result{Tool: "erplab init --workload pgbench", Rows: st.Rows, Bytes: size, Duration: wall}
	return comparePgbenchInit(ctx, out, cluster, dsn, o, ours)
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

// comparePgbenchInit runs `pgbench -i` with the same options into a
// sibling database on the same server and prints both times and their
// ratio.
func comparePgbenchInit(ctx context.Context, out io.Writer, cluster *pgcluster.Cluster, dsn string, o tables.Options, ours pgbenchinit.Result) error {
	pgbench, db, pgDSN, drop, err := pgbenchSibling(ctx, cluster, dsn)
	if err != nil {
		return err
	}
	defer drop()
	args, err := o.PgbenchArgs()
	if err != nil {
		return err
	}
	refName := "pgbench " + strings.Join(args, " ")
	fmt.Fprintf(out, "running %s into database %s on the same server...\n", refName, db)
	if p, err := conninfo.OpenPool(ctx, dsn, 1); err == nil {
		checkpoint(ctx, p)
		p.Close()
	}
	d, err := tables.RunPgbench(ctx, pgbench, pgDSN, o)
	if err != nil {
		return err
	}
	refPool, err := conninfo.OpenPool(ctx, pgDSN, 1)
	if err != nil {
		return err
	}
	size, err := tables.Size(ctx, refPool)
	refPool.Close()
	if err != nil {
		return err
	}
	ref := pgbenchinit.Result{Tool: refName, Rows: ours.Rows, Bytes: size, Duration: d}
	fmt.Fprintln(out)
	printPgbenchComparison(out, ours, ref)
	return nil
}

// checkpoint flushes the dirty buffers of the previous load so that it
// does not slow down the next timed one (both loads start after one).
// Without the right (superuser or pg_checkpoint) the comparison goes on
// without it.
func checkpoint(ctx context.Context, q tables.Querier) {
	q.Exec(ctx, "CHECKPOINT")
}

// printPgbenchComparison prints both loads of the same tables and the
// ratio of their times.
func printPgbenchComparison(w io.Writer, ours, ref pgbenchinit.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "loader\trows\tMB\tseconds\trows/s\t")
	for _, r := range []pgbenchinit.Result{ours, ref} {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.2f\t%.0f\t\n", r.Tool, r.Rows, float64(r.Bytes)/1e6, r.Duration.Seconds(), r.RowsPerSecond())
	}
	tw.Flush()
	fmt.Fprintf(w, "time, erplab / pgbench -i: %.2fx (same tables and rows; below 1 erplab is faster)\n",
		ours.Duration.Seconds()/ref.Duration.Seconds())
}
