package hostfacts

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
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
	// "never" (redhat_transparent_hugepage/enabled on RHEL 6); empty when
	// the kernel has no THP.
	THPEnabled string `json:"thp_enabled"`
}

// Host reads the host description. /proc/meminfo and /proc/cpuinfo are
// parsed with procfs (cpuinfo in the format of the architecture the
// program runs on); the other values are one-line files.
//
// It returns an error naming the file when cpuinfo, meminfo (or its
// MemTotal), sys/kernel/hostname, ostype or osrelease cannot be read, or
// the THP file has no bracketed mode. A missing sys/kernel/arch (older
// kernels) falls back to uname(2) of the running kernel; a missing THP
// file leaves THPEnabled empty.
func (f FS) Host() (Host, error) {
	var h Host
	mi, err := f.Meminfo()
	if err != nil {
		return Host{}, fmt.Errorf("read host: %w", err)
	}
	if mi.MemTotalBytes == nil {
		return Host{}, fmt.Errorf("read host: %s: no MemTotal line", f.ProcPath("meminfo"))
	}
	h.MemTotalBytes = *mi.MemTotalBytes

	cpus, err := f.CPUInfo()
	if err != nil {
		return Host{}, fmt.Errorf("read host: %w", err)
	}
	h.CPUs = len(cpus)
	if len(cpus) > 0 {
		h.CPUModel = cpus[0].ModelName
	}

	for _, k := range []struct {
		name string
		dst  *string
	}{
		{"hostname", &h.Hostname},
		{"ostype", &h.OS},
		{"osrelease", &h.Kernel},
	} {
		if *k.dst, err = Line(f.ProcPath("sys", "kernel", k.name)); err != nil {
			return Host{}, fmt.Errorf("read host: %w", err)
		}
	}

	h.Arch, err = Line(f.ProcPath("sys", "kernel", "arch"))
	if errors.Is(err, fs.ErrNotExist) {
		h.Arch, err = unameMachine()
	}
	if err != nil {
		return Host{}, fmt.Errorf("read host: %w", err)
	}

	thp := f.THPSettings().Enabled
	if thp.Err != nil && !thp.Absent() {
		return Host{}, fmt.Errorf("read host: %w", thp.Err)
	}
	h.THPEnabled = thp.Mode
	return h, nil
}

// unameMachine returns the machine field of uname(2), e.g. "x86_64".
func unameMachine() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", fmt.Errorf("uname: %w", err)
	}
	return unix.ByteSliceToString(u.Machine[:]), nil
}
