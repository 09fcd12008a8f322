package leftover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// The kinds this package undoes itself (see the package doc).
const (
	// KindMount is a file system erplab mounted (disk --tmpfs, the tmpfs
	// of ab's tmpfs-temp-tablespace remedy).
	KindMount = "mount"
	// KindDir is a directory erplab created with all it holds (disk's
	// erplab-disk-*, erplab-ts-* and erplab-wal-* directories).
	KindDir = "dir"
)

func init() {
	Register(Kind{Name: KindMount, Undo: undoMount})
	Register(Kind{Name: KindDir, Undo: undoDir})
}

// MountData is the Data of a KindMount entry.
type MountData struct {
	// FSType is the file system type given to mount(2), e.g. "tmpfs".
	FSType string `json:"fs_type"`
	// Source is the source given to mount(2): "erplab-" and 16 random hex
	// digits, unique to the entry. /proc/self/mountinfo shows it, so a
	// mount at Path with this type and source is the one recorded.
	Source string `json:"source"`
	// RemoveDir: the mount point was created for the mount; it is removed
	// (when empty) once unmounted.
	RemoveDir bool `json:"remove_dir,omitempty"`
}

// AddMount records, before the mount, that this process is about to
// mount a file system of type fsType on point (an absolute path);
// removeDir says the mount point was made for it. It returns the entry
// and the source string the caller must pass to mount(2): the proof the
// next Sweep looks for in /proc/self/mountinfo. After unmounting, the
// caller calls Remove(e). Errors: the entry could not be written.
func (r *Record) AddMount(point, fsType string, removeDir bool) (*Entry, string, error) {
	d := MountData{FSType: fsType, Source: "erplab-" + randomHex(8), RemoveDir: removeDir}
	e, err := r.Add(KindMount, filepath.Clean(point), d)
	if err != nil {
		return nil, "", err
	}
	return e, d.Source, nil
}

// undoMount unmounts the entry's mount when /proc/self/mountinfo lists a
// mount at its Path with its type and source (lazily when busy), then
// removes the mount point when RemoveDir and empty. A mount there with
// another type or source is not ours: ErrNotOurs.
func undoMount(_ context.Context, e Entry) (string, error) {
	var d MountData
	if json.Unmarshal(e.Data, &d) != nil || d.Source == "" || d.FSType == "" {
		return "", fmt.Errorf("unreadable entry: %w", ErrNotOurs)
	}
	point := e.Path
	if p, err := filepath.EvalSymlinks(point); err == nil {
		point = p
	}
	var done []string
	for range 16 { // stacked mounts of ours, at most a few
		mounts, err := hostfacts.LiveMounts()
		if err != nil {
			return "", err
		}
		var ours, other *procfs.MountInfo
		for _, m := range mounts {
			if m.MountPoint != point {
				continue
			}
			if m.FSType == d.FSType && m.Source == d.Source {
				ours = m
			} else {
				other = m
			}
		}
		if ours == nil {
			if other != nil && len(done) == 0 {
				return "", fmt.Errorf("the mount at %s is %s from %s, not the %s erplab mounted: %w", point, other.FSType, other.Source, d.FSType, ErrNotOurs)
			}
			break
		}
		how := "unmounted " + d.FSType
		if err := unix.Unmount(point, 0); err != nil {
			if err2 := unix.Unmount(point, unix.MNT_DETACH); err2 != nil {
				return strings.Join(done, ", "), fmt.Errorf("umount %s: %w", point, err)
			}
			how += " (lazily: busy)"
		}
		done = append(done, how)
	}
	if d.RemoveDir {
		switch err := os.Remove(point); {
		case err == nil:
			done = append(done, "removed the mount point")
		case errors.Is(err, os.ErrNotExist):
		default:
			done = append(done, fmt.Sprintf("mount point kept: %v", err))
		}
	}
	return strings.Join(done, ", "), nil
}

