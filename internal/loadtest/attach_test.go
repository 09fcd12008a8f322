package loadtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/stress"
)

// An attachment that fails to start (stress workers that cannot read
// /proc) ends the run with its error, and the attachments started before
// it are stopped: the samplers' connection closes and no progress line
// follows Run's return.
func TestAttachmentStartFailureStopsTheOthers(t *testing.T) {
	dsn := srv.NewDatabase(t)
	opts := smokeOptions(t, dsn, 4*time.Second)
	opts.Progress = 50 * time.Millisecond
	opts.Stress = &stress.Spec{CPU: 1, ProcRoot: t.TempDir()}
	out := &lineWatcher{want: "erplab run: ", hit: make(chan struct{})} // a buffer safe for the run's goroutines
	_, err := loadtest.Run(context.Background(), opts, out)
	if err == nil || !strings.Contains(err.Error(), "stress") {
		t.Fatalf("err = %v, want the stress workers' failure\n%s", err, out.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for n := -1; n != 0; {
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
			t.Fatalf("%d sessions of the run still on the database a minute after it returned (%v)", n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	before := out.String()
	time.Sleep(20 * opts.Progress) // a progress goroutine left behind would print meanwhile
	if after := out.String(); after != before {
		t.Fatalf("output after Run returned:\n%s", strings.TrimPrefix(after, before))
	}
}
