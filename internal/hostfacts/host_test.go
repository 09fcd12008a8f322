package hostfacts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestReadHostLive(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux /proc and /sys")
	}
	h, err := readHost("/proc", "/sys")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("host: %+v", h)
	// runtime.NumCPU counts the CPUs in this process's affinity mask; on an
	// unrestricted machine that is every online CPU.
	if h.CPUs != runtime.NumCPU() {
		t.Errorf("CPUs = %d, runtime.NumCPU() = %d", h.CPUs, runtime.NumCPU())
	}
	if h.MemTotalBytes == 0 {
		t.Error("MemTotalBytes = 0")
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	if want := unix.ByteSliceToString(u.Release[:]); h.Kernel != want {
		t.Errorf("Kernel = %q, uname release %q", h.Kernel, want)
	}
	if want := unix.ByteSliceToString(u.Machine[:]); h.Arch != want {
		t.Errorf("Arch = %q, uname machine %q", h.Arch, want)
	}
	if want, _ := os.Hostname(); h.Hostname != want {
		t.Errorf("Hostname = %q, os.Hostname %q", h.Hostname, want)
	}
	if h.OS != "Linux" {
		t.Errorf("OS = %q, want Linux", h.OS)
	}
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err == nil {
		switch h.THPEnabled {
		case "always", "madvise", "never":
		default:
			t.Errorf("THPEnabled = %q", h.THPEnabled)
		}
	}
}

func TestReadHostErrors(t *testing.T) {
	if _, err := readHost(filepath.Join(t.TempDir(), "absent"), "/sys"); err == nil {
		t.Error("absent proc root: no error")
	}
	// A proc tree without meminfo: the error names the file.
	proc := t.TempDir()
	_, err := readHost(proc, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "meminfo") {
		t.Errorf("proc without meminfo: err = %v", err)
	}
	// A THP file without a bracketed mode is an error, not a silent "".
	sys := sysWithTHP(t, "always madvise never\n")
	if _, err := readHost("testdata/golden/proc", sys); err == nil || !strings.Contains(err.Error(), "bracketed") {
		t.Errorf("THP without selection: err = %v", err)
	}
}

func TestHostJSON(t *testing.T) {
	b, err := json.Marshal(Host{Hostname: "h", CPUs: 2, MemTotalBytes: 1024, THPEnabled: "madvise"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"hostname":"h"`, `"cpus":2`, `"mem_total_bytes":1024`, `"thp_enabled":"madvise"`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("JSON %s lacks %s", b, k)
		}
	}
}

// readHost is New then Host, as runenv.ReadHost does.
func readHost(procRoot, sysRoot string) (Host, error) {
	f, err := New(procRoot, sysRoot)
	if err != nil {
		return Host{}, err
	}
	return f.Host()
}
