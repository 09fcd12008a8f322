package profile

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/hostfacts"
)

// Server is a local server found from one of its sessions.
type Server struct {
	// Postmaster is the postmaster's pid; DataDir the server's
	// data_directory ("" when the role may not read it).
	Postmaster int
	DataDir    string
}

// Locate finds the postmaster of the server conn is connected to among
// the processes of proc (procfs root, "" = /proc): the session's backend
// (pg_backend_pid) must be a visible process named postgres whose parent
// is a postgres process whose working directory is the server's
// data_directory (the postmaster runs in it) or, when either cannot be
// read, that started when the server says it started
// (pg_postmaster_start_time, within 5 s; a wall clock stepped since
// then moves /proc's start times, so the directory is preferred). Anything else is a server on another host or in another
// PID namespace, or a pid that only happens to exist here: an
// *Unavailable error says so in one line.
func Locate(ctx context.Context, conn *pgx.Conn, proc string) (Server, error) {
	var (
		backend int
		start   float64
		dataDir *string
	)
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid(), extract(epoch FROM pg_postmaster_start_time())::float8,
		CASE WHEN pg_has_role('pg_read_all_settings', 'MEMBER') THEN current_setting('data_directory') END`).Scan(&backend, &start, &dataDir); err != nil {
		return Server{}, fmt.Errorf("profile: locate the server: %w", err)
	}
	if proc == "" {
		proc = hostfacts.DefaultProcRoot
	}
	remote := func(why string) error {
		return &Unavailable{fmt.Sprintf("the server is not a local process (%s): perf samples only this host's processes; run erplab profile on the database host", why)}
	}
	fs, err := hostfacts.New(proc, "")
	if err != nil {
		return Server{}, fmt.Errorf("profile: %w", err)
	}
	p, err := fs.Proc(backend)
	if err != nil {
		return Server{}, remote(fmt.Sprintf("its backend pid %d is not a process here", backend))
	}
	st, err := p.Stat()
	if err != nil || st.Comm != "postgres" {
		return Server{}, remote(fmt.Sprintf("pid %d here is not a postgres process", backend))
	}
	pm, err := fs.Proc(st.PPID)
	if err != nil {
		return Server{}, remote(fmt.Sprintf("the parent of pid %d is not visible", backend))
	}
	pst, err := pm.Stat()
	if err != nil || pst.Comm != "postgres" {
		return Server{}, remote(fmt.Sprintf("the parent %d of pid %d is not postgres", st.PPID, backend))
	}
	s := Server{Postmaster: st.PPID}
	if dataDir != nil {
		s.DataDir = *dataDir
		cwd, err := os.Readlink(fs.ProcPath(fmt.Sprint(st.PPID), "cwd"))
		if err == nil && !sameDir(cwd, *dataDir) {
			return Server{}, remote(fmt.Sprintf("postgres pid %d here runs in %s, the server's data directory is %s", st.PPID, cwd, *dataDir))
		}
		if err == nil {
			// the postmaster runs in the server's data directory: that
			// is the server, whatever the clocks say (below)
			return s, nil
		}
	}
	// Without the data directory, the start time: a process's is
	// computed from the boot time as the wall clock gives it now, so a
	// wall clock stepped since the start (NTP, a paused VM) moves it;
	// the check above does not depend on clocks.
	if t, err := pst.StartTime(); err == nil && math.Abs(t-start) > 5 {
		return Server{}, remote(fmt.Sprintf("pid %d here started at %s, the server at %s",
			st.PPID, time.Unix(int64(t), 0).UTC().Format(time.RFC3339), time.Unix(int64(start), 0).UTC().Format(time.RFC3339)))
	}
	return s, nil
}

// sameDir compares two paths after resolving symbolic links.
func sameDir(a, b string) bool {
	if a == b {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

// LocateDSN connects to dsn (10 s at most), Locates the server and
// closes the connection.
func LocateDSN(ctx context.Context, dsn, proc string) (Server, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, dsn)
	if err != nil {
		return Server{}, fmt.Errorf("profile: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return Locate(cctx, conn, proc)
}
