package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/k8s"
	"github.com/erplab/erplab/internal/loadtest"
	wpgbench "github.com/erplab/erplab/internal/pgbench"
	"github.com/erplab/erplab/internal/safefile"
	"github.com/erplab/erplab/internal/workload"
)

func newK8sCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "k8s",
		Short: "Kubernetes as the engine: render the manifests of a run over N agents",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withCode(exitUsage, errors.New("k8s needs a subcommand: render (see 'erplab k8s --help')"))
		},
	}
	cmd.AddCommand(newK8sRenderCmd())
	return cmd
}

type k8sRenderFlags struct {
	agents                    int
	image, namespace, name    string
	passwordSecret, runID     string
	resultsClaim, resultsSize string
	storageClass              string
	cpu, memory               string
	cpuLimit, memoryLimit     string
	setup                     bool
	startAt                   string
	startDelay, mergeWait     time.Duration
	out                       string
}

// runOwnedFlags are run flags erplab k8s render sets itself or that make
// no sense in a pod; the value says why.
var runOwnedFlags = [][2]string{
	{"segment", "is set by erplab k8s render (agent I runs segment I+1 of --agents)"},
	{"run-id", "is set by erplab k8s render (--run-id of k8s render)"},
	{"start-at", "is set by erplab k8s render (--start-at or --start-delay of k8s render)"},
	{"out", "is set by erplab k8s render (each agent writes /results/RUNID-IofN.json, the merge /results/run.json)"},
	{"dsn-file", "reads a file on this machine, not in the pods: give --dsn without the password and --password-secret"},
	{"keep", "applies to a throwaway server; the agents need --dsn"},
	{"os-user", "applies to a throwaway server; the agents need --dsn"},
	{"list-ops", "lists and exits: run it here, not in the pods"},
	{"profile", "needs perf on the server's host; the pods run without privileges"},
}

