// Package workload defines what a load-test workload gives the engine: its
// schema set-up, its key operations with APDEX targets and priorities, the
// roles of the virtual users that mix those operations, and a function that
// executes one operation on one database connection.
//
// A workload is stateless between calls except for what it keeps in the
// database; per-virtual-user state (random source, identity) is in [VU].
//
// # Registry
//
// Every workload package registers a [Meta] from its init function
// (Register); package internal/workload/all imports them all, and the
// commands import it. A command finds a workload by its --workload name
// (Lookup, Find), lists them (Names, All, Help) and builds one with
// [Build], which takes the workload's own options as flag values by name:
//
//	w, err := workload.Build("erp", map[string]string{"temp-style": "lsfusion"})
//
// A workload's own options are pflag flags it declares itself: Meta.Flags
// for `erplab run` and `erplab ab` (erp's --temp-style and --separator),
// Meta.InitFlags for `erplab init` (erp's --separator, pgbench's
// --partitions, --fillfactor and the others). The CLI declares every
// workload's flags on its command before parsing (AddFlags, AddInitFlags),
// and after parsing hands the ones given to Build (Meta.Values). Meta.New
// reads them from a flag set of the workload's own, so the command line and
// a remedy that overrides one option build the workload the same way.
// Meta.DefaultScale and Meta.MaxScale are the --scale default and bound.
//
// What only some workloads have is an optional interface of the built
// [Workload]: [Initializer] (data set-up of `erplab init`), [Dropper]
// (`init --drop`), [Checker] (`erplab check`), [Describer] and
// [Reporter] (what a run records and prints after its summary).
//
// # The --force guard
//
// A workload that writes refuses, unless --force (SetupOptions.Force,
// InitOptions.Force), a database holding objects erplab did not create:
// [ForeignObjects] is the one catalog query every workload uses (smoke,
// erp, pgbench's init and run, `init --drop`). It counts pg_class
// relations of kinds r, p, v, m, f, S (sequences not owned by a column)
// and c, user types (not row types, arrays or automatic multiranges) and
// routines, in every schema except pg_catalog, information_schema,
// pg_toast*, pg_temp_* and erplab's erplab_*, leaving out extension
// members (pg_depend deptype 'e'), relations carrying a COMMENT that
// starts with [CreatedComment] (erp's tables and marker, the pgbench
// tables erplab creates) and partitions of one, and the relations the
// caller proves are its own (the ERP marker's tables; any pgbench tables
// for a run). [ForeignError] is the
// refusal, wrapping [ErrForeignDatabase]. [ForeignTables] is that list
// less the tables the ERP data set's marker ([MarkerTable]) names, the
// start of erp's guard and of pgbench's tables' guard.
//
// # Shared between plugins
//
// What two plugins need is here, so that no plugin imports another
// (internal/archtest): [ForeignTables] and the temp-table styles
// [TempStyle1C] and [TempStyleLsFusion] of erp's --temp-style, which the
// remedy temp-style sets. A workload whose code serves more than the
// registry (a command of its own) lives outside workload/ with a thin
// registering package here: internal/pgbench (with `erplab pgbench`) and
// internal/erp (with `erplab disk --macro`), registered by
// internal/workload/pgbench and internal/workload/erp.
//
// Adding a workload: a package under internal/workload with a type
// implementing [Workload] (and the optional interfaces it has), an init
// function calling Register, and a blank import in internal/workload/all.
// The registry test registers a tiny workload of its own the same way.
package workload
