// Package remedy is the registry of remedies: named, reversible changes a
// run is made under (`erplab ab --variant NAME=remedy[,remedy...]`), such
// as a settings profile, a rewriting proxy in front of the server or temp
// tables on tmpfs. Each remedy is a package under internal/remedy that
// calls Register from its init; internal/remedy/all imports every one of
// them for their side effect, so a program that imports it knows them all.
//
// # Writing a remedy
//
// A remedy is a Kind: its Name (as written on the command line), Syntax
// and Doc for help texts, NeedsRoot, optional Params (command-line
// parameters of the remedy, such as tmpfs-size), Primary, Parse, Apply
// and Undo:
//
//   - Primary declares, before any run, the comparison rows that answer
//     whether the remedy worked ("integral:apdex",
//     "temp_table_storm:apdex"): `erplab ab` decides a variant's verdict
//     by Holm over its remedies' primary rows alone and prints the other
//     rows as exploratory (package compare, "Primary and exploratory
//     rows"). Empty means the integral APDEX.
//   - Parse checks the argument (the text after "name:") once, when the
//     command line is read, and returns a one-line error. A nil Parse
//     means the remedy takes no argument.
//   - Apply changes the Target and returns an Effect: Changed says what
//     it changed (it becomes the run's extra.remedies[i].changed, a JSON
//     object) and State is whatever Undo needs. When Apply fails it
//     leaves nothing behind. A remedy acts on the Target only: the run's
//     cluster and database, the DSN the run's connections use (a remedy
//     may replace it, e.g. by its proxy's address), the workload flag
//     values the run's workload is built from (a remedy may override
//     one, e.g. "temp-style") and its own parameters.
//   - Undo reverses Apply and may add to Changed what it learnt on the
//     way (counters, settings after a reset). A nil Undo means there is
//     nothing to reverse.
//   - Preflight, when set, checks before anything starts that this host
//     can take the remedy (thp: the kernel's transparent_hugepage/enabled
//     exists); CheckRunnable calls it.
//   - NeedsCold, when set, says why the remedy takes effect only in a
//     server started after its Apply (thp: the kernel applies a THP mode
//     to memory mapped after the change): it restarts the server itself,
//     and CheckCold refuses it unless every run starts after a restart
//     (ab --cold), so that the baseline starts alike.
//
// # Order and failures
//
// A caller (package experiment) applies a variant's remedies in the order
// they were given, builds the workload from Target.Flags, runs the load
// on Target.DSN and undoes the applied remedies in reverse order: after
// the run, or as soon as an Apply, the workload or the run fails, and
// also when the run is interrupted (undo runs on a context that is not
// cancelled). Apply of a remedy with NeedsRoot fails for a non-root
// process before it changes anything.
package remedy
