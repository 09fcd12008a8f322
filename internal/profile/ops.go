package profile

import (
	"fmt"
	"io"
	"math"
	"sort"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/erplab/erplab/internal/opmap"
)

// Clock ties Go's monotonic clock to CLOCK_MONOTONIC, on which perf
// stamps its samples (Start records with -k CLOCK_MONOTONIC): the instant
// T0 of Go's clock is MonoNs of CLOCK_MONOTONIC, within ErrNs. Go's
// monotonic clock is CLOCK_MONOTONIC on Linux (the runtime's nanotime), so
// durations since T0 need no rate correction: ErrNs is the whole error.
type Clock struct {
	T0     time.Time
	MonoNs int64
	ErrNs  int64
}

// NewClock reads CLOCK_MONOTONIC before and after time.Now, 16 times, and
// keeps the tightest pair: MonoNs is its midpoint and ErrNs half its gap.
// Errors: clock_gettime failing.
func NewClock() (Clock, error) {
	best := Clock{ErrNs: math.MaxInt64}
	for i := 0; i < 16; i++ {
		var a, b unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &a); err != nil {
			return Clock{}, fmt.Errorf("profile: clock_gettime: %w", err)
		}
		t := time.Now()
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &b); err != nil {
			return Clock{}, fmt.Errorf("profile: clock_gettime: %w", err)
		}
		if e := (b.Nano() - a.Nano() + 1) / 2; e < best.ErrNs {
			best = Clock{T0: t, MonoNs: (a.Nano() + b.Nano()) / 2, ErrNs: e}
		}
	}
	return best, nil
}

// OperationProfile is the profile of the samples taken while one key
// operation ran on the sampled backend.
type OperationProfile struct {
	Name string `json:"name"`
	// Samples are the operation's samples; SharePct their share of the
	// server's samples.
	Samples  int     `json:"samples"`
	SharePct float64 `json:"share_pct"`
	// Subsystems are the TopOpSubsystems largest subsystems and
	// Functions the TopOpFunctions first functions by self share, both
	// as shares of the operation's samples.
	Subsystems []SubsystemShare `json:"subsystems"`
	Functions  []FunctionShare  `json:"functions"`
}

// OpAttribution says how samples were attributed to key operations.
type OpAttribution struct {
	// Attributed counts server samples of a backend while it ran a key
	// operation; Unattributed the others (background processes, backends
	// between operations, executions over the timeline's limit).
	Attributed   int `json:"attributed"`
	Unattributed int `json:"unattributed"`
	// ClockErrorUs bounds the alignment of perf's clock with the run's,
	// µs (Clock.ErrNs).
	ClockErrorUs float64 `json:"clock_error_us"`
	// DroppedExecutions are executions the timeline did not keep (over
	// its limit): their samples are unattributed.
	DroppedExecutions int `json:"dropped_executions,omitempty"`
}

// Limits of the per-operation profile.
const (
	TopOpSubsystems = 5
	TopOpFunctions  = 5
)

// AttributeOps attributes each sample of p to the key operation that ran
// on its process at its time (ivs: the run's opmap timeline, times since
// c.T0; names: the operations by index) and sets s.Operations (by
// samples, largest first) and s.OpAttribution. A sample at time t on pid
// belongs to the interval of pid with FromNs <= t-c.MonoNs < ToNs (an
// interval still open at the end counts as running to the end).
func AttributeOps(s *Summary, p *Parsed, c Clock, ivs []opmap.Interval, dropped int, names []string) {
	byPID := map[int][]opmap.Interval{}
	for _, iv := range ivs {
		byPID[int(iv.PID)] = append(byPID[int(iv.PID)], iv)
	}
	for _, l := range byPID {
		sort.SliceStable(l, func(i, j int) bool { return l[i].FromNs < l[j].FromNs })
	}
	perOp := map[int32]*Parsed{}
	att := &OpAttribution{ClockErrorUs: math.Round(float64(c.ErrNs)/10) / 100, DroppedExecutions: dropped}
	for _, smp := range p.Samples {
		l := byPID[smp.PID]
		t := smp.TimeNs - c.MonoNs
		i := sort.Search(len(l), func(i int) bool { return l[i].FromNs > t }) - 1
		if i < 0 || (l[i].ToNs >= 0 && t >= l[i].ToNs) || l[i].Op < 0 || int(l[i].Op) >= len(names) {
			att.Unattributed++
			continue
		}
		att.Attributed++
		q := perOp[l[i].Op]
		if q == nil {
			q = &Parsed{PIDs: map[int]bool{}}
			perOp[l[i].Op] = q
		}
		q.Samples = append(q.Samples, smp)
		q.PIDs[smp.PID] = true
	}
	s.Operations = nil
	for op, q := range perOp {
		sum := Summarize(q, nil, s.Event, s.FrequencyHz, s.DurationS)
		subs := append([]SubsystemShare(nil), sum.Subsystems...)
		sort.SliceStable(subs, func(i, j int) bool { return subs[i].Samples > subs[j].Samples })
		for len(subs) > 0 && subs[len(subs)-1].Samples == 0 {
			subs = subs[:len(subs)-1]
		}
		o := OperationProfile{Name: names[op], Samples: len(q.Samples), Subsystems: subs[:min(TopOpSubsystems, len(subs))],
			Functions: sum.Functions[:min(TopOpFunctions, len(sum.Functions))]}
		if s.Samples > 0 {
			o.SharePct = math.Round(10000*float64(o.Samples)/float64(s.Samples)) / 100
		}
		s.Operations = append(s.Operations, o)
	}
	sort.Slice(s.Operations, func(i, j int) bool {
		a, b := s.Operations[i], s.Operations[j]
		if a.Samples != b.Samples {
			return a.Samples > b.Samples
		}
		return a.Name < b.Name
	})
	s.OpAttribution = att
}

// WriteOperations prints the per-operation profile (nothing when there
// is none): per key operation its share of the server's samples, top
// subsystems and top functions by self share.
func (s *Summary) WriteOperations(w io.Writer) {
	if s.OpAttribution == nil {
		return
	}
	a := s.OpAttribution
	fmt.Fprintf(w, "\nby key operation (%d samples on backends running one, %d others; clocks aligned within %.1f µs):\n", a.Attributed, a.Unattributed, a.ClockErrorUs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "operation\tsamples\tshare\ttop subsystems\ttop functions (self)")
	for _, o := range s.Operations {
		subs, fns := "", ""
		for i, x := range o.Subsystems[:min(3, len(o.Subsystems))] {
			if i > 0 {
				subs += ", "
			}
			subs += fmt.Sprintf("%s %.0f %%", x.Name, x.SharePct)
		}
		for i, f := range o.Functions[:min(3, len(o.Functions))] {
			if i > 0 {
				fns += ", "
			}
			fns += fmt.Sprintf("%s %.0f %%", f.Name, f.SelfPct)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f %%\t%s\t%s\n", o.Name, o.Samples, o.SharePct, subs, fns)
	}
	tw.Flush() //nolint:errcheck // w's errors are the caller's
	if a.DroppedExecutions > 0 {
		fmt.Fprintf(w, "(%d executions over the timeline's limit were not attributed)\n", a.DroppedExecutions)
	}
}
