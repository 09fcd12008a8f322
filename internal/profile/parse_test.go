package profile

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorded parses one recording of testdata (recordings.json names its
// postmaster).
func recorded(t *testing.T, name string) (*Parsed, int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "recordings.json"))
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	var m struct{ Postmaster int }
	if err := json.Unmarshal(meta[name], &m); err != nil || m.Postmaster == 0 {
		t.Fatalf("recordings.json: %s: %v", name, err)
	}
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(zr, []int{m.Postmaster})
	if err != nil {
		t.Fatal(err)
	}
	return p, m.Postmaster
}

// The churn and select-only recordings of the same server: the churn's
// invalidation, catalog and file-system shares are well above the
// select-only load's, and the select-only load is query processing.
func TestRecordedShares(t *testing.T) {
	sum := func(name string) *Summary {
		p, pm := recorded(t, name)
		if len(p.Samples) < 200 || p.HostSamples <= len(p.Samples) {
			t.Fatalf("%s: %d server samples of %d", name, len(p.Samples), p.HostSamples)
		}
		return Summarize(p, []int{pm}, Event, DefaultFrequency, 3)
	}
	sel, churn := sum("select-only.perf-script.gz"), sum("temp-churn.perf-script.gz")
	for _, sub := range []string{SubSinval, SubCatalog, SubFS} {
		if a, b := sel.Share(sub), churn.Share(sub); !(b >= 3*a && b >= 5) {
			t.Errorf("%s: churn %.1f %% is not well above select-only %.1f %%", sub, b, a)
		}
	}
	query := 0.0
	for _, sub := range []string{SubParser, SubPlanner, SubExecutor, SubAccess, SubNetwork} {
		query += sel.Share(sub)
	}
	if query < 60 {
		t.Errorf("select-only: parser+planner+executor+access+network = %.1f %%, want most of it", query)
	}
	// The field's kernel functions of temp-table churn on ext4.
	for _, fn := range []string{"find_get_block_common_[k]", "recently_deleted_[k]", "PrepareToInvalidateCacheTuple"} {
		found := false
		for _, f := range churn.Functions {
			found = found || f.Name == fn && f.Total > 0
		}
		if !found {
			t.Errorf("churn: %s not among the top functions", fn)
		}
	}
	total := 0.0
	for _, x := range churn.Subsystems {
		total += x.SharePct
	}
	if total < 99.9 || total > 100.1 {
		t.Errorf("subsystem shares sum to %.2f", total)
	}
	if adv := Advice(churn); len(adv) < 2 || !strings.Contains(adv[0], "tmpfs-temp-tablespace") || !strings.Contains(adv[1], "shared invalidation") {
		t.Errorf("churn advice: %q", adv)
	}
	if adv := Advice(sel); len(adv) != 0 {
		t.Errorf("select-only advice: %q", adv)
	}
	if !churn.KernelSymbols {
		t.Error("kernel symbols reported hidden in a recording that names them")
	}
}

func TestParseTaskEvents(t *testing.T) {
	in := `process_api     0/0         0.000000: PERF_RECORD_FORK(100:100):(1:1)
postgres     0/0         0.000000: PERF_RECORD_FORK(101:101):(100:100)
postgres     0/0         0.000000: PERF_RECORD_FORK(200:200):(1:1)
postgres   101/101   5.000: 
	          5abfab LockAcquireExtended (/usr/lib/postgresql/15/bin/postgres)
	          2f7bbf [unknown] (/usr/lib/postgresql/15/bin/postgres)
	          2f7bb0 [unknown] (/usr/lib/postgresql/15/bin/postgres)
	          473a3f PostgresMain (/usr/lib/postgresql/15/bin/postgres)

Web Content: x   200/201   5.001: 
	ffffffff81c0a2b1 clear_page_erms ([kernel.kallsyms])

postgres   100/100   5.002: PERF_RECORD_FORK(102:102):(100:100)
postgres   102/102   5.003: 
	ffffffff81c0a2b1 ext4_unlink ([kernel.kallsyms])
	ffffffff81c0a2b2 [unknown] ([kernel.kallsyms])
	          1234 unlink (/usr/lib/x86_64-linux-gnu/libc.so.6)

postgres   102/102   5.004: PERF_RECORD_EXIT(102:102):(100:100)
other   300/300   5.005: PERF_RECORD_FORK(102:102):(300:300)
other   102/102   5.006: 
	          1234 main (/bin/other)

`
	p, err := Parse(strings.NewReader(in), []int{100})
	if err != nil {
		t.Fatal(err)
	}
	if p.HostSamples != 4 || len(p.Samples) != 2 {
		t.Fatalf("host %d, server %d samples; want 4, 2", p.HostSamples, len(p.Samples))
	}
	got := []string{}
	var b strings.Builder
	for i := range p.Samples {
		got = append(got, p.Samples[i].fold(&b))
	}
	want := []string{"postgres;PostgresMain;[postgres];LockAcquireExtended", "postgres;unlink;[kernel]_[k];ext4_unlink_[k]"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("folded:\n%q\nwant\n%q", got, want)
	}
	if p.KernelFrames != 2 || p.KernelUnknown != 1 {
		t.Errorf("kernel frames %d unknown %d", p.KernelFrames, p.KernelUnknown)
	}
	if _, err := Parse(strings.NewReader("garbage\n"), nil); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("garbage: %v", err)
	}
}

