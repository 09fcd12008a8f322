package script

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
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

// LibpqMessage formats a server error the way libpq's PQerrorMessage does
// at the default verbosity, as pgbench prints it:
//
//	ERROR:  division by zero
//	CONTEXT:  unnamed portal with parameters: $1 = '1'
//
// (lines DETAIL, HINT, QUERY and CONTEXT when the server sent them; the
// text ends without a newline).
func LibpqMessage(e *pgconn.PgError) string {
	var b strings.Builder
	b.WriteString(e.Severity + ":  " + e.Message)
	for _, f := range [...]struct{ name, v string }{{"DETAIL", e.Detail}, {"HINT", e.Hint}, {"QUERY", e.InternalQuery}, {"CONTEXT", e.Where}} {
		if f.v != "" {
			b.WriteString("\n" + f.name + ":  " + f.v)
		}
	}
	return b.String()
}

// AbortLines returns the lines pgbench 15-17 prints on stderr when a
// transaction of client (0-based) aborts it, running script number
// scriptIdx (s) with err (Result.Err), e.g.
//
//	pgbench: error: client 0 script 0 aborted in command 0 query 0: ERROR:  division by zero
//	pgbench: error: set: undefined variable "x"
//	pgbench: error: client 0 aborted in command 1 (set) of script 0; evaluation of meta-command failed
//	pgbench: error: client 0 aborted: end of script reached without completing the last transaction
func AbortLines(client, scriptIdx int, s *Script, err error) []string {
	const p = "pgbench: error: "
	var re *RunError
	if !errors.As(err, &re) || re.Command < 0 || re.Command >= len(s.Commands) {
		return []string{fmt.Sprintf("%sclient %d aborted: %v", p, client, err)}
	}
	cause := re.Err
	switch {
	case errors.Is(cause, ErrIncomplete), cause.Error() == errPipelineOpen:
		return []string{fmt.Sprintf("%sclient %d aborted: %v", p, client, cause)}
	}
	m := s.Commands[re.Command].Meta
	if m == SQL {
		var pgErr *pgconn.PgError
		if errors.As(cause, &pgErr) {
			return []string{fmt.Sprintf("%sclient %d script %d aborted in command %d query 0: %s", p, client, scriptIdx, re.Command, LibpqMessage(pgErr))}
		}
		msg := cause.Error()
		if rest, ok := strings.CutPrefix(msg, "gset: "); ok {
			msg = rest
		} else if rest, ok := strings.CutPrefix(msg, "aset: "); ok {
			msg = rest
		}
		return []string{fmt.Sprintf("%sclient %d script %d command %d query 0: %s", p, client, scriptIdx, re.Command, msg)}
	}
	what := "execution of meta-command failed"
	switch m {
	case Set, If, Elif:
		what = "evaluation of meta-command failed"
		if strings.Contains(cause.Error(), "invalid variable name") {
			what = "assignment of meta-command failed"
		}
	case StartPipeline, SyncPipeline, EndPipeline:
		what = strings.TrimPrefix(cause.Error(), m.String()+": ")
		return []string{fmt.Sprintf("%sclient %d aborted in command %d (%s) of script %d; %s", p, client, re.Command, m, scriptIdx, what)}
	}
	return []string{p + cause.Error(),
		fmt.Sprintf("%sclient %d aborted in command %d (%s) of script %d; %s", p, client, re.Command, m, scriptIdx, what)}
}
