package compare

import (
	"fmt"
	"math"

	"github.com/erplab/erplab/internal/results"
)

// NoiseSide is one side's load besides the server under test: means over
// its observation samples after the warm-up (the mean of the per-round
// means with rounds), % of all CPUs except ProcsRunning.
type NoiseSide struct {
	// ForeignPct is the CPU used by processes other than the server's
	// tree and erplab (sampler.Noise.Foreign); ServerPct the server's
	// own; HostBusyPct the host's busy share; StealPct the time given to
	// other guests; ProcsRunning the run queue.
	ForeignPct   float64 `json:"foreign_pct"`
	ServerPct    float64 `json:"server_pct"`
	HostBusyPct  float64 `json:"host_busy_pct"`
	StealPct     float64 `json:"steal_pct"`
	ProcsRunning float64 `json:"procs_running"`
}

// NoiseReport is the noise guard of a comparison.
type NoiseReport struct {
	// Recorded is true when both sides have process-tree figures.
	Recorded bool      `json:"recorded"`
	A        NoiseSide `json:"a"`
	B        NoiseSide `json:"b"`
	// Threshold is Options.MaxForeignDiff; Differed is true when
	// |B.ForeignPct - A.ForeignPct| exceeds it (decided rows then read
	// ForeignLoad).
	Threshold float64 `json:"threshold_pct"`
	Differed  bool    `json:"differed"`
}

func noiseReport(ra, rb []*runData, threshold float64) NoiseReport {
	nr := NoiseReport{Threshold: threshold, Recorded: true}
	side := func(rds []*runData) NoiseSide {
		var out NoiseSide
		n := 0
		for _, rd := range rds {
			var s NoiseSide
			k := 0
			for _, p := range rd.obs {
				if p.Noise == nil {
					continue
				}
				s.ForeignPct += p.Noise.Foreign
				s.ServerPct += p.Noise.ServerUser + p.Noise.ServerSystem
				s.HostBusyPct += p.Noise.HostBusy
				s.StealPct += p.Noise.Steal
				s.ProcsRunning += float64(p.Noise.ProcsRunning)
				k++
			}
			if k == 0 {
				nr.Recorded = false
				continue
			}
			f := 1 / float64(k)
			out.ForeignPct += s.ForeignPct * f
			out.ServerPct += s.ServerPct * f
			out.HostBusyPct += s.HostBusyPct * f
			out.StealPct += s.StealPct * f
			out.ProcsRunning += s.ProcsRunning * f
			n++
		}
		if n > 0 {
			f := 1 / float64(n)
			out = NoiseSide{out.ForeignPct * f, out.ServerPct * f, out.HostBusyPct * f, out.StealPct * f, out.ProcsRunning * f}
		}
		return out
	}
	nr.A, nr.B = side(ra), side(rb)
	nr.Differed = nr.Recorded && threshold >= 0 && math.Abs(nr.B.ForeignPct-nr.A.ForeignPct) > threshold
	return nr
}

// Line is the one-line account, e.g. "noise: foreign CPU A 3.1 % B 41.0 %
// of all CPUs (steal 0.0/0.0 %, run queue 2.1/4.0, server 35.2/30.1 %):
// differed by more than 10 points: verdicts inconclusive".
func (n NoiseReport) Line() string {
	if !n.Recorded {
		return "noise: no process-tree CPU figures in both sides (observations off, a remote server, or older results): foreign load not checked"
	}
	s := fmt.Sprintf("noise: foreign CPU A %.1f %% B %.1f %% of all CPUs (steal %.1f/%.1f %%, run queue %.1f/%.1f, server %.1f/%.1f %%, host busy %.1f/%.1f %%)",
		n.A.ForeignPct, n.B.ForeignPct, n.A.StealPct, n.B.StealPct, n.A.ProcsRunning, n.B.ProcsRunning,
		n.A.ServerPct, n.B.ServerPct, n.A.HostBusyPct, n.B.HostBusyPct)
	switch {
	case n.Threshold < 0:
		return s + ": guard off"
	case n.Differed:
		return s + fmt.Sprintf(": differed by more than %g points, so verdicts read %q", n.Threshold, ForeignLoad)
	}
	return s + fmt.Sprintf(": within %g points", n.Threshold)
}

// warnings lists what differs between the runs besides the variant:
// workload, scale and scored duration (by more than 10 %), each run
// against the first baseline run.
func warnings(as, bs []*results.Document) []string {
	ref := as[0]
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, d := range append(append([]*results.Document{}, as[1:]...), bs...) {
		if d.Workload != ref.Workload {
			add(fmt.Sprintf("workloads differ: %s and %s", ref.Workload, d.Workload))
		}
		if sa, sb := paramFloat(ref, "scale"), paramFloat(d, "scale"); sa != sb {
			add(fmt.Sprintf("scales differ: %g and %g", sa, sb))
		}
		da, db := ref.Totals.ScoredSeconds, d.Totals.ScoredSeconds
		if math.Abs(da-db) > 0.1*max(da, db) {
			add(fmt.Sprintf("durations differ: %.0f s and %.0f s scored", da, db))
		}
	}
	return out
}
