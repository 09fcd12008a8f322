// Command erplab load-tests and diagnoses PostgreSQL under ERP workloads.
// See README.md and docs/commands/ for the commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/erplab/erplab/internal/leftover"
	"github.com/spf13/cobra"

	"github.com/erplab/erplab/internal/exitcode"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// Exit codes, by the one table in internal/exitcode (docs/exit-codes.md
// is generated from it). The cmd files use these short names.
const (
	exitOK             = int(exitcode.OK)
	exitError          = int(exitcode.Error)
	exitUsage          = int(exitcode.Usage)
	exitCheckFailed    = int(exitcode.CheckFailed)
	exitDoctorWarning  = int(exitcode.DoctorWarning)
	exitDoctorCritical = int(exitcode.DoctorCritical)
	exitResults        = int(exitcode.ResultsIncomplete)
	exitNotAnswering   = int(exitcode.ServerNotAnswering)
	exitRunFailed      = int(exitcode.RunFailed)
	exitCollapse       = int(exitcode.Collapse)
	exitThreshold      = int(exitcode.Threshold)
	exitInterrupted    = int(exitcode.Interrupted)
)

// errSilent marks an error the command has already reported (erplab
// pgbench prints pgbench's own lines): execute prints nothing more.
var errSilent = errors.New("reported")

// withCode attaches an exit code to err (exitcode.With).
func withCode(code int, err error) error { return exitcode.With(exitcode.Code(code), err) }

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
	// Flag errors (unknown flag, bad value): cobra asks a command's own
	// FlagErrorFunc and else its parents', so this one covers every
	// command that sets none of its own (run sets one for script mode).
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return withCode(exitUsage, fmt.Errorf("%w (see '%s --help')", err, c.CommandPath()))
	})
	root.AddCommand(newVersionCmd(), newRunCmd(), newInitCmd(), newCheckCmd(), newTopCmd(), newStressCmd(), newDiskCmd(), newRewriteCmd(), newProxyCmd(), newDoctorCmd(), newCompareCmd(), newReportCmd(), newABCmd(), newCapacityCmd(), newVsPgbenchCmd(), newProfileCmd(), newPgbenchCmd(), newMergeCmd(), newK8sCmd(), withReplayBench(newReplayCmd()), newGenDocsCmd())
	usageCodedArgs(root)
	guardSplitDSN(root)
	return root
}

// usageCodedArgs wraps the Args validator of c and every command below it
// so that an argument-count error carries exitUsage.
func usageCodedArgs(c *cobra.Command) {
	if v := c.Args; v != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			err := v(cmd, args)
			var coded exitcode.Coder
			if err == nil || errors.As(err, &coded) {
				return err // nil, or coded by the validator itself
			}
			return withCode(exitUsage, err)
		}
	}
	for _, sub := range c.Commands() {
		usageCodedArgs(sub)
	}
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
	// throwaway server removed (not a soak's: ignoreHangup). A closed stdout pipe (erplab run | head)
	// must not kill the process before it cleans up: with SIGPIPE
	// ignored, writes fail with EPIPE instead.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := interruptContext()
	defer stop()
	os.Exit(execute(ctx, os.Args[1:]))
}

// duplicateSignal is how soon after the first a signal counts as the same
// one delivered twice: timeout(1) signals its child and then its own
// process group, which holds the child, microseconds apart; no person
// presses Ctrl-C twice within it.
const duplicateSignal = 50 * time.Millisecond

