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
// means with rounds), % of all CPUs except ProcsRunning; and its
// starvation (schedstat, sampler.Sched), the figures the guard judges.
type NoiseSide struct {
	// ForeignPct is the CPU used by processes other than the server's
	// tree and erplab (sampler.Noise.Foreign); ServerPct the server's
	// own; HostBusyPct the host's busy share; StealPct the time given to
	// other guests; ProcsRunning the run queue. Information only.
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
	// ServerWaiting and ErplabWaiting are the mean number of the
	// server's tasks and of erplab's threads runnable but waiting for a
	// CPU (run delay, ms per second / 1000); DelayMsPerOp their run
	// delay (with the estimated stolen time) per executed operation, ms.
	ServerWaiting float64 `json:"server_waiting"`
	ErplabWaiting float64 `json:"erplab_waiting"`
	DelayMsPerOp  float64 `json:"run_delay_ms_per_op"`
	// Contention is the starvation the guard judges: the run delay of
	// the server's tasks and erplab's threads (plus their estimated
	// stolen time) per ms they ran (package doc, "Noise guard"): 1
	// means a CPU-bound step took twice its CPU time.
	Contention float64 `json:"contention"`
}

// NoiseReport is the noise guard of a comparison.
type NoiseReport struct {
	// Recorded is true when both sides have process-tree figures;
	// Starvation when both have schedstat figures (sampler.Sched) in
	// every run, which the guard needs.
	Recorded   bool      `json:"recorded"`
	Starvation bool      `json:"starvation_recorded"`
	A          NoiseSide `json:"a"`
	B          NoiseSide `json:"b"`
	// ContentionRatio is (1+B.Contention)/(1+A.Contention), the
	// factor by which waiting for CPUs alone slows CPU-bound work on B
	// against A; Limit is max(ContentionRatio, 1/ContentionRatio) to the
	// power StarvationAmplification: a decided row whose B/A (or A/B)
	// is at most Limit is withheld.
	ContentionRatio float64 `json:"contention_ratio"`
	Limit           float64 `json:"limit_ratio"`
	// ExtraDelayMs is the run delay per operation the more contended
	// side had beyond what the other side's contention would have given
	// it: S·(1 - ρ_less/ρ_more), S its run delay per operation (with
	// stolen time), ρ the contentions. A latency row whose slower side is
	// the more contended one is withheld when its B-A is at most this
	// (short operations: a few ms of waiting multiply a sub-ms latency).
	ExtraDelayMs float64 `json:"extra_delay_ms"`
	// Off is true when the guard was turned off (Options.NoiseGuardOff).
	Off bool `json:"guard_off,omitempty"`
	// Withheld is the number of rows the guard withheld (their verdict
	// reads Starved); Differed is Withheld > 0; Why says so in words.
	Withheld int    `json:"withheld"`
	Differed bool   `json:"differed"`
	Why      string `json:"why,omitempty"`
	// ForeignCPU and Runnable are the estimates of B-A of the foreign
	// CPU and of the foreign runnable tasks (Welch over the per-round
	// means with rounds, the block bootstrap of the samples with one run
	// each): information only, the guard no longer judges them.
	ForeignCPU NoiseDiff `json:"foreign_cpu_diff"`
	Runnable   NoiseDiff `json:"foreign_runnable_diff"`
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

// StarvationAmplification is the power of the contention ratio a
// decided row's effect must exceed: the queues in front of a starved
// server (the pool, the connections, the virtual users' closed loop)
// make latencies and throughput move more than the CPU-bound steps
// themselves. Calibrated on testdata/starved (quiet against hog, an A/A
// with `erplab stress --cpu 4` beside one side on a saturated 2-core
// host): contention 4.4 against 11.4 (ratio 2.3) moved throughput by
// 1/0.64 and the operations' p50 by 2 to 5, below 2.3^2 = 5.3 (and
// item_lookup's sub-ms p50 by 8, a shift within ExtraDelayMs).
const StarvationAmplification = 2

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

func noiseReport(ra, rb []*runData, opts Options) NoiseReport {
	nr := NoiseReport{Recorded: true, Starvation: true, Off: opts.guardOff()}
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
		if !out.addStarvation(rds) {
			nr.Starvation = false
		}
		return out
	}
	nr.A, nr.B = side(ra), side(rb)
	if nr.Starvation {
		nr.setLimits()
	}
	nr.ForeignCPU = NoiseDiff{nan, nan, nan, nan}
	nr.Runnable = nr.ForeignCPU
	if !nr.Recorded {
		return nr
	}
	specs := []spec{{obs: true, stat: noiseStat(figures[0])}, {obs: true, stat: noiseStat(figures[5])}}
	var rows []Row
	if len(ra) == 1 && len(rb) == 1 {
		rows = bootstrapRows(specs, ra[0], rb[0], opts)
	} else {
		rows = roundRows(specs, ra, rb)
	}
	diff := func(r Row) NoiseDiff { return NoiseDiff{r.B - r.A, r.Lo, r.Hi, r.P} }
	nr.ForeignCPU, nr.Runnable = diff(rows[0]), diff(rows[1])
	return nr
}

