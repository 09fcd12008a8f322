package hostfacts

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// THP directory names under <sys>/kernel/mm: the mainline one and the one
// of RHEL 6 kernels (2.6.32 backport).
const (
	thpDir       = "transparent_hugepage"
	thpDirRedHat = "redhat_transparent_hugepage"
)

// THPValue is one transparent huge pages choice file, read on its own.
type THPValue struct {
	// Path is the file read (or looked for).
	Path string `json:"path"`
	// Mode is the bracketed word ("always", "madvise", "never", "inherit",
	// "within_size", "advise", "deny", "force", "defer", "defer+madvise");
	// "" when the file is absent or Err is set.
	Mode string `json:"mode,omitempty"`
	// Err is nil when Mode was read; it satisfies errors.Is(err,
	// fs.ErrNotExist) for an absent file, and otherwise names the file
	// (unreadable, or no bracketed word).
	Err error `json:"-"`
}

// Known reports whether the file was read and parsed.
func (v THPValue) Known() bool { return v.Err == nil && v.Mode != "" }

// Absent reports whether the file does not exist.
func (v THPValue) Absent() bool { return errors.Is(v.Err, fs.ErrNotExist) }

// THPSize is one per-size control, hugepages-<KB>kB/enabled (multi-size
// THP, Linux 6.8+; "inherit" takes the top-level enabled mode).
type THPSize struct {
	KB int `json:"kb"`
	THPValue
}

// THPSettings is the transparent huge pages configuration of the host.
// Each file is read and parsed on its own: one malformed file leaves the
// others' values intact.
type THPSettings struct {
	// Dir is the directory read: <sys>/kernel/mm/transparent_hugepage, or
	// on RHEL 6 <sys>/kernel/mm/redhat_transparent_hugepage; "" when
	// neither exists (a kernel without THP, or /sys not visible here).
	Dir string `json:"dir,omitempty"`
	// RedHat is true when Dir is the RHEL 6 directory.
	RedHat bool `json:"redhat,omitempty"`
	// Enabled, Defrag and ShmemEnabled are the files enabled, defrag and
	// shmem_enabled (shmem_enabled governs shared memory and tmpfs, i.e.
	// PostgreSQL's shared_buffers mapping; absent on RHEL 6).
	Enabled, Defrag, ShmemEnabled THPValue
	// Sizes are the hugepages-<N>kB/enabled files, smallest first (none
	// before Linux 6.8).
	Sizes []THPSize
}

// THPSettings reads the transparent huge pages choice files. It does not
// fail: every value carries its own error (see THPValue). When neither
// THP directory exists, Dir is "" and every value is absent.
func (f FS) THPSettings() THPSettings {
	var s THPSettings
	base := f.SysPath("kernel", "mm")
	for _, d := range []string{thpDir, thpDirRedHat} {
		if st, err := os.Stat(filepath.Join(base, d)); err == nil && st.IsDir() {
			s.Dir, s.RedHat = filepath.Join(base, d), d == thpDirRedHat
			break
		}
	}
	dir := s.Dir
	if dir == "" {
		dir = filepath.Join(base, thpDir)
	}
	s.Enabled = readChoice(filepath.Join(dir, "enabled"))
	s.Defrag = readChoice(filepath.Join(dir, "defrag"))
	s.ShmemEnabled = readChoice(filepath.Join(dir, "shmem_enabled"))
	ents, _ := os.ReadDir(dir)
	for _, de := range ents {
		n, ok := strings.CutPrefix(de.Name(), "hugepages-")
		if !ok {
			continue
		}
		kb, err := strconv.Atoi(strings.TrimSuffix(n, "kB"))
		if err != nil || !strings.HasSuffix(n, "kB") {
			continue
		}
		s.Sizes = append(s.Sizes, THPSize{KB: kb, THPValue: readChoice(filepath.Join(dir, de.Name(), "enabled"))})
	}
	sort.Slice(s.Sizes, func(i, j int) bool { return s.Sizes[i].KB < s.Sizes[j].KB })
	return s
}

// readChoice reads one sysfs choice file.
func readChoice(path string) THPValue {
	v := THPValue{Path: path}
	line, err := Line(path)
	if err != nil {
		v.Err = err
		return v
	}
	if v.Mode = Selected(line); v.Mode == "" {
		v.Err = &fs.PathError{Op: "parse", Path: path, Err: errors.New("no bracketed mode in " + strconv.Quote(line))}
	}
	return v
}

// THPLiveDir is the THP directory of a live host (under DefaultSysRoot),
// the RHEL 6 one when redHat, for fix commands that name it.
func THPLiveDir(redHat bool) string {
	if redHat {
		return DefaultSysRoot + "/kernel/mm/" + thpDirRedHat
	}
	return DefaultSysRoot + "/kernel/mm/" + thpDir
}
