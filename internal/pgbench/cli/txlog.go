package cli

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	wpgbench "github.com/erplab/erplab/internal/pgbench"
	"github.com/erplab/erplab/internal/pgbench/script"
	"github.com/erplab/erplab/internal/safefile"
)

// txLog writes pgbench -l's log files: one per thread, PREFIX.PID for
// thread 0 and PREFIX.PID.N for thread N (clients are dealt to threads as
// pgbench deals them), with a line per transaction (doLog) or, with
// --aggregate-interval, a line per interval; and beside them
// PREFIX-hdr.PID.hlog, an HdrHistogram interval log (V2, readable by
// HdrHistogram's HistogramLogReader and tools such as HdrHistogramVisualizer)
// of the successful transactions' latencies in ns, per script (Tag=scriptN)
// and interval (--aggregate-interval, else 1 s), for exact percentiles.
type txLog struct {
	cfg     *Config
	mu      sync.Mutex
	files   []*os.File
	w       []*bufio.Writer
	thread  []int   // client -> thread
	cnt     []int64 // per client: transactions logged or not
	rnd     *rand.Rand
	aggs    []aggStats
	aggNext []time.Time // per thread: end of the current interval
	line    []byte      // the per-transaction line being written (reused)

	// the HDR interval log beside them: one histogram of successful
	// latencies (ns) per script and interval
	hfile   *os.File
	hw      *bufio.Writer
	hlog    *hdrhistogram.HistogramLogWriter
	hists   []*hdrhistogram.Histogram
	hStart  time.Time
	hPeriod time.Duration
}

// hdrMaxNs is the largest latency the HDR log holds: an hour.
const hdrMaxNs = int64(time.Hour)

// aggStats is one aggregation interval of one thread.
type aggStats struct {
	start                   time.Time
	cnt                     int64
	lat, lag                simpleStats
	latMin, lagMin          float64
	serialization, deadlock int64
	other                   int64
	retried, retries        int64
	skipped                 int64
}

// openTxLog creates the log files (pgbench opens them at thread start),
// with pgbench's fopen(name, "w") mode (0666 less the umask): a log of
// this user's earlier run of the same name is replaced as pgbench does,
// but a symbolic link or another user's file there is refused
// (safefile.Overwrite), never written through.
func openTxLog(c *Config) (*txLog, error) {
	prefix := c.LogPrefix
	if prefix == "" {
		prefix = "pgbench_log"
	}
	l := &txLog{cfg: c, thread: make([]int, c.Clients), cnt: make([]int64, c.Clients),
		rnd: rand.New(rand.NewPCG(c.RandomSeed, 0x6c6f67)), aggs: make([]aggStats, c.Jobs), aggNext: make([]time.Time, c.Jobs)}
	dealt := 0
	for t := 0; t < c.Jobs; t++ {
		n := (c.Clients - dealt + c.Jobs - t - 1) / (c.Jobs - t)
		for k := 0; k < n; k++ {
			l.thread[dealt+k] = t
		}
		dealt += n
		name := prefix + "." + strconv.Itoa(os.Getpid())
		if t > 0 {
			name += "." + strconv.Itoa(t)
		}
		f, err := safefile.Overwrite(name, 0o666)
		if err != nil {
			l.close()
			return nil, fmt.Errorf("could not open logfile %q: %w", name, err)
		}
		l.files = append(l.files, f)
		l.w = append(l.w, bufio.NewWriter(f))
	}
	name := prefix + "-hdr." + strconv.Itoa(os.Getpid()) + ".hlog" // not PREFIX.*: scripts glob those
	f, err := safefile.Overwrite(name, 0o666)
	if err != nil {
		l.close()
		return nil, fmt.Errorf("could not open logfile %q: %w", name, err)
	}
	l.hfile, l.hw = f, bufio.NewWriter(f)
	l.hlog = hdrhistogram.NewHistogramLogWriter(l.hw)
	l.hPeriod = time.Second
	if c.AggregateInterval > 0 {
		l.hPeriod = time.Duration(c.AggregateInterval) * time.Second
	}
	for range c.Scripts {
		l.hists = append(l.hists, hdrhistogram.New(1, hdrMaxNs, 3))
	}
	now := time.Now()
	_ = l.hlog.OutputLogFormatVersion()
	_ = l.hlog.OutputComment("erplab pgbench: latency of successful transactions in ns, one histogram per script (Tag=scriptN) and interval")
	_ = l.hlog.OutputStartTime(now.UnixMilli())
	_ = l.hlog.OutputLegend()
	return l, nil
}

