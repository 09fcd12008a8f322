package compare

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
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
	// ForeignRunnable is the mean number of runnable tasks that are
	// neither the server's nor erplab's (sampler.Noise.ForeignRunnable);
	// CPUs the host's CPUs.
	ForeignRunnable float64 `json:"foreign_runnable"`
	CPUs            int     `json:"cpus"`
}

// NoiseReport is the noise guard of a comparison.
type NoiseReport struct {
	// Recorded is true when both sides have process-tree figures.
	Recorded bool      `json:"recorded"`
	A        NoiseSide `json:"a"`
	B        NoiseSide `json:"b"`
	// Threshold is Options.MaxForeignDiff. ForeignCPU and Runnable are
	// the estimates of B-A of the foreign CPU and of the foreign runnable
	// tasks (Welch over the per-round means with rounds, the block
	// bootstrap of the samples with one run each). Differed is true when
	// |ForeignCPU.Delta| exceeds Threshold, or when Runnable is
	// significant (p < 0.05) and |Runnable.Delta| exceeds RunnableThreshold
	// (half a task per CPU); decided rows then read ForeignLoad.
	Threshold         float64   `json:"threshold_pct"`
	RunnableThreshold float64   `json:"runnable_threshold"`
	ForeignCPU        NoiseDiff `json:"foreign_cpu_diff"`
	Runnable          NoiseDiff `json:"foreign_runnable_diff"`
	Differed          bool      `json:"differed"`
	// Why says which criterion fired ("" when none did).
	Why string `json:"why,omitempty"`
}

// NoiseDiff is the estimate of a noise figure's B-A: the difference, its
// 95 % interval and two-sided p-value (NaN when not estimable).
type NoiseDiff struct {
	Delta float64 `json:"delta"`
	Lo    float64 `json:"ci95_low"`
	Hi    float64 `json:"ci95_high"`
	P     float64 `json:"p"`
}

// MarshalJSON writes NaN numbers as null.
func (d NoiseDiff) MarshalJSON() ([]byte, error) {
	num := func(v float64) any {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return v
	}
	return json.Marshal(map[string]any{"delta": num(d.Delta), "ci95_low": num(d.Lo), "ci95_high": num(d.Hi), "p": num(d.P)})
}

// RunnablePerCPU is the foreign-runnable threshold of the noise guard per
// CPU: half a competing task per CPU.
const RunnablePerCPU = 0.5

// noiseStat is the mean of a noise figure over the selected samples.
func noiseStat(f func(*sampler.Noise) float64) func(rd *runData, s *sel) float64 {
	return func(rd *runData, s *sel) float64 {
		return obsMean(rd, s, func(p *sampler.Sample) (float64, bool) {
			if p.Noise == nil {
				return 0, false
			}
			return f(p.Noise), true
		})
	}
}

func noiseReport(ra, rb []*runData, threshold float64, opts Options) NoiseReport {
	nr := NoiseReport{Threshold: threshold, Recorded: true}
	figures := []func(*sampler.Noise) float64{
		func(n *sampler.Noise) float64 { return n.Foreign },
		func(n *sampler.Noise) float64 { return n.ServerUser + n.ServerSystem },
		func(n *sampler.Noise) float64 { return n.HostBusy },
		func(n *sampler.Noise) float64 { return n.Steal },
		func(n *sampler.Noise) float64 { return float64(n.ProcsRunning) },
		func(n *sampler.Noise) float64 { return float64(n.ForeignRunnable) },
	}
	side := func(rds []*runData) NoiseSide {
		var sum [6]float64
		n := 0
		for _, rd := range rds {
			if !rd.noiseRecorded() {
				nr.Recorded = false
				continue
			}
			for i, f := range figures {
				sum[i] += noiseStat(f)(rd, rd.all())
			}
			n++
		}
		out := NoiseSide{}
		if n > 0 {
			k := float64(n)
			out = NoiseSide{ForeignPct: sum[0] / k, ServerPct: sum[1] / k, HostBusyPct: sum[2] / k, StealPct: sum[3] / k,
				ProcsRunning: sum[4] / k, ForeignRunnable: sum[5] / k}
		}
		for _, rd := range rds {
			for _, p := range rd.obs {
				if p.Noise != nil {
					out.CPUs = max(out.CPUs, p.Noise.CPUs)
				}
			}
		}
		return out
	}
	nr.A, nr.B = side(ra), side(rb)
	nr.ForeignCPU = NoiseDiff{nan, nan, nan, nan}
	nr.Runnable = nr.ForeignCPU
	if !nr.Recorded {
		return nr
	}
	cpus := max(nr.A.CPUs, nr.B.CPUs, 1)
	nr.RunnableThreshold = RunnablePerCPU * float64(cpus)
	specs := []spec{{obs: true, stat: noiseStat(figures[0])}, {obs: true, stat: noiseStat(figures[5])}}
	var rows []Row
	if len(ra) == 1 && len(rb) == 1 {
		rows = bootstrapRows(specs, ra[0], rb[0], opts)
	} else {
		rows = roundRows(specs, ra, rb)
	}
	diff := func(r Row) NoiseDiff { return NoiseDiff{r.B - r.A, r.Lo, r.Hi, r.P} }
	nr.ForeignCPU, nr.Runnable = diff(rows[0]), diff(rows[1])
	switch {
	case threshold < 0:
	case math.Abs(nr.ForeignCPU.Delta) > threshold:
		nr.Differed, nr.Why = true, fmt.Sprintf("foreign CPU differed by %.1f points (more than %g)", nr.ForeignCPU.Delta, threshold)
	case nr.Runnable.P < 0.05 && math.Abs(nr.Runnable.Delta) > nr.RunnableThreshold:
		nr.Differed, nr.Why = true, fmt.Sprintf("foreign runnable tasks differed by %.1f (p %.3f; more than %g on %d CPUs)",
			nr.Runnable.Delta, nr.Runnable.P, nr.RunnableThreshold, cpus)
	}
	return nr
}

