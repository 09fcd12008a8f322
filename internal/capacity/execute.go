package capacity

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/exitcode"
	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/safefile"
)

// Config is one capacity search.
type Config struct {
	// Base is the run's options (workload, server, think time, seed,
	// observations ...); each step replaces Stages, Rate, Warmup,
	// Connections, Out, Progress and SkipSetup.
	Base   loadtest.Options
	Plan   Plan
	Target Target
	// Open switches to the open model: the load is arrivals per second,
	// served by Workers VUs.
	Open    bool
	Workers int
	// Hold is how long each step holds its load after Ramp (from 0);
	// the step's warm-up, not scored, is Ramp + Warmup.
	Hold, Ramp, Warmup time.Duration
	// Connections is the pool rule: -1 min(users, 100), 0 one per VU,
	// N > 0 that many.
	Connections int
	// UserOpsPerHour is recorded (the think time in Base is derived
	// from it by the caller, ThinkForPace).
	UserOpsPerHour float64
	// Out is the capacity document; "" =
	// ./erplab-results/<time>-capacity-<workload>.json. The steps' own
	// results go to <Out without .json>-steps/.
	Out string
	// OutRoot, when set, is the directory Out goes into, held open by
	// the caller (capacity A/B's searches directory): Out is a file name
	// in it. The caller closes it.
	OutRoot *safefile.Root
	// Estimate tunes the bootstrap of the per-step intervals.
	Estimate compare.Options
	// Unit names the load in the document and the lines ("": users, in
	// the open model arrivals/s), e.g. "users-x" for a replay, whose
	// step is the copies of every captured session.
	Unit string
}

// ErrInterrupted and ErrServerFailed are wrapped by Run's error when the
// search ended on Ctrl-C or because the server failed; the document
// holds every finished step and the capacity known so far.
var (
	ErrInterrupted  = exitcode.New(exitcode.Interrupted, "capacity search interrupted")
	ErrServerFailed = errors.New("the server failed during the capacity search")
	// ErrDiskFull: a step could not write (its results, its log, or the
	// server its files) because a disk is full; not the server's capacity.
	ErrDiskFull = errors.New("a disk is full during the capacity search")
)

// ThinkForPace is the think time that gives a user the pace of n key
// operations per hour: exponential with mean 3600/n seconds (a user's
// cycle is response time + think time = 3600/n s; the response time is
// left out of the mean because at capacity it is within the operations'
// targets, small against a think time of tens of seconds).
func ThinkForPace(n float64) (engine.ThinkTime, error) {
	if !(n > 0) || math.IsInf(n, 0) {
		return engine.ThinkTime{}, fmt.Errorf("--user-ops-per-hour must be > 0, got %g", n)
	}
	return engine.ThinkTime{Kind: "exp", Min: time.Duration(3600 / n * float64(time.Second))}, nil
}

// PoolFor is the pool size of a step of users VUs by rule conns
// (Config.Connections).
func PoolFor(conns, users int) int {
	switch {
	case conns < 0:
		return min(users, 100)
	case conns == 0:
		return users
	}
	return conns
}

// poolRule names the pool of a step of users VUs by rule conns, as the
// user gave it: "--connections 0: one per VU, 15 VUs".
func poolRule(conns, users int) string {
	switch {
	case conns < 0:
		return fmt.Sprintf("--connections %d: min(VUs, 100), %d VUs", conns, users)
	case conns == 0:
		return fmt.Sprintf("--connections 0: one per VU, %d VUs", users)
	}
	return fmt.Sprintf("with --connections %d", conns)
}

// validate checks the search's plan, target and step shape; errors are
// one line.
func (cfg Config) validate() error {
	if err := cfg.Plan.Validate(); err != nil {
		return err
	}
	if err := cfg.Target.Validate(); err != nil {
		return err
	}
	if cfg.Hold <= 0 {
		return fmt.Errorf("--hold must be > 0, got %s", cfg.Hold)
	}
	if cfg.Ramp < 0 || cfg.Warmup < 0 {
		return errors.New("--ramp and --warmup must not be negative")
	}
	if cfg.Warmup >= cfg.Hold {
		return fmt.Errorf("--warmup %s covers the whole --hold %s: nothing would be scored", cfg.Warmup, cfg.Hold)
	}
	if cfg.Open && cfg.Workers < 1 {
		return fmt.Errorf("--workers must be >= 1 in the open model, got %d", cfg.Workers)
	}
	return nil
}