// hdrAdd records a successful latency in the HDR log, writing the
// intervals that ended before end.
func (l *txLog) hdrAdd(script int, begin, end time.Time) {
	if l.hStart.IsZero() {
		l.hStart = begin
	}
	for !end.Before(l.hStart.Add(l.hPeriod)) {
		l.hdrFlush()
		l.hStart = l.hStart.Add(l.hPeriod)
	}
	if script >= 0 && script < len(l.hists) {
		_ = l.hists[script].RecordValue(min(max(int64(end.Sub(begin)), 1), hdrMaxNs))
	}
}

// hdrFlush writes the current interval's histograms (those with samples).
func (l *txLog) hdrFlush() {
	for i, h := range l.hists {
		if h.TotalCount() == 0 {
			continue
		}
		h.SetTag("script" + strconv.Itoa(i))
		h.SetStartTimeMs(l.hStart.UnixMilli())
		h.SetEndTimeMs(l.hStart.Add(l.hPeriod).UnixMilli())
		_ = l.hlog.OutputIntervalHistogram(h)
		h.Reset()
	}
}

// add logs one transaction (wpgbench.Options.OnTransaction), skipped
// ones (cli's engine.Config.OnSkip) included: pgbench's doLog. A line is
// written without allocating.
func (l *txLog) add(tx wpgbench.Transaction) {
	c := l.cfg
	l.mu.Lock()
	defer l.mu.Unlock()
	if tx.Client < 0 || tx.Client >= len(l.thread) {
		return
	}
	l.cnt[tx.Client]++
	n := l.cnt[tx.Client] // pgbench numbers a client's transactions from 1, skipped ones too
	begin := tx.Start
	if !tx.Scheduled.IsZero() {
		begin = tx.Scheduled
	}
	// a skipped transaction has no latency and no lag (0, as pgbench)
	latency, lag := 0.0, 0.0
	if !tx.Skipped {
		latency = float64(tx.End.Sub(begin).Microseconds())
		if !tx.Scheduled.IsZero() {
			lag = float64(max(tx.Start.Sub(tx.Scheduled), 0).Microseconds())
		}
	}
	t := l.thread[tx.Client]
	w := l.w[t]
	if tx.SQLState == "" && !tx.Skipped {
		l.hdrAdd(tx.Script, begin, tx.End)
	}
	if c.AggregateInterval > 0 {
		a := &l.aggs[t]
		if a.start.IsZero() {
			a.start = begin
			l.aggNext[t] = begin.Add(time.Duration(c.AggregateInterval) * time.Second)
		}
		for !tx.End.Before(l.aggNext[t]) {
			l.writeAgg(t)
			*a = aggStats{start: l.aggNext[t]}
			l.aggNext[t] = l.aggNext[t].Add(time.Duration(c.AggregateInterval) * time.Second)
		}
		switch {
		case tx.Skipped:
			// pgbench's accumStats: a skipped transaction is only counted
			a.skipped++
			return
		case tx.SQLState == "":
			a.cnt++
			if a.lat.count == 0 || latency < a.latMin {
				a.latMin = latency
			}
			a.lat.add(latency)
			if c.Rate > 0 {
				if a.lag.count == 0 || lag < a.lagMin {
					a.lagMin = lag
				}
				a.lag.add(lag)
			}
		case tx.SQLState == script.SerializationFailure:
			a.serialization++
		case tx.SQLState == script.DeadlockDetected:
			a.deadlock++
		default:
			a.other++
		}
		if tx.Retries > 0 {
			a.retried++
			a.retries += int64(tx.Retries)
		}
		return
	}
	if c.SamplingRate > 0 && l.rnd.Float64() > c.SamplingRate {
		return
	}
	us := tx.End.UnixMicro()
	b := strconv.AppendInt(l.line[:0], int64(tx.Client), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, n, 10)
	b = append(b, ' ')
	b = append(b, resultField(c, tx)...)
	if !tx.Skipped && tx.SQLState == "" {
		b = strconv.AppendFloat(b, latency, 'f', 0, 64)
	}
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(tx.Script), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, us/1e6, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, us%1e6, 10)
	if c.Rate > 0 {
		b = append(b, ' ')
		b = strconv.AppendFloat(b, lag, 'f', 0, 64)
	}
	if c.MaxTries != 1 {
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(tx.Retries), 10)
	}
	b = append(b, '\n')
	_, _ = w.Write(b)
	l.line = b
}

