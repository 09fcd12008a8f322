package profile

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/erplab/erplab/internal/opmap"
)

// Invalidation is what the shared-invalidation uprobes counted for one
// server over a window: extra.invalidation of a run, the doctor's
// invalidation-chain facts (docs/observe.md, "Invalidation observed").
type Invalidation struct {
	// Binary is the probed postgres executable; Probes the functions
	// probed.
	Binary string   `json:"binary"`
	Probes []string `json:"probes"`
	// Group is the probes' perf group (erplab_ and 12 hex digits).
	Group string `json:"group,omitempty"`
	// MessagesCounted: Inserted counts messages (SIInsertDataEntries' n
	// read from its register); false: calls.
	MessagesCounted bool `json:"messages_counted"`
	// ReadsCounted: Read counts messages read (the reads probe was on,
	// InvalOptions.Reads); false: Read is 0, not counted.
	ReadsCounted bool    `json:"reads_counted"`
	DurationS    float64 `json:"duration_s"`
	// Total are the server processes' events; PerS their rates.
	Total InvalCounts `json:"total"`
	PerS  InvalRates  `json:"per_s"`
	// MaxPerS are the largest one-second counts of each event.
	MaxPerS InvalCounts `json:"max_per_s"`
	// Series are the counts per second from the run's start.
	Series []InvalCounts `json:"series,omitempty"`
	// Backends counts the server's processes with an event;
	// BackendsReset those reset at least once, BackendsCaughtUp those
	// that processed a catch-up interrupt.
	Backends         int `json:"backends"`
	BackendsReset    int `json:"backends_reset"`
	BackendsCaughtUp int `json:"backends_caught_up"`
	// TopBackends are the TopInvalBackends processes with the most
	// resets and catch-ups.
	TopBackends []BackendInval `json:"top_backends,omitempty"`
	// Operations are the events attributed to the key operation that
	// ran on the backend at the event's time; Unattributed the others
	// (idle backends: catch-ups are processed while idle; background
	// processes; events over the kept limit).
	Operations   []OpInval    `json:"operations,omitempty"`
	Unattributed *InvalCounts `json:"unattributed,omitempty"`
	// NotKept counts events over the limit kept for attribution.
	NotKept int `json:"not_kept,omitempty"`
	// PerfCPUS is the CPU seconds perf record used (its start-up
	// reading every process included): the probes' own cost
	// outside the traps, which the server's processes pay.
	PerfCPUS float64 `json:"perf_cpu_s"`
	// ProbeHits are the probe events perf recorded (every process of
	// the binary): each was a trap into the kernel in the process that
	// hit it (about 10 µs here: docs/measurements).
	ProbeHits int64 `json:"probe_hits"`
	// OtherProcesses are events of postgres processes of other servers
	// on this host (the probes are on the binary, every server running
	// it fires them; not counted above).
	OtherProcesses InvalCounts `json:"other_processes"`
}

// InvalRates are InvalCounts per second.
type InvalRates struct {
	Resets   float64 `json:"resets"`
	Rebuilds float64 `json:"cache_rebuilds"`
	Catchups float64 `json:"catchups"`
	Cleanups float64 `json:"cleanups"`
	Inserted float64 `json:"inserted"`
	Read     float64 `json:"read"`
}

// Rates divides c by seconds (rounded to 0.01).
func (c InvalCounts) Rates(seconds float64) InvalRates {
	if seconds <= 0 {
		return InvalRates{}
	}
	f := func(n int64) float64 { return math.Round(100*float64(n)/seconds) / 100 }
	return InvalRates{f(c.Resets), f(c.Rebuilds), f(c.Catchups), f(c.Cleanups), f(c.Inserted), f(c.Read)}
}

// BackendInval are one process's counts.
type BackendInval struct {
	PID int `json:"pid"`
	InvalCounts
}

// OpInval are one key operation's counts.
type OpInval struct {
	Name string `json:"name"`
	InvalCounts
}

// TopInvalBackends bounds Invalidation.TopBackends.
const TopInvalBackends = 10