func newK8sRenderCmd() *cobra.Command {
	var f k8sRenderFlags
	cmd := &cobra.Command{
		Use:   "render --agents N --image IMAGE [flags] -- [run flags]",
		Short: "Write the Kubernetes manifests of a run over N agents (an Indexed Job) and its merge",
		Long: `Write, as one multi-document YAML, the manifests of one run whose load comes from N agents:
a ConfigMap with the run specification (run id, start time, DSN, run flags), a
PersistentVolumeClaim for /results (or --results-claim), with --setup a Job running
'erplab init', an Indexed Job of N agents each running its segment ('erplab run --segment
auto/N' from the same start time), and a Job running 'erplab merge' on /results. A failed
agent fails its index and is never retried into a late start.

The run flags come after '--' and are parsed and checked as erplab run checks them (names
and values, and every segment's share of the VUs and connections): a bad one fails the
render. They must hold --dsn (without a password: the containers get PGPASSWORD from
the Secret --password-secret, key "password"). --apdex-min goes to the merge, which
evaluates it on the merged run.`,
		Example: `  kubectl create secret generic erp-db --from-literal=password="$PGPASSWORD"
  erplab k8s render --agents 4 --image registry.example/erplab:0.1.0 --password-secret erp-db \
      -- --dsn 'host=db dbname=erp user=bench' --workload erp --users 30000 --duration 10m | kubectl apply -f -`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
				return withCode(exitUsage, fmt.Errorf("unexpected argument %q: put the run flags after '--'", args[0]))
			}
			for _, pair := range [][2]string{{"results-claim", "results-size"}, {"start-at", "start-delay"}} {
				if cmd.Flags().Changed(pair[0]) && cmd.Flags().Changed(pair[1]) {
					return withCode(exitUsage, fmt.Errorf("give --%s or --%s, not both", pair[0], pair[1]))
				}
			}
			out, err := f.render(args, time.Now())
			if err != nil {
				return withCode(exitUsage, err)
			}
			if f.out == "" || f.out == "-" {
				_, err = cmd.OutOrStdout().Write(out)
				return err
			}
			path := f.out
			if st, err := os.Stat(path); err == nil && st.IsDir() {
				path = filepath.Join(path, f.name+".yaml")
			}
			if err := safefile.WriteNew(path, out, 0o644); err != nil {
				return fmt.Errorf("write manifests: %w", err)
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		// a run flag given before "--" gets the hint where it goes
		if name, ok := strings.CutPrefix(err.Error(), "unknown flag: --"); ok && newRunCmd().Flags().Lookup(name) != nil {
			err = fmt.Errorf("%w: it is a run flag, put it after '--'", err)
		}
		return withCode(exitUsage, fmt.Errorf("%w (see '%s --help')", err, c.CommandPath()))
	})
	fl := cmd.Flags()
	fl.IntVar(&f.agents, "agents", 0, "number of agents N (the run's segments; the Indexed Job's completions and parallelism)")
	fl.StringVar(&f.image, "image", "", "erplab's container image (see the Dockerfile)")
	fl.StringVar(&f.namespace, "namespace", "", "namespace of every object (default: kubectl's)")
	fl.StringVar(&f.name, "name", "erplab", "prefix of the objects' names: NAME-spec, NAME-results, NAME-setup, NAME-agents, NAME-merge")
	fl.StringVar(&f.passwordSecret, "password-secret", "", "Secret whose key \"password\" the containers get as PGPASSWORD (the value is never rendered)")
	fl.StringVar(&f.runID, "run-id", "", "run id of every segment (default NAME-<start time>-<random>)")
	fl.StringVar(&f.resultsClaim, "results-claim", "", "existing ReadWriteMany PersistentVolumeClaim to mount at /results instead of a new one")
	fl.StringVar(&f.resultsSize, "results-size", "1Gi", "size of the new ReadWriteMany claim NAME-results")
	fl.StringVar(&f.storageClass, "storage-class", "", "storage class of the new claim (default: the cluster's)")
	fl.StringVar(&f.cpu, "cpu", "1", "CPU request of each agent and of the set-up")
	fl.StringVar(&f.memory, "memory", "512Mi", "memory request of each agent and of the set-up")
	fl.StringVar(&f.cpuLimit, "cpu-limit", "", "CPU limit (default none: a throttled agent measures its own throttling)")
	fl.StringVar(&f.memoryLimit, "memory-limit", "", "memory limit (default: --memory)")
	fl.BoolVar(&f.setup, "setup", false, "also render a Job running 'erplab init' of the run's workload and scale (it must finish before the start time)")
	fl.StringVar(&f.startAt, "start-at", "", "start time of every agent, RFC 3339 (e.g. 2026-12-01T16:00:00Z)")
	fl.DurationVar(&f.startDelay, "start-delay", 2*time.Minute, "start time = now + this, when --start-at is not given")
	fl.DurationVar(&f.mergeWait, "merge-wait", 30*time.Minute, "how long the merge waits for the segment documents (from when it starts: at least start delay + run + graceful stop + 2m)")
	fl.StringVarP(&f.out, "output", "o", "", "write the YAML to this new file, or to NAME.yaml in this existing directory (default standard output)")
	return cmd
}

