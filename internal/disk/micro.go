// Package disk compares candidate storage directories (a disk, an NVMe
// mount, /dev/shm, a fresh tmpfs) the way PostgreSQL uses them: micro
// patterns (8 KiB random reads and writes, WAL-like synchronous 8 KiB
// writes as pg_test_fsync does them, the temp-table file churn) and macro
// operations of the ERP workload on a tablespace placed on each path
// (see Macro). CONTEXT.md section 2 is the reason: raw device speed does
// not predict database speed, so both are measured and ranked.
//
// Every file is created under a fresh directory erplab-disk-* inside the
// candidate path and the directory is removed when a measurement ends,
// also when ctx is cancelled (Ctrl-C).
package disk

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"
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
	// Progress, when not nil, receives one line per finished pattern.
	Progress func(format string, args ...any)
}

// DefaultOptions are the flags' defaults; QuickOptions fit all micro
// patterns of two paths in about 40 s.
func DefaultOptions() Options {
	return Options{FileBytes: 512 << 20, Duration: 5 * time.Second, QueueDepth: 16, ChurnFiles: 50000, Seed: 1}
}

// QuickOptions are DefaultOptions for --quick.
func QuickOptions() Options {
	return Options{FileBytes: 64 << 20, Duration: 2 * time.Second, QueueDepth: 8, ChurnFiles: 10000, Seed: 1}
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

// Result is one pattern measured on one path.
type Result struct {
	Pattern string `json:"pattern"`
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
	Note         string    `json:"note,omitempty"`
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

// Measure runs every micro pattern on path, in the order of Patterns,
// after checking that the path is a directory with opts.NeedBytes free
// (error wrapping ErrNoSpace otherwise). Files go to a fresh
// erplab-disk-* directory under path that is removed before Measure
// returns, also when ctx is cancelled; then the results so far are
// returned with ctx's error.
func Measure(ctx context.Context, path string, opts Options) (res PathResult, err error) {
	if err := opts.Validate(); err != nil {
		return PathResult{}, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return PathResult{}, fmt.Errorf("disk: %w", err)
	}
	if !fi.IsDir() {
		return PathResult{}, fmt.Errorf("disk: %s is not a directory", path)
	}
	res.Path = path
	res.FSType, res.FreeBytes, err = Space(path)
	if err != nil {
		return res, err
	}
	if need := opts.NeedBytes(); res.FreeBytes < need {
		return res, fmt.Errorf("disk: %s: %d MiB free, need %d MiB: %w", path, res.FreeBytes>>20, need>>20, ErrNoSpace)
	}
	dir, err := os.MkdirTemp(path, "erplab-disk-")
	if err != nil {
		return res, fmt.Errorf("disk: %w", err)
	}
	defer func() {
		if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
			err = fmt.Errorf("disk: remove %s: %w", dir, rerr)
		}
	}()
	say := func(r Result) {
		if opts.Progress != nil {
			opts.Progress("%s %s: %.0f ops/s, p99 %.0f µs", path, r.Pattern, r.OpsPerS, r.P99us)
		}
	}
	data := filepath.Join(dir, "data")
	if err := fill(ctx, data, opts.FileBytes/BlockSize*BlockSize); err != nil {
		return res, err
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x5eed))
	for _, p := range Patterns() {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("disk: %s: interrupted: %w", path, err)
		}
		var r Result
		switch p {
		case RandReadQD1, RandReadQDN, RandWriteQD1, RandWriteQDN:
			qd := 1
			if p == RandReadQDN || p == RandWriteQDN {
				qd = opts.QueueDepth
			}
			r, err = random(ctx, data, p == RandWriteQD1 || p == RandWriteQDN, qd, opts.Duration, rng.Uint64())
		case WALFdatasync, WALODsync:
			r, err = wal(ctx, filepath.Join(dir, "wal"), p == WALODsync, opts.Duration)
		case TempChurnSync, TempChurn:
			r, err = churn(ctx, filepath.Join(dir, p), p == TempChurnSync, opts.ChurnFiles, opts.Duration)
		}
		if err != nil {
			return res, fmt.Errorf("disk: %s: %s: %w", path, p, err)
		}
		r.Pattern = p
		res.Results = append(res.Results, r)
		say(r)
	}
	return res, nil
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

