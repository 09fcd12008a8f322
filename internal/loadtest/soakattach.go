package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/soak"
)

// SoakOptions are run --soak's: the window, and the collapse limits
// that end the run with StopOnCollapse. Horizon bounds the series and
// the observations' samples kept in memory and in the results
// (record.Recorder.SetThinning, sampler.Thinning, by one rule): those
// older than Horizon are folded into one point per Window, except those
// of the KeepBeforeWarning before each warning; 0 keeps every one.
type SoakOptions struct {
	Window         time.Duration
	StopOnCollapse bool
	Limits         soak.Limits
	Horizon        time.Duration
}

// DefaultSoakHorizon is run --soak's full-resolution horizon.
const DefaultSoakHorizon = time.Hour

// KeepBeforeWarning is how much of the series before a soak warning
// stays at full resolution when thinning reaches it: twice doctor
// --results' default window, so `doctor --results FILE --at T` reads the
// turn at full resolution.
const KeepBeforeWarning = 10 * time.Minute

// soakAttachment cuts the run into windows (run --soak): per window one
// line of the load's and the server's figures, the trends over the
// recent windows, an early warning when one becomes real, and with
// --stop-on-collapse the end of the run at a collapse; all of it kept as
// extra.soak (soak.Section). The intervals reach it from the engine's
// goroutine through a channel; its own goroutine reads the samplers'
// latest sample, runs one query a window on its own connection for what
// the samplers lack (xmin and xid age, WAL, the user tables' dead tuples
// and size, autovacuum) and prints.
type soakAttachment struct {
	quiet
	opts    SoakOptions
	b       *soak.Builder
	det     soak.Detector
	ivs     chan results.Interval
	done    chan struct{}
	conn    *pgx.Conn
	prev    serverFigures
	dropped int
	sec     soak.Section
	lastT   float64 // of the last sample read
	stopErr atomic.Pointer[error]
	errKind map[string]bool
}

func newSoak(o SoakOptions) *soakAttachment { return &soakAttachment{opts: o} }

func (s *soakAttachment) start(ctx context.Context, r *runState) error {
	ops := make([]soak.Op, len(r.ops))
	for i, op := range r.ops {
		ops[i] = soak.Op{Name: op.Name, Target: op.Target, Priority: op.Priority}
	}
	s.b = soak.NewBuilder(s.opts.Window, ops)
	rule := soak.DefaultRule()
	rule.OpenModel = len(r.opts.Rate) > 0
	s.det = soak.Detector{Rule: rule, Ctx: soak.Context{Ops: ops}}
	s.sec = soak.Section{Format: soak.Format, WindowS: s.opts.Window.Seconds(), Rule: s.det.Rule, Windows: []soak.Window{}}
	if s.opts.StopOnCollapse {
		s.sec.Limits = &s.opts.Limits
	}
	s.errKind = map[string]bool{}
	conn, err := conninfo.Connect(ctx, r.srv.dsn, "erplab soak", nil)
	if err != nil {
		s.note(r, "server figures", err)
	} else {
		s.conn = conn
		var mc int
		if conn.QueryRow(ctx, "SELECT current_setting('max_connections')::int").Scan(&mc) == nil {
			s.det.Ctx.MaxConnections = mc
		}
		s.prev = s.query(ctx, r)
	}
	s.ivs = make(chan results.Interval, 4096)
	s.done = make(chan struct{})
	r.stopRun = s.stopRun
	go s.loop(context.WithoutCancel(ctx), r)
	return nil
}

// stopRun is the engine's Stop: the collapse, once seen.
func (s *soakAttachment) stopRun() error {
	if p := s.stopErr.Load(); p != nil {
		return *p
	}
	return nil
}

// interval hands iv to the soak's goroutine without waiting (an interval
// that does not fit in the channel's 4096 is counted and lost).
func (s *soakAttachment) interval(_ *runState, iv results.Interval) {
	select {
	case s.ivs <- iv:
	default:
		s.dropped++
	}
}

func (s *soakAttachment) loop(ctx context.Context, r *runState) {
	defer close(s.done)
	for iv := range s.ivs {
		s.sample(r)
		if s.b.AddInterval(iv) {
			s.closeWindow(ctx, r, iv.T)
		}
	}
}

// sample adds the samplers' latest sample to the open window, once.
func (s *soakAttachment) sample(r *runState) {
	if r.obs == nil {
		return
	}
	sm := r.obs.Latest()
	if sm == nil || sm.T <= s.lastT {
		return
	}
	s.lastT = sm.T
	s.b.AddPoint(sampleFigures(sm))
}

