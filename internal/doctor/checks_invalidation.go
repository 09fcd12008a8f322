package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/erplab/erplab/internal/profile"
	"github.com/erplab/erplab/internal/sampler"
)

// InvalFacts are the shared-invalidation uprobes of the
// invalidation-chain check: a recording started before the sample
// (erplab doctor starts it; the check ends it, which removes the
// probes), or its summary, or why none could run.
type InvalFacts struct {
	// Recording counts during the sample; the check ends it.
	Recording *profile.InvalRecording
	// Summary are counts taken elsewhere (tests, a run's results).
	Summary *profile.Invalidation
	// Unavailable is why the probes could not run (one line); "" when
	// they were not asked for.
	Unavailable string
}

const srcInval = "src/backend/utils/cache/inval.c (InvalidateSystemCaches: a reset backend rebuilds its catalog and relation caches) and src/backend/storage/ipc/sinval.c (ProcessCatchupInterrupt)"

func init() {
	register(Check{ID: "invalidation-chain", Title: "The invalidation chain observed: temp-table DDL -> SI queue -> resets and catch-ups -> LockManager", Needs: NeedsSample, order: secWaits + 20, run: checkInvalidationChain,
		Rule:    fmt.Sprintf("needs the probes (root, a local server, perf; --probes, on by default): warning when a backend's catalog caches were reset during the sample (the queue of %d messages overran it), info when backends only had to catch up; the LockManager share and the catalog churn of the same sample close the chain", sampler.SInvalQueueSize),
		Why:     "Every CREATE or DROP of a temp table queues invalidation messages every backend must read; a backend that falls behind by the whole queue (an idle session does) is reset and rebuilds its caches from the catalogs, taking relation locks while active sessions pile up on LWLock:LockManager.",
		Sources: []string{srcSinval, srcInval, srcFieldLockMgr, srcFieldCatalog}})
}

// invalSummary returns the counts the check judges, or the NotChecked
// result saying what is missing.
func (e *env) invalSummary(ctx context.Context) (*profile.Invalidation, *result) {
	f := &e.opts.Invalidation
	if f.Summary == nil && f.Recording != nil {
		s, err := f.Recording.End(ctx)
		if err != nil && s == nil {
			f.Unavailable = err.Error()
		}
		f.Summary, f.Recording = s, nil
	}
	est := ""
	if c, ok := sampleSinvalEstimate(e); ok {
		est = fmt.Sprintf("; estimate from catalog changes: ~%.0f msg/s", c)
	}
	switch {
	case f.Summary == nil && f.Unavailable != "":
		r := notChecked("the shared-invalidation uprobes, which could not run: " + strings.TrimPrefix(f.Unavailable, "profile: ") + est)
		return nil, &r
	case f.Summary == nil:
		r := notChecked("the shared-invalidation uprobes (erplab doctor --probes: root, a local server, perf)" + est)
		return nil, &r
	}
	return f.Summary, nil
}

// sampleSinvalEstimate is the estimate of invalidation messages per
// second from the sample's catalog changes (as the run's observations
// make it: sampler.Churn), false without catalog counters.
func sampleSinvalEstimate(e *env) (float64, bool) {
	if e.smp == nil {
		return 0, false
	}
	tot := sumWindows(e.smp.windows)
	d, ok := tot.Catalog["pg_class"]
	if !ok || tot.Seconds <= 0 {
		return 0, false
	}
	// pg_class rows changed, each with its catcache and relcache
	// messages: at least one message each.
	return float64(d.Ins+d.Upd+d.Del) / tot.Seconds, true
}

