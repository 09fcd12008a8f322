package profile

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
)

// Summary is a profile reduced for tables and for the results
// (extra.profile, docs/results-format.md). Shares are % of the server's
// samples unless said otherwise.
type Summary struct {
	// Event and FrequencyHz are the perf event and its sampling
	// frequency; DurationS the recording's length in seconds.
	Event       string  `json:"event"`
	FrequencyHz int     `json:"frequency_hz"`
	DurationS   float64 `json:"duration_s"`
	// Roots are the followed processes (the postmaster, or --pid);
	// Processes the followed processes that had samples.
	Roots     []int `json:"roots"`
	Processes int   `json:"processes"`
	// PerfCPUS is the CPU time perf record itself used, seconds (user and
	// system; the kernel's sampling work in the sampled tasks is theirs).
	PerfCPUS float64 `json:"perf_cpu_s,omitempty"`
	// PerfSamplingCPUS is the part of PerfCPUS spent while sampling (from
	// enable to stop), seconds: without perf's start-up (reading every
	// process's maps) and its shutdown.
	PerfSamplingCPUS float64 `json:"perf_sampling_cpu_s,omitempty"`
	// Samples counts the server's samples, HostSamples every sample of
	// the recording (all processes; idle CPUs are not sampled);
	// HostSharePct is 100·Samples/HostSamples: the server's share of the
	// host's busy CPU time.
	Samples      int     `json:"samples"`
	HostSamples  int     `json:"host_samples"`
	HostSharePct float64 `json:"host_share_pct"`
	// KernelSymbols is false when kernel frames could not be named
	// (kernel.kptr_restrict): kernel time is then classified by the
	// user-space caller only.
	KernelSymbols bool `json:"kernel_symbols"`
	// Subsystems are the shares by subsystem, in Subsystems order, every
	// subsystem listed (0 when none).
	Subsystems []SubsystemShare `json:"subsystems"`
	// Functions are the top functions by self share and by total share
	// (union of the TopFunctions first of each), by self share.
	Functions []FunctionShare `json:"functions"`
	// Marks are total shares of named groups of kernel functions the
	// doctor reads: "compaction" (compact_*, isolate_migratepages*,
	// migrate_pages*), "huge_page_clearing" (clear_huge_page,
	// folio_zero_user), "page_faults" (exc_page_fault).
	Marks map[string]float64 `json:"marks,omitempty"`
	// Folded are the most frequent stacks in folded form (frames root
	// first, joined by ";", kernel frames suffixed "_[k]", the process
	// name first), at most TopStacks; FoldedOmitted and
	// FoldedOmittedSamples count the stacks and samples left out.
	// Operations is the profile per key operation of a run (run
	// --profile; AttributeOps), OpAttribution how it was attributed;
	// both absent elsewhere.
	Operations           []OperationProfile `json:"operations,omitempty"`
	OpAttribution        *OpAttribution     `json:"op_attribution,omitempty"`
	Folded               []FoldedStack      `json:"folded,omitempty"`
	FoldedOmitted        int                `json:"folded_omitted,omitempty"`
	FoldedOmittedSamples int                `json:"folded_omitted_samples,omitempty"`
}

// SubsystemShare is one subsystem's samples and share.
type SubsystemShare struct {
	Name     string  `json:"name"`
	Samples  int     `json:"samples"`
	SharePct float64 `json:"share_pct"`
}

// FunctionShare is one function: Self counts samples with it on the CPU
// (the leaf), Total samples with it anywhere on the stack (once per
// sample); Subsystem is its own signature's subsystem ("" if none).
type FunctionShare struct {
	Name      string  `json:"name"`
	Subsystem string  `json:"subsystem,omitempty"`
	Self      int     `json:"self"`
	Total     int     `json:"total"`
	SelfPct   float64 `json:"self_pct"`
	TotalPct  float64 `json:"total_pct"`
}

// FoldedStack is one stack and its sample count.
type FoldedStack struct {
	Stack   string `json:"stack"`
	Samples int    `json:"samples"`
}

// Limits of a Summary.
const (
	TopFunctions = 40
	TopStacks    = 2000
)

// marks are the kernel function groups of Summary.Marks.
var marks = map[string][]string{
	"compaction":         {"compact_*", "isolate_migratepages*", "isolate_freepages*", "migrate_pages*", "try_to_compact_pages"},
	"huge_page_clearing": {"clear_huge_page", "folio_zero_user", "clear_subpage"},
	"page_faults":        {"exc_page_fault"},
}