// Run performs the search on one server (with no DSN in Base, a
// throwaway one started here and removed at the end), the data set up
// by the first step (none with Base.SkipSetup: RunAB's searches start
// from a template copy), every step a loadtest.Run at its load. Progress
// lines go to out; each step's own output to its .log beside its
// results. The document is rewritten after every step. It returns the
// document with nil, or with an error wrapping ErrInterrupted or
// ErrServerFailed (finished steps kept), or nil and an error when the
// search could not start (bad plan, results file exists, no server, the
// first step's set-up failed: then neither the document nor the steps
// directory is left behind).
func Run(ctx context.Context, cfg Config, out io.Writer) (*Document, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	base := cfg.Base
	wname := base.Workload.Name()
	dir, name := cfg.OutRoot, filepath.Base(cfg.Out)
	if dir == nil {
		path, err := outPath(cfg.Out, "-capacity-"+wname)
		if err != nil {
			return nil, err
		}
		if dir, name, err = openOut(cfg.Out, path); err != nil {
			return nil, err
		}
		defer dir.Close()
	}
	path := dir.Join(name)
	if _, err := dir.Lstat(name); err == nil {
		return nil, fmt.Errorf("capacity file %s exists; choose another --out or remove it", path)
	}
	perm := cmp.Or(base.OutMode, results.DefaultPerm)
	// The steps' directory, made and held open: every step's files go
	// through it.
	stepName := strings.TrimSuffix(name, ".json") + "-steps"
	steps, err := dir.Dir(stepName, 0o755)
	if err != nil {
		return nil, fmt.Errorf("capacity: steps directory: %w", err)
	}
	defer steps.Close()
	stepDir := steps.Path()

	unit, model := "users", "closed"
	if cfg.Open {
		unit, model = "arrivals/s", "open"
	}
	if cfg.Unit != "" {
		unit = cfg.Unit
	}
	doc := &Document{
		Format: Format, Schema: SchemaVersion, Version: base.Version, CommandLine: base.CommandLine, Workload: wname,
		StartedAt: time.Now(), Status: "running", Writer: thisWriter(), Model: model, Unit: unit,
		Target: TargetJSON{Apdex: cfg.Target.Apdex, ErrorRatePct: 100 * cfg.Target.ErrorRate},
		Search: SearchJSON{
			Start: cfg.Plan.Start, Max: cfg.Plan.Max, Step: cfg.Plan.Step.String(), ResolutionPct: 100 * cfg.Plan.Resolution,
			HoldS: cfg.Hold.Seconds(), RampS: cfg.Ramp.Seconds(), WarmupS: cfg.Warmup.Seconds(), Think: base.Think.String(),
			UserOpsPerHour: cfg.UserOpsPerHour, Connections: cfg.Connections,
		},
	}
	if cfg.Open {
		doc.Search.Workers = cfg.Workers
		doc.Search.Think = ""
	}
	for op, d := range cfg.Target.P95 {
		if doc.Target.P95Ms == nil {
			doc.Target.P95Ms = map[string]float64{}
		}
		doc.Target.P95Ms[op] = float64(d) / float64(time.Millisecond)
	}
	if err := doc.WriteIn(dir, name, perm); err != nil {
		return nil, err
	}

	// One server for the whole search.
	if base.DSN == "" && !base.EnvGiven {
		maxPool := PoolFor(cfg.Connections, int(cfg.Plan.Max))
		if cfg.Open {
			maxPool = PoolFor(cfg.Connections, cfg.Workers)
		}
		c, err := loadtest.StartEmbedded(ctx, out, base.OSUser, maxPool+20, false)
		if err != nil {
			dir.Remove(name)
			dir.Remove(stepName)
			if ctx.Err() != nil {
				return nil, loadtest.ErrInterrupted
			}
			return nil, err
		}
		defer func() {
			if err := c.Stop(); err != nil {
				fmt.Fprintf(out, "warning: stopping the embedded server: %v\n", err)
			}
		}()
		base.DSN, base.Force = c.DSN("erplab"), true
	}
	fmt.Fprintf(out, "erplab capacity: workload %s, %s model, target APDEX >= %s; steps of %s hold after %s ramp, from %s %s by %s up to %s, bisection to %g %%\n",
		wname, model, fmtApdex(cfg.Target.Apdex), cfg.Hold, cfg.Ramp, fmtLoad(cfg.Plan.Start), unit, cfg.Plan.Step, fmtLoad(cfg.Plan.Max), 100*cfg.Plan.Resolution)
	fmt.Fprintf(out, "capacity results: %s (steps in %s)\n", path, stepDir)

	hf, _ := hostfacts.New("", "")
	search := NewSearch(cfg.Plan)
	var runErr error
	// made are the files the steps may have written; neverStarted says
	// the first step could not run at all (no server, a set-up error):
	// then nothing of the search is left behind.
	var made []string
	neverStarted := false
	attempts := map[float64]int{}
	for {
		load, ok := search.Next()
		if !ok {
			break
		}
		if ctx.Err() != nil {
			search.Cancel("before the step at " + fmtLoad(load) + " " + unit)
			runErr = ErrInterrupted
			break
		}
		attempts[load]++
		idx := len(doc.Steps) + 1
		opts := base
		opts.Progress, opts.MetricsAddr, opts.SkipSetup = 0, "", base.SkipSetup || idx > 1
		opts.Warmup = cfg.Ramp + cfg.Warmup
		users := int(load)
		if cfg.Open {
			users = cfg.Workers
			opts.Rate = []engine.RateStage{{Duration: cfg.Ramp, Rate: load}}
		}
		opts.Stages, _ = engine.SimpleStages(users, cfg.Ramp, cfg.Hold)
		opts.Connections = PoolFor(cfg.Connections, users)
		opts.PoolRule = poolRule(cfg.Connections, users)
		stem := fmt.Sprintf("step-%02d-%s", idx, strings.ReplaceAll(fmtLoad(load), ".", "_"))
		opts.OutRoot, opts.Out = steps, stem+".json"
		made = append(made, stem+".log", stem+".json", stem+".jsonl")
		logf, err := steps.Create(stem+".log", perm)
		if err != nil {
			runErr = fmt.Errorf("capacity: step log: %w", err)
			if DiskFull(err) {
				search.finish(Stop{StopDiskFull, runErr.Error()})
				runErr = fmt.Errorf("%w: %w", ErrDiskFull, runErr)
				break
			}
			search.finish(Stop{StopServer, runErr.Error()})
			break
		}
		if idx == 1 && !base.SkipSetup {
			fmt.Fprintf(out, "step 1 sets the workload's data up (see %s)\n", steps.Join(stem+".log"))
		}
		cpu0, cerr := hf.SelfCPUSeconds()
		t0 := time.Now()
		res, err := loadtest.Run(ctx, opts, logf)
		wall := time.Since(t0).Seconds()
		cpu1, cerr2 := hf.SelfCPUSeconds()
		logf.Close()
		gen := Generator{CPU: math.NaN(), Cores: runtime.GOMAXPROCS(0)}
		if cerr == nil && cerr2 == nil && wall > 0 {
			gen.CPU = (cpu1 - cpu0) / wall
		}

		if res == nil || res.Doc == nil {
			// Nothing ran: interrupted, refused connections, or a server gone.
			switch {
			case errors.Is(err, loadtest.ErrInterrupted) || ctx.Err() != nil:
				search.Cancel("during the step at " + fmtLoad(load) + " " + unit)
				runErr = ErrInterrupted
			case refusedMessage(err):
				j := Judgement{Outcome: OutcomeBad, Reasons: []string{"connections refused: " + err.Error()}, Detail: err.Error(), target: cfg.Target.Apdex, GeneratorCPU: math.NaN()}
				doc.Steps = append(doc.Steps, Step{Index: idx, Load: load, Attempt: attempts[load], Outcome: OutcomeBad, Reasons: j.Reasons})
				fmt.Fprintf(out, "step %d: %s %s: bad: %s\n", idx, fmtLoad(load), unit, j.Reasons[0])
				search.Record(j)
				lg, fb, st := search.Capacity()
				doc.Conclude(lg, fb, st)
				if werr := doc.WriteIn(dir, name, perm); werr != nil {
					fmt.Fprintf(out, "warning: %v\n", werr)
				}
				continue
			default:
				detail := "no step ran"
				if err != nil {
					detail = err.Error()
				}
				search.finish(Stop{StopServer, detail})
				runErr = fmt.Errorf("%w: %s", ErrServerFailed, detail)
				if DiskFull(err) {
					search.finish(Stop{StopDiskFull, detail})
					runErr = fmt.Errorf("%w: %s", ErrDiskFull, detail)
				}
				if len(doc.Steps) == 0 && err != nil {
					runErr = err // the search never started: the step's own error (set-up, a foreign database, no server)
					neverStarted = true
				}
			}
			break
		}
		d := res.Doc
		if d.Status == results.StatusInterrupted {
			search.Cancel(fmt.Sprintf("during the step at %s %s (its partial results: %s, not judged)", fmtLoad(load), unit, res.Path))
			runErr = ErrInterrupted
			break
		}
		est, eerr := compare.Estimate(d, cfg.Estimate)
		resr, rerr := ResourcesOf(d)
		if eerr != nil || rerr != nil {
			search.finish(Stop{StopServer, fmt.Sprintf("step %d: %v", idx, errors.Join(eerr, rerr))})
			runErr = fmt.Errorf("capacity: step %d: %w", idx, errors.Join(eerr, rerr))
			break
		}
		if resr.ErplabCPU != nil {
			// erplab's CPU after the warm-up, from the observations.
			gen.CPU = *resr.ErplabCPU / 100 * float64(runtime.NumCPU())
		}
		if errors.Is(err, loadtest.ErrRunFailed) {
			err = nil // every operation failed: a step the criteria judge (bad)
		}
		j := Judge(d, est, resr, cfg.Target, gen)
		if err != nil && j.Outcome != OutcomeServer {
			j.Outcome, j.Detail, j.Reasons = OutcomeServer, err.Error(), []string{err.Error()}
		}
		if DiskFull(err) || j.Outcome == OutcomeServer && diskFullText(j.Detail) {
			j.Outcome = OutcomeDiskFull
		}
		step := NewStep(idx, load, attempts[load], d, res.Path, est, resr, j)
		doc.Steps = append(doc.Steps, step)
		fmt.Fprintln(out, stepLine(step, unit))
		search.Record(j)
		lg, fb, st := search.Capacity()
		doc.Conclude(lg, fb, st)
		if werr := doc.WriteIn(dir, name, perm); werr != nil {
			fmt.Fprintf(out, "warning: %v\n", werr)
		}
		switch j.Outcome {
		case OutcomeServer:
			runErr = fmt.Errorf("%w at %s %s: %s", ErrServerFailed, fmtLoad(load), unit, j.Detail)
		case OutcomeDiskFull:
			runErr = fmt.Errorf("%w at %s %s: %s", ErrDiskFull, fmtLoad(load), unit, j.Detail)
		}
	}
	if neverStarted {
		for _, f := range made {
			steps.Remove(f) // absent ones fail: nothing to remove
		}
		dir.Remove(stepName) // only when empty
		dir.Remove(name)
		return nil, runErr
	}
	lg, fb, st := search.Capacity()
	doc.EndedAt, doc.Status = time.Now(), statusOf(runErr)
	doc.Conclude(lg, fb, st)
	if err := doc.WriteIn(dir, name, perm); err != nil {
		return doc, errors.Join(runErr, err)
	}
	fmt.Fprintln(out, doc.Result.Line)
	fmt.Fprintf(out, "capacity results: %s\n", path)
	return doc, runErr
}

