package loadtest

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/safefile"
)

// DefaultMaxClockOffset is the default bound of an agent's clock offset
// against the server's (--max-clock-offset).
const DefaultMaxClockOffset = 250 * time.Millisecond

// StartGrace is how late after --start-at an agent may begin and still
// count as on time; a later one runs but marks its segment incomplete.
const StartGrace = time.Second

// NewRunID returns a fresh random run id: 16 hex digits.
func NewRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail on Linux
	return hex.EncodeToString(b[:])
}

// ValidRunID checks a --run-id: 1 to 64 characters of [A-Za-z0-9._-],
// as it names files.
func ValidRunID(id string) error {
	if id == "" || len(id) > 64 {
		return fmt.Errorf("--run-id %q: want 1 to 64 characters", id)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') || id[0] == '.' {
			return fmt.Errorf("--run-id %q: only letters, digits, '.', '_' and '-' (it names the results files)", id)
		}
	}
	return nil
}

// configHash is the hash of what must be equal across the agents of one
// run: the parameters without the server's address and what the workload
// reports after the run, and the segment sequence (not the piece).
func configHash(p Parameters, opts Options) string {
	p.Server, p.WorkloadDetails = "", nil
	seq := ""
	if !opts.Segment.Whole() {
		seq = opts.Segment.Sequence
	}
	b, _ := json.Marshal(struct {
		P            Parameters `json:"p"`
		Mix          string     `json:"mix"`
		Sequence     string     `json:"sequence"`
		GracefulStop float64    `json:"graceful_stop_s"`
	}{p, opts.Mix, seq, opts.GracefulStop.Seconds()})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// segmentInfo is the document's segment section of opts (nil for a
// whole run).
func segmentInfo(opts Options) *results.SegmentInfo {
	s := opts.Segment
	if s.Whole() {
		return nil
	}
	host, _ := os.Hostname()
	return &results.SegmentInfo{
		Index: s.Index + 1, Count: s.Count, From: s.From.RatString(), To: s.To.RatString(), Sequence: s.Sequence,
		StartAt: opts.StartAt, Host: host,
	}
}

// segmentPath is a segmented run's results file: out itself when it names
// a .json file, else <out or ./erplab-results>/<run id>-<I>of<N>.json
// (out naming a directory, or ending in /). When that file or its stream
// exists already and belongs to the same run id and segment (its header
// says so; an empty stream, reserved by an agent killed before its
// header, counts too), an agent restarted: the path is
// <stem>-restart-<K>.json, attempt is K and restarted names the earlier
// file. A file of another run or segment there is refused (one line, not
// overwritten, nothing created).
func segmentPath(out string, in *safefile.Root, runID string, s *engine.Segment, perm fs.FileMode) (loc resultsLoc, stream *os.File, restarted string, attempt int, err error) {
	dir, file := "", ""
	switch {
	case in != nil:
		if out != "" {
			file = filepath.Base(out)
		}
	case out == "":
	case strings.HasSuffix(out, "/"):
		dir = out
	default:
		if st, err := os.Stat(out); err == nil && st.IsDir() {
			dir = out
		} else {
			dir, file = filepath.Dir(out), filepath.Base(out)
		}
	}
	if file == "" {
		file = fmt.Sprintf("%s-%dof%d.json", runID, s.Index+1, s.Count)
	}
	loc.dir = in
	if in == nil {
		if loc.dir, err = ResultsDir(dir); err != nil {
			return resultsLoc{}, nil, "", 0, err
		}
		loc.own = true
	}
	stem := strings.TrimSuffix(file, ".json")
	for k := 1; ; k++ {
		loc.name = stem + ".json"
		if k > 1 {
			loc.name = fmt.Sprintf("%s-restart-%d.json", stem, k)
		}
		_, e1 := loc.dir.Lstat(loc.name) // a symbolic link counts: never written through
		_, e2 := loc.dir.Lstat(loc.streamName())
		if e1 == nil || e2 == nil {
			earlier := loc.path()
			if e1 != nil {
				earlier = loc.dir.Join(loc.streamName())
			}
			if err := sameSegment(earlier, runID, s); err != nil {
				loc.close()
				return resultsLoc{}, nil, "", 0, err
			}
			if restarted == "" {
				restarted = earlier
			}
			continue
		}
		f, err := loc.dir.Create(loc.streamName(), perm)
		if err != nil {
			loc.close()
			return resultsLoc{}, nil, "", 0, fmt.Errorf("results: %w", err)
		}
		return loc, f, restarted, k, nil
	}
}

// sameSegment checks that the results file p (a document or a stream)
// is an attempt of segment s of run runID; an empty file (a stream
// reserved before its header) passes.
func sameSegment(p, runID string, s *engine.Segment) error {
	if st, err := os.Stat(p); err == nil && st.Size() == 0 {
		return nil
	}
	d, err := results.Read(p)
	if err != nil {
		return fmt.Errorf("results: %s exists and is not a readable results file (%v): give another --out, erplab does not overwrite it", p, err)
	}
	want := segmentInfo(Options{Segment: s})
	switch g := d.Segment; {
	case g == nil:
		return fmt.Errorf("results: %s holds a run that is not a segment (run %q): give another --out, erplab does not overwrite another run's results", p, d.RunID)
	case d.RunID != runID || g.From != want.From || g.To != want.To || g.Sequence != want.Sequence:
		return fmt.Errorf("results: %s holds segment %s of run %q, not segment %s of run %q: give another --out, erplab does not overwrite another run's results", p, g.Label(), d.RunID, want.Label(), runID)
	}
	return nil
}

// ErrClockOffset is wrapped by the error of an agent whose clock is off
// the server's by more than --max-clock-offset.
var ErrClockOffset = errors.New("clock offset above the bound")

// measureClock estimates this host's clock offset against the server's:
// over rounds round trips of SELECT clock_timestamp(), offset = server
// time - midpoint of the round trip, from the round trip with the
// shortest time (the least uncertain; the error is at most half of it).
func measureClock(ctx context.Context, pool *pgxpool.Pool, rounds int) (offset, rtt time.Duration, err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("clock check: %s", conninfo.Describe(err))
	}
	defer conn.Release()
	rtt = -1
	for i := 0; i < rounds; i++ {
		var srv time.Time
		t0 := time.Now()
		if err := conn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&srv); err != nil {
			return 0, 0, fmt.Errorf("clock check: %w", err)
		}
		t1 := time.Now()
		if d := t1.Sub(t0); rtt < 0 || d < rtt {
			rtt = d
			offset = srv.Sub(t0.Add(d / 2))
		}
	}
	return offset, rtt, nil
}

