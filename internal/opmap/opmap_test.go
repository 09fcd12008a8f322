package opmap

import (
	"sync"
	"testing"
	"time"
)

func TestBeginEndStable(t *testing.T) {
	m := New([]string{"a", "b"})
	m.Begin(10, 1)
	m.Begin(11, 0)
	before := m.Snapshot(nil)
	if op, ok := m.Op(10); !ok || op != 1 || m.Name(op) != "b" {
		t.Fatalf("Op(10) = %d %v, want 1 (b)", op, ok)
	}
	m.End(11)
	m.Begin(12, 0) // new after the first snapshot
	after := m.Snapshot(nil)
	if op, ok := Stable(before, after, 10); !ok || op != 1 {
		t.Errorf("pid 10: %d %v, want 1 stable", op, ok)
	}
	if _, ok := Stable(before, after, 11); ok {
		t.Error("pid 11 ended in between: not stable")
	}
	if _, ok := Stable(before, after, 12); ok {
		t.Error("pid 12 unknown before: not stable")
	}
	// The same operation again on the same PID is another execution.
	m.End(10)
	m.Begin(10, 1)
	if _, ok := Stable(before, m.Snapshot(nil), 10); ok {
		t.Error("pid 10 ran a new execution of the same op: not stable")
	}
	m.Forget(10)
	if _, ok := m.Op(10); ok {
		t.Error("forgotten pid still known")
	}
	if got := after[11]; got.Op != Idle || got.Seq != 1 {
		t.Errorf("ended pid state %+v, want idle with seq 1", got)
	}
}

func TestNilMap(t *testing.T) {
	var m *Map
	m.Begin(1, 0)
	m.End(1)
	m.Forget(1)
	if s := m.Snapshot(nil); len(s) != 0 {
		t.Fatalf("nil map snapshot %v", s)
	}
	if _, ok := m.Op(1); ok {
		t.Fatal("nil map knows a pid")
	}
}

func TestConcurrent(t *testing.T) {
	m := New([]string{"a", "b", "c"})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(pid uint32) {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				m.Begin(pid, i%3)
				m.End(pid)
			}
		}(uint32(100 + g))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 100; i++ {
			for _, s := range m.Snapshot(nil) {
				if s.Op < Idle || s.Op > 2 {
					t.Errorf("bad op %d", s.Op)
				}
			}
		}
	}()
	wg.Wait()
	<-done
	for pid, s := range m.Snapshot(nil) {
		if s.Op != Idle || s.Seq != 1000 {
			t.Errorf("pid %d: %+v, want idle after 1000 executions", pid, s)
		}
	}
}

// A timeline records each execution between Begin and End, a Begin
// without End closes the previous execution, executions over the limit
// are counted as dropped, and nothing is recorded after the stop.
func TestTimeline(t *testing.T) {
	m := New([]string{"a", "b"})
	m.Begin(7, 0) // before the timeline: not recorded
	m.End(7)
	tl := m.StartTimeline(time.Now(), 3)
	m.Begin(7, 0)
	m.End(7)
	m.Begin(8, 1)
	m.Begin(8, 0) // closes 8's b
	m.Begin(9, 1) // over the limit
	ivs, dropped := m.StopTimeline(tl)
	m.Begin(7, 1)
	if len(ivs) != 3 || dropped != 1 {
		t.Fatalf("intervals %+v, dropped %d; want 3 and 1", ivs, dropped)
	}
	want := []struct {
		pid uint32
		op  int32
		end bool
	}{{7, 0, true}, {8, 1, true}, {8, 0, false}}
	for i, w := range want {
		iv := ivs[i]
		if iv.PID != w.pid || iv.Op != w.op || (iv.ToNs >= 0) != w.end || (w.end && iv.ToNs < iv.FromNs) {
			t.Errorf("interval %d = %+v, want pid %d op %d ended %v", i, iv, w.pid, w.op, w.end)
		}
	}
	if ivs[1].ToNs != ivs[2].FromNs {
		t.Errorf("8's b ends at %d, its next Begin at %d", ivs[1].ToNs, ivs[2].FromNs)
	}
	var nilMap *Map
	if nilMap.StartTimeline(time.Now(), 1) != nil {
		t.Error("nil map: timeline")
	}
}
