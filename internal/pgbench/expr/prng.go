package expr

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// PRNG is PostgreSQL's pseudo-random generator (src/common/pg_prng.c):
// xoroshiro128** 1.0 seeded through splitmix64. It is what pgbench uses for
// every random draw (the random* functions, script choice, --rate delays,
// --sampling-rate). The zero value is not a valid state: use NewPRNG.
// A PRNG is not safe for concurrent use.
type PRNG struct{ s [2]uint64 }

// NewPRNG returns a generator seeded like pg_prng_seed(state, seed).
func NewPRNG(seed uint64) *PRNG {
	r := &PRNG{}
	r.Seed(seed)
	return r
}

func splitmix64(state *uint64) uint64 {
	*state += 0x9E3779B97f4A7C15
	v := *state
	v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9
	v = (v ^ (v >> 27)) * 0x94D049BB133111EB
	return v ^ (v >> 31)
}

// Seed re-initialises r like pg_prng_seed (including pg_prng_seed_check's
// replacement of an all-zero state).
func (r *PRNG) Seed(seed uint64) {
	r.s[0] = splitmix64(&seed)
	r.s[1] = splitmix64(&seed)
	if r.s[0] == 0 && r.s[1] == 0 {
		r.s[0] = 0x5851F42D4C957F2D
		r.s[1] = 0x14057B7EF767814F
	}
}

// Uint64 is pg_prng_uint64: a uniform value in [0, 2^64).
func (r *PRNG) Uint64() uint64 {
	s0 := r.s[0]
	sx := r.s[1] ^ s0
	val := bits.RotateLeft64(s0*5, 7) * 9
	r.s[0] = bits.RotateLeft64(s0, 24) ^ sx ^ (sx << 16)
	r.s[1] = bits.RotateLeft64(sx, 37)
	return val
}

// Double is pg_prng_double: a uniform value in [0, 1) with 52 random bits.
func (r *PRNG) Double() float64 {
	return float64(r.Uint64()>>12) * 0x1p-52
}

// Uint64Range is pg_prng_uint64_range: a uniform value in [rmin, rmax]
// (bitmask rejection); rmin when the range is empty.
func (r *PRNG) Uint64Range(rmin, rmax uint64) uint64 {
	if rmax <= rmin {
		return rmin
	}
	rng := rmax - rmin
	shift := uint(bits.LeadingZeros64(rng))
	for {
		v := r.Uint64() >> shift
		if v <= rng {
			return rmin + v
		}
	}
}

// Rand is pgbench's getrand: a uniform integer in [min, max]. max-min must
// not overflow int64 (random() checks that before calling it).
func (r *PRNG) Rand(min, max int64) int64 {
	return min + int64(r.Uint64Range(0, uint64(max-min)))
}

// Exponential is pgbench's getExponentialRand: an integer in [min, max]
// whose density at max is exp(-parameter) of the density at min;
// parameter > 0.
func (r *PRNG) Exponential(min, max int64, parameter float64) int64 {
	cut := crExp(-parameter)
	uniform := 1.0 - r.Double()
	rnd := -crLog(cut+(1.0-cut)*uniform) / parameter
	return min + truncInt64(float64(max-min+1)*rnd)
}

// Gaussian is pgbench 15's getGaussianRand: an integer in [min, max] drawn
// from a normal distribution centred on the middle of the range, cut at
// ±parameter standard deviations (parameter >= 2). Each try draws two
// doubles (Box-Muller on (0,1] uniforms).
func (r *PRNG) Gaussian(min, max int64, parameter float64) int64 {
	var stdev float64
	for {
		rand1 := 1.0 - r.Double()
		rand2 := 1.0 - r.Double()
		varSqrt := math.Sqrt(-2.0 * crLog(rand1))
		stdev = varSqrt * crSin(2.0*math.Pi*rand2)
		if !(stdev < -parameter || stdev >= parameter) {
			break
		}
	}
	rnd := (stdev + parameter) / (parameter * 2.0)
	return min + truncInt64(float64(max-min+1)*rnd)
}

// Zipfian is pgbench's getZipfianRand (computeIterativeZipfian, Devroye's
// rejection method): an integer in [min, max], min being the most frequent,
// for 1.001 <= s <= 1000.
func (r *PRNG) Zipfian(min, max int64, s float64) int64 {
	n := max - min + 1
	return min - 1 + r.iterativeZipfian(n, s)
}

func (r *PRNG) iterativeZipfian(n int64, s float64) int64 {
	b := crPow(2.0, s-1.0)
	if n <= 1 {
		return 1
	}
	for {
		u := r.Double()
		v := r.Double()
		x := math.Floor(crPow(u, -1.0/(s-1.0)))
		t := crPow(1.0+1.0/x, s-1.0)
		if v*x*(t-1.0)/(b-1.0) <= t/b && x <= float64(n) {
			return truncInt64(x)
		}
	}
}

// Poisson is pgbench's getPoissonRand, used for --rate schedule delays:
// an integer >= 0 whose mean is center (µs in pgbench).
func (r *PRNG) Poisson(center float64) int64 {
	uniform := 1.0 - r.Double()
	return truncInt64(-crLog(uniform)*center + 0.5)
}

