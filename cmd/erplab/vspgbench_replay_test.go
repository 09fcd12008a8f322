package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/pgtest"
)

// replayRowRE is a replay row that finished: log, sessions, statements,
// erplab order, 1 round, errors pgreplay/erplab, both CPU figures and
// both ratios.
var replayRowRE = regexp.MustCompile(`(?m)^\s*(select-only|simple-update) log, 4 sessions, (\d+) statements\s+--order (none|gates)\s+1\s+(\d+)/(\d+)\s+[\d.]+ \[[\d.-]+\] µs\s+[\d.]+ \[[\d.-]+\] µs\s+[\d.]+ \[[\d.-]+\]\s+[\d.]+ \[[\d.-]+\]\s`)

// erplab vs-pgbench --cell replay on its throwaway server: it makes the
// select-only and simple-update logs itself (5 transactions per client),
// pgreplay and erplab (both orders) replay each without errors, and
// every row has both tools' CPU per statement and the ratios. On --dsn
// the rows are skipped with the reason (the logging settings are not
// changed on a user's server).
func TestVsPgbenchReplayRows(t *testing.T) {
	pgtest.SkipShort(t)
	pgtest.NeedProgram(t, "pgreplay")
	pgtest.NeedProgram(t, "pgbench")
	code, text := exitCode(t, erplab(t, t.TempDir(), "vs-pgbench", "--cell", "replay", "--replay-transactions", "5", "--repeat", "1"))
	t.Logf("exit %d:\n%s", code, text)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	rows := replayRowRE.FindAllStringSubmatch(text, -1)
	if len(rows) != 4 {
		t.Fatalf("%d finished replay rows, want 4 (2 logs x 2 erplab orders)", len(rows))
	}
	for _, r := range rows {
		if r[2] == "0" || r[4] != "0" || r[5] != "0" {
			t.Errorf("%s, --order %s: %s statements, errors %s/%s; want statements and no errors", r[1], r[3], r[2], r[4], r[5])
		}
	}
	if strings.Contains(text, "timed out") || strings.Contains(text, "erplab vs pgbench:") {
		t.Errorf("a replay timed out, or pgbench cells ran with --cell replay alone")
	}

	code, text = exitCode(t, erplab(t, t.TempDir(), "vs-pgbench", "--cell", "replay", "--dsn", srv.DSN(t, "postgres")))
	if code != 0 || !strings.Contains(text, "replay rows skipped: the replay rows change the server's logging settings") {
		t.Fatalf("--dsn: exit %d:\n%s", code, text)
	}
}
