package profile

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/leftover"
	"github.com/erplab/erplab/internal/pgcluster"
)

// A probe perf cannot add (a function the binary lacks) after one it
// added: the add fails in one line naming the function, and neither the
// probe added before nor the record's entry stays (a partial set would
// read as no catch-ups).
func TestAddProbesPartialRemoved(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: adding uprobes needs root")
	}
	ctx := context.Background()
	perf, _, err := Check(ctx, Host{})
	if err != nil {
		t.Skipf("no perf: %v", err)
	}
	bin, err := pgcluster.FindBinDir()
	if err != nil {
		t.Skipf("no PostgreSQL binaries: %v", err)
	}
	rec, err := leftover.OpenDir(filepath.Join(t.TempDir(), "leftover"))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	group := "erplab_" + hex.EncodeToString(b)
	t.Cleanup(func() { _, _ = deleteGroup(ctx, perf, group) })
	specs := []probeSpec{{"cleanup", "SICleanupQueue", "", EvCleanup}, {"catchup", "erplab_no_such_function", "", EvCatchup}}
	p, err := addProbes(ctx, perf, filepath.Join(bin, "postgres"), group, specs, rec)
	var u *Unavailable
	if p != nil || !errors.As(err, &u) || !strings.Contains(err.Error(), "erplab_no_such_function") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("probes %v, error %v", p, err)
	}
	t.Log(err)
	if out, _ := exec.Command(perf, "probe", "-l", group+":*").CombinedOutput(); strings.Contains(string(out), group+":") {
		t.Errorf("probes of the failed add left:\n%s", out)
	}
	if es, err := rec.Entries(); err != nil || len(es) != 0 {
		t.Errorf("record entries %v (%v)", es, err)
	}
}

// Each probe of the server's binary goes on an instruction the kernel
// emulates, none single-stepped: ProcessCatchupInterrupt (entry: a load
// of catchupInterruptPending) on its first conditional jump and
// InvalidateSystemCaches (entry: xor) on its jump, both in the entry
// block; the others' entry is a push.
func TestProbeOffsetsEmulated(t *testing.T) {
	dir, err := pgcluster.FindBinDir()
	if err != nil {
		t.Skipf("no PostgreSQL binaries: %v", err)
	}
	bin := filepath.Join(dir, "postgres")
	for _, s := range probeSpecs("amd64") {
		fn, _, _ := strings.Cut(s.fn, "%")
		code, ok := funcCode(bin, fn)
		if !ok {
			t.Skipf("%s: no x86-64 code of %s", bin, fn)
		}
		off := 0
		if s.arg == "" && fn == s.fn {
			off = probeOffset(bin, fn)
		}
		if !emulated(code[off:]) {
			t.Errorf("%s+%d: % x single-stepped", fn, off, code[off:min(off+6, len(code))])
		}
		if s.ev == EvCatchup && off == 0 {
			t.Errorf("%s: at its entry", fn)
		}
	}
}

// The entry block's first emulated instruction, unless a branch in the
// function lands between the entry and it.
func TestCheapestOffset(t *testing.T) {
	var (
		mov  = []byte{0x48, 0x8b, 0x47, 0x30} // mov 0x30(%rdi),%rax
		test = []byte{0x85, 0xc0}             // test %eax,%eax
		je   = []byte{0x74, 0x01}             // je +1
		xor  = []byte{0x31, 0xff}             // xor %edi,%edi
		ret  = []byte{0xc3}
	)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, c := range []struct {
		name string
		code []byte
		want int
	}{
		{"load, test, je", cat(mov, test, je, ret, ret), 6},
		{"push r13 after a load", cat(mov, []byte{0x41, 0x55}, ret), 4},
		{"xor, jmp rel32", cat(xor, []byte{0xe9, 0, 0, 0, 0}), 2},
		{"no emulated instruction before ret", cat(mov, test, ret), 0},
		{"a loop back to the test", cat(mov, test, je, ret, []byte{0xeb, 0xf9}), 0}, // jmp -7: to offset 4
		{"undecodable", []byte{0x0f, 0xff}, 0},
	} {
		if got := cheapestOffset(c.code); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}
