package pgbenchrun

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/pgtest"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

// The pgbench side of a cell, on the real pgbench: its report is read
// for the transaction count and tps, its CPU taken from the kernel.
func TestRunPgbenchMeasures(t *testing.T) {
	pgbench, err := exec.LookPath("pgbench")
	if err != nil {
		t.Skip("pgbench not installed")
	}
	dsn := srv.NewDatabase(t)
	if out, err := exec.Command(pgbench, "-i", "-q", "-s", "1", dsn).CombinedOutput(); err != nil {
		t.Fatalf("pgbench -i: %v\n%s", err, out)
	}
	m, err := runPgbench(context.Background(), Options{DSN: dsn, Pgbench: pgbench}, Cell{Script: "select-only", Mode: "prepared", Clients: 2, Jobs: 2, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if m.Transactions <= 0 || m.TPS <= 0 || m.CPU <= 0 || m.CPUPerTx() <= 0 || m.PeakRSS <= 0 {
		t.Fatalf("measurement %+v: want transactions, tps, CPU and peak RSS > 0", m)
	}
	// tps is about transactions per second of a 1 s run.
	if r := m.TPS / float64(m.Transactions); r < 0.5 || r > 2 {
		t.Fatalf("tps %.0f for %d transactions in 1 s", m.TPS, m.Transactions)
	}
}

// A fixed number of transactions: the count is what was processed.
func TestRunPgbenchTransactions(t *testing.T) {
	pgbench, err := exec.LookPath("pgbench")
	if err != nil {
		t.Skip("pgbench not installed")
	}
	dsn := srv.NewDatabase(t)
	if out, err := exec.Command(pgbench, "-i", "-q", "-s", "1", dsn).CombinedOutput(); err != nil {
		t.Fatalf("pgbench -i: %v\n%s", err, out)
	}
	c, err := ParseCell("-b select-only -M simple -c 3 -j 1 -t 40")
	if err != nil {
		t.Fatal(err)
	}
	m, err := runPgbench(context.Background(), Options{DSN: dsn, Pgbench: pgbench}, c)
	if err != nil || m.Transactions != 120 {
		t.Fatalf("measurement %+v, %v: want 120 transactions", m, err)
	}
}

// pgbench 15's report of a -t run (testdata/pgbench15-t.txt, recorded).
func TestParsePgbenchRecorded(t *testing.T) {
	out, err := os.ReadFile("testdata/pgbench15-t.txt")
	if err != nil {
		t.Fatal(err)
	}
	tx, tps, err := parsePgbench(out)
	if err != nil || tx != 4000 || tps != 43772.296514 {
		t.Fatalf("tx %d tps %g err %v", tx, tps, err)
	}
}

func TestParsePgbench(t *testing.T) {
	out := []byte("transaction type: <builtin: select only>\nnumber of transactions per client: 10\nnumber of transactions actually processed: 20/20\nnumber of failed transactions: 0 (0.000%)\ntps = 1234.5 (without initial connection time)\n")
	tx, tps, err := parsePgbench(out)
	if err != nil || tx != 20 || tps != 1234.5 {
		t.Fatalf("tx %d tps %g err %v", tx, tps, err)
	}
	if _, _, err := parsePgbench([]byte("pgbench: error: connection refused\n")); err == nil {
		t.Fatal("a report without figures was accepted")
	}
}

func TestRatios(t *testing.T) {
	p := Pair{
		Pgbench: []Measurement{{Transactions: 1000, TPS: 100, CPU: 10 * time.Millisecond}, {Transactions: 1000, TPS: 100, CPU: 10 * time.Millisecond}, {Transactions: 1000, TPS: 100, CPU: 10 * time.Millisecond}},
		Erplab:  []Measurement{{Transactions: 2000, TPS: 150, CPU: 30 * time.Millisecond}, {Transactions: 1000, TPS: 50, CPU: 30 * time.Millisecond}, {Transactions: 1000, TPS: 300, CPU: 10 * time.Millisecond}},
	}
	if r := p.TPSRatio(); r.Median != 1.5 || r.Min != 0.5 || r.Max != 3 {
		t.Fatalf("tps ratio %+v, want median 1.5 in 0.5-3", r)
	}
	// 10 µs vs 15, 30, 10 µs per transaction
	if r := p.CPURatio(); r.Median != 1.5 || r.Min != 1 || r.Max != 3 {
		t.Fatalf("CPU ratio %+v, want median 1.5 in 1-3", r)
	}
	if Jobs(1) != 1 || Jobs(1000) < 1 {
		t.Fatalf("Jobs(1) = %d, Jobs(1000) = %d", Jobs(1), Jobs(1000))
	}
}

func TestParseCell(t *testing.T) {
	c, err := ParseCell("-b tpcb-like -M simple -c 8 -j 2 -t 1500")
	if err != nil || c != (Cell{Script: "tpcb-like", Mode: "simple", Clients: 8, Jobs: 2, Transactions: 1500}) {
		t.Fatalf("%+v, %v", c, err)
	}
	if got := strings.Join(c.Args(), " "); got != "-n -b tpcb-like -M simple -c 8 -j 2 -t 1500" {
		t.Errorf("Args %q", got)
	}
	if c.String() != "tpcb-like -M simple -c 8 -j 2 -t 1500" {
		t.Errorf("String %q", c)
	}
	c, err = ParseCell("-b select-only -T 10s")
	if err != nil || c != (Cell{Script: "select-only", Mode: "prepared", Clients: 1, Jobs: 1, Duration: 10 * time.Second}) {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	if got := strings.Join(c.Args(), " "); got != "-n -b select-only -M prepared -c 1 -j 1 -T 10" {
		t.Errorf("Args %q", got)
	}
	for spec, want := range map[string]string{
		"-M prepared -t 10":          "-b (the built-in script) is missing",
		"-b select-only":             "-t (transactions per client) or -T (seconds) is missing",
		"-b select-only -t 5 -T 1":   "-t and -T together",
		"-b select-only -c 0 -t 5":   "-c 0: not a positive whole number",
		"-b select-only -t":          "-t needs a value",
		"-b select-only -t 5 -P 1":   "-P is not one of",
		"-b select-only -j two -t 5": "-j two: not a positive whole number",
	} {
		if _, err := ParseCell(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseCell(%q): %v, want %q", spec, err, want)
		}
	}
	cells := GeneratorCells()
	if len(cells) != 4 || cells[0].String() != "select-only -M prepared -c 1 -j 1 -t 20000" || cells[3].String() != "tpcb-like -M prepared -c 8 -j 2 -t 1500" {
		t.Errorf("GeneratorCells: %v", cells)
	}
}

// The table of a recorded run (testdata/pairs.json: two pairs of each
// generator on one cell, measured on PostgreSQL 15) against
// testdata/table.txt.
func TestPrintRecorded(t *testing.T) {
	b, err := os.ReadFile("testdata/pairs.json")
	if err != nil {
		t.Fatal(err)
	}
	var pairs []Pair
	if err := json.Unmarshal(b, &pairs); err != nil {
		t.Fatal(err)
	}
	if r := pairs[0].WallRatio(); r.Min >= r.Max || r.Median <= 0 {
		t.Errorf("wall ratio %+v", r)
	}
	var buf bytes.Buffer
	Print(&buf, pairs)
	want, err := os.ReadFile("testdata/table.txt")
	if err != nil {
		t.Fatal(err)
	}
	if buf.String() != string(want) {
		t.Errorf("table:\n%s\nwant:\n%s", buf.String(), want)
	}
}
