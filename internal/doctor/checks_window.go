package doctor

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/erplab/erplab/internal/apdex"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/storm"
)

// Window checks' limits.
const (
	// winWaitMin: a wait event's mean waiting sessions in the window from
	// which a rise counts; winRise the factor over the run before it.
	winWaitMin = 2.0
	winRise    = 2.0
	// winCatalogWarnBps: catalog growth in the window, bytes per second,
	// that warns when it is winRise times the run's before it (1 MB/min).
	winCatalogWarnBps = 1 << 20 / 60.0
	// winResetsWarn: catalog cache resets per second in the window that
	// warn when winRise times the run's before it.
	winResetsWarn = 1.0
	// winApdexDrop: an operation's APDEX fall in the window that warns.
	winApdexDrop = 0.1
	// srcWindow is where the window's figures come from.
	srcWindow = "internal/doctor/results_window.go (doctor --results: a window of a run's recorded observations and intervals against the run before it)"
)

func init() {
	register(Check{ID: "window-waits", Title: "Wait events rising in the window", order: secWindow + 10, run: checkWindowWaits,
		Rule:    fmt.Sprintf("doctor --results; warning when a wait event of sessions waiting on each other or on storage (LWLock, Lock, BufferPin, IO) averages >= %g sessions in the window and >= %g times its mean before it", winWaitMin, winRise),
		Why:     "Sessions piling up on one wait event while the server's CPU stays flat is the turn of a collapse: they queue, they do not work.",
		Sources: []string{srcWindow, srcWaitEvents, srcFieldLockMgr}})
}

// checkWindowWaits compares each wait event's mean waiting sessions in the
// window with the run before it, beside the server's CPU.
func checkWindowWaits(_ context.Context, e *env) result {
	w := e.win
	if w.obs == nil {
		return notChecked(w.obsWhy)
	}
	in, before := w.samples(false), w.samples(true)
	if len(in) == 0 {
		return notChecked("samples in " + w.span() + ", which the observations do not hold")
	}
	mi, mb := meanWaits(in), meanWaits(before)
	type rise struct {
		key    string
		b, win float64
	}
	var rises []rise
	for k, v := range mi {
		if k != "CPU" && v >= winWaitMin && v >= winRise*mb[k] && storm.IsWaitingOnOthers(k) {
			rises = append(rises, rise{k, mb[k], v})
		}
	}
	sort.Slice(rises, func(i, j int) bool {
		return rises[i].win > rises[j].win || (rises[i].win == rises[j].win && rises[i].key < rises[j].key)
	})
	ctxLine := fmt.Sprintf("active sessions %.1f -> %.1f%s", meanOf(before, activeOf), meanOf(in, activeOf), cpuFigures(before, in))
	r := result{sev: OK, metrics: map[string]float64{"active_before": round2(meanOf(before, activeOf)), "active_window": round2(meanOf(in, activeOf))}}
	if len(rises) == 0 {
		r.summary = fmt.Sprintf("in %s: no wait event rising (%s)", w.span(), ctxLine)
		return r
	}
	top := rises[0]
	r.sev = Warning
	r.summary = fmt.Sprintf("in %s: %s %.1f -> %.1f sessions (%s)%s", w.span(), top.key, top.b, top.win, ratio(top.b, top.win), cpuFigures(before, in))
	for _, x := range rises[:min(3, len(rises))] {
		r.evidence = append(r.evidence, Evidence{Text: fmt.Sprintf("in %s: %s %.1f -> %.1f sessions waiting (%s) against %s", w.span(), x.key, x.b, x.win, ratio(x.b, x.win), beforeOr(w)), From: w.source("extra.observations.series[].waits")})
	}
	r.evidence = append(r.evidence, Evidence{Text: "in " + w.span() + ": " + ctxLine, From: w.source("extra.observations.series[].sessions, noise")})
	r.metrics["wait_window"], r.metrics["wait_before"] = round2(top.win), round2(top.b)
	r.fix = waitFix(top.key)
	return r
}

// meanWaits is the mean sessions per wait event over samples, each
// weighted by the samples it stands for (a thinned series' coarse ones).
func meanWaits(ss []sampler.Sample) map[string]float64 {
	out, n := map[string]float64{}, 0.0
	for i := range ss {
		n += ss[i].Weight()
	}
	for i := range ss {
		for k, c := range ss[i].Waits {
			out[k] += float64(c) * ss[i].Weight() / n
		}
	}
	return out
}

