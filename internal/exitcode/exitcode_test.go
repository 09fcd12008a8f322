package exitcode

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
)

func TestOf(t *testing.T) {
	base := errors.New("boom")
	sentinel := New(ServerNotAnswering, "the server stopped answering")
	for _, c := range []struct {
		name string
		err  error
		want Code
	}{
		{"nil", nil, OK},
		{"plain", base, Error},
		{"coded", With(Usage, base), Usage},
		{"wrapped after coding", fmt.Errorf("run: %w", With(Threshold, base)), Threshold},
		{"first code wins", With(Interrupted, fmt.Errorf("x: %w", With(Usage, base))), Usage},
		{"sentinel", fmt.Errorf("run: %w", sentinel), ServerNotAnswering},
		{"sentinel wins over a later code", With(Error, fmt.Errorf("run: %w", sentinel)), ServerNotAnswering},
		{"joined", errors.Join(base, With(CheckFailed, base)), CheckFailed},
		{"joined: first member with a code", errors.Join(base, With(Threshold, base), With(CheckFailed, base)), Threshold},
		{"two %w: first member with a code", fmt.Errorf("%w: %w: %w", base, sentinel, With(Usage, base)), ServerNotAnswering},
		{"innermost in the first member", errors.Join(With(Usage, fmt.Errorf("y: %w", sentinel)), With(Threshold, base)), ServerNotAnswering},
		{"override", Override(ScriptRun, fmt.Errorf("x: %w", sentinel)), ScriptRun},
		{"override wrapped", With(Threshold, fmt.Errorf("y: %w", Override(ScriptRun, sentinel))), ScriptRun},
	} {
		if got := Of(c.err); got != c.want {
			t.Errorf("%s: Of = %d, want %d", c.name, got, c.want)
		}
	}
}

// A sentinel made by New is found by errors.Is through wrapping and
// reads as its text; With and Override of nil are nil.
func TestNewSentinel(t *testing.T) {
	s := New(Interrupted, "interrupted before the load test started")
	other := New(Interrupted, "interrupted before the load test started")
	err := fmt.Errorf("capacity: %w", s)
	if !errors.Is(err, s) || errors.Is(err, other) || s.Error() != "interrupted before the load test started" {
		t.Errorf("New: errors.Is or the text is wrong: %v", err)
	}
	if Override(Usage, nil) != nil {
		t.Error("Override(code, nil) is not nil")
	}
	if !errors.Is(Override(ScriptRun, err), s) {
		t.Error("Override hides the chain")
	}
}

func TestWithKeepsChain(t *testing.T) {
	err := With(Interrupted, fmt.Errorf("stop: %w", context.Canceled))
	if !errors.Is(err, context.Canceled) || err.Error() != "stop: context canceled" {
		t.Errorf("With hides the chain or changes the message: %v", err)
	}
	if With(Usage, nil) != nil {
		t.Error("With(code, nil) is not nil")
	}
}

// A child process's exit status (exec.ExitError has ExitCode() int) must
// not become erplab's: only Coder values carry a code.
func TestChildExitStatusIsNotACode(t *testing.T) {
	err := exec.Command("sh", "-c", "exit 7").Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("sh exit 7: %v", err)
	}
	if got := Of(fmt.Errorf("pgbench: %w", err)); got != Error {
		t.Errorf("Of(child exit 7) = %d, want %d", got, Error)
	}
}

func TestTable(t *testing.T) {
	seen := map[string]bool{}
	prev := Code(-1)
	for _, e := range Table() {
		if e.Code < prev || e.Meaning == "" || seen[e.Name] {
			t.Errorf("table row %+v: out of order, empty or repeated", e)
		}
		seen[e.Name] = true
		prev = e.Code
	}
	if len(seen) != 13 || ScriptRun != Usage {
		t.Errorf("table has %d rows (want 13), ScriptRun %d Usage %d", len(seen), ScriptRun, Usage)
	}
}

func TestInterruption(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	if InterruptionOf(ctx) != nil {
		t.Fatal("an uncancelled context has an interruption")
	}
	cancel(&Interruption{Signal: syscall.SIGTERM})
	i := InterruptionOf(ctx)
	if i == nil || i.Error() != "interrupted (SIGTERM)" || i.ExitCode() != 143 || Of(i) != 143 {
		t.Fatalf("%v", i)
	}
	if h := (&Interruption{Signal: syscall.SIGHUP}); h.ExitCode() != 129 || h.Error() != "interrupted (SIGHUP)" {
		t.Fatalf("%v %d", h, h.ExitCode())
	}
	other, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if InterruptionOf(other) != nil {
		t.Fatal("a plain cancel is an interruption")
	}
}
