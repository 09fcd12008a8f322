package sampler

import (
	"math"

	"github.com/erplab/erplab/internal/opmap"
)

// SInvalQueueSize is the number of messages the shared invalidation queue
// holds (MAXNUMMESSAGES in src/backend/storage/ipc/sinvaladt.c, fixed at
// compile time).
const SInvalQueueSize = 4096

// catcachesOn is the number of system caches (src/backend/utils/cache/
// syscache.c) over each sampled catalog: every inserted, updated or
// deleted tuple of such a catalog queues one catcache invalidation message
// per cache at commit (CacheInvalidateHeapTuple, inval.c). pg_depend has
// no cache.
var catcachesOn = map[string]float64{
	"pg_class":     2, // RELOID, RELNAMENSP
	"pg_attribute": 2, // ATTNAME, ATTNUM
	"pg_type":      2, // TYPEOID, TYPENAMENSP
	"pg_index":     1, // INDEXRELID
}

// Churn is the temp-relation file churn and the shared-invalidation
// pressure estimated from the catalog counters of one interval (see
// docs/observe.md, "Temp-relation file churn" and "Shared invalidation").
type Churn struct {
	// RelFilesPerS is pg_class n_tup_ins + n_tup_upd per second in the
	// connected database (pg_stat_sys_tables): every new relation with
	// storage (CREATE TEMP TABLE, its indexes and TOAST) inserts a pg_class
	// row and creates a file, and every TRUNCATE or rewrite of a relation
	// gives it a new relfilenode by updating its pg_class row, a new file
	// too (the old one is unlinked at commit). In-place updates (VACUUM and
	// ANALYZE statistics, relhasindex) are not counted by n_tup_upd. It is
	// an upper bound of the files created per second: relations without
	// storage (views, composite types) and other pg_class updates (ALTER
	// TABLE, GRANT) count too.
	RelFilesPerS float64 `json:"rel_files_per_s"`
	// SInvalPerS estimates the shared invalidation messages queued per
	// second: for each sampled catalog, its tuple inserts, updates and
	// deletes times the number of catalog caches over it (catcachesOn),
	// plus one relcache or smgr message per pg_class change.
	SInvalPerS float64 `json:"sinval_msgs_per_s"`
	// SInvalQueuesPerS is SInvalPerS / SInvalQueueSize: how many times a
	// second the 4096-message queue's worth of messages goes through it.
	SInvalQueuesPerS float64 `json:"sinval_queues_per_s"`
	// SInvalWaitPct is the share of active sessions waiting on
	// LWLock:SInvalRead or LWLock:SInvalWrite at the sample, %.
	SInvalWaitPct float64 `json:"sinval_wait_pct,omitempty"`
}

// churnOf derives Churn from catalogs whose rates are filled, the waits
// of the sample and its active count.
func churnOf(cat []CatalogRel, waits map[string]int, active int) *Churn {
	c := &Churn{}
	for _, r := range cat {
		changes := r.InsPerS + r.UpdPerS + r.DelPerS
		c.SInvalPerS += catcachesOn[r.Name] * changes
		if r.Name == "pg_class" {
			c.RelFilesPerS = r.InsPerS + r.UpdPerS
			c.SInvalPerS += changes
		}
	}
	c.RelFilesPerS = round2(c.RelFilesPerS)
	c.SInvalPerS = math.Round(c.SInvalPerS)
	c.SInvalQueuesPerS = round3(c.SInvalPerS / SInvalQueueSize)
	if active > 0 {
		c.SInvalWaitPct = round2(100 * float64(waits["LWLock:SInvalRead"]+waits["LWLock:SInvalWrite"]) / float64(active))
	}
	return c
}

// opRow is one backend of opSessionsSQL.
type opRow struct {
	pid     int32
	wait    string
	queryID int64
}

// sighting is a query_id seen running in a key operation.
type sighting struct {
	op      int
	queryID int64
}

// attribute fills out.OpWaits from out.opRows and the op map's snapshots
// around the sample, and counts the query_id sightings.
func (s *Sampler) attribute(out *Sample) {
	for _, r := range out.opRows {
		op, ok := opmap.Stable(s.before, s.after, uint32(r.pid))
		if !ok {
			out.OpUnattributed++
			continue
		}
		name := s.opts.Ops.Name(op)
		if out.OpWaits == nil {
			out.OpWaits = map[string]map[string]int{}
		}
		if out.OpWaits[name] == nil {
			out.OpWaits[name] = map[string]int{}
		}
		out.OpWaits[name][r.wait]++
		if r.queryID != 0 {
			if s.sightings == nil {
				s.sightings = map[sighting]int{}
			}
			s.sightings[sighting{op, r.queryID}]++
		}
	}
	out.opRows = nil
}

// profileRates turns two readings of pg_wait_sampling's cumulative
// profile into the mean number of backends in each wait over elapsed
// seconds, sampled every periodMs: samples / (elapsed / period). A key
// whose count went down (a backend exited, the profile was reset) counts
// from 0.
func profileRates(prev, cur map[string]int64, elapsed, periodMs float64) map[string]float64 {
	ticks := elapsed * 1000 / periodMs
	if ticks <= 0 {
		return nil
	}
	out := map[string]float64{}
	for k, n := range cur {
		d := n - prev[k]
		if d < 0 {
			d = n
		}
		if d > 0 {
			out[k] = round2(float64(d) / ticks)
		}
	}
	return out
}
