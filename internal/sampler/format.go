package sampler

import (
	"fmt"
	"sort"
	"strings"
)

// Line is a one-line summary of a sample for progress lines, e.g.
// "active 12 (LWLock:LockManager 8, CPU 3) idle 80 idle-in-tx 1 | server tps 1200 | temp files 0.0/s | rel files 550/s sinval ~2300 msg/s (0.56 queue/s) SInval 5 % | CPU busy 35 % sys 9 %".
// The two top waits are pg_wait_sampling's profile (mean sessions over the
// interval, "pg_wait_sampling: LWLock:LockManager 7.5, CPU 2.0") when the
// sample has one, else the active sessions' wait events at the
// sample. Parts whose data is missing (first sample, remote host) are left
// out.
func Line(s *Sample) string {
	var b strings.Builder
	fmt.Fprintf(&b, "active %d", s.Sessions.Active)
	if len(s.WaitProfile) > 0 {
		fmt.Fprintf(&b, " (pg_wait_sampling: %s)", topProfile(s.WaitProfile, 2))
	} else if keys := WaitKeys(s.Waits); len(keys) > 0 {
		parts := make([]string, 0, 2)
		for _, k := range keys[:min(2, len(keys))] {
			parts = append(parts, fmt.Sprintf("%s %d", k, s.Waits[k]))
		}
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, " idle %d idle-in-tx %d", s.Sessions.Idle, s.Sessions.IdleInTransaction+s.Sessions.IdleInTransactionAborted)
	if s.DB != nil {
		fmt.Fprintf(&b, " | server tps %.0f | temp files %.1f/s", s.DB.TPS, s.DB.TempFiles)
	}
	if c := s.Churn; c != nil {
		fmt.Fprintf(&b, " | %s", ChurnText(c))
	}
	if s.Host != nil && s.Host.Rates {
		fmt.Fprintf(&b, " | CPU busy %.0f %% sys %.0f %%", s.Host.CPU.Busy, s.Host.CPU.System)
	}
	return b.String()
}

// ChurnText formats the churn figures, e.g.
// "rel files 550/s sinval ~2300 msg/s (0.56 queue/s) SInval 5 %".
func ChurnText(c *Churn) string {
	return fmt.Sprintf("rel files %.0f/s sinval ~%.0f msg/s (%.2f queue/s) SInval %.0f %%", c.RelFilesPerS, c.SInvalPerS, c.SInvalQueuesPerS, c.SInvalWaitPct)
}

// topProfile formats the n waits with the most mean sessions.
func topProfile(p map[string]float64, n int) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if p[keys[i]] != p[keys[j]] {
			return p[keys[i]] > p[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, 0, n)
	for _, k := range keys[:min(n, len(keys))] {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, p[k]))
	}
	return strings.Join(parts, ", ")
}

// ProgressLine is Line of the latest sample, followed by the ongoing
// storm's message if any ("" before the first sample). For the load
// test's progress line.
func (ss *Session) ProgressLine() string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.latest == nil {
		return ""
	}
	line := Line(ss.latest)
	ev := ss.det.Events()
	if n := len(ev); n > 0 && ev[n-1].Ongoing() {
		line += " | STORM " + ev[n-1].Message
	}
	return line
}