// waitStart waits until at (the --start-at barrier) unless ctx ends; it
// returns how late the agent arrived (0 when on time or early).
func waitStart(ctx context.Context, at time.Time, say func(string, ...any)) (late time.Duration, err error) {
	if at.IsZero() {
		return 0, nil
	}
	now := time.Now()
	if d := at.Sub(now); d > 0 {
		say("waiting %s for --start-at %s", d.Round(10*time.Millisecond), at.Format(time.RFC3339Nano))
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return 0, ErrInterrupted
		}
		return 0, nil
	}
	return now.Sub(at), nil
}

// cpuMeter measures the process's CPU time over the run and per interval.
type cpuMeter struct {
	cores     int
	start     time.Time
	cpu0      time.Duration
	lastWall  time.Time
	lastCPU   time.Duration
	perIv     []float64
	available bool
}

func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

func newCPUMeter(start time.Time) *cpuMeter {
	c, ok := processCPU()
	return &cpuMeter{cores: runtime.GOMAXPROCS(0), start: start, cpu0: c, lastWall: start, lastCPU: c, available: ok}
}

// interval records the utilization since the previous call (from the
// engine's controller goroutine, once per closed interval).
func (m *cpuMeter) interval(now time.Time) {
	c, _ := processCPU()
	if wall := now.Sub(m.lastWall); wall > 0 {
		m.perIv = append(m.perIv, round3(float64(c-m.lastCPU)/float64(wall)/float64(m.cores)))
	} else {
		m.perIv = append(m.perIv, 0)
	}
	m.lastWall, m.lastCPU = now, c
}

