package sampler

import (
	"context"
	"os/exec"
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
