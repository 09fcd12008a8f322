package profile

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/opmap"
)

// The streamed lines of perf script (recorded here, group renamed) are
// counted per process of the followed tree: a -1 return is a reset,
// processes outside the postmaster's tree (9000) and a pid after its
// EXIT count apart, per second from the clock.
func TestInvalLines(t *testing.T) {
	b, err := os.ReadFile("testdata/sinval.script")
	if err != nil {
		t.Fatal(err)
	}
	p := &Probes{group: "erplab_0a1b2c3d4e5f", counted: true, binary: "/usr/lib/postgresql/15/bin/postgres"}
	for _, s := range probeSpecs("amd64") {
		name := s.event
		if strings.HasSuffix(s.fn, "%return") {
			name += "__return"
		}
		p.events[s.ev] = p.group + ":" + name
	}
	r := &InvalRecording{probes: p, clock: Clock{T0: time.Now(), MonoNs: 58131_000_000_000}, follow: map[int]bool{1751: true}, root: map[int]bool{1751: true},
		parallel: map[int]bool{}, perPID: map[int]*InvalCounts{}}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		feedLine(r, l)
	}
	want := InvalCounts{Resets: 1, Rebuilds: 1, Catchups: 1, Cleanups: 1, Inserted: 50, Read: 32}
	if r.total != want || r.bad != 0 {
		t.Errorf("total %+v (bad lines %d), want %+v", r.total, r.bad, want)
	}
	if o := (InvalCounts{Inserted: 47}); r.other != o {
		t.Errorf("other %+v, want %+v", r.other, o)
	}
	s := r.summary(3)
	if len(s.Series) != 2 || s.Series[0].Inserted != 50 || s.Series[1].Resets != 1 || s.BackendsReset != 1 || s.TopBackends[0].PID != 1752 {
		t.Errorf("summary %+v", s)
	}
	r.Attribute(s, []opmap.Interval{{PID: 1752, Op: 0, FromNs: 1_300_000_000, ToNs: 1_400_000_000}}, []string{"report"})
	if len(s.Operations) != 1 || s.Operations[0].Resets != 1 || s.Operations[0].Catchups != 1 || s.Unattributed.Inserted != 50 {
		t.Errorf("operations %+v, unattributed %+v", s.Operations, s.Unattributed)
	}
}

// Without the reads probe a reset is a cache rebuild that is not a
// parallel worker's start (ParallelWorkerMain, then its rebuild).
func TestInvalResetsWithoutReads(t *testing.T) {
	p := &Probes{group: "erplab_0a1b2c3d4e5f"}
	for _, s := range probeSpecs("amd64") {
		if s.ev != EvRead {
			p.events[s.ev] = p.group + ":" + s.event
		}
	}
	r := &InvalRecording{probes: p, clock: Clock{T0: time.Now(), MonoNs: 1_000_000_000}, follow: map[int]bool{1: true}, root: map[int]bool{1: true},
		parallel: map[int]bool{}, perPID: map[int]*InvalCounts{}}
	for _, l := range []string{
		"postgres 1/1 1.0: PERF_RECORD_FORK(20:20):(1:1)",
		"postgres 1/1 1.0: PERF_RECORD_FORK(21:21):(1:1)",
		"postgres 20/20 1.1: erplab_0a1b2c3d4e5f:parallel: (563a319b3000)",
		"postgres 20/20 1.2: erplab_0a1b2c3d4e5f:rebuild: (563a319b3000)",
		"postgres 21/21 1.3: erplab_0a1b2c3d4e5f:rebuild: (563a319b3000)",
		"postgres 21/21 1.4: erplab_0a1b2c3d4e5f:rebuild: (563a319b3000)",
	} {
		feedLine(r, l)
	}
	if want := (InvalCounts{Resets: 2, Rebuilds: 3}); r.total != want || r.bad != 0 {
		t.Errorf("total %+v (bad %d), want %+v", r.total, r.bad, want)
	}
	if r.perPID[20].Resets != 0 || r.perPID[21].Resets != 2 {
		t.Errorf("per pid %+v %+v", r.perPID[20], r.perPID[21])
	}
}

