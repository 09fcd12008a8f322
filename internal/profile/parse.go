package profile

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
)

// Frame is one resolved frame of a call stack.
type Frame struct {
	// Func is the symbol, or "[dso]" (the object's base name in brackets,
	// e.g. "[postgres]") when perf could not resolve it: static
	// functions of a stripped binary.
	Func string
	// Kernel is true for frames of the kernel ([kernel.kallsyms] or a
	// module).
	Kernel bool
}

// Name is the frame's name in folded stacks and tables: Func, with the
// suffix "_[k]" for kernel frames (as FlameGraph's stackcollapse-perf.pl
// --kernel writes them).
func (f Frame) Name() string {
	if f.Kernel {
		return f.Func + KernelSuffix
	}
	return f.Func
}

// KernelSuffix marks kernel frames in folded stacks and function names.
const KernelSuffix = "_[k]"

// Sample is one on-CPU sample of a process of the server: its pid, the
// process name (comm) and the stack from the root (outermost caller) to
// the leaf (the function on the CPU).
type Sample struct {
	PID  int
	Comm string
	// TimeNs is perf's timestamp of the sample, ns (CLOCK_MONOTONIC when
	// recorded by Start: perf record -k CLOCK_MONOTONIC).
	TimeNs int64
	Stack  []Frame
}

// Parsed is what Parse keeps of a `perf script` output: the samples of the
// followed processes and the count of all samples (every process; idle
// CPUs yield no samples here, so Server/Host is the server's share of the
// host's busy CPU time).
type Parsed struct {
	Samples []Sample
	// HostSamples counts every sample of the recording.
	HostSamples int
	// PIDs are the followed processes that had at least one sample.
	PIDs map[int]bool
	// KernelFrames and KernelUnknown count kernel frames and those perf
	// could not name (kernel symbols hidden: kernel.kptr_restrict).
	KernelFrames, KernelUnknown int
}