// render is the YAML for runArgs (the run flags after "--"), the start
// time counted from now. Errors are one line.
func (f *k8sRenderFlags) render(runArgs []string, now time.Time) ([]byte, error) {
	if f.agents < 1 {
		return nil, fmt.Errorf("--agents must be >= 1, got %d", f.agents)
	}
	if f.image == "" {
		return nil, errors.New("--image is required")
	}
	if f.resultsClaim != "" {
		f.resultsSize = ""
	}
	start, err := f.start(now)
	if err != nil {
		return nil, err
	}
	runCmd, rf := newRunCmdFlags()
	runCmd.SetOut(io.Discard)
	runCmd.SetErr(io.Discard)
	run := runCmd.Flags()
	run.SetOutput(io.Discard)
	if err := run.Parse(runArgs); err != nil {
		return nil, fmt.Errorf("run flags: %w", err)
	}
	if err := splitDSN(run, run.Args()); err != nil {
		return nil, err
	}
	if run.NArg() > 0 {
		return nil, fmt.Errorf("run flags: erplab run takes no arguments, got %q", run.Arg(0))
	}
	for _, owned := range runOwnedFlags {
		name, why := owned[0], owned[1]
		if run.Lookup(name) != nil && run.Changed(name) {
			return nil, fmt.Errorf("run flags: --%s %s", name, why)
		}
	}
	dsn, _ := run.GetString("dsn")
	if dsn == "" {
		return nil, errors.New("run flags: --dsn is required (each agent without one would test a throwaway server of its own)")
	}
	if conninfo.HasPassword(dsn) {
		return nil, errors.New("run flags: --dsn holds a password, which would be written into the manifests: drop it and pass it in a Secret (--password-secret)")
	}
	runID := f.runID
	if runID == "" {
		if runID, err = newRunID(f.name, start); err != nil {
			return nil, err
		}
	} else if err := loadtest.ValidRunID(runID); err != nil {
		return nil, err
	}
	opts, err := f.checkRun(runCmd, rf, runID, start)
	if err != nil {
		return nil, err
	}
	if need := minMergeWait(start.Sub(now), opts); f.mergeWait < need {
		return nil, fmt.Errorf("--merge-wait %s is too short: the merge starts when the manifests are applied and waits for the start (%s from now), the run (%s) and a margin (%s): give --merge-wait %s or more",
			f.mergeWait, ceilSecond(start.Sub(now)), engine.TotalDuration(opts.Stages), opts.GracefulStop+mergeMargin, need)
	}
	spec := k8s.Spec{
		Name: f.name, Namespace: f.namespace, Image: f.image, Agents: f.agents,
		RunID: runID, StartAt: start, DSN: dsn, PasswordSecret: f.passwordSecret,
		RunArgs:      withoutFlags(run, runArgs, "dsn", "apdex-min"),
		MergeWait:    f.mergeWait,
		ResultsClaim: f.resultsClaim, ResultsSize: f.resultsSize, StorageClass: f.storageClass,
		Resources: k8s.Resources{CPU: f.cpu, Memory: f.memory, CPULimit: f.cpuLimit, MemoryLimit: f.memoryLimit},
	}
	if spec.Resources.MemoryLimit == "" {
		spec.Resources.MemoryLimit = f.memory
	}
	if run.Changed("apdex-min") {
		spec.ApdexMin = run.Lookup("apdex-min").Value.String()
	}
	if f.setup {
		if spec.Setup, err = setupOf(run, rf.scriptMode()); err != nil {
			return nil, err
		}
	}
	return k8s.Render(spec)
}

// checkRun checks the run flags parsed on runCmd (filling rf) as every
// agent's erplab run will, with the segment, run id and start time the
// render gives them, and that each of the --agents segments gets at least
// one VU and one pool connection; it returns the run's options (those of
// segment 1).
func (f *k8sRenderFlags) checkRun(runCmd *cobra.Command, rf *runFlags, runID string, start time.Time) (loadtest.Options, error) {
	rf.segments.segment = fmt.Sprintf("1/%d", f.agents)
	rf.segments.runID = runID
	rf.segments.startAt = start.Format(time.RFC3339)
	opts, err := rf.buildOptions(runCmd)
	if err != nil {
		return opts, fmt.Errorf("run flags: %w", err)
	}
	maxVUs := engine.MaxTarget(opts.Stages)
	for i := 1; i <= f.agents; i++ {
		seg, err := engine.ParseSegment(fmt.Sprintf("%d/%d", i, f.agents), nil)
		if err == nil {
			err = seg.CheckShare(maxVUs, opts.Connections)
		}
		if err != nil {
			return opts, fmt.Errorf("run flags with --agents %d: %w", f.agents, err)
		}
	}
	return opts, nil
}

// mergeMargin is added, beyond the graceful stop, to the shortest
// --merge-wait: pods scheduled and images pulled late, documents written.
const mergeMargin = 2 * time.Minute