func checkInvalidationChain(ctx context.Context, e *env) result {
	s, nc := e.invalSummary(ctx)
	if nc != nil {
		return *nc
	}
	tot := sumWindows(e.smp.windows)
	ddl := rates(tot.Catalog["pg_class"], tot.Seconds)
	waits := countWaits(tot)
	queues := s.PerS.Inserted / sampler.SInvalQueueSize
	unit := "msg"
	if !s.MessagesCounted {
		unit = "calls"
	}
	from := fmt.Sprintf("perf uprobes on %s over %.1f s", s.Binary, s.DurationS)
	ev := []Evidence{
		{Text: fmt.Sprintf("temp-table DDL: %.1f pg_class inserts/s (CREATE), %.1f new relation files/s", ddl.ins, ddl.files), From: "pg_stat_sys_tables (pg_class)"},
		{Text: fmt.Sprintf("SI queue: %d %s inserted (%.0f/s = %.2f queues of %d/s, max %d in one second); %d queue clean-ups (%.2f/s)", s.Total.Inserted, unit, s.PerS.Inserted, queues, sampler.SInvalQueueSize, s.MaxPerS.Inserted, s.Total.Cleanups, s.PerS.Cleanups), From: from + " (SIInsertDataEntries, SICleanupQueue)"},
		{Text: fmt.Sprintf("resets and catch-ups: %d catalog cache resets (%.2f/s) on %d backends (%d cache rebuilds with parallel workers' starts), %d catch-up interrupts processed (%.2f/s) on %d backends", s.Total.Resets, s.PerS.Resets, s.BackendsReset, s.Total.Rebuilds, s.Total.Catchups, s.PerS.Catchups, s.BackendsCaughtUp), From: from + " (InvalidateSystemCaches less ParallelWorkerMain's, ProcessCatchupInterrupt)"},
		{Text: fmt.Sprintf("LockManager: %.1f %% of active session-samples wait on LWLock:LockManager/LockFastPath, SInval %.1f %%, %.1f active on average", 100*waits.lmShare(), 100*waits.siShare(), waits.avg()), From: waitSource(e.smp.windows, e.smp.profilePeriodMs)},
	}
	if len(s.TopBackends) > 0 {
		var parts []string
		for _, b := range s.TopBackends[:min(5, len(s.TopBackends))] {
			parts = append(parts, fmt.Sprintf("pid %d: %d resets, %d catch-ups", b.PID, b.Resets, b.Catchups))
		}
		ev = append(ev, Evidence{Text: "backends reset or caught up most: " + strings.Join(parts, "; "), From: from})
	}
	m := map[string]float64{"resets": float64(s.Total.Resets), "resets_per_s": s.PerS.Resets, "backends_reset": float64(s.BackendsReset),
		"catchups": float64(s.Total.Catchups), "catchups_per_s": s.PerS.Catchups, "cleanups_per_s": s.PerS.Cleanups,
		"inserted_per_s": s.PerS.Inserted, "queues_per_s": round2(queues),
		"pg_class_ins_per_s": ddl.ins, "lockmanager_share_pct": round2(100 * waits.lmShare())}
	chain := fmt.Sprintf("%.0f temp-table creates/s -> %.0f invalidation %s/s (%.1f queues/s, %.1f clean-ups/s) -> %d catalog cache resets on %d backends, %d catch-ups -> LockManager %.0f %% of active",
		ddl.ins, s.PerS.Inserted, unit, queues, s.PerS.Cleanups, s.Total.Resets, s.BackendsReset, s.Total.Catchups, 100*waits.lmShare())
	fix := []string{
		"# fewer catalog changes: create each temp table once per session and TRUNCATE it between uses (lsFusion-style; erplab run --temp-style lsfusion, ab temp-style)",
		"# fewer idle sessions: idle backends fall behind in the queue and are reset; a pooler (PgBouncer transaction mode) keeps few server sessions",
		"# the lock side: check lwlock-waits (relation locks per backend, the 16 fast-path slots)",
	}
	switch {
	case s.Total.Resets > 0:
		return result{sev: Warning, summary: "the chain observed: " + chain, evidence: ev, metrics: m, fix: fix}
	case s.Total.Catchups > 0:
		return result{sev: Info, summary: "backends caught up, none reset: " + chain, evidence: ev, metrics: m, fix: fix[:2]}
	}
	return result{sev: OK, summary: "no catalog cache reset and no catch-up: " + chain, evidence: ev, metrics: m}
}
