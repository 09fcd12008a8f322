package main

import (
	"fmt"
	"io"

	"github.com/erplab/erplab/internal/experiment"
)

// writeABPlan prints ab's plan of cfg (experiment.NewPlan; aa > 0 for
// --aa N) before the first run, or alone with --dry-run: the rounds a side
// (roundsFrom says where they came from), the order and runs, what each
// primary row can reach, and one line per primary row that cannot be
// decided with the change that would decide it.
func writeABPlan(w io.Writer, cfg experiment.Config, aa int, roundsFrom string) error {
	p, err := experiment.NewPlan(cfg, aa)
	if err != nil {
		return withCode(exitUsage, err)
	}
	p.RoundsFrom = roundsFrom
	for _, l := range p.Lines() {
		fmt.Fprintln(w, l)
	}
	return nil
}
