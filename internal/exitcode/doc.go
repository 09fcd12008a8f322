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
// The codes and what each means are [Table], the one copy: the page
// docs/exit-codes.md is generated from it (`go run ./cmd/erplab gen-docs
// docs`) and a test in cmd/erplab fails when the page is stale.
package exitcode
