package engine

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/big"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Segment is this agent's share of a run split over several load
// machines, in the sense of k6's execution segments: the run is the
// interval [0, 1] of rationals, a segment sequence cuts it into
// consecutive pieces (From, To], and every agent runs its piece. The
// equal split `--segment I/N` is the sequence 0, 1/N, ..., 1 and the
// piece ((I-1)/N, I/N].
//
// Integers (the VUs a stage asks for at any moment, the pool connections)
// are split by striping, as k6's ExecutionSegmentSequenceWrapper does:
// with L the least common denominator of the pieces' lengths, the indices
// 0..L-1 are handed out one by one, each to the first piece (in order of
// length, longest first, ties in sequence order) whose count so far c
// satisfies index >= c*L/length_numerator; the pattern repeats every L.
// Scale(v) is the number of indices below v that the piece owns, so for
// every v the shares of all pieces of the sequence sum to v exactly (no
// VU lost or doubled, at every instant of a ramp), and a piece's count
// never decreases as v grows. Rates (arrivals per second) are multiplied
// by the piece's length: superposed Poisson streams are a Poisson stream
// of the summed rate.
//
// The zero value and nil are the whole run.
type Segment struct {
	// Index is the piece's position in the sequence, from 0; Count the
	// number of pieces.
	Index, Count int
	// From and To bound the piece (rationals in [0, 1], From < To).
	From, To *big.Rat
	// Sequence is the whole sequence's points, "0,1/3,2/3,1".
	Sequence string

	lcd   int64
	owned []int64 // indices in [0, lcd) that the piece owns, ascending
}

// maxLCD bounds the striping period of a sequence (its pieces' least
// common denominator): beyond it the table costs more than it is worth.
const maxLCD = 1 << 20

// ParseSegment parses `--segment I/N` (1-based: 2/3 is the second third)
// or `auto/N`, where I is $JOB_COMPLETION_INDEX + 1 (a Kubernetes
// Indexed Job's pod index, read through getenv). Errors are one line.
func ParseSegment(s string, getenv func(string) string) (*Segment, error) {
	is, ns, ok := strings.Cut(strings.TrimSpace(s), "/")
	n, err := strconv.Atoi(ns)
	if !ok || err != nil || n < 1 {
		return nil, fmt.Errorf("--segment %q: want I/N with N >= 1 (e.g. 2/3) or auto/N", s)
	}
	if n > maxLCD {
		return nil, fmt.Errorf("--segment %q: at most %d segments", s, maxLCD)
	}
	var i int
	if is == "auto" {
		if getenv == nil {
			getenv = os.Getenv
		}
		v, present := getenv("JOB_COMPLETION_INDEX"), true
		if v == "" {
			present = false
		}
		k, err := strconv.Atoi(v)
		switch {
		case !present:
			return nil, fmt.Errorf("--segment %s: JOB_COMPLETION_INDEX is not set (auto takes the index of a Kubernetes Indexed Job's pod)", s)
		case err != nil || k < 0 || k >= n:
			return nil, fmt.Errorf("--segment %s: JOB_COMPLETION_INDEX=%q is not a number in 0..%d", s, v, n-1)
		}
		i = k + 1
	} else if i, err = strconv.Atoi(is); err != nil || i < 1 || i > n {
		return nil, fmt.Errorf("--segment %q: I must be a whole number in 1..%d", s, n)
	}
	points := make([]*big.Rat, n+1)
	for k := range points {
		points[k] = big.NewRat(int64(k), int64(n))
	}
	return newSegment(points, i-1)
}

// ParseExecutionSegment parses k6's `--execution-segment a:b` with its
// `--execution-segment-sequence p0,p1,...,pn` (rationals such as 1/3,
// 0.5 or 25%; an empty sequence is 0,a,b,1 without the empty pieces).
// The sequence must start at 0, end at 1, increase, and hold a:b as one
// of its pieces.
func ParseExecutionSegment(seg, seq string) (*Segment, error) {
	as, bs, ok := strings.Cut(strings.TrimSpace(seg), ":")
	if !ok {
		return nil, fmt.Errorf("--execution-segment %q: want a:b, e.g. 1/3:2/3", seg)
	}
	a, err := parseRat(as)
	if err != nil {
		return nil, fmt.Errorf("--execution-segment %q: %w", seg, err)
	}
	b, err := parseRat(bs)
	if err != nil {
		return nil, fmt.Errorf("--execution-segment %q: %w", seg, err)
	}
	if a.Sign() < 0 || a.Cmp(b) >= 0 || b.Cmp(big.NewRat(1, 1)) > 0 {
		return nil, fmt.Errorf("--execution-segment %q: want 0 <= a < b <= 1", seg)
	}
	var points []*big.Rat
	if strings.TrimSpace(seq) == "" {
		points = append(points, new(big.Rat))
		if a.Sign() > 0 {
			points = append(points, a)
		}
		points = append(points, b)
		if b.Cmp(big.NewRat(1, 1)) < 0 {
			points = append(points, big.NewRat(1, 1))
		}
	} else {
		for _, p := range strings.Split(seq, ",") {
			r, err := parseRat(p)
			if err != nil {
				return nil, fmt.Errorf("--execution-segment-sequence %q: %w", seq, err)
			}
			points = append(points, r)
		}
	}
	if len(points) < 2 || points[0].Sign() != 0 || points[len(points)-1].Cmp(big.NewRat(1, 1)) != 0 {
		return nil, fmt.Errorf("--execution-segment-sequence %q: must run from 0 to 1", seq)
	}
	index := -1
	for k := 1; k < len(points); k++ {
		if points[k-1].Cmp(points[k]) >= 0 {
			return nil, fmt.Errorf("--execution-segment-sequence %q: points must increase", seq)
		}
		if points[k-1].Cmp(a) == 0 && points[k].Cmp(b) == 0 {
			index = k - 1
		}
	}
	if index < 0 {
		return nil, fmt.Errorf("--execution-segment %q is not a piece of the sequence %q", seg, seq)
	}
	return newSegment(points, index)
}

