package top

import (
	"fmt"
	"sort"
	"strings"
)

// View names a screen of top.
type View int

const (
	// ViewOverview is the header, states, waits and longest queries.
	ViewOverview View = iota
	// ViewSessions lists every client session of every database.
	ViewSessions
	// ViewBlocking shows root blockers and the chains behind them.
	ViewBlocking
)

var viewNames = []string{"overview", "sessions", "blocking"}

// String returns "overview", "sessions" or "blocking".
func (v View) String() string {
	if v < 0 || int(v) >= len(viewNames) {
		return fmt.Sprintf("view(%d)", int(v))
	}
	return viewNames[v]
}

// ParseView parses a view name. Errors: an unknown name.
func ParseView(s string) (View, error) {
	for i, n := range viewNames {
		if n == s {
			return View(i), nil
		}
	}
	return 0, fmt.Errorf("unknown view %q (overview, sessions, blocking)", s)
}

// waitsText formats a session's waits, leader first: "IPC:ExecuteGather
// + workers IO:DataFileRead 2" or just the leader's wait.
func waitsText(s Session) string {
	if s.Workers == 0 {
		return s.Wait
	}
	keys := make([]string, 0, len(s.WorkerWaits))
	for k := range s.WorkerWaits {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if s.WorkerWaits[keys[i]] != s.WorkerWaits[keys[j]] {
			return s.WorkerWaits[keys[i]] > s.WorkerWaits[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, s.WorkerWaits[k])
	}
	return fmt.Sprintf("%s + %d workers: %s", s.Wait, s.Workers, strings.Join(parts, ", "))
}

// renderSessions draws the sessions view: a summary line, then one row
// per session (selected marks row sel with ">"), and when detail is set
// the selected session's full query below.
func renderSessions(ss []Session, f Filter, sel int, detail string) []string {
	active, workers := 0, 0
	for _, s := range ss {
		if s.State == "active" {
			active++
		}
		workers += s.Workers
	}
	lines := []string{
		fmt.Sprintf("sessions of every database, filter %s: %d shown, %d active, %d parallel workers (their waits on the leader's row)", f, len(ss), active, workers),
		fmt.Sprintf("  %-7s %-12s %-10s %-18s %-20s %9s  %-60s %s", "PID", "DATABASE", "USER", "APPLICATION", "STATE", "FOR", "WAITS", "QUERY"),
	}
	for i, s := range ss {
		mark := " "
		if i == sel {
			mark = ">"
		}
		blocked := ""
		if len(s.BlockedBy) > 0 {
			blocked = fmt.Sprintf(" [blocked by %s]", pids(s.BlockedBy))
		}
		lines = append(lines, fmt.Sprintf("%s %-7d %-12s %-10s %-18s %-20s %9s  %-60s %s", mark, s.PID, cut(s.Database, 12), cut(s.User, 10), cut(s.Application, 18),
			cut(s.State, 20), durHuman(s.Duration), waitsText(s)+blocked, oneLine(s.Query)))
	}
	if detail != "" && sel >= 0 && sel < len(ss) {
		lines = append(lines, "", fmt.Sprintf("full query of pid %d (%s@%s, %s):", ss[sel].PID, ss[sel].User, ss[sel].Database, ss[sel].Application))
		lines = append(lines, strings.Split(detail, "\n")...)
	}
	return lines
}

// renderBlocking draws the blocking view: root blockers, each with the
// chain of sessions waiting behind it and the lock type each waits for.
func renderBlocking(roots []*BlockNode) []string {
	blocked := 0
	var count func(n *BlockNode)
	count = func(n *BlockNode) {
		for _, c := range n.Children {
			blocked++
			count(c)
		}
	}
	for _, r := range roots {
		count(r)
	}
	if len(roots) == 0 {
		return []string{"blocking: no session waits for a lock held by another (pg_blocking_pids)"}
	}
	lines := []string{fmt.Sprintf("blocking: %d root blockers, %d blocked sessions (pg_blocking_pids)", len(roots), blocked)}
	var walk func(n *BlockNode, depth int)
	walk = func(n *BlockNode, depth int) {
		s := n.Session
		what := fmt.Sprintf("%s for %s", s.State, durHuman(s.Duration))
		if lt := s.LockType(); lt != "" {
			what = fmt.Sprintf("waits for lock %s for %s", lt, durHuman(s.Duration))
		}
		prefix := ""
		if depth > 0 {
			prefix = strings.Repeat("  ", depth-1) + "└ "
		} else if s.XactAge > 0 {
			what += fmt.Sprintf(", transaction open %s", durHuman(s.XactAge))
		}
		tail := ""
		if len(n.Children) > 0 {
			tail = fmt.Sprintf(" [blocks %d]", len(n.Children))
		}
		lines = append(lines, fmt.Sprintf("%spid %d %s@%s (%s) %s%s: %s", prefix, s.PID, s.User, s.Database, s.Application, what, tail, oneLine(s.Query)))
		for _, c := range n.Children {
			walk(c, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	return lines
}

func pids(p []int) string {
	s := make([]string, len(p))
	for i, x := range p {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
