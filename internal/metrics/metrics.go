// Package metrics serves erplab's observations as Prometheus metrics
// (client_golang): the samplers' figures under the names
// postgres_exporter and node_exporter use (base units, _total counters,
// low-cardinality labels), storms, and a running load test's
// per-operation latency histograms and APDEX.
//
// Samples and storms are pushed (Exporter.ObserveSample, ObserveStorm: hook
// them to sampler.SessionOptions.OnSample/OnStorm); operation figures are
// pulled at scrape time from an OpSource (RecorderSource adapts a
// record.Recorder).
//
// Metric names (Prometheus naming practice, prometheus.io/docs/practices/naming):
//
//	pg_stat_activity_count{state}                         client sessions by state
//	pg_stat_activity_wait_event_count{wait_event_type,wait_event}  active sessions ("CPU","CPU" = not waiting)
//	pg_stat_activity_parallel_workers                     parallel workers running
//	pg_stat_database_{xact_commit,xact_rollback,blks_read,blks_hit,temp_files,temp_bytes,deadlocks,sessions}_total
//	                                                      server-wide sums of pg_stat_database
//	pg_catalog_relation_size_bytes{relname}               pg_total_relation_size of pg_class, pg_attribute, ...
//	pg_stat_sys_tables_n_tup_{ins,upd,del}_total{relname}, pg_stat_sys_tables_n_{live,dead}_tup{relname}
//	node_cpu_seconds_total{cpu,mode}                      /proc/stat, as node_exporter
//	node_memory_{MemTotal,MemAvailable,Dirty,Shmem,AnonHugePages}_bytes
//	node_vmstat_{thp_fault_alloc,thp_fault_fallback,thp_collapse_alloc,compact_stall,pgmajfault}
//	node_context_switches_total, node_procs_running, node_procs_blocked
//	erplab_sampler_samples_total, erplab_sampler_round_trip_seconds, erplab_sampler_last_sample_timestamp_seconds
//	erplab_storms_total, erplab_storm_ongoing
//	erplab_operation_duration_seconds{operation}          histogram of successful response times
//	erplab_operations_total{operation}, erplab_operation_errors_total{operation}
//	erplab_operation_target_seconds{operation}            APDEX target time T
//	erplab_apdex{operation}, erplab_apdex_samples_total{operation,zone}, erplab_apdex_integral
//
// Metrics of a source appear once it has data (no sample yet: no pg_*
// metrics; no host sampling: no node_*).
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/erplab/erplab/internal/apdex"
	"github.com/erplab/erplab/internal/record"
	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/storm"
)

// DefaultBuckets are the upper bounds, seconds, of the operation latency
// histograms: 1 ms to 60 s, roughly 1-2.5-5 steps, covering APDEX target
// times of interactive ERP operations (0.1 s .. 10 s) and 4T beyond them.
var DefaultBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60}

// OpSnapshot is the cumulative state of one key operation since scoring
// began (warm-up excluded).
type OpSnapshot struct {
	Name string
	// Target is the APDEX target time T.
	Target time.Duration
	// Count is the scored executions, errors included; Errors the failed.
	Count  int64
	Errors int64
	// Zones are the APDEX zone counts; Apdex is their score.
	Zones apdex.Counts
	Apdex apdex.Score
	// Response is the response-time histogram of successful executions
	// in µs (record's layout); nil when there is none. The exporter only
	// reads it.
	Response *hdrhistogram.Histogram
}

// OpsSnapshot is a load test's state for one scrape.
type OpsSnapshot struct {
	Ops []OpSnapshot
	// Integral is the priority-weighted integral APDEX; IntegralOK false
	// when no operation has samples.
	Integral   float64
	IntegralOK bool
}

// OpSource gives the running load test's figures. OpsSnapshot is called
// once per scrape, concurrently with the test recording samples.
type OpSource interface {
	OpsSnapshot() OpsSnapshot
}

