package doctor

import (
	"context"
	"fmt"

	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/profile"
)

// profPageFaultInfoPct: page faults at which the profile check mentions
// them.
const profPageFaultInfoPct = 10.0

func init() {
	register(Check{ID: "profile-thp", Title: "Kernel page handling share of server CPU (profile)", order: secProfile + 50, run: checkProfileTHP,
		Rule:    fmt.Sprintf("needs --profile; warning when kernel compaction (compact_*, isolate_migratepages*, migrate_pages*) or huge-page clearing (clear_huge_page, folio_zero_user) is >= %g %% of the server's CPU samples; info when page faults are >= 10 %%", profile.AdviceCompactionPct),
		Why:     "With transparent huge pages 'always' the kernel compacts memory and zeroes 2 MB pages inside the backends' page faults, which the field saw as system time above user time.",
		Sources: []string{srcProfile, srcTHPKernel, srcFieldTHP}})
}

// checkProfileTHP judges the kernel's page handling in the profile:
// compaction and huge-page clearing point at transparent huge pages.
func checkProfileTHP(_ context.Context, e *env) result {
	s, nc := e.profileSummary()
	if nc != nil {
		return *nc
	}
	comp, clr, pf := s.Marks["compaction"], s.Marks["huge_page_clearing"], s.Marks["page_faults"]
	mem := s.Share(profile.SubMemory)
	r := result{metrics: map[string]float64{"compaction_pct": comp, "huge_page_clearing_pct": clr, "page_faults_pct": pf, "memory_share_pct": mem},
		evidence: append(profShare(s, profile.SubMemory), Evidence{
			Text: fmt.Sprintf("on the samples' stacks: compaction %.1f %%, huge-page clearing %.1f %%, page faults %.1f %%", comp, clr, pf), From: profFrom})}
	mode := ""
	if e.host != nil && e.host.thp.Enabled.Known() {
		mode = e.host.thp.Enabled.Mode
		r.evidence = append(r.evidence, Evidence{Text: "transparent_hugepage/enabled = " + mode, From: e.host.thp.Enabled.Path})
	}
	switch worst := max(comp, clr); {
	case worst >= profile.AdviceCompactionPct:
		r.sev = Warning
		r.summary = fmt.Sprintf("kernel compaction / huge-page clearing %.1f %% of server CPU (>= %g %%): transparent huge pages", worst, profile.AdviceCompactionPct)
		if mode != "" {
			r.summary += " (enabled = " + mode + ")"
		}
		dir := hostfacts.THPLiveDir(false)
		if e.host != nil {
			dir = e.host.thpLiveDir()
		}
		r.fix = []string{
			"echo madvise > " + dir + "/enabled   # or never; takes effect at once (check thp-enabled)",
			"echo defer+madvise > " + dir + "/defrag   # no direct compaction in page faults (check thp-defrag)",
			"# persist: transparent_hugepage=madvise on the kernel command line; for shared_buffers use explicit huge pages (check huge-pages)",
		}
	case pf >= profPageFaultInfoPct:
		r.sev = Info
		r.summary = fmt.Sprintf("page faults %.1f %% of server CPU, without compaction or huge-page clearing: new backends touching their memory (check connection-age)", pf)
	default:
		r.sev = OK
		r.summary = fmt.Sprintf("no compaction or huge-page clearing (%.1f %%, %.1f %%), page faults %.1f %% of server CPU", comp, clr, pf)
	}
	return r
}
