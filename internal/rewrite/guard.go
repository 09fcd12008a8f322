package rewrite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The guard: an arm is rewritten only when evaluating its subquery where
// the original would not have evaluated it cannot raise an error or
// have a side effect. The rewritten form evaluates ARRAY(S) as an
// InitPlan when the scan starts, also on an empty table and for rows
// where the original's OR had short-circuited; the original evaluates its
// hashed SubPlan only when a row needs it. So every function the server
// evaluates for S must be leakproof (pg_proc.proleakproof: no error and
// no message that depends on its arguments, no side effect) and not
// volatile, and S must use nothing else that can fail (an I/O
// conversion, a domain's constraints, a scalar subquery's "more than one
// row", a negative LIMIT, ...). An immutable function whose arguments are
// all constants (not parameters: a generic plan keeps those) is exempt:
// the planner evaluates it when it plans S,
// which it does for both forms (eval_const_expressions, before either
// runs), so it fails or not alike.
//
// Which functions the server evaluates is known only after its parse
// analysis (operators and casts resolved by argument types, implicit
// coercions added). The guard asks the server for its analysed tree: it
// creates a temporary view of S (its $n replaced by NULLs of their types
// in pg_query's tree) in a transaction that it always rolls back
// (Types.Resolve), and reads the view's stored query, pg_rewrite.ev_action,
// where every function, operator and aggregate is named by OID. pg_depend
// alone would not do: PostgreSQL records no dependency on a pinned
// (built-in) object, so int4div would not be listed. A rolled-back
// CREATE sends no invalidation to other sessions. The tree is read by
// parseTree (nodetree.go); a tree or node the guard does not know vetoes.
//
// Not checked: the sort and hash support functions of the operators'
// families that the planner may choose for a sort, a hash join or a
// hashed aggregate (btint4cmp, hashint4: the catalog marks hash functions
// not leakproof, though none of the built-in types' can fail); a
// partitioned table's pruning functions.

// recordOID is the type record's OID: the planner does not evaluate a
// function returning it in advance (evaluate_function).
const recordOID = "2249"

// guardView is the name of the temporary view the guard creates.
const guardView = "erplab_guard"

// guardBlock reports why evaluating the subquery of sl where the original
// would not could raise an error or have a side effect, or "". params
// are the statement's parameter types ($1 first).
//
// checks are the parameters whose values decide, per execution, whether
// the rewrite holds: a LIKE of the subquery has a parameter for its
// pattern, which must pass LikePatternSafe (every parameter of the
// subquery but those of notText is listed, the server's tree not saying
// which one it is).
func guardBlock(ctx context.Context, st *statement, sl *pg_query.SubLink, params []uint32, sub subquery) (why string, checks []int, err error) {
	why, paramPattern, err := guardJudge(ctx, st, sl, params, sub)
	if err != nil || why != "" || !paramPattern {
		return why, nil, err
	}
	for _, n := range subqueryParams(sl) {
		if n > len(params) || !notText[params[n-1]] {
			checks = append(checks, n)
		}
	}
	return "", checks, nil
}

// notText are built-in types no value of which reaches LIKE as its
// pattern without a function call (a cast to text of them is a function
// or an I/O conversion, never a relabelling), so a parameter of one is
// not checked: bool, bytea, int8, int2, int4, oid, float4, float8, date,
// time, timestamp, timestamptz, interval, numeric, uuid.
var notText = map[uint32]bool{16: true, 17: true, 20: true, 21: true, 23: true, 26: true, 700: true, 701: true,
	1082: true, 1083: true, 1114: true, 1184: true, 1186: true, 1700: true, 2950: true}