// truncInt64 is C's (int64) cast of a double on x86-64 (cvttsd2si): NaN
// and out-of-range values give math.MinInt64.
func truncInt64(f float64) int64 {
	if f >= 0x1p63 || f < -0x1p63 || f != f {
		return math.MinInt64
	}
	return int64(f)
}

// Seeds reproduces how pgbench 15 derives its random states from the
// random seed (pgbench.c: set_random_seed, initRandomState, main). The seed
// (--random-seed N, or PGBENCH_RANDOM_SEED) seeds base_random_sequence;
// every other state is seeded with the next pg_prng_uint64 of that
// sequence, in this order (pgbench.c main, PostgreSQL 15):
//
//  1. one cs_func_rs per client, client 0 first (the state of random(),
//     random_gaussian(), random_exponential(), random_zipfian());
//  2. the :default_seed variable (hash functions and permute), unless it
//     was given with -D default_seed=...;
//  3. per thread, thread 0 first: ts_choose_rs (weighted script choice),
//     ts_throttle_rs (--rate Poisson delays), ts_sample_rs
//     (--sampling-rate).
//
// Call ClientRand, DefaultSeed and ThreadRand in that order (or use Plan).
// With the same seed, client and thread counts, the values equal
// pgbench's.
type Seeds struct {
	seed uint64
	base PRNG
}

// NewSeeds seeds the base sequence with randomSeed.
func NewSeeds(randomSeed uint64) *Seeds {
	s := &Seeds{seed: randomSeed}
	s.base.Seed(randomSeed)
	return s
}

// RandomSeed is the seed, as pgbench stores it in :random_seed (an int64
// holding the uint64 bits).
func (s *Seeds) RandomSeed() int64 { return int64(s.seed) }

// Next draws one state like initRandomState: a PRNG seeded with the next
// value of the base sequence.
func (s *Seeds) Next() *PRNG { return NewPRNG(s.base.Uint64()) }

// ClientRand draws the cs_func_rs of n clients (step 1).
func (s *Seeds) ClientRand(n int) []*PRNG {
	out := make([]*PRNG, n)
	for i := range out {
		out[i] = s.Next()
	}
	return out
}

// DefaultSeed draws :default_seed (step 2): the next base value as int64.
func (s *Seeds) DefaultSeed() int64 { return int64(s.base.Uint64()) }

// ThreadRand is the random states of one pgbench thread.
type ThreadRand struct {
	Choose   *PRNG // ts_choose_rs: chooseScript (weighted -f/-b choice)
	Throttle *PRNG // ts_throttle_rs: --rate delays (Poisson)
	Sample   *PRNG // ts_sample_rs: --sampling-rate
}

// ThreadRand draws the states of n threads (step 3).
func (s *Seeds) ThreadRand(n int) []ThreadRand {
	out := make([]ThreadRand, n)
	for i := range out {
		out[i].Choose = s.Next()
		out[i].Throttle = s.Next()
		out[i].Sample = s.Next()
	}
	return out
}

// Plan is every random state of a pgbench 15 run.
type Plan struct {
	RandomSeed int64
	// DefaultSeed is :default_seed; DefaultSeedDrawn is false when it was
	// given by the user (then nothing was drawn for it and DefaultSeed is 0).
	DefaultSeed      int64
	DefaultSeedDrawn bool
	Clients          []*PRNG
	Threads          []ThreadRand
}

// Plan draws all states in pgbench's order for the given number of clients
// (-c) and threads (-j, already capped at the number of clients as pgbench
// does). drawDefaultSeed is false when -D default_seed=... was given.
func (s *Seeds) Plan(clients, threads int, drawDefaultSeed bool) Plan {
	p := Plan{RandomSeed: s.RandomSeed()}
	p.Clients = s.ClientRand(clients)
	if drawDefaultSeed {
		p.DefaultSeed = s.DefaultSeed()
		p.DefaultSeedDrawn = true
	}
	p.Threads = s.ThreadRand(threads)
	return p
}

// ParseSeed parses a numeric --random-seed value like pgbench 15's
// set_random_seed (sscanf "%lu%c"): optional leading white space, an
// optional sign (a negative value wraps modulo 2^64), decimal digits, and
// nothing after them; values above 2^64-1 give 2^64-1. "time" and "rand"
// are not handled here (they are not reproducible). Errors read like
// pgbench's: unrecognized random seed option "x".
func ParseSeed(s string) (uint64, error) {
	t := strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg = t[0] == '-'
		t = t[1:]
	}
	if t == "" || t[0] < '0' || t[0] > '9' {
		return 0, fmt.Errorf("unrecognized random seed option %q: %w", s, errBadSeed)
	}
	var v uint64
	overflow := false
	i := 0
	for ; i < len(t) && t[i] >= '0' && t[i] <= '9'; i++ {
		hi, lo := bits.Mul64(v, 10)
		lo, carry := bits.Add64(lo, uint64(t[i]-'0'), 0)
		if hi != 0 || carry != 0 {
			overflow = true
		}
		v = lo
	}
	if i != len(t) {
		return 0, fmt.Errorf("unrecognized random seed option %q: %w", s, errBadSeed)
	}
	if overflow {
		return math.MaxUint64, nil
	}
	if neg {
		v = -v
	}
	return v, nil
}

var errBadSeed = errors.New("expecting an unsigned integer, \"time\" or \"rand\"")
