package metrics

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/record"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/storm"
)

var srv *pgtest.Server

// rerecord makes recordedSample take a new sample from a test PostgreSQL
// server and rewrite testdata/sample.json: go test -run . -record.
var rerecord = flag.Bool("record", false, "re-record testdata/sample.json from a test PostgreSQL server")

// TestMain starts a server only to re-record: the exposition is tested on
// a recorded sample.
func TestMain(m *testing.M) { os.Exit(pgtest.RunIf(m, &srv, rerecord)) }

const sampleFile = "testdata/sample.json"

// sampleRecording is a sampler.Sample on disk with the fields its own
// JSON form leaves out (the cumulative counters the exporter exposes).
type sampleRecording struct {
	Sample       *sampler.Sample       `json:"sample"`
	Time         time.Time             `json:"time"`
	RoundTrip    time.Duration         `json:"round_trip_ns"`
	DBTotals     sampler.DBCounters    `json:"db_totals"`
	HostCounters *sampler.HostCounters `json:"host_counters,omitempty"`
}

// recordedSample returns the second sample of a sampler on the local test
// server's postgres database (the first has no rates), as recorded in
// sampleFile; under -record it takes one first and writes the file.
func recordedSample(t *testing.T) *sampler.Sample {
	t.Helper()
	if *rerecord {
		ctx := context.Background()
		s, err := sampler.Connect(ctx, srv.DSN(t, "postgres"), sampler.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		if _, err := s.Sample(ctx); err != nil {
			t.Fatal(err)
		}
		smp, err := s.Sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rec := sampleRecording{Sample: smp, Time: smp.Time, RoundTrip: smp.RoundTrip, DBTotals: smp.DBTotals}
		if smp.Host != nil {
			rec.HostCounters = &smp.Host.Counters
		}
		b, err := json.MarshalIndent(rec, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(sampleFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(sampleFile)
	if err != nil {
		t.Fatal(err)
	}
	var rec sampleRecording
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("%s: %v", sampleFile, err)
	}
	smp := rec.Sample
	smp.Time, smp.RoundTrip, smp.DBTotals = rec.Time, rec.RoundTrip, rec.DBTotals
	if smp.Host != nil && rec.HostCounters != nil {
		smp.Host.Counters = *rec.HostCounters
	}
	return smp
}

// scrape serves e on a free port and returns the parsed metric families.
func scrape(t *testing.T, e *Exporter) map[string]*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := Serve(ctx, "127.0.0.1:0", e.Handler())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return fams
}

// value finds the metric of family name whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) (*dto.Metric, bool) {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		return nil, false
	}
next:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		return m, true
	}
	return nil, false
}

func num(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return -1
}