// guardJudge is guardBlock's judgement, and whether a LIKE pattern is a
// parameter.
func guardJudge(ctx context.Context, st *statement, sl *pg_query.SubLink, params []uint32, sub subquery) (string, bool, error) {
	if why := limitBlock(sl); why != "" {
		return why, false, nil
	}
	var idents map[uint32][2]string
	if sub.params {
		q := Resolution{TypeNames: params}
		if err := st.types.Resolve(ctx, &q); err != nil {
			return "", false, fmt.Errorf("rewrite: the subquery's parameter types: %w", err)
		}
		idents = q.Idents
	}
	view, err := guardViewSQL(st, sl, params, idents)
	if err != nil {
		return err.Error(), false, nil
	}
	res, err := st.resolveView(ctx, view)
	if err != nil {
		return "", false, fmt.Errorf("rewrite: the subquery's functions: %w", err)
	}
	if res.ViewErr != nil {
		why, ok := rejected(res.ViewErr)
		if !ok {
			why = res.ViewErr.Error()
		}
		return "the server does not create a view of the subquery (" + why + "), so the functions it evaluates are unknown", false, nil
	}
	g := &guardWalk{st: st, res: res}
	if err := g.complete(ctx); err != nil {
		return "", false, err
	}
	if g.why == "" {
		g.visit(g.trees[0], treeFrom{self: res.TreeOID})
	}
	return g.why, g.paramPattern, nil
}

// resolveView is Types.Resolve of a view, answered from the batch when
// it asked the same.
func (s *statement) resolveView(ctx context.Context, view string) (*Resolution, error) {
	if r, ok := s.views[view]; ok {
		return r, nil
	}
	r := &Resolution{View: view}
	if err := s.types.Resolve(ctx, r); err != nil {
		return nil, err
	}
	return r, nil
}

// limitBlock reports why a LIMIT or OFFSET of the subquery (at any level
// of it) could raise an error, or "": only a non-negative integer
// constant, NULL or ALL cannot (a negative one fails when the scan
// starts, 2201W/2201X; WITH TIES fails on NULL).
func limitBlock(sl *pg_query.SubLink) string {
	why := ""
	walk(sl.Subselect, nil, func(m proto.Message, _ []proto.Message) bool {
		s, ok := m.(*pg_query.SelectStmt)
		if !ok || why != "" {
			return why == ""
		}
		for _, c := range []struct {
			what string
			n    *pg_query.Node
		}{{"LIMIT", s.LimitCount}, {"OFFSET", s.LimitOffset}} {
			if c.n == nil {
				continue
			}
			k, ok := unwrap(c.n).(*pg_query.A_Const)
			switch {
			case ok && k.Isnull && !(c.what == "LIMIT" && s.LimitOption == pg_query.LimitOption_LIMIT_OPTION_WITH_TIES):
			case ok && k.GetIval() != nil && k.GetIval().Ival >= 0:
			default:
				why = fmt.Sprintf("the subquery's %s is not a non-negative integer constant: evaluating it where the original did not could raise an error", c.what)
				return false
			}
		}
		return true
	})
	return why
}

// guardViewSQL is CREATE TEMPORARY VIEW of sl's subquery, deparsed by
// pg_query from its tree with each $n replaced by a NULL of parameter
// n's type (idents: schema and name by type OID), so that the server
// resolves every function and operator as it does for the statement.
func guardViewSQL(st *statement, sl *pg_query.SubLink, params []uint32, idents map[uint32][2]string) (string, error) {
	q := proto.Clone(sl.Subselect).(*pg_query.Node)
	var bad error
	eachNode(q, func(n *pg_query.Node) {
		p := n.GetParamRef()
		if p == nil || bad != nil {
			return
		}
		i := int(p.Number) - 1
		if i < 0 || i >= len(params) || params[i] == 0 {
			bad = fmt.Errorf("the subquery's parameter $%d has no known type, so the functions it evaluates are unknown", p.Number)
			return
		}
		id, ok := idents[params[i]]
		if !ok {
			bad = fmt.Errorf("the subquery's parameter $%d has type OID %d, unknown to the server", p.Number, params[i])
			return
		}
		null := &pg_query.Node{Node: &pg_query.Node_AConst{AConst: &pg_query.A_Const{Isnull: true, Location: -1}}}
		tn := &pg_query.TypeName{Names: []*pg_query.Node{pg_query.MakeStrNode(id[0]), pg_query.MakeStrNode(id[1])}, Typemod: -1, Location: -1}
		n.Node = &pg_query.Node_TypeCast{TypeCast: &pg_query.TypeCast{Arg: null, TypeName: tn, Location: -1}}
	})
	if bad != nil {
		return "", bad
	}
	vs := &pg_query.ViewStmt{View: &pg_query.RangeVar{Relname: guardView, Inh: true, Relpersistence: "t", Location: -1}, Query: q,
		WithCheckOption: pg_query.ViewCheckOption_NO_CHECK_OPTION}
	sql, err := pg_query.Deparse(&pg_query.ParseResult{Version: st.tree.Version, Stmts: []*pg_query.RawStmt{{Stmt: &pg_query.Node{Node: &pg_query.Node_ViewStmt{ViewStmt: vs}}}}})
	if err != nil {
		return "", errors.New("pg_query cannot deparse the subquery, so the functions it evaluates are unknown")
	}
	return sql, nil
}

