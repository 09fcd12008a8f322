package loadtest

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Runs started in the same second in the same directory each get their
// own results names: 8 reservations at once give 8 distinct stems, each
// with its reserved (empty) stream, and none of them is overwritten.
func TestReserveResultsConcurrent(t *testing.T) {
	t.Chdir(t.TempDir())
	now := time.Date(2026, 12, 1, 11, 22, 50, 0, time.UTC)
	const n = 8
	paths := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var f *os.File
			paths[i], f, errs[i] = reserveResults("", "", "smoke", now, false, 0o600)
			f.Close()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(paths)
	want := []string{"erplab-results/20261201-112250-smoke.json"}
	for i := 2; i <= n; i++ {
		want = append(want, "erplab-results/20261201-112250-smoke-"+string(rune('0'+i))+".json")
	}
	sort.Strings(want)
	if strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Fatalf("paths:\n%s\nwant:\n%s", strings.Join(paths, "\n"), strings.Join(want, "\n"))
	}
	for _, p := range paths {
		st, err := os.Stat(strings.TrimSuffix(p, ".json") + ".jsonl")
		if err != nil || st.Size() != 0 {
			t.Errorf("%s: reserved stream %v, %v", p, st, err)
		}
	}
}

// An explicit --out whose stream or document exists is refused, not
// renamed.
func TestReserveResultsOutTaken(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.json")
	f, err := reserveResults1(out, false)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = reserveResults1(out, false)
	if err == nil || !strings.Contains(err.Error(), "x.jsonl exists") {
		t.Fatalf("second reservation of %s: %v", out, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "y.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := reserveResults1(filepath.Join(dir, "y.json"), false); err == nil || !strings.Contains(err.Error(), "y.json exists") {
		t.Fatalf("existing y.json: %v", err)
	}
}

// reserveResults1 reserves out's files as erplab run --out would.
func reserveResults1(out string, replace bool) (*os.File, error) {
	_, f, err := reserveResults(out, "", "smoke", time.Now(), replace, 0o600)
	return f, err
}

// plantVictim is a file standing in for /etc/shadow and a check that it
// is unchanged.
func plantVictim(t *testing.T) (string, func()) {
	t.Helper()
	v := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(v, []byte("root:secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return v, func() {
		t.Helper()
		if b, err := os.ReadFile(v); err != nil || string(b) != "root:secret\n" {
			t.Fatalf("the victim was changed: %q, %v", b, err)
		}
	}
}

// A symbolic link planted at the document's or the stream's name is
// refused in one line, also where erplab pgbench replaces its files
// (replace); the link's target is unchanged. The reserved stream is
// created 0600.
func TestReserveResultsRefusesLinks(t *testing.T) {
	v, unchanged := plantVictim(t)
	dir := t.TempDir()
	for _, c := range []struct {
		out, link string
		replace   bool
	}{
		{"a.json", "a.json", false}, {"b.json", "b.jsonl", false},
		{"c.json", "c.json", true}, {"d.json", "d.jsonl", true},
	} {
		link := filepath.Join(dir, c.link)
		if err := os.Symlink(v, link); err != nil {
			t.Fatal(err)
		}
		f, err := reserveResults1(filepath.Join(dir, c.out), c.replace)
		if err == nil {
			f.Close()
		}
		if want := "results file " + link + " is a symbolic link; choose another --out or remove it"; err == nil || err.Error() != want {
			t.Errorf("--out %s, link at %s (replace %v): %v, want %q", c.out, c.link, c.replace, err, want)
		}
	}
	unchanged()
	f, err := reserveResults1(filepath.Join(dir, "e.json"), false)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if st, err := os.Stat(filepath.Join(dir, "e.jsonl")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("reserved stream %v, %v: want mode 0600", st, err)
	}
}

// The default ./erplab-results is refused in one line when it is a
// symbolic link (root's results would go where it points) or another
// user's directory; nothing is written there.
func TestReserveResultsRefusesPlantedDefaultDir(t *testing.T) {
	cwd := t.TempDir()
	t.Chdir(cwd)
	elsewhere := t.TempDir()
	if err := os.Symlink(elsewhere, "erplab-results"); err != nil {
		t.Fatal(err)
	}
	_, _, err := reserveResults("", "", "smoke", time.Now(), false, 0o600)
	if want := "results directory: erplab-results is a symbolic link: erplab writes only into a real directory of its user there"; err == nil || err.Error() != want {
		t.Fatalf("%v, want %q", err, want)
	}
	if es, _ := os.ReadDir(elsewhere); len(es) != 0 {
		t.Fatalf("written through the link: %v", es)
	}
	if os.Geteuid() != 0 {
		return
	}
	if err := os.Remove("erplab-results"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir("erplab-results", 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown("erplab-results", 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, _, err := reserveResults("", "", "smoke", time.Now(), false, 0o600); err == nil || !strings.Contains(err.Error(), "erplab-results is a directory of another user") {
		t.Fatalf("another user's erplab-results: %v", err)
	}
}
