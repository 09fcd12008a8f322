package main

import (
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/exitcode"
)

// TestDoctorResultsCommand: `doctor --results FILE --at T` on a recorded
// run with a lock pile-up names the cause without a server (exit 4, a
// warning); bad or misplaced flags are one-line usage errors.
func TestDoctorResultsCommand(t *testing.T) {
	const file = "../../internal/doctor/testdata/results/pileup.json"
	out, err := runRoot(t, "doctor", "--results", file, "--at", "50s", "--window", "15s")
	if int(exitcode.Of(err)) != exitDoctorWarning || !strings.Contains(out, "\n  cause: in 35s-50s: Lock:advisory 0.0 -> ") ||
		!strings.Contains(out, "[window-storms] Session storms in the window: in 35s-50s: Lock:advisory storm") {
		t.Errorf("at the turn: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--results", file}, "--results needs --at"},
		{[]string{"--results", file, "--at", "40s", "--window", "0s"}, "--window must be > 0, got 0s"},
		{[]string{"--results", file, "--at", "5m"}, `--at "5m" is after the run's end: the run goes from 13:37:17 to `},
		{[]string{"--results", file, "--at", "40s", "--dsn", "host=/x"}, "--dsn is for diagnosing a server, not with --results"},
		{[]string{"--dsn", "host=/x", "--at", "40s"}, "--at is for --results FILE"},
		{[]string{"--dsn", "host=/x", "--only", "window-waits"}, "--only names window-* checks only"},
	} {
		_, err := runRoot(t, append([]string{"doctor"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") || int(exitcode.Of(err)) != exitUsage {
			t.Errorf("%v: error %v (exit %d), want %q, exit %d", c.args, err, exitcode.Of(err), c.want, exitUsage)
		}
	}
}
