package compare

import "github.com/erplab/erplab/internal/profile"

// profileSpecs are the rows of the server CPU profile (extra.profile of
// erplab run --profile): one per subsystem, its share of the server's
// samples, when every run of both sides has a profile. A profile is one
// figure per run: with one run per side the row shows A and B untested;
// with rounds it is tested over the rounds like any other row. Shares are
// neutral (a share can only grow when another shrinks): their verdicts
// are higher or lower.
func profileSpecs(ra, rb []*runData) []spec {
	for _, side := range [][]*runData{ra, rb} {
		for _, rd := range side {
			if rd.prof == nil {
				return nil
			}
		}
	}
	specs := make([]spec, 0, len(profile.Subsystems))
	for _, name := range profile.Subsystems {
		specs = append(specs, spec{
			row:      Row{Section: "profile", Subject: "cpu " + name, Metric: "share_pct", Unit: "%", Direction: Neutral},
			floor:    floorSharePct,
			bootNote: "one profile per run: not resampled",
			stat: func(rd *runData, _ *sel) float64 {
				return rd.prof.Share(name)
			},
		})
	}
	return specs
}
