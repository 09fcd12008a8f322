package results

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// A document whose write fails with ENOSPC (its .tmp is a link to
// /dev/full) leaves neither the .tmp nor the document behind, and the
// error names the file and the cause.
func TestWriteFileFullDiskLeavesNoTmp(t *testing.T) {
	full := fullDevice(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	if err := os.Symlink(full, path+".tmp"); err != nil {
		t.Fatal(err)
	}
	err := minimalDoc().WriteFile(path)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), path+".tmp") {
		t.Fatalf("error %v, want ENOSPC naming %s.tmp", err, path)
	}
	for _, p := range []string{path, path + ".tmp"} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left behind (%v)", p, err)
		}
	}
}

// A failed rename (the target is a non-empty directory) removes the .tmp.
func TestWriteFileFailedRenameLeavesNoTmp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := minimalDoc().WriteFile(path); err == nil || !strings.Contains(err.Error(), "rename to "+path) {
		t.Fatalf("error %v, want the rename's", err)
	}
	if _, err := os.Lstat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf(".tmp left behind (%v)", err)
	}
}

// A stream on a full device fails with ENOSPC at its first line and then
// writes nothing more: every later Write and Close return that first
// error.
func TestStreamStopsAtFirstFailure(t *testing.T) {
	st, err := CreateStream(fullDevice(t))
	if err != nil {
		t.Fatal(err)
	}
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
	st, err := CreateStream(path)
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
