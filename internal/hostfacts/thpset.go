package hostfacts

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// THPChoices are the words each top-level transparent huge pages choice
// file takes (Documentation/admin-guide/mm/transhuge.rst): the files
// ReadTHP and SetTHP accept, and the modes SetTHP writes.
var THPChoices = map[string][]string{
	"enabled":       {"always", "madvise", "never"},
	"defrag":        {"always", "defer", "defer+madvise", "madvise", "never"},
	"shmem_enabled": {"always", "within_size", "advise", "never", "deny", "force"},
}

// CheckTHPChoice returns an error naming the words file takes when mode
// is not one of them, or when file is not a choice file of THPChoices.
func CheckTHPChoice(file, mode string) error {
	words, ok := THPChoices[file]
	if !ok {
		return fmt.Errorf("transparent huge pages: no choice file %q (enabled, defrag or shmem_enabled)", file)
	}
	if !slices.Contains(words, mode) {
		return fmt.Errorf("transparent_hugepage/%s takes %s, not %q", file, strings.Join(words, ", "), mode)
	}
	return nil
}

// thpFile is choice file name under sysRoot's mainline THP directory
// ("" sysRoot is DefaultSysRoot).
func thpFile(sysRoot, name string) string {
	if sysRoot == "" {
		sysRoot = DefaultSysRoot
	}
	return filepath.Join(sysRoot, "kernel", "mm", thpDir, name)
}

// ReadTHP reads the mainline choice file name (enabled, defrag,
// shmem_enabled) under sysRoot ("" DefaultSysRoot): THPValue.Mode is the
// bracketed word; an absent file gives an error satisfying
// errors.Is(err, fs.ErrNotExist).
func ReadTHP(sysRoot, name string) THPValue {
	return readChoice(thpFile(sysRoot, name))
}

// SetTHP writes mode to the mainline choice file name (enabled, defrag,
// shmem_enabled; mode one of THPChoices[name]) under sysRoot (""
// DefaultSysRoot; root only on a live host) and reads the file back: its
// bracketed word must be mode. This and DropPageCache are the package's
// only writes. Errors name the file.
func SetTHP(sysRoot, name, mode string) error {
	if err := CheckTHPChoice(name, mode); err != nil {
		return err
	}
	path := thpFile(sysRoot, name)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("transparent huge pages: %w", err)
	}
	_, err = f.WriteString(mode)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("transparent huge pages: write %q to %s: %w", mode, path, err)
	}
	if v := readChoice(path); v.Err != nil || v.Mode != mode {
		return fmt.Errorf("transparent huge pages: %s reads %q after writing %q (%v)", path, v.Mode, mode, v.Err)
	}
	return nil
}
