package script

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mattn/go-runewidth"
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
// text ends without a newline). An error position is shown as libpq shows
// it without the query text: " at character N" after the message, or as
// the cursor display under the internal query (LibpqMessageFor).
func LibpqMessage(e *pgconn.PgError) string { return LibpqMessageFor(e, "") }

// LibpqMessageFor is LibpqMessage for an error of query, the text libpq
// would have sent (pgbench's simple mode: with the variables substituted;
// extended and the Parse of prepared mode: with $n; "" when libpq keeps no
// text, e.g. the execution of a prepared statement). With the server's
// error position (1-based, in characters) and the text, libpq's cursor
// display follows the message line (fe-protocol3.c, pqBuildErrorMessage3
// and reportErrorPosition):
//
//	ERROR:  syntax error at or near "SELEC"
//	LINE 1: SELEC 1;
//	        ^
//
// the line holding the position, tabs as spaces, cut to 60 screen columns
// with "..." (keeping 10 columns right of the cursor where it can), columns
// counted with East Asian wide characters as two. Without a text the
// position is " at character N" after the message; an internal position
// (PL/pgSQL) is shown under the internal query.
func LibpqMessageFor(e *pgconn.PgError, query string) string {
	var b strings.Builder
	b.WriteString(e.Severity + ":  " + e.Message)
	text, pos := "", 0
	switch {
	case e.Position > 0 && query != "":
		text, pos = query, int(e.Position)
	case e.Position > 0:
		fmt.Fprintf(&b, " at character %d", e.Position)
	case e.InternalPosition > 0 && e.InternalQuery != "":
		text, pos = e.InternalQuery, int(e.InternalPosition)
	case e.InternalPosition > 0:
		fmt.Fprintf(&b, " at character %d", e.InternalPosition)
	}
	if pos > 0 {
		writeErrorPosition(&b, text, pos)
	}
	for _, f := range [...]struct{ name, v string }{{"DETAIL", e.Detail}, {"HINT", e.Hint}, {"QUERY", e.InternalQuery}, {"CONTEXT", e.Where}} {
		if f.v != "" {
			b.WriteString("\n" + f.name + ":  " + f.v)
		}
	}
	return b.String()
}

// writeErrorPosition appends "\nLINE n: ...\n   ^" for character position
// loc (1-based) of query, as libpq's reportErrorPosition (see
// LibpqMessageFor); nothing when loc lies beyond the text.
func writeErrorPosition(b *strings.Builder, query string, loc int) {
	const displaySize, minRightCut = 60, 10
	loc-- // 0-based
	if loc < 0 {
		return
	}
	chars := []rune(query)
	// libpq's widths: ucs_wcwidth (ambiguous East Asian characters narrow),
	// anything not positive (controls, tabs, combining marks) as 1
	wc := runewidth.NewCondition()
	wc.EastAsianWidth = false
	width := func(r rune) int { return max(wc.RuneWidth(r), 1) }
	// col[i]: screen column where character i starts, up to col[end]
	col := make([]int, len(chars)+1)
	line, beg, end := 1, 0, len(chars)
	for i, ch := range chars {
		if i > 0 {
			col[i] = col[i-1] + width(chars[i-1])
		}
		if ch == '\r' || ch == '\n' {
			if i >= loc {
				end = i
				break
			}
			if ch == '\r' || i == 0 || chars[i-1] != '\r' {
				line++
			}
			beg = i + 1
		}
	}
	if end == len(chars) && end > 0 {
		col[end] = col[end-1] + width(chars[end-1])
	}
	if loc > end {
		return // beyond the text
	}
	begTrunc, endTrunc := false, false
	if col[end]-col[beg] > displaySize {
		if col[beg]+displaySize >= col[loc]+minRightCut {
			for col[end]-col[beg] > displaySize {
				end--
			}
			endTrunc = true
		} else {
			for col[loc]+minRightCut < col[end] {
				end--
				endTrunc = true
			}
			for col[end]-col[beg] > displaySize {
				beg++
				begTrunc = true
			}
		}
	}
	prefix := fmt.Sprintf("LINE %d: ", line)
	if begTrunc {
		prefix += "..."
	}
	b.WriteString("\n" + prefix)
	b.WriteString(strings.ReplaceAll(string(chars[beg:end]), "\t", " "))
	if endTrunc {
		b.WriteString("...")
	}
	b.WriteString("\n" + strings.Repeat(" ", len(prefix)+col[loc]-col[beg]) + "^") // prefix: ASCII
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
			return []string{fmt.Sprintf("%sclient %d script %d aborted in command %d query 0: %s", p, client, scriptIdx, re.Command, LibpqMessageFor(pgErr, re.Query))}
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
