package doctor

import (
	"fmt"
	"sort"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"

	"github.com/erplab/erplab/internal/rewrite"
)

// ORSubquery is one OR in a statement whose arms test the same column
// and at least one arm is a subquery, e.g.
//
//	WHERE d.owner = $1 OR d.owner IN (SELECT ...)
//
// or whose arms each test a column, on different columns, at least one
// of them with a subquery:
//
//	WHERE p.mtid IN (SELECT ...) OR p.last_modifier = $1
//
// The planner turns an OR of constants on one column into = ANY(...) and
// uses the column's index; with a subquery arm it cannot, and falls back
// to a sequential scan or a BitmapOr at best (docs/field-notes.md section 1:
// 4-15 s became 1 ms once rewritten as a UNION or an IN over one
// subquery; src/backend/optimizer/path/indxpath.c only matches
// OR-clauses whose arms are index-qualifiable).
type ORSubquery struct {
	// Column is the tested column as written ("d.owner"), or the tested
	// columns in order of appearance, comma-separated, for arms on
	// different columns ("p.mtid, p.last_modifier").
	Column string `json:"column"`
	// Arms is the number of OR arms testing Column, SubqueryArms how many
	// of them are subqueries (IN (SELECT ...), = ANY (SELECT ...),
	// = (SELECT ...)).
	Arms         int `json:"arms"`
	SubqueryArms int `json:"subquery_arms"`
}

// String is "d.owner: 2 OR arms, 1 subquery".
func (o ORSubquery) String() string {
	return fmt.Sprintf("%s: %d OR arms, %d subquer%s", o.Column, o.Arms, o.SubqueryArms, map[bool]string{true: "y", false: "ies"}[o.SubqueryArms == 1])
}

// FindORSubqueries parses sql with the PostgreSQL parser (pg_query, the
// server's own grammar; parameters $n as pg_stat_statements writes them
// are fine) and returns every OR expression anywhere in it (WHERE, JOIN
// ON, HAVING, subqueries, CTEs) that tests one column in two or more
// arms, at least one of them a subquery, or whose arms all test columns,
// two or more different ones, at least one with a subquery. Nested ORs are flattened
// (a OR (b OR c)). It returns the parser's error for text that does not
// parse (e.g. cut off).
func FindORSubqueries(sql string) ([]ORSubquery, error) {
	tree, err := rewrite.Parse(sql) // bounded: a deep statement would crash the C parser
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	// EXPLAIN of such a statement (e.g. erplab rewrite --explain) is a
	// diagnosis, not an offender.
	for _, st := range tree.GetStmts() {
		if st.GetStmt().GetExplainStmt() != nil {
			return nil, nil
		}
	}
	var out []ORSubquery
	nested := map[*pg_query.BoolExpr]bool{} // ORs already flattened into an outer OR
	rewrite.Walk(tree, func(m proto.Message) bool {
		be, ok := m.(*pg_query.BoolExpr)
		if !ok || be.Boolop != pg_query.BoolExprType_OR_EXPR || nested[be] {
			return true
		}
		type tally struct{ arms, sub int }
		byCol := map[string]*tally{}
		var order []string // columns in order of appearance
		arms := flattenOr(be.Args, nested)
		all, subs := true, 0 // every arm tests a column; subquery arms
		for _, arm := range arms {
			col, sub, ok := armColumn(arm)
			if !ok {
				all = false
				continue
			}
			t := byCol[col]
			if t == nil {
				t = &tally{}
				byCol[col] = t
				order = append(order, col)
			}
			t.arms++
			if sub {
				t.sub++
				subs++
			}
		}
		cols := make([]string, 0, len(byCol))
		for c := range byCol {
			cols = append(cols, c)
		}
		sort.Strings(cols)
		before := len(out)
		for _, c := range cols {
			if t := byCol[c]; t.arms >= 2 && t.sub >= 1 {
				out = append(out, ORSubquery{Column: c, Arms: t.arms, SubqueryArms: t.sub})
			}
		}
		// Arms on different columns (dba.stackexchange question 114337:
		// "mtid IN (SELECT ...) OR last_modifier = $1"): a BitmapOr of
		// the columns' indexes needs every arm indexable, which a
		// subquery arm is not.
		if len(out) == before && all && subs >= 1 && len(order) >= 2 {
			out = append(out, ORSubquery{Column: strings.Join(order, ", "), Arms: len(arms), SubqueryArms: subs})
		}
		return true
	})
	return out, nil
}

