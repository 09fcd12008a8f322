package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/erplab/erplab/internal/exitcode"
)

// ErrIncomplete is wrapped by Merge's error when the set of segments is
// incomplete (a piece missing, or one marked incomplete) and partial
// merges were not allowed. It carries exitcode.ResultsIncomplete.
var ErrIncomplete = exitcode.New(exitcode.ResultsIncomplete, "incomplete set of segments")

// MergeOptions tune Merge.
type MergeOptions struct {
	// AllowPartial merges an incomplete set (pieces missing or marked
	// incomplete): the document says so (Merged.Partial, Missing, and
	// a status "partial: ...").
	AllowPartial bool
	// Files names the documents, in the order given, for the merged
	// document's segments[].file (optional).
	Files []string
}

// Merge makes one run's document from the documents of its segments
// (erplab run --segment; see the "Merge" section of the package doc). It
// refuses, in a one-line error: a document without a segment, or of
// another run id, configuration hash or segment sequence than the first
// (a foreign segment); a piece given twice; pieces that overlap or leave
// a gap; a missing or incomplete piece (wrapping ErrIncomplete) unless
// opts.AllowPartial; a histogram that does not decode; a section of extra
// that must be the same in every segment (experiment, remedies) and is
// not, or one that is not JSON.
func Merge(docs []*Document, opts MergeOptions) (*Document, error) {
	if len(docs) == 0 {
		return nil, errors.New("merge: no segment documents")
	}
	name := func(i int) string {
		if i < len(opts.Files) && opts.Files[i] != "" {
			return opts.Files[i]
		}
		return fmt.Sprintf("document %d", i+1)
	}
	first := docs[0]
	firstSrv := serverOf(first)
	order := make([]int, len(docs))
	for i, d := range docs {
		order[i] = i
		switch {
		case d.Segment == nil:
			return nil, fmt.Errorf("merge: %s is not a segment of a run (no segment: written without erplab run --segment)", name(i))
		case d.RunID != first.RunID:
			return nil, fmt.Errorf("merge: %s is segment %s of run %q, not of run %q (%s): a foreign segment", name(i), d.Segment.Label(), d.RunID, first.RunID, name(0))
		case d.ConfigHash != first.ConfigHash:
			return nil, fmt.Errorf("merge: %s (segment %s) ran another configuration (%s) than %s (%s): agents must be given the same options", name(i), d.Segment.Label(), d.ConfigHash, name(0), first.ConfigHash)
		case d.Segment.Sequence != first.Segment.Sequence:
			return nil, fmt.Errorf("merge: %s is a piece of the sequence %s, %s of %s", name(i), d.Segment.Sequence, name(0), first.Segment.Sequence)
		}
		if how := serverOf(d).differs(firstSrv); how != "" {
			return nil, fmt.Errorf("merge: %s (segment %s) ran against another server than %s (segment %s): %s: a foreign segment", name(i), d.Segment.Label(), name(0), first.Segment.Label(), how)
		}
	}
	rat := func(i int, s string) (*big.Rat, error) {
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			return nil, fmt.Errorf("merge: %s: segment bound %q is not a rational", name(i), s)
		}
		return r, nil
	}
	froms, tos := make([]*big.Rat, len(docs)), make([]*big.Rat, len(docs))
	for i, d := range docs {
		var err error
		if froms[i], err = rat(i, d.Segment.From); err != nil {
			return nil, err
		}
		if tos[i], err = rat(i, d.Segment.To); err != nil {
			return nil, err
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		if c := froms[order[a]].Cmp(froms[order[b]]); c != 0 {
			return c < 0
		}
		return tos[order[a]].Cmp(tos[order[b]]) < 0
	})
	// Attempts of one piece: a restart with its earlier attempts leaves
	// the piece incomplete (one attempt is used); the same piece twice
	// without a restart is refused.
	var (
		used       []int
		missing    []string
		incomplete []string
		notes      []string
		at         = new(big.Rat)
		samePiece  = func(a, b int) bool { return froms[a].Cmp(froms[b]) == 0 && tos[a].Cmp(tos[b]) == 0 }
	)
	for k := 0; k < len(order); {
		g := k + 1
		for g < len(order) && samePiece(order[k], order[g]) {
			g++
		}
		attempts := slices.Clone(order[k:g])
		k = g
		slices.SortStableFunc(attempts, func(a, b int) int { // in attempt order
			if c := docs[a].Segment.Restart - docs[b].Segment.Restart; c != 0 {
				return c
			}
			return docs[a].StartedAt.Compare(docs[b].StartedAt)
		})
		i := attempts[0]
		if len(attempts) > 1 {
			restart := -1
			for _, a := range attempts {
				if isRestart(docs[a].Segment) {
					restart = a
				}
			}
			if restart < 0 {
				return nil, fmt.Errorf("merge: segment %s is given twice (%s and %s)", docs[i].Segment.Label(), name(attempts[0]), name(attempts[1]))
			}
			i = pickAttempt(docs, attempts)
			var restartNames, left []string
			for _, a := range attempts {
				restartNames = append(restartNames, name(a))
				if a != i {
					left = append(left, name(a))
				}
			}
			incomplete = append(incomplete, fmt.Sprintf("segment %s restarted (%d attempts: %s)", docs[i].Segment.Label(), len(attempts), strings.Join(restartNames, ", ")))
			why := "the latest, none completed"
			if docs[i].Status == StatusCompleted {
				why = "completed"
			}
			notes = append(notes, fmt.Sprintf("segment %s: used the attempt %s (%s), left out %s", docs[i].Segment.Label(), name(i), why, strings.Join(left, ", ")))
		}
		d := docs[i]
		switch c := froms[i].Cmp(at); {
		case c < 0:
			return nil, fmt.Errorf("merge: segments overlap: %s (%s:%s) starts before the previous piece ends at %s", name(i), d.Segment.From, d.Segment.To, at.RatString())
		case c > 0:
			missing = append(missing, missingPieces(at, froms[i], d.Segment)...)
		}
		at = tos[i]
		used = append(used, i)
		var why []string
		for _, r := range d.Segment.Incomplete {
			if len(attempts) == 1 || !strings.HasPrefix(r, restartedPrefix) {
				why = append(why, r)
			}
		}
		if d.Status != StatusCompleted && !slices.Contains(why, "run "+string(d.Status)) {
			// e.g. a killed agent's stream, rebuilt by Read
			why = append(why, "run "+string(d.Status))
		}
		if len(why) > 0 {
			incomplete = append(incomplete, fmt.Sprintf("segment %s %s", d.Segment.Label(), strings.Join(why, "; ")))
		}
	}
	if one := big.NewRat(1, 1); at.Cmp(one) < 0 {
		missing = append(missing, missingPieces(at, one, first.Segment)...)
	} else if at.Cmp(one) > 0 {
		return nil, fmt.Errorf("merge: segments end at %s, after 1", at.RatString())
	}
	if !opts.AllowPartial {
		if len(missing) > 0 {
			also := ""
			if len(incomplete) > 0 {
				also = "; " + strings.Join(incomplete, ", ")
			}
			return nil, fmt.Errorf("merge: %w: %s of run %q missing (%d of %d segments given: %s)%s; --allow-partial merges what is there",
				ErrIncomplete, segmentsWord(missing), first.RunID, len(used), first.Segment.Count, givenLabels(docs, used, name), also)
		}
		if len(incomplete) > 0 {
			return nil, fmt.Errorf("merge: %w: %s; --allow-partial merges it anyway", ErrIncomplete, strings.Join(incomplete, ", "))
		}
	}

	sorted := make([]*Document, len(used))
	for k, i := range used {
		sorted[k] = docs[i]
	}
	out, err := mergeDocs(sorted)
	if err != nil {
		return nil, fmt.Errorf("merge: %w", err)
	}
	out.RunID, out.ConfigHash = first.RunID, first.ConfigHash
	usedNames := make([]string, len(used))
	for k, i := range used {
		usedNames[k] = name(i)
	}
	extra, perSegment, extraNotes, err := mergeExtra(sorted, usedNames)
	if err != nil {
		return nil, fmt.Errorf("merge: %w", err)
	}
	out.Extra = extra
	mi := &MergeInfo{Count: first.Segment.Count, Missing: missing, Partial: len(missing) > 0 || len(incomplete) > 0, Notes: append(notes, extraNotes...)}
	hosts := hostFacts(sorted)
	for k, i := range used {
		d := sorted[k]
		s := MergedSegment{SegmentInfo: *d.Segment, File: fileOf(opts.Files, i), Status: d.Status, Agent: d.Agent, Extra: perSegment[k]}
		if hosts != nil {
			s.HostFacts = hosts[k]
		}
		mi.Segments = append(mi.Segments, s)
	}
	out.Merged = mi
	out.Status = StatusCompleted
	if mi.Partial {
		// Every segment whose status is not completed is in incomplete.
		var why []string
		if len(missing) > 0 {
			why = append(why, segmentsWord(missing)+" missing")
		}
		why = append(why, incomplete...)
		out.Status = StatusPartial.Because(strings.Join(why, "; "))
	}
	if why, failed := AllFailed(out.Operations); failed {
		// the merged run failed, as each of its segments did
		out.Status = StatusFailed.Because(why)
	}
	return out, nil
}

