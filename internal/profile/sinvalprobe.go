package profile

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"

	"github.com/erplab/erplab/internal/leftover"
)

// Shared-invalidation events counted by uprobes on the server's binary
// (docs/observe.md, "Invalidation observed"). Each is a function of
// src/backend/storage/ipc/sinval.c, sinvaladt.c or utils/cache/inval.c
// that the Debian and PGDG binaries export.
const (
	// EvReset is a backend that fell a whole queue behind finding itself
	// reset: it throws away its catalog and relation caches
	// (InvalidateSystemCaches). Counted from EvRebuild less the parallel
	// workers' starts, or, with the reads probe, from SIGetDataEntries
	// returning -1.
	EvReset = iota
	// EvRebuild is InvalidateSystemCaches: every reset, and every
	// parallel worker's start (ParallelWorkerMain rebuilds its caches
	// under the leader's snapshot), so more than the resets.
	EvRebuild
	// EvParallel is ParallelWorkerMain: a parallel worker starts (its
	// rebuild is not a reset).
	EvParallel
	// EvCatchup is ProcessCatchupInterrupt: a backend processed a
	// catch-up interrupt (it was signalled for falling behind).
	EvCatchup
	// EvCleanup is SICleanupQueue: the queue's clean-up (run by a writer
	// when the queue fills; it resets and signals laggards).
	EvCleanup
	// EvInsert is SIInsertDataEntries: messages inserted (its n argument
	// where read, else calls).
	EvInsert
	// EvRead is the return of SIGetDataEntries with messages: messages
	// read by a backend (its return value, > 0; -1 is EvReset).
	EvRead
	nEvents
)

// probeSpec is one uprobe: its event name in erplab's group, the
// function, and the argument fetched (perf probe syntax, "" none).
type probeSpec struct {
	event, fn, arg string
	ev             int
}

// probeSpecs are the uprobes added, by event. SIInsertDataEntries' n is
// its second argument (register %si on x86-64, x1 on arm64: no debug
// information needed); SIGetDataEntries' return value is read on return,
// recorded only when not 0 (a filter in the kernel): it runs at every
// relation lock a backend takes, so its probe is added only when asked
// (AddProbes' reads; its cost: docs/observe.md).
func probeSpecs(arch string) []probeSpec {
	n := ""
	switch arch {
	case "amd64":
		n = "n=%si:s32"
	case "arm64":
		n = "n=%x1:s32"
	}
	return []probeSpec{
		{"rebuild", "InvalidateSystemCaches", "", EvRebuild},
		{"catchup", "ProcessCatchupInterrupt", "", EvCatchup},
		{"cleanup", "SICleanupQueue", "", EvCleanup},
		{"insert", "SIInsertDataEntries", n, EvInsert},
		{"parallel", "ParallelWorkerMain", "", EvParallel},
		{"read", "SIGetDataEntries%return", "ret=$retval:s32", EvRead},
	}
}

// Probes are the uprobes erplab added to one binary, in a group of their
// own ("erplab_" and 12 random hex digits): removed with `perf probe -d
// GROUP:*`, also by the next erplab command after a kill -9 (the
// leftover kind "perf-probes").
type Probes struct {
	perf, binary, group string
	// events[ev] is the perf event of ev, "" when its probe could not be
	// added.
	events [nEvents]string
	// counted: SIInsertDataEntries' n is read (else calls are counted).
	counted bool
	rec     *leftover.Record
	entry   *leftover.Entry
}

// probeKind is the leftover kind of a group of uprobes.
const probeKind = "perf-probes"

// probeData is the Data of a probeKind entry.
type probeData struct {
	Perf  string `json:"perf"`
	Group string `json:"group"`
}

func init() { leftover.Register(leftover.Kind{Name: probeKind, Undo: undoProbes}) }

// undoProbes deletes the entry's group of uprobes when perf lists it.
func undoProbes(ctx context.Context, e leftover.Entry) (string, error) {
	var d probeData
	if json.Unmarshal(e.Data, &d) != nil || !strings.HasPrefix(d.Group, "erplab_") || d.Perf == "" {
		return "", fmt.Errorf("unreadable entry: %w", leftover.ErrNotOurs)
	}
	n, err := deleteGroup(ctx, d.Perf, d.Group)
	if err != nil || n == 0 {
		return "", err
	}
	return fmt.Sprintf("removed %d uprobes %s:*", n, d.Group), nil
}

// deleteGroup deletes the uprobes of group and returns how many perf
// listed.
func deleteGroup(ctx context.Context, perf, group string) (int, error) {
	out, err := perfProbe(ctx, perf, "-l", group+":*")
	if err != nil {
		return 0, fmt.Errorf("perf probe -l: %s", firstLine(out, err))
	}
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), group+":") {
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	if out, err := perfProbe(ctx, perf, "-q", "-d", group+":*"); err != nil {
		return 0, fmt.Errorf("perf probe -d %s:*: %s", group, firstLine(out, err))
	}
	return n, nil
}