// addStarvation sets the starvation figures of side s from its runs,
// each the mean over the runs; false when a run has none.
func (s *NoiseSide) addStarvation(rds []*runData) bool {
	all := true
	k := float64(len(rds))
	for _, rd := range rds {
		sv, ok := rd.starvation()
		all = all && ok
		s.ServerWaiting += sv.serverWaiting / k
		s.ErplabWaiting += sv.erplabWaiting / k
		s.DelayMsPerOp += sv.msPerOp / k
		s.Contention += sv.contention / k
	}
	return all
}

// StarvationLimit is the noise guard's rule for two sides' contentions
// ca and cb (run delay per ms run, package doc "Noise guard"): ratio is
// (1+cb)/(1+ca), limit max(ratio, 1/ratio) to the power
// StarvationAmplification; an effect whose B/A (or A/B) is at most limit
// could be the starvation difference's. Also capacity's A/B guard.
func StarvationLimit(ca, cb float64) (ratio, limit float64) {
	ratio = (1 + cb) / (1 + ca)
	return ratio, math.Pow(max(ratio, 1/ratio), StarvationAmplification)
}

// setLimits sets ContentionRatio, Limit and ExtraDelayMs from the sides.
func (n *NoiseReport) setLimits() {
	n.ContentionRatio, n.Limit = StarvationLimit(n.A.Contention, n.B.Contention)
	more, less := n.B, n.A
	if n.A.Contention > n.B.Contention {
		more, less = n.A, n.B
	}
	if more.Contention > 0 {
		n.ExtraDelayMs = more.DelayMsPerOp * (1 - less.Contention/more.Contention)
	}
}

// starvation is one run's: the mean tasks waiting, the run delay per
// operation and the contention.
type starvation struct {
	serverWaiting, erplabWaiting float64
	msPerOp, contention          float64
}

// starvation computes the run's starvation (package doc, "Noise
// guard"); ok is false when no observation sample has schedstat figures
// or nothing ran.
func (rd *runData) starvation() (starvation, bool) {
	var out starvation
	var delayMs, runMs, serverMs, erplabMs, secs float64
	for _, p := range rd.obs {
		if p.Noise == nil || p.Noise.Sched == nil || p.Elapsed <= 0 {
			continue
		}
		n, sc := p.Noise, p.Noise.Sched
		run := sc.ServerRunMs + sc.ErplabRunMs
		stolen := 0.0
		if ran := n.HostBusy - n.Steal; n.Steal > 0 && ran > 0 {
			stolen = run * n.Steal / ran
		}
		delayMs += sc.ServerDelayMs + sc.ErplabDelayMs + stolen
		runMs += run
		serverMs += sc.ServerDelayMs
		erplabMs += sc.ErplabDelayMs
		secs += p.Elapsed
	}
	if secs <= 0 || runMs <= 0 {
		return out, false
	}
	out.serverWaiting, out.erplabWaiting = serverMs/secs/1000, erplabMs/secs/1000
	out.contention = delayMs / runMs
	var execs int64
	for _, iv := range rd.ivs {
		execs += iv.Count
	}
	if scored := float64(len(rd.ivs)) * rd.step; execs > 0 && scored > 0 {
		out.msPerOp = delayMs / secs / (float64(execs) / scored)
	}
	return out, true
}

