package doctor

import (
	"context"
	"fmt"

	"github.com/erplab/erplab/internal/profile"
)

func init() {
	register(Check{ID: "profile-sinval", Title: "Shared invalidation share of server CPU (profile)", order: secProfile + 20, run: checkProfileSinval,
		Rule:    fmt.Sprintf("needs --profile; warning when shared invalidation (SIInsertDataEntries, SIGetDataEntries, ReceiveSharedInvalidMessages, CatCacheInvalidate, InvalidateSystemCaches) is >= %g %% of the server's CPU samples, info >= %g %%", profile.AdviceSinvalPct, profile.AdviceSinvalPct/2),
		Why:     "Every catalog change (CREATE or DROP of a temp table and its indexes) queues invalidation messages that every backend must read and apply, flushing its catalog caches.",
		Sources: []string{srcProfile, srcSinval, srcFieldLockMgr, srcFieldCatalog}})
}

// checkProfileSinval judges shared invalidation's share of the profile.
func checkProfileSinval(_ context.Context, e *env) result {
	s, r, ok := e.profSubsystem(profile.SubSinval, profile.AdviceSinvalPct, "sinval_share_pct")
	if !ok {
		return r
	}
	v := s.Share(profile.SubSinval)
	switch r.sev {
	case OK:
		r.summary = fmt.Sprintf("shared invalidation %.1f %% of server CPU (under %g %%)", v, profile.AdviceSinvalPct/2)
		return r
	case Info:
		r.summary = fmt.Sprintf("shared invalidation %.1f %% of server CPU: catalog changes are felt, under the %g %% warning", v, profile.AdviceSinvalPct)
	default:
		r.summary = fmt.Sprintf("shared invalidation %.1f %% of server CPU (>= %g %%): catalog DDL floods the invalidation queue", v, profile.AdviceSinvalPct)
	}
	r.fix = []string{
		"# fewer catalog changes per transaction: create each temp table once per session and TRUNCATE or DELETE it between uses instead of CREATE/DROP (lsFusion-style caching of temp tables)",
		"# ON COMMIT DELETE ROWS instead of ON COMMIT DROP; no CREATE INDEX on a temp table per transaction",
		"# the rate and the catalogs' growth: checks catalog-churn, catalog-size and lwlock-waits (SInval waits)",
	}
	return r
}

func init() {
	register(Check{ID: "profile-catalog", Title: "Catalog access share of server CPU (profile)", order: secProfile + 30, run: checkProfileCatalog,
		Rule:    fmt.Sprintf("needs --profile; warning when catalog access (syscache and relcache builds, catalog index scans, heap_create_with_catalog) is >= %g %% of the server's CPU samples, info >= %g %%", profCatalogWarnPct, profCatalogWarnPct/2),
		Why:     "A backend whose caches are flushed or empty (temp-table DDL, new sessions) reads the catalogs again for every relation it touches, and a bloated catalog makes each read slower.",
		Sources: []string{srcProfile, srcHeapCreate, srcFieldCatalog}})
}

// checkProfileCatalog judges catalog access's share of the profile.
func checkProfileCatalog(_ context.Context, e *env) result {
	s, r, ok := e.profSubsystem(profile.SubCatalog, profCatalogWarnPct, "catalog_share_pct")
	if !ok {
		return r
	}
	v := s.Share(profile.SubCatalog)
	if hc := profStacksWith(s, "heap_create_with_catalog", "index_create"); hc > 0 {
		r.evidence = append(r.evidence, Evidence{Text: fmt.Sprintf("CREATE of tables and indexes (heap_create_with_catalog, index_create) on %.1f %% of the samples' stacks", hc), From: profFrom})
		r.metrics["relation_create_stacks_pct"] = hc
	}
	switch r.sev {
	case OK:
		r.summary = fmt.Sprintf("catalog access %.1f %% of server CPU (under %g %%)", v, profCatalogWarnPct/2)
		return r
	case Info:
		r.summary = fmt.Sprintf("catalog access %.1f %% of server CPU: under the %g %% warning", v, profCatalogWarnPct)
	default:
		r.summary = fmt.Sprintf("catalog access %.1f %% of server CPU (>= %g %%): backends keep rebuilding catalog caches", v, profCatalogWarnPct)
	}
	r.fix = []string{
		"# catalog caches are rebuilt after invalidations (temp-table DDL: check profile-sinval, catalog-churn) and in every new session (check connection-age: use a pool)",
		"# a bloated catalog makes each rebuild slower: checks catalog-size, catalog-bloat and xmin-horizon",
	}
	return r
}
