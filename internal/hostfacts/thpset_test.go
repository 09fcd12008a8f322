package hostfacts

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSetTHPRefuses: a word the file does not take, or a file that is not
// a choice file, is refused before anything is written; an absent file is
// an error naming it. (The live round trip is remedy/thp's
// TestApplyUndoRoundTrip.)
func TestSetTHPRefuses(t *testing.T) {
	sys := t.TempDir()
	dir := filepath.Join(sys, "kernel", "mm", "transparent_hugepage")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "enabled")
	if err := os.WriteFile(file, []byte("always [madvise] never\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{{"enabled", "advise"}, {"enabled", "always\nnever"}, {"../../../x", "never"}, {"shmem_enabled", "madvise"}} {
		if err := SetTHP(sys, c[0], c[1]); err == nil {
			t.Errorf("SetTHP(%q, %q): no error", c[0], c[1])
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "always [madvise] never\n" {
		t.Fatalf("enabled changed by refused writes: %q", b)
	}
	if v := ReadTHP(sys, "enabled"); v.Mode != "madvise" || v.Err != nil {
		t.Fatalf("ReadTHP = %+v", v)
	}
	v := ReadTHP(sys, "defrag")
	if !errors.Is(v.Err, fs.ErrNotExist) || !strings.Contains(v.Path, "transparent_hugepage/defrag") {
		t.Fatalf("ReadTHP of an absent file = %+v", v)
	}
	if err := SetTHP(sys, "defrag", "never"); err == nil || !strings.Contains(err.Error(), "transparent_hugepage/defrag") {
		t.Fatalf("SetTHP of an absent file: %v", err)
	}
}