// restartedPrefix begins the incomplete reason of a restarted attempt
// (erplab run --segment; documents before SegmentInfo.Restart have only
// this).
const restartedPrefix = "restarted:"

// isRestart reports whether the attempt is a restart of its segment.
func isRestart(s *SegmentInfo) bool {
	if s.Restart > 0 {
		return true
	}
	for _, r := range s.Incomplete {
		if strings.HasPrefix(r, restartedPrefix) {
			return true
		}
	}
	return false
}

// pickAttempt chooses the attempt of a restarted segment to merge: the
// latest completed one (status "completed") if any, else the latest;
// latest is the highest Restart number, then the latest start.
func pickAttempt(docs []*Document, attempts []int) int {
	best := -1
	better := func(a, b int) bool { // a after b
		da, db := docs[a], docs[b]
		if ca, cb := da.Status == StatusCompleted, db.Status == StatusCompleted; ca != cb {
			return ca
		}
		if da.Segment.Restart != db.Segment.Restart {
			return da.Segment.Restart > db.Segment.Restart
		}
		return da.StartedAt.After(db.StartedAt)
	}
	for _, a := range attempts {
		if best < 0 || better(a, best) {
			best = a
		}
	}
	return best
}

// serverIdentity is what a document records of the server it ran
// against (environment.server): the cluster's system identifier and the
// database; empty fields are unknown (older documents, a role that may
// not execute pg_control_system).
type serverIdentity struct{ sysID, db string }