func activeOf(s sampler.Sample) (float64, bool) { return float64(s.Sessions.Active), true }

// serverCPU is the server's CPU in cores over the sample's interval.
func serverCPU(s sampler.Sample) (float64, bool) {
	p := s.StormPoint(s.T)
	return p.ServerCPU, p.ServerCPUKnown
}

// meanOf is the mean of f over the samples where it is known (0: none),
// each weighted by the samples it stands for (Sample.Weight).
func meanOf(ss []sampler.Sample, f func(sampler.Sample) (float64, bool)) float64 {
	sum, n := 0.0, 0.0
	for _, s := range ss {
		if v, ok := f(s); ok {
			sum, n = sum+v*s.Weight(), n+s.Weight()
		}
	}
	if n == 0 {
		return 0
	}
	return sum / n
}

// cpuFigures is " at server CPU 0.62 -> 0.05 cores", "" when unknown.
func cpuFigures(before, in []sampler.Sample) string {
	if !slices.ContainsFunc(in, func(s sampler.Sample) bool { _, ok := serverCPU(s); return ok }) {
		return ""
	}
	return fmt.Sprintf(" at server CPU %.2f -> %.2f cores", meanOf(before, serverCPU), meanOf(in, serverCPU))
}

// beforeOr names the comparison: "0s-36m" or "nothing before (the window starts with the run)".
func beforeOr(w *windowFacts) string {
	if b := w.beforeSpan(); b != "" {
		return "the mean in " + b
	}
	return "nothing before (the window starts with the run)"
}

// waitFix is the fix for sessions piling up on a wait event.
func waitFix(key string) []string {
	switch {
	case key == "LWLock:LockManager":
		return []string{
			"# relation locks beyond a backend's 16 fast-path slots go through the shared lock table: touch fewer relations per transaction (fewer indexes and partitions, temp tables created once per session)",
			"# and keep active sessions near the CPU count (a pool); on the live server: erplab doctor --only lwlock-waits,profile-lock-manager --profile 10s",
		}
	case strings.HasPrefix(key, "Lock:"):
		return []string{
			"# sessions queue on a heavyweight lock one session holds: find the holder while it happens",
			"SELECT pid, pg_blocking_pids(pid) AS blocked_by, wait_event, now() - xact_start AS open, left(query, 80) FROM pg_stat_activity WHERE cardinality(pg_blocking_pids(pid)) > 0;",
			"# then shorten the holder's transaction, or take the lock in a fixed order and for less time (lock_timeout bounds the wait)",
		}
	case strings.HasPrefix(key, "IO:"):
		return []string{"# sessions wait on storage: see checks temp-files and temp-tablespace on the live server, and erplab disk for the device"}
	}
	return []string{"# sessions wait on " + key + ": on the live server, erplab doctor --only lwlock-waits --sample 10s names the LWLock"}
}

func init() {
	register(Check{ID: "window-storms", Title: "Session storms in the window", order: secWindow + 20, run: checkWindowStorms,
		Rule:    "doctor --results; warning when the run's storm detector (rise, crowd or relative rule, internal/storm) fired or was ongoing in the window",
		Why:     "A storm is active sessions multiplying on one wait event: the detector's rules are calibrated not to fire on a steady load.",
		Sources: []string{srcWindow, "internal/storm/storm.go and relative.go (the storm rules)", srcFieldLockMgr}})
}

// checkWindowStorms lists the storms the run recorded that overlap the
// window.
func checkWindowStorms(_ context.Context, e *env) result {
	w := e.win
	if w.obs == nil {
		return notChecked(w.obsWhy)
	}
	var in []storm.Event
	earlier := 0
	for _, s := range w.obs.Storms {
		switch {
		case s.T <= w.to && (s.EndT == nil || *s.EndT >= w.from):
			in = append(in, s)
		case s.T < w.from:
			earlier++
		}
	}
	r := result{sev: OK, metrics: map[string]float64{"storms_window": float64(len(in)), "storms_before": float64(earlier)}}
	if len(in) == 0 {
		r.summary = fmt.Sprintf("in %s: no storm (%d earlier in the run)", w.span(), earlier)
		return r
	}
	r.sev = Warning
	s := in[0]
	rule := s.Rule
	if rule == "" {
		rule = "rise"
	}
	r.summary = fmt.Sprintf("in %s: %s storm (%s rule) at %s: %s", w.span(), s.WaitEvent, rule, fmtT(s.T), s.Message)
	for _, s := range in {
		end := "ongoing at the run's end"
		if s.EndT != nil {
			end = "ended at " + fmtT(*s.EndT)
		}
		r.evidence = append(r.evidence, Evidence{Text: fmt.Sprintf("storm at %s (%s, baseline from %s): %s", fmtT(s.T), end, fmtT(s.StartT), s.Message), From: w.source("extra.observations.storms")})
	}
	r.evidence = append(r.evidence, Evidence{Text: fmt.Sprintf("%d storm(s) earlier in the run", earlier), From: w.source("extra.observations.storms")})
	r.fix = waitFix(s.WaitEvent)
	return r
}