// DirData is the Data of a KindDir entry.
type DirData struct {
	// UID is the effective user that creates the directory.
	UID int `json:"uid"`
	// Dev and Ino identify the directory once created (0 before).
	Dev uint64 `json:"dev,omitempty"`
	Ino uint64 `json:"ino,omitempty"`
}

// MkdirTemp creates a new directory parent/<prefix><16 random hex> with
// mode 0700, recorded first (AddDir's protocol), and returns its path and
// entry. Once the directory and what it holds are no longer needed, the
// caller calls RemoveDir(e). Errors: the entry could not be written, the
// directory could not be created (the entry is then removed).
func (r *Record) MkdirTemp(parent, prefix string) (string, *Entry, error) {
	abs, err := filepath.Abs(parent)
	if err != nil {
		return "", nil, fmt.Errorf("leftover: %w", err)
	}
	dir := filepath.Join(abs, prefix+randomHex(8))
	d := DirData{UID: os.Geteuid()}
	e, err := r.Add(KindDir, dir, d)
	if err != nil {
		return "", nil, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		_ = r.Remove(e)
		return "", nil, fmt.Errorf("leftover: %w", err)
	}
	if st, err := os.Lstat(dir); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			d.Dev, d.Ino = sys.Dev, sys.Ino
			if err := r.Update(e, d); err != nil {
				_ = os.Remove(dir)
				_ = r.Remove(e)
				return "", nil, err
			}
		}
	}
	return dir, e, nil
}

// RemoveDir removes the directory of a MkdirTemp entry with everything
// in it (os.RemoveAll) and then the entry. Errors: the removal failed
// (the entry is kept for the next Sweep).
func (r *Record) RemoveDir(e *Entry) error {
	if err := os.RemoveAll(e.Path); err != nil {
		return fmt.Errorf("leftover: %w", err)
	}
	return r.Remove(e)
}

// undoDir removes the entry's directory with its contents when it is the
// one recorded: a real directory (not a symbolic link) with the recorded
// device and inode, or, when the process died before recording them,
// owned by the recorded user with mode 0700 as Mkdir left it.
func undoDir(_ context.Context, e Entry) (string, error) {
	var d DirData
	if json.Unmarshal(e.Data, &d) != nil || !filepath.IsAbs(e.Path) {
		return "", fmt.Errorf("unreadable entry: %w", ErrNotOurs)
	}
	st, err := os.Lstat(e.Path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	switch {
	case !st.IsDir() || !ok:
		return "", fmt.Errorf("not a directory: %w", ErrNotOurs)
	case d.Ino != 0 && (sys.Dev != d.Dev || sys.Ino != d.Ino):
		return "", fmt.Errorf("not the directory erplab created (device/inode differ): %w", ErrNotOurs)
	case d.Ino == 0 && (int(sys.Uid) != d.UID || st.Mode().Perm() != 0o700):
		return "", fmt.Errorf("owned by uid %d with mode %v, not as erplab made it: %w", sys.Uid, st.Mode().Perm(), ErrNotOurs)
	}
	size := treeSize(e.Path)
	if err := os.RemoveAll(e.Path); err != nil {
		return "", err
	}
	return fmt.Sprintf("removed with %s of files", humanBytes(size)), nil
}

// treeSize is the apparent size of the regular files under dir, bytes
// (best effort).
func treeSize(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// humanBytes is n as "12 MiB", "3 KiB" or "5 B".
func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// RemoveDirAt is RemoveDir for the KindDir entry of this process whose
// Path is path (for callers that kept only the path); with no such entry
// it removes path alone. Errors: the removal failed.
func (r *Record) RemoveDirAt(path string) error {
	entries, err := r.Entries()
	if err != nil {
		return err
	}
	self := os.Getpid()
	for _, e := range entries {
		if e.Kind == KindDir && e.Path == path && e.Owner.PID == self {
			return r.RemoveDir(&e)
		}
	}
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("leftover: %w", err)
	}
	return nil
}
