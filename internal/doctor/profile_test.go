package doctor

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/profile"
	"github.com/erplab/erplab/internal/sampler"
)

// Under temp-table churn (CREATE TEMP TABLE, CREATE INDEX, DROP from three
// sessions) a real profile of the test server makes profile-file-system
// (on a disk file system) or profile-sinval fire, with the share as
// evidence.
func TestProfileChecksFireUnderChurn(t *testing.T) {
	pgtest.SkipShort(t)
	ctx := context.Background()
	pgtest.NeedPerf(t)
	dsn := newDatabase(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		conn := dial(t, dsn)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, errs[i] = churn(ctx, conn, 10, stop)
		}(i)
	}
	sess, err := profile.Begin(ctx, dsn, profile.Options{})
	if err != nil {
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	sum, _, err := sess.End(ctx)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rep := run(t, Options{DSN: dsn, Only: []string{"profile-file-system", "profile-sinval", "profile-catalog"}, Host: sampler.HostOff,
		Profile: ProfileFacts{Summary: sum}})
	fsf, sinval := find(t, rep, "profile-file-system"), find(t, rep, "profile-sinval")
	t.Logf("%d samples; %s: %s; %s: %s; catalog: %s", sum.Samples, fsf.Severity, fsf.Summary, sinval.Severity, sinval.Summary, find(t, rep, "profile-catalog").Summary)
	if fsf.Severity != Warning && sinval.Severity != Warning {
		t.Errorf("neither profile-file-system (%s, %.1f %%) nor profile-sinval (%s, %.1f %%) fired under temp-table churn",
			fsf.Severity, sum.Share(profile.SubFS), sinval.Severity, sum.Share(profile.SubSinval))
	}
	if fsf.Severity == Warning && (fsf.Metrics["file_system_share_pct"] < profile.AdviceFSPct || len(fsf.Fix) == 0) {
		t.Errorf("profile-file-system warning without its share or fix: %v %q", fsf.Metrics, fsf.Fix)
	}
	if len(fsf.Evidence) == 0 || fsf.Evidence[0].From != profFrom {
		t.Errorf("profile-file-system evidence %v", fsf.Evidence)
	}
}
