package engine

// Timing of the engine on a fake clock (testing/synctest) with a fake
// workload: stages and ramps, think time, warm-up, graceful stop and the
// open model's arrivals, asserted at exact instants of the bubble's clock.
// No PostgreSQL: the pool's connections are in-memory pipes (net.Pipe) to
// a stub that only answers the start-up handshake and pings with pgx's own
// pgproto3 backend; the fake workload never touches its connection, it
// only takes its service time on the bubble's clock.

import (
	"context"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/record"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/workload"
)

// stubBackend answers one connection: the start-up handshake
// (AuthenticationOk, BackendKeyData, ReadyForQuery) and any simple query
// (the pool's ping) with EmptyQueryResponse; it ends at Terminate or when
// the pipe closes.
func stubBackend(c net.Conn) {
	defer c.Close()
	be := pgproto3.NewBackend(c, c)
	if _, err := be.ReceiveStartupMessage(); err != nil {
		return
	}
	be.Send(&pgproto3.AuthenticationOk{})
	be.Send(&pgproto3.ParameterStatus{Name: "server_version", Value: "15.0"})
	be.Send(&pgproto3.ParameterStatus{Name: "standard_conforming_strings", Value: "on"})
	be.Send(&pgproto3.ParameterStatus{Name: "client_encoding", Value: "UTF8"})
	be.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 1}})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if be.Flush() != nil {
		return
	}
	for {
		msg, err := be.Receive()
		if err != nil {
			return
		}
		switch msg.(type) {
		case *pgproto3.Terminate:
			return
		case *pgproto3.Query:
			be.Send(&pgproto3.EmptyQueryResponse{})
			be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
			if be.Flush() != nil {
				return
			}
		}
	}
}

// pipePool is a pool of size connections to stubBackend over net.Pipe,
// closed in t.Cleanup; it must be made inside the bubble.
func pipePool(t *testing.T, size int) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig("host=stub user=test dbname=test sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = int32(size)
	cfg.ConnConfig.LookupFunc = func(context.Context, string) ([]string, error) { return []string{"stub"}, nil }
	cfg.ConnConfig.DialFunc = func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		go stubBackend(server)
		return client, nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// fakeWorkload's operations take their service time on the bubble's clock
// and never touch the connection; it logs each execution's VU and start.
type fakeWorkload struct {
	service time.Duration
	ops     []workload.Operation
	roles   []workload.Role

	mu   sync.Mutex
	t0   time.Time
	runs []execution // in start order
}

// execution is one Execute call: its VU and its start since the run's.
type execution struct {
	vu    int
	start time.Duration
}

func newFake(service time.Duration) *fakeWorkload {
	return &fakeWorkload{
		service: service,
		ops:     []workload.Operation{{Name: "op", Target: time.Second, Priority: 1}},
		roles:   []workload.Role{{Name: "user", Share: 1, Mix: map[string]float64{"op": 1}}},
	}
}

func (w *fakeWorkload) Name() string                     { return "fake" }
func (w *fakeWorkload) Operations() []workload.Operation { return w.ops }
func (w *fakeWorkload) Roles() []workload.Role           { return w.roles }
func (w *fakeWorkload) Setup(context.Context, *pgxpool.Pool, workload.SetupOptions) error {
	return nil
}

func (w *fakeWorkload) Execute(ctx context.Context, _ *pgx.Conn, vu *workload.VU, _ int) error {
	w.mu.Lock()
	w.runs = append(w.runs, execution{vu.ID, time.Since(w.t0)})
	w.mu.Unlock()
	if w.service <= 0 {
		return nil
	}
	t := time.NewTimer(w.service)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// vusIn counts the distinct VUs that started an execution in (from, to].
func (w *fakeWorkload) vusIn(from, to time.Duration) int {
	seen := map[int]bool{}
	for _, r := range w.runs {
		if r.start > from && r.start <= to {
			seen[r.vu] = true
		}
	}
	return len(seen)
}

// fakeRun runs cfg with w on a pipePool of poolSize inside the caller's
// bubble; the run starts at the bubble's current instant (w.t0). The log
// of w is complete when it returns.
func fakeRun(t *testing.T, w *fakeWorkload, cfg Config, poolSize int) (Outcome, []results.OpResult, error) {
	t.Helper()
	pool := pipePool(t, poolSize)
	cfg.Workload = w
	if cfg.Roles == nil {
		cfg.Roles = w.Roles()
	}
	w.t0 = time.Now()
	var infos []record.OpInfo
	for _, o := range w.Operations() {
		infos = append(infos, record.OpInfo{Name: o.Name, Target: o.Target, Priority: o.Priority})
	}
	rec := record.New(infos, w.t0, cfg.Warmup, time.Second)
	out, err := Run(context.Background(), pool, cfg, rec)
	return out, rec.Results(0), err
}

const ms = time.Millisecond

// A ramp 0 -> 10 VUs over 10 s, a hold at 10, a ramp down to 4 over 6 s
// and a hold: the controller (Tick 100 ms) runs TargetAt VUs (rounded
// down) from each tick to the next. With no service time and a fixed
// 20 ms think time every running VU starts an operation in any 40 ms
// window, so the VUs seen in (tick+10ms, tick+50ms] are exactly those the
// tick left running.
func TestSynctestRampAndStages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFake(0)
		out, _, err := fakeRun(t, w, Config{
			Stages: []Stage{{Duration: 10 * time.Second, Target: 10}, {Duration: 5 * time.Second, Target: 10},
				{Duration: 6 * time.Second, Target: 4}, {Duration: 3 * time.Second, Target: 4}},
			Think: ThinkTime{Kind: "fixed", Min: 20 * ms},
		}, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []struct {
			tick time.Duration
			want int
		}{
			{0, 0},                 // ramp: 0 x 10 / 10 s
			{1500 * ms, 1},         // 1.5 -> 1
			{5500 * ms, 5},         // 5.5 -> 5
			{9900 * ms, 9},         // 9.9 -> 9
			{10 * time.Second, 10}, // hold
			{14900 * ms, 10},       // still the hold
			{15500 * ms, 10},       // ramp down 10 -> 4: 10 - 0.5 -> 10 (toward zero)
			{18500 * ms, 7},        // 10 - 3.5 -> 7
			{20900 * ms, 5},        // 10 - 5.9 -> 5
			{21500 * ms, 4},        // hold at 4
			{23900 * ms, 4},        // last tick of the run
		} {
			if got := w.vusIn(p.tick+10*ms, p.tick+50*ms); got != p.want {
				t.Errorf("after the tick at %s: %d VUs ran, want %d", p.tick, got, p.want)
			}
		}
		if out.MaxVUs != 10 || out.Status != "completed" || out.Cancelled != 0 {
			t.Errorf("outcome %+v, want 10 VUs at most, completed, nothing cancelled", out)
		}
		// The run ends at the first tick past the profile, 24 s, and the
		// VUs, all thinking, stop at once.
		if out.Elapsed != 24*time.Second {
			t.Errorf("elapsed %s on the fake clock, want exactly 24s", out.Elapsed)
		}
		// The ramp down stops the newest VUs: 10 VUs in all, none after.
		ids := map[int]bool{}
		for _, r := range w.runs {
			ids[r.vu] = true
		}
		if len(ids) != 10 || !ids[1] || !ids[10] {
			t.Errorf("VUs %v, want 1..10", ids)
		}
	})
}

