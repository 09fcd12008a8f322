package disk

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"

	"github.com/erplab/erplab/internal/leftover"
)

// BlockSize is PostgreSQL's page and WAL block size, bytes (BLCKSZ and
// XLOG_BLCKSZ of src/include/pg_config.h, default builds).
const BlockSize = 8192

// walSegmentBytes is the file the WAL patterns cycle through: one WAL
// segment (wal_segment_size default), as pg_test_fsync's 16 MB test file
// (src/bin/pg_test_fsync/pg_test_fsync.c).
const walSegmentBytes = 16 << 20

// Micro pattern names, in the order they run.
const (
	RandReadQD1   = "randread_8k_qd1"
	RandReadQDN   = "randread_8k_qdN"
	RandWriteQD1  = "randwrite_8k_qd1"
	RandWriteQDN  = "randwrite_8k_qdN"
	WALFdatasync  = "wal_8k_fdatasync"
	WALODsync     = "wal_8k_o_dsync"
	TempChurnSync = "temp_churn_fsync"
	TempChurn     = "temp_churn_nofsync"
)

// Patterns lists the micro patterns in run order.
func Patterns() []string {
	return []string{RandReadQD1, RandReadQDN, RandWriteQD1, RandWriteQDN, WALFdatasync, WALODsync, TempChurnSync, TempChurn}
}

// Options bound a micro measurement.
type Options struct {
	// FileBytes is the size of the random I/O data file, bytes (at least
	// 1 MiB; a multiple of BlockSize is used).
	FileBytes int64
	// Duration bounds each pattern's timed phase (> 0).
	Duration time.Duration
	// QueueDepth is N of the qdN patterns: N goroutines each with one
	// synchronous pread/pwrite in flight (like fio's psync engine with
	// numjobs=N; Go has no libaio). At least 2.
	QueueDepth int
	// ChurnFiles is the most files the temp-table churn creates in its
	// one directory (at least 100).
	ChurnFiles int
	// Seed makes the random offsets reproducible.
	Seed uint64
	// Repeats is how many times each pattern runs on each path
	// (1..MaxRepeats), interleaved across the paths (MeasureAll).
	Repeats int
	// Progress, when not nil, receives one line per finished run.
	Progress func(format string, args ...any)
}

// DefaultOptions are the flags' defaults: 5 s per run, 3 repeats, so
// 2 min per path.
func DefaultOptions() Options {
	return Options{FileBytes: 512 << 20, Duration: 5 * time.Second, QueueDepth: 16, ChurnFiles: 50000, Seed: 1, Repeats: 3}
}

// QuickOptions are DefaultOptions for --quick: 1 s per run, 3 repeats,
// about 25 s per path.
func QuickOptions() Options {
	return Options{FileBytes: 64 << 20, Duration: time.Second, QueueDepth: 8, ChurnFiles: 10000, Seed: 1, Repeats: 3}
}

// Validate checks the bounds; errors are one line.
func (o Options) Validate() error {
	switch {
	case o.FileBytes < 1<<20:
		return fmt.Errorf("disk: file size %d bytes: want at least 1 MiB", o.FileBytes)
	case o.Duration <= 0 || o.Duration > time.Hour:
		return fmt.Errorf("disk: pattern duration %s: want > 0 and at most 1h", o.Duration)
	case o.QueueDepth < 2 || o.QueueDepth > 256:
		return fmt.Errorf("disk: queue depth %d: want 2..256", o.QueueDepth)
	case o.ChurnFiles < 100 || o.ChurnFiles > 10_000_000:
		return fmt.Errorf("disk: churn files %d: want 100..10000000", o.ChurnFiles)
	case o.Repeats < 1 || o.Repeats > MaxRepeats:
		return fmt.Errorf("disk: repeats %d: want 1..%d", o.Repeats, MaxRepeats)
	}
	return nil
}

// NeedBytes is the free space a micro measurement needs on a path: the
// data file, the WAL segment, the churn's files (a 4 KiB block of inode
// and directory overhead each on top of 8 KiB of data), plus 10 %.
func (o Options) NeedBytes() int64 {
	n := o.FileBytes + walSegmentBytes + int64(o.ChurnFiles)*(BlockSize+4096)
	return n + n/10
}