// RecorderSource adapts a record.Recorder: each scrape visits the
// operations under their own locks (record.Recorder.VisitOps) and copies
// their live response-time histograms, so it is safe beside the VUs'
// Record calls and costs no encoding.
func RecorderSource(rec *record.Recorder) OpSource { return recorderSource{rec} }

type recorderSource struct{ rec *record.Recorder }

func (r recorderSource) OpsSnapshot() OpsSnapshot {
	var out OpsSnapshot
	ws := []apdex.Weighted{}
	r.rec.VisitOps(func(info record.OpInfo, resp *hdrhistogram.Histogram, zones apdex.Counts, count, errors int64) {
		sc := zones.Score(info.Target)
		out.Ops = append(out.Ops, OpSnapshot{Name: info.Name, Target: info.Target, Count: count, Errors: errors,
			Zones: zones, Apdex: sc, Response: resp.Clone()})
		ws = append(ws, apdex.Weighted{Score: sc, Priority: info.Priority})
	})
	out.Integral, out.IntegralOK = apdex.Integral(ws)
	return out
}

// Options configure an Exporter.
type Options struct {
	// Buckets are the latency histogram bounds, seconds, ascending
	// (default DefaultBuckets).
	Buckets []float64
	// NoProcessMetrics leaves out the Go runtime and process collectors
	// (go_*, process_*) of erplab itself.
	NoProcessMetrics bool
}

// Exporter holds the latest observations and serves them. Its methods are
// safe for concurrent use.
type Exporter struct {
	reg     *prometheus.Registry
	buckets []float64

	mu      sync.Mutex
	last    *sampler.Sample
	samples int64
	storms  int64
	ongoing bool
	ops     OpSource
}

// New returns an exporter with its own registry. Errors: buckets not
// strictly ascending or not positive.
func New(opts Options) (*Exporter, error) {
	b := opts.Buckets
	if len(b) == 0 {
		b = DefaultBuckets
	}
	for i, v := range b {
		if v <= 0 || (i > 0 && v <= b[i-1]) {
			return nil, fmt.Errorf("metrics: histogram buckets must be positive and ascending, got %v", b)
		}
	}
	e := &Exporter{reg: prometheus.NewRegistry(), buckets: append([]float64(nil), b...)}
	e.reg.MustRegister(collector{e})
	if !opts.NoProcessMetrics {
		e.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return e, nil
}

// Registry is the exporter's registry (to add collectors or gather in
// tests).
func (e *Exporter) Registry() *prometheus.Registry { return e.reg }

// Handler serves the registry in the Prometheus text (or OpenMetrics)
// format.
func (e *Exporter) Handler() http.Handler {
	return promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{Registry: e.reg})
}

// ObserveSample stores s as the latest sample. s must not be modified
// afterwards.
func (e *Exporter) ObserveSample(s *sampler.Sample) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.last = s
	e.samples++
}

// ObserveStorm counts a storm when it fires and clears erplab_storm_ongoing
// when it ends.
func (e *Exporter) ObserveStorm(ev storm.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ev.Ongoing() {
		e.storms++
		e.ongoing = true
	} else {
		e.ongoing = false
	}
}

// SetOpSource sets (or, with nil, removes) the load test whose operations
// are exported.
func (e *Exporter) SetOpSource(src OpSource) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ops = src
}

// Server is a running /metrics endpoint.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// Serve listens on addr ("host:port"; port 0 picks a free one) and serves
// h at /metrics (and a short index at /) until ctx ends or Close. Errors:
// the address is malformed or cannot be bound (one line).
func Serve(ctx context.Context, addr string, h http.Handler) (*Server, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("metrics address %q: want host:port (e.g. 127.0.0.1:9187)", addr)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "erplab metrics: see /metrics")
	})
	s := &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, ln: ln, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed on Close
	}()
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.done:
		}
	}()
	return s, nil
}