// eachNode calls fn with every *pg_query.Node below m (m included, when
// it is one), outermost first; fn may replace the node's content.
func eachNode(m proto.Message, fn func(*pg_query.Node)) {
	if n, ok := m.(*pg_query.Node); ok {
		fn(n)
	}
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() == nil || fd.IsMap() {
			return true
		}
		if fd.IsList() {
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				eachNode(l.Get(i).Message().Interface(), fn)
			}
			return true
		}
		eachNode(v.Message().Interface(), fn)
		return true
	})
}

// guardWalk judges the server's analysed trees of a subquery and of the
// views it reads.
type guardWalk struct {
	st    *statement
	res   *Resolution
	trees map[uint32]any // parsed trees by view OID (0: the subquery's)
	// typeNames are the names of the types of the trees' conversions.
	typeNames map[uint32]string
	why       string // the first reason found
	depth     int    // views entered
	// paramPattern: a LIKE of the subquery has a parameter's stand-in
	// for its pattern (see like): the rewrite holds only for pattern
	// values LikePatternSafe accepts.
	paramPattern bool
}

// treeFrom is where a tree being judged comes from: the subquery (name "")
// or a view it reads; self is the OID of the view whose query it is (the
// guard's own view for the subquery), which its OLD and NEW entries name.
type treeFrom struct {
	name string
	self uint32
}

// maxViewDepth bounds the views within views the guard follows.
const maxViewDepth = 16

// ptOIDs collects the OIDs a tree names: functions, operators, views,
// and the types it converts to (for messages).
type ptOIDs struct {
	funcs, ops, views, types []uint32
}

// collect adds the OIDs named in v (a parsed tree of view self) to o.
func (o *ptOIDs) collect(v any, self uint32) {
	add := func(to *[]uint32, s string) {
		if n, err := strconv.ParseUint(s, 10, 32); err == nil && n != 0 {
			*to = append(*to, uint32(n))
		}
	}
	switch x := v.(type) {
	case *ptNode:
		for _, f := range x.fields {
			switch {
			case funcField[f.name]:
				add(&o.funcs, tokenOf(f.val))
			case opField[f.name]:
				add(&o.ops, tokenOf(f.val))
				if l, ok := f.val.(ptList); ok {
					for _, it := range l.items {
						add(&o.ops, tokenOf(it))
					}
				}
			}
			o.collect(f.val, self)
		}
		if x.tag == "COERCEVIAIO" || x.tag == "COERCETODOMAIN" {
			add(&o.types, x.str("resulttype"))
		}
		if x.tag == "RANGETBLENTRY" && x.str("rtekind") == "0" && x.str("relkind") == "v" && oidOf(x.str("relid")) != self {
			add(&o.views, x.str("relid"))
		}
	case ptList:
		for _, it := range x.items {
			o.collect(it, self)
		}
	}
}

// tokenOf is v's token, "" when it is not one.
func tokenOf(v any) string { s, _ := v.(string); return s }

// funcField and opField are the fields of a stored tree that name a
// function (pg_proc) or operators (pg_operator) by OID.
var (
	funcField = map[string]bool{"funcid": true, "opfuncid": true, "aggfnoid": true, "winfnoid": true, "tsmhandler": true,
		"hashfuncid": true, "negfuncid": true, "startInRangeFunc": true, "endInRangeFunc": true}
	opField = map[string]bool{"opno": true, "eqop": true, "sortop": true, "opnos": true}
)