// AddProbes adds the shared-invalidation uprobes (probeSpecs; the reads'
// only when reads) to binary, the server's postgres executable, after
// recording them in rec (nil: leftover.Open()) so that a killed erplab's
// probes are removed by the next command. perf is the path Check
// returned. Adding uprobes needs root. All are added or none: a probe
// perf cannot add (a binary without the function) removes those added
// before and is an *Unavailable error naming it, for a partial set
// would miscount (no catch-ups read as none). The caller calls Remove.
func AddProbes(ctx context.Context, perf, binary string, reads bool, rec *leftover.Record) (*Probes, error) {
	var specs []probeSpec
	for _, s := range probeSpecs(runtime.GOARCH) {
		if s.ev != EvRead || reads {
			specs = append(specs, s)
		}
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return addProbes(ctx, perf, binary, "erplab_"+hex.EncodeToString(b), specs, rec)
}

// addProbes is AddProbes of specs in group.
func addProbes(ctx context.Context, perf, binary, group string, specs []probeSpec, rec *leftover.Record) (*Probes, error) {
	if os.Geteuid() != 0 {
		return nil, &Unavailable{"adding uprobes (perf probe) needs root"}
	}
	if rec == nil {
		var err error
		if rec, err = leftover.Open(); err != nil {
			return nil, err
		}
	}
	p := &Probes{perf: perf, binary: binary, group: group, rec: rec}
	// recorded before the first probe: a kill while adding leaves an
	// entry that the next command's sweep reads
	e, err := rec.Add(probeKind, binary, probeData{Perf: perf, Group: p.group})
	if err != nil {
		return nil, err
	}
	p.entry = e
	for _, s := range specs {
		if err := p.add(ctx, s); err != nil {
			why := fmt.Sprintf("%v (no uprobes kept: without it the counts would be partial)", err)
			if rerr := p.Remove(context.WithoutCancel(ctx)); rerr != nil {
				why += "; removing those added: " + rerr.Error()
			}
			return nil, &Unavailable{why}
		}
	}
	return p, nil
}

// add adds the probe of s to p's group and names its event. perf
// refuses an event name another group already has ("force duplicates by
// 'perf probe -f'"): the name carries the group's digits, so two erplab
// processes can probe at once. SIInsertDataEntries whose argument cannot
// be fetched counts calls. A probe without arguments goes where it costs
// least (probeOffset).
func (p *Probes) add(ctx context.Context, s probeSpec) error {
	event := s.event + "_" + strings.TrimPrefix(p.group, "erplab_")
	at := s.fn
	if s.arg == "" && !strings.Contains(s.fn, "%") {
		if off := probeOffset(p.binary, s.fn); off > 0 {
			at = fmt.Sprintf("%s+%d", s.fn, off) // an emulated instruction: no single-step
		}
	}
	spec := p.group + ":" + event + "=" + at
	// not -q: perf's first line says why it failed
	out, err := perfProbe(ctx, p.perf, "-x", p.binary, "-a", spec+argSuffix(s.arg))
	switch {
	case err != nil && s.ev == EvInsert && s.arg != "":
		out, err = perfProbe(ctx, p.perf, "-x", p.binary, "-a", spec)
	case err == nil && s.ev == EvInsert && s.arg != "":
		p.counted = true
	}
	if err != nil {
		return fmt.Errorf("uprobe on %s: %s", s.fn, firstLine(out, err))
	}
	name := event
	if strings.HasSuffix(s.fn, "%return") {
		name += "__return" // perf's name for a return probe
	}
	p.events[s.ev] = p.group + ":" + name
	return nil
}

// argSuffix is " ARG", or "" without one.
func argSuffix(arg string) string {
	if arg == "" {
		return ""
	}
	return " " + arg
}

// Group is the probes' perf group.
func (p *Probes) Group() string { return p.group }

// Remove deletes the probes (perf probe -d GROUP:*) and their leftover
// entry; after a failure the entry stays for the next command's sweep.
func (p *Probes) Remove(ctx context.Context) error {
	if p == nil || p.entry == nil {
		return nil
	}
	if _, err := deleteGroup(ctx, p.perf, p.group); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	err := p.rec.Remove(p.entry)
	p.entry = nil
	return err
}

// recordArgs are perf record's event arguments for the probes: each
// event, SIGetDataEntries' return filtered to ret != 0.
func (p *Probes) recordArgs() []string {
	var args []string
	for ev, name := range p.events {
		if name == "" {
			continue
		}
		args = append(args, "-e", name)
		if ev == EvRead {
			args = append(args, "--filter", "ret != 0")
		}
	}
	return args
}

// fields are the probes' tracepoints by id (their format files under
// tracefs), each with its event and the field it counts: SIInsertDataEntries'
// n where it is read, SIGetDataEntries' return value.
func (p *Probes) fields(tracefs string) (map[uint16]probeField, error) {
	out := map[uint16]probeField{}
	for ev, name := range p.events {
		if name == "" {
			continue
		}
		field := ""
		switch {
		case ev == EvInsert && p.counted:
			field = "n"
		case ev == EvRead:
			field = "ret"
		}
		id, f, err := readFormat(tracefs, name, field)
		if err != nil {
			return nil, fmt.Errorf("the uprobes' tracepoints: %w", err)
		}
		out[id] = probeField{ev: ev, f: f}
	}
	return out, nil
}

// perfProbe runs `perf probe ARGS...` and returns its combined output.
// It dies with erplab (SIGKILL): a perf probe -a that outlived a killed
// erplab could add its probe after the next command's sweep removed the
// group.
func perfProbe(ctx context.Context, perf string, args ...string) ([]byte, error) {
	c := exec.CommandContext(ctx, perf, append([]string{"probe"}, args...)...)
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return c.CombinedOutput()
}
