package profile

import (
	"os"
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
		r.line(l)
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
		r.line(l)
	}
	if want := (InvalCounts{Resets: 2, Rebuilds: 3}); r.total != want || r.bad != 0 {
		t.Errorf("total %+v (bad %d), want %+v", r.total, r.bad, want)
	}
	if r.perPID[20].Resets != 0 || r.perPID[21].Resets != 2 {
		t.Errorf("per pid %+v %+v", r.perPID[20], r.perPID[21])
	}
}
