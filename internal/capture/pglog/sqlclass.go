package pglog

import (
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/erplab/erplab/internal/rewrite"
)

// txStep is what one statement does to the transaction block.
type txStep int

const (
	txNone       txStep = iota
	txBegin             // BEGIN, START TRANSACTION
	txEnd               // COMMIT, END, ROLLBACK, ABORT, PREPARE TRANSACTION
	txRollbackTo        // ROLLBACK TO SAVEPOINT: a failed block works again
)

// class is what the conversion needs to know of a statement text.
type class struct {
	steps  []txStep // per statement of the text, in order
	copyIn bool     // one of them is COPY ... FROM STDIN
}

// classifier classifies statement texts with pg_query (through
// rewrite.Parse, bounded), remembering the last few thousand texts.
type classifier struct {
	cache map[string]class
}

const classCacheSize = 4096

func (c *classifier) classify(sql string) class {
	if cl, ok := c.cache[sql]; ok {
		return cl
	}
	cl := classOf(sql)
	if c.cache == nil || len(c.cache) >= classCacheSize {
		c.cache = make(map[string]class, classCacheSize)
	}
	c.cache[sql] = cl
	return cl
}

// classOf parses sql; a text that does not parse (or is too large to be
// parsed) changes nothing.
func classOf(sql string) class {
	tree, err := rewrite.Parse(sql)
	if err != nil {
		return class{}
	}
	var cl class
	for _, raw := range tree.GetStmts() {
		n := raw.GetStmt()
		if cp := n.GetCopyStmt(); cp != nil && cp.GetIsFrom() && !cp.GetIsProgram() && cp.GetFilename() == "" {
			cl.copyIn = true
		}
		cl.steps = append(cl.steps, txStepOf(n.GetTransactionStmt()))
	}
	return cl
}

func txStepOf(ts *pg_query.TransactionStmt) txStep {
	if ts == nil {
		return txNone
	}
	switch ts.GetKind() {
	case pg_query.TransactionStmtKind_TRANS_STMT_BEGIN, pg_query.TransactionStmtKind_TRANS_STMT_START:
		return txBegin
	case pg_query.TransactionStmtKind_TRANS_STMT_COMMIT, pg_query.TransactionStmtKind_TRANS_STMT_ROLLBACK:
		if ts.GetChain() {
			return txBegin // AND CHAIN: a new block starts at once
		}
		return txEnd
	case pg_query.TransactionStmtKind_TRANS_STMT_PREPARE:
		return txEnd
	case pg_query.TransactionStmtKind_TRANS_STMT_ROLLBACK_TO:
		return txRollbackTo
	}
	return txNone
}

// Transaction status letters, as in ReadyForQuery.
const (
	txIdle   = 'I'
	txInTx   = 'T'
	txFailed = 'E'
)

// after is the status after a successful statement of class cl.
func (cl class) after(status byte) byte {
	for _, s := range cl.steps {
		switch s {
		case txBegin:
			if status == txIdle {
				status = txInTx
			}
		case txEnd:
			status = txIdle
		case txRollbackTo:
			if status == txFailed {
				status = txInTx
			}
		}
	}
	return status
}

// failed is the status after a statement of class cl that failed, from
// status before it: a block it ends (COMMIT failing) is over; a block that
// was open, or that the text opened, is failed; else there is none.
func (cl class) failed(before byte) byte {
	opens, ends := false, false
	for _, s := range cl.steps {
		switch s {
		case txBegin:
			opens = true
		case txEnd:
			ends = ends || !opens
		}
	}
	switch {
	case ends:
		return txIdle
	case opens || before != txIdle:
		return txFailed
	}
	return txIdle
}
