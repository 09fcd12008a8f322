package sampler

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/storm"
)

var recordRelative = flag.String("record-relative", "", "TestRelativeStormReal: write the recorded series to this directory (internal/storm/testdata)")

// TestRelativeStormReal is the relative storm rule on a real server, as
// run and doctor see it (a Session with the default rule): sessions that
// pile up on one advisory lock, fewer than the crowd rule's 4 per CPU,
// while the server's CPU stays flat, fire a "relative" storm named
// Lock:advisory; the same number of sessions joining a CPU-bound load
// (sequential scans of a cached table) does not.
func TestRelativeStormReal(t *testing.T) {
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	admin := connect(t, dsn)
	if _, err := admin.Exec(ctx, `CREATE TABLE acc (aid int PRIMARY KEY, abalance int NOT NULL, filler char(84));
		INSERT INTO acc SELECT g, 0, '' FROM generate_series(1, 100000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "VACUUM ANALYZE acc"); err != nil {
		t.Fatal(err)
	}
	const lockSQL, selectSQL = "SELECT pg_advisory_lock(7)", "SELECT count(*) FROM acc WHERE abalance >= 0"

	storms, series, n := relativePhase(t, dsn, admin, lockSQL)
	relative := 0
	for _, e := range storms {
		t.Logf("lock pile-up: storm at %.1f s: %s", e.T, e.Message)
		if e.Rule == "relative" {
			relative++
			if e.WaitEvent != "Lock:advisory" || e.To < n-1 || !(e.ServerCPUTo < 0.5) {
				t.Errorf("relative storm %+v, want Lock:advisory, %d active, the server's CPU flat", e, n)
			}
		}
	}
	if relative != 1 {
		t.Errorf("%d relative storms on %d sessions piling up on a lock, want 1", relative, n)
	}
	writeRelative(t, "storm-lock.json", series)

	storms, series, _ = relativePhase(t, dsn, admin, selectSQL)
	for _, e := range storms {
		if e.Rule == "relative" {
			t.Errorf("relative storm on a CPU-bound rise: %s", e.Message)
		}
	}
	writeRelative(t, "cpu-rise.json", series)
}

// relativePhase samples the server every 250 ms as run does, and once
// the baseline has 8 samples starts max(RelMinActive, CPUs)+1 sessions
// running sql in a loop (a CPU-bound load: one of them runs from the
// start) or once (the advisory lock, held by admin meanwhile). It stops at
// the first storm or 40 samples later and returns the storms, the series
// and the number of sessions.
func relativePhase(t *testing.T, dsn string, admin *pgx.Conn, sql string) ([]storm.Event, []Sample, int) {
	lock := sql == "SELECT pg_advisory_lock(7)"
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	ss, err := Start(ctx, dsn, time.Now(), SessionOptions{Interval: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Stop()
	cpus := ss.Snapshot().StormRule.CPUs
	if cpus == 0 {
		t.Skip("host not sampled: the server's CPU is unknown")
	}
	n := max(storm.DefaultRule().RelMinActive, cpus) + 1
	conns := make([]*pgx.Conn, n)
	for i := range conns {
		conns[i] = connect(t, dsn)
	}
	if lock {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
		defer admin.Exec(context.Background(), "SELECT pg_advisory_unlock_all()")
	}
	run := func(c *pgx.Conn) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := c.Exec(ctx, sql); err != nil || lock {
					return
				}
			}
		}()
	}
	first := 0
	if !lock {
		run(conns[0])
		first = 1
	}
	points := func() int { return len(ss.Snapshot().Series) }
	waitFor := func(what string, cond func() bool) {
		for deadline := time.Now().Add(2 * time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 2 minutes", what)
			}
		}
	}
	base := points() + 8
	waitFor("8 baseline samples", func() bool { return points() >= base })
	for _, c := range conns[first:] {
		run(c)
	}
	waitFor("a storm or 40 samples", func() bool { return len(ss.Storms()) > 0 || points() >= base+40 })
	ss.Stop()
	cancel()
	wg.Wait()
	return ss.Storms(), ss.Snapshot().Series, n
}

// writeRelative writes series, trimmed to what the storm rules read, to
// the -record-relative directory as a recorded series of package storm.
func writeRelative(t *testing.T, name string, series []Sample) {
	if *recordRelative == "" {
		return
	}
	type host struct {
		CPU struct {
			Busy float64 `json:"busy_pct"`
		} `json:"cpu"`
	}
	type noise struct {
		User   float64 `json:"server_user_pct"`
		System float64 `json:"server_system_pct"`
		CPUs   int     `json:"cpus"`
	}
	type point struct {
		T        float64 `json:"t"`
		Dt       float64 `json:"dt_s,omitempty"`
		Sessions struct {
			Active int `json:"active"`
		} `json:"sessions"`
		Waits map[string]int `json:"waits,omitempty"`
		Host  *host          `json:"host,omitempty"`
		Noise *noise         `json:"noise,omitempty"`
	}
	out := struct {
		Source string  `json:"source"`
		Series []point `json:"series"`
	}{Source: "internal/sampler TestRelativeStormReal -record-relative, " + time.Now().UTC().Format("2006-01-02")}
	for _, s := range series {
		p := point{T: s.T, Dt: s.Elapsed, Waits: s.Waits}
		p.Sessions.Active = s.Sessions.Active
		if s.Host != nil {
			p.Host = &host{}
			p.Host.CPU.Busy = s.Host.CPU.Busy
		}
		if s.Noise != nil {
			p.Noise = &noise{User: s.Noise.ServerUser, System: s.Noise.ServerSystem, CPUs: s.Noise.CPUs}
		}
		out.Series = append(out.Series, p)
	}
	// One point per line, for diffs.
	var b bytes.Buffer
	src, _ := json.Marshal(out.Source)
	fmt.Fprintf(&b, "{\"source\": %s,\n \"series\": [\n", src)
	for i, p := range out.Series {
		line, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		sep := ",\n"
		if i == len(out.Series)-1 {
			sep = "\n"
		}
		fmt.Fprintf(&b, "  %s%s", line, sep)
	}
	b.WriteString("]}\n")
	if err := os.WriteFile(filepath.Join(*recordRelative, name), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
