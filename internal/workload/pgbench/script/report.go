package script

import (
	"bufio"
	"fmt"
	"io"
)

// WriteCommandReport writes pgbench -r's per-command report of one script
// (printResults, PostgreSQL 15 format): a header, then one line per command
// with its average latency in ms (3 decimals), its failures, with retries
// its retries, and its first line:
//
//	statement latencies in milliseconds and failures:
//	         0.002           0  \set aid random(1, 100000 * :scale)
//
// withRetries selects the retries column (pgbench shows it when --max-tries
// is not 1); perScript prefixes the header with " - " as pgbench does when
// it reports several scripts. stats is indexed like s.Commands (e.g.
// Client.Stats merged over clients with MergeStats).
func WriteCommandReport(w io.Writer, s *Script, stats []CommandStats, withRetries, perScript bool) error {
	bw := bufio.NewWriter(w)
	prefix := ""
	if perScript {
		prefix = " - "
	}
	what := " and failures"
	if withRetries {
		what = ", failures and retries"
	}
	fmt.Fprintf(bw, "%sstatement latencies in milliseconds%s:\n", prefix, what)
	for i := range s.Commands {
		var st CommandStats
		if i < len(stats) {
			st = stats[i]
		}
		lat := 0.0
		if st.Count > 0 {
			lat = float64(st.SumUS) / 1000 / float64(st.Count)
		}
		if withRetries {
			fmt.Fprintf(bw, "   %11.3f  %10d  %10d  %s\n", lat, st.Failures, st.Retries, s.Commands[i].FirstLine)
		} else {
			fmt.Fprintf(bw, "   %11.3f  %10d  %s\n", lat, st.Failures, s.Commands[i].FirstLine)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write command report: %w", err)
	}
	return nil
}
