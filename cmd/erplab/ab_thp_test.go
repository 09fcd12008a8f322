package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/experiment"
	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/results"
)

// ab --variant never=thp:never --variant always=thp:always --cold: each
// variant's run records the mode it ran under (set, previous, the server
// restarted under it, undone), and the host's mode afterwards is the one
// before; without --cold the remedy is refused in one line.
func TestABTHP(t *testing.T) {
	pgtest.SkipShort(t)
	if os.Geteuid() != 0 {
		t.Skip("the thp remedy writes the kernel's transparent_hugepage files: root only")
	}
	before := hostfacts.ReadTHP("", "enabled")
	if !before.Known() {
		t.Skipf("no transparent huge pages here: %v", before.Err)
	}
	// a read-only /sys (a container) cannot take even the same word back
	if err := hostfacts.SetTHP("", "enabled", before.Mode); err != nil {
		t.Skipf("cannot write transparent_hugepage/enabled here: %v", err)
	}
	t.Cleanup(func() { // the machine's mode back, whatever happened
		if hostfacts.ReadTHP("", "enabled").Mode != before.Mode {
			if err := hostfacts.SetTHP("", "enabled", before.Mode); err != nil {
				t.Errorf("restoring enabled=%s: %v", before.Mode, err)
			}
		}
	})
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	args := []string{"ab", "--workload", "smoke", "--users", "2", "--duration", "2s", "--think", "20ms", "--progress", "0",
		"--observe=false", "--rounds", "1", "--variant", "never=thp:never", "--variant", "always=thp:always", "--out-dir", "res"}
	out, err := withState(erplab(t, dir, args...), state).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--variant never: remedy thp:never restarts the server under its setting") || !strings.Contains(string(out), "add --cold") {
		t.Fatalf("without --cold: %v\n%s", err, out)
	}
	out, err = withState(erplab(t, dir, append(args, "--cold")...), state).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, mode := range []string{"never", "always"} {
		doc, err := results.Read(filepath.Join(dir, "res", mode+"-1.json"))
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		recs, err := experiment.Remedies(doc)
		if err != nil || len(recs) != 1 {
			t.Fatalf("%s: remedies %+v (%v)", mode, recs, err)
		}
		b, _ := json.Marshal(recs[0].Changed)
		var ch struct {
			Enabled   struct{ Previous, Set string } `json:"enabled"`
			Restarted bool                           `json:"server_restarted"`
			Undone    bool                           `json:"undone"`
		}
		if err := json.Unmarshal(b, &ch); err != nil || ch.Enabled.Set != mode || ch.Enabled.Previous != before.Mode || !ch.Restarted || !ch.Undone {
			t.Errorf("%s: record %s (%v)", mode, b, err)
		}
	}
	if got := hostfacts.ReadTHP("", "enabled").Mode; got != before.Mode {
		t.Errorf("enabled is %s after ab, was %s\n%s", got, before.Mode, out)
	}
	if left, _ := filepath.Glob(filepath.Join(state, "leftover", "*.json")); len(left) != 0 {
		t.Errorf("leftover entries after ab: %v", left)
	}
}
