package profile_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/leftover"
	"github.com/erplab/erplab/internal/opmap"
	"github.com/erplab/erplab/internal/profile"
)

// needProbes skips, in one line, where uprobes cannot be added.
func needProbes(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: adding uprobes needs root")
	}
	perf, _, err := profile.Check(context.Background(), profile.Host{})
	if err != nil {
		t.Skipf("no perf: %v", err)
	}
	return perf
}

// probesListed tells whether perf lists a probe of group.
func probesListed(t *testing.T, perf, group string) bool {
	t.Helper()
	out, err := exec.Command(perf, "probe", "-l").CombinedOutput()
	if err != nil {
		t.Fatalf("perf probe -l: %v: %s", err, out)
	}
	return strings.Contains(string(out), group+":")
}

// TestInvalidationForcedReset forces a catalog cache reset: backend A
// waits on a lock (it cannot process catch-up interrupts) while B
// creates and drops temp tables in 1500 transactions, far more
// invalidation messages than the queue's 4096; A's next statement
// resets its caches. The probes count the reset on A's pid and the
// messages inserted, attribute them to A's key operation, and are
// removed at the end.
func TestInvalidationForcedReset(t *testing.T) {
	perf := needProbes(t)
	dsn := srv.DSN(t, "postgres")
	ctx := context.Background()
	t.Setenv(leftover.EnvStateDir, privateDir(t))
	clock, err := profile.NewClock()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := profile.BeginInval(ctx, dsn, profile.InvalOptions{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Abort()
	a, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	b, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	aPID := a.PgConn().PID()
	opm := opmap.New([]string{"waiter"})
	tl := opm.StartTimeline(clock.T0, 1000)
	if _, err := b.Exec(ctx, "SELECT pg_advisory_lock(4242)"); err != nil {
		t.Fatal(err)
	}
	opm.Begin(aPID, 0)
	locked := make(chan error, 1)
	go func() {
		_, err := a.Exec(ctx, "SELECT pg_advisory_lock(4242)")
		locked <- err
	}()
	waitFor(t, b, aPID, "Lock")
	if _, err := b.Exec(ctx, `DO $$ BEGIN FOR i IN 1..1500 LOOP
		CREATE TEMP TABLE erplab_inval_t(a int PRIMARY KEY); DROP TABLE erplab_inval_t; COMMIT; END LOOP; END $$`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Exec(ctx, "SELECT pg_advisory_unlock(4242)"); err != nil {
		t.Fatal(err)
	}
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec(ctx, "SELECT count(*) FROM pg_class"); err != nil {
		t.Fatal(err)
	}
	opm.End(aPID)
	ivs, _ := opm.StopTimeline(tl)
	// End flushes what perf still buffers (it delivers events in batches).
	s, err := rec.End(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec.Attribute(s, ivs, opm.Names())
	t.Log(s.Line())
	if s.Group == "" || probesListed(t, perf, s.Group) {
		t.Errorf("probes of group %q still listed after End", s.Group)
	}
	var aCounts *profile.BackendInval
	for i := range s.TopBackends {
		if s.TopBackends[i].PID == int(aPID) {
			aCounts = &s.TopBackends[i]
		}
	}
	if aCounts == nil || aCounts.Resets < 1 {
		t.Fatalf("backend A (%d) not reset: top backends %+v", aPID, s.TopBackends)
	}
	if s.Total.Resets < 1 || s.BackendsReset < 1 {
		t.Errorf("total %+v, backends reset %d", s.Total, s.BackendsReset)
	}
	if s.Total.Inserted < 4096 || s.Total.Cleanups < 1 {
		t.Errorf("inserted %d (want > the queue's 4096), clean-ups %d", s.Total.Inserted, s.Total.Cleanups)
	}
	if len(s.Operations) == 0 || s.Operations[0].Name != "waiter" || s.Operations[0].Resets < 1 {
		t.Errorf("operations %+v: want waiter's reset", s.Operations)
	}
	sum := int64(0)
	for _, x := range s.Series {
		sum += x.Inserted
	}
	if sum != s.Total.Inserted {
		t.Errorf("series sum %d, total %d", sum, s.Total.Inserted)
	}
}

// waitFor polls until pid waits on an event of type wtype.
func waitFor(t *testing.T, c *pgx.Conn, pid uint32, wtype string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var n int
		if err := c.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = $2", int(pid), wtype).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("backend %d never waited on %s", pid, wtype)
}

// TestProbesSweptAfterKill: the probes of a killed erplab (an entry
// whose owner is gone) are removed by the next command's sweep.
func TestProbesSweptAfterKill(t *testing.T) {
	perf := needProbes(t)
	c := srv.Cluster(t)
	fs, err := hostfacts.New(hostfacts.DefaultProcRoot, "")
	if err != nil {
		t.Fatal(err)
	}
	fsExe, err := fs.Executable(c.PID())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := leftover.OpenDir(privateDir(t))
	if err != nil {
		t.Fatal(err)
	}
	p, err := profile.AddProbes(context.Background(), perf, fsExe, false, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Remove(context.Background()) //nolint:errcheck
	if !probesListed(t, perf, p.Group()) {
		t.Fatalf("group %s not listed after AddProbes", p.Group())
	}
	// the owner dies: a pid that is no process
	es, err := rec.Entries()
	if err != nil || len(es) != 1 {
		t.Fatalf("entries %v, %v", es, err)
	}
	e := es[0]
	e.Owner = leftover.Process{PID: 1 << 30, Start: 1}
	if err := rec.Update(&e, nil); err != nil {
		t.Fatal(err)
	}
	rep := rec.Sweep(context.Background())
	if probesListed(t, perf, p.Group()) {
		t.Fatalf("group %s still listed after the sweep: %+v", p.Group(), rep)
	}
	if len(rep.Cleaned) != 1 || !strings.Contains(rep.Cleaned[0], "removed 5 uprobes") {
		t.Errorf("sweep report %+v", rep)
	}
	if err := p.Remove(context.Background()); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Remove after the sweep: %v", err)
	}
}

// privateDir is a new 0700 directory (the leftover record's rule).
func privateDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// Where the probes cannot run, BeginInval says why in one line: not
// root (checked as a non-root user would be), a server that is not a
// local process (an empty proc root).
func TestBeginInvalUnavailable(t *testing.T) {
	needProbes(t)
	dsn := srv.DSN(t, "postgres")
	ctx := context.Background()
	for _, c := range []struct {
		host profile.Host
		want string
	}{
		{profile.Host{Unprivileged: true, Proc: unprivilegedProc(t)}, "adding uprobes (perf probe) needs root"},
		{profile.Host{Proc: t.TempDir()}, "not a local process"},
	} {
		rec, err := profile.BeginInval(ctx, dsn, profile.InvalOptions{Host: c.host})
		var u *profile.Unavailable
		if rec != nil || !errors.As(err, &u) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v, want %q", c.host, err, c.want)
		}
		if rec != nil {
			rec.Abort()
		}
	}
}

// unprivilegedProc is a proc root whose perf_event_paranoid lets a
// non-root user sample (-1), so that only the uprobes' root rule refuses.
func unprivilegedProc(t *testing.T) string {
	t.Helper()
	proc := t.TempDir()
	if err := os.MkdirAll(proc+"/sys/kernel", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(proc+"/sys/kernel/perf_event_paranoid", []byte("-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return proc
}
