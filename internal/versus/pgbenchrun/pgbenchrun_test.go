package pgbenchrun

import (
	"context"
	"os"
	"os/exec"
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
	m, err := runPgbench(context.Background(), Options{DSN: dsn, Pgbench: pgbench, Mode: "prepared", Duration: time.Second}, "select-only", 2)
	if err != nil {
		t.Fatal(err)
	}
	if m.Transactions <= 0 || m.TPS <= 0 || m.CPU <= 0 || m.CPUPerTx() <= 0 {
		t.Fatalf("measurement %+v: want transactions, tps and CPU > 0", m)
	}
	// tps is about transactions per second of a 1 s run.
	if r := m.TPS / float64(m.Transactions); r < 0.5 || r > 2 {
		t.Fatalf("tps %.0f for %d transactions in 1 s", m.TPS, m.Transactions)
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
