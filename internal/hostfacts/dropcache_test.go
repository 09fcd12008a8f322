package hostfacts

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDropPageCache(t *testing.T) {
	proc := t.TempDir()
	knob := filepath.Join(proc, "sys", "vm", "drop_caches")
	if err := os.MkdirAll(filepath.Dir(knob), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(knob, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := DropPageCache(proc); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(knob); err != nil || string(b) != "1" {
		t.Fatalf("drop_caches = %q, %v; want \"1\"", b, err)
	}
	if err := DropPageCache(filepath.Join(proc, "absent")); err == nil {
		t.Fatal("DropPageCache under a proc root without the knob: no error")
	}
}
