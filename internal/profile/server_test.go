package profile_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/procfs"

	"github.com/erplab/erplab/internal/opmap"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/profile"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

func TestLocate(t *testing.T) {
	dsn := srv.DSN(t, "postgres")
	c := srv.Cluster(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	s, err := profile.Locate(ctx, conn, "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Postmaster != c.PID() || !strings.HasSuffix(s.DataDir, "/data") {
		t.Errorf("Locate = %+v, want postmaster %d data %s", s, c.PID(), c.DataDir())
	}
	// Another proc root: the backend is not a process there, as for a
	// remote server.
	_, err = profile.Locate(ctx, conn, t.TempDir())
	var u *profile.Unavailable
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "not a local process") || strings.Contains(err.Error(), "\n") {
		t.Errorf("Locate on an empty proc root: %v", err)
	}
}

func TestCheckReasons(t *testing.T) {
	ctx := context.Background()
	_, _, err := profile.Check(ctx, profile.Host{Perf: filepath.Join(t.TempDir(), "perf")})
	if err == nil || !strings.Contains(err.Error(), "apt-get install linux-perf") {
		t.Errorf("no perf: %v", err)
	}
	if _, err := exec.LookPath("perf"); err != nil {
		t.Skip("perf not installed: the paranoid and kptr_restrict lines need it")
	}
	proc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proc, "sys/kernel"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, v string) {
		if err := os.WriteFile(filepath.Join(proc, "sys/kernel", name), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("perf_event_paranoid", "2")
	write("kptr_restrict", "2")
	_, _, err = profile.Check(ctx, profile.Host{Proc: proc, Unprivileged: true})
	if err == nil || !strings.Contains(err.Error(), "perf_event_paranoid is 2") {
		t.Errorf("paranoid 2, not root: %v", err)
	}
	write("perf_event_paranoid", "-1")
	_, warning, err := profile.Check(ctx, profile.Host{Proc: proc, Unprivileged: true})
	if err != nil || !strings.Contains(warning, "kptr_restrict=2") {
		t.Errorf("paranoid -1, kptr_restrict 2: %v, warning %q", err, warning)
	}
}

// load runs n connections doing one statement loop until ctx ends and
// returns the loops done.
func load(ctx context.Context, t *testing.T, dsn string, n int, setup string, loop []string) int64 {
	t.Helper()
	return loadOps(ctx, t, dsn, n, setup, loop, nil)
}

// loadOps is load marking each loop on its backend in opm (operation 0;
// nil: none), as the engine marks its key operations.
func loadOps(ctx context.Context, t *testing.T, dsn string, n int, setup string, loop []string, opm *opmap.Map) int64 {
	t.Helper()
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			conn, err := pgx.Connect(context.Background(), dsn)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close(context.Background())
			if setup != "" {
				if _, err := conn.Exec(context.Background(), setup); err != nil {
					errs <- err
					return
				}
			}
			pid := conn.PgConn().PID()
			for k := 0; ctx.Err() == nil; k++ {
				opm.Begin(pid, 0)
				for _, q := range loop {
					var err error
					if strings.Contains(q, "$1") {
						_, err = conn.Exec(ctx, q, (k*7919+i*104729)%20000+1)
					} else {
						_, err = conn.Exec(ctx, q)
					}
					if err != nil {
						if ctx.Err() == nil {
							errs <- err
						}
						return
					}
				}
				opm.End(pid)
				done.Add(1)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("load: %v", err)
	}
	return done.Load()
}

var (
	selectLoop = []string{"SELECT v FROM prof_t WHERE id = $1"}
	churnLoop  = []string{"CREATE TEMP TABLE churn(a int, b text)", "CREATE INDEX ON churn(a)",
		"INSERT INTO churn SELECT g, 'x' FROM generate_series(1, 20) g", "DROP TABLE churn"}
)

func prepare(t *testing.T) string {
	t.Helper()
	dsn := srv.NewDatabase(t)
	pool := srv.Pool(t, dsn)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE prof_t(id int PRIMARY KEY, v text);
		INSERT INTO prof_t SELECT g, md5(g::text) FROM generate_series(1, 20000) g; ANALYZE prof_t`); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// profiled records the server while a load runs for d; the load's
// connections open after the recording started, so their backends are
// followed only through their FORK records.
func profiled(t *testing.T, dsn string, d time.Duration, setup string, loop []string) (*profile.Summary, int64) {
	t.Helper()
	ctx := context.Background()
	sess, err := profile.Begin(ctx, dsn, profile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	n := load(lctx, t, dsn, 3, setup, loop)
	sum, _, err := sess.End(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return sum, n
}

// A temp-table churn shows invalidation, catalog and file-system shares
// well above a select-only load's; the select-only profile is query
// execution, index access and network.
func TestProfileLoads(t *testing.T) {
	pgtest.NeedPerf(t)
	dsn := prepare(t)
	// 4 s give the server thousands of samples on a quiet machine but
	// only 100-400 at load 35, where it gets a fraction of the CPUs, and
	// shares of 100 samples are noisy (+-5 points): a profile short of 300
	// samples is taken again, twice as long (up to 16 s). The check below
	// still fails under 100.
	enough := func(loop []string) *profile.Summary {
		for d := 4 * time.Second; ; d *= 2 {
			s, _ := profiled(t, dsn, d, "", loop)
			if (s.Samples >= 300 && s.Processes >= 3) || d >= 16*time.Second {
				return s
			}
			t.Logf("%d samples of %d processes in %s: profiling for %s", s.Samples, s.Processes, d, 2*d)
		}
	}
	sel, churn := enough(selectLoop), enough(churnLoop)
	for _, s := range []*profile.Summary{sel, churn} {
		if s.Samples < 100 || s.Processes < 3 {
			t.Fatalf("too few samples or processes: %d samples of %d processes (the load's backends were not followed)", s.Samples, s.Processes)
		}
	}
	for _, sub := range []string{profile.SubSinval, profile.SubCatalog, profile.SubFS} {
		if a, b := sel.Share(sub), churn.Share(sub); !(b >= 2*a && b >= 2) {
			t.Errorf("%s: churn %.1f %% not well above select-only %.1f %%", sub, b, a)
		}
	}
	query := sel.Share(profile.SubExecutor) + sel.Share(profile.SubAccess) + sel.Share(profile.SubNetwork) +
		sel.Share(profile.SubParser) + sel.Share(profile.SubPlanner)
	// The absolute share is a measurement of the host: on a loaded
	// machine scheduling takes a larger part of the server's CPU (39.8 %
	// at load 35 where 53-56 % was usual). ERPLAB_PROFILE_ACCEPT=1 makes
	// it a failure; the comparisons above and below hold at any load.
	if query < 40 {
		if os.Getenv("ERPLAB_PROFILE_ACCEPT") != "" {
			t.Errorf("select-only: executor, access, network, parser, planner only %.1f %%", query)
		} else {
			t.Logf("select-only: executor, access, network, parser, planner only %.1f %% (scheduler and waits %.1f %%); ERPLAB_PROFILE_ACCEPT=1 makes it a failure", query, sel.Share(profile.SubSched))
		}
	}
	if a, b := sel.Share(profile.SubExecutor)+sel.Share(profile.SubAccess)+sel.Share(profile.SubNetwork), sel.Share(profile.SubCatalog)+sel.Share(profile.SubFS)+sel.Share(profile.SubSinval); a < 3*b {
		t.Errorf("select-only: executor+access+network %.1f %% not well above catalog+fs+sinval %.1f %%", a, b)
	}
	t.Logf("select-only: %s", shares(sel))
	t.Logf("temp churn:  %s", shares(churn))
}

// spread is "mean m, sd s, median, range [lo, hi]" of xs.
func spread(xs []float64) string {
	x := append([]float64(nil), xs...)
	sort.Float64s(x)
	m, sd := 0.0, 0.0
	for _, v := range x {
		m += v / float64(len(x))
	}
	for _, v := range x {
		sd += (v - m) * (v - m) / float64(len(x)-1)
	}
	med := x[len(x)/2]
	if len(x)%2 == 0 {
		med = (x[len(x)/2-1] + x[len(x)/2]) / 2
	}
	return fmt.Sprintf("mean %.3f, sd %.3f, median %.3f, range [%.3f, %.3f] over %d rounds", m, math.Sqrt(sd), med, x[0], x[len(x)-1], len(x))
}

// treeCPU is the CPU seconds of pm and its children, with those they
// reaped (proc(5) utime, stime, cutime, cstime).
func treeCPU(t *testing.T, pm int) float64 {
	t.Helper()
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		t.Fatal(err)
	}
	procs, err := fs.AllProcs()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil || (p.PID != pm && st.PPID != pm) {
			continue
		}
		sum += float64(st.UTime+st.STime) / 100
		if p.PID == pm {
			sum += float64(st.CUTime+st.CSTime) / 100
		}
	}
	return sum
}

func shares(s *profile.Summary) string {
	var parts []string
	for _, x := range s.Subsystems {
		parts = append(parts, fmt.Sprintf("%s %.1f", x.Name, x.SharePct))
	}
	return fmt.Sprintf("%d samples: %s", s.Samples, strings.Join(parts, ", "))
}

// TestMeasureTmpfs prints the tmpfs figures of docs/measurements/2026-12-01-profile-overhead.md
// (ERPLAB_PROFILE_MEASURE=1): the churn's file-system share with temp
// tables on disk and on a tmpfs tablespace, alternating.
func TestMeasureTmpfs(t *testing.T) {
	if os.Getenv("ERPLAB_PROFILE_MEASURE") == "" {
		t.Skip("set ERPLAB_PROFILE_MEASURE=1 to measure the tmpfs comparison")
	}
	pgtest.NeedPerf(t)
	dsn := prepare(t)
	ctx := context.Background()
	const d = 5 * time.Second
	// tmpfs: a tablespace whose directory is a tmpfs mount.
	dir, err := os.MkdirTemp("", "erplab-profile-tmpfs-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755) //nolint:errcheck
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755) //nolint:errcheck
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256m,mode=0700", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v %s", err, out)
	}
	defer exec.Command("umount", mnt).Run() //nolint:errcheck
	if out, err := exec.Command("chown", "postgres", mnt).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	pool := srv.Pool(t, dsn)
	if _, err := pool.Exec(ctx, "CREATE TABLESPACE prof_tmpfs LOCATION '"+mnt+"'"); err != nil {
		t.Fatal(err)
	}
	defer pool.Exec(ctx, "DROP TABLESPACE prof_tmpfs") //nolint:errcheck
	for i := 0; i < 2; i++ {
		disk, nd := profiled(t, dsn, d, "", churnLoop)
		tmp, nt := profiled(t, dsn, d, "SET temp_tablespaces = prof_tmpfs", churnLoop)
		t.Logf("churn on disk: fs %.1f %% (%.0f loops/s); on tmpfs: fs %.1f %% (%.0f loops/s)", disk.Share(profile.SubFS), float64(nd)/d.Seconds(),
			tmp.Share(profile.SubFS), float64(nt)/d.Seconds())
		t.Logf("  disk: %s", shares(disk))
		t.Logf("  tmpfs: %s", shares(tmp))
	}
}

// A wall clock stepped since the server started moves the start times
// /proc gives (boot time as the wall clock says now + ticks since boot):
// an ab run lost its profile so ("pid 18210 here started at 03:41:35Z,
// the server at 03:41:21Z") on a VM whose clock was stepped 14 s. Locate
// trusts the postmaster's working directory when it is the server's data
// directory, whatever the clocks say. The proc root here is the real
// backend's and postmaster's stat files with /proc/stat's btime an hour
// later and the postmaster's cwd linked to the data directory.
func TestLocateSteppedClock(t *testing.T) {
	dsn := srv.DSN(t, "postgres")
	c := srv.Cluster(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}
	proc := t.TempDir()
	copyFile := func(from, to string, edit func(string) string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, []byte(edit(string(b))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	same := func(s string) string { return s }
	stepped := func(s string) string {
		lines := strings.Split(s, "\n")
		for i, l := range lines {
			var bt int64
			if _, err := fmt.Sscanf(l, "btime %d", &bt); err == nil {
				lines[i] = fmt.Sprintf("btime %d", bt+3600)
			}
		}
		return strings.Join(lines, "\n")
	}
	copyFile("/proc/stat", filepath.Join(proc, "stat"), stepped)
	for _, pid := range []int{backend, c.PID()} {
		copyFile(fmt.Sprintf("/proc/%d/stat", pid), filepath.Join(proc, fmt.Sprint(pid), "stat"), same)
	}
	cwd := filepath.Join(proc, fmt.Sprint(c.PID()), "cwd")
	if err := os.Symlink(c.DataDir(), cwd); err != nil {
		t.Fatal(err)
	}
	s, err := profile.Locate(ctx, conn, proc)
	if err != nil || s.Postmaster != c.PID() {
		t.Fatalf("Locate with the clock stepped an hour: %+v, %v", s, err)
	}
	// Another directory: not this server, clocks or not.
	if err := os.Remove(cwd); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), cwd); err != nil {
		t.Fatal(err)
	}
	var u *profile.Unavailable
	if _, err := profile.Locate(ctx, conn, proc); !errors.As(err, &u) || !strings.Contains(err.Error(), "the server's data directory is") {
		t.Fatalf("Locate with the postmaster elsewhere: %v", err)
	}
}
