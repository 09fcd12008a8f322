package capacity

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/results"
)

// Resources are what a step's observations say about the server, over
// the samples after the step's warm-up. Percentages of all CPUs; nil
// when not observed (no observations, or the server's processes not
// visible for the CPU split).
type Resources struct {
	// Samples is the number of observation samples used.
	Samples int `json:"samples"`
	// ActiveMean is the mean number of active client sessions;
	// Connections the mean number of client sessions.
	ActiveMean  float64 `json:"active_mean"`
	Connections float64 `json:"connections_mean"`
	// Waits are the wait events by share of active session time, %,
	// largest first ("CPU" is a session not waiting).
	Waits []WaitShare `json:"waits,omitempty"`
	// ServerCPU is the server's process tree (user + system), HostBusy
	// the host's busy time, Iowait the host's iowait, ErplabCPU erplab's
	// own process.
	ServerCPU *float64 `json:"server_cpu_pct,omitempty"`
	HostBusy  *float64 `json:"host_busy_pct,omitempty"`
	Iowait    *float64 `json:"iowait_pct,omitempty"`
	ErplabCPU *float64 `json:"erplab_cpu_pct,omitempty"`
	// ForeignCPU is the host's busy time neither the server's nor
	// erplab's (other processes: a neighbour's load).
	ForeignCPU *float64 `json:"foreign_cpu_pct,omitempty"`
	// Starvation is the run delay of the server's processes and erplab's
	// threads per ms they ran (sampler.Sched, the contention of compare's
	// noise guard): the time they waited for a CPU, absent without
	// schedstat figures.
	Starvation *float64 `json:"starvation,omitempty"`
	// PoolWaitShare is the share of the response time spent waiting for
	// a pool connection, %; PoolWaitMs its mean per execution; PoolSize
	// the pool's connections (0: one per VU).
	PoolWaitShare float64 `json:"pool_wait_share_pct"`
	PoolWaitMs    float64 `json:"pool_wait_mean_ms"`
	PoolSize      int     `json:"pool_size"`
}

// WaitShare is one wait event's share of active session time.
type WaitShare struct {
	Event string  `json:"event"`
	Pct   float64 `json:"pct"`
}

// ResourcesOf reads d's observations and operations. Errors: an
// observations section that does not decode.
func ResourcesOf(d *results.Document) (Resources, error) {
	var r Resources
	var p struct {
		WarmupS     float64 `json:"warmup_s"`
		Connections int     `json:"connections"`
	}
	if len(d.Parameters) > 0 {
		_ = json.Unmarshal(d.Parameters, &p) // a bare document has none
	}
	r.PoolSize = p.Connections
	var pw, resp float64
	for _, op := range d.Operations {
		ok := float64(op.Count - op.Errors)
		pw += op.PoolWait.Mean * ok
		resp += op.Response.Mean * ok
	}
	if resp > 0 {
		r.PoolWaitShare = 100 * pw / resp
	}
	if n := float64(d.Totals.Count - d.Totals.Errors); n > 0 {
		r.PoolWaitMs = pw / n
	}
	o, err := compare.Observations(d)
	if err != nil || o == nil {
		return r, err
	}
	waits := map[string]float64{}
	var waitTotal, active, conns float64
	var srv, busy, iow, erp, foreign float64
	var delayMs, runMs float64
	var nCPU, nHost float64
	for _, s := range o.Series {
		if s.Elapsed <= 0 || s.T <= p.WarmupS {
			continue
		}
		w := s.Weight() // a thinned series' coarse sample stands for several
		r.Samples += int(w)
		active += w * float64(s.Sessions.Active)
		conns += w * float64(s.Sessions.Total())
		for k, n := range s.Waits {
			waits[k] += w * float64(n)
			waitTotal += w * float64(n)
		}
		if s.Noise != nil {
			nCPU += w
			srv += w * (s.Noise.ServerUser + s.Noise.ServerSystem)
			erp += w * s.Noise.Erplab
			foreign += w * s.Noise.Foreign
			if sc := s.Noise.Sched; sc != nil {
				delayMs += w * (sc.ServerDelayMs + sc.ErplabDelayMs)
				runMs += w * (sc.ServerRunMs + sc.ErplabRunMs)
			}
		}
		if s.Host != nil {
			nHost += w
			busy += w * s.Host.CPU.Busy
			iow += w * s.Host.CPU.Iowait
		}
	}
	if r.Samples == 0 {
		return r, nil
	}
	r.ActiveMean = active / float64(r.Samples)
	r.Connections = conns / float64(r.Samples)
	for k, v := range waits {
		r.Waits = append(r.Waits, WaitShare{k, 100 * v / waitTotal})
	}
	sort.Slice(r.Waits, func(i, j int) bool {
		if r.Waits[i].Pct != r.Waits[j].Pct {
			return r.Waits[i].Pct > r.Waits[j].Pct
		}
		return r.Waits[i].Event < r.Waits[j].Event
	})
	if nCPU > 0 {
		r.ServerCPU, r.ErplabCPU, r.ForeignCPU = ptr(srv/nCPU), ptr(erp/nCPU), ptr(foreign/nCPU)
	}
	if runMs > 0 {
		r.Starvation = ptr(delayMs / runMs)
	}
	if nHost > 0 {
		r.HostBusy, r.Iowait = ptr(busy/nHost), ptr(iow/nHost)
	}
	return r, nil
}