func parseRat(s string) (*big.Rat, error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		r, ok := new(big.Rat).SetString(p)
		if !ok {
			return nil, fmt.Errorf("%q is not a number", s)
		}
		return r.Quo(r, big.NewRat(100, 1)), nil
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("%q is not a number, fraction or percentage", s)
	}
	return r, nil
}

// newSegment builds piece index of the sequence points (0 = p0 < ... <
// pn = 1) with its striping table.
func newSegment(points []*big.Rat, index int) (*Segment, error) {
	n := len(points) - 1
	lengths := make([]*big.Rat, n)
	lcd := big.NewInt(1)
	for k := range lengths {
		lengths[k] = new(big.Rat).Sub(points[k+1], points[k])
		d := lengths[k].Denom()
		g := new(big.Int).GCD(nil, nil, lcd, d)
		lcd.Mul(lcd, new(big.Int).Quo(d, g))
		if lcd.Cmp(big.NewInt(maxLCD)) > 0 {
			return nil, fmt.Errorf("execution segment sequence: the pieces' common denominator exceeds %d", maxLCD)
		}
	}
	L := lcd.Int64()
	nums := make([]int64, n) // lengths as numerators over L
	for k, l := range lengths {
		nums[k] = l.Num().Int64() * (L / l.Denom().Int64())
	}
	order := make([]int, n)
	for k := range order {
		order[k] = k
	}
	sort.SliceStable(order, func(x, y int) bool { return nums[order[x]] > nums[order[y]] })
	chosen := make([]int64, n)
	var owned []int64
	for i := int64(0); i < L; i++ {
		for _, k := range order {
			// i >= ceil(chosen*L/num): the piece is due its next index.
			if i*nums[k] >= chosen[k]*L {
				chosen[k]++
				if k == index {
					owned = append(owned, i)
				}
				break
			}
		}
	}
	var seq []string
	for _, p := range points {
		seq = append(seq, p.RatString())
	}
	return &Segment{
		Index: index, Count: n, From: points[index], To: points[index+1],
		Sequence: strings.Join(seq, ","), lcd: L, owned: owned,
	}, nil
}

// Whole reports whether s is the whole run (nil, or the only piece).
func (s *Segment) Whole() bool { return s == nil || s.Count <= 1 }

// String is "I/N" for the equal split, else "a:b of p0,...,pn"; "1/1"
// for the whole run.
func (s *Segment) String() string {
	if s.Whole() {
		return "1/1"
	}
	if s.equal() {
		return fmt.Sprintf("%d/%d", s.Index+1, s.Count)
	}
	return s.From.RatString() + ":" + s.To.RatString() + " of " + s.Sequence
}

// equal reports whether s is a piece of the equal split into Count.
func (s *Segment) equal() bool {
	return s.lcd == int64(s.Count) && s.From.Cmp(big.NewRat(int64(s.Index), int64(s.Count))) == 0
}

// Length is To - From as a float (1 for the whole run).
func (s *Segment) Length() float64 {
	if s.Whole() {
		return 1
	}
	f, _ := new(big.Rat).Sub(s.To, s.From).Float64()
	return f
}

// Scale is the piece's share of v indivisible things (VUs, connections):
// the number of indices in [0, v) it owns. Over the pieces of the
// sequence the shares sum to v; v <= 0 gives 0.
func (s *Segment) Scale(v int) int {
	if s.Whole() || v <= 0 {
		return max(v, 0)
	}
	q, r := int64(v)/s.lcd, int64(v)%s.lcd
	n := q * int64(len(s.owned))
	for _, o := range s.owned {
		if o >= r {
			break
		}
		n++
	}
	return int(n)
}

// Global is the run-wide index (from 0) of the piece's k-th thing (from
// 0): the k-th index it owns. Distinct pieces never share one.
func (s *Segment) Global(k int) int {
	if s.Whole() {
		return k
	}
	m := len(s.owned)
	return int(int64(k/m)*s.lcd + s.owned[k%m])
}

// Seed derives the piece's seed of a stream that all pieces would
// otherwise share (the open model's arrivals): the run seed itself for
// the whole run, else a hash of it with the sequence and the piece.
func (s *Segment) Seed(seed uint64) uint64 {
	if s.Whole() {
		return seed
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|%s|%d", seed, s.Sequence, s.Index)
	return h.Sum64()
}

// ErrNoShare is returned by CheckShare when the segment would get
// nothing of a profile.
var ErrNoShare = errors.New("segment gets no share")

// CheckShare verifies that the piece gets at least one VU of the
// profile's largest stage target maxVUs, and at least one pool
// connection when connections > 0 (0 is a connection per VU).
func (s *Segment) CheckShare(maxVUs, connections int) error {
	if s.Whole() {
		return nil
	}
	if s.Scale(maxVUs) < 1 {
		return fmt.Errorf("%w: segment %s gets none of the profile's %d VUs; use fewer segments or more VUs", ErrNoShare, s, maxVUs)
	}
	if connections > 0 && s.Scale(connections) < 1 {
		return fmt.Errorf("%w: segment %s gets none of the %d pool connections; give --connections at least %d", ErrNoShare, s, connections, s.Count)
	}
	return nil
}
