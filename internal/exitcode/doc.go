// Package exitcode is the one table of erplab's process exit codes and the
// way an error carries its code up to main (the pattern of k6's errext).
//
// A command that knows why it fails attaches the code where the cause is
// known:
//
//	return exitcode.With(exitcode.Usage, fmt.Errorf("--scale must be > 0, got %g", s))
//
// and main turns the error into the process status with [Of]. Errors
// without a code exit [Error]. The code travels through %w wrapping: Of
// finds it with errors.As on the [Coder] interface, so a later
// fmt.Errorf("run: %w", err) keeps it.
//
// Codes:
//
//	0   OK           success (also: doctor found nothing worse than info
//	                 and every check could run)
//	1   Error        runtime failure: server unreachable, file unreadable;
//	                 also pgbench's code for option errors in script mode
//	                 (erplab run -f ... with a bad pgbench option)
//	2   Usage        bad command line: unknown command or flag, bad flag
//	                 value, wrong number of arguments, options that do not
//	                 go together
//	2   ScriptRun    a pgbench script run during which clients hit errors
//	                 (pgbench exits 2 there); equal to Usage on purpose, so
//	                 that erplab run -f is a drop-in for pgbench in scripts
//	3   CheckFailed  erplab check: totals differ from their movements
//	4   DoctorWarning   erplab doctor: the worst finding is a warning
//	5   DoctorCritical  erplab doctor: the worst finding is critical
//	6   ResultsIncomplete  erplab run: a results file could not be
//	                 written (full disk); the summary was printed and one
//	                 line says where everything so far is (wins over 7);
//	                 erplab merge: segments missing, nothing written;
//	                 erplab doctor: nothing worse than info found but
//	                 checks could not run (the role lacks pg_monitor, a
//	                 query failed; 4 and 5 win over it)
//	7   ServerNotAnswering  erplab run: the server stopped answering, or
//	                 was lost (every operation failing: unreachable,
//	                 shutting down, not back from recovery), and had not
//	                 come back by the end of the run or for
//	                 --server-gone-after; results are written
//	99  Threshold    a threshold failed (--apdex-min, --fail-on-regression;
//	                 k6 exits 99 when a threshold fails)
//	130 Interrupted  stopped by SIGINT/SIGTERM/SIGHUP (the shell's 128+2);
//	                 results so far are written. erplab pgbench exits
//	                 128 + the signal (130, 143, 129; [Interruption]),
//	                 as pgbench killed by it.
//
// The README's "Exit codes" section repeats this table; [Table] returns it
// for tests and help text.
package exitcode