// outPath is the capacity document's path: out when it names a file (its
// directory must exist: a typo makes no directories), else a fresh name
// (freshPath) in out when it is an existing directory, or in
// ./erplab-results, made when missing and refused when it is a symbolic
// link or another user's directory (loadtest.ResultsDir).
func outPath(out, suffix string) (string, error) {
	if st, err := os.Stat(out); out != "" && (err != nil || !st.IsDir()) {
		if d := filepath.Dir(out); !isDir(d) {
			return "", fmt.Errorf("--out %s: directory %s does not exist", out, d)
		}
		return out, nil
	}
	dir, err := loadtest.ResultsDir(out)
	if err != nil {
		return "", err
	}
	defer dir.Close()
	return freshPath(dir.Path(), suffix), nil
}

// openOut opens the directory of the document path that outPath chose
// for out and returns it, held open, with path's name: out's directory
// as the user wrote it when out names the file, else the directory by
// the rules outPath judged it by (loadtest.ResultsDir: ./erplab-results
// refused when a link or another user's). The caller closes it.
func openOut(out, path string) (*safefile.Root, string, error) {
	if path == out {
		return safefile.Parent(path)
	}
	dir, err := loadtest.ResultsDir(out)
	if err != nil {
		return nil, "", err
	}
	return dir, filepath.Base(path), nil
}

