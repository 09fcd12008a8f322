package settings

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/remedy"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

func readSetting(t *testing.T, name string) string {
	t.Helper()
	m, err := readSettings(context.Background(), srv.DSN(t, "postgres"), []string{name})
	if err != nil {
		t.Fatal(err)
	}
	return m[name]
}

func TestSettingsRefusesRestartOnlyAndUnknown(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ body, want string }{
		{"shared_buffers = '256MB'\n", "needs a server restart"},
		{"no_such_setting = 1\n", "unknown setting"},
	} {
		p := filepath.Join(dir, "s.conf")
		if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := apply(context.Background(), &remedy.Target{Cluster: srv.Cluster(t)}, p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%q: want error with %q, got %v", tc.body, tc.want, err)
		}
	}
	if got := readSetting(t, "shared_buffers"); got == "256MB" {
		t.Fatal("shared_buffers changed")
	}
}

func TestParseSettings(t *testing.T) {
	sets, err := parseSettings(strings.NewReader("# c\nwork_mem = '64MB' # x\nsearch_path = 'a, ''b'''\nJoin_Collapse_Limit 6\n\n"), "f")
	if err != nil {
		t.Fatal(err)
	}
	want := []Setting{{"work_mem", "64MB"}, {"search_path", "a, 'b'"}, {"join_collapse_limit", "6"}}
	if len(sets) != len(want) {
		t.Fatalf("got %+v", sets)
	}
	for i := range want {
		if sets[i] != want[i] {
			t.Fatalf("setting %d: got %+v want %+v", i, sets[i], want[i])
		}
	}
	for _, bad := range []string{"", "work_mem\n", "work_mem = 1\nwork_mem = 2\n", "bad-name = 1\n"} {
		if _, err := parseSettings(strings.NewReader(bad), "f"); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}
