package sampler

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/storm"
)

// ObservationsFormat names the version of the observations section.
const ObservationsFormat = "erplab-observations/1"

// SessionOptions configure a Session.
type SessionOptions struct {
	Options
	// Interval is the sampling period (default DefaultInterval, at least
	// MinInterval). Ticks are aligned to start + k*Interval, so sample
	// times line up with the load test's intervals (results.Interval.T); a
	// tick whose time has passed while a slow sample ran is skipped.
	Interval time.Duration
	// Rule is the storm rule; the zero value means storm.DefaultRule().
	// When its CPUs is 0 and the host is sampled (a local server), CPUs is
	// set to the host's CPU count, turning the crowd rule on.
	Rule storm.Rule
	// OnSample, when set, is called on the session's goroutine after every
	// successful sample (e.g. metrics.Exporter.ObserveSample). It must
	// not keep the goroutine long nor modify the sample.
	OnSample func(*Sample)
	// OnStorm, when set, is called on the session's goroutine when a
	// storm fires (Ongoing) and when it ends.
	OnStorm func(storm.Event)
	// Thinning, when set, bounds the series kept (run --soak).
	Thinning *Thinning
}

// SampleError is a sample that failed, at T seconds since the start.
type SampleError struct {
	T     float64 `json:"t"`
	Error string  `json:"error"`
}

// Cost is what sampling cost, measured during the session.
type Cost struct {
	// Samples is the number of successful samples, Errors of failed ones.
	Samples int64 `json:"samples"`
	Errors  int64 `json:"errors"`
	// RoundTrip* summarise the wall time of one sample (host read, batch
	// sent, all results read), ms.
	RoundTripMeanMs float64 `json:"round_trip_mean_ms"`
	RoundTripP99Ms  float64 `json:"round_trip_p99_ms"`
	RoundTripMaxMs  float64 `json:"round_trip_max_ms"`
	// RoundTripsPerSample is the number of client-server round trips per
	// sample: 1 (all sources in one pipelined batch; the first sample on a
	// connection adds one to prepare the statements).
	RoundTripsPerSample int `json:"round_trips_per_sample"`
	// BackendCPUMs is the CPU time (user+system) of the sampler's own
	// backend process over its current connection, from
	// /proc/<pid>/stat (local servers only; 0 otherwise), and
	// BackendCPUPerSampleMs that divided by the samples on it.
	BackendCPUMs          float64 `json:"backend_cpu_ms,omitempty"`
	BackendCPUPerSampleMs float64 `json:"backend_cpu_per_sample_ms,omitempty"`
	// BackendCPUShare is BackendCPUMs over the wall time of the connection
	// as % of one CPU.
	BackendCPUShare float64 `json:"backend_cpu_pct_of_one_cpu,omitempty"`
}

// Observations is the "observations" section of a results document
// (results.Document.Extra["observations"]). Series holds one Sample per
// tick, T in seconds since the load test's start like results.Interval.T;
// to keep the document small, rate and count fields that are 0 are left
// out of each point (read a missing number as 0), and the first point has
// no "db" rates and no CPU split. Storms are the detected storms with
// their times on the same axis; Errors the failed samples.
type Observations struct {
	Format    string        `json:"format"`
	IntervalS float64       `json:"interval_s"`
	Server    Info          `json:"server"`
	StormRule RuleParams    `json:"storm_rule"`
	Cost      Cost          `json:"sampler_cost"`
	Series    []Sample      `json:"series"`
	Storms    []storm.Event `json:"storms"`
	Errors    []SampleError `json:"errors,omitempty"`
	// Statements is pg_stat_statements over the sampling (nil while
	// sampling goes on, and in results written before erplab recorded
	// it); its Note says how to enable the extension when absent.
	Statements *Statements `json:"statements,omitempty"`
	// Locks is the relation locks held per key operation, from pg_locks
	// at each sample (Options.Locks; nil without, and in results written
	// before erplab recorded it).
	Locks *Locks `json:"locks,omitempty"`
	// Horizon is true when the samples record the xmin horizon
	// (Sample.XminAge, OldestXactS: 0 there is none held); false in
	// results written before.
	Horizon bool `json:"xmin_horizon,omitempty"`
}