// complete parses the subquery's tree and asks the server, one round
// trip per level of views within views, for the trees of the views it
// reads and the facts of the functions and operators the trees name that
// the answers so far do not hold.
func (g *guardWalk) complete(ctx context.Context) error {
	g.trees, g.typeNames = map[uint32]any{}, map[uint32]string{}
	tree, err := parseTree(g.res.Tree)
	if err != nil {
		g.why = fmt.Sprintf("the server's tree of the subquery is not readable (%v), so the functions it evaluates are unknown", err)
		return nil
	}
	g.trees[0] = tree
	type pending struct {
		tree any
		self uint32
	}
	todo := []pending{{tree, g.res.TreeOID}}
	for round := 0; len(todo) > 0; round++ {
		var o ptOIDs
		for _, p := range todo {
			o.collect(p.tree, p.self)
		}
		for _, t := range o.types {
			if ti, err := g.st.types.Type(ctx, t); err != nil {
				return fmt.Errorf("rewrite: the subquery's conversions: %w", err)
			} else if ti.Known {
				g.typeNames[t] = ti.Name
			}
		}
		q := g.missing(o)
		if len(q.Functions)+len(q.Operators)+len(q.Views) == 0 {
			return nil
		}
		if round > maxViewDepth {
			g.why = fmt.Sprintf("the subquery reads views nested deeper than %d, which the rule does not follow", maxViewDepth)
			return nil
		}
		if err := g.st.types.Resolve(ctx, &q); err != nil {
			return fmt.Errorf("rewrite: the subquery's functions: %w", err)
		}
		g.res.merge(&q)
		todo = todo[:0]
		for _, v := range q.Views {
			t, ok := q.Trees[v]
			if !ok {
				continue // judged as a view whose query is unknown
			}
			tree, err := parseTree(t)
			if err != nil {
				g.why = fmt.Sprintf("the server's tree of a view the subquery reads is not readable (%v)", err)
				return nil
			}
			g.trees[v] = tree
			todo = append(todo, pending{tree, v})
		}
	}
	return nil
}

// missing is the question of what o names that the answers so far lack.
func (g *guardWalk) missing(o ptOIDs) Resolution {
	var q Resolution
	for _, f := range o.funcs {
		if _, ok := g.res.Funcs[f]; !ok && !slices.Contains(q.Functions, f) {
			q.Functions = append(q.Functions, f)
		}
	}
	for _, op := range o.ops {
		if _, ok := g.res.Ops[op]; !ok && !slices.Contains(q.Operators, op) {
			q.Operators = append(q.Operators, op)
		}
	}
	for _, v := range o.views {
		if _, ok := g.trees[v]; !ok && !slices.Contains(q.Views, v) {
			q.Views = append(q.Views, v)
		}
	}
	return q
}

// fail records the first reason.
func (g *guardWalk) fail(format string, a ...any) {
	if g.why == "" {
		g.why = fmt.Sprintf(format, a...)
	}
}

// mightFail ends the reason of a function that may fail.
const mightFail = "evaluating it where the original did not could raise an error"

// knownNodes are the node tags of a stored query the guard vouches for
// (each is judged below: an expression that calls a function is judged
// by the function). Any other tag vetoes.
var knownNodes = map[string]bool{
	"QUERY": true, "RANGETBLENTRY": true, "RTEPERMISSIONINFO": true, "ALIAS": true, "FROMEXPR": true, "JOINEXPR": true,
	"RANGETBLREF": true, "TARGETENTRY": true, "VAR": true, "CONST": true, "PARAM": true, "RELABELTYPE": true,
	"COLLATEEXPR": true, "CASEEXPR": true, "CASEWHEN": true, "CASETESTEXPR": true, "COALESCEEXPR": true,
	"BOOLEXPR": true, "NULLTEST": true, "BOOLEANTEST": true, "FUNCEXPR": true, "OPEXPR": true, "DISTINCTEXPR": true,
	"NULLIFEXPR": true, "SCALARARRAYOPEXPR": true, "AGGREF": true, "WINDOWFUNC": true, "GROUPINGFUNC": true,
	"SORTGROUPCLAUSE": true, "WINDOWCLAUSE": true, "GROUPINGSET": true, "SUBLINK": true, "COMMONTABLEEXPR": true,
	"ROWEXPR": true, "ARRAYEXPR": true, "ROWCOMPAREEXPR": true, "FIELDSELECT": true, "NAMEDARGEXPR": true,
	"RANGETBLFUNCTION": true, "TABLESAMPLECLAUSE": true, "SETOPERATIONSTMT": true, "CONVERTROWTYPEEXPR": true,
	"ARRAYCOERCEEXPR": true, "SQLVALUEFUNCTION": true,
}

