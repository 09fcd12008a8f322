package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/exitcode"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
)

// TestKilledRunKeepsObservations: a run killed with SIGKILL during an
// advisory-lock pile-up (a second connection holds the lock every VU
// asks for) leaves a stream whose interval lines carry the observers'
// samples: doctor --results on it names Lock:advisory as the cause, and
// top --play replays the waiting sessions.
func TestKilledRunKeepsObservations(t *testing.T) {
	pgtest.SkipShort(t) // a run of ~20 s on the shared server
	dsn := srv.NewDatabase(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "adv.sql")
	if err := os.WriteFile(script, []byte("SELECT pg_advisory_xact_lock_shared(4343);\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	holder, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	stream := filepath.Join(dir, "x.jsonl")
	cmd := erplab(t, dir, "run", "--dsn", dsn, "-f", script, "--users", "8", "--think", "50ms", "--duration", "2m",
		"--probes=false", "--out", filepath.Join(dir, "x.json"))
	locked := 0 // the interval lines when the lock was taken
	killWhen(t, cmd, "8 intervals of pile-up in "+stream, 90*time.Second, 200*time.Millisecond, func() bool {
		n := intervalLines(stream)
		if locked == 0 && n >= 8 {
			if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(4343)"); err != nil {
				t.Fatal(err)
			}
			locked = n
		}
		return locked > 0 && n >= locked+8
	})

	doc, err := results.Read(stream)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := sampler.ObservationsOf(doc)
	if err != nil {
		t.Fatalf("the killed run's stream: %v", err)
	}
	if len(obs.Series) < 14 || obs.Server.Database == "" || obs.IntervalS != 1 {
		t.Fatalf("observations of the stream: %d samples, server %+v, interval %g s", len(obs.Series), obs.Server, obs.IntervalS)
	}
	at := fmt.Sprintf("%gs", math.Floor(obs.Series[len(obs.Series)-1].T))
	out, err := runRoot(t, "doctor", "--results", stream, "--at", at, "--window", "6s")
	if int(exitcode.Of(err)) != exitDoctorWarning || !strings.Contains(out, "\n  cause: in ") ||
		!strings.Contains(out, ": Lock:advisory ") || !strings.Contains(out, "(window-waits)") {
		t.Errorf("doctor --results %s --at %s: %v\n%s", stream, at, err, out)
	}
	out, err = runRoot(t, "top", "--play", stream, "--at", at)
	if err != nil || !strings.Contains(out, "Lock:advisory") || !strings.Contains(out, "replay +"+at) {
		t.Errorf("top --play %s --at %s: %v\n%s", stream, at, err, out)
	}
}
