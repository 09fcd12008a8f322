package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/workload/erp"
)

func newCheckCmd() *cobra.Command {
	var dsn string
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Prove that the ERP data's register totals equal the sums of their movements",
		Long: `Compare every totals table of the ERP workload's registers with the sums of the register's
movements (balance totals per month and the current-balance row at 3999-11-01, turnover
totals per month), read-only. Prints one line per register and exits 3 when any key
mismatches, so it can follow a load test in a script.`,
		Example: `  erplab check --dsn 'dbname=erp'`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, envGiven := conninfo.FromEnvOrFlag(dsn)
			if d == "" && !envGiven {
				return withCode(exitUsage, errors.New("check needs a server: pass --dsn (or set PG* variables)"))
			}
			pool, err := conninfo.OpenPool(cmd.Context(), d, 2)
			if err != nil {
				return err
			}
			defer pool.Close()
			meta, ok, err := erp.Installed(cmd.Context(), pool)
			if err != nil {
				return err
			}
			if !ok || !meta.Ready {
				return errors.New("no complete erplab ERP data set in this database (create one with 'erplab init')")
			}
			rep, err := erp.Check(cmd.Context(), pool)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "erplab ERP data, scale %g seed %d, created %s\n", meta.Scale, meta.Seed, meta.CreatedAt.Format("2006-01-02 15:04"))
			fmt.Fprint(out, rep.String())
			if !rep.OK() {
				return withCode(exitCheckFailed, fmt.Errorf("%d totals rows differ from their movements", rep.Mismatches))
			}
			fmt.Fprintln(out, "OK: every totals row equals the sums of its movements")
			return nil
		},
	}
	cmd.Flags().StringVar(&dsn, "dsn", "", "database holding the ERP data (libpq key=value or URL); default: PG* environment")
	return cmd
}
