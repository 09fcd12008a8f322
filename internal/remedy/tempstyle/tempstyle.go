// Package tempstyle is the remedy "temp-style:1c|lsfusion": the run's ERP
// workload treats temporary tables in the given style (erp's --temp-style:
// workload.TempStyle1C or TempStyleLsFusion) instead of the baseline's. It
// changes no server state: it overrides the workload flag temp-style of
// the run and records both styles.
package tempstyle

import (
	"context"
	"fmt"

	"github.com/erplab/erplab/internal/remedy"
	"github.com/erplab/erplab/internal/workload"
)

// Name is the remedy's name on the command line.
const Name = "temp-style"

// Flag is the workload flag the remedy overrides.
const Flag = "temp-style"

func init() {
	remedy.Register(remedy.Kind{
		Name:   Name,
		Syntax: Name + ":" + workload.TempStyle1C + "|" + workload.TempStyleLsFusion,
		Doc:    "how the ERP workload treats temp tables in this run",
		// The temp-table style changes every operation that uses temp
		// tables: the whole workload's score answers it.
		Primary: []string{"integral:apdex"},
		Parse:   parse,
		Apply:   apply,
		// Only a workload with --temp-style (erp) takes it.
		WorkloadFlag: Flag,
	})
}

func parse(arg string) error {
	if arg != workload.TempStyle1C && arg != workload.TempStyleLsFusion {
		return fmt.Errorf("temp-style must be %s or %s", workload.TempStyle1C, workload.TempStyleLsFusion)
	}
	return nil
}

// apply sets t.Flags[Flag] to arg; changed holds temp_style (the run's)
// and baseline_temp_style (the value before).
func apply(_ context.Context, t *remedy.Target, arg string) (*remedy.Effect, error) {
	base := t.Flags[Flag]
	t.Flags[Flag] = arg
	return &remedy.Effect{Changed: map[string]any{"temp_style": arg, "baseline_temp_style": base}}, nil
}