// Run is one run of one pattern on one path (one repeat).
type Run struct {
	// Round is the repeat's round, 0-based; Position is the path's place
	// in that round's order (Order), 0 = measured first.
	Round    int `json:"round"`
	Position int `json:"position"`
	// Direct tells whether O_DIRECT was used (random patterns; tmpfs and
	// some file systems refuse it, then the page cache serves the I/O).
	Direct bool `json:"o_direct"`
	// QueueDepth is the number of concurrent requests.
	QueueDepth int     `json:"queue_depth"`
	Ops        int64   `json:"ops"`
	Seconds    float64 `json:"seconds"`
	OpsPerS    float64 `json:"ops_per_s"`
	// MiBPerS is the data rate, MiB/s (8 KiB per op).
	MiBPerS float64 `json:"mib_per_s"`
	// Latency percentiles of one op, µs (for churn: one file's create,
	// write, fsync if any, close and later unlink share).
	P50us float64 `json:"p50_us"`
	P95us float64 `json:"p95_us"`
	P99us float64 `json:"p99_us"`
	MaxUs float64 `json:"max_us"`
	// RateOverTime is, for the churn patterns, files created per second
	// in each tenth of the files (the directory filling up), then
	// UnlinkPerS the rate of removing them all.
	RateOverTime []float64 `json:"files_per_s_over_fill,omitempty"`
	UnlinkPerS   float64   `json:"unlink_per_s,omitempty"`
	// FilesWanted is, for a churn run that hit its time bound before
	// creating all its files, how many it was to create (Ops created).
	FilesWanted int    `json:"files_wanted,omitempty"`
	Note        string `json:"note,omitempty"`
}

// Result is one pattern measured on one path over its repeats.
type Result struct {
	Pattern string `json:"pattern"`
	// Direct and QueueDepth are the runs' (the same in every run).
	Direct     bool `json:"o_direct"`
	QueueDepth int  `json:"queue_depth"`
	// OpsPerS is the spread of the runs' operations per second: the
	// figure that is ranked.
	OpsPerS Spread `json:"ops_per_s"`
	// MiBPerS and the latency percentiles, µs, are the medians of the
	// runs' figures.
	MiBPerS float64 `json:"mib_per_s"`
	P50us   float64 `json:"p50_us"`
	P95us   float64 `json:"p95_us"`
	P99us   float64 `json:"p99_us"`
	MaxUs   float64 `json:"max_us"`
	// Runs are the repeats in round order.
	Runs []Run `json:"runs"`
	// Note is the notes of the runs, distinct ones joined by "; ".
	Note string `json:"note,omitempty"`
}

// MedianRun is the run whose ops/s is the median (the lower middle one
// of an even count), for the figures that are not summarised (the churn's
// rate over the fill); the zero Run when there is none.
func (r Result) MedianRun() Run {
	if len(r.Runs) == 0 {
		return Run{}
	}
	idx := make([]int, len(r.Runs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return r.Runs[idx[a]].OpsPerS < r.Runs[idx[b]].OpsPerS })
	return r.Runs[idx[(len(idx)-1)/2]]
}

// summarise fills the Result's figures from its runs.
func (r *Result) summarise() {
	med := func(f func(Run) float64) float64 {
		vs := make([]float64, len(r.Runs))
		for i, x := range r.Runs {
			vs[i] = f(x)
		}
		return NewSpread(vs).Median
	}
	ops := make([]float64, len(r.Runs))
	var notes []string
	var bound []float64 // files created by time-bound churn runs
	wanted := 0
	for i, x := range r.Runs {
		ops[i] = x.OpsPerS
		switch {
		case x.FilesWanted > 0:
			bound, wanted = append(bound, float64(x.Ops)), x.FilesWanted
		case x.Note != "" && !slices.Contains(notes, x.Note):
			notes = append(notes, x.Note)
		}
	}
	if b := NewSpread(bound); len(bound) > 0 {
		notes = append(notes, fmt.Sprintf("time bound in %d of %d runs: %.0f-%.0f of %d files", len(bound), len(r.Runs), b.Min, b.Max, wanted))
	}
	if len(r.Runs) > 0 {
		r.Direct, r.QueueDepth = r.Runs[0].Direct, r.Runs[0].QueueDepth
	}
	r.OpsPerS = NewSpread(ops)
	r.MiBPerS = round2(med(func(x Run) float64 { return x.MiBPerS }))
	r.P50us = med(func(x Run) float64 { return x.P50us })
	r.P95us = med(func(x Run) float64 { return x.P95us })
	r.P99us = med(func(x Run) float64 { return x.P99us })
	r.MaxUs = med(func(x Run) float64 { return x.MaxUs })
	r.Note = strings.Join(notes, "; ")
}

