package tmpfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFinishSweep: after the sweep dropped the tablespace, FinishSweep
// removes the empty directory Apply created and the state file; a
// directory with something in it is left with its state file (and the
// command that undoes it by hand); another tablespace's state is not
// touched.
func TestFinishSweep(t *testing.T) {
	const ts, other = "erplab_ab_0123abcd_run_t_1_tmpfs", "erplab_ab_0123abcd_run_u_1_tmpfs"
	state := filepath.Join(t.TempDir(), "state")
	base := t.TempDir()
	write := func(name string) (dir, path string) {
		dir = filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		path, err := StatePath(Options{StateDir: state}, "7312345678901234567", "/var/lib/postgresql/15/main", name)
		if err != nil {
			t.Fatal(err)
		}
		st := &State{Version: StateVersion, SystemIdentifier: "7312345678901234567", DataDir: "/var/lib/postgresql/15/main",
			Directory:  &DirRecord{Path: dir, Done: true},
			Tablespace: &TablespaceRecord{Name: name, Location: dir, OID: 16390, Done: true}}
		if err := st.save(path); err != nil {
			t.Fatal(err)
		}
		return dir, path
	}
	dir, path := write(ts)
	otherDir, otherPath := write(other)
	if err := os.WriteFile(filepath.Join(dir, "someones"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	said, err := FinishSweep(state, ts)
	if err != nil || !strings.Contains(said, dir+" left: not empty") || !strings.Contains(said, "--undo --state "+path) {
		t.Fatalf("not empty: %q, %v", said, err)
	}
	for _, p := range []string{dir, path} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed though the directory was not empty: %v", p, err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "someones")); err != nil {
		t.Fatal(err)
	}
	said, err = FinishSweep(state, ts)
	if err != nil || said != "removed "+dir+", removed state file "+path {
		t.Fatalf("empty: %q, %v", said, err)
	}
	for _, p := range []string{dir, path} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", p, err)
		}
	}
	for _, p := range []string{otherDir, otherPath} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("another tablespace's %s touched: %v", p, err)
		}
	}
	if said, err := FinishSweep(state, ts); said != "" || err != nil {
		t.Fatalf("nothing recorded: %q, %v", said, err)
	}
}
