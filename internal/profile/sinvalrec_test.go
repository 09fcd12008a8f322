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
	r := &InvalRecording{probes: p, clock: Clock{T0: time.Now(), MonoNs: 58131_000_000_000}, follow: map[int]bool{1751: true}, root: map[int]bool{1751: true}, perPID: map[int]*InvalCounts{}}
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
