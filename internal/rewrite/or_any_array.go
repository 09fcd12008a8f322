package rewrite

import (
	"context"
	"fmt"
	"slices"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
)

// RuleORAnyArray is the name of the OR-over-subquery rule.
const RuleORAnyArray = "or_any_array"

// orAnyArray rewrites each arm "col IN (S)" / "col = ANY (S)" of an OR whose
// arms all compare plain columns with "=" to "col = ANY (ARRAY(S))".
//
// Why it is safe: for a one-column S, "x IN (S)" and "x = ANY (ARRAY(S))"
// have the same three-valued result (true if some row equals x; else null
// if x or some row is null; else false; false for an empty S), per
// https://www.postgresql.org/docs/current/functions-subquery.html and
// functions-comparisons.html. Preconditions keep the rewrite to cases where
// it also pays and cannot change side effects: S uncorrelated (evaluated
// once as an InitPlan), no volatile functions, no FOR UPDATE/SHARE (see
// lockingBlock), no data-modifying CTE, not under NOT, no compared column
// of a table read with TABLESAMPLE (safe, but a sampled table has no
// index path: see sampledReason), and with a Catalog every compared
// column is a table's (not a WITH query's or a FROM subquery's) with an
// index leading with it (then arms on different columns are fine: the
// planner BitmapOrs their indexes; without a Catalog all arms must test
// one column). A TABLESAMPLE inside a subquery is fine: its sample is
// drawn once per scan node (the seed is fixed at the node's start, or by
// REPEATABLE), and the subquery is evaluated once either way. Names in
// FROM resolve as PostgreSQL resolves them: an unqualified name of a
// visible WITH query is that WITH query, not a table of its name. With
// Types, the compared columns and the subqueries' outputs must be scalar
// types (see TypeInfo.Scalar): for an array-valued S, ARRAY(S) is a
// multi-dimensional array and "= ANY" would compare with its elements,
// not with S's rows.
type orAnyArray struct{}

func init() { register(orAnyArray{}) }

func (orAnyArray) name() string { return RuleORAnyArray }

// volatileBuiltins are volatile whatever the catalog says
// (pg_proc.provolatile = 'v' in PostgreSQL's src/include/catalog/pg_proc.dat).
var volatileBuiltins = map[string]bool{
	"random": true, "random_normal": true, "setseed": true, "nextval": true, "setval": true, "currval": true,
	"lastval": true, "clock_timestamp": true, "timeofday": true, "gen_random_uuid": true,
	"uuid_generate_v1": true, "uuid_generate_v4": true, "pg_sleep": true, "txid_current": true,
	"pg_current_xact_id": true, "dblink": true, "dblink_exec": true, "pg_advisory_lock": true,
	"pg_try_advisory_lock": true, "pg_advisory_xact_lock": true, "pg_notify": true,
}

// stableBuiltins are common built-ins that are not volatile (immutable or
// stable in pg_proc.dat); without a Catalog any other function blocks the
// rewrite, since a user function may be volatile.
var stableBuiltins = map[string]bool{
	"count": true, "sum": true, "min": true, "max": true, "avg": true, "array_agg": true, "string_agg": true,
	"bool_and": true, "bool_or": true, "every": true, "lower": true, "upper": true, "length": true, "abs": true,
	"now": true, "date_trunc": true, "date_part": true, "extract": true, "substring": true, "substr": true,
	"trim": true, "btrim": true, "ltrim": true, "rtrim": true, "concat": true, "to_char": true, "to_date": true,
	"to_timestamp": true, "round": true, "floor": true, "ceil": true, "left": true, "right": true,
	"replace": true, "md5": true, "unnest": true, "generate_series": true, "array_length": true,
	"cardinality": true, "coalesce": true, "age": true, "position": true, "int4": true, "int8": true,
	"text": true, "numeric": true,
}

func (r orAnyArray) apply(ctx context.Context, st *statement) ([]edit, []Firing, []Veto, error) {
	var (
		edits  []edit
		fired  []Firing
		vetoes []Veto
		ferr   error
	)
	for _, raw := range st.tree.Stmts {
		root := unwrap(raw.Stmt)
		if root == nil {
			continue
		}
		stmtBlock := ""
		if hasDataModifyingCTE(root) {
			stmtBlock = "the statement has a data-modifying CTE"
		} else if why := lockingBlock(root); why != "" {
			stmtBlock = why
		}
		walk(root, nil, func(m proto.Message, stack []proto.Message) bool {
			if ferr != nil {
				return false
			}
			be, ok := m.(*pg_query.BoolExpr)
			if !ok || be.Boolop != pg_query.BoolExprType_OR_EXPR {
				return true
			}
			e, f, v, err := r.one(ctx, st, be, stack, stmtBlock)
			if err != nil {
				ferr = err
				return false
			}
			edits, fired, vetoes = append(edits, e...), append(fired, f...), append(vetoes, v...)
			return true
		})
		if ferr != nil {
			return nil, nil, nil, ferr
		}
	}
	return edits, fired, vetoes, nil
}

// arm is one classified argument of the OR.
type arm struct {
	left    *pg_query.Node // the compared expression
	sublink *pg_query.SubLink
	bad     string // why this arm blocks the rule, if it does
}

