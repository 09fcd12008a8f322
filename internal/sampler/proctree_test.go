package sampler

import (
	"context"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// The noise figures split the host CPU: a CPU-bound query shows in the
// server's share, and a busy loop outside both the server and this
// process (a daemonised shell) shows as foreign load.
func TestNoiseSplit(t *testing.T) {
	s := newSampler(t, srv.DSN(t, "postgres"), Options{Host: HostOn})
	if s.tree == nil {
		t.Fatal("no process-tree reader for a local server")
	}
	if s.tree.postmaster != srv.Cluster(t).PID() {
		t.Fatalf("postmaster %d, want %d", s.tree.postmaster, srv.Cluster(t).PID())
	}
	if first := sample(t, s); first.Noise != nil {
		t.Fatalf("first sample has noise figures: %+v", first.Noise)
	}
	// Server CPU: one backend counting for a while.
	conn := connect(t, srv.DSN(t, "postgres"))
	if _, err := conn.Exec(context.Background(), `SELECT count(*) FROM generate_series(1, 20000000)`); err != nil {
		t.Fatal(err)
	}
	n := sample(t, s).Noise
	if n == nil || n.ServerUser+n.ServerSystem <= 0 || n.PostmasterPID != s.tree.postmaster {
		t.Fatalf("after a CPU-bound query: %+v", n)
	}
	if n.Foreign > n.HostBusy || n.ServerUser+n.ServerSystem > n.HostBusy+1 {
		t.Fatalf("shares do not add up: %+v", n)
	}
	// Foreign CPU: a loop that is neither ours nor the server's (the
	// outer shell exits, the loop is re-parented away from this process).
	if err := exec.Command("sh", "-c", `(end=$(( $(date +%s) + 2 )); while [ $(date +%s) -lt $end ]; do :; done) >/dev/null 2>&1 &`).Run(); err != nil {
		t.Fatal(err)
	}
	sample(t, s)
	time.Sleep(time.Second)
	n = sample(t, s).Noise
	if n == nil || n.Foreign < 20 || n.CPUs < 1 {
		t.Fatalf("with a busy loop beside: %+v, want foreign >= 20 %% of all CPUs", n)
	}
}

// Starvation: a CPU-bound query in a backend pinned to CPU 0 beside two
// busy loops pinned there too waits for the CPU, and the interval's
// server run delay (schedstat) shows it: at least a quarter of the time
// the server ran (a fair scheduler gives the backend a third of the CPU,
// so it waits about twice as long as it runs; with autogroup the two
// loops share one group's half, and it waits about as long as it runs).
// The generator's figures are this test process's threads.
func TestRunDelayUnderHog(t *testing.T) {
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("no taskset")
	}
	s := newSampler(t, srv.DSN(t, "postgres"), Options{Host: HostOn})
	if s.tree == nil {
		t.Fatal("no process-tree reader for a local server")
	}
	conn := connect(t, srv.DSN(t, "postgres"))
	var backend int
	if err := conn.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("taskset", "-p", "-c", "0", strconv.Itoa(backend)).CombinedOutput(); err != nil {
		t.Fatalf("taskset backend: %v: %s", err, out)
	}
	for range 2 {
		// a busy loop that ends by itself within a minute even if this
		// test dies first (taskset execs sh: Kill stops the loop itself)
		hog := exec.Command("taskset", "-c", "0", "sh", "-c",
			`end=$(( $(date +%s) + 60 )); while [ $(date +%s) -lt $end ]; do i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; done`)
		if err := hog.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = hog.Process.Kill(); _ = hog.Wait() })
	}
	sample(t, s)
	if _, err := conn.Exec(context.Background(), `SELECT count(*) FROM generate_series(1, 10000000)`); err != nil {
		t.Fatal(err)
	}
	n := sample(t, s).Noise
	if n == nil || n.Sched == nil {
		t.Fatalf("no schedstat figures: %+v", n)
	}
	sc := n.Sched
	t.Logf("interval: %+v", *sc)
	if sc.ServerRunMs <= 0 || sc.ServerDelayMs < sc.ServerRunMs/4 || sc.ErplabRunMs <= 0 {
		t.Fatalf("a backend beside two hogs on one CPU: %+v, want run delay >= a quarter of the run time", *sc)
	}
}
