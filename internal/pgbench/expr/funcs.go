package expr

import "math/bits"

// Hashing constants of pgbench.c.
const (
	fnvPrime       = 0x100000001b3
	fnvOffsetBasis = 0xcbf29ce484222325
	mm2Mul         = 0xc6a4a7935bd1e995
	mm2MulTimes8   = 0x35253c9ade8f4ca8
	mm2Rot         = 47
)

// HashFnv1a is pgbench's hash_fnv1a(val, seed) (pgbench.c getHashFnv1a):
// FNV-1a over the 8 little-endian bytes of val, offset basis xor seed.
func HashFnv1a(val int64, seed uint64) int64 {
	result := uint64(fnvOffsetBasis) ^ seed
	for i := 0; i < 8; i++ {
		octet := uint64(val & 0xff)
		val >>= 8
		result ^= octet
		result *= fnvPrime
	}
	return int64(result)
}

// HashMurmur2 is pgbench's hash() and hash_murmur2(val, seed)
// (pgbench.c getHashMurmur2, MurmurHash64A of one 8-byte word).
func HashMurmur2(val int64, seed uint64) int64 {
	result := seed ^ mm2MulTimes8
	k := uint64(val)
	k *= mm2Mul
	k ^= k >> mm2Rot
	k *= mm2Mul
	result ^= k
	result *= mm2Mul
	result ^= result >> mm2Rot
	result *= mm2Mul
	result ^= result >> mm2Rot
	return int64(result)
}

// Permute is pgbench's permute(val, size, seed) (pgbench.c permute): the
// position of val mod size in a pseudorandom permutation of [0, size)
// chosen by seed; 0 when size < 2.
func Permute(val, isize, seed int64) int64 {
	if isize < 2 {
		return 0
	}
	var state PRNG
	state.Seed(uint64(seed))
	size := uint64(isize)
	v := uint64(val) % size
	masklen := uint(bits.Len64(size) - 1) // pg_leftmost_one_pos64
	mask := (uint64(1) << masklen) - 1
	for i := 0; i < 6; i++ {
		m := (state.Uint64() & mask) | 1
		r := state.Uint64() & mask
		if v <= mask {
			v = ((v * m) ^ r) & mask
			v = ((v << 1) & mask) | (v >> (masklen - 1))
		}
		m = (state.Uint64() & mask) | 1
		r = state.Uint64() & mask
		t := size - 1 - v
		if t <= mask {
			t = ((t * m) ^ r) & mask
			t = ((t << 1) & mask) | (t >> (masklen - 1))
			v = size - 1 - t
		}
		r = state.Uint64Range(0, size-1)
		v = (v + r) % size
	}
	return int64(v)
}
