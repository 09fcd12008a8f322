package pgreplay

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pgreplay 1.2's report of a replay of pgbench -S (testdata, recorded from
// /usr/bin/pgreplay -c -s 1000000): statements without the preparations,
// errors, the lag's maximum in seconds.
func TestParsePgreplay(t *testing.T) {
	out, err := os.ReadFile("testdata/pgreplay-1.2.txt")
	if err != nil {
		t.Fatal(err)
	}
	var m Measurement
	if err := parsePgreplay(out, &m); err != nil {
		t.Fatal(err)
	}
	if m.Statements != 803 || m.Errors != 0 || m.LagMax != 1000 || m.LagQuantiles || m.Own != 1362*time.Millisecond {
		t.Fatalf("%+v: want 803 statements, 0 errors, lag max 1 s, run time 1.362 s", m)
	}
	if d := runTime(" 1 hours 2 minutes 3.500 seconds"); d != time.Hour+2*time.Minute+3500*time.Millisecond {
		t.Fatalf("run time %s", d)
	}
	if err := parsePgreplay([]byte("Error: no connection found for session 0x1\n"), &m); err == nil {
		t.Fatal("a report without statistics was accepted")
	}
}

// The log both tools read: every user and database named becomes the
// --dsn user and the copy, nothing else changes.
func TestRewriteLog(t *testing.T) {
	out := filepath.Join(t.TempDir(), "log.csv")
	n, err := rewriteLog([]string{"testdata/pgbench.csv", "testdata/pgbench.csv"}, out, "copy_1", "alice")
	if err != nil || n != 12 {
		t.Fatalf("%d records, %v; want 12", n, err)
	}
	read := func(name string) [][]string {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r := csv.NewReader(f)
		r.FieldsPerRecord = -1
		recs, err := r.ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return recs
	}
	orig, got := read("testdata/pgbench.csv"), read(out)
	for i, rec := range got {
		o := orig[i%len(orig)]
		for j := range o {
			want := o[j]
			if (j == colUser || j == colDatabase) && want != "" {
				want = map[int]string{colUser: "alice", colDatabase: "copy_1"}[j]
			}
			if rec[j] != want {
				t.Errorf("record %d field %d: %q, want %q", i+1, j, rec[j], want)
			}
		}
	}
	// A torn log: one line naming the file, line and column.
	_, err = rewriteLog([]string{"testdata/torn.csv"}, filepath.Join(t.TempDir(), "x.csv"), "c", "u")
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "testdata/torn.csv:2:") {
		t.Fatalf("torn log: %v", err)
	}
}

// Ratios are per round, erplab over pgreplay; a round pgreplay did not
// finish has none.
func TestRatios(t *testing.T) {
	r := &Report{Unlimited: []Measurement{
		{Tool: Pgreplay, Round: 0, Statements: 1000, Wall: time.Second, CPU: 100 * time.Millisecond},
		{Tool: ErplabNone, Round: 0, Statements: 1000, Wall: 500 * time.Millisecond, CPU: 50 * time.Millisecond},
		{Tool: Pgreplay, Round: 1, Statements: 1000, Wall: 2 * time.Second, CPU: 100 * time.Millisecond},
		{Tool: ErplabNone, Round: 1, Statements: 1000, Wall: 500 * time.Millisecond, CPU: 200 * time.Millisecond},
		{Tool: Pgreplay, Round: 2, Statements: -1, TimedOut: true, Wall: time.Minute},
		{Tool: ErplabNone, Round: 2, Statements: 1000, Wall: time.Second, CPU: 100 * time.Millisecond},
	}}
	rate, cpu, n := r.Ratios(ErplabNone)
	if n != 2 || rate != (Spread{Median: 3, Min: 2, Max: 4}) || cpu != (Spread{Median: 1.25, Min: 0.5, Max: 2}) {
		t.Fatalf("rounds %d, rate %+v, cpu %+v; want 2 rounds, rate 3 [2-4], cpu 1.25 [0.5-2]", n, rate, cpu)
	}
	var b strings.Builder
	Print(&b, r)
	if !strings.Contains(b.String(), "timed out: pgreplay, speed unlimited, round 3, after 1m0s (client CPU 0s)") {
		t.Errorf("no timeout line:\n%s", b.String())
	}
}

// The generator table's replay rows of a recorded run (testdata/rows.json:
// erplab vs-pgbench --cell replay --replay-transactions 20 --repeat 2 on
// PostgreSQL 15, pgreplay 1.2) against testdata/rows.txt: per log and
// erplab order the rounds, errors, both CPU figures per statement, the
// ratios and the peak resident sizes.
func TestPrintRowsRecorded(t *testing.T) {
	b, err := os.ReadFile("testdata/rows.json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []Row
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || len(rows[0].Report.Unlimited) != 2*len(Tools) {
		t.Fatalf("%d rows: want 2 logs of 2 rounds of %d tools", len(rows), len(Tools))
	}
	var buf strings.Builder
	PrintRows(&buf, rows)
	want, err := os.ReadFile("testdata/rows.txt")
	if err != nil {
		t.Fatal(err)
	}
	if buf.String() != string(want) {
		t.Errorf("rows:\n%s\nwant:\n%s", buf.String(), want)
	}
}

// The log a replay row replays: the server's csvlog kept to the
// workload's database (the connection-received line, which names none,
// goes), with its connections and disconnections counted.
func TestKeepDatabase(t *testing.T) {
	b, err := os.ReadFile("testdata/pgbench.csv")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "kept.csv")
	lines, conns, ends, err := keepDatabase(b, "bench", out)
	if err != nil || lines != 5 || conns != 1 || ends != 0 {
		t.Fatalf("%d lines, %d connections, %d disconnections, %v; want 5, 1, 0", lines, conns, ends, err)
	}
	kept, err := os.ReadFile(out)
	if err != nil || strings.Contains(string(kept), "connection received") || strings.Count(string(kept), ",bench,") != 5 {
		t.Fatalf("kept log (%v):\n%s", err, kept)
	}
	if lines, _, _, err := keepDatabase(b, "other", out); err != nil || lines != 0 {
		t.Fatalf("another database: %d lines, %v", lines, err)
	}
	if _, _, _, err := keepDatabase([]byte("a,\"b\n"), "bench", out); err == nil || strings.Contains(err.Error(), "\n") {
		t.Fatalf("torn csvlog: %v", err)
	}
}