// RuleParams are the storm rule's thresholds as recorded (storm.Rule).
type RuleParams struct {
	WindowS      float64 `json:"window_s"`
	Factor       float64 `json:"factor"`
	MinActive    int     `json:"min_active"`
	CPUSaturated float64 `json:"cpu_saturated_pct"`
	EndRatio     float64 `json:"end_ratio"`
	// The crowd rule's (absent when it was off: CPUs 0).
	CPUs        int     `json:"cpus,omitempty"`
	CrowdFactor float64 `json:"crowd_factor,omitempty"`
	CrowdShare  float64 `json:"crowd_lock_share,omitempty"`
	CrowdPoints int     `json:"crowd_points,omitempty"`
	// The relative rule's (absent when it was off: RelWindow 0).
	RelWindowS   float64 `json:"relative_window_s,omitempty"`
	RelPoints    int     `json:"relative_points,omitempty"`
	RelRise      float64 `json:"relative_rise,omitempty"`
	RelCPUShare  float64 `json:"relative_cpu_share,omitempty"`
	RelCPUFloor  float64 `json:"relative_cpu_floor_cores,omitempty"`
	RelWaitShare float64 `json:"relative_wait_share,omitempty"`
	RelMinActive int     `json:"relative_min_active,omitempty"`
}

// Session samples a server every interval in the background. Its methods
// are safe for concurrent use.
type Session struct {
	s        *Sampler
	start    time.Time
	interval time.Duration
	opts     SessionOptions
	cancel   context.CancelFunc
	done     chan struct{}

	mu       sync.Mutex
	info     Info // ss.s.Info() as of the last tick
	det      *storm.Detector
	series   []Sample
	thinDone int // series[:thinDone] are settled (Thinning)
	latest   *Sample
	errs     []SampleError
	samples  int64
	rt       *hdrhistogram.Histogram // round trip, µs
	cpuStart float64                 // backend CPU seconds at connection
	cpuConn  time.Time
	connPID  int
	connN    int64 // samples on the current connection
	cost     *Cost // set by Stop
	// locks gathers the relation locks per operation (Options.Locks).
	locks map[string]*lockAgg

	// stmtStart is the pg_stat_statements snapshot taken after the first
	// sample (nil without it), stmtNote why not (both touched by the
	// loop's goroutine only once it runs); statements is the result, set
	// when sampling ends (under mu).
	stmtStart  *stmtSnapshot
	stmtNote   string
	statements *Statements
}

// Start connects to dsn (see Connect) and samples every opts.Interval
// until Stop, with T measured from start (pass the load test's start,
// record.Recorder.Start(), to share its time base). The first sample is
// taken at once, at T = time since start. Cancelling ctx stops sampling
// too; Observations stays readable either way. Errors: a bad interval or
// storm rule, or the connection failing (one line, no password).
func Start(ctx context.Context, dsn string, start time.Time, opts SessionOptions) (*Session, error) {
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Interval < MinInterval {
		return nil, fmt.Errorf("sampler: interval must be at least %s, got %s", MinInterval, opts.Interval)
	}
	if opts.Rule == (storm.Rule{}) {
		opts.Rule = storm.DefaultRule()
	}
	if _, err := storm.NewDetector(opts.Rule); err != nil {
		return nil, err
	}
	s, err := Connect(ctx, dsn, opts.Options)
	if err != nil {
		return nil, err
	}
	if opts.Rule.CPUs == 0 {
		opts.Rule.CPUs = s.HostCPUs()
	}
	det, err := storm.NewDetector(opts.Rule)
	if err != nil {
		s.Close(ctx)
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	ss := &Session{
		s: s, start: start, interval: opts.Interval, opts: opts, cancel: cancel, done: make(chan struct{}),
		det: det, rt: hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3),
	}
	ss.noteConnection(s.Info(), s.connected)
	ss.stmtNote = s.statementsNote()
	go ss.loop(sctx)
	return ss, nil
}

// noteConnection records the server info and the backend CPU at the
// start of a connection; called with mu held or before the loop starts.
func (ss *Session) noteConnection(info Info, connected time.Time) {
	ss.info = info
	ss.connPID, ss.connN, ss.cpuConn = info.BackendPID, 0, connected
	ss.cpuStart, _ = ss.backendCPU()
}

// backendCPU returns the CPU seconds of the sampler's backend, when the
// host is sampled (the backend is a local process); mu held.
func (ss *Session) backendCPU() (float64, bool) {
	if !ss.info.HostSampled {
		return 0, false
	}
	fs, err := hostfacts.New(ss.s.opts.ProcRoot, "")
	if err != nil {
		return 0, false
	}
	st, err := fs.ProcStat(ss.connPID)
	if err != nil || st.Comm != "postgres" { // another pid namespace?
		return 0, false
	}
	return st.CPUTime(), true
}