// feedLine counts one line of perf script's text (the recorded test
// data) as the recording counts perf record's records.
func feedLine(r *InvalRecording, text string) {
	_, pid, ts, rest, err := parseHeader(text)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.bad++
		return
	}
	if ev, ok := strings.CutPrefix(rest, "PERF_RECORD_"); ok {
		if taskEvent(ev, r.follow, r.root) != nil {
			r.bad++
		}
		return
	}
	name, args, _ := strings.Cut(rest, ": ")
	ev, ok := r.probes.eventOf(name)
	if !ok {
		return
	}
	n := int64(1)
	if ev == EvRead || ev == EvInsert && r.probes.counted {
		i := strings.LastIndexByte(args, '=')
		v, err := strconv.ParseInt(strings.TrimSpace(args[i+1:]), 0, 64)
		if i < 0 || err != nil {
			r.bad++
			return
		}
		n = v
	}
	r.hit(pid, ts, ev, n)
}

// eventOf maps a perf event name ("erplab_x:reset") to its event index.
func (p *Probes) eventOf(name string) (int, bool) {
	for ev, n := range p.events {
		if n != "" && n == name {
			return ev, true
		}
	}
	return 0, false
}

// perf record's pipe output (testdata/sinval.pipe: `perf record -k
// CLOCK_MONOTONIC -o -` of two uprobes on a program that forks, tracepoint
// 2334 with an s32 argument at offset 16, 2335 without): its samples and
// task events decoded in time order, counted for the forked child as
// perf script printed them (messages read 44, 6 and a -1 reset in the
// child, 40 in the parent; catch-ups 1 in the parent, 2 in the child).
func TestReadPipe(t *testing.T) {
	f, err := os.Open("testdata/sinval.pipe")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const parent, child = 30929, 30931
	r := &InvalRecording{probes: &Probes{}, clock: Clock{T0: time.Now(), MonoNs: 69638_000_000_000},
		follow: map[int]bool{parent: true}, root: map[int]bool{parent: true}, parallel: map[int]bool{}, perPID: map[int]*InvalCounts{},
		ids: map[uint16]probeField{2334: {EvRead, traceField{16, 4, true}}, 2335: {EvCatchup, traceField{off: -1}}}}
	r.probes.events[EvRead] = "erplab_0a1b2c3d4e5f:read"
	started, last := 0, int64(0)
	err = readPipe(f, func() { started++ }, func(it pipeItem) {
		if it.t < last {
			t.Errorf("item at %d after %d", it.t, last)
		}
		last = it.t
		r.item(it)
	})
	if err != nil || started != 1 {
		t.Fatalf("readPipe: %v (started %d)", err, started)
	}
	if want := (InvalCounts{Resets: 1, Catchups: 3, Read: 90}); r.total != want || r.bad != 0 || r.hits != 7 {
		t.Errorf("total %+v (bad %d, hits %d), want %+v", r.total, r.bad, r.hits, want)
	}
	if c := r.perPID[child]; c == nil || *c != (InvalCounts{Resets: 1, Catchups: 2, Read: 50}) || r.follow[child] {
		t.Errorf("child %+v (still followed after its exit: %v)", c, r.follow[child])
	}
	if len(r.series) != 1 {
		t.Errorf("series %+v", r.series)
	}
}

// A perf record that ends before any event (here /bin/false) is one
// line saying so, not a wait for a reader that is already done.
func TestStartInvalPerfFails(t *testing.T) {
	errc := make(chan error, 1)
	go func() {
		r, err := startInval(context.Background(), "/bin/false", &Probes{}, []int{1}, t.TempDir(), InvalOptions{})
		if r != nil {
			r.Abort()
		}
		errc <- err
	}()
	select {
	case err := <-errc:
		var u *Unavailable
		if !errors.As(err, &u) || !strings.Contains(err.Error(), "perf record on the uprobes failed") {
			t.Fatalf("error %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("startInval still waits 2 min after perf record ended")
	}
}
