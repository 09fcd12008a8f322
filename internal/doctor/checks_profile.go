package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/erplab/erplab/internal/profile"
)

// ProfileFacts is a CPU profile of the server for the profile-* checks:
// the summary of `perf record` over the server's process tree (package
// profile; erplab doctor --profile DURATION takes it before the checks
// run), or why none could be taken.
type ProfileFacts struct {
	// Summary is the profile; nil when none was taken.
	Summary *profile.Summary
	// Unavailable is why profiling could not run (one line: perf
	// missing or not permitted, remote server); "" when it was not asked
	// for.
	Unavailable string
}

// Profile checks' limits.
const (
	// profMinSamples: fewer server samples than this (an idle server)
	// judge nothing.
	profMinSamples = 100
	// profCatalogWarnPct: catalog access (syscache/relcache misses and
	// catalog scans) at which the catalogs are a main cost; a select-only
	// load measured 2.3 %, a temp-table churn 23-30 % (docs/profile.md, docs/measurements/).
	profCatalogWarnPct = 15.0
	// srcProfile is where the subsystem signatures are defined.
	srcProfile = "internal/profile/doc.go and signatures.go (erplab profile: perf record -a -g -e cpu-clock, subsystem signature table with PostgreSQL source files and kernel functions)"
	// profFrom is the evidence's origin.
	profFrom = "perf record (erplab doctor --profile)"
)

// profileSelection drops the profile checks from checks unless a profile
// was asked for (opts.Profile set: taken, or why not) or --only names
// them: without --profile they would only say "not checked".
func profileSelection(checks []Check, opts Options) []Check {
	if opts.Profile.Summary != nil || opts.Profile.Unavailable != "" {
		return checks
	}
	return slices.DeleteFunc(checks, func(c Check) bool {
		return c.isProfile() && !slices.Contains(opts.Only, c.ID)
	})
}

// profileSummary returns the profile the checks judge, or the NotChecked
// result saying what is missing.
func (e *env) profileSummary() (*profile.Summary, *result) {
	p := e.opts.Profile
	switch {
	case p.Summary == nil && p.Unavailable != "":
		r := notChecked("a CPU profile, which could not be taken: " + p.Unavailable)
		return nil, &r
	case p.Summary == nil:
		r := notChecked("a CPU profile of a local server (erplab doctor --profile 10s; perf, root or kernel.perf_event_paranoid <= 0)")
		return nil, &r
	case p.Summary.Samples < profMinSamples:
		r := notChecked(fmt.Sprintf("a profile with >= %d server samples (got %d: the server was nearly idle; profile under load)", profMinSamples, p.Summary.Samples))
		return nil, &r
	}
	return p.Summary, nil
}

// profSubsystem starts a profile check of one subsystem: the summary, and
// a result graded on its share against warn (profGrade) with the share's
// evidence and the metric; ok false when there is no usable profile (r is
// then the NotChecked result).
func (e *env) profSubsystem(sub string, warn float64, metric string) (s *profile.Summary, r result, ok bool) {
	s, nc := e.profileSummary()
	if nc != nil {
		return nil, *nc, false
	}
	v := s.Share(sub)
	return s, result{sev: profGrade(v, warn), evidence: profShare(s, sub), metrics: map[string]float64{metric: v}}, true
}

// profShare is the evidence of one subsystem's share: the share with the
// sample counts, then its top functions by self share.
func profShare(s *profile.Summary, sub string) []Evidence {
	n := 0
	for _, x := range s.Subsystems {
		if x.Name == sub {
			n = x.Samples
		}
	}
	ev := []Evidence{{Text: fmt.Sprintf("%s %.1f %% of the server's CPU samples (%d of %d, %d processes, %.1f s at %d Hz; the server had %.1f %% of the host's samples)",
		sub, s.Share(sub), n, s.Samples, s.Processes, s.DurationS, s.FrequencyHz, s.HostSharePct), From: profFrom}}
	if top := profTop(s, sub, 5); top != "" {
		ev = append(ev, Evidence{Text: "top functions of " + sub + " by self share: " + top, From: profFrom})
	}
	return ev
}

// profTop lists up to n functions of subsystem sub by self share: "name
// 3.1 % (total 9.0 %), ...".
func profTop(s *profile.Summary, sub string, n int) string {
	fs := slices.Clone(s.Functions)
	slices.SortStableFunc(fs, func(a, b profile.FunctionShare) int { return b.Self - a.Self })
	var parts []string
	for _, f := range fs {
		if f.Subsystem == sub && f.Self > 0 && len(parts) < n {
			parts = append(parts, fmt.Sprintf("%s %.1f %% (total %.1f %%)", f.Name, f.SelfPct, f.TotalPct))
		}
	}
	return strings.Join(parts, ", ")
}

// profStacksWith is the share of the server's samples (%) whose stack has
// a frame named one of names (kernel frames carry the "_[k]" suffix).
func profStacksWith(s *profile.Summary, names ...string) float64 {
	return profStacks(s, func(frame string) bool { return slices.Contains(names, frame) })
}

// profStacks is the share of the server's samples (%) whose stack has a
// frame for which match is true, from the summary's folded stacks (the
// TopStacks most frequent: a lower bound when stacks were left out).
func profStacks(s *profile.Summary, match func(frame string) bool) float64 {
	if s.Samples == 0 {
		return 0
	}
	n := 0
	for _, f := range s.Folded {
		for _, fr := range strings.Split(f.Stack, ";") {
			if match(fr) {
				n += f.Samples
				break
			}
		}
	}
	return round2(100 * float64(n) / float64(s.Samples))
}

// profGrade is the severity of a share against a warning threshold (info
// from half of it).
func profGrade(v, warn float64) Severity {
	switch {
	case v >= warn:
		return Warning
	case v >= warn/2:
		return Info
	}
	return OK
}