func (ss *Session) loop(ctx context.Context) {
	defer close(ss.done)
	defer ss.finish()
	for k := int64(0); ; {
		ss.tick(ctx)
		if k == 0 && ss.stmtNote == "" && ss.stmtStart == nil {
			// The opening pg_stat_statements snapshot, right after the
			// first sample so as not to delay it.
			var err error
			if ss.stmtStart, err = ss.s.snapshotStatements(ctx, 0); err != nil {
				ss.stmtNote = "statements: " + err.Error()
			}
		}
		// Next tick: the first multiple of the interval after now.
		el := time.Since(ss.start)
		next := int64(el/ss.interval) + 1
		if next <= k {
			next = k + 1
		}
		k = next
		t := time.NewTimer(time.Until(ss.start.Add(time.Duration(k) * ss.interval)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// StormPoint is the sample as a point of the storm rules at t seconds
// (the series' time axis): active sessions, their wait events, the host
// CPU busy share and the server's CPU use in cores (Noise's server share
// of all CPUs times the CPU count), each when measured. Run and doctor
// (Session) and top build their points with it.
func (smp *Sample) StormPoint(t float64) storm.Point {
	p := storm.Point{T: t, Active: smp.Sessions.Active, Waits: smp.Waits}
	if smp.Host != nil && smp.Host.Rates {
		p.CPUBusy, p.CPUKnown = smp.Host.CPU.Busy, true
	}
	if n := smp.Noise; n != nil && n.CPUs > 0 {
		p.ServerCPU, p.ServerCPUKnown = (n.ServerUser+n.ServerSystem)/100*float64(n.CPUs), true
	}
	return p
}

func (ss *Session) tick(ctx context.Context) {
	connected := ss.s.connected
	smp, err := ss.s.Sample(ctx)
	if ss.s.connected != connected { // reconnected
		ss.mu.Lock()
		ss.noteConnection(ss.s.Info(), ss.s.connected)
		ss.mu.Unlock()
	}
	if err != nil {
		if ctx.Err() != nil {
			return // stopping: not a sampling failure
		}
		ss.mu.Lock()
		ss.errs = append(ss.errs, SampleError{T: round3(time.Since(ss.start).Seconds()), Error: err.Error()})
		ss.mu.Unlock()
		return
	}
	smp.T = round3(smp.Time.Sub(ss.start).Seconds())
	p := smp.StormPoint(smp.T)
	ss.mu.Lock()
	fired, ended := ss.det.Observe(p)
	rec := *smp
	rec.Queries = nil
	ss.series = append(ss.series, rec)
	ss.series, ss.thinDone = thinSamples(ss.opts.Thinning, ss.series, ss.thinDone)
	ss.addLocks(smp.Locks)
	ss.latest = smp
	ss.samples++
	ss.connN++
	_ = ss.rt.RecordValue(max(smp.RoundTrip.Microseconds(), 1))
	ss.mu.Unlock()

	if ss.opts.OnSample != nil {
		ss.opts.OnSample(smp)
	}
	if ss.opts.OnStorm != nil {
		if ended != nil {
			ss.opts.OnStorm(*ended)
		}
		if fired != nil {
			ss.opts.OnStorm(*fired)
		}
	}
}

// finish takes the closing pg_stat_statements snapshot and closes the
// connection; on the loop's goroutine as it ends.
func (ss *Session) finish() {
	defer ss.s.Close(context.Background())
	st := &Statements{Note: ss.stmtNote, Top: []Statement{}}
	if ss.stmtStart != nil {
		end, err := ss.s.snapshotStatements(context.Background(), keyText)
		if err != nil {
			st.Note = "statements: at the end: " + err.Error()
		} else {
			texts, _ := ss.s.opts.Ops.Texts().Counts()
			st = statementsDelta(ss.stmtStart, end, ss.s.sightings, ss.s.opts.Ops.Names(), textOps(texts))
		}
	}
	ss.mu.Lock()
	ss.statements = st
	ss.mu.Unlock()
}

// Statements returns pg_stat_statements over the session, nil until
// sampling has ended (Stop). Its Note says why figures are missing.
func (ss *Session) Statements() *Statements {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.statements
}

// Stop ends sampling, closes the connection and fixes the cost figures.
// It is idempotent.
func (ss *Session) Stop() {
	ss.mu.Lock()
	stopped := ss.cost != nil
	ss.mu.Unlock()
	if stopped {
		return
	}
	// Read the backend CPU before the connection closes.
	cpu, cpuOK := ss.backendCPUNow()
	ss.cancel()
	<-ss.done
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.cost != nil {
		return
	}
	c := ss.costLocked()
	if cpuOK {
		used := max(cpu-ss.cpuStart, 0)
		c.BackendCPUMs = round2(used * 1000)
		if ss.connN > 0 {
			c.BackendCPUPerSampleMs = round3(used * 1000 / float64(ss.connN))
		}
		if wall := time.Since(ss.cpuConn).Seconds(); wall > 0 {
			c.BackendCPUShare = round3(100 * used / wall)
		}
	}
	ss.cost = &c
}

func (ss *Session) backendCPUNow() (float64, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.backendCPU()
}

func (ss *Session) costLocked() Cost {
	c := Cost{Samples: ss.samples, Errors: int64(len(ss.errs)), RoundTripsPerSample: 1}
	if ss.rt.TotalCount() > 0 {
		c.RoundTripMeanMs = round3(ss.rt.Mean() / 1000)
		c.RoundTripP99Ms = round3(float64(ss.rt.ValueAtQuantile(99)) / 1000)
		c.RoundTripMaxMs = round3(float64(ss.rt.Max()) / 1000)
	}
	return c
}

// addLocks adds a sample's backends to the per-operation figures; mu
// held.
func (ss *Session) addLocks(bs []BackendLocks) {
	for _, b := range bs {
		if ss.locks == nil {
			ss.locks = map[string]*lockAgg{}
		}
		a := ss.locks[b.Op]
		if a == nil {
			a = &lockAgg{}
			ss.locks[b.Op] = a
		}
		a.add(b)
	}
}

// Info describes the sampled server.
func (ss *Session) Info() Info {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.info
}

// Latest returns the last successful sample (with its query list), or
// nil before the first.
func (ss *Session) Latest() *Sample {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.latest
}

// Storms returns the storms so far; the last may be ongoing.
func (ss *Session) Storms() []storm.Event {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.det.Events()
}

// Snapshot returns the observations so far (the series is shared, not
// copied: do not modify it). Before Stop the cost has no backend CPU.
func (ss *Session) Snapshot() Observations {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	c := ss.costLocked()
	if ss.cost != nil {
		c = *ss.cost
	}
	r := ss.opts.Rule
	o := Observations{
		Format: ObservationsFormat, IntervalS: ss.interval.Seconds(), Server: ss.info,
		StormRule: RuleParams{WindowS: r.Window.Seconds(), Factor: r.Factor, MinActive: r.MinActive,
			CPUSaturated: r.CPUSaturated, EndRatio: r.EndRatio},
		Cost: c, Series: ss.series[:len(ss.series):len(ss.series)], Storms: ss.det.Events(), Errors: ss.errs,
		Statements: ss.statements, Horizon: true,
	}
	if ss.opts.Locks {
		o.Locks = lockSummary(ss.locks)
	}
	if r.RelWindow > 0 {
		o.StormRule.RelWindowS, o.StormRule.RelPoints, o.StormRule.RelRise = r.RelWindow.Seconds(), r.RelPoints, r.RelRise
		o.StormRule.RelCPUShare, o.StormRule.RelCPUFloor = r.RelCPUShare, r.RelCPUFloor
		o.StormRule.RelWaitShare, o.StormRule.RelMinActive = r.RelWaitShare, r.RelMinActive
	}
	if r.CPUs > 0 {
		o.StormRule.CPUs, o.StormRule.CrowdFactor, o.StormRule.CrowdShare, o.StormRule.CrowdPoints = r.CPUs, r.CrowdFactor, r.CrowdShare, r.CrowdPoints
	}
	if o.Series == nil {
		o.Series = []Sample{}
	}
	if o.Storms == nil {
		o.Storms = []storm.Event{}
	}
	return o
}

// Observations returns the observations so far as JSON, for
// results.Document.Extra["observations"]. Call Stop first for the final
// figures.
func (ss *Session) Observations() json.RawMessage {
	b, err := json.Marshal(ss.Snapshot())
	if err != nil { // only plain values inside: cannot happen
		return json.RawMessage(`null`)
	}
	return b
}

// ReadObservations decodes an observations section.
func ReadObservations(raw json.RawMessage) (*Observations, error) {
	var o Observations
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, fmt.Errorf("observations: %w", err)
	}
	if o.Format != ObservationsFormat {
		return nil, fmt.Errorf("observations: format %q, want %q", o.Format, ObservationsFormat)
	}
	return &o, nil
}
