package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/pgbench/tables"
	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/versus/pgbenchinit"
	"github.com/erplab/erplab/internal/workload"
)

type initFlags struct {
	dsn, workload, osUser string
	dsnFile               string
	scale                 float64
	seed                  uint64
	parallel              int
	force                 bool
	drop, keep, vsPgbench bool
}

func newInitCmd() *cobra.Command {
	var f initFlags
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create a workload's schema and data in a database",
		Long: `Create the ERP workload's 1C-like schema and load deterministic data at a scale factor
(scale 1 is about 1.4 GB): binary COPY into index-less tables on parallel connections, then
indexes and ANALYZE. The database must be empty or hold only erplab's tables unless --force.
--drop removes only what erplab created (recorded in the table _erplab_meta).

Without --dsn the data goes into a throwaway server: use --keep to leave it running, or
--vs-pgbench to compare the load rate with 'pgbench -i' on the same server in one go.

--workload pgbench builds pgbench's four tables as 'pgbench -i' of PostgreSQL 15 does, with
its options (-s, --partitions, --partition-method, --fillfactor, --unlogged-tables,
--foreign-keys, --init-steps), COPY running on parallel connections. Like pgbench -i it drops
and recreates its own tables; other tables stop it unless --force. --vs-pgbench then times
'pgbench -i' with the same options on the same server.`,
		Example: `  erplab init --dsn 'host=/var/run/postgresql dbname=erp' --scale 1
  erplab init --dsn 'dbname=erp' --drop
  erplab init --scale 0.2 --vs-pgbench
  erplab init --workload pgbench -s 10 --partitions 4 --partition-method hash --vs-pgbench`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, ini, err := initWorkload(cmd, f.workload)
			if err != nil {
				return withCode(exitUsage, err)
			}
			o := workload.InitOptions{Scale: f.scale, ScaleGiven: cmd.Flags().Changed("scale"),
				Seed: f.seed, SeedGiven: cmd.Flags().Changed("seed"), Parallel: f.parallel, Force: f.force}
			if !o.ScaleGiven {
				o.Scale = m.DefaultScale
			}
			if err := ini.CheckInit(o); err != nil {
				return withCode(exitUsage, err)
			}
			dsn, envGiven, err := resolveDSN(cmd, f.dsn, f.dsnFile)
			if err != nil {
				return err
			}
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
			err = runInit(cmd.Context(), cmd.OutOrStdout(), f, ini, o, dsn, embedded)
			if err != nil && cmd.Context().Err() != nil {
				return withCode(exitInterrupted, errors.New(ini.InitInterrupted()))
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dsn, "dsn", "", "target database (libpq key=value or URL); default: PG* environment, else a throwaway server")
	addDSNFileFlag(fl, &f.dsnFile, "dsn")
	fl.StringVar(&f.workload, "workload", "erp", "workload whose data to create")
	fl.Float64VarP(&f.scale, "scale", "s", 0.1, "scale factor (erp: 0.1 = about 130 MB, 1 = about 1.4 GB; pgbench: a whole number, default 1, 15 MB each)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the data generator (same seed and scale, same data)")
	fl.IntVar(&f.parallel, "parallel", 0, "COPY streams and concurrent index builds (0 = number of CPUs)")
	fl.BoolVar(&f.force, "force", false, "write into a database that holds objects (tables, views, functions...) erplab did not create")
	fl.BoolVar(&f.drop, "drop", false, "remove what erplab created in the database, nothing else")
	fl.BoolVar(&f.keep, "keep", false, "throwaway server: leave it running with the data and print how to connect")
	fl.BoolVar(&f.vsPgbench, "vs-pgbench", false, "also run 'pgbench -i' of about the same size on the same server and compare the rates")
	fl.StringVar(&f.osUser, "os-user", "", "throwaway server: OS user to run PostgreSQL as when erplab runs as root (default postgres)")
	workload.AddInitFlags(fl) // erp's --separator, pgbench's --partitions etc.
	return cmd
}

// initWorkload finds the workload of `erplab init --workload name` and
// builds it with its own init options; errors are usage errors: an
// unknown workload, one with no separate init, another workload's option,
// a bad option value.
func initWorkload(cmd *cobra.Command, name string) (workload.Meta, workload.Initializer, error) {
	var with, without []string
	for _, m := range workload.All() {
		if w, err := workload.Build(m.Name, nil); err == nil {
			if _, ok := w.(workload.Initializer); ok {
				with = append(with, m.Name)
				continue
			}
		}
		without = append(without, m.Name)
	}
	m, ok := workload.Lookup(name)
	if ok {
		if flag, owner, foreign := m.ForeignFlag(cmd.Flags()); foreign {
			return m, nil, fmt.Errorf("--%s applies to --workload %s only", flag, owner)
		}
	}
	var ini workload.Initializer
	if ok {
		w, err := workloadByName(name, cmd.Flags())
		if err != nil {
			return m, nil, err
		}
		ini, ok = w.(workload.Initializer)
	}
	if !ok {
		verb := "sets"
		if len(without) > 1 {
			verb = "set"
		}
		return m, nil, fmt.Errorf("init: workload %q has no separate init (only %s; %s %s itself up in 'erplab run')",
			name, strings.Join(with, " and "), strings.Join(without, ", "), verb)
	}
	return m, ini, nil
}

