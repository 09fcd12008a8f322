package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/leftover"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// embeddedShm is what the record says of a running embedded server's
// shared memory (the pgcluster entry's data: postmaster.pid line 7) and
// the /dev/shm/PostgreSQL.* files its postmaster maps.
type embeddedShm struct {
	Postmaster leftover.Process `json:"postmaster"`
	ShmKey     int64            `json:"shm_key"`
	ShmID      int              `json:"shm_id"`
	files      []string
}

// embeddedServer waits (60 s at most) until the record in state names a
// running server and returns its shared memory.
func embeddedServer(t *testing.T, state string) embeddedShm {
	t.Helper()
	rec, err := leftover.OpenDir(filepath.Join(state, "leftover"))
	if err != nil {
		t.Fatal(err)
	}
	var s embeddedShm
	running := func() bool {
		entries, _ := rec.Entries()
		for _, e := range entries {
			s = embeddedShm{}
			if e.Kind == "pgcluster" && json.Unmarshal(e.Data, &s) == nil && s.ShmID != 0 && s.Postmaster.Alive() {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(60 * time.Second); !running(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no running server in the record %s after 60 s", rec.Dir())
		}
	}
	p, err := procfs.NewProc(s.Postmaster.PID)
	if err != nil {
		t.Fatal(err)
	}
	maps, err := p.ProcMaps()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range maps {
		if strings.HasPrefix(m.Pathname, "/dev/shm/PostgreSQL.") && !slices.Contains(s.files, m.Pathname) {
			s.files = append(s.files, m.Pathname)
		}
	}
	return s
}

// segmentExists reports whether a System V segment has this id (IPC_STAT
// does not fail with EINVAL or EIDRM).
func segmentExists(id int) bool {
	var ds unix.SysvShmDesc
	_, err := unix.SysvShmCtl(id, unix.IPC_STAT, &ds)
	return !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EIDRM)
}

// kill -9 of the embedded server's postmaster during a run: the run ends
// (the server is gone), and erplab's stop of the server removes the
// System V segment and the /dev/shm segments the killed postmaster left,
// says so, and leaves nothing in the record for a later command.
func TestEmbeddedPostmasterKilled(t *testing.T) {
	pgtest.SkipShort(t)
	dir, tmp := embeddedTmp(t)
	state := filepath.Join(tmp, "state")
	cmd := erplab(t, dir, "run", "--workload", "smoke", "--scale", "0.1", "--duration", "60s", "--users", "4", "--think", "20ms",
		"--server-gone-after", "2s", "--progress", "1s", "--observe=false", "--out", filepath.Join(dir, "x.json"))
	cmd.Env = append(cmd.Env, "TMPDIR="+tmp, "ERPLAB_STATE_DIR="+state)
	buf, exited := startCmd(t, cmd)
	waitFor(t, buf, exited, " 1s/1m0s ")
	shm := embeddedServer(t, state)
	if len(shm.files) == 0 {
		t.Log("no /dev/shm segment mapped by the postmaster (dynamic_shared_memory_type sysv): checking the System V segment only")
	}
	if err := syscall.Kill(shm.Postmaster.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("erplab still runs 2 min after the postmaster was killed:\n%s", buf.String())
	}
	out := buf.String()
	want := fmt.Sprintf("removed shared memory segment key %#08x id %d", uint32(shm.ShmKey), shm.ShmID)
	if !strings.Contains(out, "warning: stopping the embedded server: ") || !strings.Contains(out, want) {
		t.Errorf("output does not say %q:\n%s", want, out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "stopping the embedded server") || strings.HasPrefix(l, "erplab: ") {
			t.Log(l)
		}
	}
	if segmentExists(shm.ShmID) {
		t.Errorf("System V segment key %#08x id %d still exists", uint32(shm.ShmKey), shm.ShmID)
	}
	for _, f := range shm.files {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s still exists", f)
		}
	}
	rec, err := leftover.OpenDir(filepath.Join(state, "leftover"))
	if err != nil {
		t.Fatal(err)
	}
	if entries, _ := rec.Entries(); len(entries) != 0 {
		t.Errorf("record entries left: %+v", entries)
	}
}
