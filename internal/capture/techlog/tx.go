package techlog

import (
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/erplab/erplab/internal/rewrite"
)

// maxTxText is the longest text classified as transaction control:
// BEGIN, COMMIT and their options fit; longer texts are not parsed.
const maxTxText = 256

// maxTxCache bounds the texts whose class is remembered.
const maxTxCache = 4096

// txClass sorts short statement texts by their effect on the
// transaction (parsed with rewrite.Parse, remembered per text).
type txClass struct{ seen map[string]byte }

// effect is 'T' for a text that opens a transaction (BEGIN, START
// TRANSACTION, COMMIT AND CHAIN), 'I' for one that ends it (COMMIT,
// ROLLBACK, PREPARE TRANSACTION), 0 otherwise; the last transaction
// statement of a text decides.
func (c *txClass) effect(sql string) byte {
	if len(sql) > maxTxText {
		return 0
	}
	if e, ok := c.seen[sql]; ok {
		return e
	}
	var e byte
	if tree, err := rewrite.Parse(sql); err == nil {
		for _, s := range tree.GetStmts() {
			if ts := s.GetStmt().GetTransactionStmt(); ts != nil {
				e = kindEffect(ts, e)
			}
		}
	}
	if len(c.seen) < maxTxCache {
		c.seen[sql] = e
	}
	return e
}

// kindEffect is one TransactionStmt's effect, prev when it has none.
func kindEffect(ts *pg_query.TransactionStmt, prev byte) byte {
	switch ts.GetKind() {
	case pg_query.TransactionStmtKind_TRANS_STMT_BEGIN, pg_query.TransactionStmtKind_TRANS_STMT_START:
		return 'T'
	case pg_query.TransactionStmtKind_TRANS_STMT_COMMIT, pg_query.TransactionStmtKind_TRANS_STMT_ROLLBACK:
		if ts.GetChain() {
			return 'T'
		}
		return 'I'
	case pg_query.TransactionStmtKind_TRANS_STMT_PREPARE:
		return 'I'
	}
	return prev
}

// txAfter is Event.TxAfter: the text's own effect when it controls the
// transaction, else Trans ("1": 'T', or 'E' when the statement failed;
// "0": 'I'; absent: unknown).
func txAfter(effect byte, trans string, failed bool) string {
	if effect != 0 {
		return string(effect)
	}
	switch {
	case trans == "1" && failed:
		return "E"
	case trans == "1":
		return "T"
	case trans == "0":
		return "I"
	}
	return ""
}