// Explains reports whether the starvation difference could explain row
// r's effect (package doc, "Noise guard"): both values positive, and
// max(B/A, A/B) at most Limit, or for a latency row (p50, p95, p99) its
// |B-A| at most ExtraDelayMs; a latency row whose slower side is the less
// contended one is never explained. Rows with a value of 0 or less on a
// side are not scalings and are never explained. It does not look at
// whether the guard is on (Off, Starvation).
func (n *NoiseReport) Explains(r *Row) bool {
	a, b := r.A, r.B
	if !(a > 0 && b > 0) {
		return false
	}
	if r.Unit == "ms" {
		if b != a && (b > a) != (n.B.Contention > n.A.Contention) {
			return false
		}
		if math.Abs(b-a) <= n.ExtraDelayMs {
			return true
		}
	}
	return max(b/a, a/b) <= n.Limit
}

// guards reports whether the guard judges this comparison.
func (n *NoiseReport) guards() bool { return !n.Off && n.Starvation }

// guard withholds r's decided verdict when the starvation difference
// could explain it; it reports whether it did.
func (n *NoiseReport) guard(r *Row) bool {
	if !n.guards() || !r.Verdict.Decided() || !n.Explains(r) {
		return false
	}
	r.Verdict = Starved
	n.Withheld++
	n.Differed = true
	n.Why = fmt.Sprintf("%d decided row%s within a factor %.2f or, latencies, %.1f ms, which the starvation difference could explain",
		n.Withheld, map[bool]string{true: "", false: "s"}[n.Withheld == 1], n.Limit, n.ExtraDelayMs)
	return true
}

// Line is the one-line account, e.g. "noise: starvation (run delay per
// ms run) A 4.38 B 11.35, ratio 2.30 (waiting for a CPU: server
// 0.73/1.00 tasks, ...); foreign CPU 84.6/90.1 %, ... (information): 12
// decided rows within a factor 5.30, which the contention ratio 2.30
// could explain, so they read "inconclusive: starvation differed"".
func (n NoiseReport) Line() string {
	if !n.Recorded {
		return "noise: no process-tree figures in both sides (observations off, a remote server, or older results): starvation not checked"
	}
	info := fmt.Sprintf("foreign CPU %.1f/%.1f %%, foreign runnable tasks %.1f/%.1f, run queue %.1f/%.1f, server CPU %.1f/%.1f %% (information)",
		n.A.ForeignPct, n.B.ForeignPct, n.A.ForeignRunnable, n.B.ForeignRunnable, n.A.ProcsRunning, n.B.ProcsRunning, n.A.ServerPct, n.B.ServerPct)
	if !n.Starvation {
		return "noise: no schedstat figures in every run (older results, or a kernel without schedstat): starvation not checked; " + info
	}
	s := fmt.Sprintf("noise: starvation (run delay per ms run) A %.2f B %.2f, ratio %.2f (waiting for a CPU: server %.2f/%.2f tasks, erplab %.2f/%.2f; run delay %.1f/%.1f ms per operation; steal %.1f/%.1f %%); %s",
		n.A.Contention, n.B.Contention, n.ContentionRatio, n.A.ServerWaiting, n.B.ServerWaiting, n.A.ErplabWaiting, n.B.ErplabWaiting,
		n.A.DelayMsPerOp, n.B.DelayMsPerOp, n.A.StealPct, n.B.StealPct, info)
	switch {
	case n.Off:
		return s + ": guard off"
	case n.Differed:
		return s + fmt.Sprintf(": %s, so they read %q", n.Why, Starved)
	}
	return s + fmt.Sprintf(": no decided row within a factor %.2f (the ratio to the power %d) or, latencies, %.1f ms", n.Limit, StarvationAmplification, n.ExtraDelayMs)
}

// warnings lists what differs between the runs besides the variant:
// workload, data scale and planned duration (by more than 10 %; not for
// a replay, whose length is its capture's and its pace), each run
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
		if sa, sb := dataScale(ref), dataScale(d); sa != sb {
			add(fmt.Sprintf("scales differ: %g and %g", sa, sb))
		}
		if da, db := plannedSeconds(ref), plannedSeconds(d); d.Workload != replayWorkload && math.Abs(da-db) > 0.1*max(da, db) {
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

// replayWorkload is the workload name of a replay's results (package
// replay's Workload): it has no load profile to plan a duration by.
const replayWorkload = "replay"
