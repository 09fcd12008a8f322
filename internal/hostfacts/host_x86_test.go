//go:build amd64 || 386

package hostfacts

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The fixture cpuinfo files are in the x86 format, which procfs parses only
// when the program runs on x86.

func TestReadHostFixture(t *testing.T) {
	h, err := readHost("testdata/golden/proc", "testdata/golden/sys")
	if err != nil {
		t.Fatal(err)
	}
	want := Host{
		Hostname:      "erp-db-01",
		OS:            "Linux",
		Kernel:        "6.1.0-18-amd64",
		Arch:          "x86_64",
		CPUs:          4,
		CPUModel:      "Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz",
		MemTotalBytes: 16318600 * 1024,
		THPEnabled:    "never",
	}
	if h != want {
		t.Fatalf("readHost(fixture) =\n %+v\nwant\n %+v", h, want)
	}
}

func TestReadHostFixtureWithoutArchAndTHP(t *testing.T) {
	h, err := readHost("testdata/nothp/proc", "testdata/nothp/sys")
	if err != nil {
		t.Fatal(err)
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	want := Host{
		Hostname:      "tiny",
		OS:            "Linux",
		Kernel:        "5.10.0",
		Arch:          unix.ByteSliceToString(u.Machine[:]), // no sys/kernel/arch: uname
		CPUs:          1,
		CPUModel:      "Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz",
		MemTotalBytes: 1024 * 1024,
		THPEnabled:    "", // kernel without THP
	}
	if h != want {
		t.Fatalf("readHost(fixture) =\n %+v\nwant\n %+v", h, want)
	}
}