// Think time between two operations of one VU is exact on the fake
// clock: fixed 250 ms after a 50 ms operation gives starts 300 ms apart;
// uniform 100-200 ms with no service time gives gaps within the bounds,
// both ends approached.
func TestSynctestThinkTime(t *testing.T) {
	gaps := func(w *fakeWorkload) []time.Duration {
		var g []time.Duration
		for i := 1; i < len(w.runs); i++ {
			g = append(g, w.runs[i].start-w.runs[i-1].start)
		}
		return g
	}
	stages := []Stage{{Duration: 0, Target: 1}, {Duration: 10 * time.Second, Target: 1}}
	synctest.Test(t, func(t *testing.T) {
		w := newFake(50 * ms)
		if _, _, err := fakeRun(t, w, Config{Stages: stages, Think: ThinkTime{Kind: "fixed", Min: 250 * ms}, Seed: 3}, 1); err != nil {
			t.Fatal(err)
		}
		first := w.runs[0].start
		if first > 250*ms {
			t.Errorf("first start at %s, want within the first pause (<= the mean think time, 250ms)", first)
		}
		for i, g := range gaps(w) {
			if g != 300*ms {
				t.Fatalf("gap %d: %s, want exactly 300ms (50ms operation + 250ms think)", i, g)
			}
		}
		// Every start before the end of the run (10 s) happened.
		if want := int((10*time.Second-first-1)/(300*ms)) + 1; len(w.runs) != want {
			t.Errorf("%d operations, want %d (first at %s, one every 300ms until 10s)", len(w.runs), want, first)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		w := newFake(0)
		if _, _, err := fakeRun(t, w, Config{Stages: stages, Think: ThinkTime{Kind: "uniform", Min: 100 * ms, Max: 200 * ms}, Seed: 3}, 1); err != nil {
			t.Fatal(err)
		}
		lo, hi := time.Hour, time.Duration(0)
		for _, g := range gaps(w) {
			lo, hi = min(lo, g), max(hi, g)
		}
		if lo < 100*ms || hi > 200*ms || lo > 105*ms || hi < 195*ms {
			t.Errorf("gaps in [%s, %s], want within [100ms, 200ms] reaching both ends", lo, hi)
		}
		if n := len(w.runs); n < 60 || n > 70 {
			t.Errorf("%d operations in 10 s at a mean gap of 150 ms, want about 66", n)
		}
	})
}

// Warm-up: operations started in the first Warmup are counted apart
// (WarmupCount) and not scored; the boundary is the start instant.
func TestSynctestWarmupBoundary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFake(10 * ms)
		_, res, err := fakeRun(t, w, Config{
			Stages: []Stage{{Duration: 0, Target: 1}, {Duration: 5 * time.Second, Target: 1}},
			Think:  ThinkTime{Kind: "fixed", Min: 90 * ms}, Warmup: 2 * time.Second, Seed: 1,
		}, 1)
		if err != nil {
			t.Fatal(err)
		}
		var warm, scored int64
		for _, r := range w.runs {
			if r.start < 2*time.Second {
				warm++
			} else {
				scored++
			}
		}
		if res[0].WarmupCount != warm || res[0].Count != scored {
			t.Errorf("recorded %d warm-up and %d scored, the workload started %d before 2s and %d after",
				res[0].WarmupCount, res[0].Count, warm, scored)
		}
		// One start every 100 ms: 20 in the warm-up, 30 after.
		if warm != 20 || scored != 30 {
			t.Errorf("%d starts before 2s and %d after, want 20 and 30", warm, scored)
		}
	})
}

