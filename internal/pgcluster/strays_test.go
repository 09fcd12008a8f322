package pgcluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/leftover"
)

// Directories named erplab-pg-* that no entry names, whose marker holds
// a dead PID (an older erplab's), are named once each, with the rm
// command that removes them, and never touched: the next ReapOrphans
// says nothing of them, a new one is named alone, and the command given
// removes its directory. Real directories in a TMPDIR of the test's own;
// no server is started.
func TestStraysNamedOnce(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv(leftover.EnvStateDir, filepath.Join(t.TempDir(), "state"))
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stray := func(name, marker string) string {
		t.Helper()
		d := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(d, "data"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(marker+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	deadPID := strconv.Itoa(dead.Process.Pid)
	a, b := stray("erplab-pg-4151650996", deadPID), stray("erplab-pg-2718281828", deadPID)
	live := stray("erplab-pg-31415", strconv.Itoa(os.Getpid()))                  // its owner lives
	token := stray("erplab-pg-1a2b3c4d5e6f", "0123456789abcdef0123456789abcdef") // today's marker: a token, not a PID
	named := func(line, d string) bool {
		return strings.Contains(line, d+" (not in erplab's record: not touched; if it is yours and no postgres runs from it, remove it: rm -rf "+d+"; not mentioned again)")
	}

	_, line := reapOrphans(t)
	if !strings.HasPrefix(line, "erplab: left alone (erplab cannot prove it created them): ") || strings.Count(line, "\n") != 1 ||
		!named(line, a) || !named(line, b) || strings.Contains(line, live) || strings.Contains(line, token) {
		t.Fatalf("first line:\n%s", line)
	}
	if _, line = reapOrphans(t); line != "" {
		t.Fatalf("the second ReapOrphans repeats itself:\n%s", line)
	}
	c := stray("erplab-pg-1414213562", deadPID)
	_, line = reapOrphans(t)
	if !named(line, c) || strings.Contains(line, a) || strings.Contains(line, b) {
		t.Fatalf("with a new stray:\n%s", line)
	}
	for _, d := range []string{a, b, c, live, token} {
		if _, err := os.Stat(filepath.Join(d, "data")); err != nil {
			t.Errorf("%s was touched: %v", d, err)
		}
	}
	// The command given is the one that removes it.
	_, cmd, _ := strings.Cut(line, "remove it: ")
	cmd, _, _ = strings.Cut(cmd, ";")
	if out, err := exec.Command("sh", "-c", cmd).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	if _, err := os.Stat(c); !os.IsNotExist(err) {
		t.Fatalf("%q left %s (%v)", cmd, c, err)
	}
	if _, line = reapOrphans(t); line != "" {
		t.Fatalf("after the removal:\n%s", line)
	}
}
