package doctor

import (
	"context"
	"fmt"

	"github.com/erplab/erplab/internal/profile"
)

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
