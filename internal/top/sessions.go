package top

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/sampler"
)

// Filter narrows the session and blocking views: each non-empty field
// must equal the session's value (Database: datname, Application:
// application_name, State: "active", "idle", "idle in transaction", ...).
type Filter struct {
	Database    string `json:"database,omitempty"`
	Application string `json:"application,omitempty"`
	State       string `json:"state,omitempty"`
}

// String is "database=erp application=1C state=active" (empty: "all").
func (f Filter) String() string {
	var p []string
	for _, kv := range [][2]string{{"database", f.Database}, {"application", f.Application}, {"state", f.State}} {
		if kv[1] != "" {
			p = append(p, kv[0]+"="+kv[1])
		}
	}
	if len(p) == 0 {
		return "all"
	}
	return strings.Join(p, " ")
}

// apply keeps the sessions f matches, as ReadSessions' WHERE does.
func (f Filter) apply(ss []Session) []Session {
	if f == (Filter{}) {
		return ss
	}
	var out []Session
	for _, s := range ss {
		if (f.Database == "" || s.Database == f.Database) && (f.Application == "" || s.Application == f.Application) && (f.State == "" || s.State == f.State) {
			out = append(out, s)
		}
	}
	return out
}

// Session is one client backend of any database with its parallel
// workers folded in: their wait events are counted on this (the
// leader's) row.
type Session struct {
	PID         int    `json:"pid"`
	Database    string `json:"database"`
	User        string `json:"user"`
	Application string `json:"application"`
	State       string `json:"state"`
	// Wait is the leader's wait event key ("Lock:transactionid", "CPU").
	Wait string `json:"wait"`
	// Workers is the number of parallel workers; WorkerWaits counts them
	// by wait event key.
	Workers     int            `json:"workers,omitempty"`
	WorkerWaits map[string]int `json:"worker_waits,omitempty"`
	// Duration is the time since query_start (active) or state_change.
	Duration time.Duration `json:"duration_ns"`
	// XactAge is the time since xact_start, 0 outside a transaction.
	XactAge time.Duration `json:"xact_age_ns,omitempty"`
	// BlockedBy are the pids this session waits for (pg_blocking_pids,
	// read only for sessions waiting on a heavyweight lock).
	BlockedBy []int `json:"blocked_by,omitempty"`
	// Query is the query text as pg_stat_activity holds it (up to
	// track_activity_query_size bytes).
	Query string `json:"query"`
}

// Waits returns the session's wait events with its workers': "CPU 1,
// IO:DataFileRead 2" style counts, leader included.
func (s Session) Waits() map[string]int {
	w := map[string]int{s.Wait: 1}
	for k, n := range s.WorkerWaits {
		w[k] += n
	}
	return w
}

// sessionsSQL reads every client backend of every database (the view is
// server-wide; without pg_read_all_stats other roles' sessions are rows
// with their user and database only, sampler.ClientSession) and the parallel workers by leader (leader_pid,
// PostgreSQL 13+); pg_blocking_pids is called only for backends waiting
// on a heavyweight lock (it takes the lock manager's partition locks).
// $1..$3 are the filter (database, application, state; ” = any).
const sessionsSQL = `WITH a AS MATERIALIZED (
  SELECT pid, leader_pid, backend_type, datid, usesysid, datname, usename, application_name, state, wait_event_type, wait_event,
         query_start, state_change, xact_start, query
  FROM pg_catalog.pg_stat_activity WHERE pid <> pg_catalog.pg_backend_pid()
), w AS (
  SELECT leader_pid, coalesce(wait_event_type || ':' || wait_event, 'CPU') AS wait, count(*)::int4 AS n
  FROM a WHERE backend_type = 'parallel worker' AND leader_pid IS NOT NULL GROUP BY 1, 2
)
SELECT a.pid, coalesce(a.datname::text, ''), coalesce(a.usename::text, ''), coalesce(a.application_name, ''), coalesce(a.state, ''),
       CASE WHEN a.backend_type IS NULL THEN '' ELSE coalesce(a.wait_event_type || ':' || a.wait_event, 'CPU') END,
       coalesce((SELECT jsonb_object_agg(w.wait, w.n) FROM w WHERE w.leader_pid = a.pid), '{}'::jsonb)::text,
       coalesce(extract(epoch FROM now() - CASE WHEN a.state = 'active' THEN a.query_start ELSE a.state_change END), 0)::float8,
       coalesce(extract(epoch FROM now() - a.xact_start), 0)::float8,
       CASE WHEN a.wait_event_type = 'Lock' THEN pg_catalog.pg_blocking_pids(a.pid) ELSE '{}'::int4[] END,
       coalesce(a.query, '')
FROM a
WHERE ` + sampler.ClientSession + `
  AND ($1 = '' OR a.datname = $1) AND ($2 = '' OR a.application_name = $2) AND ($3 = '' OR a.state = $3)
ORDER BY a.state = 'active' DESC, 8 DESC, a.pid`

