package leftover

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// noticedFile is the file in the record's directory naming the things
// already reported as left alone. It is not an entry (no .json suffix).
const noticedFile = "left-alone.noticed"

// noticed is one path reported as left alone, with the device and inode
// it had then.
type noticed struct {
	Path string `json:"path"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
}

// FirstNotice returns, in order, those of paths (absolute) that no earlier
// FirstNotice of this record returned while they were the same file: same
// path, device and inode, so a thing removed and made again at the same
// path is new. It remembers the ones it returns in <record>/left-alone.noticed
// (locked with flock, mode 0600) and forgets remembered paths that are
// gone or replaced. A path it cannot Lstat is returned and not remembered.
// It only decides what to say: nothing is created or removed at the
// paths. On an error reading or writing that file it returns every path
// with the error, so that nothing goes unsaid.
func (r *Record) FirstNotice(paths []string) ([]string, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	name := filepath.Join(r.dir, noticedFile)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return paths, fmt.Errorf("leftover: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return paths, fmt.Errorf("leftover: lock %s: %w", name, err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return paths, fmt.Errorf("leftover: %s: %w", name, err)
	}
	var old []noticed
	_ = json.Unmarshal(b, &old) // a torn or empty file: everything is new
	var keep []noticed
	seen := map[noticed]bool{}
	for _, n := range old {
		if id, ok := identity(n.Path); ok && id == n && !seen[n] {
			keep, seen[n] = append(keep, n), true
		}
	}
	var fresh []string
	for _, p := range paths {
		id, ok := identity(p)
		switch {
		case !ok:
			fresh = append(fresh, p)
		case !seen[id]:
			fresh = append(fresh, p)
			keep, seen[id] = append(keep, id), true
		}
	}
	if keep == nil {
		keep = []noticed{}
	}
	b, err = json.Marshal(keep)
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		_, err = f.WriteAt(append(b, '\n'), 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return paths, fmt.Errorf("leftover: write %s: %w", name, err)
	}
	return fresh, nil
}

// identity is path with the device and inode Lstat finds there.
func identity(path string) (noticed, bool) {
	st, err := os.Lstat(path)
	if err != nil {
		return noticed{}, false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return noticed{}, false
	}
	return noticed{Path: path, Dev: uint64(sys.Dev), Ino: sys.Ino}, true
}
