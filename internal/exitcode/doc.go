// Package exitcode is the one table of erplab's process exit codes and the
// way an error carries its code up to main (the pattern of k6's errext).
//
// The package that detects a condition attaches its code there, to the
// error it returns:
//
//	var ErrNotAnswering = exitcode.New(exitcode.ServerNotAnswering, "the server stopped answering")
//	return exitcode.With(exitcode.Usage, fmt.Errorf("--scale must be > 0, got %g", s))
//
// and main turns the error into the process status with [Of]; commands
// return such errors untouched. Errors without a code exit [Error]. The
// code travels through %w wrapping, so a later fmt.Errorf("run: %w", err)
// keeps it, and the first code wins: Of returns the innermost code in the
// chain, the one attached where the condition was known, whatever codes
// callers wrapped around it ([Override] aside).
//
// The codes and what each means are [Table], the one copy: the page
// docs/exit-codes.md is generated from it (`go run ./cmd/erplab gen-docs
// docs`) and a test in cmd/erplab fails when the page is stale.
package exitcode