// Line is the one-line account, e.g. "noise: foreign CPU A 3.1 % B 41.0 %
// of all CPUs (steal 0.0/0.0 %, run queue 2.1/4.0, server 35.2/30.1 %):
// differed by more than 10 points: verdicts inconclusive".
func (n NoiseReport) Line() string {
	if !n.Recorded {
		return "noise: no process-tree CPU figures in both sides (observations off, a remote server, or older results): foreign load not checked"
	}
	s := fmt.Sprintf("noise: foreign CPU A %.1f %% B %.1f %% of all CPUs, foreign runnable tasks %.1f/%.1f (steal %.1f/%.1f %%, run queue %.1f/%.1f, server %.1f/%.1f %%, host busy %.1f/%.1f %%)",
		n.A.ForeignPct, n.B.ForeignPct, n.A.ForeignRunnable, n.B.ForeignRunnable, n.A.StealPct, n.B.StealPct,
		n.A.ProcsRunning, n.B.ProcsRunning, n.A.ServerPct, n.B.ServerPct, n.A.HostBusyPct, n.B.HostBusyPct)
	switch {
	case n.Threshold < 0:
		return s + ": guard off"
	case n.Differed:
		return s + fmt.Sprintf(": %s, so verdicts read %q", n.Why, ForeignLoad)
	}
	return s + fmt.Sprintf(": same load (within %g points of CPU, %g runnable tasks)", n.Threshold, n.RunnableThreshold)
}

// warnings lists what differs between the runs besides the variant:
// workload, data scale and planned duration (by more than 10 %), each
// run against the first baseline run.
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
		if sa, sb := dataScale(ref), dataScale(d); sa != sb {
			add(fmt.Sprintf("scales differ: %g and %g", sa, sb))
		}
		if da, db := plannedSeconds(ref), plannedSeconds(d); math.Abs(da-db) > 0.1*max(da, db) {
			add(fmt.Sprintf("durations differ: %.0f s and %.0f s planned (load profile)", da, db))
		}
	}
	return out
}

// dataScale is the scale of the data a run ran on: the workload's
// workload_details.data_scale when it says (erp uses an installed data
// set whatever --scale asked for), else the requested scale.
func dataScale(d *results.Document) float64 {
	var p struct {
		Details struct {
			DataScale float64 `json:"data_scale"`
		} `json:"workload_details"`
	}
	if len(d.Parameters) > 0 && json.Unmarshal(d.Parameters, &p) == nil && p.Details.DataScale > 0 {
		return p.Details.DataScale
	}
	return paramFloat(d, "scale")
}

// plannedSeconds is the length of a run's load profile: the sum of its
// stages (or of its arrival-rate stages, if longer), s; the scored time
// plus the warm-up when the parameters do not say.
func plannedSeconds(d *results.Document) float64 {
	var p struct {
		Stages []struct {
			DurationS float64 `json:"duration_s"`
		} `json:"stages"`
		RateStages []struct {
			DurationS float64 `json:"duration_s"`
		} `json:"rate_stages"`
	}
	if len(d.Parameters) > 0 && json.Unmarshal(d.Parameters, &p) == nil {
		var closed, open float64
		for _, s := range p.Stages {
			closed += s.DurationS
		}
		for _, s := range p.RateStages {
			open += s.DurationS
		}
		if t := max(closed, open); t > 0 {
			return t
		}
	}
	return d.Totals.ScoredSeconds + paramFloat(d, "warmup_s")
}