// PathResult is the micro measurement of one candidate path.
type PathResult struct {
	Path string `json:"path"`
	// FSType is the file system type (statfs(2) magic, named for the
	// common ones).
	FSType    string   `json:"fs_type"`
	FreeBytes int64    `json:"free_bytes"`
	Results   []Result `json:"results"`
}

// Result returns the result of one pattern, false when it did not run.
func (p PathResult) Result(pattern string) (Result, bool) {
	for _, r := range p.Results {
		if r.Pattern == pattern {
			return r, true
		}
	}
	return Result{}, false
}

// ErrNoSpace is wrapped by Measure when a path lacks the free space.
var ErrNoSpace = errors.New("not enough free space")

// Space returns the file system type and the bytes free to unprivileged
// users under path (statfs(2) f_bavail × f_bsize).
func Space(path string) (fsType string, free int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return "", 0, fmt.Errorf("disk: statfs %s: %w", path, err)
	}
	return fsName(st.Type), int64(st.Bavail) * st.Bsize, nil
}

func fsName(magic int64) string {
	switch uint32(magic) {
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlay"
	case unix.NFS_SUPER_MAGIC:
		return "nfs"
	}
	return fmt.Sprintf("0x%x", uint32(magic))
}

// Measure is MeasureAll of one path.
func Measure(ctx context.Context, path string, opts Options) (PathResult, error) {
	res, err := MeasureAll(ctx, []string{path}, opts)
	if len(res) == 0 {
		return PathResult{}, err
	}
	return res[0], err
}

// bench is one path's working directory during MeasureAll.
type bench struct {
	path, dir, data string
	entry           *leftover.Entry // the dir's crash-safe record
}

// MeasureAll runs every micro pattern opts.Repeats times on every path
// (package doc, "Repeats and rounds"): for each pattern, in the order of
// Patterns, round r runs it once on each path in the order Order(n, r)
// of the paths sorted by name, so the schedule depends on the set of
// paths, not on the order they are given in. Before anything is written
// each path must be a directory with opts.NeedBytes free (error wrapping
// ErrNoSpace otherwise); paths must be distinct. Files go to a fresh
// erplab-disk-* directory under each path that is removed before
// MeasureAll returns, also when ctx is cancelled; then the results so
// far (patterns complete on every path) are returned with ctx's error.
// The results are in the order of paths.
func MeasureAll(ctx context.Context, paths []string, opts Options) (res []PathResult, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	canon, err := canonical(paths)
	if err != nil {
		return nil, err
	}
	res = make([]PathResult, len(paths))
	for i, path := range paths {
		fi, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("disk: %w", err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("disk: %s is not a directory", path)
		}
		res[i].Path = path
		res[i].FSType, res[i].FreeBytes, err = Space(path)
		if err != nil {
			return nil, err
		}
		if need := opts.NeedBytes(); res[i].FreeBytes < need {
			return nil, fmt.Errorf("disk: %s: %d MiB free, need %d MiB: %w", path, res[i].FreeBytes>>20, need>>20, ErrNoSpace)
		}
	}
	// Each path's directory is recorded before it is made
	// (leftover.MkdirTemp): the next erplab command removes what a killed
	// one left.
	rec, err := leftover.Open()
	if err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	benches := make([]bench, len(paths))
	defer func() {
		for _, b := range benches {
			if b.dir == "" {
				continue
			}
			if rerr := rec.RemoveDir(b.entry); rerr != nil && err == nil {
				err = fmt.Errorf("disk: remove %s: %w", b.dir, rerr)
			}
		}
	}()
	for i, path := range paths {
		dir, e, err := rec.MkdirTemp(path, "erplab-disk-")
		if err != nil {
			return nil, fmt.Errorf("disk: %w", err)
		}
		benches[i] = bench{path: path, dir: dir, data: filepath.Join(dir, "data"), entry: e}
		if err := fill(ctx, benches[i].data, opts.FileBytes/BlockSize*BlockSize); err != nil {
			return nil, err
		}
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x5eed))
	for _, p := range Patterns() {
		runs := make([]Result, len(paths))
		for r := range opts.Repeats {
			for pos, ci := range Order(len(canon), r) {
				i := canon[ci]
				if err := ctx.Err(); err != nil {
					return done(res), fmt.Errorf("disk: %s: interrupted: %w", paths[i], err)
				}
				run, err := runPattern(ctx, benches[i], p, opts, rng.Uint64())
				if err != nil {
					return done(res), fmt.Errorf("disk: %s: %s: %w", paths[i], p, err)
				}
				run.Round, run.Position = r, pos
				runs[i].Runs = append(runs[i].Runs, run)
				if opts.Progress != nil {
					opts.Progress("round %d/%d %s %s: %.0f ops/s, p99 %.0f µs", r+1, opts.Repeats, paths[i], p, run.OpsPerS, run.P99us)
				}
			}
		}
		for i := range runs {
			runs[i].Pattern = p
			runs[i].summarise()
			res[i].Results = append(res[i].Results, runs[i])
		}
	}
	return res, nil
}