// Addr is the address listened on (with the real port).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server, waiting up to 2 s for scrapes in progress.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Descriptors.
var (
	descActivity = prometheus.NewDesc("pg_stat_activity_count", "Client sessions by state (pg_stat_activity, client backends; parallel workers folded into their leader).", []string{"state"}, nil)
	descWait     = prometheus.NewDesc("pg_stat_activity_wait_event_count", "Active client sessions by wait event (wait_event_type and wait_event \"CPU\" when not waiting).", []string{"wait_event_type", "wait_event"}, nil)
	descWorkers  = prometheus.NewDesc("pg_stat_activity_parallel_workers", "Parallel workers running.", nil, nil)
	descDB       = map[string]*prometheus.Desc{}
	dbCounters   = []string{"xact_commit", "xact_rollback", "blks_read", "blks_hit", "temp_files", "temp_bytes", "deadlocks", "sessions"}
	descCatSize  = prometheus.NewDesc("pg_catalog_relation_size_bytes", "Total size of a system catalog of the sampled database (pg_total_relation_size: heap, indexes, TOAST).", []string{"relname"}, nil)
	descCatIns   = prometheus.NewDesc("pg_stat_sys_tables_n_tup_ins_total", "Rows inserted into a system catalog (pg_stat_sys_tables.n_tup_ins).", []string{"relname"}, nil)
	descCatUpd   = prometheus.NewDesc("pg_stat_sys_tables_n_tup_upd_total", "Rows updated in a system catalog (pg_stat_sys_tables.n_tup_upd).", []string{"relname"}, nil)
	descCatDel   = prometheus.NewDesc("pg_stat_sys_tables_n_tup_del_total", "Rows deleted from a system catalog (pg_stat_sys_tables.n_tup_del).", []string{"relname"}, nil)
	descCatLive  = prometheus.NewDesc("pg_stat_sys_tables_n_live_tup", "Estimated live rows of a system catalog.", []string{"relname"}, nil)
	descCatDead  = prometheus.NewDesc("pg_stat_sys_tables_n_dead_tup", "Estimated dead rows of a system catalog.", []string{"relname"}, nil)

	descCPU      = prometheus.NewDesc("node_cpu_seconds_total", "Seconds the CPUs spent in each mode (/proc/stat).", []string{"cpu", "mode"}, nil)
	descMem      = map[string]*prometheus.Desc{}
	memFields    = []string{"MemTotal", "MemAvailable", "Dirty", "Shmem", "AnonHugePages"}
	descVM       = map[string]*prometheus.Desc{}
	vmFields     = []string{"thp_fault_alloc", "thp_fault_fallback", "thp_collapse_alloc", "compact_stall", "pgmajfault"}
	descCtxt     = prometheus.NewDesc("node_context_switches_total", "Total number of context switches (/proc/stat ctxt).", nil, nil)
	descRunning  = prometheus.NewDesc("node_procs_running", "Number of processes in runnable state.", nil, nil)
	descBlocked  = prometheus.NewDesc("node_procs_blocked", "Number of processes blocked waiting for I/O.", nil, nil)
	descSamples  = prometheus.NewDesc("erplab_sampler_samples_total", "Samples taken by erplab's sampler.", nil, nil)
	descRT       = prometheus.NewDesc("erplab_sampler_round_trip_seconds", "Wall time of the last sample (one round trip).", nil, nil)
	descLastTime = prometheus.NewDesc("erplab_sampler_last_sample_timestamp_seconds", "Unix time of the last sample.", nil, nil)
	descStorms   = prometheus.NewDesc("erplab_storms_total", "Session storms detected (active sessions rising by a large factor within seconds while the CPU is not saturated).", nil, nil)
	descOngoing  = prometheus.NewDesc("erplab_storm_ongoing", "1 while a session storm goes on.", nil, nil)

	descOpHist    = prometheus.NewDesc("erplab_operation_duration_seconds", "Response time (pool wait + database) of successful scored executions of a key operation.", []string{"operation"}, nil)
	descOpCount   = prometheus.NewDesc("erplab_operations_total", "Scored executions of a key operation, errors included.", []string{"operation"}, nil)
	descOpErrors  = prometheus.NewDesc("erplab_operation_errors_total", "Failed scored executions of a key operation.", []string{"operation"}, nil)
	descOpTarget  = prometheus.NewDesc("erplab_operation_target_seconds", "APDEX target time T of a key operation.", []string{"operation"}, nil)
	descApdex     = prometheus.NewDesc("erplab_apdex", "APDEX of a key operation so far (absent while it has no samples).", []string{"operation"}, nil)
	descApdexZone = prometheus.NewDesc("erplab_apdex_samples_total", "Scored executions by APDEX zone (errors are frustrated).", []string{"operation", "zone"}, nil)
	descIntegral  = prometheus.NewDesc("erplab_apdex_integral", "Priority-weighted integral APDEX of the load test so far.", nil, nil)
)