// minMergeWait is the shortest --merge-wait of a run starting delay after
// the render: the delay, the run's load profile, its graceful stop and
// mergeMargin, rounded up to the second.
func minMergeWait(delay time.Duration, opts loadtest.Options) time.Duration {
	return ceilSecond(delay + engine.TotalDuration(opts.Stages) + opts.GracefulStop + mergeMargin)
}

// ceilSecond is d rounded up to the second.
func ceilSecond(d time.Duration) time.Duration { return (d + time.Second - 1).Truncate(time.Second) }

// start is --start-at, or now + --start-delay, in whole seconds.
func (f *k8sRenderFlags) start(now time.Time) (time.Time, error) {
	if f.startAt == "" {
		if f.startDelay <= 0 {
			return time.Time{}, fmt.Errorf("--start-delay must be > 0, got %s", f.startDelay)
		}
		return now.Add(f.startDelay).UTC().Truncate(time.Second), nil
	}
	t, err := time.Parse(time.RFC3339, f.startAt)
	if err != nil {
		return time.Time{}, fmt.Errorf("--start-at %q: want RFC 3339 such as 2026-12-01T16:00:00Z", f.startAt)
	}
	if !t.After(now) {
		return time.Time{}, fmt.Errorf("--start-at %s is not in the future", f.startAt)
	}
	return t.UTC().Truncate(time.Second), nil
}

// newRunID is NAME-<start, compact UTC>-<4 random hex digits>.
func newRunID(name string, start time.Time) (string, error) {
	var b [2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("run id: %w", err)
	}
	return name + "-" + start.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:]), nil
}

// setupOf is the set-up of the run flags: their workload (pgbench for a
// script run) and scale (the workload's default when not given), and
// --force when given.
func setupOf(run *pflag.FlagSet, scripts bool) (*k8s.Setup, error) {
	name, _ := run.GetString("workload")
	if scripts {
		name = wpgbench.Name
	}
	m, err := workload.Find(name)
	if err != nil {
		return nil, fmt.Errorf("run flags: %w", err)
	}
	// the set-up Job's erplab init would refuse a workload without one
	if _, _, err := initWorkload(newInitCmd(), name); err != nil {
		return nil, fmt.Errorf("--setup: %w: drop --setup", err)
	}
	scale := strconv.FormatFloat(m.DefaultScale, 'g', -1, 64)
	if run.Changed("scale") {
		scale = run.Lookup("scale").Value.String()
	}
	force, _ := run.GetBool("force")
	return &k8s.Setup{Workload: name, Scale: scale, Force: force}, nil
}

// withoutFlags is args (already parsed by fs) less every occurrence of the
// long flags names, with their values: "--name v", "--name=v". A name fs
// does not define is taken as a flag with a value.
func withoutFlags(fs *pflag.FlagSet, args []string, names ...string) []string {
	drop := map[string]bool{}
	for _, n := range names {
		drop[n] = true
	}
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i:]...)
		case strings.HasPrefix(a, "--"):
			name, _, hasValue := strings.Cut(a[2:], "=")
			f := fs.Lookup(name)
			takesNext := !hasValue && (f != nil && f.NoOptDefVal == "" || f == nil && drop[name]) && i+1 < len(args)
			if drop[name] {
				if takesNext {
					i++
				}
				continue
			}
			out = append(out, a)
			if takesNext {
				i++
				out = append(out, args[i])
			}
		case len(a) > 1 && a[0] == '-':
			out = append(out, a)
			// -abc: a value-taking letter ends the flags of the argument
			// and, as its last letter, takes the next argument.
			for j := 1; j < len(a); j++ {
				f := fs.ShorthandLookup(a[j : j+1])
				if f != nil && f.NoOptDefVal == "" {
					if j == len(a)-1 && i+1 < len(args) {
						i++
						out = append(out, args[i])
					}
					break
				}
			}
		default:
			out = append(out, a)
		}
	}
	return out
}