func init() {
	register(Check{ID: "window-catalog", Title: "Catalog growth in the window", order: secWindow + 30, run: checkWindowCatalog,
		Rule:    fmt.Sprintf("doctor --results; warning when the sampled catalogs grow >= %.0f kB/min in the window and >= %g times their rate before it", winCatalogWarnBps*60/1024, winRise),
		Why:     "Catalogs that grow during a run are temp-table churn outpacing autovacuum: every backend's catalog caches and lookups slow down with them.",
		Sources: []string{srcWindow, srcHeapCreate, srcFieldCatalog}})
}

// checkWindowCatalog compares the catalogs' growth in the window with
// their growth before it.
func checkWindowCatalog(_ context.Context, e *env) result {
	w := e.win
	if w.obs == nil {
		return notChecked(w.obsWhy)
	}
	in, before := w.samples(false), w.samples(true)
	if len(in) < 2 || len(in[0].Catalog) == 0 {
		return notChecked("catalog sizes at two samples in " + w.span() + ", which the observations do not hold")
	}
	a, b := in[0], in[len(in)-1]
	grow, parts := catalogDelta(a.Catalog, b.Catalog)
	rate := grow / max(b.T-a.T, 1)
	rateBefore := 0.0
	if len(before) >= 2 {
		g, _ := catalogDelta(before[0].Catalog, a.Catalog)
		rateBefore = g / max(a.T-before[0].T, 1)
	}
	r := result{sev: OK, metrics: map[string]float64{"catalog_growth_bytes_per_s": round2(rate), "catalog_growth_before_bytes_per_s": round2(rateBefore)}}
	line := fmt.Sprintf("in %s: catalogs %s (%s/min; before %s/min)%s", w.span(), signedBytes(grow), fmtBytes(int64(rate*60)), fmtBytes(int64(rateBefore*60)), parts)
	r.evidence = []Evidence{{Text: line, From: w.source("extra.observations.series[].catalog")}}
	if rate >= winCatalogWarnBps && rate >= winRise*rateBefore {
		r.sev = Warning
		r.summary = line
		r.fix = []string{
			"# temp-table churn bloats pg_class, pg_attribute, pg_depend, pg_type: create temp tables once per session (erp --temp-style), or keep catalog autovacuum ahead",
			"# on the live server: erplab doctor --only catalog-churn,catalog-bloat,xmin-horizon --sample 10s",
		}
		return r
	}
	r.summary = fmt.Sprintf("in %s: catalogs %s/min (before %s/min)", w.span(), fmtBytes(int64(rate*60)), fmtBytes(int64(rateBefore*60)))
	return r
}

// catalogDelta is the catalogs' growth from a to b and the largest
// changes, ": pg_attribute +9.0 MB, pg_class +2.1 MB".
func catalogDelta(a, b []sampler.CatalogRel) (float64, string) {
	was := map[string]int64{}
	for _, c := range a {
		was[c.Name] = c.Bytes
	}
	type d struct {
		name string
		n    int64
	}
	var ds []d
	total := int64(0)
	for _, c := range b {
		if n := c.Bytes - was[c.Name]; n != 0 {
			ds, total = append(ds, d{c.Name, n}), total+n
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].n > ds[j].n })
	var parts []string
	for _, x := range ds[:min(3, len(ds))] {
		parts = append(parts, x.name+" "+signedBytes(float64(x.n)))
	}
	if len(parts) == 0 {
		return 0, ""
	}
	return float64(total), ": " + strings.Join(parts, ", ")
}

