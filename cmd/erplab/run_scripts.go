package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/loadtest"
	wpgbench "github.com/erplab/erplab/internal/pgbench"
	"github.com/erplab/erplab/internal/pgbench/script"
	"github.com/erplab/erplab/internal/workload"
)

// scriptFlags are erplab run's script workload: pgbench scripts run as
// key operations (-f, -b) with their APDEX targets (--target). The
// scripts' query protocol is the pgbench workload's own --protocol; the
// rest of pgbench's command line (-c, -t, -T, -D, -M, -j, -n, -r,
// --random-seed ...) is erplab pgbench's.
type scriptFlags struct {
	targets []string
	// scripts in command-line order, as pgbench numbers them: -f FILE,
	// -b NAME.
	scripts []scriptArg
}

// scriptArg is one script option: a file (-f) or a built-in (-b).
type scriptArg struct {
	file bool
	spec string
}

// scriptValue appends -f/-b to one ordered list (pflag keeps each flag's
// values apart, which would lose the command-line order).
type scriptValue struct {
	list *[]scriptArg
	file bool
}

func (v scriptValue) String() string { return "" }
func (v scriptValue) Type() string   { return "string" }
func (v scriptValue) Set(s string) error {
	*v.list = append(*v.list, scriptArg{file: v.file, spec: s})
	return nil
}

func addScriptFlags(fl *pflag.FlagSet, s *scriptFlags) {
	fl.VarP(scriptValue{list: &s.scripts, file: true}, "file", "f", "pgbench script file to run, FILE[@WEIGHT] (- reads standard input: key operation stdin); repeatable (runs pgbench scripts: --workload pgbench)")
	fl.VarP(scriptValue{list: &s.scripts}, "builtin", "b", "pgbench built-in script NAME[@WEIGHT]: tpcb-like, simple-update, select-only (a unique prefix will do); repeatable")
	fl.StringArrayVar(&s.targets, "target", nil, "APDEX target time T of a script's key operation, NAME=DURATION (e.g. select-only=5ms; default 50ms); repeatable")
}

// scriptMode reports whether the run is a pgbench script run: --workload
// pgbench, or a script chosen with -f or -b.
func (f *runFlags) scriptMode() bool {
	return f.workload == wpgbench.Name || len(f.scripts.scripts) > 0
}

// checkNotScripts refuses --target in a run of another workload.
func (f *runFlags) checkNotScripts(cmd *cobra.Command) error {
	if cmd.Flags().Changed("target") {
		return errors.New("--target sets a pgbench script's APDEX target: it applies only when running scripts (-f, -b or --workload pgbench)")
	}
	return nil
}

// scriptWorkload builds the pgbench workload of a script run: its
// scripts (tpcb-like when none is given), --protocol, --target, the
// scripts' random functions seeded by --seed, on pgbench's tables of
// --scale, as many clients as the profile's VUs.
func (f *runFlags) scriptWorkload(cmd *cobra.Command, stages []engine.Stage) (*wpgbench.Workload, error) {
	var scripts []*script.Script
	for _, a := range f.scripts.scripts {
		var sc *script.Script
		var err error
		if a.file {
			sc, err = script.ParseFile(a.spec, readScript)
		} else {
			sc, err = script.Builtin(a.spec)
		}
		if err != nil {
			return nil, err
		}
		scripts = append(scripts, sc)
	}
	if len(scripts) == 0 {
		sc, _ := script.Builtin("tpcb-like")
		scripts = append(scripts, sc)
	}
	if m, err := workload.Find(wpgbench.Name); err != nil {
		return nil, err
	} else if flag, owner, foreign := m.ForeignFlag(cmd.Flags()); foreign {
		return nil, fmt.Errorf("--%s applies to --workload %s only", flag, owner)
	}
	mode, err := wpgbench.ScriptMode(cmd.Flags())
	if err != nil {
		return nil, err
	}
	targets := map[string]time.Duration{}
	for _, t := range f.scripts.targets {
		name, v, ok := strings.Cut(t, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--target %q: want NAME=DURATION, e.g. select-only=5ms", t)
		}
		d, err := parseTarget(v)
		if err != nil {
			return nil, fmt.Errorf("--target %q: %w", t, err)
		}
		targets[name] = d
	}
	scale := 1
	if f.loadFlags.changed("scale") {
		if f.scale < 1 || f.scale != math.Trunc(f.scale) || f.scale > math.MaxInt32 {
			return nil, fmt.Errorf("invalid scaling factor: %g (pgbench scales are whole numbers >= 1)", f.scale)
		}
		scale = int(f.scale)
	}
	rate := f.loadFlags.changed("rate") || len(f.rateStages) > 0
	return wpgbench.New(wpgbench.Options{
		Scripts: scripts, Targets: targets, Mode: mode, RandomSeed: f.seed, MaxTries: 1,
		Scale: scale, ScaleGiven: f.loadFlags.changed("scale"), Clients: engine.MaxTarget(stages), Threads: 1,
		Duration:     engine.TotalDuration(stages),
		LatencyLimit: time.Duration(f.latencyLimitMs * float64(time.Millisecond)),
		Rate:         rate,
		Debug:        os.Stderr,
	})
}

// parseTarget reads a target time: a Go duration ("5ms", "1.5s") or a bare
// number of milliseconds.
func parseTarget(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		ms, err2 := strconv.ParseFloat(s, 64)
		if err2 != nil {
			return 0, fmt.Errorf("bad duration %q (e.g. 50ms, 1.5s)", s)
		}
		d = time.Duration(ms * float64(time.Millisecond))
	}
	if d <= 0 {
		return 0, fmt.Errorf("target time must be > 0, got %s", s)
	}
	return d, nil
}

// scriptFailures reports transactions that failed with an error other
// than a serialization failure or deadlock, and clients that aborted
// (e.g. at the end of a script left inside a transaction block): the run
// failed (exit 1; `erplab pgbench` exits 2 as pgbench).
func scriptFailures(res *loadtest.Result, w workload.Workload) error {
	var n int64
	codes := map[string]int64{}
	for _, op := range res.Doc.Operations {
		for code, c := range op.ErrorsBySQLState {
			if code == script.SerializationFailure || code == script.DeadlockDetected {
				continue
			}
			n += c
			codes[code] += c
		}
	}
	if n == 0 {
		if pw, ok := w.(*wpgbench.Workload); ok && pw.AbortedClients() > 0 {
			return fmt.Errorf("%d clients aborted; results: %s", pw.AbortedClients(), res.Path)
		}
		return nil
	}
	parts := make([]string, 0, len(codes))
	for code, c := range codes {
		parts = append(parts, fmt.Sprintf("%s x%d", code, c))
	}
	sort.Strings(parts)
	if a := res.Doc.Totals.AbortedVUs; a > 0 {
		return fmt.Errorf("%d transactions failed (%s), %d clients aborted; results: %s", n, strings.Join(parts, ", "), a, res.Path)
	}
	return fmt.Errorf("%d transactions failed (%s); results: %s", n, strings.Join(parts, ", "), res.Path)
}

// scriptsAborted is the reason of a script run's status "aborted: 2 of
// 8 clients aborted" when clients stopped on errors, "" when none did.
func scriptsAborted(w *wpgbench.Workload, stages []engine.Stage) string {
	if n := w.AbortedClients(); n > 0 {
		return fmt.Sprintf("%d of %d clients aborted", n, engine.MaxTarget(stages))
	}
	return ""
}

// readScript reads a -f script; "-" is standard input, as for pgbench.
func readScript(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}
