package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/pgbench/tables"
	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/versus/pgbenchinit"
)

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
