package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/leftover"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// serverShm is what a running cluster holds in shared memory, found
// without this package's reaper: the System V segment postmaster.pid
// names (through the record entry, which copies line 7) and the
// /dev/shm/PostgreSQL.* files its processes map.
type serverShm struct {
	info  reapInfo
	files []string
}

// shmOf returns c's shared memory; with dynamic_shared_memory_type posix
// at least the control segment, mapped by the postmaster, is in files.
func shmOf(t *testing.T, c *Cluster) serverShm {
	t.Helper()
	_, info := entryFor(t, c.Dir())
	lines := pidFileLines(c.DataDir())
	if len(lines) < 7 || strings.Fields(lines[6])[1] != fmt.Sprint(info.ShmID) || info.ShmID == 0 {
		t.Fatalf("record entry shm id %d, postmaster.pid line 7 %q", info.ShmID, lines)
	}
	if segmentGone(info.ShmID) {
		t.Fatalf("segment id %d of a running server does not exist", info.ShmID)
	}
	s := serverShm{info: info}
	for _, pid := range append([]int{c.PID()}, childPIDs(c.PID())...) {
		p, err := procfs.NewProc(pid)
		if err != nil {
			continue
		}
		maps, _ := p.ProcMaps()
		for _, m := range maps {
			if strings.HasPrefix(m.Pathname, "/dev/shm/PostgreSQL.") && !slices.Contains(s.files, m.Pathname) {
				s.files = append(s.files, m.Pathname)
			}
		}
	}
	if info.DSM == "posix" && len(s.files) == 0 {
		t.Fatal("no /dev/shm/PostgreSQL.* mapped by the server with dynamic_shared_memory_type posix")
	}
	return s
}

// segmentGone reports whether no System V segment has this id (IPC_STAT
// fails with EINVAL, or EIDRM while being removed).
func segmentGone(id int) bool {
	var ds unix.SysvShmDesc
	_, err := unix.SysvShmCtl(id, unix.IPC_STAT, &ds)
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EIDRM)
}

// check fails the test for every part of s still there.
func (s serverShm) check(t *testing.T, when string) {
	t.Helper()
	if !segmentGone(s.info.ShmID) {
		t.Errorf("%s: System V segment key %#08x id %d still exists", when, uint32(s.info.ShmKey), s.info.ShmID)
	}
	for _, f := range s.files {
		if exists(f) {
			t.Errorf("%s: %s still exists", when, f)
		}
	}
}

// removedLine is how the clean-up names the System V segment.
func (s serverShm) removedLine() string {
	return fmt.Sprintf("removed shared memory segment key %#08x id %d", uint32(s.info.ShmKey), s.info.ShmID)
}

// busyServer opens a session on c running a parallel query (a Gather
// over pg_sleep, force_parallel_mode) that maps a dynamic shared memory
// segment of its own, and returns once the parallel worker runs.
func busyServer(t *testing.T, c *Cluster) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, "SET force_parallel_mode = on"); err != nil {
		t.Fatal(err)
	}
	go conn.Exec(ctx, "SELECT pg_sleep(600)") //nolint:errcheck // ends with the server
	probe, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close(ctx)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var n int
		if err := probe.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no parallel worker 60 s after the query began")
		}
	}
}

// A postmaster killed with -9 under a live erplab (an OOM kill, a user)
// leaves its System V segment and its /dev/shm segments, and its backends
// running for a moment: Stop kills the backends, removes the segments
// and says so, and the record entry goes.
func TestStopRemovesShmOfKilledPostmaster(t *testing.T) {
	skipShort(t)
	c := start(t, startOpts())
	busyServer(t, c)
	shm := shmOf(t, c)
	if err := syscall.Kill(c.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !c.hasExited(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("postmaster not reaped 30 s after SIGKILL")
		}
	}
	if segmentGone(shm.info.ShmID) {
		t.Fatal("kill -9 of the postmaster removed its segment: nothing to test")
	}
	err := c.Stop()
	if err == nil || !strings.Contains(err.Error(), shm.removedLine()) || !strings.Contains(err.Error(), "exited without removing its shared memory (signal: killed)") {
		t.Fatalf("Stop after kill -9 of the postmaster: %v; want %q", err, shm.removedLine())
	}
	t.Log(err)
	shm.check(t, "after Stop")
	if exists(c.Dir()) {
		t.Errorf("%s still exists", c.Dir())
	}
	rec, err := leftover.Open()
	if err != nil {
		t.Fatal(err)
	}
	if entries, _ := rec.Entries(); slices.ContainsFunc(entries, func(e leftover.Entry) bool { return e.Path == c.Dir() }) {
		t.Errorf("the record still names %s", c.Dir())
	}
}
