package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/workload"
)

func newCheckCmd() *cobra.Command {
	var dsn, dsnFile, name string
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
			d, envGiven, err := resolveDSN(cmd, dsn, dsnFile)
			if err != nil {
				return err
			}
			if d == "" && !envGiven {
				return withCode(exitUsage, errors.New("check needs a server: pass --dsn (or set PG* variables)"))
			}
			w, err := workload.Build(name, nil)
			if err != nil {
				return withCode(exitUsage, err)
			}
			c, ok := w.(workload.Checker)
			if !ok {
				var with []string
				for _, m := range workload.All() {
					if o, err := workload.Build(m.Name, nil); err == nil {
						if _, ok := o.(workload.Checker); ok {
							with = append(with, m.Name)
						}
					}
				}
				return withCode(exitUsage, fmt.Errorf("check: workload %s has no data check (its data has no invariant erplab can verify; workloads with one: %s)", name, strings.Join(with, ", ")))
			}
			pool, err := conninfo.OpenPool(cmd.Context(), d, 2)
			if err != nil {
				return err
			}
			defer pool.Close()
			return c.CheckData(cmd.Context(), pool, cmd.OutOrStdout()) // workload.ErrCheckFailed carries its code
		},
	}
	cmd.Flags().StringVar(&dsn, "dsn", "", "database holding the ERP data (libpq key=value or URL); default: PG* environment")
	addDSNFileFlag(cmd.Flags(), &dsnFile, "dsn")
	cmd.Flags().StringVar(&name, "workload", "erp", "workload whose data to check")
	return cmd
}