// done drops paths without results (none ran), for an early return.
func done(res []PathResult) []PathResult {
	if len(res) > 0 && len(res[0].Results) == 0 {
		return nil
	}
	return res
}

// canonical returns the indexes of paths sorted by cleaned path name, the
// order the rounds rotate; an error when a path is given twice.
func canonical(paths []string) ([]int, error) {
	idx := make([]int, len(paths))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return filepath.Clean(paths[idx[a]]) < filepath.Clean(paths[idx[b]]) })
	for k := 1; k < len(idx); k++ {
		if filepath.Clean(paths[idx[k]]) == filepath.Clean(paths[idx[k-1]]) {
			return nil, fmt.Errorf("disk: path %s given twice", paths[idx[k]])
		}
	}
	return idx, nil
}

// runPattern runs pattern p once in b.
func runPattern(ctx context.Context, b bench, p string, opts Options, seed uint64) (Run, error) {
	switch p {
	case RandReadQD1, RandReadQDN, RandWriteQD1, RandWriteQDN:
		qd := 1
		if p == RandReadQDN || p == RandWriteQDN {
			qd = opts.QueueDepth
		}
		return random(ctx, b.data, p == RandWriteQD1 || p == RandWriteQDN, qd, opts.Duration, seed)
	case WALFdatasync, WALODsync:
		return wal(ctx, filepath.Join(b.dir, "wal"), p == WALODsync, opts.Duration)
	case TempChurnSync, TempChurn:
		return churn(ctx, filepath.Join(b.dir, p), p == TempChurnSync, opts.ChurnFiles, opts.Duration)
	}
	return Run{}, fmt.Errorf("unknown pattern %q", p)
}

// fill writes size bytes of pseudo-random data to a new file and fsyncs it.
func fill(ctx context.Context, name string, size int64) error {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("disk: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	r := rand.New(rand.NewPCG(7, 7))
	for i := 0; i+8 <= len(buf); i += 8 {
		v := r.Uint64()
		for j := range 8 {
			buf[i+j] = byte(v >> (8 * j))
		}
	}
	for off := int64(0); off < size; off += int64(len(buf)) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("disk: fill %s: %w", name, err)
		}
		n := min(int64(len(buf)), size-off)
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return fmt.Errorf("disk: fill %s: %w", name, err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("disk: fsync %s: %w", name, err)
	}
	return f.Close()
}