// sampleFigures are the soak's metrics of one sample.
func sampleFigures(sm *sampler.Sample) map[string]float64 {
	v := map[string]float64{
		soak.KeyActive:       float64(sm.Sessions.Active),
		soak.KeyIdleInTx:     float64(sm.Sessions.IdleInTransaction),
		soak.KeyCatalogBytes: float64(sm.CatalogBytes()),
	}
	waiting, dead := 0, int64(0)
	for k, n := range sm.Waits {
		if k != "CPU" {
			waiting += n
			v[soak.KeyWait+k] = float64(n)
		}
	}
	v[soak.KeyWaiting] = float64(waiting)
	for _, c := range sm.Catalog {
		dead += c.DeadTup
	}
	v[soak.KeyCatalogDead] = float64(dead)
	if sm.DB != nil {
		v[soak.KeyTempFiles], v[soak.KeyTempBytes] = sm.DB.TempFiles, sm.DB.TempBytes
	}
	if sm.Churn != nil {
		v[soak.KeySInval] = sm.Churn.SInvalPerS
	}
	if h := sm.Host; h != nil && h.Rates {
		v[soak.KeyCPU] = h.CPU.Busy
	}
	if h := sm.Host; h != nil && h.Mem.Total > 0 {
		v[soak.KeyMemUsed] = float64(h.Mem.Total - h.Mem.Available)
	}
	return v
}

// closeWindow closes the open window at toS: its server figures, the
// trends, its line, a warning, a collapse.
func (s *soakAttachment) closeWindow(ctx context.Context, r *runState, toS float64) {
	if s.conn != nil {
		cur := s.query(ctx, r)
		s.b.AddPoint(cur.values(s.prev))
		s.prev = cur
	}
	w := s.b.Close(toS)
	s.sec.Windows = append(s.sec.Windows, w)
	trends, wn := s.det.Next(s.sec.Windows)
	s.sec.Trends = trends
	r.say("%s", windowLine(w, s.det.Ctx.Ops))
	if wn != nil {
		s.sec.Warnings = append(s.sec.Warnings, *wn)
		r.rec.KeepFull(toS-max(KeepBeforeWarning, 2*s.opts.Window).Seconds(), toS)
		r.say("%s", wn.Line)
	}
	if s.opts.StopOnCollapse && s.sec.Collapse == nil {
		if why := s.opts.Limits.Collapse(w); why != "" {
			s.sec.Collapse = &soak.Collapsed{TS: w.ToS, Window: w.I, Reason: why}
			err := soak.CollapseError(w, why)
			s.stopErr.Store(&err)
			r.say("collapse at %s s: %s: stopping the run (--stop-on-collapse)", fmtSeconds(w.ToS), why)
		}
	}
}

// windowLine is a window's line: "soak window 3 (15-20 s): APDEX 0.93,
// 412 tps, slowest p95 post_goods_receipt 87ms (T 200ms), 3.1 active
// (1.2 waiting: LWLock:SInvalRead 0.8), catalog 21.0 MB, xmin age 1200".
func windowLine(w soak.Window, ops []soak.Op) string {
	v := w.Values
	parts := []string{}
	if a, ok := v[soak.KeyApdex]; ok {
		parts = append(parts, fmt.Sprintf("APDEX %.2f", a))
	}
	parts = append(parts, fmt.Sprintf("%.1f tps", v[soak.KeyTPS]))
	worst, ratio := "", 0.0
	for _, op := range ops {
		if p, ok := v[soak.KeyP95+op.Name]; ok && op.Target > 0 {
			if q := p / (float64(op.Target) / 1e6); q > ratio {
				worst, ratio = fmt.Sprintf("p95 %s %s (T %s)", op.Name, results.FormatMs(p), results.FormatMs(float64(op.Target)/1e6)), q
			}
		}
	}
	if worst != "" {
		parts = append(parts, worst)
	}
	if a, ok := v[soak.KeyActive]; ok {
		s := fmt.Sprintf("%.1f active (%.1f waiting", a, v[soak.KeyWaiting])
		if top, n := topWait(v); top != "" {
			s += fmt.Sprintf(", most in %s %.1f", top, n)
		}
		parts = append(parts, s+")")
	}
	if c, ok := v[soak.KeyCatalogBytes]; ok {
		parts = append(parts, "catalog "+fmtBytes(int64(c)))
	}
	for _, k := range []struct{ key, label string }{{soak.KeyDeadTuples, "dead tuples"}, {soak.KeyXminAge, "xmin age"}, {soak.KeyTempFiles, "temp files/s"}} {
		if x, ok := v[k.key]; ok {
			parts = append(parts, fmt.Sprintf("%s %.0f", k.label, x))
		}
	}
	if x, ok := v[soak.KeyWAL]; ok {
		parts = append(parts, "WAL "+fmtBytes(int64(x))+"/s")
	}
	if x, ok := v[soak.KeyMemUsed]; ok {
		parts = append(parts, "host memory used "+fmtBytes(int64(x)))
	}
	steady := ""
	if !w.Steady {
		steady = ", not in trends"
	}
	return fmt.Sprintf("soak window %d (%s-%s s%s): %s", w.I, fmtSeconds(w.FromS), fmtSeconds(w.ToS), steady, strings.Join(parts, ", "))
}