// Graceful stop: at the end of the profile operations in flight may
// finish within GracefulStop; past it they are cancelled and not
// recorded.
func TestSynctestGracefulStop(t *testing.T) {
	stages := []Stage{{Duration: 0, Target: 2}, {Duration: 5 * time.Second, Target: 2}}
	// Operations of 3 s from 0 s (no think time): the second ones run
	// from 3 s to 6 s, past the end at 5 s.
	synctest.Test(t, func(t *testing.T) {
		w := newFake(3 * time.Second)
		out, res, err := fakeRun(t, w, Config{Stages: stages, GracefulStop: 2 * time.Second}, 2)
		if err != nil {
			t.Fatal(err)
		}
		if out.Elapsed != 6*time.Second || out.Cancelled != 0 || res[0].Count != 4 {
			t.Errorf("grace 2s: elapsed %s, cancelled %d, recorded %d; want 6s (the last operations finish), 0, 4",
				out.Elapsed, out.Cancelled, res[0].Count)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		w := newFake(3 * time.Second)
		out, res, err := fakeRun(t, w, Config{Stages: stages, GracefulStop: 500 * ms}, 2)
		if err != nil {
			t.Fatal(err)
		}
		if out.Elapsed != 5500*ms || out.Cancelled != 2 || res[0].Count != 2 || len(w.runs) != 4 {
			t.Errorf("grace 500ms: elapsed %s, cancelled %d, recorded %d of %d started; want 5.5s, 2, 2 of 4",
				out.Elapsed, out.Cancelled, res[0].Count, len(w.runs))
		}
	})
}

// Open model: with free workers every arrival of the seeded Poisson
// schedule starts exactly at its scheduled instant on the fake clock, the
// count of arrivals over the run is the schedule's, and no backlog is
// left.
func TestSynctestOpenModelArrivals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rate, err := ConstantRate(50)
		if err != nil {
			t.Fatal(err)
		}
		const seed = 11
		w := newFake(ms)
		out, res, err := fakeRun(t, w, Config{
			Stages: []Stage{{Duration: 0, Target: 20}, {Duration: 10 * time.Second, Target: 20}},
			Rate:   rate, Seed: seed,
		}, 20)
		if err != nil {
			t.Fatal(err)
		}
		want := arrivalTimes(rate, 10*time.Second, seed)
		if out.Arrivals != int64(len(want)) || out.BacklogLeft != 0 || len(w.runs) != len(want) {
			t.Fatalf("arrivals %d, backlog left %d, executions %d; want the schedule's %d, 0, %d",
				out.Arrivals, out.BacklogLeft, len(w.runs), len(want), len(want))
		}
		// 50/s over 10 s: 500 expected; the seeded schedule has its own count.
		if n := len(want); n < 430 || n > 570 {
			t.Errorf("%d arrivals in 10 s at 50/s, want about 500", n)
		}
		for i, off := range want {
			if at := time.Duration(off * float64(time.Second)); w.runs[i].start != at {
				t.Fatalf("arrival %d scheduled at %s started at %s", i, at, w.runs[i].start)
			}
		}
		// A lag of 0 is recorded at the histograms' floor of 1 µs.
		if res[0].Count != int64(len(want)) || res[0].Lag.Max != 0.001 {
			t.Errorf("recorded %d executions with lag max %v ms, want %d with no lag (0.001 ms, the floor)", res[0].Count, res[0].Lag.Max, len(want))
		}
	})
}

// waitUntil under a fake clock ends exactly at the instant it waits for
// (the nanosleep part falls back to a Go timer there).
func TestSynctestWaitUntil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		live := make(chan struct{})
		for _, d := range []time.Duration{0, time.Millisecond, 1500 * time.Microsecond, 2 * ms, 7*ms + 3, time.Second} {
			at := time.Now().Add(d)
			if !waitUntil(context.Background(), live, at) || !time.Now().Equal(at) {
				t.Errorf("wait %s: ended at %s, want exactly %s", d, time.Now(), at)
			}
		}
	})
}