// Parse reads the output of
//
//	perf script --show-task-events -F comm,pid,tid,time,ip,sym,dso
//
// (ScriptArgs) and keeps the samples of roots and of every process
// forked from them, directly or not: the process tree is rebuilt from the
// PERF_RECORD_FORK and PERF_RECORD_EXIT lines (perf synthesizes a FORK
// line, with the parent from /proc, for each process that exists when the
// recording starts, and records the real ones after), so backends started
// during the recording are followed and a pid reused by an unrelated
// process after an exit is not. Threads other than a process's main
// thread count as their process. A recording without call graphs
// (Sampling.NoCallGraph) has the leaf on the header line ("comm pid/tid
// time: ip sym (dso)", comm padded with spaces): it is the sample's one
// frame. Lines that are neither a sample header,
// a task event nor a frame are errors naming their line number.
func Parse(r io.Reader, roots []int) (*Parsed, error) {
	p := &Parsed{PIDs: map[int]bool{}}
	follow := map[int]bool{}
	root := map[int]bool{}
	for _, pid := range roots {
		follow[pid], root[pid] = true, true
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var cur *Sample // the sample whose frames are being read, nil if not followed
	inSample := false
	line := 0
	flush := func() {
		if cur != nil {
			// perf lists frames leaf first; Stack is root first.
			s := cur.Stack
			for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
				s[i], s[j] = s[j], s[i]
			}
			p.Samples = append(p.Samples, *cur)
			p.PIDs[cur.PID] = true
		}
		cur, inSample = nil, false
	}
	for sc.Scan() {
		line++
		text := sc.Text()
		if strings.TrimSpace(text) == "" {
			flush()
			continue
		}
		// Frames are indented (perf: a tab); without call graphs perf
		// pads the header's comm with spaces instead.
		if text[0] == '\t' || text[0] == ' ' && !isHeader(text) {
			if !inSample {
				return nil, fmt.Errorf("perf script line %d: a frame outside a sample", line)
			}
			if cur == nil {
				continue
			}
			f, err := parseFrame(text)
			if err != nil {
				return nil, fmt.Errorf("perf script line %d: %w", line, err)
			}
			p.countKernel(f)
			if n := len(cur.Stack); n > 0 && strings.HasPrefix(f.Func, "[") && cur.Stack[n-1] == f {
				continue // consecutive unresolved frames of one object: one frame
			}
			cur.Stack = append(cur.Stack, f)
			continue
		}
		flush()
		comm, pid, ts, rest, err := parseHeader(text)
		if err != nil {
			return nil, fmt.Errorf("perf script line %d: %w", line, err)
		}
		if ev, ok := strings.CutPrefix(rest, "PERF_RECORD_"); ok {
			if err := taskEvent(ev, follow, root); err != nil {
				return nil, fmt.Errorf("perf script line %d: %w", line, err)
			}
			continue
		}
		// A recording without call graphs (Sampling.NoCallGraph) has
		// its one frame, the leaf, on the header line.
		var leaf Frame
		if rest != "" {
			if leaf, err = parseFrame(rest); err != nil || !strings.Contains(rest, " (") {
				return nil, fmt.Errorf("perf script line %d: unexpected %q after the sample header (perf script -F must be %s)", line, rest, scriptFields)
			}
		}
		p.HostSamples++
		inSample = true
		if follow[pid] {
			cur = &Sample{PID: pid, Comm: comm, TimeNs: ts}
			if rest != "" {
				p.countKernel(leaf)
				cur.Stack = []Frame{leaf}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("perf script: %w", err)
	}
	flush()
	return p, nil
}

// isHeader tells whether s reads as a sample or task-event header.
func isHeader(s string) bool {
	_, _, _, _, err := parseHeader(s)
	return err == nil
}

// countKernel counts f in KernelFrames and KernelUnknown.
func (p *Parsed) countKernel(f Frame) {
	if f.Kernel {
		p.KernelFrames++
		if strings.HasPrefix(f.Func, "[") {
			p.KernelUnknown++
		}
	}
}

// parseHeader splits "comm pid/tid time: rest"; comm may hold spaces and
// ": ", so the separator is the first ": " preceded by a pid/tid and a
// time.
func parseHeader(s string) (comm string, pid int, timeNs int64, rest string, err error) {
	from := 0
	for {
		i := strings.Index(s[from:], ":")
		if i < 0 {
			return "", 0, 0, "", fmt.Errorf("not a sample header: %q", s)
		}
		i += from
		from = i + 1
		if i+1 < len(s) && s[i+1] != ' ' {
			continue
		}
		head := strings.Fields(s[:i])
		if len(head) < 3 {
			continue
		}
		ts, ok := parseTimeNs(head[len(head)-1])
		if !ok {
			continue
		}
		pidStr, _, ok := strings.Cut(head[len(head)-2], "/")
		if !ok {
			continue
		}
		if pid, err = strconv.Atoi(pidStr); err != nil {
			continue
		}
		return strings.Join(head[:len(head)-2], " "), pid, ts, strings.TrimSpace(s[i+1:]), nil
	}
}

// parseTimeNs reads perf script's "SECONDS.FRACTION" (6 digits, or 9
// with --ns) as nanoseconds, exactly.
func parseTimeNs(s string) (int64, bool) {
	sec, frac, _ := strings.Cut(s, ".")
	if sec == "" || len(frac) > 9 {
		return 0, false
	}
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	var f int64
	if frac != "" {
		if f, err = strconv.ParseInt(frac, 10, 64); err != nil || f < 0 {
			return 0, false
		}
		for k := len(frac); k < 9; k++ {
			f *= 10
		}
	}
	return n*1e9 + f, true
}

// taskEvent applies "FORK(c:ct):(p:pt)" or "EXIT(c:ct):(p:pt)" to the
// followed set; other records (COMM, ...) are ignored. Roots stay
// followed whatever their own FORK line says.
func taskEvent(ev string, follow, root map[int]bool) error {
	kind, args, ok := strings.Cut(ev, "(")
	if !ok || (kind != "FORK" && kind != "EXIT") {
		return nil
	}
	child, parent, ok := strings.Cut(args, "):(")
	if !ok {
		return fmt.Errorf("bad task event %q", ev)
	}
	pid := func(s string) (int, error) {
		s = strings.TrimSuffix(s, ")")
		a, _, _ := strings.Cut(s, ":")
		return strconv.Atoi(a)
	}
	c, err := pid(child)
	if err != nil {
		return fmt.Errorf("bad task event %q", ev)
	}
	pp, err := pid(parent)
	if err != nil {
		return fmt.Errorf("bad task event %q", ev)
	}
	applyTask(kind == "FORK", c, pp, follow, root)
	return nil
}

// applyTask applies process c's fork from pp (fork) or its exit to the
// followed set.
func applyTask(fork bool, c, pp int, follow, root map[int]bool) {
	if c == pp || root[c] {
		return // a thread of the same process, or a root
	}
	switch {
	case fork && follow[pp]:
		follow[c] = true
	default:
		delete(follow, c) // exited, or a reused pid, not ours
	}
}

// parseFrame reads "\t    ip sym (dso)".
func parseFrame(s string) (Frame, error) {
	s = strings.TrimSpace(s)
	ip, rest, ok := strings.Cut(s, " ")
	if !ok {
		return Frame{}, fmt.Errorf("bad frame %q", s)
	}
	rest = strings.TrimSpace(rest)
	sym, dso := rest, ""
	if strings.HasSuffix(rest, ")") {
		if i := strings.LastIndex(rest, " ("); i >= 0 {
			sym, dso = rest[:i], rest[i+2:len(rest)-1]
		} else if strings.HasPrefix(rest, "(") {
			sym, dso = "[unknown]", rest[1:len(rest)-1]
		}
	}
	kernel := strings.HasPrefix(dso, "[kernel") || strings.HasPrefix(ip, "ffffffff")
	if i := strings.Index(sym, "+0x"); i > 0 {
		sym = sym[:i] // a symoff field
	}
	if sym == "" || sym == "[unknown]" {
		switch {
		case kernel:
			sym = "[kernel]"
		case dso == "" || dso == "[unknown]":
			sym = "[unknown]"
		default:
			sym = "[" + filepath.Base(dso) + "]"
		}
	}
	return Frame{Func: sym, Kernel: kernel}, nil
}
