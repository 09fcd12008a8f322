package results

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fullDevice skips the test where /dev/full (writes fail with ENOSPC)
// is missing.
func fullDevice(t *testing.T) string {
	t.Helper()
	if st, err := os.Stat("/dev/full"); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Skip("needs /dev/full")
	}
	return "/dev/full"
}

func minimalDoc() *Document {
	return &Document{Format: Format, Schema: SchemaVersion, Workload: "w", Status: "completed", StartedAt: time.Unix(1, 0).UTC()}
}

// A document whose write fails with ENOSPC (a 64 KiB tmpfs) leaves
// nothing behind, and the error names the file and the cause.
func TestWriteFileFullDiskLeavesNoTmp(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("erplab-test", dir, "tmpfs", 0, "size=64k,mode=0700"); err != nil {
		t.Skipf("no tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	path := filepath.Join(dir, "r.json")
	d := minimalDoc()
	d.CommandLine = []string{strings.Repeat("x", 1<<20)}
	err := d.WriteFile(path, DefaultPerm)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "results: write "+path) {
		t.Fatalf("error %v, want ENOSPC naming %s", err, path)
	}
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Errorf("left behind: %v", es)
	}
}

// A symbolic link planted where results go (the document's name, or
// X.json.tmp, where erplab once wrote its temporary file) is never
// written through: the link's target (a root file standing in for
// /etc/shadow) is unchanged, the document at a planted name is refused in
// one line, and no temporary file is left.
func TestWriteFileRefusesPlantedLinks(t *testing.T) {
	victim := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(victim, []byte("root:secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	x := filepath.Join(dir, "x.json")
	if err := os.Symlink(victim, x+".tmp"); err != nil {
		t.Fatal(err)
	}
	if err := minimalDoc().WriteFile(x, DefaultPerm); err != nil {
		t.Fatalf("beside a planted x.json.tmp: %v", err)
	}
	y := filepath.Join(dir, "y.json")
	if err := os.Symlink(victim, y); err != nil {
		t.Fatal(err)
	}
	err := minimalDoc().WriteFile(y, DefaultPerm)
	if err == nil || !strings.Contains(err.Error(), y+" is a symbolic link") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("a link at the document's name: %v", err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "root:secret\n" {
		t.Fatalf("the link's target was written: %q, %v", b, err)
	}
	if es, _ := os.ReadDir(dir); len(es) != 3 {
		t.Errorf("want x.json, its planted .tmp and y.json only, got %v", es)
	}
}

// A document over an existing path (a directory) is refused; nothing is
// left behind.
func TestWriteFileRefusesExistingPath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := minimalDoc().WriteFile(path, DefaultPerm); err == nil || !strings.Contains(err.Error(), path+" is a directory") {
		t.Fatalf("error %v, want the refusal", err)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("left behind: %v", es)
	}
}

// A stream on a full device fails with ENOSPC at its first line and then
// writes nothing more: every later Write and Close return that first
// error.
func TestStreamStopsAtFirstFailure(t *testing.T) {
	f, err := os.OpenFile(fullDevice(t), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	st := NewStream(f)
	err = st.Write(StreamLine{Type: "interval", Interval: &Interval{T: 1}})
	if !errors.Is(err, syscall.ENOSPC) || st.Err() != err || st.LastT() != 0 {
		t.Fatalf("write: %v, Err %v, LastT %g", err, st.Err(), st.LastT())
	}
	if err2 := st.Write(StreamLine{Type: "interval", Interval: &Interval{T: 2}}); err2 != err {
		t.Fatalf("second write: %v, want the first error", err2)
	}
	if cerr := st.Close(); cerr != err {
		t.Fatalf("close: %v, want the first error", cerr)
	}
}

// Lines written before a failure stay whole: the stream reads back.
func TestStreamKeepsWholeLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	st, err := CreateStream(path, DefaultPerm)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Write(StreamLine{Type: "header", Header: minimalDoc()}); err != nil {
		t.Fatal(err)
	}
	if err := st.Write(StreamLine{Type: "interval", Interval: &Interval{T: 1, Count: 3}}); err != nil {
		t.Fatal(err)
	}
	if st.LastT() != 1 {
		t.Fatalf("LastT %g", st.LastT())
	}
	st.f.Close() // the next write fails, as on a disk that went away
	if err := st.Write(StreamLine{Type: "interval", Interval: &Interval{T: 2}}); err == nil || st.Err() == nil {
		t.Fatal("write to a closed file succeeded")
	}
	st.f = nil
	h, series, summary, err := ReadStream(path)
	if err != nil || h == nil || len(series) != 1 || series[0].Count != 3 || summary != nil {
		t.Fatalf("read back: %v header %v, %d intervals", err, h != nil, len(series))
	}
}
