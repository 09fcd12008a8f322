package script

import (
	"strings"

	"github.com/erplab/erplab/internal/rewrite"
)

// errCopy is the failure of a COPY FROM STDIN or TO STDOUT: pgbench has no
// COPY sub-protocol and aborts the client with this message.
const errCopy = "COPY is not supported in pgbench, aborting"

// copyStdio reports whether sql (the $n form of a SQL command) holds a
// COPY ... FROM STDIN or COPY ... TO STDOUT statement, by the PostgreSQL
// grammar (pg_query, through rewrite.Parse). Text that does not parse, or
// that is too large or deep to parse, is not a COPY: the server
// will report its error.
func copyStdio(sql string) bool {
	if !strings.Contains(strings.ToLower(sql), "copy") {
		return false // no COPY keyword: spare the parser
	}
	tree, err := rewrite.Parse(sql)
	if err != nil {
		return false
	}
	for _, st := range tree.Stmts {
		if c := st.GetStmt().GetCopyStmt(); c != nil && c.Filename == "" && !c.IsProgram {
			return true
		}
	}
	return false
}
