package results

import (
	"fmt"
	"strings"
)

// Status is a run's status in its results document (the "status" field,
// a JSON string): one of the constants, those of a kind with a reason
// written "<kind>: <why>" (Because).
type Status string

// The statuses a results document holds.
const (
	// StatusRunning is the stream header's: the run goes on.
	StatusRunning Status = "running"
	// StatusCompleted: the run ran to its end.
	StatusCompleted Status = "completed"
	// StatusInterrupted: a signal (Ctrl-C) stopped it.
	StatusInterrupted Status = "interrupted"
)

// The kinds of status that carry a reason, "<kind>: <why>".
const (
	// StatusAborted: the run stopped early on its own (--max-errors, a
	// lost server) or pgbench's clients aborted.
	StatusAborted Status = "aborted"
	// StatusStalled: the server answered nothing to the end of the run.
	StatusStalled Status = "stalled"
	// StatusLost: no operation succeeded to the end of the run.
	StatusLost Status = "lost"
	// StatusKilled: Read rebuilt the document from the stream of a run
	// that left no summary.
	StatusKilled Status = "killed"
	// StatusFailed: every attempt of every key operation failed, the
	// server answering with errors (AllFailed): the data set missing, a
	// role without rights.
	StatusFailed Status = "failed"
	// StatusPartial: a merge of an incomplete set of segments.
	StatusPartial Status = "partial (--allow-partial)"
)

// Because is the status of kind k for reason why: "k: why".
func (k Status) Because(why string) Status { return k + ": " + Status(why) }

// Kind is s without its reason: StatusAborted for "aborted: 3 of 8
// clients aborted", s itself when it has none.
func (s Status) Kind() Status {
	k, _, _ := strings.Cut(string(s), ": ")
	return Status(k)
}

// Reason is the why of s when s is of kind k ("k: why"), and whether
// it is.
func (s Status) Reason(k Status) (string, bool) {
	return strings.CutPrefix(string(s), string(k)+": ")
}

// AllFailed reports whether every attempt of the key operations ops
// recorded failed (warm-up and scored attempts; there was at least one)
// and then why, in a few words: "every one of the 12 attempts of the
// key operations failed (SQLSTATE 42P01 x12)".
func AllFailed(ops []OpResult) (string, bool) {
	var attempts, failed int64
	for _, op := range ops {
		attempts += op.Count + op.WarmupCount
		failed += op.Errors + op.WarmupErrors
	}
	if attempts == 0 || failed < attempts {
		return "", false
	}
	var codes []string
	for _, c := range SQLStates(ops) {
		var n int64
		for _, op := range ops {
			n += op.ErrorsBySQLState[c]
		}
		codes = append(codes, fmt.Sprintf("%s x%d", c, n))
	}
	why := fmt.Sprintf("every one of the %d attempts of the key operations failed", attempts)
	if len(codes) > 0 {
		why += " (SQLSTATE " + strings.Join(codes, ", ") + ")"
	}
	return why, true
}
