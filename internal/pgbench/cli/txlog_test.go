package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	wpgbench "github.com/erplab/erplab/internal/pgbench"
	"github.com/erplab/erplab/internal/pgbench/script"
)

// -l's files: pgbench's per-transaction lines, clients dealt to threads,
// and the HDR interval log beside them, readable by HdrHistogram.
func TestTxLog(t *testing.T) {
	dir := t.TempDir()
	sc, _ := script.Builtin("select-only")
	c := &Config{Clients: 3, Jobs: 2, MaxTries: 1, Log: true, LogPrefix: filepath.Join(dir, "lg"), Scripts: []*script.Script{sc}}
	l, err := openTxLog(c)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	for i := 0; i < 30; i++ {
		client := i % 3
		start := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		state := ""
		if i == 7 {
			state = script.SerializationFailure
		}
		l.add(wpgbench.Transaction{Client: client, Script: 0, Start: start, End: start.Add(time.Duration(1000+i) * time.Microsecond), SQLState: state})
	}
	if err := l.close(); err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(os.Getpid())
	main, err := os.ReadFile(filepath.Join(dir, "lg."+pid))
	if err != nil {
		t.Fatal(err)
	}
	second, err := os.ReadFile(filepath.Join(dir, "lg."+pid+".1"))
	if err != nil {
		t.Fatal(err)
	}
	// pgbench deals 3 clients to 2 threads as 2 + 1
	lines := strings.Split(strings.TrimSpace(string(main)), "\n")
	if len(lines) != 20 || lines[0] != "0 1 1000 0 1700000000 1000" || !strings.Contains(string(main), "\n1 3 failed 0 1700000000 701007\n") {
		t.Fatalf("thread 0 log (clients 0 and 1; client 1's 3rd transaction failed):\n%s", main)
	}
	if lines := strings.Split(strings.TrimSpace(string(second)), "\n"); len(lines) != 10 || !strings.HasPrefix(lines[0], "2 1 1002 0 ") {
		t.Fatalf("thread 1 log (client 2):\n%s", second)
	}
	f, err := os.Open(filepath.Join(dir, "lg-hdr."+pid+".hlog"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := hdrhistogram.NewHistogramLogReader(f)
	var n int64
	intervals := 0
	for {
		h, err := r.NextIntervalHistogram()
		if err != nil {
			t.Fatal(err)
		}
		if h == nil {
			break
		}
		intervals++
		n += h.TotalCount()
	}
	if n != 29 || intervals != 3 {
		t.Fatalf("HDR log: %d latencies in %d intervals, want 29 in 3", n, intervals)
	}
}

// Skipped transactions (--rate with --latency-limit) in -l's files, as
// pgbench 15 writes them: "skipped" in the time field and a lag of 0 in
// the per-transaction lines, numbered with the client's other
// transactions; the skipped column (11th of 15) of the aggregate lines;
// the failures by kind only with --failures-detailed.
func TestTxLogSkipped(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	sc, _ := script.Builtin("select-only")
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	txs := []wpgbench.Transaction{
		{Client: 0, Script: 0, Scheduled: ms(0), Start: ms(1), End: ms(21)},
		{Client: 0, Script: 0, Scheduled: ms(5), Start: ms(21), End: ms(21), Skipped: true},
		{Client: 0, Script: 0, Scheduled: ms(9), Start: ms(21), End: ms(21), Skipped: true},
		{Client: 0, Script: 0, Scheduled: ms(20), Start: ms(22), End: ms(42), Retries: 1},
		{Client: 0, Script: 0, Scheduled: ms(1200), Start: ms(1200), End: ms(1201), SQLState: script.SerializationFailure},
		{Client: 0, Script: 0, Scheduled: ms(1201), Start: ms(1210), End: ms(1210), Skipped: true},
		{Client: 0, Script: 0, Scheduled: ms(2500), Start: ms(2500), End: ms(2502)},
	}
	read := func(c *Config) []string {
		t.Helper()
		l, err := openTxLog(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, tx := range txs {
			l.add(tx)
		}
		if err := l.close(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(c.LogPrefix + "." + strconv.Itoa(os.Getpid()))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
	dir := t.TempDir()
	base := Config{Clients: 1, Jobs: 1, MaxTries: 1, Log: true, Rate: 100, LatencyLimitMs: 5, Scripts: []*script.Script{sc}}

	c := base
	c.LogPrefix = filepath.Join(dir, "tx")
	want := []string{
		"0 1 21000 0 1700000000 21000 1000",
		"0 2 skipped 0 1700000000 21000 0",
		"0 3 skipped 0 1700000000 21000 0",
		"0 4 22000 0 1700000000 42000 2000",
		"0 5 failed 0 1700000001 201000 0",
		"0 6 skipped 0 1700000001 210000 0",
		"0 7 2000 0 1700000002 502000 0",
	}
	if got := read(&c); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("per-transaction log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	c = base
	c.LogPrefix, c.MaxTries, c.FailuresDetailed = filepath.Join(dir, "tries"), 2, true
	if got := read(&c); got[1] != "0 2 skipped 0 1700000000 21000 0 0" || got[3] != "0 4 22000 0 1700000000 42000 2000 1" || got[4] != "0 5 serialization 0 1700000001 201000 0 0" {
		t.Fatalf("per-transaction log with --max-tries 2 --failures-detailed:\n%s", strings.Join(got, "\n"))
	}

	c = base
	c.LogPrefix, c.AggregateInterval = filepath.Join(dir, "agg"), 1
	want = []string{
		// 2 successes (21 and 22 ms, lags 1 and 2 ms), 2 skipped; the
		// retry is 0 with --max-tries 1
		"1700000000 2 43000 925000000 21000 22000 3000 5000000 1000 2000 2 0 0 0 0",
		// the serialization failure is 0 without --failures-detailed
		"1700000001 0 0 0 0 0 0 0 0 0 1 0 0 0 0",
		"1700000002 1 2000 4000000 2000 2000 0 0 0 0 0 0 0 0 0",
	}
	if got := read(&c); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("aggregate log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	c.LogPrefix, c.MaxTries, c.FailuresDetailed = filepath.Join(dir, "aggd"), 2, true
	if got := read(&c); got[0] != "1700000000 2 43000 925000000 21000 22000 3000 5000000 1000 2000 2 1 1 0 0" || got[1] != "1700000001 0 0 0 0 0 0 0 0 0 1 0 0 1 0" {
		t.Fatalf("aggregate log with --max-tries 2 --failures-detailed:\n%s", strings.Join(got, "\n"))
	}
	// without -L nothing is skipped: the column stays 0 whatever comes
	c = base
	c.LogPrefix, c.AggregateInterval, c.LatencyLimitMs = filepath.Join(dir, "aggnl"), 1, 0
	if got := read(&c); !strings.HasSuffix(got[0], " 0 0 0 0 0") {
		t.Fatalf("aggregate log without -L: %q", got[0])
	}
}

// A per-transaction log line is written without allocating.
func TestTxLogLineAllocations(t *testing.T) {
	sc, _ := script.Builtin("select-only")
	c := &Config{Clients: 1, Jobs: 1, MaxTries: 2, Log: true, Rate: 100, LatencyLimitMs: 5, LogPrefix: filepath.Join(t.TempDir(), "a"), Scripts: []*script.Script{sc}}
	l, err := openTxLog(c)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	t0 := time.Now()
	ok := wpgbench.Transaction{Scheduled: t0, Start: t0.Add(time.Millisecond), End: t0.Add(2 * time.Millisecond)}
	skipped := wpgbench.Transaction{Scheduled: t0, Start: t0, End: t0, Skipped: true}
	l.add(ok)
	l.add(skipped)
	if n := testing.AllocsPerRun(1000, func() { l.add(ok); l.add(skipped) }); n != 0 {
		t.Fatalf("%.1f allocations per two log lines, want 0", n)
	}
}

// -l's files as pgbench writes them, but never through a symbolic link
// planted at their names (pgbench run as root in /tmp): the open fails
// naming the file and the link's target is unchanged; an earlier log of
// this user under the same name is replaced, as pgbench replaces it.
func TestTxLogRefusesPlantedLink(t *testing.T) {
	victim := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(victim, []byte("root:secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pid := strconv.Itoa(os.Getpid())
	sc, _ := script.Builtin("select-only")
	c := &Config{Clients: 1, Jobs: 1, MaxTries: 1, Log: true, LogPrefix: filepath.Join(dir, "lg"), Scripts: []*script.Script{sc}}
	link := filepath.Join(dir, "lg."+pid)
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if l, err := openTxLog(c); err == nil || !strings.Contains(err.Error(), `could not open logfile "`+link+`": `+link+" is a symbolic link") {
		if l != nil {
			l.close()
		}
		t.Fatalf("a link at the log's name: %v", err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "root:secret\n" {
		t.Fatalf("the link's target was written: %q, %v", b, err)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(link, []byte("an earlier run's log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := openTxLog(c)
	if err != nil {
		t.Fatalf("an earlier log of this user: %v", err)
	}
	if err := l.close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(link); strings.Contains(string(b), "earlier") {
		t.Fatalf("the earlier log was not replaced: %q", b)
	}
}
