package replay

import (
	"strings"

	"github.com/erplab/erplab/internal/capture"
	"github.com/erplab/erplab/internal/rewrite"
)

// prepared is what a session's Prepare left for its Executes.
type prepared struct {
	sql   string
	oids  []uint32
	types []string
}

// resolve walks each session's steps once, in order: it gives every
// Execute the text it executes, leaves out the events that cannot be
// replayed (counted in p.skipped by reason), marks the steps that end a
// transaction, and collects the type names to resolve.
func (p *plan) resolve() {
	names := map[string]bool{}
	for _, s := range p.sessions {
		named := map[string]prepared{}
		var unnamed *prepared
		tx := "I"
		kept := s.steps[:0]
		for _, st := range s.steps {
			if why := p.resolveStep(&st, named, &unnamed); why != "" {
				p.skipped[why]++
				continue
			}
			for _, n := range st.ev.TypeNames {
				if n != "" && !names[n] {
					names[n] = true
					p.typeNames = append(p.typeNames, n)
				}
			}
			if endsTx(st.ev, tx) {
				st.ends = 0 // numbered by order
			}
			if st.ev.TxAfter != "" {
				tx = st.ev.TxAfter
			}
			kept = append(kept, st)
		}
		s.steps = kept
		mergeUnnamed(s.steps)
	}
}

// mergeUnnamed marks each unnamed Prepare followed by an Execute of the
// unnamed statement of the same text: the Execute's ExecParams sends its
// Parse, with its types.
func mergeUnnamed(steps []step) {
	for i := 0; i+1 < len(steps); i++ {
		p, e := &steps[i], &steps[i+1]
		if p.ev.Kind == capture.KindPrepare && p.ev.Name == "" && e.ev.Kind == capture.KindExecute && e.unnamed && e.sql == p.sql {
			p.merged = true
		}
	}
}

// resolveStep fills one step from the session's prepared statements and
// returns why it cannot be replayed ("" when it can).
func (p *plan) resolveStep(st *step, named map[string]prepared, unnamed **prepared) string {
	e := st.ev
	switch e.Kind {
	case capture.KindConnect, capture.KindDisconnect:
		return ""
	case capture.KindQuery:
		if isCopyFromStdin(e.SQL) {
			return "COPY FROM STDIN sent as a simple query (its data is not in the capture)"
		}
		st.sql, *unnamed = e.SQL, nil // a simple Query drops the unnamed statement
	case capture.KindCopy:
		st.sql, *unnamed = e.SQL, nil
	case capture.KindPrepare:
		st.sql = e.SQL
		if e.Name == "" {
			*unnamed = &prepared{sql: e.SQL, oids: e.ParamOIDs, types: e.TypeNames}
		} else {
			named[e.Name] = prepared{sql: e.SQL, oids: e.ParamOIDs, types: e.TypeNames}
		}
	case capture.KindExecute:
		return resolveExecute(st, named, *unnamed)
	default:
		return "unknown event kind " + string(e.Kind)
	}
	return ""
}

// resolveExecute gives an Execute its text: a named statement's Prepare,
// or its own SQL run as the unnamed statement.
func resolveExecute(st *step, named map[string]prepared, unnamed *prepared) string {
	e := st.ev
	if n := len(e.Formats); n > 1 && n != len(e.Values) {
		return "execute with a parameter format count that is neither 0, 1 nor the value count"
	}
	if e.Name != "" {
		if ps, ok := named[e.Name]; ok {
			st.sql = ps.sql
			return ""
		}
		if e.SQL == "" {
			return "execute of a statement prepared before the capture began, without its text"
		}
	}
	sql := e.SQL
	if sql == "" && unnamed != nil {
		sql = unnamed.sql
	}
	if sql == "" {
		return "execute of the unnamed statement without its text"
	}
	st.sql, st.unnamed = sql, true
	if unnamed != nil && unnamed.sql == sql {
		st.oids, st.types = unnamed.oids, unnamed.types
	}
	return ""
}

// endsTx reports whether e ends a transaction, given the session's status
// before it: it leaves the session idle after a transaction block, or it
// is an autocommit statement that may have written (its command tag, when
// known, is not a read's).
func endsTx(e capture.Event, before string) bool {
	switch e.Kind {
	case capture.KindQuery, capture.KindExecute, capture.KindCopy:
	default:
		return false
	}
	if e.TxAfter != "I" {
		return false
	}
	if before == "T" || before == "E" {
		return true
	}
	verb, _, _ := strings.Cut(e.Tag, " ")
	switch verb {
	case "SELECT", "SHOW", "SET", "RESET", "FETCH", "BEGIN", "START", "DISCARD", "DEALLOCATE", "LISTEN", "NOTIFY", "EXPLAIN":
		return false
	}
	return true
}

// isCopyFromStdin reports whether a simple Query is COPY ... FROM STDIN,
// which would wait for data the capture does not hold.
func isCopyFromStdin(sql string) bool {
	if !strings.Contains(strings.ToLower(sql), "copy") {
		return false // the parse below only for texts that may hold one
	}
	tree, err := rewrite.Parse(sql)
	if err != nil {
		return false
	}
	for _, raw := range tree.Stmts {
		if c := raw.GetStmt().GetCopyStmt(); c != nil && c.IsFrom && c.Filename == "" && !c.IsProgram {
			return true
		}
	}
	return false
}
