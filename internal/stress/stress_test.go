package stress

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// TestSplitSeparatesCPUFromIO runs one cpu and one io worker together and
// checks that the workers' own getrusage split tells them apart: the sqrt
// worker's time is user time, the sync(2) worker's is system time.
func TestSplitSeparatesCPUFromIO(t *testing.T) {
	rep, err := RunFor(context.Background(), Spec{CPU: 1, IO: 1}, 2*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Errors) > 0 {
		t.Fatalf("errors: %v", rep.Errors)
	}
	c, io := rep.Worker(KindCPU), rep.Worker(KindIO)
	t.Logf("cpu %+v", c)
	t.Logf("io  %+v", io)
	t.Logf("host %+v", rep.Host)
	if c.Ops == 0 || io.Ops == 0 {
		t.Fatalf("no work done: cpu ops %d, io ops %d", c.Ops, io.Ops)
	}
	if c.UserS <= c.SystemS {
		t.Errorf("cpu worker: user %.3f s not above system %.3f s", c.UserS, c.SystemS)
	}
	// sync(2) mostly sleeps in the kernel: on a loaded host the io worker
	// may use only a few milliseconds of CPU in 2 s, below what the
	// rusage split resolves (the clock tick), so its system-over-user
	// order is asserted only when it used at least 50 ms.
	if io.SystemS+io.UserS >= 0.05 && io.SystemS <= io.UserS {
		t.Errorf("io worker: system %.3f s not above user %.3f s", io.SystemS, io.UserS)
	}
	// The shares too: an io worker of 6 ms CPU on a loaded host had a
	// system share of 0 (all its ticks fell in user time).
	if io.SystemS+io.UserS >= 0.05 && c.SystemShare >= io.SystemShare {
		t.Errorf("system share: cpu %.1f%% not below io %.1f%%", c.SystemShare, io.SystemShare)
	}
	if sum := rep.Host.User + rep.Host.Nice + rep.Host.System + rep.Host.Iowait + rep.Host.Idle + rep.Host.IRQ + rep.Host.SoftIRQ + rep.Host.Steal; sum < 99 || sum > 101 {
		t.Errorf("host split sums to %.2f%%, want 100", sum)
	}
	var buf bytes.Buffer
	if err := WriteTable(&buf, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "system share") {
		t.Errorf("table lacks header:\n%s", buf.String())
	}
}

// TestCompareTHP runs the VM worker with huge pages allowed and refused;
// the refused half must not allocate THP faults beyond other processes'
// and its pages are all base pages (pgfault per MiB higher).
func TestCompareTHP(t *testing.T) {
	c, err := CompareTHP(context.Background(), Spec{VM: 1, VMBytes: 64 << 20}, 2*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, r := c.Allowed.Worker(KindVM), c.Refused.Worker(KindVM)
	if a.Ops == 0 || r.Ops == 0 {
		t.Fatalf("no cycles: allowed %d, refused %d", a.Ops, r.Ops)
	}
	var buf bytes.Buffer
	if err := WriteComparison(&buf, c); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + buf.String())
	if c.THPHost == "always" || c.THPHost == "madvise" {
		if c.Allowed.VM.THPFaultAlloc == 0 {
			t.Errorf("host THP %s, MADV_HUGEPAGE: no thp_fault_alloc", c.THPHost)
		}
		// Base pages fault once per 4 KiB; huge pages once per 2 MiB.
		// pgfault is /proc/vmstat's, the whole host's: on a loaded host
		// other processes' faults drown the worker's (one cycle of 64 MiB
		// per half under load: 94672 allowed vs 81346 refused), so the
		// order is an acceptance measurement (ERPLAB_STRESS_ACCEPT=1).
		fa := float64(c.Allowed.VM.PgFault) / float64(a.Ops)
		fr := float64(c.Refused.VM.PgFault) / float64(r.Ops)
		if fr <= fa {
			if os.Getenv("ERPLAB_STRESS_ACCEPT") != "" {
				t.Errorf("page faults per cycle: refused %.0f not above allowed %.0f", fr, fa)
			} else {
				t.Logf("page faults per cycle: refused %.0f not above allowed %.0f (host-wide counters on a busy host); ERPLAB_STRESS_ACCEPT=1 makes it a failure", fr, fa)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	if err := (Spec{}).Validate(); !errors.Is(err, ErrNoWorkers) {
		t.Errorf("empty spec: %v", err)
	}
	for _, s := range []Spec{{CPU: -1}, {VM: 1, VMBytes: 10}, {VM: 1, THP: "maybe"}, {IO: 2000}} {
		if err := s.Validate(); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: want a one-line error, got %v", s, err)
		}
	}
}

func TestParseSpec(t *testing.T) {
	sp, err := ParseSpec("vm=2, vm-bytes=64M,thp=nohuge,cpu=1")
	if err != nil {
		t.Fatal(err)
	}
	if sp.VM != 2 || sp.VMBytes != 64<<20 || sp.THP != THPRefuse || sp.CPU != 1 {
		t.Errorf("got %+v", sp)
	}
	for _, bad := range []string{"", "vm", "vm=x", "gpu=1", "vm=1,vm-bytes=12Q"} {
		if _, err := ParseSpec(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if n, err := ParseSize("1GiB"); err != nil || n != 1<<30 {
		t.Errorf("1GiB = %d, %v", n, err)
	}
}