// alignedBlock returns a BlockSize buffer aligned to 4096 bytes, as
// O_DIRECT requires (open(2), NOTES).
func alignedBlock() []byte {
	b := make([]byte, BlockSize+4096)
	off := 0
	if r := int(uintptrOf(b) % 4096); r != 0 {
		off = 4096 - r
	}
	return b[off : off+BlockSize : off+BlockSize]
}

// openDirect opens name with O_DIRECT, falling back to buffered I/O when
// the file system refuses it (EINVAL).
func openDirect(name string, flags int) (fd int, direct bool, err error) {
	fd, err = unix.Open(name, flags|unix.O_DIRECT|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return fd, true, nil
	}
	if !errors.Is(err, unix.EINVAL) {
		return -1, false, fmt.Errorf("open %s: %w", name, err)
	}
	fd, err = unix.Open(name, flags|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return -1, false, fmt.Errorf("open %s: %w", name, err)
	}
	return fd, false, nil
}

// newHist is a latency histogram, 1 µs .. 1 min, 3 digits.
func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, 60_000_000, 3) }

func finish(r *Run, h *hdrhistogram.Histogram, elapsed time.Duration) {
	r.Ops = h.TotalCount()
	r.Seconds = round2(elapsed.Seconds())
	if s := elapsed.Seconds(); s > 0 {
		r.OpsPerS = round2(float64(r.Ops) / s)
		r.MiBPerS = round2(float64(r.Ops) * BlockSize / (1 << 20) / s)
	}
	r.P50us = float64(h.ValueAtQuantile(50))
	r.P95us = float64(h.ValueAtQuantile(95))
	r.P99us = float64(h.ValueAtQuantile(99))
	r.MaxUs = float64(h.Max())
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

// random does 8 KiB preads or pwrites at random block offsets of the data
// file with qd goroutines, for d.
func random(ctx context.Context, name string, write bool, qd int, d time.Duration, seed uint64) (Run, error) {
	flags := unix.O_RDONLY
	if write {
		flags = unix.O_WRONLY
	}
	fd, direct, err := openDirect(name, flags)
	if err != nil {
		return Run{}, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Run{}, fmt.Errorf("fstat %s: %w", name, err)
	}
	blocks := st.Size / BlockSize
	if blocks < 1 {
		return Run{}, fmt.Errorf("%s: empty data file", name)
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	hists := make([]*hdrhistogram.Histogram, qd)
	errs := make([]error, qd)
	var wg sync.WaitGroup
	start := time.Now()
	for g := range qd {
		hists[g] = newHist()
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(g)))
			buf := alignedBlock()
			for i := range buf {
				buf[i] = byte(i * 31)
			}
			for ctx.Err() == nil {
				off := r.Int64N(blocks) * BlockSize
				t0 := time.Now()
				var err error
				if write {
					_, err = unix.Pwrite(fd, buf, off)
				} else {
					_, err = unix.Pread(fd, buf, off)
				}
				if err != nil {
					errs[g] = fmt.Errorf("offset %d: %w", off, err)
					return
				}
				_ = hists[g].RecordValue(max(time.Since(t0).Microseconds(), 1))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return Run{}, err
	}
	h := newHist()
	for _, x := range hists {
		h.Merge(x)
	}
	res := Run{Direct: direct, QueueDepth: qd}
	finish(&res, h, elapsed)
	if !direct {
		res.Note = "O_DIRECT refused: page cache"
	}
	return res, nil
}

// wal writes 8 KiB blocks sequentially through a pre-allocated 16 MiB
// file, cycling, each write made durable: write+fdatasync, or a write on
// an O_DSYNC descriptor (PostgreSQL's wal_sync_method fdatasync and
// open_datasync; pg_test_fsync's "write, fdatasync" and "open_datasync"
// lines, which it runs with O_DIRECT where possible; here O_DSYNC is
// buffered).
func wal(ctx context.Context, name string, odsync bool, d time.Duration) (Run, error) {
	if _, err := os.Stat(name); errors.Is(err, os.ErrNotExist) {
		if err := fill(ctx, name, walSegmentBytes); err != nil {
			return Run{}, err
		}
	}
	flags := unix.O_WRONLY | unix.O_CLOEXEC
	if odsync {
		flags |= unix.O_DSYNC
	}
	fd, err := unix.Open(name, flags, 0o600)
	if err != nil {
		return Run{}, fmt.Errorf("open %s: %w", name, err)
	}
	defer unix.Close(fd)
	buf := make([]byte, BlockSize)
	h := newHist()
	deadline := time.Now().Add(d)
	start := time.Now()
	for off := int64(0); ctx.Err() == nil && time.Now().Before(deadline); off = (off + BlockSize) % walSegmentBytes {
		t0 := time.Now()
		if _, err := unix.Pwrite(fd, buf, off); err != nil {
			return Run{}, fmt.Errorf("write %s: %w", name, err)
		}
		if !odsync {
			if err := unix.Fdatasync(fd); err != nil {
				return Run{}, fmt.Errorf("fdatasync %s: %w", name, err)
			}
		}
		_ = h.RecordValue(max(time.Since(t0).Microseconds(), 1))
	}
	res := Run{QueueDepth: 1}
	finish(&res, h, time.Since(start))
	return res, nil
}

// churn is the temp-table file pattern (CONTEXT.md section 3): in one
// directory, create a file, write 8 KiB, fsync it (doSync), close, and
// keep it, until maxFiles files or d has passed, so the directory fills;
// then unlink every file. The rate is files per second of create+unlink
// time; RateOverTime gives the create rate in each tenth of the files.
func churn(ctx context.Context, dir string, doSync bool, maxFiles int, d time.Duration) (Run, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return Run{}, err
	}
	defer os.RemoveAll(dir)
	buf := make([]byte, BlockSize)
	h := newHist()
	lat := make([]int64, 0, maxFiles)
	bucket := max(maxFiles/10, 1)
	var rates []float64
	deadline := time.Now().Add(d)
	start := time.Now()
	bstart := start
	n := 0
	for ; n < maxFiles && ctx.Err() == nil && time.Now().Before(deadline); n++ {
		t0 := time.Now()
		fd, err := unix.Open(filepath.Join(dir, fmt.Sprintf("t%d", n)), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return Run{}, fmt.Errorf("create: %w", err)
		}
		_, err = unix.Write(fd, buf)
		if err == nil && doSync {
			err = unix.Fsync(fd)
		}
		if cerr := unix.Close(fd); err == nil {
			err = cerr
		}
		if err != nil {
			return Run{}, fmt.Errorf("file %d: %w", n, err)
		}
		lat = append(lat, time.Since(t0).Microseconds())
		if (n+1)%bucket == 0 {
			now := time.Now()
			rates = append(rates, round2(float64(bucket)/now.Sub(bstart).Seconds()))
			bstart = now
		}
	}
	created := time.Since(start)
	u0 := time.Now()
	for i := range n {
		if ctx.Err() != nil {
			break // the deferred RemoveAll cleans up
		}
		t0 := time.Now()
		if err := unix.Unlink(filepath.Join(dir, fmt.Sprintf("t%d", i))); err != nil {
			return Run{}, fmt.Errorf("unlink: %w", err)
		}
		_ = h.RecordValue(max(lat[i]+time.Since(t0).Microseconds(), 1))
	}
	unlinked := time.Since(u0)
	res := Run{QueueDepth: 1, RateOverTime: rates}
	finish(&res, h, created+unlinked)
	if unlinked > 0 {
		res.UnlinkPerS = round2(float64(n) / unlinked.Seconds())
	}
	if n < maxFiles {
		res.Note = fmt.Sprintf("time bound: %d of %d files", n, maxFiles)
		res.FilesWanted = maxFiles
	}
	return res, nil
}

// RankMicro ranks the paths that ran pattern by the repeats of their
// ops/s under rule (Rank).
func RankMicro(paths []PathResult, pattern string, rule Rule) (Ranking, error) {
	var ss []Sample
	for _, p := range paths {
		if r, ok := p.Result(pattern); ok {
			ss = append(ss, Sample{Path: p.Path, Values: r.OpsPerS.Values})
		}
	}
	return Rank(pattern, true, ss, rule)
}
