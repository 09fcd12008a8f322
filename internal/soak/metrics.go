package soak

import "strings"

// The metric keys of a window's Values. Per-operation and per-wait-event
// keys are a prefix and a name ("p95_ms/post_goods_receipt",
// "wait/LWLock:SInvalRead").
const (
	KeyApdex      = "apdex" // integral APDEX of the window
	KeyTPS        = "tps"   // key operations per second
	KeyErrorsPerS = "errors_per_s"
	KeyP95        = "p95_ms/" // + operation: its p95 in the window, ms
	// From the samplers (means of their samples over the window).
	KeyActive       = "active"  // active client sessions
	KeyWaiting      = "waiting" // active client sessions waiting (not on CPU)
	KeyWait         = "wait/"   // + wait event key: active sessions in it
	KeyIdleInTx     = "idle_in_transaction"
	KeyCatalogBytes = "catalog_bytes"       // the sampled system catalogs' total size
	KeyCatalogDead  = "catalog_dead_tuples" // their dead tuples
	KeyTempFiles    = "temp_files_per_s"
	KeyTempBytes    = "temp_bytes_per_s"
	KeySInval       = "sinval_per_s" // shared-invalidation messages (the samplers' estimate)
	KeyCPU          = "cpu_pct"      // host CPU busy, % of all CPUs
	KeyMemUsed      = "mem_used_bytes"
	// From the soak's own query, once a window.
	KeyXminAge     = "xmin_age" // oldest backend xmin's age, transactions
	KeyXidAge      = "xid_age"  // age(datfrozenxid) of the database
	KeyWAL         = "wal_bytes_per_s"
	KeyDeadTuples  = "dead_tuples" // n_dead_tup of the user tables
	KeyTableBytes  = "table_bytes" // the user tables' total size
	KeyAutovacuum  = "autovacuum_workers"
	KeyAutovacRuns = "autovacuum_per_min" // autovacuum + autoanalyze runs of all tables
)

// Metric is what the rule and the lines know of a metric: its label,
// which way is bad (+1 rising, -1 falling, 0 only informational: a trend
// is shown but never warns), and the least change over the fitted
// windows that counts (relative to its mean, and absolute), below which
// a significant slope is still not worth a warning.
type Metric struct {
	Key   string
	Label string
	Unit  string // "ms", "B", "" (a count or score)
	Bad   int
	// MinRel and MinAbs: the change over the fitted span must reach both.
	MinRel, MinAbs float64
}

// families are the metrics by key or key prefix; the floors are the
// rule's calibration (rule.go, TestSteadyNoWarning).
var families = []Metric{
	{Key: KeyApdex, Label: "APDEX", Bad: -1, MinAbs: 0.03},
	{Key: KeyTPS, Label: "throughput", Bad: -1, MinRel: 0.2},
	{Key: KeyErrorsPerS, Label: "errors/s", Bad: +1, MinAbs: 0.5},
	{Key: KeyP95, Label: "p95", Unit: "ms", Bad: +1, MinRel: 0.3, MinAbs: 0.5},
	{Key: KeyActive, Label: "active sessions", Bad: +1, MinRel: 0.3, MinAbs: 1},
	{Key: KeyWaiting, Label: "waiting sessions", Bad: +1, MinRel: 0.5, MinAbs: 1},
	{Key: KeyWait, Label: "sessions in", Bad: +1, MinRel: 0.5, MinAbs: 1},
	{Key: KeyIdleInTx, Label: "idle in transaction", Bad: +1, MinRel: 0.5, MinAbs: 1},
	{Key: KeyCatalogBytes, Label: "catalog size", Unit: "B", Bad: +1, MinRel: 1, MinAbs: 4 << 20},
	{Key: KeyCatalogDead, Label: "catalog dead tuples", Bad: 0},
	{Key: KeyTempFiles, Label: "temp files/s", Bad: +1, MinRel: 0.5, MinAbs: 1},
	{Key: KeyTempBytes, Label: "temp bytes/s", Unit: "B", Bad: 0},
	{Key: KeySInval, Label: "invalidation msgs/s", Bad: +1, MinRel: 1, MinAbs: 100},
	{Key: KeyCPU, Label: "host CPU %", Bad: 0},
	// the host's memory moves with every process on it (a steady smoke run
	// here saw +950 MB/min from others'): shown, never warns
	{Key: KeyMemUsed, Label: "host memory used", Unit: "B", Bad: 0},
	{Key: KeyXminAge, Label: "oldest xmin age", Bad: +1, MinRel: 1, MinAbs: 100000},
	{Key: KeyXidAge, Label: "xid age", Bad: 0},
	{Key: KeyWAL, Label: "WAL/s", Unit: "B", Bad: 0},
	{Key: KeyDeadTuples, Label: "dead tuples", Bad: 0},
	{Key: KeyTableBytes, Label: "table size", Unit: "B", Bad: 0},
	{Key: KeyAutovacuum, Label: "autovacuum workers", Bad: 0},
	{Key: KeyAutovacRuns, Label: "autovacuum runs/min", Bad: 0},
}

// MetricOf is the metric of key, its label naming the operation or wait
// event of a prefixed key; an unknown key is informational.
func MetricOf(key string) Metric {
	for _, m := range families {
		if key == m.Key {
			return m
		}
		if strings.HasSuffix(m.Key, "/") && strings.HasPrefix(key, m.Key) {
			name := key[len(m.Key):]
			out := m
			out.Key = key
			if m.Key == KeyP95 {
				out.Label = name + " p95"
			} else {
				out.Label = m.Label + " " + name
			}
			return out
		}
	}
	return Metric{Key: key, Label: key}
}
