// Command erplab load-tests and diagnoses PostgreSQL under ERP workloads.
// See README.md for the commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/erplab/erplab/internal/leftover"
	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// Exit codes. 99 for a failed threshold follows the load-tool convention
// (k6 exits 99 when a threshold fails); 130 is the shell's code for SIGINT.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitThreshold   = 99
	exitInterrupted = 130
)

// exitError carries an exit code through cobra.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

func withCode(code int, err error) error { return &codedError{code: code, err: err} }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "erplab",
		Short:         "Load-test and diagnose PostgreSQL under ERP workloads",
		Long:          "erplab load-tests PostgreSQL with ERP-like workloads (virtual users, key operations, APDEX),\nobserves it and diagnoses it. With no --dsn it starts a throwaway PostgreSQL of its own.",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Undo what killed erplab commands left behind (internal/leftover:
		// throwaway servers today); one line on stderr when it did anything.
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			if _, err := leftover.Sweep(cmd.Context(), cmd.ErrOrStderr()); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v\n", err)
			}
		},
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return withCode(exitUsage, fmt.Errorf("%w (see '%s --help')", err, c.CommandPath()))
	})
	root.AddCommand(newVersionCmd(), newRunCmd(), newInitCmd(), newCheckCmd(), newTopCmd(), newStressCmd(), newDiskCmd(), newRewriteCmd(), newProxyCmd(), newDoctorCmd(), newCompareCmd(), newReportCmd(), newABCmd(), newVsPgbenchCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print erplab's version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "erplab %s\n", version)
		},
	}
}

func main() {
	// A lost terminal (SIGHUP) ends a run like Ctrl-C: results written,
	// throwaway server removed. A closed stdout pipe (erplab run | head)
	// must not kill the process before it cleans up: with SIGPIPE
	// ignored, writes fail with EPIPE instead.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	os.Exit(execute(ctx, os.Args[1:]))
}

func execute(ctx context.Context, args []string) int {
	root := newRoot()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(os.Stderr, "erplab: %v\n", err)
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	if isUsageError(err) {
		return exitUsage
	}
	return exitError
}

// isUsageError recognises cobra's own argument errors, which carry no code.
func isUsageError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "invalid argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
