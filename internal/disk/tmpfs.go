package disk

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Tmpfs is a tmpfs erplab mounted itself for a comparison (--tmpfs SIZE).
type Tmpfs struct {
	// Dir is the mount point, a fresh directory under os.TempDir().
	Dir  string
	Size int64
}

// MountTmpfs mounts a tmpfs of size bytes (mount(2), "size=" option of
// tmpfs(5)) on a new directory under os.TempDir(), mode 1777 so that the
// server's OS user can use it. It needs root (CAP_SYS_ADMIN); otherwise
// the error says so in one line.
func MountTmpfs(size int64) (*Tmpfs, error) {
	if size < 16<<20 {
		return nil, fmt.Errorf("disk: tmpfs size %d bytes: want at least 16 MiB", size)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("disk: --tmpfs needs root to mount a tmpfs (or pass a tmpfs directory such as /dev/shm)")
	}
	dir, err := os.MkdirTemp("", "erplab-tmpfs-")
	if err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	if err := unix.Mount("erplab-tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=1777", size)); err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("disk: mount tmpfs on %s: %w", dir, err)
	}
	return &Tmpfs{Dir: dir, Size: size}, nil
}

// Unmount unmounts the tmpfs (lazily if busy: MNT_DETACH) and removes the
// mount point.
func (t *Tmpfs) Unmount() error {
	if err := unix.Unmount(t.Dir, 0); err != nil {
		if err2 := unix.Unmount(t.Dir, unix.MNT_DETACH); err2 != nil {
			return fmt.Errorf("disk: unmount %s: %w", t.Dir, err)
		}
	}
	if err := os.Remove(t.Dir); err != nil {
		return fmt.Errorf("disk: remove mount point %s: %w", t.Dir, err)
	}
	return nil
}