// visit judges v and reports whether it is a constant the planner
// folds (a Const, or an immutable function of constants).
func (g *guardWalk) visit(v any, at treeFrom) bool {
	if g.why != "" {
		return false
	}
	switch x := v.(type) {
	case ptList:
		c := true
		for _, it := range x.items {
			c = g.visit(it, at) && c
		}
		return c
	case *ptNode:
		return g.node(x, at)
	}
	return true // a token or nothing
}

// children visits every field of n but skip, and reports whether all
// are constants.
func (g *guardWalk) children(n *ptNode, at treeFrom, skip string) bool {
	c := true
	for _, f := range n.fields {
		if f.name != skip {
			c = g.visit(f.val, at) && c
		}
	}
	return c
}

// node judges one node (see visit).
func (g *guardWalk) node(n *ptNode, at treeFrom) bool {
	if g.refused(n, at) {
		return false
	}
	switch n.tag {
	case "CONST":
		// Not a NULL: the view's stand-in for a parameter, which a
		// generic plan does not fold (nor, conservatively, a NULL
		// written as such).
		return n.str("constisnull") != "true"
	case "RELABELTYPE", "COLLATEEXPR":
		return g.visit(n.get("arg"), at)
	case "ARRAYEXPR":
		return g.visit(n.get("elements"), at)
	case "FUNCEXPR":
		if g.like(n, oidOf(n.str("funcid")), at) {
			return false
		}
		// (The planner does not fold a set or a record.)
		c := g.visit(n.get("args"), at) && n.str("funcretset") != "true" && n.str("funcresulttype") != recordOID
		return g.call(oidOf(n.str("funcid")), c, "", at)
	case "OPEXPR":
		if g.like(n, g.opFunc(oidOf(n.str("opno")), oidOf(n.str("opfuncid"))), at) {
			return false
		}
		fallthrough
	case "DISTINCTEXPR", "NULLIFEXPR", "SCALARARRAYOPEXPR":
		c := g.visit(n.get("args"), at) && n.str("opretset") != "true" && n.str("opresulttype") != recordOID
		return g.operator(oidOf(n.str("opno")), oidOf(n.str("opfuncid")), c, at)
	case "AGGREF":
		g.children(n, at, "")
		g.aggregate(oidOf(n.str("aggfnoid")), at)
	case "WINDOWFUNC":
		g.children(n, at, "")
		g.call(oidOf(n.str("winfnoid")), false, "window function", at)
	case "SORTGROUPCLAUSE":
		g.operator(oidOf(n.str("eqop")), 0, false, at)
		if o := oidOf(n.str("sortop")); o != 0 {
			g.operator(o, 0, false, at)
		}
	case "ROWCOMPAREEXPR":
		g.children(n, at, "opnos")
		if l, ok := n.get("opnos").(ptList); ok {
			for _, it := range l.items {
				g.operator(oidOf(tokenOf(it)), 0, false, at)
			}
		}
	case "TABLESAMPLECLAUSE":
		g.children(n, at, "")
		g.call(oidOf(n.str("tsmhandler")), false, "TABLESAMPLE method", at)
	case "WINDOWCLAUSE":
		for _, f := range []string{"startInRangeFunc", "endInRangeFunc"} {
			if o := oidOf(n.str(f)); o != 0 {
				g.call(o, false, "window frame", at)
			}
		}
		g.children(n, at, "")
	case "RANGETBLENTRY":
		g.relation(n, at)
		g.children(n, at, "")
	default:
		g.children(n, at, "")
	}
	return false
}