// finish is the run's AgentCPU (nil when the CPU time cannot be read).
func (m *cpuMeter) finish(end time.Time) *results.AgentCPU {
	if !m.available {
		return nil
	}
	c, _ := processCPU()
	wall := end.Sub(m.start)
	a := &results.AgentCPU{CPUSeconds: round3((c - m.cpu0).Seconds()), WallSeconds: round3(wall.Seconds()), Cores: m.cores, PerInterval: m.perIv}
	if wall > 0 {
		a.Utilization = round3(float64(c-m.cpu0) / float64(wall) / float64(m.cores))
	}
	hot := 0
	for _, u := range m.perIv {
		if u >= 0.95 {
			hot++
		}
	}
	a.Saturated = a.Utilization >= 0.85 || (len(m.perIv) > 0 && hot*5 >= len(m.perIv) && hot > 0)
	return a
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

// incompleteReasons lists why a segment does not hold its full share:
// a status other than completed, the server unanswering until the end.
func incompleteReasons(doc *results.Document, outcome engine.Outcome) []string {
	var why []string
	if doc.Status != results.StatusCompleted {
		why = append(why, "run "+string(doc.Status))
	}
	if outcome.NotAnsweringAtEnd() && doc.Status == results.StatusCompleted {
		why = append(why, "lost the server: it answered nothing until the end")
	}
	return why
}

// printAgent prints the segment and the agent's CPU lines of the summary.
func printAgent(w io.Writer, doc *results.Document) {
	if s := doc.Segment; s != nil {
		state := "complete"
		if len(s.Incomplete) > 0 {
			state = "INCOMPLETE: " + strings.Join(s.Incomplete, "; ")
		}
		fmt.Fprintf(w, "run %s, segment %s (%s:%s), config %s, clock offset %+.1fms: %s\n", doc.RunID, s.Label(), s.From, s.To, doc.ConfigHash, s.ClockOffsetMs, state)
	}
	if a := doc.Agent; a != nil && (doc.Segment != nil || a.Saturated) {
		sat := ""
		if a.Saturated {
			sat = " - SATURATED: the load generator's CPU was near its capacity, latencies may be its own"
		}
		fmt.Fprintf(w, "load generator CPU: %.1f s over %.1f s on %d cores (%.0f%%)%s\n", a.CPUSeconds, a.WallSeconds, a.Cores, a.Utilization*100, sat)
	}
}

// checkSegment refuses a segmented run without a shared server or a run
// id, and a share of VUs or connections the segment cannot take.
func checkSegment(opts Options, maxVUs int) error {
	segmented := !opts.Segment.Whole()
	if segmented && opts.DSN == "" && !opts.EnvGiven {
		return errors.New("--segment needs the server all agents share: give --dsn (or the PG* environment)")
	}
	if err := opts.Segment.CheckShare(maxVUs, opts.Connections); err != nil {
		return err
	}
	if segmented && opts.RunID == "" {
		return errors.New("--segment needs --run-id: every agent of the run must be given the same one")
	}
	return nil
}

// checkAgent is a segmented agent's check before its load: its clock
// against the server's (refused beyond --max-clock-offset), and a
// restart after an earlier attempt said and recorded. It returns the
// document's segment section (nil for a whole run).
func checkAgent(ctx context.Context, opts Options, pool *pgxpool.Pool, files *runFiles, out io.Writer) (*results.SegmentInfo, error) {
	seg := segmentInfo(opts)
	if seg == nil {
		return nil, nil
	}
	bound := cmp.Or(opts.MaxClockOffset, DefaultMaxClockOffset)
	offset, rtt, err := measureClock(ctx, pool, 7)
	if err != nil {
		return nil, err
	}
	if offset.Abs() > bound {
		return nil, fmt.Errorf("%w: this agent's clock is %+.1fms off the server's (round trip %.1fms), more than --max-clock-offset %s: synchronise the clocks (chrony, NTP)",
			ErrClockOffset, float64(offset)/1e6, float64(rtt)/1e6, bound)
	}
	seg.ClockOffsetMs, seg.ClockRTTMs = round3(float64(offset)/1e6), round3(float64(rtt)/1e6)
	if files.restarted != "" {
		seg.Restart = files.attempt
		seg.Incomplete = append(seg.Incomplete, fmt.Sprintf("restarted: an earlier attempt of this segment left %s", files.restarted))
		fmt.Fprintf(out, "segment %s: an earlier attempt left %s; this attempt runs into %s and marks the segment incomplete\n", opts.Segment, files.restarted, files.path)
	}
	return seg, nil
}

// printSegmentBanner is the banner's line of a segmented agent: its
// piece of the run.
func printSegmentBanner(w io.Writer, opts Options, seg *results.SegmentInfo, maxVUs int) {
	fmt.Fprintf(w, "run %s, segment %s (%s:%s of %s): this agent runs %d of the %d VUs max on %s, %.4g of the arrival rate\n",
		opts.RunID, opts.Segment, seg.From, seg.To, seg.Sequence, opts.Segment.Scale(maxVUs), maxVUs, poolDesc(opts.Segment.Scale(opts.Connections)), opts.Segment.Length())
}