func serverOf(d *Document) serverIdentity {
	var env struct {
		Server struct {
			SystemIdentifier string `json:"system_identifier"`
			Database         string `json:"database"`
		} `json:"server"`
	}
	if len(d.Environment) > 0 {
		_ = json.Unmarshal(d.Environment, &env) // an unreadable environment is unknown
	}
	return serverIdentity{env.Server.SystemIdentifier, env.Server.Database}
}

// differs says how s differs from o ("" when the same or unknown): the
// address that reaches a server may differ per agent, its system
// identifier and database may not.
func (s serverIdentity) differs(o serverIdentity) string {
	var how []string
	if s.sysID != "" && o.sysID != "" && s.sysID != o.sysID {
		how = append(how, fmt.Sprintf("system identifier %s, not %s", s.sysID, o.sysID))
	}
	if s.db != "" && o.db != "" && s.db != o.db {
		how = append(how, fmt.Sprintf("database %q, not %q", s.db, o.db))
	}
	return strings.Join(how, ", ")
}

func fileOf(files []string, i int) string {
	if i < len(files) {
		return files[i]
	}
	return ""
}

// missingPieces names the pieces of s's sequence in the gap [from, to]
// that no document covers: "I/N" for each piece of the sequence inside
// it (its index), "from:to" for a part of the gap no piece bounds (a
// sequence that does not parse, or segments of another split).
func missingPieces(from, to *big.Rat, s *SegmentInfo) []string {
	var points []*big.Rat
	for _, p := range strings.Split(s.Sequence, ",") {
		r, ok := new(big.Rat).SetString(strings.TrimSpace(p))
		if !ok {
			points = nil
			break
		}
		points = append(points, r)
	}
	if len(points) < 2 {
		// the equal split of s.Count pieces
		points = points[:0]
		for k := 0; k <= s.Count; k++ {
			points = append(points, big.NewRat(int64(k), int64(max(s.Count, 1))))
		}
	}
	var out []string
	at := from
	for k := 0; k+1 < len(points); k++ {
		lo, hi := points[k], points[k+1]
		if lo.Cmp(at) < 0 || hi.Cmp(to) > 0 {
			continue
		}
		if lo.Cmp(at) > 0 {
			out = append(out, at.RatString()+":"+lo.RatString())
		}
		out = append(out, fmt.Sprintf("%d/%d", k+1, len(points)-1))
		at = hi
	}
	if at.Cmp(to) < 0 {
		out = append(out, at.RatString()+":"+to.RatString())
	}
	return out
}

