// Package erp registers the ERP workload (`--workload erp`): its name,
// its flags (--temp-style, --separator, --idle-sessions) and Meta.New, a thin adapter over
// internal/erp, which holds the workload itself (schema, data, key
// operations, init, drop and check), shared with `erplab disk --macro`.
package erp

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/erp"
	"github.com/erplab/erplab/internal/workload"
)

// Description is the erp workload's line in `--workload` help.
const Description = "1C-like trade database and its eleven key operations (erplab init builds the data)"

// MaxIdleSessions bounds --idle-sessions (each is a server backend and a
// file descriptor of erplab's).
const MaxIdleSessions = 5000

func init() {
	workload.Register(workload.Meta{
		Name: "erp", Description: Description, DefaultScale: 0.1, MaxScale: erp.MaxScale,
		Flags: func(fs *pflag.FlagSet) {
			fs.String("temp-style", erp.TempStyle1C, "erp: how temp tables are used: 1c (create, index, analyze, drop) or lsfusion (cached t_N, TRUNCATE)")
			fs.Bool("separator", false, "erp: build the data with the data-separator column first in every index")
			fs.Int("idle-sessions", 0, fmt.Sprintf("erp: hold this many idle sessions beside the load (each runs one statement, then stays idle, not in a transaction): the field's idle crowd, whose backends fall behind in the shared invalidation queue and are reset; at most %d; the embedded server is sized for them", MaxIdleSessions))
		},
		InitFlags: func(fs *pflag.FlagSet) {
			fs.Bool("separator", false, "add the data-separator column as the first column of every index")
		},
		New: newFromFlags,
	})
}

// newFromFlags is Meta.New: --temp-style and --separator.
func newFromFlags(fs *pflag.FlagSet) (workload.Workload, error) {
	ts, err := fs.GetString("temp-style")
	if err != nil {
		return nil, fmt.Errorf("erp: %w", err)
	}
	sep, err := fs.GetBool("separator")
	if err != nil {
		return nil, fmt.Errorf("erp: %w", err)
	}
	if ts != erp.TempStyle1C && ts != erp.TempStyleLsFusion {
		return nil, fmt.Errorf("--temp-style must be %s or %s, got %q", erp.TempStyle1C, erp.TempStyleLsFusion, ts)
	}
	idle, err := fs.GetInt("idle-sessions")
	if err != nil {
		return nil, fmt.Errorf("erp: %w", err)
	}
	if idle < 0 || idle > MaxIdleSessions {
		return nil, fmt.Errorf("--idle-sessions must be 0 to %d, got %d", MaxIdleSessions, idle)
	}
	return erp.New(erp.WorkloadOptions{TempStyle: ts, Separator: sep, IdleSessions: idle}), nil
}