// refused reports whether n is something the guard vetoes whatever the
// functions: a node it does not know, a conversion that may fail, a
// construct that raises errors of its own.
func (g *guardWalk) refused(n *ptNode, at treeFrom) bool {
	in := inView(at.name)
	switch {
	case n.tag == "COERCEVIAIO":
		g.fail("the subquery%s converts a value to %s through its text form (an I/O conversion, which can fail on bad input): %s", in, g.typeName(n.str("resulttype")), mightFail)
	case n.tag == "COERCETODOMAIN":
		g.fail("the subquery%s casts a value to domain %s, whose constraints can fail: %s", in, g.typeName(n.str("resulttype")), mightFail)
	case !knownNodes[n.tag]:
		g.fail("the subquery%s uses a %s expression, which the rule cannot vouch for: %s", in, n.tag, mightFail)
	case n.tag == "ARRAYEXPR" && n.str("multidims") == "true":
		g.fail("the subquery%s builds a multi-dimensional ARRAY[...], which fails on sub-arrays of different sizes: %s", in, mightFail)
	case n.tag == "WINDOWCLAUSE" && (n.get("startOffset") != nil || n.get("endOffset") != nil):
		g.fail("the subquery%s has a window frame offset, which fails when negative: %s", in, mightFail)
	case n.tag == "SUBLINK" && n.str("subLinkType") == "4": // EXPR_SUBLINK
		g.fail("the subquery%s holds a scalar subquery, which fails when it returns more than one row: %s", in, mightFail)
	case n.tag == "COMMONTABLEEXPR" && n.str("cterecursive") == "true":
		g.fail("the subquery%s has a recursive WITH query, which may not end where the original never ran it", in)
	case n.tag == "QUERY" && at.name != "" && (n.get("limitCount") != nil || n.get("limitOffset") != nil):
		g.fail("the subquery reads view %s, which has a LIMIT or OFFSET: %s", at.name, mightFail)
	case n.tag == "QUERY" && n.get("rowMarks") != nil:
		g.fail("the subquery%s locks rows (FOR UPDATE/SHARE)", in)
	default:
		return false
	}
	return true
}

// typeName names the type whose OID is oid, for messages.
func (g *guardWalk) typeName(oid string) string {
	if n, ok := g.typeNames[oidOf(oid)]; ok {
		return n
	}
	return "type OID " + oid
}

// inView is " (in view v)" for messages, "" for the subquery itself.
func inView(view string) string {
	if view == "" {
		return ""
	}
	return " (in view " + view + ")"
}

// relation judges a range table entry that reads a relation: a view's
// query, a foreign table, row-level security.
func (g *guardWalk) relation(n *ptNode, at treeFrom) {
	oid := oidOf(n.str("relid"))
	if n.str("rtekind") != "0" || oid == at.self {
		return // not a relation, or the OLD/NEW entry of the view itself
	}
	rel, known := g.res.Rels[oid]
	name := rel.Name
	if name == "" {
		name = "OID " + strconv.FormatUint(uint64(oid), 10)
		if e, ok := n.get("eref").(*ptNode); ok && e.str("aliasname") != "" {
			name = e.str("aliasname")
		}
	}
	in := inView(at.name)
	switch n.str("relkind") {
	case "f":
		g.fail("the subquery%s reads foreign table %s, whose foreign data wrapper runs where the original did not", in, name)
		return
	case "v":
		tree, ok := g.trees[oid]
		if !ok || g.depth >= maxViewDepth {
			g.fail("the subquery%s reads view %s, whose query the rule could not judge", in, name)
			return
		}
		g.depth++
		g.visit(tree, treeFrom{name: name, self: oid})
		g.depth--
	}
	if known && rel.RowSecurity {
		g.fail("the subquery%s reads table %s, which has row-level security: its policies' expressions are not checked", in, name)
	}
}

// oidOf parses an OID token (0 when it is not one).
func oidOf(s string) uint32 {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0
	}
	return uint32(n)
}

// operator judges a use of operator op (fn: its function, when the tree
// gives it) whose arguments are constants when args; it reports whether
// the planner folds it.
func (g *guardWalk) operator(op, fn uint32, args bool, at treeFrom) bool {
	o, ok := g.res.Ops[op]
	if fn == 0 {
		if !ok || o.Code == 0 {
			g.fail("the subquery%s uses operator OID %d, which the catalog does not know: %s", inView(at.name), op, mightFail)
			return false
		}
		fn = o.Code
	}
	how := "operator"
	if ok && o.Name != "" {
		how = "operator " + o.Name
	}
	return g.call(fn, args, how, at)
}

