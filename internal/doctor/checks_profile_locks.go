package doctor

import (
	"context"
	"fmt"

	"github.com/erplab/erplab/internal/profile"
)

func init() {
	register(Check{ID: "profile-lock-manager", Title: "Lock manager share of server CPU (profile)", order: secProfile + 10, run: checkProfileLockManager,
		Rule:    fmt.Sprintf("needs --profile; warning when the lock manager (LWLockAcquire/LWLockAttemptLock, LockAcquireExtended, LockRelationOid, fast-path) is >= %g %% of the server's CPU samples, info >= %g %%", profile.AdviceLockPct, profile.AdviceLockPct/2),
		Why:     "Relation locks beyond the 16 fast-path slots of a backend go through the shared lock table and its partition LWLocks, which is where the field's sessions queued by the thousand.",
		Sources: []string{srcProfile, srcLockManager, srcFieldLockMgr}})
}

// checkProfileLockManager judges the lock manager's share of the
// profile.
func checkProfileLockManager(_ context.Context, e *env) result {
	s, r, ok := e.profSubsystem(profile.SubLock, profile.AdviceLockPct, "lock_manager_share_pct")
	if !ok {
		return r
	}
	v := s.Share(profile.SubLock)
	if lro := profStacksWith(s, "LockRelationOid"); lro > 0 {
		r.evidence = append(r.evidence, Evidence{Text: fmt.Sprintf("LockRelationOid (relation locks taken by name or OID) on %.1f %% of the samples' stacks", lro), From: profFrom})
		r.metrics["lock_relation_oid_stacks_pct"] = lro
	}
	switch r.sev {
	case OK:
		r.summary = fmt.Sprintf("lock manager %.1f %% of server CPU (under %g %%)", v, profile.AdviceLockPct/2)
		return r
	case Info:
		r.summary = fmt.Sprintf("lock manager %.1f %% of server CPU: noticeable, under the %g %% warning", v, profile.AdviceLockPct)
	default:
		r.summary = fmt.Sprintf("lock manager %.1f %% of server CPU (>= %g %%): relation locks go through the shared lock table", v, profile.AdviceLockPct)
	}
	r.fix = []string{
		"# each backend has 16 fast-path slots for relation locks; a transaction touching more tables and indexes (or temp tables) takes the shared lock table's partition LWLocks",
		"# touch fewer relations per transaction: fewer indexes on hot tables, fewer partitions scanned (partition pruning), temp tables created once per session",
		"# and keep active sessions near the CPU count (a pool): see checks lwlock-waits and max-connections",
	}
	return r
}