func ptr(v float64) *float64 { return &v }

// TopWait is the largest wait event other than CPU, "" when none.
func (r Resources) TopWait() (WaitShare, bool) {
	for _, w := range r.Waits {
		if w.Event != "CPU" {
			return w, true
		}
	}
	return WaitShare{}, false
}

func (r Resources) waitPct(event string) float64 {
	for _, w := range r.Waits {
		if w.Event == event {
			return w.Pct
		}
	}
	return 0
}

// Thresholds of the limiting-resource verdict (see the package doc).
const (
	limitPoolShare = 33.0 // % of response time waiting for a connection (half the database time)
	limitWaitShare = 20.0 // % of active session time in one wait event
	limitServerCPU = 85.0 // % of all CPUs
	limitHostBusy  = 95.0 // % of all CPUs
	limitIowait    = 20.0 // % of all CPUs
)

// Limiting names what stops the load, from the resources of the first
// bad step (bad) compared with the last good one (good, nil when there
// is none): the server's connection limit when the step had connections
// refused (with max_connections as the run recorded it), else the pool when a third of the response time is pool wait, else
// the top wait event when it holds limitWaitShare of active time, else
// server CPU, a busy host (with other processes' share), iowait; the
// server's CPU is always added when known. For example
// "LWLock:LockManager (38 % of active time, 9 % at 32 users), server CPU
// 97 %". unit names the load ("users").
func Limiting(good *Step, bad Step, unit string) string {
	r := bad.Resources
	var parts []string
	w, hasWait := r.TopWait()
	refused := refusedReason(bad)
	switch limitCaseOf(bad) {
	case limitByRefused:
		s := "the server's connection limit: " + refused
		if mc := maxConnections(bad.Run); mc != "" {
			s += ", max_connections " + mc
		}
		parts = append(parts, s)
	case limitByPool:
		pool := "the pool"
		if r.PoolSize > 0 {
			pool = fmt.Sprintf("the pool of %d %s", r.PoolSize, plural(r.PoolSize, "connection", "connections"))
		}
		parts = append(parts, fmt.Sprintf("%s (pool wait %.0f %% of response time)", pool, r.PoolWaitShare))
	case limitByWait:
		s := fmt.Sprintf("%s (%.0f %% of active time", w.Event, w.Pct)
		if good != nil {
			s += fmt.Sprintf(", %.0f %% at %s %s", good.Resources.waitPct(w.Event), fmtLoad(good.Load), unit)
		}
		parts = append(parts, s+")")
	case limitByServerCPU:
		parts = append(parts, fmt.Sprintf("server CPU %.0f %%", *r.ServerCPU))
	case limitByHost:
		s := fmt.Sprintf("host CPU busy %.0f %%", *r.HostBusy)
		var why []string
		if r.ForeignCPU != nil {
			why = append(why, fmt.Sprintf("other processes %.0f %%", *r.ForeignCPU))
		}
		if r.Starvation != nil {
			why = append(why, fmt.Sprintf("starvation %.1f ms waited per ms run", *r.Starvation))
		}
		if len(why) > 0 {
			s += " (" + strings.Join(why, ", ") + ")"
		}
		parts = append(parts, s)
	case limitByIowait:
		parts = append(parts, fmt.Sprintf("iowait %.0f %%", *r.Iowait))
	}
	limited := len(parts) > 0
	if r.ServerCPU != nil && !strings.HasPrefix(strings.Join(parts, ""), "server CPU") {
		parts = append(parts, fmt.Sprintf("server CPU %.0f %%", *r.ServerCPU))
	}
	if r.Iowait != nil && *r.Iowait >= 5 && !strings.HasPrefix(strings.Join(parts, ""), "iowait") {
		parts = append(parts, fmt.Sprintf("iowait %.0f %%", *r.Iowait))
	}
	if !limited {
		detail := strings.Join(parts, ", ")
		if hasWait {
			detail = strings.TrimPrefix(fmt.Sprintf("top wait %s %.0f %%, %s", w.Event, w.Pct, detail), ", ")
		}
		if r.Samples == 0 {
			return "no saturated resource seen (no observations)"
		}
		return strings.TrimSuffix("no saturated resource seen ("+detail+")", " ()")
	}
	return "limited by " + strings.Join(parts, ", ")
}