// one handles one OR expression.
func (r orAnyArray) one(ctx context.Context, st *statement, be *pg_query.BoolExpr, stack []proto.Message, stmtBlock string) ([]edit, []Firing, []Veto, error) {
	loc := int(be.Location)
	if inDeadBranch(stack) {
		return nil, nil, nil, nil
	}
	arms := make([]arm, 0, len(be.Args))
	hasSub := false
	for _, a := range be.Args {
		am := classifyArm(a)
		if am.sublink != nil || strings.Contains(am.bad, "NOT IN") || strings.Contains(am.bad, "subquery") {
			hasSub = true
		}
		arms = append(arms, am)
	}
	if !hasSub {
		return nil, nil, nil, nil // constants only: PostgreSQL folds those itself
	}
	// A veto about the whole OR is anchored at the OR; one about an arm
	// or its subquery at that arm's operator, where a firing would be.
	vetoAt := func(at int, format string, a ...any) ([]edit, []Firing, []Veto, error) {
		return nil, nil, []Veto{{Rule: r.name(), Location: at, Reason: fmt.Sprintf(format, a...)}}, nil
	}
	veto := func(format string, a ...any) ([]edit, []Firing, []Veto, error) {
		return vetoAt(loc, format, a...)
	}
	var checks []int // parameters the guard's decision depends on
	if stmtBlock != "" {
		return veto("%s", stmtBlock)
	}
	if why := underNot(stack); why != "" {
		return veto("the OR is under %s", why)
	}
	sc := scopeAt(stack)
	var cols [][]string // distinct compared columns, in order
	var subs []*pg_query.SubLink
	for i, am := range arms {
		at := nodeLocation(be.Args[i], loc)
		if am.bad != "" {
			return vetoAt(at, "%s", am.bad)
		}
		switch l := unwrap(am.left).(type) {
		case *pg_query.ColumnRef:
			f := strs(l.Fields)
			if !slices.ContainsFunc(cols, func(c []string) bool { return slices.Equal(c, f) }) {
				cols = append(cols, f)
			}
		case *pg_query.RowExpr:
			return vetoAt(at, "row IN: the left side is a row, not one column")
		default:
			return vetoAt(at, "the left side of an arm is an expression, not a plain column")
		}
		if am.sublink != nil {
			subs = append(subs, am.sublink)
		}
	}
	level := levelItems(stack, sc)
	for _, col := range cols {
		if why := sampledBlock(col, level, st.catalog != nil); why != "" {
			return veto("%s", why)
		}
	}
	if len(cols) > 1 && st.catalog == nil {
		return veto("an arm tests another column (%s, not %s): without a catalog (--dsn) the rule cannot tell that each column leads an index, which the planner needs to BitmapOr the arms",
			strings.Join(cols[1], "."), strings.Join(cols[0], "."))
	}
	var cat Catalog
	prefetched := false
	if st.catalog != nil {
		cat = memoCatalog{st}
		if _, ok := st.types.(Batcher); ok {
			// One round trip before the checks: what they will ask if
			// every answer allows the rewrite, and what validation needs.
			var q catalogQuestions
			rec := questionRecorder{&q}
			for _, sl := range subs {
				_, _ = subqueryBlock(ctx, rec, sl, sc)
			}
			for _, col := range cols {
				_, _, _ = leftColumnBlock(ctx, rec, col, level)
			}
			var edits []edit
			var subTexts []subquery
			if toks, err := st.scan(); err == nil {
				edits, subTexts, _ = sublinkEdits(st, toks, subs)
			}
			var err error
			if prefetched, err = st.prefetch(ctx, loc, edits, subTexts, q, nil); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	for _, sl := range subs {
		if why, err := subqueryBlock(ctx, cat, sl, sc); err != nil {
			return nil, nil, nil, err
		} else if why != "" {
			return vetoAt(int(sl.Location), "%s", why)
		}
	}
	colTypes := make([]uint32, len(cols))
	if cat != nil {
		for i, col := range cols {
			ci, why, err := leftColumnBlock(ctx, cat, col, level)
			if err != nil {
				return nil, nil, nil, err
			} else if why != "" {
				return veto("%s", why)
			}
			colTypes[i] = ci.TypeOID
		}
	}
	if st.types == nil && st.requireTypes {
		return veto("types unknown: not rewritten (the rule needs the server's types of the compared columns and the subqueries' outputs: give a connection, or assert that they are scalar, non-array types)")
	}
	toks, err := st.scan()
	if err != nil {
		return nil, nil, nil, err
	}
	edits, subTexts, err := sublinkEdits(st, toks, subs)
	if err != nil {
		return veto("%v", err)
	}
	if st.types != nil {
		if st.catalog == nil {
			return veto("types without a catalog: the compared columns' types are unknown")
		}
		// One round trip for what follows, where the Types can batch
		// and did not yet.
		if !prefetched {
			if _, err := st.prefetch(ctx, loc, edits, subTexts, catalogQuestions{}, colTypes); err != nil {
				return nil, nil, nil, err
			}
		}
		// The original's rejection is reported after the type checks: a
		// type veto is the clearer reason.
		sp, origWhy, err := st.original(ctx, loc)
		if err != nil {
			return nil, nil, nil, err
		}
		for i, col := range cols {
			if why, err := typeBlock(ctx, st.types, colTypes[i], "column "+strings.Join(col, ".")); err != nil {
				return nil, nil, nil, err
			} else if why != "" {
				return veto("%s", why)
			}
		}
		params := sp.desc.Params
		if origWhy != "" {
			params = st.paramOIDs
		}
		if ps := sp.raw.GetStmt().GetPrepareStmt(); ps != nil && len(params) == 0 {
			// PREPARE name(types) AS ...: the server describes the
			// PREPARE with no parameters; its subqueries' $n have the
			// declared types.
			params = prepareArgTypes(ctx, st, ps)
		}
		for i, sub := range subTexts {
			at := int(subs[i].Location)
			if c := outerCTE(subs[i], sc); c != "" {
				return vetoAt(at, "the subquery reads WITH query %s of the statement: the server cannot describe the subquery alone, so its output type is unknown", c)
			}
			if why, err := subqueryTypeBlock(ctx, st, params, sub); err != nil {
				return nil, nil, nil, err
			} else if why != "" {
				return vetoAt(at, "%s", why)
			}
		}
		if origWhy == "" {
			for i, sub := range subTexts {
				why, cs, err := guardBlock(ctx, st, subs[i], params, sub)
				if err != nil {
					return nil, nil, nil, err
				} else if why != "" {
					return vetoAt(int(subs[i].Location), "%s", why)
				}
				checks = append(checks, cs...)
			}
		}
		if origWhy != "" {
			return veto("%s", origWhy)
		}
	}
	st.addBindChecks(checks)
	var fired []Firing
	for i, sl := range subs {
		c := strings.Join(strs(unwrap(sl.Testexpr).(*pg_query.ColumnRef).Fields), ".")
		to := "= ANY"
		if f := subTexts[i].form; f != "IN" {
			to = f // "= SOME" stays SOME
		}
		fired = append(fired, Firing{Rule: r.name(), Location: int(sl.Location),
			Detail: fmt.Sprintf("%s %s (subquery) -> %s %s (ARRAY(subquery))", c, subTexts[i].form, c, to)})
	}
	return edits, fired, nil, nil
}

func isEq(name []*pg_query.Node) bool {
	s := strs(name)
	return (len(s) == 1 && s[0] == "=") || (len(s) == 2 && s[0] == "pg_catalog" && s[1] == "=")
}

// constLike: a constant, a parameter, or a cast or array of those.
func constLike(n *pg_query.Node) bool {
	switch v := unwrap(n).(type) {
	case *pg_query.A_Const, *pg_query.ParamRef:
		return true
	case *pg_query.TypeCast:
		return constLike(v.Arg)
	case *pg_query.A_ArrayExpr:
		for _, e := range v.Elements {
			if !constLike(e) {
				return false
			}
		}
		return true
	}
	return false
}

func isColumn(n *pg_query.Node) bool { _, ok := unwrap(n).(*pg_query.ColumnRef); return ok }

func classifyArm(a *pg_query.Node) arm {
	switch x := unwrap(a).(type) {
	case *pg_query.SubLink:
		switch x.SubLinkType {
		case pg_query.SubLinkType_ANY_SUBLINK:
			if len(x.OperName) > 0 && !isEq(x.OperName) {
				return arm{bad: fmt.Sprintf("a subquery arm uses operator %s ANY, not = ANY / IN", strings.Join(strs(x.OperName), "."))}
			}
			return arm{left: x.Testexpr, sublink: x}
		case pg_query.SubLinkType_EXISTS_SUBLINK:
			return arm{bad: "an arm is EXISTS (subquery), not IN"}
		case pg_query.SubLinkType_ALL_SUBLINK:
			return arm{bad: "an arm is op ALL (subquery), not IN"}
		default:
			return arm{bad: "an arm compares with a scalar subquery, not IN"}
		}
	case *pg_query.A_Expr:
		switch x.Kind {
		case pg_query.A_Expr_Kind_AEXPR_OP:
			if !isEq(x.Name) {
				return arm{bad: fmt.Sprintf("an arm uses operator %s, not =", strings.Join(strs(x.Name), "."))}
			}
			if isColumn(x.Lexpr) && constLike(x.Rexpr) {
				return arm{left: x.Lexpr}
			}
			if isColumn(x.Rexpr) && constLike(x.Lexpr) {
				return arm{left: x.Rexpr}
			}
			return arm{bad: "an = arm does not compare a column with a constant or parameter"}
		case pg_query.A_Expr_Kind_AEXPR_IN:
			if !isEq(x.Name) {
				return arm{bad: "an arm is NOT IN (list)"}
			}
			if l, ok := unwrap(x.Rexpr).(*pg_query.List); ok {
				for _, it := range l.Items {
					if !constLike(it) {
						return arm{bad: "an IN list holds a non-constant"}
					}
				}
			}
			return arm{left: x.Lexpr}
		case pg_query.A_Expr_Kind_AEXPR_OP_ANY:
			if !isEq(x.Name) || !constLike(x.Rexpr) {
				return arm{bad: "an ANY arm is not = ANY (constant array or parameter)"}
			}
			return arm{left: x.Lexpr}
		}
		return arm{bad: "an arm is not an equality"}
	case *pg_query.BoolExpr:
		if x.Boolop == pg_query.BoolExprType_NOT_EXPR && len(x.Args) == 1 {
			if sl, ok := unwrap(x.Args[0]).(*pg_query.SubLink); ok && sl.SubLinkType == pg_query.SubLinkType_ANY_SUBLINK {
				return arm{bad: "an arm is NOT IN (subquery)"}
			}
		}
		return arm{bad: "an arm is a nested AND/NOT, not an equality"}
	}
	return arm{bad: "an arm is not an equality on the column"}
}

// underNot reports the NOT-like ancestor of the OR within its query
// level, or "".
// inDeadBranch reports whether the stack lies inside the result of a
// CASE branch whose condition is the literal false: the original arm a
// rewrite keeps (guardOpen), which the planner removes. An OR there is
// left alone, so that rewriting a rewritten text changes nothing.
func inDeadBranch(stack []proto.Message) bool {
	for _, m := range stack {
		w, ok := m.(*pg_query.CaseWhen)
		if !ok {
			continue
		}
		// (the condition itself, a constant, holds no OR)
		if c, ok := unwrap(w.Expr).(*pg_query.A_Const); ok && c.GetBoolval() != nil && !c.GetBoolval().Boolval && !c.Isnull {
			return true
		}
	}
	return false
}

func underNot(stack []proto.Message) string {
	for i := len(stack) - 1; i >= 0; i-- {
		switch v := stack[i].(type) {
		case *pg_query.SelectStmt, *pg_query.UpdateStmt, *pg_query.DeleteStmt, *pg_query.SubLink:
			return ""
		case *pg_query.BoolExpr:
			if v.Boolop == pg_query.BoolExprType_NOT_EXPR {
				return "NOT"
			}
		case *pg_query.BooleanTest:
			return "IS [NOT] TRUE/FALSE/UNKNOWN"
		}
	}
	return ""
}

func hasDataModifyingCTE(root proto.Message) bool {
	found := false
	walk(root, nil, func(m proto.Message, _ []proto.Message) bool {
		if c, ok := m.(*pg_query.CommonTableExpr); ok {
			switch unwrap(c.Ctequery).(type) {
			case *pg_query.InsertStmt, *pg_query.UpdateStmt, *pg_query.DeleteStmt, *pg_query.MergeStmt:
				found = true
			}
		}
		return !found
	})
	return found
}

// lockingBlock reports why a FOR UPDATE/SHARE clause of the statement
// blocks the rewrite, or "". Locking changes what the two forms do
// beyond their result: a subquery's IN, as a SubPlan, may stop reading
// (and locking) the subquery's rows at the first match, where
// ARRAY(subquery) reads and locks them all; and under a locking clause of
// the outer query PostgreSQL rechecks the WHERE on a concurrently updated
// row's new version (EvalPlanQual), where the rule does not prove that
// both forms agree.
func lockingBlock(root proto.Message) string {
	if s, ok := root.(*pg_query.SelectStmt); ok && len(s.LockingClause) > 0 {
		return "the statement locks rows (FOR UPDATE/SHARE): the rule does not prove that the rechecks of concurrently updated rows (EvalPlanQual) see both forms alike"
	}
	found := false
	walk(root, nil, func(m proto.Message, _ []proto.Message) bool {
		if s, ok := m.(*pg_query.SelectStmt); ok && len(s.LockingClause) > 0 {
			found = true
		}
		return !found
	})
	if found {
		return "a subquery of the statement locks rows (FOR UPDATE/SHARE): the rule leaves locking statements alone (an IN subquery may stop reading and locking at its first match, ARRAY(subquery) reads and locks all of its rows)"
	}
	return ""
}

// oneColumn reports why sel does not return exactly one named expression
// column, or "".
func oneColumn(sel *pg_query.SelectStmt) string {
	if sel.Op != pg_query.SetOperation_SETOP_NONE {
		if sel.Larg == nil || sel.Rarg == nil {
			return "the subquery's set operation has a missing side"
		}
		if w := oneColumn(sel.Larg); w != "" {
			return w
		}
		return oneColumn(sel.Rarg)
	}
	if len(sel.ValuesLists) > 0 {
		for _, vl := range sel.ValuesLists {
			if l, ok := unwrap(vl).(*pg_query.List); !ok || len(l.Items) != 1 {
				return "the subquery's VALUES rows have more than one column"
			}
		}
		return ""
	}
	if len(sel.TargetList) != 1 {
		return "the subquery does not return exactly one column"
	}
	if rt, ok := unwrap(sel.TargetList[0]).(*pg_query.ResTarget); ok {
		if cr, ok := unwrap(rt.Val).(*pg_query.ColumnRef); ok {
			if f := strs(cr.Fields); f[len(f)-1] == "*" {
				return "the subquery returns *"
			}
		}
	}
	return ""
}

// subqueryBlock reports why the sublink's subquery blocks the rewrite; sc
// is the WITH queries visible at the OR.
func subqueryBlock(ctx context.Context, cat Catalog, sl *pg_query.SubLink, sc scope) (string, error) {
	sel, ok := unwrap(sl.Subselect).(*pg_query.SelectStmt)
	if !ok {
		return "the subquery is not a SELECT", nil
	}
	if w := oneColumn(sel); w != "" {
		return w, nil
	}
	var why string
	var ferr error
	walk(sel, nil, func(m proto.Message, stack []proto.Message) bool {
		if why != "" || ferr != nil {
			return false
		}
		switch v := m.(type) {
		case *pg_query.FuncCall:
			name := strs(v.Funcname)
			fn := name[len(name)-1]
			if volatileBuiltins[fn] {
				why = fmt.Sprintf("the subquery calls volatile function %s()", fn)
				return false
			}
			if cat == nil {
				if !stableBuiltins[fn] {
					why = fmt.Sprintf("the subquery calls %s(), whose volatility is unknown without a catalog (--dsn)", fn)
				}
				return why == ""
			}
			vol, known, err := cat.Volatile(ctx, fn)
			if err != nil {
				ferr = err
				return false
			}
			if !known {
				why = fmt.Sprintf("the subquery calls %s(), unknown to the catalog", fn)
			} else if vol {
				why = fmt.Sprintf("the subquery calls volatile function %s()", fn)
			}
		case *pg_query.ColumnRef:
			w, err := resolveInside(ctx, cat, strs(v.Fields), append(stack, m), sc)
			if err != nil {
				ferr = err
				return false
			}
			why = w
		}
		return why == ""
	})
	return why, ferr
}

// rangeItem is one FROM item visible in a query level.
type rangeItem struct {
	name        string   // alias, or relation/WITH query/function name
	schema, rel string   // for a plain relation
	cols        []string // output names of a subselect or WITH query, if known
	relation    bool
	kind        string // for the others: "WITH query", "subquery", "function", "join"
	sampled     bool   // a relation read with TABLESAMPLE
}

// scope is the WITH queries visible at a point of a statement, by name.
type scope map[string]*pg_query.CommonTableExpr

// withClause returns the WITH clause of a statement node, or nil.
func withClause(m proto.Message) *pg_query.WithClause {
	switch v := m.(type) {
	case *pg_query.SelectStmt:
		return v.WithClause
	case *pg_query.UpdateStmt:
		return v.WithClause
	case *pg_query.DeleteStmt:
		return v.WithClause
	case *pg_query.InsertStmt:
		return v.WithClause
	case *pg_query.MergeStmt:
		return v.WithClause
	}
	return nil
}

// with returns sc with the WITH queries of m's WITH clause (if any)
// added, shadowing outer ones of their names; sc itself is not changed.
func (sc scope) with(m proto.Message) scope {
	w := withClause(m)
	if w == nil || len(w.Ctes) == 0 {
		return sc
	}
	out := make(scope, len(sc)+len(w.Ctes))
	for k, v := range sc {
		out[k] = v
	}
	for _, n := range w.Ctes {
		if c, ok := unwrap(n).(*pg_query.CommonTableExpr); ok {
			out[c.Ctename] = c
		}
	}
	return out
}

// scopeAt is the WITH queries visible below the ancestors stack
// (outermost first).
func scopeAt(stack []proto.Message) scope {
	var sc scope
	for _, m := range stack {
		sc = sc.with(m)
	}
	return sc
}

// outputNames is the column names of a SELECT's output where the text
// tells them (a name given with AS, or a column reference's last name),
// nil when it does not.
func outputNames(n *pg_query.Node) []string {
	s, ok := unwrap(n).(*pg_query.SelectStmt)
	if !ok {
		return nil
	}
	if s.Op != pg_query.SetOperation_SETOP_NONE {
		if s.Larg == nil {
			return nil
		}
		return outputNames(&pg_query.Node{Node: &pg_query.Node_SelectStmt{SelectStmt: s.Larg}})
	}
	var out []string
	for _, t := range s.TargetList {
		rt, _ := unwrap(t).(*pg_query.ResTarget)
		switch {
		case rt == nil:
		case rt.Name != "":
			out = append(out, rt.Name)
		default:
			if cr, ok := unwrap(rt.Val).(*pg_query.ColumnRef); ok {
				f := strs(cr.Fields)
				out = append(out, f[len(f)-1])
			}
		}
	}
	return out
}

// outerCTE returns the name of a WITH query of sc (visible at the OR)
// that sl's subquery reads, or "" (a WITH query of the subquery's own
// of the same name shadows it).
func outerCTE(sl *pg_query.SubLink, sc scope) string {
	found := ""
	walk(sl.Subselect, nil, func(m proto.Message, stack []proto.Message) bool {
		if rv, ok := m.(*pg_query.RangeVar); ok && rv.Schemaname == "" && found == "" {
			inner := sc
			for _, a := range stack {
				inner = inner.with(a)
			}
			if c := sc[rv.Relname]; c != nil && inner[rv.Relname] == c {
				found = rv.Relname
			}
		}
		return found == ""
	})
	return found
}

// colnames is an alias's column names, nil when it gives none.
func colnames(a *pg_query.Alias) []string {
	if a == nil || len(a.Colnames) == 0 {
		return nil
	}
	return strs(a.Colnames)
}

// fromItems lists the FROM items of one query level, looking through
// joins (not into subselects); sc is the WITH queries visible there: an
// unqualified name of one is that WITH query, not a relation.
func fromItems(from []*pg_query.Node, sc scope) []rangeItem {
	var out []rangeItem
	var add func(n *pg_query.Node, sampled bool)
	add = func(n *pg_query.Node, sampled bool) {
		switch v := unwrap(n).(type) {
		case *pg_query.RangeVar:
			name := v.Relname
			if v.Alias != nil {
				name = v.Alias.Aliasname
			}
			if c := sc[v.Relname]; c != nil && v.Schemaname == "" {
				var cols []string
				if len(c.Aliascolnames) > 0 {
					cols = strs(c.Aliascolnames)
				} else {
					cols = outputNames(c.Ctequery)
				}
				if ac := colnames(v.Alias); ac != nil {
					cols = ac
				}
				out = append(out, rangeItem{name: name, cols: cols, kind: "WITH query"})
				return
			}
			out = append(out, rangeItem{name: name, schema: v.Schemaname, rel: v.Relname, relation: true, sampled: sampled})
		case *pg_query.RangeTableSample:
			add(v.Relation, true)
		case *pg_query.RangeSubselect:
			it := rangeItem{kind: "subquery"}
			if v.Alias != nil {
				it.name = v.Alias.Aliasname
				it.cols = colnames(v.Alias)
			}
			if it.cols == nil {
				it.cols = outputNames(v.Subquery)
			}
			out = append(out, it)
		case *pg_query.RangeFunction:
			it := rangeItem{kind: "function"}
			if v.Alias != nil {
				it.name = v.Alias.Aliasname
				it.cols = colnames(v.Alias)
			} else if len(v.Functions) > 0 {
				// Unaliased, the item is named after its (first) function.
				if l, ok := unwrap(v.Functions[0]).(*pg_query.List); ok && len(l.Items) > 0 {
					if fc, ok := unwrap(l.Items[0]).(*pg_query.FuncCall); ok {
						f := strs(fc.Funcname)
						it.name = f[len(f)-1]
					}
				}
			}
			out = append(out, it)
		case *pg_query.RangeTableFunc: // XMLTABLE
			it := rangeItem{name: "xmltable", kind: "function"}
			if v.Alias != nil {
				it.name, it.cols = v.Alias.Aliasname, colnames(v.Alias)
			}
			if it.cols == nil {
				for _, c := range v.Columns {
					if tc, ok := unwrap(c).(*pg_query.RangeTableFuncCol); ok {
						it.cols = append(it.cols, tc.Colname)
					}
				}
			}
			out = append(out, it)
		case *pg_query.JoinExpr:
			add(v.Larg, false)
			add(v.Rarg, false)
			if v.Alias != nil {
				out = append(out, rangeItem{name: v.Alias.Aliasname, kind: "join"})
			}
		}
	}
	for _, n := range from {
		add(n, false)
	}
	return out
}

// resolveInside reports why column reference f (its stack starts at the
// subquery's SELECT) may refer outside the subquery, or ""; sc is the
// WITH queries visible at the subquery.
func resolveInside(ctx context.Context, cat Catalog, f []string, stack []proto.Message, sc scope) (string, error) {
	if len(f) == 1 && f[0] == "*" {
		return "", nil
	}
	var levels [][]rangeItem // innermost first
	for _, m := range stack {
		sc = sc.with(m)
		if s, ok := m.(*pg_query.SelectStmt); ok {
			levels = append([][]rangeItem{fromItems(s.FromClause, sc)}, levels...)
		}
	}
	if len(f) >= 2 {
		q := f[len(f)-2]
		for _, lv := range levels {
			for _, it := range lv {
				if it.name == q {
					return "", nil
				}
			}
		}
		return fmt.Sprintf("the subquery is correlated: %s refers to an outer relation", strings.Join(f, ".")), nil
	}
	c := f[0]
	if cat == nil {
		return fmt.Sprintf("unqualified column %s in the subquery could be an outer column (no catalog to prove otherwise; give --dsn or qualify it)", c), nil
	}
	for _, lv := range levels {
		for _, it := range lv {
			switch {
			case it.relation:
				ci, err := cat.Column(ctx, it.schema, it.rel, c)
				if err != nil {
					return "", err
				}
				if !ci.RelationKnown {
					return fmt.Sprintf("unqualified column %s: relation %s is not visible to the catalog", c, it.rel), nil
				}
				if ci.Exists {
					return "", nil
				}
			case it.cols != nil:
				for _, oc := range it.cols {
					if oc == c {
						return "", nil
					}
				}
			default:
				return fmt.Sprintf("unqualified column %s: cannot tell the columns of %s %s in FROM (qualify the column)", c, it.kind, it.name), nil
			}
		}
	}
	return fmt.Sprintf("the subquery is correlated: unqualified column %s is not a column of its FROM items", c), nil
}

// levelItems is the FROM items of the OR's query level: the innermost
// SELECT, UPDATE or DELETE of its ancestors stack with any (a SELECT
// without FROM passes to the level around it); sc is the WITH queries
// visible at the OR.
func levelItems(stack []proto.Message, sc scope) []rangeItem {
	var items []rangeItem
	for i := len(stack) - 1; i >= 0 && items == nil; i-- {
		switch s := stack[i].(type) {
		case *pg_query.SelectStmt:
			items = fromItems(s.FromClause, sc)
		case *pg_query.UpdateStmt:
			items = append(fromItems(s.FromClause, sc), fromItems([]*pg_query.Node{{Node: &pg_query.Node_RangeVar{RangeVar: s.Relation}}}, nil)...)
		case *pg_query.DeleteStmt:
			items = append(fromItems(s.UsingClause, sc), fromItems([]*pg_query.Node{{Node: &pg_query.Node_RangeVar{RangeVar: s.Relation}}}, nil)...)
		}
	}
	return items
}

// sampledReason is the veto of a compared column of a table read with
// TABLESAMPLE. The rewrite would be safe there (the sample is drawn from
// the table's blocks or rows whatever the WHERE, and the filter runs on
// the sampled rows either way), but a sampled table is read only by a
// Sample Scan (the planner builds no index path for it), so
// "= ANY (ARRAY(S))" cannot become an index condition; it would only
// replace a hashed SubPlan's lookup with a scan of the array per row.
func sampledReason(col, item string) string {
	return fmt.Sprintf("%s is a column of %s, read with TABLESAMPLE: PostgreSQL reads a sampled table only by a Sample Scan, never through an index, so the rewrite cannot pay (the rows sampled would be the same)", col, item)
}

// sampledBlock reports, from the text, why compared column col of a
// sampled table blocks the rewrite: a qualified column of a sampled
// item, or (withCatalog false: the catalog cannot tell which table has
// it) an unqualified one where some table of the level is sampled.
func sampledBlock(col []string, level []rangeItem, withCatalog bool) string {
	name := strings.Join(col, ".")
	for _, it := range level {
		if !it.sampled {
			continue
		}
		if len(col) >= 2 && it.name == col[len(col)-2] {
			return sampledReason(name, it.name)
		}
		if len(col) == 1 && !withCatalog {
			return fmt.Sprintf("%s may be a column of %s, read with TABLESAMPLE (qualify it, or give a catalog): PostgreSQL reads a sampled table only by a Sample Scan, never through an index, so the rewrite cannot pay", name, it.name)
		}
	}
	return ""
}

// leftColumnBlock checks, with the catalog, that the compared column
// belongs to a table among the OR's query level's FROM items (level) and
// leads an index.
func leftColumnBlock(ctx context.Context, cat Catalog, col []string, level []rangeItem) (ColumnInfo, string, error) {
	c := col[len(col)-1]
	name := strings.Join(col, ".")
	var cands, others []rangeItem
	for _, it := range level {
		if len(col) >= 2 && it.name != col[len(col)-2] {
			continue
		}
		if it.relation {
			cands = append(cands, it)
		} else if it.kind != "join" {
			others = append(others, it)
		}
	}
	if len(col) >= 2 && len(cands) == 0 && len(others) > 0 {
		return ColumnInfo{}, fmt.Sprintf("%s is a column of %s %s, not of a table: the rule cannot tell whether an index serves it", name, others[0].kind, others[0].name), nil
	}
	for _, it := range cands {
		ci, err := cat.Column(ctx, it.schema, it.rel, c)
		if err != nil {
			return ci, "", err
		}
		if !ci.RelationKnown {
			return ci, fmt.Sprintf("relation %s of %s is not visible to the catalog", it.rel, name), nil
		}
		if !ci.Exists {
			continue
		}
		if ci.IsArray {
			return ci, fmt.Sprintf("%s is an array column (ARRAY(subquery) would nest arrays)", name), nil
		}
		if it.sampled {
			return ci, sampledReason(name, it.name), nil
		}
		if !ci.LeadingIndex {
			return ci, fmt.Sprintf("no index of %s has %s as its leading column", it.rel, c), nil
		}
		return ci, "", nil
	}
	if len(others) > 0 {
		return ColumnInfo{}, fmt.Sprintf("%s is not a column of a table in the FROM clause (it may be one of %s %s, where the rule cannot tell whether an index serves it)", name, others[0].kind, others[0].name), nil
	}
	return ColumnInfo{}, fmt.Sprintf("cannot find the table of %s in the FROM clause", name), nil
}

// sublinkEdits is the edits of every sublink and the subqueries' texts,
// or the error of a sublink whose tokens are not laid out as expected.
func sublinkEdits(st *statement, toks []*pg_query.ScanToken, subs []*pg_query.SubLink) ([]edit, []subquery, error) {
	var edits []edit
	var texts []subquery
	for _, sl := range subs {
		e, inner, form, err := spliceSublink(st.sql, toks, sl)
		if err != nil {
			return nil, nil, err
		}
		edits = append(edits, e...)
		texts = append(texts, subquery{text: st.sql[inner[0]:inner[1]], params: hasParam(toks, inner), form: form, sl: sl})
	}
	return edits, texts, nil
}

// hasParam reports whether a parameter token ($n) lies in the byte span.
func hasParam(toks []*pg_query.ScanToken, span [2]int) bool {
	for _, t := range toks {
		if int(t.Start) >= span[0] && int(t.End) <= span[1] && t.Token == pg_query.Token_PARAM {
			return true
		}
	}
	return false
}

// spliceSublink returns the edits that turn the sublink at sl.Location
// into "= ANY (ARRAY(S))" ("= SOME (ARRAY(S))" for = SOME), the byte span
// of S (inside its parentheses) and the form the user wrote: "IN", "= ANY"
// or "= SOME". The parse tree tells IN (no operator name) from "= ANY";
// ANY and SOME are one keyword to the grammar, told apart by the
// scanner's token (Token_ANY, Token_SOME).
func spliceSublink(sql string, toks []*pg_query.ScanToken, sl *pg_query.SubLink) ([]edit, [2]int, string, error) {
	var inner [2]int
	i := -1
	for k, t := range toks {
		if int(t.Start) == int(sl.Location) {
			i = k
			break
		}
	}
	if i < 0 {
		return nil, inner, "", fmt.Errorf("no token at the sublink's location %d", sl.Location)
	}
	next := func(k int) int {
		for k++; k < len(toks); k++ {
			if toks[k].Token != pg_query.Token_SQL_COMMENT && toks[k].Token != pg_query.Token_C_COMMENT {
				return k
			}
		}
		return -1
	}
	var open int
	form := "IN"
	inForm := len(sl.OperName) == 0
	if inForm {
		if toks[i].Token != pg_query.Token_IN_P {
			return nil, inner, "", fmt.Errorf("unexpected token layout at %d (want IN)", sl.Location)
		}
		open = next(i)
	} else {
		if toks[i].Token != pg_query.Token_ASCII_61 {
			return nil, inner, "", fmt.Errorf("unexpected token layout at %d (want =)", sl.Location)
		}
		a := next(i)
		if a < 0 || (toks[a].Token != pg_query.Token_ANY && toks[a].Token != pg_query.Token_SOME) {
			return nil, inner, "", fmt.Errorf("unexpected token layout at %d (want ANY)", sl.Location)
		}
		form = "= ANY"
		if toks[a].Token == pg_query.Token_SOME {
			form = "= SOME"
		}
		open = next(a)
	}
	if open < 0 || toks[open].Token != pg_query.Token_ASCII_40 {
		return nil, inner, "", fmt.Errorf("unexpected token layout at %d (want a parenthesis)", sl.Location)
	}
	depth, closeTok := 0, -1
	for k := open; k < len(toks) && closeTok < 0; k++ {
		switch toks[k].Token {
		case pg_query.Token_ASCII_40:
			depth++
		case pg_query.Token_ASCII_41:
			depth--
			if depth == 0 {
				closeTok = k
			}
		}
	}
	if closeTok < 0 {
		return nil, inner, "", fmt.Errorf("unbalanced parentheses after offset %d", sl.Location)
	}
	end := int(toks[closeTok].End)
	inner = [2]int{int(toks[open].End), int(toks[closeTok].Start)}
	armStart, err := armStart(toks, sl, i)
	if err != nil {
		return nil, inner, "", err
	}
	// The arm as written stays in a branch the planner removes (see
	// guardOpen): parse analysis, run again whenever the server re-plans
	// a stored statement, raises the original's errors.
	guard := edit{start: armStart, end: armStart, text: guardOpen + sql[armStart:end] + guardElse,
		copyAt: len(guardOpen), copyFrom: armStart, copyLen: end - armStart}
	if inForm {
		return []edit{
			guard,
			{start: int(toks[i].Start), end: int(toks[i].End), text: "= ANY (ARRAY"},
			{start: end, end: end, text: ")" + guardClose},
		}, inner, form, nil
	}
	st := int(toks[open].Start)
	return []edit{guard, {start: st, end: st, text: "(ARRAY"}, {start: end, end: end, text: ")" + guardClose}}, inner, form, nil
}

// The rewritten arm is CASE WHEN false THEN <the arm as written> ELSE
// <its = ANY (ARRAY(...)) form> END. PostgreSQL's planner removes a CASE
// branch whose condition is the constant false before it plans the
// expression (eval_const_expressions, src/backend/optimizer/util/
// clauses.c), so the plan is the rewritten arm's, index scans and
// BitmapOr included. Parse analysis, though, checks both branches: when
// the server analyses the text again (a prepared statement re-planned
// after DDL, or a search_path the proxy could not see changed by a
// function or a DO block), a subquery output whose type no longer suits
// the comparison (an array, where ARRAY(...) would flatten it into
// matches) fails with the original's error (42883 operator does not
// exist) instead of returning rows the original never returns.
const (
	guardOpen  = "CASE WHEN false THEN "
	guardElse  = " ELSE "
	guardClose = " END"
)

// armStart returns the byte offset where the arm of sublink sl (whose
// operator token is toks[op]) begins: its left operand's first token, or
// the opening parenthesis of a parenthesized left operand ("(t.a) IN").
func armStart(toks []*pg_query.ScanToken, sl *pg_query.SubLink, op int) (int, error) {
	loc := nodeLocation(sl.Testexpr, -1)
	first := -1
	for k := 0; k < op; k++ {
		if int(toks[k].Start) == loc {
			first = k
			break
		}
	}
	if first < 0 {
		return 0, fmt.Errorf("no token at the left operand's location %d", loc)
	}
	// Closing parentheses between the operand and the operator that
	// were opened before it: walk back to the one that opens them.
	need := 0
	for k := first; k < op; k++ {
		switch toks[k].Token {
		case pg_query.Token_ASCII_40:
			need--
		case pg_query.Token_ASCII_41:
			need++
		}
	}
	for k := first - 1; need > 0 && k >= 0; k-- {
		switch toks[k].Token {
		case pg_query.Token_ASCII_41:
			need++
		case pg_query.Token_ASCII_40:
			need--
			if need == 0 {
				first = k
			}
		}
	}
	if need != 0 {
		return 0, fmt.Errorf("unbalanced parentheses before offset %d", sl.Location)
	}
	return int(toks[first].Start), nil
}
