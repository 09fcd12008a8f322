package tables

import "math/bits"

// hashPartitionSeed is the seed PostgreSQL passes to a partition key's
// extended hash function (src/include/partitioning/partbounds.h,
// HASH_PARTITION_SEED).
const hashPartitionSeed uint64 = 0x7A5B22367996DCFD

// hashRemainder returns the remainder of aid's hash for modulus: the hash
// partition of pgbench_accounts ("for values with (modulus m, remainder
// r)") PostgreSQL routes the row to. It is PostgreSQL's
// compute_partition_hash_value (src/backend/partitioning/partbounds.c) for
// one int4 or int8 key: hashint4extended / hashint8extended
// (src/backend/access/hash/hashfunc.c) with hashPartitionSeed, folded
// into 0 with hash_combine64 (src/include/common/hashfn.h), then modulo
// the modulus. The hash of a partition key is on-disk format (pg_upgrade
// keeps hash partitions), so it does not change between server versions.
// Init checks it against the server's satisfies_hash_partition before
// relying on it.
func hashRemainder(aid int64, bigint bool, modulus int) int {
	k := uint32(aid)
	if bigint {
		// hashint8extended: fold the high half into the low one so that
		// int8 values hash like the int4 ones they equal.
		hi := uint32(uint64(aid) >> 32)
		if aid >= 0 {
			k ^= hi
		} else {
			k ^= ^hi
		}
	}
	h := hashUint32Extended(k, hashPartitionSeed)
	// hash_combine64(0, h)
	var a uint64
	a ^= h + 0x49a0f4dd15e5a8e3 + (a << 54) + (a >> 7)
	return int(a % uint64(modulus))
}

// hashUint32Extended is PostgreSQL's hash_uint32_extended
// (src/common/hashfn.c): Bob Jenkins' lookup3 mix and final of one 32-bit
// key with a 64-bit seed, returning b<<32 | c.
func hashUint32Extended(k uint32, seed uint64) uint64 {
	a := uint32(0x9e3779b9 + 4 + 3923095)
	b, c := a, a
	if seed != 0 {
		a += uint32(seed >> 32)
		b += uint32(seed)
		// mix(a, b, c)
		a -= c
		a ^= bits.RotateLeft32(c, 4)
		c += b
		b -= a
		b ^= bits.RotateLeft32(a, 6)
		a += c
		c -= b
		c ^= bits.RotateLeft32(b, 8)
		b += a
		a -= c
		a ^= bits.RotateLeft32(c, 16)
		c += b
		b -= a
		b ^= bits.RotateLeft32(a, 19)
		a += c
		c -= b
		c ^= bits.RotateLeft32(b, 4)
		b += a
	}
	a += k
	// final(a, b, c)
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return uint64(b)<<32 | uint64(c)
}
