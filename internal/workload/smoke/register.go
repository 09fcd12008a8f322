package smoke

import (
	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/workload"
)

// Description is the smoke workload's line in `--workload` help.
const Description = "tiny schema of its own and five key operations; sets itself up in seconds on any PostgreSQL"

func init() {
	workload.Register(workload.Meta{
		Name: "smoke", Description: Description, DefaultScale: 1,
		New: func(*pflag.FlagSet) (workload.Workload, error) { return New(), nil },
	})
}
