package hostfacts

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// DropPageCache writes back dirty pages and drops the clean page cache
// (sync, then echo 1 > <procRoot>/sys/vm/drop_caches; root only on a live
// host). procRoot "" is DefaultProcRoot.
func DropPageCache(procRoot string) error {
	if procRoot == "" {
		procRoot = DefaultProcRoot
	}
	unix.Sync()
	if err := os.WriteFile(filepath.Join(procRoot, "sys", "vm", "drop_caches"), []byte("1"), 0); err != nil {
		return fmt.Errorf("drop page cache: %w", err)
	}
	return nil
}