func isDir(p string) bool { st, err := os.Stat(p); return err == nil && st.IsDir() }

// freshPath is dir/<time><suffix>.json, the time to the second, with
// "-2", "-3" ... added when a file (or its steps directory) of that name
// exists: a second search started in the same second gets its own.
func freshPath(dir, suffix string) string {
	stem := filepath.Join(dir, time.Now().Format("20060102-150405")+suffix)
	p := stem + ".json"
	for i := 2; fileExists(p) || fileExists(strings.TrimSuffix(p, ".json")+"-steps") || fileExists(strings.TrimSuffix(p, ".json")+"-searches"); i++ {
		p = fmt.Sprintf("%s-%d.json", stem, i)
	}
	return p
}

// DiskFull reports whether err says a disk is full: ENOSPC (the
// step's results or log), or the server's SQLSTATE 53100 disk_full
// (errcodes-appendix.html) or its "No space left on device" in the text.
func DiskFull(err error) bool {
	return err != nil && (errors.Is(err, syscall.ENOSPC) || diskFullText(err.Error()))
}

func diskFullText(s string) bool {
	l := strings.ToLower(s)
	return strings.Contains(l, "no space left on device") || strings.Contains(s, "53100")
}

// statusOf is a document's final status after err: "completed",
// "interrupted" (err wraps ErrInterrupted) or "failed: <err>".
func statusOf(err error) string {
	switch {
	case errors.Is(err, ErrInterrupted):
		return "interrupted"
	case err != nil:
		return "failed: " + err.Error()
	}
	return "completed"
}

// refusedMessage tells a step that could not open its connections
// because the server refused them (too many clients) from one whose
// server is gone.
func refusedMessage(err error) bool {
	if err == nil {
		return false
	}
	m := err.Error()
	return strings.HasPrefix(m, "open ") && (strings.Contains(m, "53300") || strings.Contains(m, "too many") || strings.Contains(m, "remaining connection slots"))
}

// stepLine is the progress line of a step, e.g. "step 3: 16 users:
// APDEX 0.91 [0.89-0.93], 78.2 ops/s, errors 0.0 %: good".
func stepLine(s Step, unit string) string {
	line := fmt.Sprintf("step %d: %s: APDEX %s, %.1f ops/s, errors %.1f %%", s.Index, LoadText(s.Load, unit), s.Apdex, s.Throughput, s.ErrorPct)
	if s.Attempt > 1 {
		line += fmt.Sprintf(" (attempt %d)", s.Attempt)
	}
	line += ": " + string(s.Outcome)
	if len(s.Reasons) > 0 && s.Outcome != OutcomeGood {
		line += " (" + strings.Join(s.Reasons, ", ") + ")"
	}
	if s.Straddles {
		line += "; the interval holds the target"
	}
	return line
}
