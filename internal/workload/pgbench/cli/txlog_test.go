package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	wpgbench "github.com/erplab/erplab/internal/workload/pgbench"
	"github.com/erplab/erplab/internal/workload/pgbench/script"
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