// segmentsWord is "segment 2/3" or "segments 2/3 and 3/3" (or
// "segments 1/4, 2/4 and 4/4").
func segmentsWord(pieces []string) string {
	if len(pieces) == 1 {
		return "segment " + pieces[0]
	}
	return "segments " + strings.Join(pieces[:len(pieces)-1], ", ") + " and " + pieces[len(pieces)-1]
}

// givenLabels lists the pieces merged and where each came from:
// "1/3 (a.json), 3/3 (c.json)".
func givenLabels(docs []*Document, used []int, name func(int) string) string {
	var out []string
	for _, i := range used {
		out = append(out, fmt.Sprintf("%s (%s)", docs[i].Segment.Label(), name(i)))
	}
	return strings.Join(out, ", ")
}

// addCounts adds src's counts (by SQLSTATE) to dst, made when needed.
func addCounts(dst, src map[string]int64) map[string]int64 {
	for k, v := range src {
		if dst == nil {
			dst = map[string]int64{}
		}
		dst[k] += v
	}
	return dst
}

// histMerger merges encoded histograms (the zero value holds none).
type histMerger struct{ h *hdrhistogram.Histogram }

func (m *histMerger) add(enc, field string) error {
	if enc == "" {
		return nil
	}
	h, err := hdrhistogram.Decode([]byte(enc))
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	if m.h == nil {
		m.h = h
	} else {
		m.h.Merge(h)
	}
	return nil
}

func (m *histMerger) summary() Latency {
	if m.h == nil {
		return Latency{}
	}
	return Summarize(m.h)
}

func (m *histMerger) encoded() string {
	if m.h == nil {
		return ""
	}
	enc, err := m.h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return ""
	}
	return string(enc)
}

