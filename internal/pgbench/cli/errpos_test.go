package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A server error with a position is printed with libpq's cursor display
// (LINE n: ... and the caret line), as pgbench prints PQerrorMessage:
// the stderr of `-n -t 1 -M mode -f testdata/errpos/X.sql` is compared
// line for line with what pgbench 15.18 printed for the same script
// (testdata/errpos/X.mode.stderr, recorded; its last line "Run was
// aborted..." is left out, it is checked elsewhere), and with the
// installed pgbench when there is one. The cases: a syntax error, a
// second line, lines cut left, right and on both sides at 60 columns,
// tabs, East Asian wide characters, a substituted variable (simple mode
// shows the value, extended mode $1), an internal query's position
// (PL/pgSQL EXECUTE), and an error without a position; prepared mode
// shows the Parse's error and then the execution's.
func TestErrorPositionLikeLibpq(t *testing.T) {
	useServer(t)
	scripts, err := filepath.Glob("testdata/errpos/*.sql")
	if err != nil || len(scripts) < 10 {
		t.Fatalf("scripts: %v %v", scripts, err)
	}
	pgbench, _ := findPgbench(t)
	dir := t.TempDir()
	n := 0
	for _, sc := range scripts {
		abs, err := filepath.Abs(sc)
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range []string{"simple", "extended", "prepared"} {
			rec, err := os.ReadFile(strings.TrimSuffix(sc, ".sql") + "." + mode + ".stderr")
			if err != nil {
				t.Fatal(err)
			}
			want := strings.TrimRight(string(rec), "\n")
			args := []string{"-n", "-t", "1", "-M", mode, "-f", abs}
			n++
			got := runErplab(context.Background(), dir, args, n)
			if g := withoutAbortLine(got.stderr); g != want {
				t.Errorf("%s -M %s: erplab printed\n%s\npgbench 15.18 printed\n%s", filepath.Base(sc), mode, g, want)
			}
			if pgbench != "" {
				if p := withoutAbortLine(runPgbench(pgbench, dir, args).stderr); p != want {
					t.Errorf("%s -M %s: the installed pgbench printed\n%s\nthe recording says\n%s", filepath.Base(sc), mode, p, want)
				}
			}
		}
	}
}

// withoutAbortLine drops pgbench's closing "Run was aborted" line and
// erplab's own lines (erplab: ...) from stderr.
func withoutAbortLine(stderr string) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimRight(stderr, "\n"), "\n") {
		if strings.Contains(l, "Run was aborted") || strings.HasPrefix(l, "erplab:") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}