// signedBytes is "+9.0 MB" or "-16 kB".
func signedBytes(n float64) string {
	if n < 0 {
		return "-" + fmtBytes(int64(-n))
	}
	return "+" + fmtBytes(int64(n))
}

func init() {
	register(Check{ID: "window-horizon", Title: "xmin horizon in the window", order: secWindow + 40, run: checkWindowHorizon,
		Rule:    fmt.Sprintf("doctor --results; warning when a backend held the xmin horizon >= %d transactions back, or a transaction holding it was open >= %.0f s, in the window", horizonAgeWarn, horizonHoldWarnS),
		Why:     "An old snapshot or transaction keeps every dead row since it began, so vacuum removes nothing and tables and catalogs bloat while it lasts.",
		Sources: []string{srcWindow, srcVacuumHorizon, srcProcArray}})
}

// checkWindowHorizon reads the largest xmin age and oldest transaction
// the samples recorded in the window and before it.
func checkWindowHorizon(_ context.Context, e *env) result {
	w := e.win
	switch {
	case w.obs == nil:
		return notChecked(w.obsWhy)
	case !w.obs.Horizon:
		return notChecked("the xmin horizon per sample, which these results do not record (erplab records it since this version)")
	}
	in, before := w.samples(false), w.samples(true)
	ageIn, ageB, oldIn, oldB := 0, 0, 0, 0
	for _, s := range in {
		ageIn, oldIn = max(ageIn, s.XminAge), max(oldIn, s.OldestXactS)
	}
	for _, s := range before {
		ageB, oldB = max(ageB, s.XminAge), max(oldB, s.OldestXactS)
	}
	line := fmt.Sprintf("in %s: xmin horizon held back up to %d transactions, oldest transaction open %d s (before: %d transactions, %d s)", w.span(), ageIn, oldIn, ageB, oldB)
	r := result{sev: OK, summary: line, evidence: []Evidence{{Text: line, From: w.source("extra.observations.series[].xmin_age, oldest_xact_s")}},
		metrics: map[string]float64{"xmin_age_window": float64(ageIn), "oldest_xact_s_window": float64(oldIn)}}
	if ageIn >= horizonAgeWarn || float64(oldIn) >= horizonHoldWarnS {
		r.sev = Warning
		r.fix = []string{
			"# a long transaction or an idle-in-transaction session holds the horizon: end it, and bound it",
			"ALTER SYSTEM SET idle_in_transaction_session_timeout = '5min'; SELECT pg_reload_conf();",
			"# on the live server: erplab doctor --only xmin-horizon,idle-in-transaction names the holder",
		}
	}
	return r
}

func init() {
	register(Check{ID: "window-invalidation", Title: "Shared invalidation in the window", order: secWindow + 50, run: checkWindowInvalidation,
		Rule:    fmt.Sprintf("doctor --results; warning when catalog cache resets (run --probes) reach %g/s in the window and %g times their rate before it; without the probes the estimate from catalog changes is shown", winResetsWarn, winRise),
		Why:     "A backend that falls behind the shared invalidation queue is reset and rebuilds its caches, and catch-up interrupts reach every idle session: the chain behind the field's lock-manager pile-ups.",
		Sources: []string{srcWindow, srcSinval, srcInval, srcFieldLockMgr}})
}