func TestClassify(t *testing.T) {
	u := func(names ...string) []Frame {
		var fs []Frame
		for _, n := range names {
			fs = append(fs, frameOf(n))
		}
		return fs
	}
	for _, c := range []struct {
		stack []Frame
		want  string
	}{
		// generic hash under the lock manager: lock manager
		{u("PostgresMain", "exec_simple_query", "LockRelationOid", "LockAcquireExtended", "hash_search_with_hash_value"), SubLock},
		// the nearest specific signature wins over catalog higher up
		{u("PostgresMain", "heap_create_with_catalog", "smgrcreate", "do_sys_openat2_[k]", "ext4_create_[k]", "_raw_spin_lock_[k]"), SubFS},
		// a page fault inside the executor is memory
		{u("standard_ExecutorRun", "ExecScan", "asm_exc_page_fault_[k]", "clear_page_erms_[k]"), SubMemory},
		// WAL fsync claims the file system below it
		{u("CommitTransaction", "XLogFlush", "issue_xlog_fsync", "fdatasync", "ext4_sync_file_[k]"), SubWAL},
		// generic only: the nearest generic
		{u("PostgresMain", "pg_plan_queries", "standard_planner", "ExecInitExpr"), SubExecutor},
		{u("PostgresMain", "[postgres]"), SubOther},
		// compiler clones of kernel functions
		{u("WaitEventSetWait", "finish_task_switch.isra.0_[k]"), SubSched},
		{u("AtEOXact_Inval", "ProcessInvalidationMessages", "CatCacheInvalidate"), SubSinval},
	} {
		if got := Classify(c.stack, nil); got != c.want {
			t.Errorf("%v: %s, want %s", c.stack, got, c.want)
		}
	}
}

func TestFlameGraphAndRead(t *testing.T) {
	p, pm := recorded(t, "temp-churn.perf-script.gz")
	s := Summarize(p, []int{pm}, Event, DefaultFrequency, 3)
	var b bytes.Buffer
	if err := s.FlameGraph(&b, "temp <churn>"); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	for _, bad := range []string{"<script", "href=", "onload", "temp <churn>"} {
		if strings.Contains(svg, bad) {
			t.Errorf("flame graph holds %q", bad)
		}
	}
	if !strings.Contains(svg, "<title>recently_deleted_[k]") || !strings.HasPrefix(svg, "<svg") {
		t.Error("flame graph lacks the frame recently_deleted_[k]")
	}
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Read(raw)
	if err != nil || back.Share(SubFS) != s.Share(SubFS) || len(back.Folded) != len(s.Folded) {
		t.Fatalf("Read: %v", err)
	}
	if none, err := Read(nil); none != nil || err != nil {
		t.Error("Read(nil) is not nil, nil")
	}
	var folded bytes.Buffer
	if err := p.WriteFolded(&folded); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(folded.String()), "\n") {
		i := strings.LastIndexByte(l, ' ')
		var c int
		if _, err := fmt.Sscan(l[i+1:], &c); err != nil {
			t.Fatalf("folded line %q", l)
		}
		n += c
	}
	if n != len(p.Samples) {
		t.Errorf("folded stacks hold %d samples, want %d", n, len(p.Samples))
	}
}

// A recording without call graphs (perf record without -g) has the leaf
// on the sample's header line (lines as perf 6.1 prints them).
func TestParseNoCallGraph(t *testing.T) {
	in := `        postgres   965/965   31760.100000000: PERF_RECORD_FORK(28747:28747):(965:965)
        postgres 28747/28747 31760.567718438:      55fab987180d SysCacheGetAttr (/usr/lib/postgresql/15/bin/postgres)
      proxy.test 28679/28681 31760.577818960:            5fca8b [unknown] (/tmp/go-build855487268/b001/proxy.test)
        postgres 28747/28747 31760.587920915:  ffffffff81369742 handle_softirqs ([kernel.kallsyms])
        postgres   965/965   31760.595855793:      5627308f2a68 ExecHashTableInsert (/usr/lib/postgresql/15/bin/postgres)
`
	p, err := Parse(strings.NewReader(in), []int{965})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, s := range p.Samples {
		got = append(got, fmt.Sprintf("%d %s %d", s.PID, s.Stack[len(s.Stack)-1].Name(), len(s.Stack)))
	}
	want := "28747 SysCacheGetAttr 1,28747 handle_softirqs_[k] 1,965 ExecHashTableInsert 1"
	if strings.Join(got, ",") != want || p.HostSamples != 4 || p.KernelFrames != 1 {
		t.Errorf("samples %q (want %q), host %d kernel frames %d", strings.Join(got, ","), want, p.HostSamples, p.KernelFrames)
	}
	if _, err := Parse(strings.NewReader("        postgres 965/965 31760.5: garbage\n"), []int{965}); err == nil {
		t.Error("a header with a stray word parsed")
	}
}