// pgbenchTables is implemented by workloads whose init builds pgbench's
// own tables: `init --vs-pgbench` then times `pgbench -i` with the same
// options (otherwise a pgbench database of about the same size).
type pgbenchTables interface {
	TablesOptions(o workload.InitOptions) tables.Options
}

func runInit(ctx context.Context, out io.Writer, f initFlags, ini workload.Initializer, o workload.InitOptions, dsn string, embedded bool) error {
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
	pool, err := conninfo.OpenPool(ctx, dsn, ini.InitConns(o))
	if err != nil {
		return err
	}
	defer pool.Close()
	if f.drop {
		d, ok := ini.(workload.Dropper)
		if !ok {
			return fmt.Errorf("init --drop: workload %s cannot drop its data", f.workload)
		}
		line, err := d.DropData(ctx, pool, o.Force)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, line)
		return nil
	}
	o.Progress = func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	pt, same := ini.(pgbenchTables)
	if f.vsPgbench && same {
		checkpoint(ctx, pool)
	}
	st, err := ini.InitData(ctx, pool, o)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, st.Summary)
	if !f.vsPgbench {
		return nil
	}
	if st.Reused {
		return errors.New("--vs-pgbench needs a fresh load; the data set was already there (use another database or --drop first)")
	}
	if same {
		ours := pgbenchinit.Result{Tool: "erplab init --workload " + f.workload, Rows: st.Rows, Bytes: st.Bytes, Duration: st.Duration}
		return comparePgbenchInit(ctx, out, cluster, dsn, pt.TablesOptions(o), ours)
	}
	return comparePgbench(ctx, out, cluster, dsn, f.workload, st)
}

// comparePgbench loads a pgbench database of about the same size into a
// sibling database on the same server and prints both rates.
func comparePgbench(ctx context.Context, out io.Writer, cluster *pgcluster.Cluster, dsn, name string, st workload.InitStats) error {
	pgbench, db, pgDSN, drop, err := pgbenchSibling(ctx, cluster, dsn)
	if err != nil {
		return err
	}
	defer drop()
	scale := pgbenchinit.PgbenchScaleFor(st.Bytes)
	fmt.Fprintf(out, "running pgbench -i -s %d (about the same size) into database %s on the same server...\n", scale, db)
	ref, err := pgbenchinit.RunPgbench(ctx, pgbench, pgDSN, scale)
	if err != nil {
		return err
	}
	ours := pgbenchinit.Result{Tool: "erplab init (" + name + ")", Rows: st.Rows, Bytes: st.Bytes, Duration: st.Duration}
	fmt.Fprintln(out)
	pgbenchinit.Print(out, ours, ref)
	return nil
}

// pgbenchCompareDB is the sibling database `--vs-pgbench` loads with
// pgbench, dropped afterwards.
const pgbenchCompareDB = "erplab_pgbench_compare"

// pgbenchSibling finds pgbench (next to the cluster's or the installed
// server binaries, then on PATH) and creates a fresh sibling database on
// dsn's server for its load. It returns pgbench's path, the database's
// name and DSN, and drop, which removes the database (call it when done;
// it ignores errors: the comparison is over by then).
func pgbenchSibling(ctx context.Context, cluster *pgcluster.Cluster, dsn string) (pgbench, db, pgDSN string, drop func(), err error) {
	binDir := ""
	if cluster != nil {
		binDir = cluster.BinDir()
	} else if d, err := pgcluster.FindBinDir(); err == nil {
		binDir = d
	}
	if pgbench, err = pgbenchinit.FindPgbench(binDir); err != nil {
		return "", "", "", nil, err
	}
	db = pgbenchCompareDB
	if pgDSN, err = pgbenchinit.WithDatabase(dsn, db); err != nil {
		return "", "", "", nil, err
	}
	pool, err := conninfo.OpenPool(ctx, dsn, 1)
	if err != nil {
		return "", "", "", nil, err
	}
	_, err = pool.Exec(ctx, `DROP DATABASE IF EXISTS `+db)
	if err == nil {
		_, err = pool.Exec(ctx, `CREATE DATABASE `+db)
	}
	pool.Close()
	if err != nil {
		return "", "", "", nil, fmt.Errorf("create database %s for pgbench: %w", db, err)
	}
	drop = func() {
		if p, err := conninfo.OpenPool(context.Background(), dsn, 1); err == nil {
			p.Exec(context.Background(), `DROP DATABASE IF EXISTS `+db+` WITH (FORCE)`) //nolint:errcheck // best effort
			p.Close()
		}
	}
	return pgbench, db, pgDSN, drop, nil
}