// interruptContext is cancelled by the first SIGINT, SIGTERM or SIGHUP,
// with an *exitcode.Interruption naming it as the cause: the command
// stops, writes what it has and cleans up. Signals within
// duplicateSignal of the first count as that one. A later one exits
// at once with exitInterrupted, whatever the clean-up is waiting for (a
// throwaway server dies with erplab and the next command removes its
// directory; the results stream holds every completed interval).
//
// A signal the process started with ignored stays ignored (nohup
// ignores SIGHUP; a non-interactive shell starts background jobs with
// SIGINT ignored): signal.Notify would install a handler for it.
//
// A command may take the second signal instead (onSecondSignal): it is
// then handed to the command, and only a third exits at once.
func interruptContext() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	second := &secondSignal{}
	ctx = context.WithValue(ctx, secondSignalKey{}, second)
	hup := &hangup{}
	ctx = context.WithValue(ctx, hangupKey{}, hup)
	sigs := make(chan os.Signal, 2)
	var watched []os.Signal
	for _, s := range []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP} {
		if !signal.Ignored(s) {
			watched = append(watched, s)
		}
	}
	if len(watched) > 0 { // Notify of no signal would relay every signal
		signal.Notify(sigs, watched...)
	}
	done := make(chan struct{})
	go func() {
		var first time.Time
	wait:
		for {
			select {
			case s := <-sigs:
				if s == syscall.SIGHUP && hup.ignored.Load() {
					continue // a soak outlives its terminal
				}
				first = time.Now()
				sig, _ := s.(syscall.Signal)
				cancel(&exitcode.Interruption{Signal: sig})
				break wait
			case <-done:
				return
			}
		}
		for {
			select {
			case s := <-sigs:
				if s == syscall.SIGHUP && hup.ignored.Load() {
					continue
				}
				if time.Since(first) < duplicateSignal {
					continue // the same signal delivered twice (timeout(1): to the child, then to its group)
				}
				if fn := second.take(); fn != nil {
					fn(s)
					continue
				}
				fmt.Fprintf(os.Stderr, "\nerplab: second %v: exiting at once, without cleaning up\n", s)
				os.Exit(exitInterrupted)
			case <-done:
				return
			}
		}
	}()
	return ctx, func() { signal.Stop(sigs); close(done); cancel(nil) }
}

// secondSignal holds the handler a command gave for the second
// interrupting signal (onSecondSignal).
type secondSignal struct {
	mu sync.Mutex
	fn func(os.Signal)
}

type secondSignalKey struct{}

// take returns the handler and forgets it (a further signal exits).
func (h *secondSignal) take() func(os.Signal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fn := h.fn
	h.fn = nil
	return fn
}

// hangup says whether SIGHUP is ignored (ignoreHangup).
type hangup struct{ ignored atomic.Bool }

type hangupKey struct{}

// ignoreHangup makes main's handler ignore SIGHUP from now on (run
// --soak: a lost terminal does not stop a soak); SIGINT and SIGTERM stop
// it as before. The signal stays caught, not set to SIG_IGN, so the
// processes erplab starts do not inherit it ignored. It does nothing when
// ctx is not interruptContext's.
func ignoreHangup(ctx context.Context) {
	if h, _ := ctx.Value(hangupKey{}).(*hangup); h != nil {
		h.ignored.Store(true)
	}
}

// onSecondSignal makes main hand the second SIGINT, SIGTERM or SIGHUP to
// fn (called on main's signal goroutine: it must not block) instead of
// exiting at once; a third still exits at once. stop withdraws fn. It
// does nothing when ctx is not interruptContext's.
func onSecondSignal(ctx context.Context, fn func(os.Signal)) (stop func()) {
	h, _ := ctx.Value(secondSignalKey{}).(*secondSignal)
	if h == nil {
		return func() {}
	}
	h.mu.Lock()
	h.fn = fn
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		h.fn = nil
		h.mu.Unlock()
	}
}

// execute runs the command line args and returns the process exit code,
// printing the error (one line "erplab: ...") to stderr.
func execute(ctx context.Context, args []string) int {
	root := newRoot()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil && unknownCommand(root, args) {
		// cobra's Find fails only for a word naming no subcommand.
		err = withCode(exitUsage, err)
	}
	if err == nil {
		return exitOK
	}
	if ctx.Err() != nil && exitcode.Of(err) == exitcode.Error {
		// Interrupted (Ctrl-C, SIGTERM, SIGHUP) whatever the command was
		// doing when the signal came (connecting, setting up, cleaning
		// up): a plain failure then is the interruption's consequence.
		err = withCode(exitInterrupted, err)
	}
	if !errors.Is(err, errSilent) {
		fmt.Fprintf(os.Stderr, "erplab: %v\n", err)
	}
	return int(exitcode.Of(err))
}

// unknownCommand reports whether args name no command: cobra's Find (the
// lookup ExecuteContext itself makes) fails for them.
func unknownCommand(root *cobra.Command, args []string) bool {
	_, _, err := root.Find(args)
	return err != nil
}
