package profile

import (
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
