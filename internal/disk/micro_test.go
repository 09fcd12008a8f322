package disk

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testOptions keep each pattern to a fraction of a second.
func testOptions() Options {
	return Options{FileBytes: 8 << 20, Duration: 300 * time.Millisecond, QueueDepth: 4, ChurnFiles: 2000, Seed: 1}
}

// diskDir is a directory on the machine's disk (not tmpfs).
func diskDir(t *testing.T) string {
	t.Helper()
	for _, d := range []string{os.Getenv("ERPLAB_DISK_DIR"), "/var/tmp", os.TempDir()} {
		if d == "" {
			continue
		}
		if fs, _, err := Space(d); err == nil && fs != "tmpfs" {
			return d
		}
	}
	t.Skip("no disk-backed directory (all tmpfs)")
	return ""
}

// TestMicroOrdering measures the disk and /dev/shm (tmpfs) and checks the
// orderings that must hold: tmpfs is faster for the fsync-heavy patterns,
// every pattern did work, and nothing is left behind.
func TestMicroOrdering(t *testing.T) {
	shm := "/dev/shm"
	if fs, _, err := Space(shm); err != nil || fs != "tmpfs" {
		t.Skipf("/dev/shm is not tmpfs (%s, %v)", fs, err)
	}
	dd := diskDir(t)
	var res []PathResult
	for _, p := range []string{dd, shm} {
		before := leftovers(t, p)
		r, err := Measure(context.Background(), p, testOptions())
		if err != nil {
			t.Fatal(err)
		}
		if after := leftovers(t, p); after != before {
			t.Errorf("%s: %d erplab-disk-* entries before, %d after", p, before, after)
		}
		for _, x := range r.Results {
			if x.Ops == 0 || x.OpsPerS <= 0 || x.P50us > x.P99us || x.P99us > x.MaxUs {
				t.Errorf("%s %s: implausible %+v", p, x.Pattern, x)
			}
		}
		if len(r.Results) != len(Patterns()) {
			t.Fatalf("%s: %d results, want %d", p, len(r.Results), len(Patterns()))
		}
		res = append(res, r)
	}
	if res[1].FSType != "tmpfs" || res[0].FSType == "tmpfs" {
		t.Fatalf("fs types %s, %s", res[0].FSType, res[1].FSType)
	}
	for _, p := range []string{WALFdatasync, WALODsync, TempChurnSync} {
		d, _ := res[0].Result(p)
		m, _ := res[1].Result(p)
		t.Logf("%s: disk %.0f ops/s, tmpfs %.0f ops/s", p, d.OpsPerS, m.OpsPerS)
		if m.OpsPerS <= d.OpsPerS {
			t.Errorf("%s: tmpfs %.0f ops/s not faster than disk %.0f ops/s", p, m.OpsPerS, d.OpsPerS)
		}
		if r := Rank(res, p); r[0] != 1 {
			t.Errorf("%s: rank puts %s first", p, res[r[0]].Path)
		}
	}
	c, _ := res[1].Result(TempChurn)
	if len(c.RateOverTime) == 0 || c.UnlinkPerS <= 0 {
		t.Errorf("churn lacks rate over fill / unlink rate: %+v", c)
	}
}

func leftovers(t *testing.T, dir string) int {
	m, err := filepath.Glob(filepath.Join(dir, "erplab-disk-*"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestMeasureCancelledCleansUp cancels a measurement midway; the
// directory it made must be gone.
func TestMeasureCancelledCleansUp(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := Measure(ctx, dir, Options{FileBytes: 4 << 20, Duration: time.Second, QueueDepth: 2, ChurnFiles: 100})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	if n := leftovers(t, dir); n != 0 {
		t.Errorf("%d erplab-disk-* left in %s", n, dir)
	}
}

func TestMeasureRefusesFullPath(t *testing.T) {
	o := testOptions()
	o.FileBytes = 1 << 62
	if _, err := Measure(context.Background(), t.TempDir(), o); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("err = %v, want ErrNoSpace", err)
	}
	if _, err := Measure(context.Background(), "/nonexistent/x", testOptions()); err == nil {
		t.Fatal("no error for a missing path")
	}
}

func TestMountTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	m, err := MountTmpfs(32 << 20)
	if err != nil {
		t.Skipf("cannot mount here: %v", err)
	}
	fs, free, err := Space(m.Dir)
	if err != nil || fs != "tmpfs" || free > 32<<20 || free < 30<<20 {
		t.Errorf("mounted %s: fs %s free %d err %v", m.Dir, fs, free, err)
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.Dir); !os.IsNotExist(err) {
		t.Errorf("mount point %s still there: %v", m.Dir, err)
	}
}
