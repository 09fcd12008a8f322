package erp

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/rand/v2"
)

// mix64 is the splitmix64 finalizer: a bijection on uint64 with good
// avalanche (Steele, Lea, Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014). Being a bijection, distinct inputs give
// distinct outputs, which makes generated references unique by
// construction.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// nameHash is FNV-1a of s, used to derive per-table stream seeds.
func nameHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// streamPCG returns the PCG state of stream (seed, name, chunk): every
// chunk of every table has its own generator whose output does not depend
// on which goroutine runs it or when, so parallel generation stays
// deterministic.
func streamPCG(seed uint64, name string, chunk uint64) *rand.PCG {
	return rand.NewPCG(mix64(seed^nameHash(name)), mix64(chunk+0x9e3779b97f4a7c15))
}

// streamRand is streamPCG wrapped in a *rand.Rand.
func streamRand(seed uint64, name string, chunk uint64) *rand.Rand {
	return rand.New(streamPCG(seed, name, chunk))
}

// unitFloat maps 64 random bits to [0, 1).
func unitFloat(x uint64) float64 { return float64(x>>11) / (1 << 53) }

// zipf draws ranks 0..n-1 with P(rank i) proportional to 1/(i+1)^theta,
// by the method of Gray, Sundaresan, Englert, Baclawski and Weinberger,
// "Quickly generating billion-record synthetic databases" (SIGMOD 1994),
// the generator YCSB uses. It accepts 0 < theta < 1, which math/rand/v2's
// Zipf (s > 1) does not. Rank 0 is the most popular. Immutable after
// construction; safe for concurrent use.
type zipf struct {
	n                        int
	theta, alpha, zetan, eta float64
	half                     float64 // 1 + 0.5^theta
}

// zeta returns sum_{i=1..n} 1/i^theta.
func zeta(n int, theta float64) float64 {
	s := 0.0
	for i := 1; i <= n; i++ {
		s += 1 / math.Pow(float64(i), theta)
	}
	return s
}

func newZipf(n int, theta float64) *zipf {
	if n < 1 {
		n = 1
	}
	z := &zipf{n: n, theta: theta}
	z.zetan = zeta(n, theta)
	zeta2 := zeta(2, theta)
	z.alpha = 1 / (1 - theta)
	if n > 2 {
		z.eta = (1 - math.Pow(2/float64(n), 1-theta)) / (1 - zeta2/z.zetan)
	}
	z.half = 1 + math.Pow(0.5, theta)
	return z
}

// rank maps a uniform u in [0,1) to a rank.
func (z *zipf) rank(u float64) int {
	uz := u * z.zetan
	if uz < 1 || z.n == 1 {
		return 0
	}
	if uz < z.half || z.n == 2 {
		return 1
	}
	r := int(float64(z.n) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	if r >= z.n {
		r = z.n - 1
	}
	if r < 0 {
		r = 0
	}
	return r
}

// prob is the probability of rank r.
func (z *zipf) prob(r int) float64 {
	return 1 / math.Pow(float64(r+1), z.theta) / z.zetan
}

// perm is a bijection of 0..n-1 (i -> (i*mult + add) mod n with mult
// coprime to n) that scatters Zipf ranks over object indexes, so the most
// popular items are not simply the first codes.
type perm struct{ n, mult, add uint64 }

func newPerm(n int, seed uint64) perm {
	// Both primes exceed any n we generate, so they are coprime to n.
	mult := uint64(1000003)
	if uint64(n) >= mult {
		mult = 2147483647
	}
	if n <= 1 {
		return perm{n: 1, mult: 1}
	}
	return perm{n: uint64(n), mult: mult % uint64(n), add: seed % uint64(n)}
}

func (p perm) of(i int) int {
	if p.n <= 1 {
		return 0
	}
	return int((uint64(i)*p.mult + p.add) % p.n)
}

// Ref is a 16-byte platform reference (_idrref, _fldNrref, _rrref).
type Ref [16]byte

// makeRef builds the reference of object key of table number table. The
// low 8 bytes are a bijection of (table, key) for a given seed, so refs are
// unique by construction (key < 2^48); the high 8 bytes are a hash.
func makeRef(seedK uint64, table int, key uint64) Ref {
	x := uint64(table)<<48 ^ key
	var r Ref
	binary.BigEndian.PutUint64(r[0:8], mix64(x^seedK^0x5851f42d4c957f2d))
	binary.BigEndian.PutUint64(r[8:16], mix64(x^seedK))
	return r
}
