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
	return Options{FileBytes: 8 << 20, Duration: 300 * time.Millisecond, QueueDepth: 4, ChurnFiles: 2000, Seed: 1, Repeats: 3}
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

// TestMicroOrdering measures the disk and /dev/shm (tmpfs), 3 repeats
// interleaved, and checks the orderings that must hold: tmpfs is faster
// for the fsync-heavy patterns (significantly: rank 1, not tied), every
// run did work, the rounds alternate the paths, and nothing is left
// behind.
func TestMicroOrdering(t *testing.T) {
	shm := "/dev/shm"
	if fs, _, err := Space(shm); err != nil || fs != "tmpfs" {
		t.Skipf("/dev/shm is not tmpfs (%s, %v)", fs, err)
	}
	// Private directories on each file system, so that other tests
	// measuring /dev/shm or /var/tmp at the same time do not show up in
	// the leftover counts.
	dd, shm := privateDir(t, diskDir(t)), privateDir(t, shm)
	paths := []string{dd, shm}
	var before []int
	for _, p := range paths {
		before = append(before, leftovers(t, p))
	}
	res, err := MeasureAll(context.Background(), paths, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range paths {
		if after := leftovers(t, p); after != before[i] {
			t.Errorf("%s: %d erplab-disk-* entries before, %d after", p, before[i], after)
		}
		r := res[i]
		if r.Path != p {
			t.Fatalf("result %d is %s, want %s", i, r.Path, p)
		}
		for _, x := range r.Results {
			if len(x.Runs) != 3 || x.OpsPerS.Median <= 0 || x.OpsPerS.Min > x.OpsPerS.Median || x.OpsPerS.Median > x.OpsPerS.Max {
				t.Errorf("%s %s: implausible %+v", p, x.Pattern, x)
			}
			for k, run := range x.Runs {
				if run.Ops == 0 || run.OpsPerS <= 0 || run.P50us > run.P99us || run.P99us > run.MaxUs || run.Round != k {
					t.Errorf("%s %s run %d: implausible %+v", p, x.Pattern, k, run)
				}
			}
		}
		if len(r.Results) != len(Patterns()) {
			t.Fatalf("%s: %d results, want %d", p, len(r.Results), len(Patterns()))
		}
	}
	// Two paths: positions alternate over the rounds, the paths swap.
	for k := range 3 {
		a, b := res[0].Results[0].Runs[k].Position, res[1].Results[0].Runs[k].Position
		if a+b != 1 || (k > 0 && a == res[0].Results[0].Runs[k-1].Position) {
			t.Errorf("round %d: positions %d, %d do not alternate", k, a, b)
		}
	}
	if res[1].FSType != "tmpfs" || res[0].FSType == "tmpfs" {
		t.Fatalf("fs types %s, %s", res[0].FSType, res[1].FSType)
	}
	for _, p := range []string{WALFdatasync, WALODsync, TempChurnSync} {
		d, _ := res[0].Result(p)
		m, _ := res[1].Result(p)
		t.Logf("%s: disk %.0f ops/s %v, tmpfs %.0f ops/s %v", p, d.OpsPerS.Median, d.OpsPerS.Values, m.OpsPerS.Median, m.OpsPerS.Values)
		if m.OpsPerS.Median <= d.OpsPerS.Median {
			t.Errorf("%s: tmpfs %.0f ops/s not faster than disk %.0f ops/s", p, m.OpsPerS.Median, d.OpsPerS.Median)
		}
		r, err := RankMicro(res, p, DefaultRule())
		if err != nil {
			t.Fatal(err)
		}
		if r.Places[0].Path != shm || r.Places[0].Rank != 1 || r.Places[0].Tied || r.Places[1].Rank != 2 {
			t.Errorf("%s: ranking %+v, want %s first and not tied", p, r.Places, shm)
		}
	}
	cr, _ := res[1].Result(TempChurn)
	c := cr.MedianRun()
	if len(c.RateOverTime) == 0 || c.UnlinkPerS <= 0 {
		t.Errorf("churn lacks rate over fill / unlink rate: %+v", c)
	}
}

// privateDir is a fresh directory under parent, removed after the test.
func privateDir(t *testing.T, parent string) string {
	t.Helper()
	d, err := os.MkdirTemp(parent, "erplab-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
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
	_, err := Measure(ctx, dir, Options{FileBytes: 4 << 20, Duration: time.Second, QueueDepth: 2, ChurnFiles: 100, Repeats: 1})
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
