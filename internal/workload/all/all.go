// Package all enables every built-in workload: importing it (blank) runs
// their init functions, which register them in package workload's
// registry. Commands import it; a new workload adds its line here.
package all

import (
	_ "github.com/erplab/erplab/internal/workload/erp"     // erp: the 1C-like ERP workload
	_ "github.com/erplab/erplab/internal/workload/pgbench" // pgbench: pgbench scripts
	_ "github.com/erplab/erplab/internal/workload/replay"  // replay: captured sessions replayed
	_ "github.com/erplab/erplab/internal/workload/smoke"   // smoke: the small built-in workload
)
