package loadtest

import (
	"cmp"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/results"
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
			loc, f, err := reserveResults("", "", nil, "smoke", now, false, 0o600)
			paths[i], errs[i] = loc.path(), err
			f.Close()
			loc.close()
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
	loc, f, err := reserveResults(out, "", nil, "smoke", time.Now(), replace, 0o600)
	loc.close()
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
	_, _, err := reserveResults("", "", nil, "smoke", time.Now(), false, 0o600)
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
	if _, _, err := reserveResults("", "", nil, "smoke", time.Now(), false, 0o600); err == nil || !strings.Contains(err.Error(), "erplab-results is a directory of another user") {
		t.Fatalf("another user's erplab-results: %v", err)
	}
}

// A results directory swapped for a symbolic link after the run reserved
// its files (a user who owns the current directory renames
// ./erplab-results away and plants a link to a directory of their
// choosing) takes nothing there: the document is written into the
// directory the run opened, as is every file of a --out DIR run.
func TestResultsDirSwappedMidRun(t *testing.T) {
	cwd := t.TempDir()
	t.Chdir(cwd)
	for _, dir := range []string{"", filepath.Join(cwd, "chosen")} {
		elsewhere := t.TempDir()
		loc, f, err := reserveResults("", dir, nil, "smoke", time.Now(), false, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		real := cmp.Or(dir, "erplab-results")
		moved := real + ".moved"
		if err := os.Rename(real, moved); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(elsewhere, real); err != nil {
			t.Fatal(err)
		}
		doc := &results.Document{Format: results.Format, Schema: results.SchemaVersion, Workload: "smoke", Status: "completed"}
		if err := writeResults(io.Discard, doc, results.NewStreamNamed(f, loc.dir.Join(loc.streamName())), loc, false, 0o600); err != nil {
			t.Fatal(err)
		}
		loc.close()
		if es, _ := os.ReadDir(elsewhere); len(es) != 0 {
			t.Errorf("dir %q: written through the planted link: %v", dir, es)
		}
		if st, err := os.Stat(filepath.Join(moved, loc.name)); err != nil || st.Size() == 0 {
			t.Errorf("dir %q: the document is not in the directory the run opened: %v", dir, err)
		}
		if err := os.Remove(real); err != nil {
			t.Fatal(err)
		}
	}
}

// --out DIR (or ERPLAB_PGBENCH_OUT=DIR/) that is a symbolic link another
// user planted, or one to another user's directory, is refused; a link
// of this user to its own directory is followed.
func TestResultsDirUserLinks(t *testing.T) {
	base := t.TempDir()
	mine := filepath.Join(base, "mine")
	link := filepath.Join(base, "link")
	if err := os.Mkdir(mine, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(mine, link); err != nil {
		t.Fatal(err)
	}
	loc, f, err := reserveResults("", link, nil, "smoke", time.Now(), false, 0o600)
	if err != nil {
		t.Fatalf("own link to own directory: %v", err)
	}
	f.Close()
	loc.close()
	if es, _ := os.ReadDir(mine); len(es) != 1 {
		t.Errorf("own link: %v in %s, want the stream", es, mine)
	}
	if os.Geteuid() != 0 {
		t.Skip("other users' links and directories need root to make")
	}
	other := filepath.Join(base, "other")
	theirs := filepath.Join(base, "theirs")
	toOther := filepath.Join(base, "to-other")
	for _, err := range []error{os.Mkdir(other, 0o777), os.Chown(other, 65534, 65534), os.Symlink(mine, theirs), os.Lchown(theirs, 65534, 65534), os.Symlink(other, toOther)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ dir, want string }{
		{theirs, "results directory: " + theirs + " is a symbolic link of another user (uid 65534)"},
		{toOther, "results directory: " + toOther + " (-> " + other + ") is a directory of another user (uid 65534)"},
	} {
		_, _, err := reserveResults("", c.dir, nil, "smoke", time.Now(), false, 0o600)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("--out %s: %v, want %q", c.dir, err, c.want)
		}
	}
	if es, _ := os.ReadDir(other); len(es) != 0 {
		t.Errorf("written into another user's directory: %v", es)
	}
}
