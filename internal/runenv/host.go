// Package runenv describes the environment of a load-test run for the
// results file: the host the tool ran on ([ReadHost]) and the PostgreSQL
// server it loaded ([ReadServer]), so that two runs can be compared knowing
// what differed between them.
package runenv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/erplab/erplab/internal/procfile"
)

// Host describes the machine a run executed on. In JSON field names are
// snake_case.
type Host struct {
	// Hostname is the kernel host name (/proc/sys/kernel/hostname).
	Hostname string `json:"hostname"`
	// OS is the kernel type, "Linux" (/proc/sys/kernel/ostype).
	OS string `json:"os"`
	// Kernel is the kernel release, e.g. "6.1.0-18-amd64"
	// (/proc/sys/kernel/osrelease).
	Kernel string `json:"kernel"`
	// Arch is the machine name as uname -m gives it, e.g. "x86_64",
	// "aarch64" (/proc/sys/kernel/arch).
	Arch string `json:"arch"`
	// CPUs is the number of online logical CPUs (processors listed in
	// /proc/cpuinfo).
	CPUs int `json:"cpus"`
	// CPUModel is the model name of the first processor in /proc/cpuinfo;
	// empty on architectures whose cpuinfo has none.
	CPUModel string `json:"cpu_model"`
	// MemTotalBytes is the usable RAM, bytes (MemTotal of /proc/meminfo).
	MemTotalBytes uint64 `json:"mem_total_bytes"`
	// THPEnabled is the transparent huge pages mode, the bracketed word of
	// /sys/kernel/mm/transparent_hugepage/enabled: "always", "madvise" or
	// "never"; empty when the kernel has no THP.
	THPEnabled string `json:"thp_enabled"`
}

// ReadHost reads the host description from a proc tree (normally "/proc")
// and a sys tree (normally "/sys"); tests pass fixture trees. /proc/meminfo
// and /proc/cpuinfo are parsed with github.com/prometheus/procfs (cpuinfo in
// the format of the architecture the program runs on); the other values are
// one-line files read directly.
//
// It returns an error naming the file when cpuinfo, meminfo (or its
// MemTotal), sys/kernel/hostname, ostype or osrelease cannot be read. A
// missing sys/kernel/arch (older kernels) falls back to uname(2) of the
// running kernel; a missing THP file leaves THPEnabled empty.
func ReadHost(procRoot, sysRoot string) (Host, error) {
	var h Host
	pfs, err := procfs.NewFS(procRoot)
	if err != nil {
		return Host{}, fmt.Errorf("read host: proc tree %s: %w", procRoot, err)
	}

	mi, err := pfs.Meminfo()
	if err != nil {
		return Host{}, fmt.Errorf("read host: %s: %w", filepath.Join(procRoot, "meminfo"), err)
	}
	if mi.MemTotalBytes == nil {
		return Host{}, fmt.Errorf("read host: %s: no MemTotal line", filepath.Join(procRoot, "meminfo"))
	}
	h.MemTotalBytes = *mi.MemTotalBytes

	cpus, err := pfs.CPUInfo()
	if err != nil {
		return Host{}, fmt.Errorf("read host: %s: %w", filepath.Join(procRoot, "cpuinfo"), err)
	}
	h.CPUs = len(cpus)
	if len(cpus) > 0 {
		h.CPUModel = cpus[0].ModelName
	}

	for _, f := range []struct {
		name string
		dst  *string
	}{
		{"hostname", &h.Hostname},
		{"ostype", &h.OS},
		{"osrelease", &h.Kernel},
	} {
		if *f.dst, err = readLine(filepath.Join(procRoot, "sys", "kernel", f.name)); err != nil {
			return Host{}, fmt.Errorf("read host: %w", err)
		}
	}

	h.Arch, err = readLine(filepath.Join(procRoot, "sys", "kernel", "arch"))
	if errors.Is(err, fs.ErrNotExist) {
		h.Arch, err = unameMachine()
	}
	if err != nil {
		return Host{}, fmt.Errorf("read host: %w", err)
	}

	thp := filepath.Join(sysRoot, "kernel", "mm", "transparent_hugepage", "enabled")
	line, err := readLine(thp)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return Host{}, fmt.Errorf("read host: %w", err)
	default:
		h.THPEnabled = procfile.Selected(line)
		if h.THPEnabled == "" {
			return Host{}, fmt.Errorf("read host: %s: no bracketed mode in %q", thp, line)
		}
	}
	return h, nil
}

// readLine returns the first line of a small file, trimmed; errors name the
// file.
func readLine(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err // *fs.PathError names the file
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line), nil
}

// unameMachine returns the machine field of uname(2), e.g. "x86_64".
func unameMachine() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", fmt.Errorf("uname: %w", err)
	}
	return unix.ByteSliceToString(u.Machine[:]), nil
}