// ReadSessions reads the client sessions of every database matching f,
// active first, longest first. Errors: the query failing (wrapped).
func ReadSessions(ctx context.Context, conn *pgx.Conn, f Filter) ([]Session, error) {
	rows, err := conn.Query(ctx, sessionsSQL, f.Database, f.Application, f.State)
	if err != nil {
		return nil, fmt.Errorf("top: sessions: %w", err)
	}
	var out []Session
	var s Session
	var ww string
	var dur, xact float64
	var blocked []int32
	_, err = pgx.ForEachRow(rows, []any{&s.PID, &s.Database, &s.User, &s.Application, &s.State, &s.Wait, &ww, &dur, &xact, &blocked, &s.Query}, func() error {
		x := s
		x.Duration, x.XactAge = time.Duration(dur*float64(time.Second)), time.Duration(xact*float64(time.Second))
		if err := json.Unmarshal([]byte(ww), &x.WorkerWaits); err != nil {
			return err
		}
		for _, n := range x.WorkerWaits {
			x.Workers += n
		}
		if len(x.WorkerWaits) == 0 {
			x.WorkerWaits = nil
		}
		for _, b := range blocked {
			x.BlockedBy = append(x.BlockedBy, int(b))
		}
		out = append(out, x)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("top: sessions: %w", err)
	}
	return out, nil
}

// BlockNode is one session of a blocking chain: Session blocks Children
// (the sessions waiting for it).
type BlockNode struct {
	Session  Session
	Children []*BlockNode
}

// Blocking builds the blocking forest from sessions (BlockedBy): the
// roots are root blockers (they block someone and wait for no one shown
// here), each with the chain of sessions waiting behind it. A session
// waiting for several appears under each. Cycles (deadlocks before the
// detector runs) are cut at the first repeat.
func Blocking(sessions []Session) []*BlockNode {
	byPID := map[int]Session{}
	waiters := map[int][]int{}
	for _, s := range sessions {
		byPID[s.PID] = s
		for _, b := range s.BlockedBy {
			waiters[b] = append(waiters[b], s.PID)
		}
	}
	var build func(pid int, seen map[int]bool) *BlockNode
	build = func(pid int, seen map[int]bool) *BlockNode {
		s, ok := byPID[pid]
		if !ok {
			s = Session{PID: pid, State: "(not shown: other filter or not a client backend)"}
		}
		n := &BlockNode{Session: s}
		seen[pid] = true
		kids := waiters[pid]
		sort.Ints(kids)
		for _, k := range kids {
			if !seen[k] {
				n.Children = append(n.Children, build(k, seen))
			}
		}
		delete(seen, pid)
		return n
	}
	var roots []*BlockNode
	var pids []int
	for pid := range waiters {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	for _, pid := range pids {
		if s, ok := byPID[pid]; ok && len(s.BlockedBy) > 0 {
			continue // blocked itself: not a root
		}
		roots = append(roots, build(pid, map[int]bool{}))
	}
	return roots
}

// LockType is the heavyweight lock a session waits for ("relation",
// "transactionid", "tuple", "advisory", ...), "" when it waits for none.
func (s Session) LockType() string {
	t, ev, ok := strings.Cut(s.Wait, ":")
	if !ok || t != "Lock" {
		return ""
	}
	return ev
}

// FullQuery returns the query text of pid as pg_stat_activity holds it
// (up to track_activity_query_size bytes). Errors: no such client
// backend, the query failing.
func FullQuery(ctx context.Context, conn *pgx.Conn, pid int) (string, error) {
	var q string
	err := conn.QueryRow(ctx, `SELECT coalesce(query, '') FROM pg_catalog.pg_stat_activity WHERE pid = $1`, pid).Scan(&q)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("top: no session with pid %d", pid)
	}
	if err != nil {
		return "", fmt.Errorf("top: query of pid %d: %w", pid, err)
	}
	return q, nil
}

// Signal is what Kill sends.
type Signal string

const (
	// Cancel cancels the session's current query (pg_cancel_backend).
	Cancel Signal = "cancel"
	// Terminate ends the session (pg_terminate_backend).
	Terminate Signal = "terminate"
)

// Kill cancels or terminates pid. It returns whether the server sent
// the signal (false: no such process, or the role may not signal it:
// pg_signal_backend or the same role is needed). Errors: an unknown
// signal, the query failing.
func Kill(ctx context.Context, conn *pgx.Conn, pid int, sig Signal) (bool, error) {
	fn := map[Signal]string{Cancel: "pg_cancel_backend", Terminate: "pg_terminate_backend"}[sig]
	if fn == "" {
		return false, fmt.Errorf("top: unknown signal %q", sig)
	}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_catalog."+fn+"($1)", pid).Scan(&ok); err != nil {
		return false, fmt.Errorf("top: %s(%d): %w", fn, pid, err)
	}
	return ok, nil
}