// mergeDocs adds the documents (pieces in sequence order): operations by
// name in the first document's order, series by interval index.
func mergeDocs(docs []*Document) (*Document, error) {
	first := docs[0]
	out := &Document{
		Format: Format, Schema: SchemaVersion, Version: first.Version, CommandLine: first.CommandLine,
		Workload: first.Workload, StartedAt: first.StartedAt, EndedAt: first.EndedAt,
		Environment: first.Environment, Parameters: first.Parameters,
	}
	type opAcc struct {
		res                   OpResult
		resp, wait, db, lag   histMerger
		hasWait, hasDB, exact bool
	}
	var names []string
	accs := map[string]*opAcc{}
	for _, d := range docs {
		if d.StartedAt.Before(out.StartedAt) {
			out.StartedAt = d.StartedAt
		}
		if d.EndedAt.After(out.EndedAt) {
			out.EndedAt = d.EndedAt
		}
		out.Totals.ScoredSeconds = max(out.Totals.ScoredSeconds, d.Totals.ScoredSeconds)
		out.Totals.BacklogLeft += d.Totals.BacklogLeft
		out.Totals.AbortedVUs += d.Totals.AbortedVUs
		out.ServerUnresponsive = append(out.ServerUnresponsive, d.ServerUnresponsive...)
		if d.StreamError != "" && out.StreamError == "" {
			out.StreamError = fmt.Sprintf("segment %s: %s", d.Segment.Label(), d.StreamError)
		}
		for _, op := range d.Operations {
			a := accs[op.Name]
			if a == nil {
				a = &opAcc{res: OpResult{Name: op.Name, TargetMs: op.TargetMs, Priority: op.Priority}, hasWait: true, hasDB: true, exact: true}
				accs[op.Name] = a
				names = append(names, op.Name)
			}
			r := &a.res
			r.Count += op.Count
			r.Errors += op.Errors
			r.Skipped += op.Skipped
			r.Late += op.Late
			r.Retries += op.Retries
			r.Retried += op.Retried
			r.WarmupCount += op.WarmupCount
			r.WarmupErrors += op.WarmupErrors
			r.WarmupSkipped += op.WarmupSkipped
			r.Zones.Merge(op.Zones)
			r.ErrorsBySQLState = addCounts(r.ErrorsBySQLState, op.ErrorsBySQLState)
			for code, msg := range op.ErrorExamples { // the first segment's example wins
				if _, ok := r.ErrorExamples[code]; !ok {
					if r.ErrorExamples == nil {
						r.ErrorExamples = map[string]string{}
					}
					r.ErrorExamples[code] = msg
				}
			}
			if op.CutShort != nil {
				if r.CutShort == nil {
					r.CutShort = &CutShort{}
				}
				c := r.CutShort
				c.Frustrated += op.CutShort.Frustrated
				c.NotScored += op.CutShort.NotScored
				c.FrustratedMaxMs = max(c.FrustratedMaxMs, op.CutShort.FrustratedMaxMs)
				c.NotScoredMaxMs = max(c.NotScoredMaxMs, op.CutShort.NotScoredMaxMs)
			}
			field := fmt.Sprintf("segment %s: operations[%q]", d.Segment.Label(), op.Name)
			if op.Histogram == "" && op.Count > op.Errors {
				a.exact = false
			}
			if err := a.resp.add(op.Histogram, field+".histogram_us"); err != nil {
				return nil, err
			}
			if op.PoolWaitHistogram == "" && op.Count > op.Errors {
				a.hasWait = false
			}
			if op.DBHistogram == "" && op.Count > op.Errors {
				a.hasDB = false
			}
			if err := a.wait.add(op.PoolWaitHistogram, field+".pool_wait_histogram_us"); err != nil {
				return nil, err
			}
			if err := a.db.add(op.DBHistogram, field+".db_histogram_us"); err != nil {
				return nil, err
			}
			if err := a.lag.add(op.LagHistogram, field+".lag_histogram_us"); err != nil {
				return nil, err
			}
		}
	}
	scored := out.Totals.ScoredSeconds
	for _, n := range names {
		a := accs[n]
		r := a.res
		r.Apdex = r.Zones.Score(time.Duration(r.TargetMs * float64(time.Millisecond)))
		if a.exact {
			r.Response, r.Histogram = a.resp.summary(), a.resp.encoded()
		}
		if a.hasWait {
			r.PoolWait, r.PoolWaitHistogram = a.wait.summary(), a.wait.encoded()
		}
		if a.hasDB {
			r.DB, r.DBHistogram = a.db.summary(), a.db.encoded()
		}
		r.Lag, r.LagHistogram = a.lag.summary(), a.lag.encoded()
		if scored > 0 {
			r.PerSecond = float64(r.Count) / scored
		}
		out.Operations = append(out.Operations, r)
		out.Totals.AddOp(r)
	}
	if scored > 0 {
		out.Totals.PerSecond = float64(out.Totals.Count) / scored
	}
	v, ok := Integral(out.Operations)
	out.Integral = NewIntegralScore(v, ok)
	sort.SliceStable(out.ServerUnresponsive, func(i, j int) bool { return out.ServerUnresponsive[i].FromS < out.ServerUnresponsive[j].FromS })
	series, err := mergeSeries(docs)
	if err != nil {
		return nil, err
	}
	out.Series = series
	if out.Stages, err = StageFigures(out); err != nil {
		return nil, err
	}
	return out, nil
}

