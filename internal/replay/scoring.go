package replay

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/erplab/erplab/internal/capture"
	"github.com/erplab/erplab/internal/record"
	"github.com/erplab/erplab/internal/rewrite"
)

// group is one key operation the replay scores.
type group struct {
	name     string
	by       string // "operation", "targets" or "fingerprint"
	target   time.Duration
	targetBy string
	captured *hdrhistogram.Histogram // captured durations of successes, µs
}

// grouper assigns statements to groups, in priority: the event's
// Operation (the journal's Context), the first target whose pattern or
// fingerprint matches, the fingerprint of the normalized statement.
type grouper struct {
	targets []Target
	byName  map[string]int
	byText  map[string]int // statement text -> group, for the last two rules
	byFP    map[string]int // fingerprint -> group, named by its first text
	groups  []group
}

// groupSteps gives every scored step (query, execute, copy) its group.
func (p *plan) groupSteps(opts Options) {
	g := &grouper{targets: opts.Targets, byName: map[string]int{}, byText: map[string]int{}, byFP: map[string]int{}}
	for _, s := range p.sessions {
		for i := range s.steps {
			st := &s.steps[i]
			if !st.statement() || st.ev.Kind == capture.KindPrepare {
				continue
			}
			st.group = g.assign(st)
			if d := st.ev.Duration; d > 0 && st.ev.SQLState == "" {
				h := g.groups[st.group].captured
				_ = h.RecordValue(min(d, h.HighestTrackableValue()))
			}
		}
	}
	for i := range g.groups {
		g.groups[i].target, g.groups[i].targetBy = g.target(&g.groups[i], opts.Target)
	}
	p.groups = g.groups
}

// assign returns st's group, making it on first use.
func (g *grouper) assign(st *step) int {
	if op := st.ev.Operation; op != "" {
		return g.named(op, "operation")
	}
	if i, ok := g.byText[st.sql]; ok {
		return i
	}
	fp, fpErr := rewrite.Fingerprint(st.sql)
	i := -1
	for _, t := range g.targets {
		if t.matches(st.sql, fp) {
			i = g.named(t.Name, "targets")
			break
		}
	}
	if i < 0 {
		i = g.fingerprinted(st.sql, fp, fpErr)
	}
	g.byText[st.sql] = i
	return i
}

// named returns the group of that name, made on first use.
func (g *grouper) named(name, by string) int {
	if i, ok := g.byName[name]; ok {
		return i
	}
	g.groups = append(g.groups, group{name: name, by: by, captured: hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)})
	g.byName[name] = len(g.groups) - 1
	return len(g.groups) - 1
}

// fingerprinted returns the group of a fingerprint, named after the
// first text seen with it.
func (g *grouper) fingerprinted(sql, fp string, fpErr error) int {
	if fpErr == nil {
		if i, ok := g.byFP[fp]; ok {
			return i
		}
	}
	i := g.named(fingerprintName(sql, fp, fpErr), "fingerprint")
	if fpErr == nil {
		g.byFP[fp] = i
	}
	return i
}

// target is a group's APDEX T: a target of its name, else the option,
// else its captured p95 rounded to a whole millisecond (at least 1 ms),
// else DefaultTarget.
func (g *grouper) target(gr *group, option time.Duration) (time.Duration, string) {
	for _, t := range g.targets {
		if t.Name == gr.name && t.T > 0 {
			return t.T, "targets"
		}
	}
	if option > 0 {
		return option, "option"
	}
	if gr.captured.TotalCount() > 0 {
		ms := math.Round(float64(gr.captured.ValueAtQuantile(95)) / 1000)
		return time.Duration(max(ms, 1)) * time.Millisecond, "captured p95"
	}
	return DefaultTarget, "default"
}

// fingerprintName names a group of statements that share a fingerprint:
// the first words of the normalized statement and the fingerprint's first
// 8 digits ("UPDATE pgbench_accounts SET abalance #1f2e3d4c"); a text the
// parser refuses is named by a hash of the text itself ("unparsed #...").
func fingerprintName(sql, fp string, fpErr error) string {
	if fpErr != nil {
		sum := sha256.Sum256([]byte(sql))
		return "unparsed #" + hex.EncodeToString(sum[:4])
	}
	norm, err := rewrite.Normalize(sql)
	if err != nil {
		norm = sql
	}
	words := strings.Fields(norm)
	if len(words) > nameWords {
		words = words[:nameWords]
	}
	head := strings.Join(words, " ")
	if len(head) > nameBytes {
		head = strings.ToValidUTF8(head[:nameBytes], "")
	}
	if head == "" {
		head = "empty"
	}
	return head + " #" + fp[:min(8, len(fp))]
}

// A fingerprint group's name holds at most nameWords words and nameBytes
// bytes of the normalized statement.
const (
	nameWords = 4
	nameBytes = 48
)

// opInfos are the groups as the recorder's operations (priority 1 each:
// every key operation counts equally in the integral APDEX).
// groupNames are the groups' names, by index.
func (p *plan) groupNames() []string {
	out := make([]string, len(p.groups))
	for i, g := range p.groups {
		out[i] = g.name
	}
	return out
}

func (p *plan) opInfos() []record.OpInfo {
	out := make([]record.OpInfo, len(p.groups))
	for i, g := range p.groups {
		out[i] = record.OpInfo{Name: g.name, Target: g.target, Priority: 1}
	}
	return out
}
