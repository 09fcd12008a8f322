package pgcluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A cluster whose owner died is shut down and removed; a live owner's and
// a kept one are left alone.
func TestReapOrphans(t *testing.T) {
	skipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	orphan, err := Start(ctx, Options{MaxConnections: 10, SharedBuffers: "16MB"})
	if err != nil {
		t.Fatal(err)
	}
	defer orphan.Stop()
	live, err := Start(ctx, Options{MaxConnections: 10, SharedBuffers: "16MB"})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Stop()
	// Pretend the orphan's owner died: a PID that has just exited.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(orphan.Dir(), ownerFile), []byte(strconv.Itoa(dead.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	pid := orphan.PID()
	removed, err := ReapOrphans()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range removed {
		if d == orphan.Dir() {
			found = true
		}
		if d == live.Dir() {
			t.Fatal("reaped the cluster of a live process")
		}
	}
	if !found {
		t.Fatalf("orphan %s not reaped (removed %v)", orphan.Dir(), removed)
	}
	if _, err := os.Stat(orphan.Dir()); !os.IsNotExist(err) {
		t.Fatal("orphan directory still there")
	}
	if alive(pid) {
		t.Fatalf("orphan postmaster %d still running", pid)
	}
	if _, err := os.Stat(live.Dir()); err != nil {
		t.Fatal("live cluster's directory removed")
	}
}

// Restart starts a new postmaster on the same data: data kept, PID new.
func TestRestart(t *testing.T) {
	skipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{MaxConnections: 10, SharedBuffers: "16MB"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if err := c.CreateDatabase(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	pid := c.PID()
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if c.PID() == pid || alive(pid) {
		t.Fatalf("old postmaster %d, new %d", pid, c.PID())
	}
	conn, err := pgx.Connect(ctx, c.DSN("kept"))
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	conn.Close(ctx)
	c.Stop()
	if err := c.Restart(ctx); err == nil {
		t.Fatal("restart after Stop succeeded")
	}
}
