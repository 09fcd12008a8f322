package leftover

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// killed marks e as made by a dead process, as after kill -9.
func killed(t *testing.T, rec *Record, e *Entry) {
	t.Helper()
	e.Owner = deadProcess(t)
	if err := rec.Update(e, nil); err != nil {
		t.Fatal(err)
	}
}

func TestDirKind(t *testing.T) {
	rec, err := OpenDir(filepath.Join(t.TempDir(), "rec"))
	if err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	dir, e, err := rec.MkdirTemp(parent, "erplab-disk-")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(dir), "erplab-disk-") || filepath.Dir(dir) != parent {
		t.Fatalf("dir %s", dir)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	// A second directory replaced by another one (other inode) after the
	// record: left alone.
	forged, fe, err := rec.MkdirTemp(parent, "erplab-ts-")
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(parent, "someone-elses")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(forged); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, forged); err != nil {
		t.Fatal(err)
	}
	// A third removed by its command as it should: the entry goes too.
	done, de, err := rec.MkdirTemp(parent, "erplab-wal-")
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.RemoveDir(de); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(done); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("RemoveDir left %s", done)
	}
	killed(t, rec, e)
	killed(t, rec, fe)
	line := rec.Sweep(context.Background()).Line()
	t.Log(line)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s not removed", dir)
	}
	if _, err := os.Stat(forged); err != nil {
		t.Errorf("the replaced directory %s was removed", forged)
	}
	for _, want := range []string{"dir " + dir + " (removed with 3 MiB of files)", forged + " (not the directory erplab created"} {
		if !strings.Contains(line, want) {
			t.Errorf("line lacks %q: %s", want, line)
		}
	}
	if left, _ := rec.Entries(); len(left) != 0 {
		t.Errorf("entries left: %v", left)
	}
}

func TestMountKind(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	rec, err := OpenDir(filepath.Join(t.TempDir(), "rec"))
	if err != nil {
		t.Fatal(err)
	}
	mount := func(point, source string) {
		t.Helper()
		if err := unix.Mount(source, point, "tmpfs", 0, "size=4m"); err != nil {
			t.Skipf("cannot mount a tmpfs here: %v", err)
		}
		t.Cleanup(func() { _ = unix.Unmount(point, unix.MNT_DETACH) })
	}
	mounted := func(point string) bool {
		ms, err := procfs.GetMounts()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.MountPoint == point {
				return true
			}
		}
		return false
	}
	// Ours: made for the mount, with a file in it.
	ours := filepath.Join(t.TempDir(), "erplab-tmpfs-x")
	e, source, err := rec.AddMount(ours, "tmpfs", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(ours, 0o700); err != nil {
		t.Fatal(err)
	}
	mount(ours, source)
	if err := os.WriteFile(filepath.Join(ours, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A DBA's tmpfs at a recorded point (source "tmpfs"): left alone.
	theirs := t.TempDir()
	te, _, err := rec.AddMount(theirs, "tmpfs", true)
	if err != nil {
		t.Fatal(err)
	}
	mount(theirs, "tmpfs")
	killed(t, rec, e)
	killed(t, rec, te)
	line := rec.Sweep(context.Background()).Line()
	t.Log(line)
	if mounted(ours) {
		t.Errorf("%s still mounted", ours)
	}
	if _, err := os.Stat(ours); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("mount point %s not removed", ours)
	}
	if !mounted(theirs) {
		t.Errorf("the DBA's tmpfs at %s was unmounted", theirs)
	}
	for _, want := range []string{"mount " + ours + " (unmounted tmpfs, removed the mount point)", theirs + " (the mount at " + theirs + " is tmpfs from tmpfs, not the tmpfs erplab mounted"} {
		if !strings.Contains(line, want) {
			t.Errorf("line lacks %q: %s", want, line)
		}
	}
}