// The exposition of a recorded sample (testdata/sample.json, a real
// sample of the local test server): every pg_* and node_* figure is the
// sample's.
func TestExporterSample(t *testing.T) {
	smp := recordedSample(t)
	e, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if fams := scrape(t, e); fams["pg_stat_activity_count"] != nil || fams["erplab_samples_total"] != nil {
		t.Error("pg_* metrics before any sample")
	}
	e.ObserveSample(smp)
	e.ObserveStorm(storm.Event{T: 3, WaitEvent: "LWLock:LockManager", Message: "x"})
	fams := scrape(t, e)

	check := func(name string, labels map[string]string, want float64) {
		t.Helper()
		m, ok := value(t, fams, name, labels)
		if !ok {
			t.Errorf("no %s%v", name, labels)
			return
		}
		if got := num(m); got != want {
			t.Errorf("%s%v = %v, want %v", name, labels, got, want)
		}
	}
	check("pg_stat_activity_count", map[string]string{"state": "active"}, float64(smp.Sessions.Active))
	check("pg_stat_activity_count", map[string]string{"state": "idle"}, float64(smp.Sessions.Idle))
	check("pg_stat_database_xact_commit_total", nil, float64(smp.DBTotals.XactCommit))
	check("pg_stat_database_temp_bytes_total", nil, float64(smp.DBTotals.TempBytes))
	for _, r := range smp.Catalog {
		check("pg_catalog_relation_size_bytes", map[string]string{"relname": r.Name}, float64(r.Bytes))
		check("pg_stat_sys_tables_n_tup_ins_total", map[string]string{"relname": r.Name}, float64(r.Ins))
	}
	if !*rerecord { // the figures of the committed recording
		check("pg_stat_database_xact_commit_total", nil, 881)
		check("pg_stat_database_blks_hit_total", nil, 85791)
		check("node_memory_MemTotal_bytes", nil, 25275990016)
		check("pg_catalog_relation_size_bytes", map[string]string{"relname": "pg_attribute"}, 704512)
		check("node_cpu_seconds_total", map[string]string{"cpu": "1", "mode": "idle"}, smp.Host.Counters.PerCPU[1].Idle)
		if n := len(fams["node_cpu_seconds_total"].Metric); n != 16 {
			t.Errorf("%d node_cpu_seconds_total series, want 16 (8 modes x the recording's 2 CPUs)", n)
		}
	}
	check("erplab_storms_total", nil, 1)
	check("erplab_storm_ongoing", nil, 1)
	check("erplab_sampler_samples_total", nil, 1)
	if smp.Host == nil {
		t.Fatal("local test server but no host sample")
	}
	check("node_memory_MemTotal_bytes", nil, float64(smp.Host.Mem.Total))
	check("node_cpu_seconds_total", map[string]string{"cpu": "0", "mode": "user"}, smp.Host.Counters.PerCPU[0].User)
	if n := len(fams["node_cpu_seconds_total"].Metric); n != 8*len(smp.Host.Counters.PerCPU) {
		t.Errorf("%d node_cpu_seconds_total series, want 8 modes x %d CPUs", n, len(smp.Host.Counters.PerCPU))
	}
	if fams["node_cpu_seconds_total"].GetType() != dto.MetricType_COUNTER {
		t.Errorf("node_cpu_seconds_total type %v", fams["node_cpu_seconds_total"].GetType())
	}

	e.ObserveStorm(storm.Event{T: 3, EndT: new(float64)})
	check = func(name string, labels map[string]string, want float64) {
		m, ok := value(t, scrape(t, e), name, labels)
		if !ok || num(m) != want {
			t.Errorf("after the storm ended: %s = %v", name, m)
		}
	}
	check("erplab_storm_ongoing", nil, 0)

	// Naming follows Prometheus practice (promlint), except where
	// node_exporter and postgres_exporter names, which dashboards expect,
	// break it themselves.
	exporterNames := map[string]bool{
		"node_memory_MemTotal_bytes": true, "node_memory_MemAvailable_bytes": true,
		"node_memory_AnonHugePages_bytes": true, "pg_stat_activity_count": true,
	}
	problems, err := testutil.GatherAndLint(e.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if !exporterNames[p.Metric] {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}

func TestExporterOps(t *testing.T) {
	start := time.Now().Add(-time.Minute)
	rec := record.New([]record.OpInfo{
		{Name: "post_invoice", Target: 100 * time.Millisecond, Priority: 1},
		{Name: "report", Target: time.Second, Priority: 2},
	}, start, 0, time.Second)
	at := start.Add(time.Second)
	for range 90 {
		rec.Record(record.Sample{Op: 0, Start: at, DB: 10 * time.Millisecond})
	}
	for range 10 {
		rec.Record(record.Sample{Op: 0, Start: at, Wait: 100 * time.Millisecond, DB: 200 * time.Millisecond})
	}
	for range 5 {
		rec.Record(record.Sample{Op: 0, Start: at, DB: time.Millisecond, SQLState: "40P01"})
	}
	e, err := New(Options{NoProcessMetrics: true})
	if err != nil {
		t.Fatal(err)
	}
	e.SetOpSource(RecorderSource(rec))
	fams := scrape(t, e)

	m, ok := value(t, fams, "erplab_operation_duration_seconds", map[string]string{"operation": "post_invoice"})
	if !ok || m.Histogram == nil {
		t.Fatalf("no histogram for post_invoice: %v", fams["erplab_operation_duration_seconds"])
	}
	h := m.Histogram
	if h.GetSampleCount() != 100 {
		t.Errorf("histogram count %d, want 100 successful executions", h.GetSampleCount())
	}
	want := map[float64]uint64{0.005: 0, 0.01: 90, 0.25: 90, 0.5: 100, 60: 100}
	for _, b := range h.Bucket {
		if w, ok := want[b.GetUpperBound()]; ok && b.GetCumulativeCount() != w {
			t.Errorf("bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), w)
		}
	}
	if sum := h.GetSampleSum(); sum < 3.89 || sum > 3.91 { // 90*0.01 + 10*0.3, within HdrHistogram's 0.1 %
		t.Errorf("histogram sum %v s, want 3.9", sum)
	}
	res := rec.Results(0)
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"erplab_operations_total", map[string]string{"operation": "post_invoice"}, 105},
		{"erplab_operation_errors_total", map[string]string{"operation": "post_invoice"}, 5},
		{"erplab_operation_target_seconds", map[string]string{"operation": "post_invoice"}, 0.1},
		{"erplab_apdex", map[string]string{"operation": "post_invoice"}, res[0].Apdex.Value},
		{"erplab_apdex_samples_total", map[string]string{"operation": "post_invoice", "zone": "satisfied"}, 90},
		{"erplab_apdex_samples_total", map[string]string{"operation": "post_invoice", "zone": "tolerating"}, 10},
		{"erplab_apdex_samples_total", map[string]string{"operation": "post_invoice", "zone": "frustrated"}, 5},
		{"erplab_operations_total", map[string]string{"operation": "report"}, 0},
	}
	for _, c := range checks {
		m, ok := value(t, fams, c.name, c.labels)
		if !ok || num(m) != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, m, c.want)
		}
	}
	// APDEX (90 + 10/2) / 105 with errors frustrated.
	if v := res[0].Apdex.Value; v < 0.904 || v > 0.906 {
		t.Errorf("record's APDEX %v, want 0.905", v)
	}
	if _, ok := value(t, fams, "erplab_apdex", map[string]string{"operation": "report"}); ok {
		t.Error("APDEX of an operation without samples is exported")
	}
	iv, _ := results.Integral(res)
	if m, ok := value(t, fams, "erplab_apdex_integral", nil); !ok || num(m) != iv {
		t.Errorf("integral %v, want %v", m, iv)
	}
}

func TestServeErrors(t *testing.T) {
	ctx := context.Background()
	e, _ := New(Options{})
	if _, err := Serve(ctx, "nonsense", e.Handler()); err == nil || !strings.Contains(err.Error(), "host:port") {
		t.Errorf("malformed address: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := Serve(ctx, ln.Addr().String(), e.Handler()); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("busy port: %v", err)
	}
	// The server stops with its context.
	cctx, cancel := context.WithCancel(ctx)
	s, err := Serve(cctx, "127.0.0.1:0", e.Handler())
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	cancel()
	<-s.done
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Error("server still answers after its context ended")
	}
	if _, err := New(Options{Buckets: []float64{1, 0.5}}); err == nil {
		t.Error("descending buckets accepted")
	}
}

func TestSplitWait(t *testing.T) {
	for k, want := range map[string][2]string{"LWLock:LockManager": {"LWLock", "LockManager"}, "CPU": {"CPU", "CPU"}, "Lock:advisory": {"Lock", "advisory"}} {
		a, b := splitWait(k)
		if a != want[0] || b != want[1] {
			t.Errorf("splitWait(%q) = %q, %q", k, a, b)
		}
	}
}
