package hostfacts

import (
	"slices"
	"strings"
	"testing"
)

// The procs tree: its mount table, its two processes (a postmaster 4200
// and its backend 4242 with two threads), and errors naming what failed.
func TestProcsTree(t *testing.T) {
	f := open(t, "procs")
	mounts, err := f.Mounts()
	if err != nil || len(mounts) != 3 {
		t.Fatalf("Mounts: %d, %v", len(mounts), err)
	}
	if m := mounts[2]; m.MountPoint != "/var/lib/postgresql/15/main/pg_stat_tmp" || m.FSType != "tmpfs" || m.Source != "erplab-tmpfs" {
		t.Errorf("tmpfs mount: %+v", m)
	}
	procs, err := f.AllProcs()
	var pids []int
	for _, p := range procs {
		pids = append(pids, p.PID)
	}
	if err != nil || !slices.Equal(pids, []int{4200, 4242}) {
		t.Errorf("AllProcs: %v, %v", pids, err)
	}
	p, err := f.Proc(4242)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Stat(); err != nil || st.Comm != "postgres" || st.PPID != 4200 {
		t.Errorf("Proc(4242).Stat: %+v, %v", st, err)
	}
	threads, err := f.AllThreads(4242)
	var tids []int
	for _, th := range threads {
		tids = append(tids, th.PID)
	}
	slices.Sort(tids)
	if err != nil || !slices.Equal(tids, []int{4242, 4243}) {
		t.Errorf("AllThreads(4242): %v, %v", tids, err)
	}
	if _, err := f.Proc(4243); err == nil {
		t.Error("Proc of a pid not in the tree: no error")
	}
	g := open(t, "golden")
	if _, err := g.Mounts(); err == nil || !strings.Contains(err.Error(), "testdata/golden/proc/self/mountinfo") {
		t.Errorf("Mounts without a mountinfo: %v, want an error naming the file", err)
	}
}

// Memory reads VmHWM and RssAnon (KiB in the file) as bytes; a process
// without a status file is an error naming it.
func TestMemory(t *testing.T) {
	f := open(t, "procs")
	if m, err := f.Memory(4200); err != nil || m.Peak != 11264*1024 || m.Anon != 5120*1024 {
		t.Errorf("Memory(4200) = %+v, %v; want peak %d, anon %d", m, err, 11264*1024, 5120*1024)
	}
	if _, err := f.Memory(4242); err == nil || !strings.Contains(err.Error(), "4242/status") {
		t.Errorf("Memory(4242) without a status file: %v", err)
	}
}
