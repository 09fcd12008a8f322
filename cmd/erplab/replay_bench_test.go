package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/versus/pgreplay"
)

// benchRowRE is a row of replay bench's first table: tool, finished,
// statements, errors.
var benchRowRE = regexp.MustCompile(`(?m)^\s*(pgreplay|erplab --order none|erplab --order gates)\s+1/1\s+(\d+)\s+(\d+)\s`)

// benchRatioRE is a row of its ratio table with both ratios.
var benchRatioRE = regexp.MustCompile(`(?m)^\s*erplab --order (none|gates)\s+1\s+\d+\.\d\d \[[\d.]+-[\d.]+\]\s+\d+\.\d\d \[[\d.]+-[\d.]+\]\s*$`)

// erplab replay bench on the csvlog of a short pgbench -S run (prepared
// protocol, 2 clients): one round, pgreplay and erplab (both orders)
// replay the same statements without errors, the table has the ratios,
// and the speed-1 run reports erplab's lag quantiles beside pgreplay's
// maximum.
func TestReplayBenchVsPgreplay(t *testing.T) {
	pgtest.SkipShort(t)
	bin := pgtest.NeedProgram(t, "pgreplay")
	settings := map[string]string{"logging_collector": "on", "log_destination": "csvlog", "log_filename": "pg.log",
		"log_connections": "on", "log_disconnections": "on", "log_min_messages": "error", "log_min_error_statement": "log", "lc_messages": "C"}
	c, err := pgcluster.Start(t.Context(), pgcluster.Options{BinDir: srv.BinDir(t), StopWithParent: true, MaxConnections: 30, Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	admin := c.DSN("postgres")
	adminSQL(t, admin, "CREATE DATABASE a")
	runPgbench(t, c.DSN("a"), "-i", "-q", "-s", "1")
	adminSQL(t, admin, "CREATE DATABASE a_before TEMPLATE a")
	// Statements of database a only, from here (its new sessions).
	adminSQL(t, admin, "ALTER DATABASE a SET log_statement = 'all'")
	adminSQL(t, admin, "ALTER DATABASE a SET log_min_duration_statement = 0")
	runPgbench(t, c.DSN("a"), "-n", "-S", "-M", "prepared", "-c", "2", "-t", "50")
	log := filepath.Join(c.DataDir(), "log", "pg.csv")
	waitLogged(t, log, 100)

	code, text := exitCode(t, erplab(t, t.TempDir(), "replay", "bench", log, "--dsn", admin, "--template", "a_before",
		"--rounds", "1", "--lag-runs", "1", "--timeout", "2m", "--pgreplay", bin))
	t.Logf("exit %d:\n%s", code, text)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	rows := benchRowRE.FindAllStringSubmatch(text, -1)
	if len(rows) != len(pgreplay.Tools) {
		t.Fatalf("%d rows of tools with 1/1 finished, want %d", len(rows), len(pgreplay.Tools))
	}
	for _, r := range rows {
		if r[2] != rows[0][2] || r[3] != "0" {
			t.Errorf("%s: %s statements, %s errors; pgreplay %s statements, want the same and 0 errors", r[1], r[2], r[3], rows[0][2])
		}
	}
	if !strings.Contains(text, "stmts/s ratio") || !strings.Contains(text, "CPU/stmt ratio") || len(benchRatioRE.FindAllString(text, -1)) != 2 {
		t.Errorf("no ratio columns with a ratio for both erplab orders")
	}
	if !regexp.MustCompile(`(?m)^\s*erplab --order none\s+1\s+\d+\s+0\s+[\d.]+ s\s+[\d.]+ ms\s+[\d.]+ ms`).MatchString(text) ||
		!regexp.MustCompile(`(?m)^\s*pgreplay\s+1\s+\d+\s+0\s+[\d.]+ s\s+-\s+-\s+\d+ s`).MatchString(text) {
		t.Errorf("no lag row with erplab's p50/p99 and pgreplay's maximum")
	}
}

// waitLogged waits until the csvlog holds at least n executions and as
// many disconnections as connections (every session of the workload
// ended and written by the logging collector).
func waitLogged(t *testing.T, log string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := os.ReadFile(log)
		s := string(b)
		if err == nil && strings.Count(s, `"execute `) >= n && strings.Count(s, `"connection authorized: `) == strings.Count(s, `"disconnection: `) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("csvlog %s: %d executions, %d connections, %d disconnections after a minute (%v)", log,
				strings.Count(s, `"execute `), strings.Count(s, `"connection authorized: `), strings.Count(s, `"disconnection: `), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