// The cases of Limiting, in its order of precedence.
type limitCase int

const (
	limitByNone limitCase = iota
	limitByRefused
	limitByPool
	limitByWait
	limitByServerCPU
	limitByHost
	limitByIowait
)

// limitCaseOf is the case of Limiting that names bad's limit.
func limitCaseOf(bad Step) limitCase {
	r := bad.Resources
	w, hasWait := r.TopWait()
	switch {
	case refusedReason(bad) != "":
		return limitByRefused
	case r.PoolWaitShare >= limitPoolShare:
		return limitByPool
	case hasWait && w.Pct >= limitWaitShare:
		return limitByWait
	case r.ServerCPU != nil && *r.ServerCPU >= limitServerCPU:
		return limitByServerCPU
	case r.HostBusy != nil && *r.HostBusy >= limitHostBusy:
		return limitByHost
	case r.Iowait != nil && *r.Iowait >= limitIowait:
		return limitByIowait
	}
	return limitByNone
}

// refusedReason is bad's "connections refused ..." reason, "" if none.
func refusedReason(bad Step) string {
	refused := ""
	for _, reason := range bad.Reasons {
		if strings.HasPrefix(reason, "connections refused") {
			refused = reason
		}
	}
	return refused
}

// ForeignLimited reports whether the search's first bad step was limited
// by other processes' load: Limiting named the busy host (no refused
// connections, pool wait, dominant wait event or saturated server CPU
// before it) and processes neither the server's nor erplab's used at
// least compare.DefaultMaxForeignDiff (10) % of all CPUs, the noise
// guard's threshold of compare. It returns their share, %.
func (d *Document) ForeignLimited() (float64, bool) {
	bad := d.latest(d.Result.FirstBad, OutcomeBad)
	if bad == nil || limitCaseOf(*bad) != limitByHost || bad.Resources.ForeignCPU == nil {
		return 0, false
	}
	f := *bad.Resources.ForeignCPU
	return f, f >= compare.DefaultMaxForeignDiff
}

// plural is one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// maxConnections is the server's max_connections recorded in a step's
// run document (environment.server.settings), "" when not recorded.
func maxConnections(d *results.Document) string {
	if d == nil || len(d.Environment) == 0 {
		return ""
	}
	var env struct {
		Server struct {
			Settings map[string]string `json:"settings"`
		} `json:"server"`
	}
	if json.Unmarshal(d.Environment, &env) != nil {
		return ""
	}
	return env.Server.Settings["max_connections"]
}

// KneeStarvation is the starvation (Resources.Starvation: run delay per
// ms run) of the step that decided the search's capacity: its first bad
// step, or without one (every step good) its last good step; false when
// that step has no schedstat figures.
func (d *Document) KneeStarvation() (float64, bool) {
	s := d.latest(d.Result.FirstBad, OutcomeBad)
	if s == nil {
		s = d.latest(d.Result.Capacity, OutcomeGood)
	}
	if s == nil || s.Resources.Starvation == nil {
		return 0, false
	}
	return *s.Resources.Starvation, true
}