// resultField is what a per-transaction line has in its time field
// instead of the latency (pgbench's getResultString): "skipped",
// "failed", or with --failures-detailed the kind of failure; "" for a
// success (the latency goes there).
func resultField(c *Config, tx wpgbench.Transaction) string {
	kind := ""
	switch {
	case tx.Skipped:
		return "skipped"
	case tx.SQLState == "":
		return ""
	case tx.SQLState == script.SerializationFailure:
		kind = "serialization"
	case tx.SQLState == script.DeadlockDetected:
		kind = "deadlock"
	default:
		kind = "other"
	}
	if c.FailuresDetailed {
		return kind
	}
	return "failed"
}

// writeAgg writes thread t's current interval as pgbench 15 does: 15
// fields, interval_start num_transactions sum_latency sum_latency_2
// min_latency max_latency sum_lag sum_lag_2 min_lag max_lag skipped
// retried retries serialization_failures deadlock_failures. A field that
// means nothing with the options given is 0: the lags without -R, skipped
// without -L, retried and retries with --max-tries 1, the failures by
// kind without --failures-detailed (pgbench 18's --continue-on-error
// failures are in deadlock_failures' place, pgbench 15-17 having no
// such column).
func (l *txLog) writeAgg(t int) {
	a := &l.aggs[t]
	c := l.cfg
	var skipped, retried, retries, serialization, deadlock int64
	if c.LatencyLimitMs > 0 {
		skipped = a.skipped
	}
	if c.MaxTries != 1 {
		retried, retries = a.retried, a.retries
	}
	if c.FailuresDetailed {
		serialization, deadlock = a.serialization, a.deadlock+a.other
	}
	fmt.Fprintf(l.w[t], "%d %d %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %d %d %d %d %d\n", a.start.Unix(), a.cnt,
		a.lat.sum, a.lat.sum2, a.latMin, a.lat.max, a.lag.sum, a.lag.sum2, a.lagMin, a.lag.max,
		skipped, retried, retries, serialization, deadlock)
}

// close writes the last intervals and closes the files.
func (l *txLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first error
	if l.hfile != nil {
		l.hdrFlush()
		if err := l.hw.Flush(); err != nil {
			first = err
		}
		if err := l.hfile.Close(); err != nil && first == nil {
			first = err
		}
		l.hfile = nil
	}
	for t := range l.files {
		if l.cfg.AggregateInterval > 0 && t < len(l.aggs) && !l.aggs[t].start.IsZero() {
			l.writeAgg(t)
		}
		if err := l.w[t].Flush(); err != nil && first == nil {
			first = err
		}
		if err := l.files[t].Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
