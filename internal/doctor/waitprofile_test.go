package doctor

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/sampler"
)

// TestWaitProfileEvidence runs lwlock-waits on a database with
// pg_wait_sampling while one session waits on a heavyweight lock all
// along: the figures come from the profile (metric pg_wait_sampling,
// evidence source), which sees that session at about 1.0 mean; without
// the extension the check says where its waits come from instead.
func TestWaitProfileEvidence(t *testing.T) {
	srv.NeedWaitSampling(t)
	dsn := newDatabase(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plain := run(t, Options{DSN: dsn, Only: []string{"lwlock-waits"}, Sample: 400 * time.Millisecond, Windows: 2, Interval: 200 * time.Millisecond, Host: sampler.HostOff})
	if f := find(t, plain, "lwlock-waits"); f.Metrics["pg_wait_sampling"] != 0 || !strings.Contains(strings.Join(evTexts(f), "\n"), "pg_wait_sampling is not created in this database") {
		t.Errorf("without the extension: %v %v", f.Metrics, f.Evidence)
	}

	holder := dial(t, dsn)
	exec(t, holder, "CREATE EXTENSION pg_wait_sampling")
	exec(t, holder, "CREATE TABLE locked (i int)")
	exec(t, holder, "BEGIN")
	exec(t, holder, "LOCK TABLE locked IN ACCESS EXCLUSIVE MODE")
	waiter := dial(t, dsn)
	waiterPID := waiter.PgConn().PID()
	go waiter.Exec(ctx, "SELECT count(*) FROM locked") //nolint:errcheck // cancelled at the end
	// The sample starts once the waiter waits (a fixed pause was short of
	// it on a loaded machine: the profile then saw less than 0.5 mean).
	// (Not asked in the holder's transaction: pg_stat_activity is read
	// once per transaction.)
	probe := dial(t, dsn)
	waiting := false
	for deadline := time.Now().Add(20 * time.Second); !waiting && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := probe.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`, waiterPID).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if !waiting {
		t.Fatal("the waiter is not waiting for the lock after 20 s")
	}
	rep := run(t, Options{DSN: dsn, Only: []string{"lwlock-waits"}, Sample: 800 * time.Millisecond, Windows: 2, Interval: 200 * time.Millisecond, Host: sampler.HostOff})
	f := find(t, rep, "lwlock-waits")
	ev := strings.Join(evTexts(f), "\n")
	if f.Metrics["pg_wait_sampling"] != 1 || !strings.Contains(f.Evidence[0].From, "pg_wait_sampling_profile (sampled every 10 ms") {
		t.Fatalf("not from the profile: %v %+v", f.Metrics, f.Evidence)
	}
	if !regexp.MustCompile(`wait events \(mean sessions, pg_wait_sampling\): Lock:relation (0\.[5-9]\d|1\.[01]\d)`).MatchString(ev) {
		t.Errorf("evidence lacks the waiter at about 1.0 mean:\n%s", ev)
	}
	cancel()
}
