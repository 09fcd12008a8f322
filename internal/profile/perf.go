package profile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/erplab/erplab/internal/hostfacts"
)

// Event is the perf event: the software CPU clock, which works in VMs
// without hardware counters.
const Event = "cpu-clock"

// DefaultFrequency is the sampling frequency, Hz: a prime, so the samples
// do not beat with periodic work (timers at 100 or 1000 Hz).
const DefaultFrequency = 499

// scriptFields are the perf script fields Parse reads.
const scriptFields = "comm,pid,tid,time,ip,sym,dso"

// ScriptArgs are the arguments of `perf script` whose output Parse reads
// (after "-i FILE").
func ScriptArgs() []string { return []string{"--show-task-events", "--ns", "-F", scriptFields} }

// Unavailable says in one line why profiling cannot run here.
type Unavailable struct{ Reason string }

func (u *Unavailable) Error() string { return "profile: " + u.Reason }

// Host is where Check looks: the perf binary's name and the proc root
// (tests point them elsewhere).
type Host struct {
	Perf string // "" = "perf" on PATH
	Proc string // "" = "/proc"
	// Unprivileged checks as a non-root user would be checked even when
	// running as root (tests).
	Unprivileged bool
}

func (h Host) norm() (Host, bool) {
	if h.Perf == "" {
		h.Perf = "perf"
	}
	if h.Proc == "" {
		h.Proc = hostfacts.DefaultProcRoot
	}
	return h, os.Geteuid() == 0 && !h.Unprivileged
}

// Check tells whether system-wide sampling can run: perf installed and
// running for this kernel, and permitted (root, or
// kernel.perf_event_paranoid <= 0). It returns the perf path and a
// warning ("" if none: kernel symbols hidden by kernel.kptr_restrict), or
// an *Unavailable error.
func Check(ctx context.Context, h Host) (perf, warning string, err error) {
	h, root := h.norm()
	perf, err = exec.LookPath(h.Perf)
	if err != nil {
		return "", "", &Unavailable{"perf is not installed (Debian: apt-get install linux-perf; other systems: the linux-tools or perf package)"}
	}
	out, err := exec.CommandContext(ctx, perf, "version").CombinedOutput()
	if err != nil {
		return "", "", &Unavailable{fmt.Sprintf("perf does not run for this kernel: %s", firstLine(out, err))}
	}
	paranoid, _ := readInt(filepath.Join(h.Proc, "sys/kernel/perf_event_paranoid"))
	if !root && paranoid > 0 {
		return "", "", &Unavailable{fmt.Sprintf("kernel.perf_event_paranoid is %d: sampling every CPU needs root (or CAP_PERFMON) or perf_event_paranoid <= 0 (sysctl -w kernel.perf_event_paranoid=0)", paranoid)}
	}
	if kr, err := readInt(filepath.Join(h.Proc, "sys/kernel/kptr_restrict")); err == nil && (kr >= 2 || kr == 1 && !root) {
		warning = fmt.Sprintf("kernel symbols hidden (kernel.kptr_restrict=%d): kernel time is classified by its user-space caller (sysctl -w kernel.kptr_restrict=0 to name kernel functions)", kr)
	}
	return perf, warning, nil
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

func firstLine(out []byte, err error) string {
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return err.Error()
}

// Recording is a running `perf record`.
type Recording struct {
	perf    string
	dir     string
	data    string
	freq    int
	cmd     *exec.Cmd
	stderr  bytes.Buffer
	started time.Time
	done    chan error
	// cpuAtEnable is perf's CPU seconds when sampling was enabled (-1:
	// unknown).
	cpuAtEnable float64
}

// procCPU is the CPU seconds (user and system) of process pid so far, -1
// if unknown.
func procCPU(pid int) float64 {
	st, err := hostfacts.LiveProcStat(pid)
	if err != nil {
		return -1
	}
	return st.CPUTime()
}

// Sampling is how a Recording samples.
type Sampling struct {
	// Frequency is the sampling frequency in Hz; 0 = DefaultFrequency.
	Frequency int
	// NoCallGraph records the leaf only (no -g): no total shares, no
	// folded stacks, and a sample is classified by its leaf function
	// alone. For measuring what the call graphs cost (package doc,
	// Overhead).
	NoCallGraph bool
}

// Start runs `perf record -a -g -B -e cpu-clock -F freq` (started
// disabled, enabled through its control fifo once it runs) into a new
// temporary directory until Stop: every CPU, since perf record -p does
// not follow the backends a postmaster forks later (measured; package
// doc). perf is the path Check returned.
func Start(ctx context.Context, perf string, smp Sampling) (*Recording, error) {
	freq := smp.Frequency
	if freq <= 0 {
		freq = DefaultFrequency
	}
	dir, err := os.MkdirTemp("", "erplab-perf-")
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	r := &Recording{perf: perf, dir: dir, data: filepath.Join(dir, "perf.data"), freq: freq, done: make(chan error, 1)}
	ctl, ack := filepath.Join(dir, "ctl"), filepath.Join(dir, "ack")
	for _, f := range []string{ctl, ack} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("profile: %w", err)
		}
	}
	// -B: no build-id post-processing at exit (it rereads the whole
	// file, slow on a busy host); perf script reads this host's
	// binaries by path right after. -D -1 with --control: sampling starts
	// disabled and Start enables it once perf has read /proc and is
	// running, so the caller's window is really recorded.
	// -k CLOCK_MONOTONIC: sample times on the clock Go's monotonic time
	// runs on, for attributing samples to key operations (ops.go).
	args := []string{"record", "-a", "-g", "-B", "-k", "CLOCK_MONOTONIC", "-e", Event, "-F", strconv.Itoa(freq), "-o", r.data, "--quiet",
		"-D", "-1", "--control", "fifo:" + ctl + "," + ack}
	if smp.NoCallGraph {
		args = append(args[:2], args[3:]...)
	}
	r.cmd = exec.Command(perf, args...)
	r.cmd.Stderr = &r.stderr
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("profile: perf record: %w", err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	enabled := make(chan error, 1)
	go func() { enabled <- enable(ctl, ack) }()
	select {
	case err := <-r.done:
		os.RemoveAll(dir)
		return nil, &Unavailable{"perf record failed: " + firstLine(r.stderr.Bytes(), errOr(err))}
	case err := <-enabled:
		if err != nil {
			r.Abort()
			return nil, fmt.Errorf("profile: enable perf record: %w", err)
		}
	case <-time.After(enableTimeout):
		r.Abort()
		return nil, fmt.Errorf("profile: perf record did not start sampling within %s", enableTimeout)
	case <-ctx.Done():
		r.Abort()
		return nil, ctx.Err()
	}
	r.started = time.Now()
	r.cpuAtEnable = procCPU(r.cmd.Process.Pid)
	return r, nil
}

