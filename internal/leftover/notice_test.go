package leftover

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// FirstNotice returns a path once while it is the same directory: again
// after it was replaced, never for a path already noticed; the notices
// file forgets paths that are gone; nothing at the paths is touched.
func TestFirstNotice(t *testing.T) {
	rec, err := OpenDir(filepath.Join(t.TempDir(), "rec"))
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	a, b, c := filepath.Join(base, "a"), filepath.Join(base, "b"), filepath.Join(base, "c")
	for _, d := range []string{a, b, c} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(base, "missing")
	step := func(name string, paths []string, want ...string) {
		t.Helper()
		got, err := rec.FirstNotice(paths)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s: FirstNotice(%q) = %q, %v; want %q", name, paths, got, err, want)
		}
	}
	step("first", []string{a, b}, a, b)
	step("again", []string{a, b})
	step("a new one", []string{a, b, c}, c)
	step("unstattable: always said", []string{missing, a}, missing)
	step("unstattable again", []string{missing}, missing)
	// a replaced (the old one kept elsewhere, so the inode differs)
	if err := os.Rename(a, a+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(a, 0o700); err != nil {
		t.Fatal(err)
	}
	step("replaced", []string{a, b, c}, a)
	if err := os.RemoveAll(c); err != nil {
		t.Fatal(err)
	}
	step("c gone", []string{a, b})
	if _, err := os.Stat(b); err != nil {
		t.Fatalf("b was touched: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(rec.Dir(), noticedFile))
	if err != nil {
		t.Fatal(err)
	}
	var ns []noticed
	if err := json.Unmarshal(raw, &ns); err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, n := range ns {
		kept = append(kept, n.Path)
	}
	if !slices.Equal(kept, []string{b, a}) {
		t.Fatalf("notices file holds %q, want b and the new a only", kept)
	}
	// the notices file is no entry
	if es, err := rec.Entries(); err != nil || len(es) != 0 {
		t.Fatalf("entries %v, %v", es, err)
	}
}
