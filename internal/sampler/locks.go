package sampler

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/erplab/erplab/internal/opmap"
)

// FastPathSlots is the number of relation locks a backend can hold in
// its own fast-path slots (FP_LOCK_SLOTS_PER_BACKEND, PostgreSQL 12-17,
// src/include/storage/proc.h); more, or a strong lock, go to the shared
// lock table and its partition LWLocks (LWLock:LockManager).
const FastPathSlots = 16

// locksOpsSQL counts, for the backends on which the engine runs a key
// operation ($1, their PIDs), the relation locks each holds (granted),
// in its fast-path slots and outside them (pg_locks.fastpath). Reading
// pg_locks takes every lock-manager partition LWLock in shared mode and
// each backend's fast-path lock in turn (lockfuncs.c, GetLockStatusData),
// once per sample; its time is in the sample's round trip
// (Cost.RoundTrip*).
//
// Rows: pid, fast-path relation locks, relation locks outside the fast
// path.
const locksOpsSQL = `SELECT l.pid, (count(*) FILTER (WHERE l.fastpath))::int4, (count(*) FILTER (WHERE NOT l.fastpath))::int4
FROM pg_catalog.pg_locks l
WHERE l.locktype = 'relation' AND l.granted AND l.pid = ANY($1::int4[])
GROUP BY l.pid`

// locksAllSQL is locksOpsSQL for every backend but the sampler's own
// (without an op map: erplab doctor).
const locksAllSQL = `SELECT l.pid, (count(*) FILTER (WHERE l.fastpath))::int4, (count(*) FILTER (WHERE NOT l.fastpath))::int4
FROM pg_catalog.pg_locks l
WHERE l.locktype = 'relation' AND l.granted AND l.pid IS NOT NULL AND l.pid <> pg_catalog.pg_backend_pid()
GROUP BY l.pid`

// BackendLocks is the relation locks one backend held at one sample.
type BackendLocks struct {
	// Op is the key operation it ran throughout the sample
	// (opmap.Stable); "" without an op map.
	Op  string
	PID int32
	// FastPath are the locks in its fast-path slots, Outside those in
	// the shared lock table.
	FastPath, Outside int
}

// Held is all relation locks the backend held.
func (b BackendLocks) Held() int { return b.FastPath + b.Outside }

// OpLocks is one key operation's relation locks over the sampling: at
// each sample, each backend that ran the operation throughout the sample
// and held at least one relation lock is one backend-sample.
type OpLocks struct {
	// Operation is the key operation; "" stands for any backend (no op
	// map: erplab doctor).
	Operation string `json:"operation"`
	// Samples is the number of backend-samples.
	Samples int `json:"samples"`
	// HeldMax is the most relation locks one backend-sample held, and
	// HeldMaxOutside how many of those were outside the fast path.
	HeldMax        int `json:"held_max"`
	HeldMaxOutside int `json:"held_max_outside"`
	// HeldP50, HeldP95 are the median and 95th percentile (nearest
	// rank) of the relation locks held.
	HeldP50 int `json:"held_p50"`
	HeldP95 int `json:"held_p95"`
	// Outside* are the same figures of the locks outside the fast path.
	OutsideMax int `json:"outside_max"`
	OutsideP50 int `json:"outside_p50"`
	OutsideP95 int `json:"outside_p95"`
}

// Locks is the relation locks per key operation of a session
// (Observations.Locks), most held first.
type Locks struct {
	// FastPathSlots is FastPathSlots, for the reader.
	FastPathSlots int       `json:"fast_path_slots"`
	Operations    []OpLocks `json:"operations"`
}

// lockAgg gathers one operation's backend-samples: counts per number of
// locks held (and outside the fast path), bounded for runs of hours.
type lockAgg struct {
	held, outside   map[int]int
	n               int
	max, maxOutside int
}

func (a *lockAgg) add(b BackendLocks) {
	h := b.Held()
	if h == 0 {
		return
	}
	if a.held == nil {
		a.held, a.outside = map[int]int{}, map[int]int{}
	}
	a.held[h]++
	a.outside[b.Outside]++
	a.n++
	if h > a.max || (h == a.max && b.Outside > a.maxOutside) {
		a.max, a.maxOutside = h, b.Outside
	}
}

// summary is the figures of op's backend-samples.
func (a *lockAgg) summary(op string) OpLocks {
	return OpLocks{Operation: op, Samples: a.n, HeldMax: a.max, HeldMaxOutside: a.maxOutside,
		HeldP50: rank(a.held, a.n, 50), HeldP95: rank(a.held, a.n, 95),
		OutsideMax: rank(a.outside, a.n, 100), OutsideP50: rank(a.outside, a.n, 50), OutsideP95: rank(a.outside, a.n, 95)}
}

// rank is the nearest-rank p-th percentile of the n values counted in
// counts (value -> how many times; 0 when empty).
func rank(counts map[int]int, n, p int) int {
	if n == 0 {
		return 0
	}
	i := min(max((p*n+99)/100-1, 0), n-1)
	vals := slices.Sorted(maps.Keys(counts))
	for _, v := range vals {
		if i -= counts[v]; i < 0 {
			return v
		}
	}
	return vals[len(vals)-1]
}

// lockSummary is the Locks of aggs, most held first, then by name.
func lockSummary(aggs map[string]*lockAgg) *Locks {
	out := &Locks{FastPathSlots: FastPathSlots, Operations: []OpLocks{}}
	for op, a := range aggs {
		if a.n > 0 {
			out.Operations = append(out.Operations, a.summary(op))
		}
	}
	sort.Slice(out.Operations, func(i, j int) bool {
		a, b := out.Operations[i], out.Operations[j]
		if a.HeldMax != b.HeldMax {
			return a.HeldMax > b.HeldMax
		}
		return a.Operation < b.Operation
	})
	return out
}

// attributeLocks keeps, of out.lockRows, the backends that ran one
// operation throughout the sample, named (all, unnamed, without an op
// map).
func (s *Sampler) attributeLocks(out *Sample) {
	for _, r := range out.lockRows {
		if s.opts.Ops != nil {
			op, ok := opmap.Stable(s.before, s.after, uint32(r.PID))
			if !ok {
				continue
			}
			r.Op = s.opts.Ops.Name(op)
		}
		out.Locks = append(out.Locks, r)
	}
	out.lockRows = nil
}

// OpLocksFor returns the figures of op in l (false when absent).
func (l *Locks) OpLocksFor(op string) (OpLocks, bool) {
	if l == nil {
		return OpLocks{}, false
	}
	for _, x := range l.Operations {
		if x.Operation == op {
			return x, true
		}
	}
	return OpLocks{}, false
}

// Phrase says x's figures in words: "holds up to 51 relation locks, 35
// outside the 16 fast-path slots (median 40, 24 outside; p95 51, 35
// outside; 120 backend-samples)".
func (x OpLocks) Phrase() string {
	return fmt.Sprintf("holds up to %d relation locks, %d outside the %d fast-path slots (median %d, %d outside; p95 %d, %d outside; %d backend-samples)",
		x.HeldMax, x.HeldMaxOutside, FastPathSlots, x.HeldP50, x.OutsideP50, x.HeldP95, x.OutsideP95, x.Samples)
}
