// Package pgbench registers the pgbench workload (`--workload pgbench`):
// its name, `erplab init`'s table flags and Meta.New, a thin adapter over
// internal/pgbench, which holds the workload itself (the Workload methods,
// init and drop), pgbench's language (internal/pgbench/expr), its script
// interpreter (internal/pgbench/script), its tables
// (internal/pgbench/tables) and `erplab pgbench`'s command line
// (internal/pgbench/cli).
package pgbench

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/pgbench"
	"github.com/erplab/erplab/internal/pgbench/script"
	"github.com/erplab/erplab/internal/pgbench/tables"
	"github.com/erplab/erplab/internal/workload"
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
	mode, err := pgbench.ScriptMode(fs)
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
	w, err := pgbench.New(pgbench.Options{Scripts: []*script.Script{sc}, Mode: mode, Init: o, EmptyInitSteps: fs.Changed("init-steps") && o.Steps == ""})
	if err != nil {
		return nil, err
	}
	return w, nil
}