// call judges a call of function fn (how: "operator =", "" for a plain
// call) whose arguments are all constants when args, and reports whether
// the planner folds it.
func (g *guardWalk) call(fn uint32, args bool, how string, at treeFrom) bool {
	r, ok := g.res.Funcs[fn]
	if !ok || fn == 0 {
		g.fail("the subquery%s calls function OID %d, which the catalog does not know: %s", inView(at.name), fn, mightFail)
		return false
	}
	if args && r.Volatility == 'i' {
		return true // the planner evaluates it, for both forms alike
	}
	what := r.Name
	switch {
	case r.Volatility == 'v':
		if how != "" {
			what += " (" + how + ")"
		}
		g.fail("the subquery%s calls volatile function %s: evaluating it where the original did not could have side effects", inView(at.name), what)
	case !r.Leakproof && !cannotFail(fn, r.Name):
		if how != "" {
			what += " (" + how + ", not leakproof)"
		} else {
			what += " (not leakproof)"
		}
		g.fail("the subquery%s calls %s: %s", inView(at.name), what, mightFail)
	}
	return false
}

// aggregate judges a call of aggregate fn: its support functions
// (transition, final, combine, ...) are what runs.
func (g *guardWalk) aggregate(fn uint32, at treeFrom) {
	r, ok := g.res.Funcs[fn]
	if !ok {
		g.fail("the subquery%s calls aggregate OID %d, which the catalog does not know: %s", inView(at.name), fn, mightFail)
		return
	}
	for _, s := range r.Support {
		g.call(s, false, "of aggregate "+r.Name, at)
	}
}

// errorFree are built-in functions the catalog does not mark leakproof
// though they raise no error and no message for any argument values, as
// reviewed in PostgreSQL 15's source: the numeric comparisons
// (src/backend/utils/adt/numeric.c, numeric_eq ... numeric_cmp call
// cmp_numerics, which compares sign, weight and digits and never calls
// ereport). 1C keeps its separators (the infobase area) in numeric
// columns, so without them every separated register's subquery would be
// vetoed. They can fail only as texteq (leakproof) can: detoasting a
// corrupt value, out of memory.
var errorFree = map[string]bool{
	"numeric_eq": true, "numeric_ne": true, "numeric_lt": true,
	"numeric_le": true, "numeric_gt": true, "numeric_ge": true,
	"numeric_cmp": true,
}

// firstNormalOID is FirstNormalObjectId (src/include/access/transam.h):
// the OIDs below it are the built-in objects initdb creates.
const firstNormalOID = 16384

// cannotFail reports whether fn (named name) is a built-in function of
// errorFree: a user's function of the same name is judged by the catalog.
func cannotFail(fn uint32, name string) bool {
	return fn < firstNormalOID && errorFree[name]
}

// LIKE, reviewed in PostgreSQL 15's source (src/backend/utils/adt/like.c
// and like_match.c, REL_15_STABLE): textlike and textnlike (operators
// ~~ and !~~ of text; bpcharlike and bpcharnlike are the same C
// functions, pg_proc.prosrc textlike/textnlike) read both arguments
// (PG_GETARG_TEXT_PP: detoasting, as texteq does) and call
// GenericMatchText, which raises
//   - "nondeterministic collations are not supported for LIKE"
//     (0A000) when the call's collation is not C/POSIX
//     (lc_ctype_is_c) and pg_newlocale_from_collation finds it
//     nondeterministic; the default collation (100) cannot be
//     nondeterministic in 15 (pg_newlocale_from_collation returns no
//     locale for it);
//
// and then MatchText (like_match.c, once per encoding: SB_, MB_,
// UTF8_), which raises
//   - "LIKE pattern must not end with escape character" (22025) where
//     the pattern's last byte is a backslash that escapes (the run of
//     backslashes it ends is odd: each backslash pair is an escaped
//     backslash), both in its main loop and after a '%';
//   - "stack depth limit exceeded" (check_stack_depth at its top): it
//     recurses once per '%' of the pattern that it gets past, so the
//     depth is bounded by the pattern's '%' count;
//   - a cancel or statement timeout (CHECK_FOR_INTERRUPTS in its '%'
//     loop), which no rewrite can promise about anyway.
//
// Nothing depends on the text argument's value, nor on the encoding: no
// server encoding has a backslash or '%' byte inside a multi-byte
// character. An ESCAPE clause calls like_escape (not leakproof: it
// raises "invalid escape string"), which the guard judges as any
// function. namelike and the ILIKE functions (lower() per collation)
// are left to the catalog.
//
// (Cited by function, not line: REL_15_STABLE's text could not be
// fetched here; the review read like.c at postgres commit 51edc4ca and
// like_match.c's MatchText, whose error paths 15 shares, and the proxy's
// tests see 22025 from PostgreSQL 15 where this says.)
//
// So a LIKE whose collation is one of those and whose pattern is a
// constant the guard reads (LikePatternSafe decides at once) or a
// parameter (decided per execution by the caller: Result.BindChecks)
// raises no error of its own.
var likeFuncs = map[string]bool{"textlike": true, "textnlike": true, "bpcharlike": true, "bpcharnlike": true}