// enableTimeout bounds perf's start-up (it reads every process's maps
// from /proc first).
const enableTimeout = time.Minute

// enable sends "enable" on perf's control fifo and waits for its ack.
func enable(ctl, ack string) error {
	c, err := os.OpenFile(ctl, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer c.Close()
	a, err := os.OpenFile(ack, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer a.Close()
	if _, err := c.WriteString("enable\n"); err != nil {
		return err
	}
	buf := make([]byte, 16)
	n, err := a.Read(buf)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(string(buf[:n]), "ack") {
		return fmt.Errorf("perf answered %q", buf[:n])
	}
	return nil
}

func errOr(err error) error {
	if err == nil {
		return errors.New("exited")
	}
	return err
}

// Abort stops perf and removes its data.
func (r *Recording) Abort() {
	if r.cmd.Process != nil {
		r.cmd.Process.Signal(syscall.SIGINT) //nolint:errcheck // may have exited
		select {
		case <-r.done:
		case <-time.After(5 * time.Second):
			r.cmd.Process.Kill() //nolint:errcheck
			<-r.done
		}
	}
	os.RemoveAll(r.dir)
}

// Stop ends the recording (SIGINT, as Ctrl-C does), reads it back with
// `perf script` and summarizes the samples of roots and their
// descendants; seen are more processes of the tree known from elsewhere
// (Session polls /proc: perf may lose FORK records on a busy host). The temporary data is removed. Parsed holds every
// sample (Summary keeps only the top TopStacks stacks).
func (r *Recording) Stop(ctx context.Context, roots, seen []int) (*Summary, *Parsed, error) {
	defer os.RemoveAll(r.dir)
	dur := time.Since(r.started).Seconds()
	sampling := -1.0
	if c := procCPU(r.cmd.Process.Pid); c >= 0 && r.cpuAtEnable >= 0 {
		sampling = c - r.cpuAtEnable
	}
	r.cmd.Process.Signal(syscall.SIGINT) //nolint:errcheck // reported by Wait
	select {
	case err := <-r.done:
		if err != nil {
			if _, statErr := os.Stat(r.data); statErr != nil {
				return nil, nil, fmt.Errorf("profile: perf record: %s", firstLine(r.stderr.Bytes(), err))
			}
		}
	case <-time.After(60 * time.Second):
		r.cmd.Process.Kill() //nolint:errcheck
		<-r.done
		return nil, nil, errors.New("profile: perf record did not stop within 60 s of SIGINT")
	}
	p, err := Script(ctx, r.perf, r.data, append(append([]int(nil), roots...), seen...))
	if err != nil {
		return nil, nil, err
	}
	s := Summarize(p, roots, Event, r.freq, dur)
	if st := r.cmd.ProcessState; st != nil {
		s.PerfCPUS = math.Round(100*(st.UserTime()+st.SystemTime()).Seconds()) / 100
	}
	if sampling >= 0 {
		s.PerfSamplingCPUS = math.Round(100*sampling) / 100
	}
	return s, p, nil
}

// Script runs `perf script` on a perf.data file and parses it (Parse)
// as it streams.
func Script(ctx context.Context, perf, data string, roots []int) (*Parsed, error) {
	cmd := exec.CommandContext(ctx, perf, append([]string{"script", "-i", data}, ScriptArgs()...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("profile: perf script: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("profile: perf script: %w", err)
	}
	p, perr := Parse(out, roots)
	if perr != nil {
		io.Copy(io.Discard, out) //nolint:errcheck // let perf finish
	}
	werr := cmd.Wait()
	if perr != nil {
		return nil, fmt.Errorf("profile: %w", perr)
	}
	if werr != nil {
		return nil, fmt.Errorf("profile: perf script: %s", firstLine(stderr.Bytes(), werr))
	}
	return p, nil
}