// checkWindowInvalidation compares the observed resets and catch-ups per
// second (extra.invalidation.observed.series, one point per second from
// the start) in the window with the run before it, and the sampler's
// estimate from catalog changes.
func checkWindowInvalidation(_ context.Context, e *env) result {
	w := e.win
	r := result{sev: OK, metrics: map[string]float64{}}
	var parts []string
	if w.obs != nil {
		est := func(s sampler.Sample) (float64, bool) {
			if s.Churn == nil {
				return 0, false
			}
			return s.Churn.SInvalPerS, true
		}
		line := fmt.Sprintf("estimated from catalog changes: %.0f -> %.0f messages/s", meanOf(w.samples(true), est), meanOf(w.samples(false), est))
		parts = append(parts, line)
		r.evidence = append(r.evidence, Evidence{Text: "in " + w.span() + ": " + line, From: w.source("extra.observations.series[].churn")})
	}
	if w.inval == nil {
		if w.obs == nil {
			return notChecked(w.invalWhy)
		}
		r.summary = fmt.Sprintf("in %s: %s (resets not counted: needs %s)", w.span(), parts[0], w.invalWhy)
		return r
	}
	resIn, catIn, nIn, resB, catB, nB := 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
	for i, c := range w.inval.Series {
		t := float64(i + 1)
		switch {
		case t > w.from && t <= w.to:
			resIn, catIn, nIn = resIn+float64(c.Resets), catIn+float64(c.Catchups), nIn+1
		case t <= w.from:
			resB, catB, nB = resB+float64(c.Resets), catB+float64(c.Catchups), nB+1
		}
	}
	rate := func(v, n float64) float64 { return v / max(n, 1) }
	line := fmt.Sprintf("catalog cache resets %.1f -> %.1f/s, catch-ups %.1f -> %.1f/s", rate(resB, nB), rate(resIn, nIn), rate(catB, nB), rate(catIn, nIn))
	r.evidence = append(r.evidence, Evidence{Text: "in " + w.span() + ": " + line, From: w.source("extra.invalidation.observed.series")})
	r.metrics["resets_per_s_window"], r.metrics["resets_per_s_before"] = round2(rate(resIn, nIn)), round2(rate(resB, nB))
	r.summary = "in " + w.span() + ": " + line
	if rate(resIn, nIn) >= winResetsWarn && rate(resIn, nIn) >= winRise*rate(resB, nB) {
		r.sev = Warning
		r.fix = []string{"# resets follow catalog changes (temp-table churn, DDL) outpacing idle backends: cut the churn (create temp tables once per session) and idle connections (a pool)",
			"# on the live server: erplab doctor --only invalidation-chain,catalog-churn --sample 10s"}
	}
	return r
}

func init() {
	register(Check{ID: "window-locks", Title: "Relation locks per key operation in the window", order: secWindow + 60, run: checkWindowLocks,
		Rule:    "doctor --results; not checked: the results keep relation locks per key operation over the whole run, not per sample (the run's figures are quoted)",
		Why:     "An operation holding more relations than the 16 fast-path slots takes the shared lock table, where sessions pile up on LWLock:LockManager.",
		Sources: []string{srcWindow, srcLockManager, srcFastPath}})
}

// checkWindowLocks says the locks are not recorded per time and quotes
// the run's figures.
func checkWindowLocks(_ context.Context, e *env) result {
	w := e.win
	if w.obs == nil || w.obs.Locks == nil || len(w.obs.Locks.Operations) == 0 {
		return notChecked("relation locks per key operation per sample, which results do not record (nor, here, over the run: run --observe with the op map)")
	}
	var parts []string
	for _, o := range w.obs.Locks.Operations {
		parts = append(parts, fmt.Sprintf("%s held p95 %d, max %d (outside the fast path max %d)", o.Operation, o.HeldP95, o.HeldMax, o.OutsideMax))
	}
	return notChecked("relation locks per key operation per sample, which results do not record; over the whole run: " + strings.Join(parts, "; "))
}

func init() {
	register(Check{ID: "window-temp-full", Title: "Disk full errors in the window", order: secWindow + 70, run: checkWindowDiskFull,
		Rule:    "doctor --results; critical when key operations failed with SQLSTATE 53100 (disk_full) in the window; the error example tells a temp tablespace (temp relation or temp file) from another",
		Why:     "A full temp tablespace fails every statement that spills or creates a temp table until space comes back.",
		Sources: []string{srcWindow, "https://www.postgresql.org/docs/current/errcodes-appendix.html (53100 disk_full)", srcTempTblspc}})
}