func finish(r *Result, h *hdrhistogram.Histogram, elapsed time.Duration) {
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
func random(ctx context.Context, name string, write bool, qd int, d time.Duration, seed uint64) (Result, error) {
	flags := unix.O_RDONLY
	if write {
		flags = unix.O_WRONLY
	}
	fd, direct, err := openDirect(name, flags)
	if err != nil {
		return Result{}, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Result{}, fmt.Errorf("fstat %s: %w", name, err)
	}
	blocks := st.Size / BlockSize
	if blocks < 1 {
		return Result{}, fmt.Errorf("%s: empty data file", name)
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
		return Result{}, err
	}
	h := newHist()
	for _, x := range hists {
		h.Merge(x)
	}
	res := Result{Direct: direct, QueueDepth: qd}
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
func wal(ctx context.Context, name string, odsync bool, d time.Duration) (Result, error) {
	if _, err := os.Stat(name); errors.Is(err, os.ErrNotExist) {
		if err := fill(ctx, name, walSegmentBytes); err != nil {
			return Result{}, err
		}
	}
	flags := unix.O_WRONLY | unix.O_CLOEXEC
	if odsync {
		flags |= unix.O_DSYNC
	}
	fd, err := unix.Open(name, flags, 0o600)
	if err != nil {
		return Result{}, fmt.Errorf("open %s: %w", name, err)
	}
	defer unix.Close(fd)
	buf := make([]byte, BlockSize)
	h := newHist()
	deadline := time.Now().Add(d)
	start := time.Now()
	for off := int64(0); ctx.Err() == nil && time.Now().Before(deadline); off = (off + BlockSize) % walSegmentBytes {
		t0 := time.Now()
		if _, err := unix.Pwrite(fd, buf, off); err != nil {
			return Result{}, fmt.Errorf("write %s: %w", name, err)
		}
		if !odsync {
			if err := unix.Fdatasync(fd); err != nil {
				return Result{}, fmt.Errorf("fdatasync %s: %w", name, err)
			}
		}
		_ = h.RecordValue(max(time.Since(t0).Microseconds(), 1))
	}
	res := Result{QueueDepth: 1}
	finish(&res, h, time.Since(start))
	return res, nil
}

// churn is the temp-table file pattern (CONTEXT.md section 3): in one
// directory, create a file, write 8 KiB, fsync it (doSync), close, and
// keep it, until maxFiles files or d has passed, so the directory fills;
// then unlink every file. The rate is files per second of create+unlink
// time; RateOverTime gives the create rate in each tenth of the files.
func churn(ctx context.Context, dir string, doSync bool, maxFiles int, d time.Duration) (Result, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return Result{}, err
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
			return Result{}, fmt.Errorf("create: %w", err)
		}
		_, err = unix.Write(fd, buf)
		if err == nil && doSync {
			err = unix.Fsync(fd)
		}
		if cerr := unix.Close(fd); err == nil {
			err = cerr
		}
		if err != nil {
			return Result{}, fmt.Errorf("file %d: %w", n, err)
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
			return Result{}, fmt.Errorf("unlink: %w", err)
		}
		_ = h.RecordValue(max(lat[i]+time.Since(t0).Microseconds(), 1))
	}
	unlinked := time.Since(u0)
	res := Result{QueueDepth: 1, RateOverTime: rates}
	finish(&res, h, created+unlinked)
	if unlinked > 0 {
		res.UnlinkPerS = round2(float64(n) / unlinked.Seconds())
	}
	if n < maxFiles {
		res.Note = fmt.Sprintf("time bound: %d of %d files", n, maxFiles)
	}
	return res, nil
}

// Rank orders the paths that ran pattern by ops/s, best first, and
// returns their indexes into paths (stable for equal ops/s).
func Rank(paths []PathResult, pattern string) []int {
	var idx []int
	for i, p := range paths {
		if _, ok := p.Result(pattern); ok {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ra, _ := paths[idx[a]].Result(pattern)
		rb, _ := paths[idx[b]].Result(pattern)
		return ra.OpsPerS > rb.OpsPerS
	})
	return idx
}
