package pgbench

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/pgbench/script"
)

// ScriptMode reads the pgbench workload's own run flag --protocol (the query
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