// summary builds the Invalidation of the counts so far (r.mu held).
func (r *InvalRecording) summary(dur float64) *Invalidation {
	s := &Invalidation{Binary: r.probes.binary, Group: r.probes.group, MessagesCounted: r.probes.counted, ReadsCounted: r.probes.events[EvRead] != "", DurationS: math.Round(100*dur) / 100,
		Total: r.total, PerS: r.total.Rates(dur), Series: append([]InvalCounts(nil), r.series...), NotKept: r.over, OtherProcesses: r.other,
		PerfCPUS: math.Round(100*r.perfCPU) / 100, ProbeHits: r.hits}
	for _, sp := range probeSpecs("") {
		if r.probes.events[sp.ev] != "" {
			s.Probes = append(s.Probes, strings.TrimSuffix(sp.fn, "%return"))
		}
	}
	for _, c := range r.series {
		m := &s.MaxPerS
		m.Resets, m.Rebuilds, m.Catchups = max(m.Resets, c.Resets), max(m.Rebuilds, c.Rebuilds), max(m.Catchups, c.Catchups)
		m.Cleanups, m.Inserted, m.Read = max(m.Cleanups, c.Cleanups), max(m.Inserted, c.Inserted), max(m.Read, c.Read)
	}
	for pid, c := range r.perPID {
		s.Backends++
		if c.Resets > 0 {
			s.BackendsReset++
		}
		if c.Catchups > 0 {
			s.BackendsCaughtUp++
		}
		if c.Resets+c.Catchups > 0 {
			s.TopBackends = append(s.TopBackends, BackendInval{PID: pid, InvalCounts: *c})
		}
	}
	sort.Slice(s.TopBackends, func(i, j int) bool {
		a, b := s.TopBackends[i], s.TopBackends[j]
		if a.Resets+a.Catchups != b.Resets+b.Catchups {
			return a.Resets+a.Catchups > b.Resets+b.Catchups
		}
		return a.PID < b.PID
	})
	s.TopBackends = s.TopBackends[:min(TopInvalBackends, len(s.TopBackends))]
	return s
}

// Attribute attributes each kept event to the key operation that ran on
// its backend at its time (ivs: the run's opmap timeline on the
// recording's clock T0; names: the operations by index) and sets
// s.Operations (by resets, catch-ups and messages, largest first) and
// s.Unattributed.
func (r *InvalRecording) Attribute(s *Invalidation, ivs []opmap.Interval, names []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	byPID := map[uint32][]opmap.Interval{}
	for _, iv := range ivs {
		byPID[iv.PID] = append(byPID[iv.PID], iv)
	}
	for _, l := range byPID {
		sort.SliceStable(l, func(i, j int) bool { return l[i].FromNs < l[j].FromNs })
	}
	perOp := map[int32]*InvalCounts{}
	un := InvalCounts{}
	kept := InvalCounts{}
	for _, e := range r.events {
		kept.add(int(e.ev), int64(e.n))
		l := byPID[e.pid]
		i := sort.Search(len(l), func(i int) bool { return l[i].FromNs > e.t }) - 1
		if i < 0 || (l[i].ToNs >= 0 && e.t >= l[i].ToNs) || l[i].Op < 0 || int(l[i].Op) >= len(names) {
			un.add(int(e.ev), int64(e.n))
			continue
		}
		c := perOp[l[i].Op]
		if c == nil {
			c = &InvalCounts{}
			perOp[l[i].Op] = c
		}
		c.add(int(e.ev), int64(e.n))
	}
	un.plus(r.total.Minus(kept)) // events over the kept limit
	s.Operations = nil
	for op, c := range perOp {
		s.Operations = append(s.Operations, OpInval{Name: names[op], InvalCounts: *c})
	}
	sort.Slice(s.Operations, func(i, j int) bool {
		a, b := s.Operations[i], s.Operations[j]
		if a.Resets != b.Resets {
			return a.Resets > b.Resets
		}
		if a.Inserted != b.Inserted {
			return a.Inserted > b.Inserted
		}
		return a.Name < b.Name
	})
	s.Unattributed = &un
}

// msgs names what Inserted counts.
func (s *Invalidation) msgs() string {
	if s.MessagesCounted {
		return "msg"
	}
	return "calls"
}