// topWait is the wait event with the most sessions in the window.
func topWait(v map[string]float64) (string, float64) {
	keys := make([]string, 0)
	for k := range v {
		if strings.HasPrefix(k, soak.KeyWait) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	best, n := "", 0.0
	for _, k := range keys {
		if v[k] > n {
			best, n = strings.TrimPrefix(k, soak.KeyWait), v[k]
		}
	}
	return best, n
}

// serverFigures is the soak's own query at one time.
type serverFigures struct {
	at                                   time.Time
	ok                                   bool
	xminAge, xidAge, dead, bytes, avWork float64
	wal, avRuns                          *float64
}

// soakQuery reads what the samplers lack, in one round trip: the
// oldest xmin's age (sessions, prepared transactions, replication
// slots), the database's xid age, the WAL position (NULL on a standby),
// the user tables' dead tuples and size, the autovacuum workers and the
// autovacuum and autoanalyze runs so far.
const soakQuery = `SELECT
 coalesce(greatest((SELECT max(age(backend_xmin)) FROM pg_stat_activity),
   (SELECT max(age(transaction)) FROM pg_prepared_xacts),
   (SELECT max(age(xmin)) FROM pg_replication_slots)), 0)::float8,
 (SELECT age(datfrozenxid) FROM pg_database WHERE datname = current_database())::float8,
 CASE WHEN pg_is_in_recovery() THEN NULL ELSE (pg_current_wal_lsn() - '0/0'::pg_lsn)::float8 END,
 (SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables)::float8,
 (SELECT coalesce(sum(pg_total_relation_size(relid)), 0) FROM pg_stat_user_tables)::float8,
 (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker')::float8,
 (SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0) FROM pg_stat_all_tables)::float8`

func (s *soakAttachment) query(ctx context.Context, r *runState) serverFigures {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	f := serverFigures{at: time.Now()}
	var runs float64
	err := s.conn.QueryRow(qctx, soakQuery).Scan(&f.xminAge, &f.xidAge, &f.wal, &f.dead, &f.bytes, &f.avWork, &runs)
	if err != nil {
		s.note(r, "server figures", err)
		return serverFigures{}
	}
	f.ok, f.avRuns = true, &runs
	return f
}

// values are the metrics of f, the rates against prev.
func (f serverFigures) values(prev serverFigures) map[string]float64 {
	if !f.ok {
		return nil
	}
	v := map[string]float64{soak.KeyXminAge: f.xminAge, soak.KeyXidAge: f.xidAge, soak.KeyDeadTuples: f.dead,
		soak.KeyTableBytes: f.bytes, soak.KeyAutovacuum: f.avWork}
	if dt := f.at.Sub(prev.at).Seconds(); prev.ok && dt > 0 {
		if f.wal != nil && prev.wal != nil {
			v[soak.KeyWAL] = (*f.wal - *prev.wal) / dt
		}
		v[soak.KeyAutovacRuns] = (*f.avRuns - *prev.avRuns) / dt * 60
	}
	return v
}

// note prints why figures are missing, once per kind, and keeps it.
func (s *soakAttachment) note(r *runState, kind string, err error) {
	if s.errKind[kind] {
		return
	}
	s.errKind[kind] = true
	msg := fmt.Sprintf("soak: %s off: %s", kind, conninfo.Describe(err))
	s.sec.Errors = append(s.sec.Errors, msg)
	r.say("warning: %s", msg)
}

func (s *soakAttachment) stop(ctx context.Context, r *runState, doc *results.Document) {
	if s.ivs == nil {
		return
	}
	close(s.ivs)
	<-s.done
	s.ivs = nil
	if r.frozen && s.conn != nil { // a server not answering would hold the query for its timeout
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s.conn.Close(cctx)
		cancel()
		s.conn = nil
	}
	// The last, partial window: not a sliver after the load's end (the
	// graceful stop's last intervals), less than a quarter of a window.
	sliver := max(r.opts.Interval.Seconds(), s.opts.Window.Seconds()/4)
	if end := r.end.Sub(r.start).Seconds(); s.b.Pending() && end-s.b.OpenFrom() >= sliver {
		s.closeWindow(context.WithoutCancel(ctx), r, end)
	}
	if s.dropped > 0 {
		s.sec.Errors = append(s.sec.Errors, fmt.Sprintf("%d intervals lost (the soak fell behind)", s.dropped))
	}
	doc.Extra["soak"], _ = json.Marshal(s.sec)
}

func (s *soakAttachment) report(w io.Writer, _ *results.Document) {
	if s.sec.Format == "" {
		return
	}
	fmt.Fprintf(w, "soak: %d windows of %s, %d warnings", len(s.sec.Windows), s.opts.Window, len(s.sec.Warnings))
	if c := s.sec.Collapse; c != nil {
		fmt.Fprintf(w, ", stopped at the collapse at %s s (%s)", fmtSeconds(c.TS), c.Reason)
	}
	fmt.Fprintln(w)
	for _, wn := range s.sec.Warnings {
		fmt.Fprintf(w, "  %s\n", wn.Line)
	}
}

func (s *soakAttachment) close() {
	if s.ivs != nil {
		close(s.ivs)
		<-s.done
		s.ivs = nil
	}
	if s.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s.conn.Close(ctx)
		cancel()
		s.conn = nil
	}
}