// seriesSpan is series[k]'s span_s, 0 past the series' end.
func (d *Document) seriesSpan(k int) float64 {
	if k >= len(d.Series) {
		return 0
	}
	return d.Series[k].SpanS
}

// mergeSeries adds the documents' intervals of the same index (the
// agents started together at the barrier, on the same interval): gauges
// are summed (PoolWaitersMax and BacklogMax as the sum of the agents'
// maxima, an upper bound), T is the latest, operations merge their
// counts, zones, errors and histograms.
func mergeSeries(docs []*Document) ([]Interval, error) {
	n := 0
	for _, d := range docs {
		n = max(n, len(d.Series))
	}
	out := make([]Interval, n)
	for k := range out {
		iv := &out[k]
		iv.Ops = map[string]OpInterval{}
		hists := map[string]*histMerger{}
		for _, d := range docs {
			if k >= len(d.Series) {
				continue
			}
			s := d.Series[k]
			if s.SpanS != docs[0].seriesSpan(k) {
				return nil, fmt.Errorf("segment %s: series[%d]: thinned differently from segment %s (span_s %g, not %g): the segments' soaks folded different intervals (a warning in one only); merge their full-resolution streams (X.jsonl) instead", d.Segment.Label(), k, docs[0].Segment.Label(), s.SpanS, docs[0].seriesSpan(k))
			}
			iv.T = max(iv.T, s.T)
			iv.SpanS = max(iv.SpanS, s.SpanS)
			iv.Warmup = iv.Warmup || s.Warmup
			iv.VUs += s.VUs
			iv.PoolWaiters += s.PoolWaiters
			iv.PoolWaitersMax += s.PoolWaitersMax
			iv.InFlight += s.InFlight
			iv.Count += s.Count
			iv.Errors += s.Errors
			iv.Backlog += s.Backlog
			iv.BacklogMax += s.BacklogMax
			iv.Skipped += s.Skipped
			iv.Late += s.Late
			for name, oi := range s.Ops {
				m := iv.Ops[name]
				addOpInterval(&m, oi)
				h := hists[name]
				if h == nil {
					h = &histMerger{}
					hists[name] = h
				}
				if err := h.add(oi.Histogram, fmt.Sprintf("segment %s: series[%d].ops[%q].histogram_us", d.Segment.Label(), k, name)); err != nil {
					return nil, err
				}
				iv.Ops[name] = m
			}
		}
		for name, h := range hists {
			m := iv.Ops[name]
			if h.h != nil && h.h.TotalCount() > 0 {
				l := h.summary()
				m.P50, m.P95, m.P99, m.Max = l.P50, l.P95, l.P99, l.Max
				m.Histogram = h.encoded()
			}
			iv.Ops[name] = m
		}
	}
	return out, nil
}
