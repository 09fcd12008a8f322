package doctor

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// As a role without pg_monitor the doctor samples (the sampler read the
// superuser-only shared_preload_libraries and failed with 42501, so the
// sampled checks did not run), and the checks that would judge other
// roles' hidden sessions say they could not run, naming the GRANT; the
// report says how many checks did not run and why.
func TestWithoutMonitor(t *testing.T) {
	dsn := newDatabase(t)
	role, roleDSN := srv.NewRole(t, dsn)
	proc, sys := writeHost(t, healthyHost)
	rep := run(t, Options{DSN: roleDSN, Sample: time.Second, Windows: 1, Interval: 250 * time.Millisecond, ProcRoot: proc, SysRoot: sys})
	if rep.Server.Role != role || rep.Server.StatsPrivileged {
		t.Fatalf("server info %+v: want role %s without pg_read_all_stats", rep.Server, role)
	}
	grant := "GRANT pg_monitor TO " + role
	for _, id := range []string{"idle-in-transaction", "long-queries", "lwlock-waits"} {
		if f := find(t, rep, id); f.Severity != NotChecked || f.CouldNotRun != NeedsPrivilege || !strings.Contains(f.Needs, "pg_read_all_stats ("+grant+")") {
			t.Errorf("[%s] %s, could not run %q, needs %q: want not checked for the privilege, naming %q", id, f.Severity, f.CouldNotRun, f.Needs, grant)
		}
	}
	// The sample was taken: the sampled checks that need no privilege ran.
	for _, id := range []string{"catalog-churn", "thp-activity"} {
		if f := find(t, rep, id); f.Severity == NotChecked {
			t.Errorf("[%s] not checked: %s", id, f.Needs)
		}
	}
	if !rep.Incomplete() {
		t.Error("report not incomplete")
	}
	want := "idle-in-transaction, long-queries, lwlock-waits need privileges role " + role + " lacks (" + grant + ")"
	prefix := fmt.Sprintf("%d of %d checks did not run: ", rep.Count(NotChecked), len(rep.Findings))
	if nr := rep.NotRun(); !strings.HasPrefix(nr, prefix) || !strings.Contains(nr, want) || !strings.Contains(Text(rep), "\n  "+nr+"\n") {
		t.Errorf("not-run line %q: want %q and %q, in the text header:\n%s", nr, prefix, want, Text(rep))
	}
}
