package cli

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/pgbench/script"
	"github.com/erplab/erplab/internal/record"
)

// simpleStats is pgbench's SimpleStats: count, sum, sum of squares and
// extremes of a quantity in µs.
type simpleStats struct {
	count     int64
	sum, sum2 float64
	max       float64
}

func (s *simpleStats) add(us float64) {
	s.count++
	s.sum += us
	s.sum2 += us * us
	s.max = math.Max(s.max, us)
}

func (s *simpleStats) merge(o simpleStats) {
	s.count += o.count
	s.sum += o.sum
	s.sum2 += o.sum2
	s.max = math.Max(s.max, o.max)
}

// mean and stddev in ms (pgbench's printSimpleStats).
func (s simpleStats) meanMs() float64 { return 0.001 * s.sum / float64(s.count) }
func (s simpleStats) stddevMs() float64 {
	m := s.sum / float64(s.count)
	return 0.001 * math.Sqrt(math.Max(s.sum2/float64(s.count)-m*m, 0))
}

// statsData is pgbench's StatsData for one script (or the total): the
// successful transactions' latency and lag, failures by kind, retries,
// late transactions.
type statsData struct {
	latency, lag           simpleStats
	serialization          int64 // failed after their tries with 40001
	deadlock               int64 // ... with 40P01
	other                  int64 // other errors counted as failures (--continue-on-error)
	retried, retries, late int64
	skipped                int64 // arrivals skipped under --latency-limit (--rate)
}

func (d *statsData) failures() int64 { return d.serialization + d.deadlock + d.other }

func (d *statsData) merge(o statsData) {
	d.latency.merge(o.latency)
	d.lag.merge(o.lag)
	d.serialization += o.serialization
	d.deadlock += o.deadlock
	d.other += o.other
	d.retried += o.retried
	d.retries += o.retries
	d.late += o.late
	d.skipped += o.skipped
}

// collector accumulates the engine's samples into pgbench's statistics,
// per script and since the last progress report.
type collector struct {
	limit           time.Duration // -L
	continueOnError bool

	mu      sync.Mutex
	scripts []statsData
	first   time.Time     // earliest start seen
	started chan struct{} // closed at the first sample
	begun   atomic.Bool   // first is set
	// skips counts each script's skipped arrivals without the lock (a
	// worker catching up skips arrivals at millions per second); total and
	// script add them to statsData.skipped.
	skips []atomic.Int64
}

func newCollector(scripts int, limit time.Duration, continueOnError bool) *collector {
	return &collector{limit: limit, continueOnError: continueOnError, scripts: make([]statsData, scripts), started: make(chan struct{}),
		skips: make([]atomic.Int64, scripts)}
}

// begin sets first to at and closes started at the first sample or skip;
// c.mu is held.
func (c *collector) begin(at time.Time) {
	if c.first.IsZero() {
		c.first = at
		close(c.started)
		c.begun.Store(true)
	}
}

// sample is the engine's OnSample. Aborted transactions (errors other
// than serialization failures and deadlocks, without
// --continue-on-error) are not counted, as in pgbench 15-17.
func (c *collector) sample(s record.Sample) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := s.Start
	if !s.Scheduled.IsZero() && s.Scheduled.Before(at) {
		at = s.Scheduled
	}
	c.begin(at)
	d := &c.scripts[s.Op]
	counted := true
	switch s.SQLState {
	case "":
		resp := s.Response()
		d.latency.add(float64(resp) / 1e3)
		if !s.Scheduled.IsZero() {
			d.lag.add(float64(s.Lag()) / 1e3)
		}
		if c.limit > 0 && resp > c.limit {
			d.late++
		}
	case script.SerializationFailure:
		d.serialization++
	case script.DeadlockDetected:
		d.deadlock++
	default:
		if c.continueOnError {
			d.other++
		} else {
			counted = false
		}
	}
	if counted && s.Retries > 0 {
		d.retried++
		d.retries += int64(s.Retries)
	}
}

// skip is the engine's OnSkip: an arrival skipped under --latency-limit
// counts in its script's skipped transactions (pgbench's accumStats), for
// the progress lines and the report.
func (c *collector) skip(s engine.Skip) {
	if !c.begun.Load() {
		c.mu.Lock()
		c.begin(s.Scheduled)
		c.mu.Unlock()
	}
	c.skips[s.Op].Add(1)
}

// total is the statistics summed over the scripts.
func (c *collector) total() statsData {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t statsData
	for i, d := range c.scripts {
		d.skipped += c.skips[i].Load()
		t.merge(d)
	}
	return t
}

// script returns a copy of script i's statistics.
func (c *collector) script(i int) statsData {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.scripts[i]
	d.skipped += c.skips[i].Load()
	return d
}
