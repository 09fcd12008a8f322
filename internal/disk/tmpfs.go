package disk

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/erplab/erplab/internal/leftover"
)

// Tmpfs is a tmpfs erplab mounted itself for a comparison (--tmpfs SIZE).
type Tmpfs struct {
	// Dir is the mount point, a fresh directory under os.TempDir().
	Dir  string
	Size int64

	rec   *leftover.Record
	entry *leftover.Entry
}

// MountTmpfs mounts a tmpfs of size bytes (mount(2), "size=" option of
// tmpfs(5)) on a new directory erplab-tmpfs-<16 hex> under os.TempDir(),
// mode 1777 so that the server's OS user can use it. The mount is
// recorded in erplab's crash-safe record (leftover.AddMount) before the
// mount point is made, so a killed erplab's mount is unmounted by the
// next erplab command. It needs root (CAP_SYS_ADMIN); otherwise the error
// says so in one line.
func MountTmpfs(size int64) (*Tmpfs, error) {
	if size < 16<<20 {
		return nil, fmt.Errorf("disk: tmpfs size %d bytes: want at least 16 MiB", size)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("disk: --tmpfs needs root to mount a tmpfs (or pass a tmpfs directory such as /dev/shm)")
	}
	rec, err := leftover.Open()
	if err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	tmp, err := filepath.Abs(os.TempDir())
	if err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	dir := filepath.Join(tmp, "erplab-tmpfs-"+hex.EncodeToString(b))
	e, source, err := rec.AddMount(dir, "tmpfs", true)
	if err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		_ = rec.Remove(e)
		return nil, fmt.Errorf("disk: %w", err)
	}
	if err := unix.Mount(source, dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=1777", size)); err != nil {
		os.Remove(dir)
		_ = rec.Remove(e)
		return nil, fmt.Errorf("disk: mount tmpfs on %s: %w", dir, err)
	}
	return &Tmpfs{Dir: dir, Size: size, rec: rec, entry: e}, nil
}

// Unmount unmounts the tmpfs (lazily if busy: MNT_DETACH), removes the
// mount point and then its record.
func (t *Tmpfs) Unmount() error {
	if err := unix.Unmount(t.Dir, 0); err != nil {
		if err2 := unix.Unmount(t.Dir, unix.MNT_DETACH); err2 != nil {
			return fmt.Errorf("disk: unmount %s: %w", t.Dir, err)
		}
	}
	if err := os.Remove(t.Dir); err != nil {
		return fmt.Errorf("disk: remove mount point %s: %w", t.Dir, err)
	}
	if t.rec != nil {
		return t.rec.Remove(t.entry)
	}
	return nil
}
