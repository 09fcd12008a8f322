package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/profile"
	"github.com/erplab/erplab/internal/safefile"
)

type profileFlags struct {
	dsn, dsnFile   string
	duration       time.Duration
	pids           []int
	freq, top      int
	folded, svg    string
	perf, procRoot string
	outMode        fs.FileMode
}

func newProfileCmd() *cobra.Command {
	var f profileFlags
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "Sample where a local server spends its CPU, by PostgreSQL function and subsystem (Linux perf)",
		Long: `Sample the on-CPU call stacks of a local PostgreSQL server's processes with Linux perf
(software cpu-clock event, call graphs; every CPU is recorded and the postmaster's process
tree picked out, so backends started during the window are followed) and print the shares by
subsystem (lock manager, shared invalidation, catalog access, parser, planner, executor, heap
index and buffers, WAL, file system, memory and THP, network, scheduler and waits, other) and
the top functions by self share. The signature table and its sources are in the doc of
internal/profile.

The server comes from --dsn or the PG* environment and must run on this host (its postmaster
is found from pg_backend_pid, pg_postmaster_start_time and data_directory); --pid profiles
the given processes and their children instead. Needs perf (Debian: apt-get install linux-perf)
and root, or kernel.perf_event_paranoid <= 0. Ctrl-C ends the window early.`,
		Example: `  erplab profile --dsn 'host=/var/run/postgresql dbname=erp' --duration 30s
  erplab profile --pid $(head -1 $PGDATA/postmaster.pid) --svg flame.svg --folded stacks.txt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runProfile(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dsn, "dsn", "", "server to profile (libpq key=value or URL); default: PG* environment")
	addDSNFileFlag(fl, &f.dsnFile, "dsn")
	fl.DurationVar(&f.duration, "duration", 30*time.Second, "length of the sampling window")
	fl.IntSliceVar(&f.pids, "pid", nil, "profile these processes and their descendants instead of the server at --dsn (e.g. the postmaster's pid)")
	fl.IntVar(&f.freq, "freq", profile.DefaultFrequency, "sampling frequency per CPU, Hz")
	fl.IntVar(&f.top, "top", 25, "functions to list")
	fl.StringVar(&f.folded, "folded", "", "write every sampled stack in folded form to this file (flamegraph.pl, speedscope, inferno)")
	fl.StringVar(&f.svg, "svg", "", "write a flame graph to this file (self-contained SVG)")
	addPerfFlags(fl, &f.perf, &f.procRoot)
	addOutModeFlag(fl, &f.outMode)
	return cmd
}

// addPerfFlags adds the hidden flags that point at another perf binary
// and proc root (tests of the "cannot run" lines).
func addPerfFlags(fl *pflag.FlagSet, perf, proc *string) {
	fl.StringVar(perf, "perf", "", "perf binary (default: perf on PATH)")
	fl.StringVar(proc, "proc", "", "proc root (default /proc)")
	fl.MarkHidden("perf") //nolint:errcheck // defined above
	fl.MarkHidden("proc") //nolint:errcheck
}

func runProfile(cmd *cobra.Command, f profileFlags) error {
	if f.duration <= 0 {
		return withCode(exitUsage, fmt.Errorf("--duration must be positive, got %s", f.duration))
	}
	if f.freq < 1 || f.freq > 10000 {
		return withCode(exitUsage, fmt.Errorf("--freq must be in [1, 10000], got %d", f.freq))
	}
	for _, p := range f.pids {
		if p <= 0 {
			return withCode(exitUsage, fmt.Errorf("--pid must be positive, got %d", p))
		}
	}
	dsn := ""
	if len(f.pids) == 0 {
		var err error
		if dsn, _, err = resolveDSN(cmd, f.dsn, f.dsnFile); err != nil {
			return err
		}
	}
	// The output files are created before sampling: a bad path is one
	// line now, not after the window.
	outs, err := createOutputs(f.outMode, f.folded, f.svg)
	if err != nil {
		return err
	}
	defer outs.abandon()
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	sess, err := profile.Begin(ctx, dsn, profile.Options{PIDs: f.pids, Frequency: f.freq, Host: profile.Host{Perf: f.perf, Proc: f.procRoot}})
	if err != nil {
		return err
	}
	if sess.Warning != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning: "+sess.Warning)
	}
	fmt.Fprintf(out, "profiling processes %v and their children for %s at %d Hz (Ctrl-C ends early)...\n", sess.Roots(), f.duration, f.freq)
	select {
	case <-time.After(f.duration):
	case <-ctx.Done():
	}
	sum, parsed, err := sess.End(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	if sum.Samples == 0 {
		fmt.Fprintln(out, "no samples of the server's processes: it was idle during the window")
	}
	sum.WriteTable(out, f.top)
	if f.folded != "" {
		if err := outs.write(0, parsed.WriteFolded); err != nil {
			return err
		}
		fmt.Fprintf(out, "folded stacks: %s\n", f.folded)
	}
	if f.svg != "" {
		title := fmt.Sprintf("erplab profile: %d samples of processes %v, %.0f s at %d Hz, %s", sum.Samples, sess.Roots(), sum.DurationS, sum.FrequencyHz, time.Now().UTC().Format(time.RFC3339))
		if err := outs.write(1, func(w io.Writer) error { return sum.FlameGraph(w, title) }); err != nil {
			return err
		}
		fmt.Fprintf(out, "flame graph: %s\n", f.svg)
	}
	return nil
}

// outputFiles are files created empty before work whose result they
// will hold (profile's --folded and --svg): written one by one, and
// the ones left unwritten removed by abandon.
type outputFiles struct {
	paths []string
	files []*os.File
}

// createOutputs creates each non-empty path as writeFile does, with
// mode perm, in order; on an error the ones made are removed.
func createOutputs(perm fs.FileMode, paths ...string) (*outputFiles, error) {
	o := &outputFiles{paths: paths, files: make([]*os.File, len(paths))}
	for i, p := range paths {
		if p == "" {
			continue
		}
		fh, err := safefile.Create(p, perm)
		if err != nil {
			o.abandon()
			return nil, err
		}
		o.files[i] = fh
	}
	return o, nil
}

// write writes file i with write and closes it; a file that could not
// be written whole is removed.
func (o *outputFiles) write(i int, write func(io.Writer) error) error {
	fh := o.files[i]
	o.files[i] = nil
	if err := errors.Join(write(fh), fh.Close()); err != nil {
		os.Remove(o.paths[i])
		return err
	}
	return nil
}

// abandon closes and removes the files not written.
func (o *outputFiles) abandon() {
	for i, fh := range o.files {
		if fh != nil {
			fh.Close()
			os.Remove(o.paths[i])
			o.files[i] = nil
		}
	}
}

// writeFile creates path, a new file with mode perm (safefile.Create: an
// existing file or a symbolic link there is refused), and writes it with
// write; a file that could not be written whole is removed.
func writeFile(path string, perm fs.FileMode, write func(io.Writer) error) error {
	fh, err := safefile.Create(path, perm)
	if err != nil {
		return err
	}
	if err := errors.Join(write(fh), fh.Close()); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}
