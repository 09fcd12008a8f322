package erp

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/erplab/erplab/internal/results"
)

// maxErrorKinds bounds the SQLSTATEs whose first message is kept.
const maxErrorKinds = 32

// serverErrors keeps, per SQLSTATE, the first message the server sent for
// a failed operation and how often the code came: the engine counts
// errors by SQLSTATE only, and "53100 x 40" says less than "could not
// extend file ...: No space left on device".
type serverErrors struct {
	mu    sync.Mutex
	byKey map[string]*errorSeen
	// say, when not nil, receives one line the first time a code of a
	// class that means the server is in trouble (53 insufficient
	// resources, 58 system error, XX internal error) comes: it is
	// reported while the run goes on, not only at its end.
	say func(format string, args ...any)
}

type errorSeen struct {
	code, op, msg string
	n             int64
}

// severe reports whether SQLSTATE code is of a class that means trouble
// on the server side: 53 (insufficient resources: disk full, out of
// memory, too many connections), 58 (system error: I/O) or XX (internal).
func severe(code string) bool {
	return strings.HasPrefix(code, "53") || strings.HasPrefix(code, "58") || strings.HasPrefix(code, "XX")
}

// note records err of operation op when it carries a server error.
func (s *serverErrors) note(op string, err error) {
	var pe *pgconn.PgError
	if err == nil || !errors.As(err, &pe) || pe.Code == "" {
		return
	}
	s.mu.Lock()
	e, ok := s.byKey[pe.Code]
	if !ok && len(s.byKey) < maxErrorKinds {
		if s.byKey == nil {
			s.byKey = map[string]*errorSeen{}
		}
		msg := pe.Message
		if pe.Detail != "" {
			msg += " (" + pe.Detail + ")"
		}
		e = &errorSeen{code: pe.Code, op: op, msg: msg}
		s.byKey[pe.Code] = e
	}
	if e != nil {
		e.n++
	}
	say := s.say
	s.mu.Unlock()
	if !ok && e != nil && say != nil && severe(pe.Code) {
		say("erp: server error %s in %s: %s", pe.Code, op, e.msg)
	}
}

// lines returns one line per SQLSTATE seen, most frequent first:
// "53100 x 12 (first in post_sales_invoice): could not extend file ...".
func (s *serverErrors) lines() []string {
	s.mu.Lock()
	seen := make([]errorSeen, 0, len(s.byKey))
	for _, e := range s.byKey {
		seen = append(seen, *e)
	}
	s.mu.Unlock()
	slices.SortFunc(seen, func(a, b errorSeen) int {
		if a.n != b.n {
			return int(b.n - a.n)
		}
		return strings.Compare(a.code, b.code)
	})
	out := make([]string, 0, len(seen))
	for _, e := range seen {
		out = append(out, fmt.Sprintf("%s x %d (first in %s): %s", e.code, e.n, e.op, e.msg))
	}
	return out
}

// Report implements workload.Reporter: the server's message for each
// SQLSTATE the run's operations failed with (the first one seen), most
// frequent first; nothing when no operation failed on a server error.
func (w *Workload) Report(out io.Writer, _ *results.Document) {
	ls := w.errs.lines()
	if len(ls) == 0 {
		return
	}
	fmt.Fprintln(out, "server errors (SQLSTATE x count, the first message):")
	for _, l := range ls {
		fmt.Fprintln(out, "  "+l)
	}
}
