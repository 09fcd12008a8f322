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
			paths[i], _, errs[i] = reserveResults("", "", "smoke", now, false)
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
	if _, _, err := reserveResults(out, "", "smoke", time.Now(), false); err != nil {
		t.Fatal(err)
	}
	_, _, err := reserveResults(out, "", "smoke", time.Now(), false)
	if err == nil || !strings.Contains(err.Error(), "x.jsonl exists") {
		t.Fatalf("second reservation of %s: %v", out, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "y.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := reserveResults(filepath.Join(dir, "y.json"), "", "smoke", time.Now(), false); err == nil || !strings.Contains(err.Error(), "y.json exists") {
		t.Fatalf("existing y.json: %v", err)
	}
}
