package sampler

import (
	"fmt"
	"strings"
)

// Line is a one-line summary of a sample for progress lines, e.g.
// "active 12 (LWLock:LockManager 8, CPU 3) idle 80 idle-in-tx 1 | server tps 1200 | temp files 0.0/s | CPU busy 35 % sys 9 %".
// Parts whose data is missing (first sample, remote host) are left out.
func Line(s *Sample) string {
	var b strings.Builder
	fmt.Fprintf(&b, "active %d", s.Sessions.Active)
	keys := WaitKeys(s.Waits)
	if len(keys) > 0 {
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
	if s.Host != nil && s.Host.Rates {
		fmt.Fprintf(&b, " | CPU busy %.0f %% sys %.0f %%", s.Host.CPU.Busy, s.Host.CPU.System)
	}
	return b.String()
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