// flattenOr returns the arms of an OR, with nested ORs expanded and
// recorded in nested.
func flattenOr(args []*pg_query.Node, nested map[*pg_query.BoolExpr]bool) []*pg_query.Node {
	var out []*pg_query.Node
	for _, a := range args {
		if be := a.GetBoolExpr(); be != nil && be.Boolop == pg_query.BoolExprType_OR_EXPR {
			nested[be] = true
			out = append(out, flattenOr(be.Args, nested)...)
			continue
		}
		out = append(out, a)
	}
	return out
}

// armColumn classifies one OR arm: the column it tests and whether the
// other side is a subquery. ok is false for arms that do not test one
// column against a constant, parameter or subquery.
//
//	col = $1, $1 = col, col IN ($1, $2), col = ANY($1)  -> constant arm
//	col IN (SELECT ...), col = ANY (SELECT ...)         -> subquery arm
//	col = (SELECT ...), (SELECT ...) = col              -> subquery arm
func armColumn(n *pg_query.Node) (col string, subquery, ok bool) {
	if sl := n.GetSubLink(); sl != nil {
		if sl.SubLinkType != pg_query.SubLinkType_ANY_SUBLINK {
			return "", false, false
		}
		if len(sl.OperName) > 0 && opName(sl.OperName) != "=" {
			return "", false, false
		}
		c, ok := columnName(sl.Testexpr)
		return c, true, ok
	}
	ae := n.GetAExpr()
	if ae == nil {
		return "", false, false
	}
	switch ae.Kind {
	case pg_query.A_Expr_Kind_AEXPR_IN:
		if opName(ae.Name) != "=" { // NOT IN is "<>"
			return "", false, false
		}
		c, ok := columnName(ae.Lexpr)
		return c, false, ok && !hasColumn(ae.Rexpr)
	case pg_query.A_Expr_Kind_AEXPR_OP, pg_query.A_Expr_Kind_AEXPR_OP_ANY:
		if opName(ae.Name) != "=" {
			return "", false, false
		}
		side := func(a, b *pg_query.Node) (string, bool, bool) {
			c, ok := columnName(a)
			if !ok {
				return "", false, false
			}
			if sl := b.GetSubLink(); sl != nil && sl.SubLinkType == pg_query.SubLinkType_EXPR_SUBLINK {
				return c, true, true
			}
			if hasColumn(b) {
				return "", false, false // col = other_col: a join condition
			}
			return c, false, true
		}
		if c, sub, ok := side(ae.Lexpr, ae.Rexpr); ok {
			return c, sub, true
		}
		if ae.Kind == pg_query.A_Expr_Kind_AEXPR_OP {
			return side(ae.Rexpr, ae.Lexpr)
		}
	}
	return "", false, false
}

// opName joins an operator's qualified name ("=" or "pg_catalog.=").
func opName(name []*pg_query.Node) string {
	if len(name) == 0 {
		return ""
	}
	return name[len(name)-1].GetString_().GetSval()
}

// columnName returns "a.b" for a column reference, unwrapping a type cast.
func columnName(n *pg_query.Node) (string, bool) {
	if n == nil {
		return "", false
	}
	if tc := n.GetTypeCast(); tc != nil {
		return columnName(tc.Arg)
	}
	cr := n.GetColumnRef()
	if cr == nil {
		return "", false
	}
	parts := make([]string, 0, len(cr.Fields))
	for _, f := range cr.Fields {
		s := f.GetString_()
		if s == nil {
			return "", false // a.*
		}
		parts = append(parts, s.Sval)
	}
	return strings.Join(parts, "."), len(parts) > 0
}

// hasColumn reports whether an expression refers to any column outside
// a subquery (constants, parameters and subqueries have none).
func hasColumn(n *pg_query.Node) bool {
	if n == nil {
		return false
	}
	found := false
	rewrite.Walk(n, func(m proto.Message) bool {
		switch m.(type) {
		case *pg_query.ColumnRef:
			found = true
		case *pg_query.SubLink:
			return false
		}
		return !found
	})
	return found
}
