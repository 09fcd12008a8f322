package pgtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPreloadWaitSampling checks the shared_preload_libraries that
// Options.WaitSampling gives, on fake installation directories.
func TestPreloadWaitSampling(t *testing.T) {
	mk := func(t *testing.T, libs ...string) string {
		root := t.TempDir()
		bin := filepath.Join(root, "bin")
		for _, d := range []string{bin, filepath.Join(root, "lib")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, l := range libs {
			if err := os.WriteFile(filepath.Join(root, "lib", l+".so"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return bin
	}
	for _, c := range []struct {
		name     string
		libs     []string
		settings map[string]string
		want     string // shared_preload_libraries; "" = not installed
	}{
		{"both", []string{"pg_stat_statements", "pg_wait_sampling"}, nil, "pg_stat_statements,pg_wait_sampling"},
		{"no pgss", []string{"pg_wait_sampling"}, nil, "pg_wait_sampling"},
		{"caller's list kept", []string{"pg_stat_statements", "pg_wait_sampling"}, map[string]string{"shared_preload_libraries": "pg_stat_statements,auto_explain"}, "pg_stat_statements,auto_explain,pg_wait_sampling"},
		{"absent", []string{"pg_stat_statements"}, map[string]string{"x": "1"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, why := preloadWaitSampling(mk(t, c.libs...), c.settings)
			if c.want == "" {
				if why == "" || !strings.Contains(why, "pg_wait_sampling.so") || got["shared_preload_libraries"] != "" {
					t.Fatalf("got %v, reason %q: want no preload and a reason naming the library", got, why)
				}
				return
			}
			if why != "" || got["shared_preload_libraries"] != c.want {
				t.Fatalf("got %q (reason %q), want %q", got["shared_preload_libraries"], why, c.want)
			}
			if c.settings != nil && c.settings["shared_preload_libraries"] != "pg_stat_statements,auto_explain" {
				t.Fatalf("caller's settings map modified: %v", c.settings)
			}
		})
	}
}