// checkWindowDiskFull counts the disk_full errors of the window's
// intervals and reads the file the run's example names.
func checkWindowDiskFull(_ context.Context, e *env) result {
	w := e.win
	var in, before int64
	ops := map[string]int64{}
	for _, iv := range w.doc.Series {
		for name, oi := range iv.Ops {
			n := oi.ErrorsBySQLState[results.CodeDiskFull]
			switch {
			case iv.T > w.from && iv.T <= w.to:
				in += n
				ops[name] += n
			case iv.T <= w.from:
				before += n
			}
		}
	}
	r := result{sev: OK, metrics: map[string]float64{"disk_full_window": float64(in), "disk_full_before": float64(before)}}
	if in == 0 {
		r.summary = fmt.Sprintf("in %s: no disk_full error (%d before)", w.span(), before)
		return r
	}
	r.sev = Critical
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(ops)) {
		if ops[name] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", name, ops[name]))
		}
	}
	where := "a file"
	for _, op := range w.doc.Operations {
		if f, ok := results.ParseDiskFull(op.ErrorExamples[results.CodeDiskFull]); ok {
			where = "a permanent file " + f.Path
			if f.Temp {
				where = "a temp file " + f.Path + " (temp tablespace full)"
			}
			r.evidence = append(r.evidence, Evidence{Text: op.Name + ": " + op.ErrorExamples[results.CodeDiskFull], From: w.source("operations[].error_examples")})
			break
		}
	}
	r.summary = fmt.Sprintf("in %s: %d disk_full errors (before: %d) writing %s", w.span(), in, before, where)
	r.evidence = append([]Evidence{{Text: fmt.Sprintf("in %s: 53100 disk_full: %s", w.span(), strings.Join(parts, ", ")), From: w.source("series[].ops[].errors_by_sqlstate")}}, r.evidence...)
	r.fix = []string{"# give the temp tablespace room (a larger tmpfs, or temp_tablespaces on a disk with space), and cut what fills it",
		"# on the live server: erplab doctor --only temp-tablespace,temp-files; erplab doctor fix tmpfs-temp-tablespace --size ..."}
	return r
}

func init() {
	register(Check{ID: "window-apdex", Title: "APDEX and p95 per key operation in the window", order: secWindow + 80, run: checkWindowApdex,
		Rule:    fmt.Sprintf("doctor --results; warning when a key operation's APDEX in the window is %g or more below its APDEX before it; the symptom the other window checks explain", winApdexDrop),
		Why:     "The window's APDEX and p95 against the run before it say how much the users felt the turn.",
		Sources: []string{srcWindow, "https://www.apdex.org/ (APDEX: satisfied, tolerating within 4T, frustrated)"}})
}

// checkWindowApdex compares each key operation's APDEX and p95 in the
// window's intervals with the intervals before it.
func checkWindowApdex(_ context.Context, e *env) result {
	w := e.win
	in, err := results.SpanFigures(w.doc, w.from, w.to)
	if err != nil {
		return notRun(Failed, "the window's intervals: "+err.Error())
	}
	before, err := results.SpanFigures(w.doc, -1, w.from)
	if err != nil {
		return notRun(Failed, "the intervals before the window: "+err.Error())
	}
	r := result{sev: OK, metrics: map[string]float64{}}
	worst, worstOp := 0.0, ""
	for i, op := range in.Operations {
		b := before.Operations[i]
		if op.Apdex.NS() {
			continue
		}
		tgt := w.doc.Operations[i].TargetMs
		line := fmt.Sprintf("%s APDEX %s -> %s, p95 %s -> %s (T %s), %d executions in %s",
			op.Name, apdexText(b.Apdex.Value, b.Apdex.NS()), apdexText(op.Apdex.Value, false), results.FormatMs(b.Response.P95), results.FormatMs(op.Response.P95), results.FormatMs(tgt), op.Count, w.span())
		r.evidence = append(r.evidence, Evidence{Text: line, From: w.source("series[].ops[].zones, histogram_us")})
		if !b.Apdex.NS() && b.Apdex.Value-op.Apdex.Value > worst {
			worst, worstOp = b.Apdex.Value-op.Apdex.Value, line
		}
	}
	r.metrics["apdex_drop"] = round2(worst)
	rate := func(f results.StageResult) float64 { return float64(f.Count) / max(f.EndS-f.StartS, 1) }
	tps := fmt.Sprintf("in %s: %.1f -> %.1f executions/s, integral APDEX %s -> %s", w.span(), rate(before), rate(in), before.Integral, in.Integral)
	r.evidence = append(r.evidence, Evidence{Text: tps, From: w.source("series[].n")})
	r.metrics["per_s_before"], r.metrics["per_s_window"] = round2(rate(before)), round2(rate(in))
	switch {
	case worst >= winApdexDrop:
		r.sev, r.summary = Warning, "in "+w.span()+": "+worstOp
	case before.Count > 0 && rate(in) < rate(before)/winRise:
		r.sev, r.summary = Warning, tps+": the load stalled"
	default:
		r.summary = fmt.Sprintf("in %s: integral APDEX %s -> %s", w.span(), before.Integral, in.Integral)
	}
	return r
}

// apdexText is a score as the summaries print it, "-" when none.
func apdexText(v float64, ns bool) string {
	if ns {
		return "-"
	}
	return apdex.FormatValue(v)
}