// likeCollations are the collations of a LIKE that cannot be
// nondeterministic: the database's default (100), C (950) and POSIX
// (951). Any other, and none (0), vetoes: which user collations are
// deterministic is not asked.
var likeCollations = map[string]bool{"100": true, "950": true, "951": true}

// MaxLikePercents is the most '%' bytes LikePatternSafe accepts: MatchText
// recurses once per '%', a few dozen bytes of stack each, far below
// the smallest max_stack_depth (100kB).
const MaxLikePercents = 64

// LikePatternSafe reports whether LIKE cannot raise an error for
// pattern p (the server's bytes; NULL is always safe, textlike being
// strict): it does not end with an odd run of backslashes and has at
// most MaxLikePercents '%' bytes.
func LikePatternSafe(p []byte) bool {
	run := 0
	for i := len(p) - 1; i >= 0 && p[i] == '\\'; i-- {
		run++
	}
	return run%2 == 0 && bytes.Count(p, []byte{'%'}) <= MaxLikePercents
}

// opFunc is the function of operator op (fn when the tree names it).
func (g *guardWalk) opFunc(op, fn uint32) uint32 {
	if fn != 0 {
		return fn
	}
	if o, ok := g.res.Ops[op]; ok {
		return o.Code
	}
	return 0
}

// like judges n, a call of function fn, when it is a built-in LIKE of
// likeFuncs (see the review above) with a collation of likeCollations
// and a constant or a parameter's stand-in for its pattern, and reports
// whether it did; any other call is left to call and operator.
func (g *guardWalk) like(n *ptNode, fn uint32, at treeFrom) bool {
	r, ok := g.res.Funcs[fn]
	if !ok || fn == 0 || fn >= firstNormalOID || !likeFuncs[r.Name] || !likeCollations[n.str("inputcollid")] {
		return false
	}
	args, _ := n.get("args").(ptList)
	if len(args.items) != 2 {
		return false
	}
	pat := args.items[1]
	for {
		rl, ok := pat.(*ptNode)
		if !ok || rl.tag != "RELABELTYPE" {
			break
		}
		pat = rl.get("arg")
	}
	c, ok := pat.(*ptNode)
	if !ok || c.tag != "CONST" {
		return false
	}
	if c.str("constisnull") == "true" {
		// The view's stand-in for a parameter (or a NULL as written,
		// for which checking the parameters is only cautious).
		g.paramPattern = true
	} else {
		d, ok := c.get("constvalue").(ptDatum)
		v, read := d.varlena()
		switch {
		case !ok || !read:
			g.fail("the subquery%s calls %s with a constant pattern the rule cannot read: %s", inView(at.name), r.Name, mightFail)
		case !LikePatternSafe(v):
			g.fail("the subquery%s calls %s with pattern %q, which ends with an escape character or has more than %d %%: %s", inView(at.name), r.Name, v, MaxLikePercents, mightFail)
		}
	}
	g.visit(args.items[0], at)
	return true
}

// subqueryParams are the numbers of the parameters sl's subquery reads,
// in order.
func subqueryParams(sl *pg_query.SubLink) []int {
	var ns []int
	eachNode(sl.Subselect, func(n *pg_query.Node) {
		if p := n.GetParamRef(); p != nil && !slices.Contains(ns, int(p.Number)) {
			ns = append(ns, int(p.Number))
		}
	})
	slices.Sort(ns)
	return ns
}
