package tables

import "testing"

// Values from PostgreSQL 15: select hashint4extended(1, 8816678312871386365),
// hashint4extended(100000, ...), hashint4extended(1, 0); and the partitions
// a table "partition by hash (aid)" with modulus 3 puts aids 1..10 in.
func TestPgbenchHashMatchesPostgres(t *testing.T) {
	for _, c := range []struct {
		k    uint32
		seed uint64
		want int64
	}{
		{1, hashPartitionSeed, 5968994663651403477},
		{100000, hashPartitionSeed, -4261177139570981594},
		{1, 0, -3670598878359251130},
	} {
		if got := int64(hashUint32Extended(c.k, c.seed)); got != c.want {
			t.Errorf("hash_uint32_extended(%d, %#x) = %d, want %d", c.k, c.seed, got, c.want)
		}
	}
	want := []int{2, 0, 1, 0, 2, 0, 1, 0, 2, 1}
	for i, w := range want {
		for _, big := range []bool{false, true} {
			if got := hashRemainder(int64(i+1), big, 3); got != w {
				t.Errorf("aid %d (bigint %t): remainder %d, want %d", i+1, big, got, w)
			}
		}
	}
}