func init() {
	for _, c := range dbCounters {
		descDB[c] = prometheus.NewDesc("pg_stat_database_"+c+"_total", "pg_stat_database."+c+" summed over all databases.", nil, nil)
	}
	for _, f := range memFields {
		descMem[f] = prometheus.NewDesc("node_memory_"+f+"_bytes", "Memory information field "+f+" (/proc/meminfo).", nil, nil)
	}
	for _, f := range vmFields {
		descVM[f] = prometheus.NewDesc("node_vmstat_"+f, "/proc/vmstat information field "+f+".", nil, nil)
	}
}

// collector reads the exporter at scrape time.
type collector struct{ e *Exporter }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descActivity, descWait, descWorkers, descCatSize, descCatIns, descCatUpd, descCatDel,
		descCatLive, descCatDead, descCPU, descCtxt, descRunning, descBlocked, descSamples, descRT, descLastTime, descStorms,
		descOngoing, descOpHist, descOpCount, descOpErrors, descOpTarget, descApdex, descApdexZone, descIntegral} {
		ch <- d
	}
	for _, m := range []map[string]*prometheus.Desc{descDB, descMem, descVM} {
		for _, d := range m {
			ch <- d
		}
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	e := c.e
	e.mu.Lock()
	s, samples, storms, ongoing, ops := e.last, e.samples, e.storms, e.ongoing, e.ops
	e.mu.Unlock()

	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	counter(descSamples, float64(samples))
	counter(descStorms, float64(storms))
	gauge(descOngoing, b2f(ongoing))
	if s != nil {
		collectSample(s, ch, gauge, counter)
	}
	if ops != nil {
		e.collectOps(ops.OpsSnapshot(), ch, gauge, counter)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

type emit func(d *prometheus.Desc, v float64, labels ...string)

func collectSample(s *sampler.Sample, ch chan<- prometheus.Metric, gauge, counter emit) {
	gauge(descRT, s.RoundTrip.Seconds())
	gauge(descLastTime, float64(s.Time.UnixNano())/1e9)
	for state, n := range map[string]int{
		"active": s.Sessions.Active, "idle": s.Sessions.Idle, "idle in transaction": s.Sessions.IdleInTransaction,
		"idle in transaction (aborted)": s.Sessions.IdleInTransactionAborted, "other": s.Sessions.Other,
	} {
		gauge(descActivity, float64(n), state)
	}
	for k, n := range s.Waits {
		typ, ev := splitWait(k)
		gauge(descWait, float64(n), typ, ev)
	}
	gauge(descWorkers, float64(s.ParallelWorkers))
	d := s.DBTotals
	for i, v := range []int64{d.XactCommit, d.XactRollback, d.BlksRead, d.BlksHit, d.TempFiles, d.TempBytes, d.Deadlocks, d.Sessions} {
		counter(descDB[dbCounters[i]], float64(v))
	}
	for _, r := range s.Catalog {
		gauge(descCatSize, float64(r.Bytes), r.Name)
		counter(descCatIns, float64(r.Ins), r.Name)
		counter(descCatUpd, float64(r.Upd), r.Name)
		counter(descCatDel, float64(r.Del), r.Name)
		gauge(descCatLive, float64(r.LiveTup), r.Name)
		gauge(descCatDead, float64(r.DeadTup), r.Name)
	}
	h := s.Host
	if h == nil {
		return
	}
	for cpu, st := range h.Counters.PerCPU {
		l := strconv.FormatInt(cpu, 10)
		for mode, v := range map[string]float64{"user": st.User, "nice": st.Nice, "system": st.System, "idle": st.Idle,
			"iowait": st.Iowait, "irq": st.IRQ, "softirq": st.SoftIRQ, "steal": st.Steal} {
			counter(descCPU, v, l, mode)
		}
	}
	for i, v := range []uint64{h.Mem.Total, h.Mem.Available, h.Mem.Dirty, h.Mem.Shmem, h.Mem.AnonHugePages} {
		gauge(descMem[memFields[i]], float64(v))
	}
	for _, f := range vmFields {
		if v, ok := h.Counters.VMStat[f]; ok {
			// Untyped, as node_exporter exposes /proc/vmstat fields.
			ch <- prometheus.MustNewConstMetric(descVM[f], prometheus.UntypedValue, float64(v))
		}
	}
	counter(descCtxt, float64(h.Counters.ContextSwitches))
	gauge(descRunning, float64(h.ProcsRunning))
	gauge(descBlocked, float64(h.ProcsBlocked))
}

// splitWait turns a sampler wait key into (wait_event_type, wait_event):
// "LWLock:LockManager" -> ("LWLock", "LockManager"), "CPU" -> ("CPU", "CPU").
func splitWait(k string) (string, string) {
	for i := 0; i < len(k); i++ {
		if k[i] == ':' {
			return k[:i], k[i+1:]
		}
	}
	return k, k
}

func (e *Exporter) collectOps(snap OpsSnapshot, ch chan<- prometheus.Metric, gauge, counter emit) {
	for _, o := range snap.Ops {
		counter(descOpCount, float64(o.Count), o.Name)
		counter(descOpErrors, float64(o.Errors), o.Name)
		gauge(descOpTarget, o.Target.Seconds(), o.Name)
		if !o.Apdex.NS() {
			gauge(descApdex, o.Apdex.Value, o.Name)
		}
		counter(descApdexZone, float64(o.Zones.Satisfied), o.Name, "satisfied")
		counter(descApdexZone, float64(o.Zones.Tolerating), o.Name, "tolerating")
		counter(descApdexZone, float64(o.Zones.Frustrated), o.Name, "frustrated")
		count, sum, buckets := histogramBuckets(o.Response, e.buckets)
		ch <- prometheus.MustNewConstHistogram(descOpHist, count, sum, buckets, o.Name)
	}
	if snap.IntegralOK {
		gauge(descIntegral, snap.Integral)
	}
}

// histogramBuckets turns an HdrHistogram of µs into a Prometheus
// histogram: total count, sum (seconds, from the mean) and cumulative
// counts per upper bound (seconds). A value counts in a bucket when the
// lowest value of its HdrHistogram sub-bucket is within the bound (the
// sub-buckets are 0.1 % wide at 3 significant digits).
func histogramBuckets(h *hdrhistogram.Histogram, bounds []float64) (uint64, float64, map[float64]uint64) {
	out := make(map[float64]uint64, len(bounds))
	for _, b := range bounds {
		out[b] = 0
	}
	if h == nil || h.TotalCount() == 0 {
		return 0, 0, out
	}
	for _, bar := range h.Distribution() {
		if bar.Count == 0 {
			continue
		}
		from := float64(bar.From) / 1e6
		for _, b := range bounds {
			if from <= b {
				out[b] += uint64(bar.Count)
			}
		}
	}
	n := h.TotalCount()
	return uint64(n), h.Mean() * float64(n) / 1e6, out
}
