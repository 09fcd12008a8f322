package exitcode

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Interruption is the cause (context.Cause) of a context that a signal
// cancelled: main's handler of SIGINT, SIGTERM and SIGHUP cancels the
// command's context with it. Its message is "interrupted (SIGINT)"; its
// exit code is the shell's for a process the signal killed, 128 plus the
// signal's number (130, 143, 129), which `erplab pgbench` exits with as
// a drop-in for pgbench (other commands exit Interrupted whatever the
// signal).
type Interruption struct {
	Signal syscall.Signal
}

func (i *Interruption) Error() string {
	name := unix.SignalName(i.Signal)
	if name == "" {
		name = fmt.Sprintf("signal %d", int(i.Signal))
	}
	return "interrupted (" + name + ")"
}

// ExitCode is 128 plus the signal's number.
func (i *Interruption) ExitCode() Code { return Code(128 + int(i.Signal)) }

// InterruptionOf returns the Interruption that cancelled ctx, or nil
// when ctx is not cancelled or was cancelled for another cause.
func InterruptionOf(ctx context.Context) *Interruption {
	var i *Interruption
	if errors.As(context.Cause(ctx), &i) {
		return i
	}
	return nil
}