// Summarize reduces parsed samples: subsystem shares (Classify), self and
// total shares per function, Marks and the folded stacks. roots, event,
// freq and duration (seconds) are recorded as given.
func Summarize(p *Parsed, roots []int, event string, freq int, duration float64) *Summary {
	s := &Summary{Event: event, FrequencyHz: freq, DurationS: math.Round(duration*100) / 100, Roots: roots,
		Processes: len(p.PIDs), Samples: len(p.Samples), HostSamples: p.HostSamples,
		KernelSymbols: p.KernelFrames == 0 || p.KernelUnknown*2 < p.KernelFrames, Marks: map[string]float64{}}
	pct := func(n int) float64 {
		if s.Samples == 0 {
			return 0
		}
		return math.Round(10000*float64(n)/float64(s.Samples)) / 100
	}
	if p.HostSamples > 0 {
		s.HostSharePct = math.Round(10000*float64(s.Samples)/float64(p.HostSamples)) / 100
	}
	subs := map[Frame]frameClass{}
	bySub := map[string]int{}
	self := map[string]int{}
	total := map[string]int{}
	markN := map[string]int{}
	folded := map[string]int{}
	seen := map[string]bool{}
	var b strings.Builder
	for _, smp := range p.Samples {
		bySub[Classify(smp.Stack, subs)]++
		clear(seen)
		for _, f := range smp.Stack {
			if n := f.Name(); !seen[n] {
				seen[n] = true
				total[n]++
			}
		}
		if len(smp.Stack) > 0 {
			self[smp.Stack[len(smp.Stack)-1].Name()]++
		}
		for m, pats := range marks {
			for _, f := range smp.Stack {
				if f.Kernel && match(f.Func, pats) {
					markN[m]++
					break
				}
			}
		}
		folded[smp.fold(&b)]++
	}
	for _, name := range Subsystems {
		s.Subsystems = append(s.Subsystems, SubsystemShare{Name: name, Samples: bySub[name], SharePct: pct(bySub[name])})
	}
	for m := range marks {
		s.Marks[m] = pct(markN[m])
	}
	pick := map[string]bool{}
	for n := range total {
		if strings.HasPrefix(n, "[") {
			delete(total, n) // an unresolved object: its total is the whole stack
		}
	}
	for _, m := range []map[string]int{self, total} {
		for _, n := range topKeys(m, TopFunctions) {
			pick[n] = true
		}
	}
	for n := range pick {
		f := frameOf(n)
		sub, _ := frameSub(f)
		tot := total[n]
		if tot == 0 {
			tot = self[n] // an unresolved object
		}
		s.Functions = append(s.Functions, FunctionShare{Name: n, Subsystem: sub, Self: self[n], Total: tot, SelfPct: pct(self[n]), TotalPct: pct(tot)})
	}
	sort.Slice(s.Functions, func(i, j int) bool {
		a, c := s.Functions[i], s.Functions[j]
		if a.Self != c.Self {
			return a.Self > c.Self
		}
		if a.Total != c.Total {
			return a.Total > c.Total
		}
		return a.Name < c.Name
	})
	keys := topKeys(folded, len(folded))
	for i, k := range keys {
		if i < TopStacks {
			s.Folded = append(s.Folded, FoldedStack{Stack: k, Samples: folded[k]})
			continue
		}
		s.FoldedOmitted++
		s.FoldedOmittedSamples += folded[k]
	}
	return s
}

// fold is the sample's folded stack: the process name, then the frames
// root first, joined by ";".
func (smp *Sample) fold(b *strings.Builder) string {
	b.Reset()
	b.WriteString(smp.Comm)
	for _, f := range smp.Stack {
		b.WriteByte(';')
		b.WriteString(f.Name())
	}
	return b.String()
}

// WriteFolded writes every stack of p in folded form, "stack count" a
// line, most frequent first: the input of FlameGraph's flamegraph.pl,
// speedscope and inferno.
func (p *Parsed) WriteFolded(w io.Writer) error {
	folded := map[string]int{}
	var b strings.Builder
	for i := range p.Samples {
		folded[p.Samples[i].fold(&b)]++
	}
	for _, k := range topKeys(folded, len(folded)) {
		if _, err := fmt.Fprintf(w, "%s %d\n", k, folded[k]); err != nil {
			return fmt.Errorf("folded stacks: %w", err)
		}
	}
	return nil
}

// frameOf turns a Name back into a Frame.
func frameOf(name string) Frame {
	if f, ok := strings.CutSuffix(name, KernelSuffix); ok {
		return Frame{Func: f, Kernel: true}
	}
	return Frame{Func: name}
}

// topKeys returns the n keys of m with the largest values, ties by name.
func topKeys(m map[string]int, n int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys[:min(n, len(keys))]
}

// Share returns the share of subsystem name, 0 when absent.
func (s *Summary) Share(name string) float64 {
	for _, x := range s.Subsystems {
		if x.Name == name {
			return x.SharePct
		}
	}
	return 0
}

// WriteTable prints the subsystem shares and the top n functions by self
// share.
func (s *Summary) WriteTable(w io.Writer, n int) {
	fmt.Fprintf(w, "%d samples of %d server processes in %.1f s at %d Hz (%s); the server had %.1f %% of the host's busy CPU time\n",
		s.Samples, s.Processes, s.DurationS, s.FrequencyHz, s.Event, s.HostSharePct)
	if !s.KernelSymbols {
		fmt.Fprintln(w, "kernel symbols hidden (kernel.kptr_restrict): kernel time is classified by its user-space caller")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "subsystem\tshare %\tsamples\t")
	for _, x := range s.Subsystems {
		fmt.Fprintf(tw, "%s\t%.1f\t%d\t\n", x.Name, x.SharePct, x.Samples)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "self %\ttotal %\tfunction\tsubsystem")
	for i, f := range s.Functions {
		if i >= n {
			break
		}
		fmt.Fprintf(tw, "%.1f\t%.1f\t%s\t%s\n", f.SelfPct, f.TotalPct, f.Name, f.Subsystem)
	}
	tw.Flush()
	if adv := Advice(s); len(adv) > 0 {
		fmt.Fprintln(w)
		for _, a := range adv {
			fmt.Fprintln(w, "hint: "+a)
		}
	}
}

// Read decodes an extra.profile section; nil, nil for an absent one.
func Read(raw json.RawMessage) (*Summary, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s Summary
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("extra.profile: %w", err)
	}
	return &s, nil
}