// Line is the one-line account: "invalidation observed (perf uprobes,
// 30 s): 12 catalog cache resets (0.40/s, max 3/s) on 9 backends (40
// cache rebuilds with parallel workers' starts), 310 catch-up interrupts
// processed ...".
func (s *Invalidation) Line() string {
	read := ""
	if s.ReadsCounted {
		read = fmt.Sprintf(", %d msg read (%.0f/s)", s.Total.Read, s.PerS.Read)
	}
	return fmt.Sprintf("invalidation observed (perf uprobes, %.0f s): %d catalog cache resets (%.2f/s, max %d/s) on %d backends (%d cache rebuilds with parallel workers' starts), %d catch-up interrupts processed (%.2f/s) on %d backends, %d queue clean-ups (%.2f/s), %d %s inserted (%.0f/s)%s",
		s.DurationS, s.Total.Resets, s.PerS.Resets, s.MaxPerS.Resets, s.BackendsReset, s.Total.Rebuilds, s.Total.Catchups, s.PerS.Catchups, s.BackendsCaughtUp,
		s.Total.Cleanups, s.PerS.Cleanups, s.Total.Inserted, s.msgs(), s.PerS.Inserted, read)
}

// WriteText prints Line, the counts per key operation and the backends
// reset most.
func (s *Invalidation) WriteText(w io.Writer) {
	fmt.Fprintln(w, s.Line())
	if len(s.Operations) > 0 || s.Unattributed != nil {
		head, row := "", func(c InvalCounts) string { return "" }
		if s.ReadsCounted {
			head, row = ", msg read", func(c InvalCounts) string { return fmt.Sprintf(", %d", c.Read) }
		}
		fmt.Fprintf(w, "  by key operation (resets, catch-ups, clean-ups, %s inserted%s):\n", s.msgs(), head)
		for _, o := range s.Operations {
			fmt.Fprintf(w, "    %-24s %d, %d, %d, %d%s\n", o.Name, o.Resets, o.Catchups, o.Cleanups, o.Inserted, row(o.InvalCounts))
		}
		if u := s.Unattributed; u != nil && !u.Zero() {
			fmt.Fprintf(w, "    %-24s %d, %d, %d, %d%s\n", "(between operations)", u.Resets, u.Catchups, u.Cleanups, u.Inserted, row(*u))
		}
	}
	if len(s.TopBackends) > 0 {
		var parts []string
		for _, b := range s.TopBackends[:min(5, len(s.TopBackends))] {
			parts = append(parts, fmt.Sprintf("%d: %d resets, %d catch-ups", b.PID, b.Resets, b.Catchups))
		}
		fmt.Fprintf(w, "  backends reset or caught up most: %s\n", strings.Join(parts, "; "))
	}
	if s.PerfCPUS > 0 {
		fmt.Fprintf(w, "  (cost: %d probe hits, %.0f/s, each a trap in the process that hit it; perf record used %.2f CPU s over %.0f s)\n",
			s.ProbeHits, float64(s.ProbeHits)/max(s.DurationS, 1e-9), s.PerfCPUS, s.DurationS)
	}
	if o := s.OtherProcesses; !o.Zero() {
		fmt.Fprintf(w, "  (other servers of this binary on the host, not counted: %d resets, %d catch-ups, %d %s inserted)\n", o.Resets, o.Catchups, o.Inserted, s.msgs())
	}
}

// LiveLine is the one-line live account of counts over seconds (top,
// progress): "invalidation: resets 3/s, catch-ups 12/s, clean-ups
// 4/s, inserted 1200 msg/s, read 30000 msg/s (perf uprobes)".
func LiveLine(c InvalCounts, seconds float64, counted bool) string {
	r := c.Rates(seconds)
	unit := "msg"
	if !counted {
		unit = "calls"
	}
	return fmt.Sprintf("invalidation: resets %.1f/s, catch-ups %.1f/s, clean-ups %.1f/s, inserted %.0f %s/s (perf uprobes)",
		r.Resets, r.Catchups, r.Cleanups, r.Inserted, unit)
}

// Counted tells whether Inserted counts messages (else calls).
func (r *InvalRecording) Counted() bool { return r.probes.counted }

// InvalResult is extra.invalidation of a run: the observed counts, or
// why they could not be observed (the shared-invalidation figure of
// extra.observations is then an estimate only).
type InvalResult struct {
	Observed    *Invalidation `json:"observed,omitempty"`
	Unavailable string        `json:"unavailable,omitempty"`
}

// ReadInval reads extra.invalidation.
func ReadInval(raw []byte) (*InvalResult, error) {
	var r InvalResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("profile: extra.invalidation: %w", err)
	}
	return &r, nil
}

// UnavailableLine is the one line said when the probes cannot run.
func UnavailableLine(why string) string {
	return "invalidation not observed: " + strings.TrimPrefix(why, "profile: ") + "; the shared-invalidation figure is an estimate from catalog changes"
}
