package rewrite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
)

// Types answers, from the server, what the text cannot tell: the types
// of a subquery's output and of a column, whether the server accepts a
// statement, and which functions it evaluates for a subquery. Describe
// must only prepare (Parse and Describe of the unnamed statement), never
// execute; Resolve may create a view only in a transaction it rolls back.
// PGCatalog implements it over one connection (NewPGCatalogConn).
type Types interface {
	// Describe prepares sql with the given parameter types (0 or a
	// shorter list: the server infers the rest) and returns the
	// parameter and result column types. A rejection by the server is
	// returned as a *pgconn.PgError (possibly wrapped); any other error
	// means the server could not be asked.
	Describe(ctx context.Context, sql string, paramOIDs []uint32) (Description, error)
	// Type describes type oid with domains resolved to their base type.
	Type(ctx context.Context, oid uint32) (TypeInfo, error)
	// TempRelations returns one of names that some session has a
	// temporary relation of (pg_class.relpersistence = 't'), or "": a
	// client's session could then resolve that name differently from the
	// connection that answers Describe. It must not cache its answer.
	TempRelations(ctx context.Context, names []string) (string, error)
	// Resolve answers q's questions in place (see Resolution). An error
	// means the server could not be asked; the server's rejection of
	// q.View is q.ViewErr. It leaves the connection as it found it: no
	// transaction open, nothing created.
	Resolve(ctx context.Context, q *Resolution) error
}

// Resolution holds the guard's questions to the server (Types.Resolve)
// and their answers: the analysed tree of a subquery and of the views it
// reads, and the facts of the functions and operators the trees name.
type Resolution struct {
	// View, when set, is a CREATE TEMPORARY VIEW statement: the server
	// creates the view in a transaction that is then rolled back, and
	// answers in Tree (pg_rewrite.ev_action of the view, as text) and
	// TreeOID (the view's OID, which its OLD and NEW entries name), or
	// ViewErr (a *pgconn.PgError, possibly wrapped). Rels, Funcs and Ops
	// then hold what pg_depend records the view depends on (no pinned,
	// built-in object: Funcs and Ops also hold those an implementation
	// knows already).
	View    string
	Tree    string
	TreeOID uint32
	ViewErr error
	// Views are existing views whose trees to return in Trees (a view
	// missing there is not one); Rels and Funcs then hold what they
	// depend on as for View.
	Views []uint32
	Trees map[uint32]string
	// Functions and Operators are pg_proc and pg_operator OIDs to
	// describe in Funcs and Ops (an operator's function goes to Funcs
	// too, an aggregate's support functions as well). A missing answer
	// means the server has no such object.
	Functions, Operators []uint32
	// TypeNames are pg_type OIDs whose schema and name to return in
	// Idents.
	TypeNames []uint32

	Funcs  map[uint32]Routine
	Ops    map[uint32]Operator
	Rels   map[uint32]Relation
	Idents map[uint32][2]string
}

// Routine is what the guard needs of a pg_proc row.
type Routine struct {
	Name string
	// Volatility is provolatile: 'i', 's' or 'v'.
	Volatility byte
	Leakproof  bool
	// Support lists an aggregate's support functions (transition,
	// final, combine, serial, deserial and their moving-aggregate forms).
	Support []uint32
}

// Operator is what the guard needs of a pg_operator row.
type Operator struct {
	Name string
	Code uint32 // oprcode, its function
}

// Relation is what the guard needs of a pg_class row.
type Relation struct {
	Name        string
	Kind        byte // relkind
	RowSecurity bool // relrowsecurity
}

// merge adds o's answers to r.
func (r *Resolution) merge(o *Resolution) {
	r.Funcs = mergeMap(r.Funcs, o.Funcs)
	r.Ops = mergeMap(r.Ops, o.Ops)
	r.Rels = mergeMap(r.Rels, o.Rels)
	r.Trees = mergeMap(r.Trees, o.Trees)
	r.Idents = mergeMap(r.Idents, o.Idents)
}

func mergeMap[V any](to, from map[uint32]V) map[uint32]V {
	if len(from) == 0 {
		return to
	}
	if to == nil {
		to = make(map[uint32]V, len(from))
	}
	for k, v := range from {
		to[k] = v
	}
	return to
}

// Batcher is implemented by a Types that can answer several questions
// in one round trip to the server (PGCatalog does, with a pipeline of one
// Sync per question, so that a rejection answers only its own question).
// When Options.Types is one, Rewrite asks everything the catalog checks,
// the type checks and the validation of a matched OR need at once, before
// any of those checks: the compared columns (with their types) and the
// subqueries' columns and functions as Catalog would be asked if every
// answer allowed the rewrite, the Describes of the original statement, of
// each subquery without parameters and of the rewritten text, and the
// temporary-relation check. The answers are those of the single calls; a
// question the batch could not answer in advance (a subquery with
// parameters, whose types come from the original's Description; a column
// looked up only because an earlier answer was not the expected one) is
// asked alone.
type Batcher interface {
	// Batch answers b's questions in place. An error means the server
	// could not be asked (as for Describe); a rejection of one Describe
	// is that question's Err.
	Batch(ctx context.Context, b *Batch) error
}

// Batch is a set of questions for Batcher.Batch.
type Batch struct {
	// Describes are answered in Desc and Err (a *pgconn.PgError,
	// possibly wrapped, when the server rejects the text).
	Describes []BatchDescribe
	// TempNames, when not nil, is asked as Types.TempRelations; the
	// answer goes to TempFound.
	TempNames []string
	TempFound string
	// Types are type OIDs whose Types.Type answer the implementation
	// should learn (it may skip those it has cached).
	Types []uint32
	// Columns are asked as Catalog.Column; the implementation also learns
	// the Types.Type answer of each existing column's type.
	Columns []BatchColumn
	// Functions are asked as Catalog.Volatile.
	Functions []BatchFunction
	// Resolves are asked as Types.Resolve of their View (only: the
	// other questions are asked alone).
	Resolves []*Resolution
}

// BatchColumn is one Catalog.Column question of a Batch. Answered is
// false when the server refused the question (Column then asks alone).
type BatchColumn struct {
	Schema, Rel, Col string
	Info             ColumnInfo
	Answered         bool
}

// BatchFunction is one Catalog.Volatile question of a Batch, answered
// as BatchColumn is.
type BatchFunction struct {
	Name            string
	Volatile, Known bool
	Answered        bool
}

// BatchDescribe is one Describe of a Batch.
type BatchDescribe struct {
	SQL       string
	ParamOIDs []uint32
	Desc      Description
	Err       error
}

// Description is what Types.Describe returns.
type Description struct {
	// Params are the parameter type OIDs ($1 first).
	Params []uint32
	// Columns are the result columns (none for a statement without a
	// result).
	Columns []DescribedColumn
}

// DescribedColumn is one result column of a Description.
type DescribedColumn struct {
	Name    string
	TypeOID uint32
	TypeMod int32
}

// String is "name type(typmod), ..." for messages.
func (d Description) String() string {
	var parts []string
	for _, c := range d.Columns {
		parts = append(parts, fmt.Sprintf("%s %d(%d)", c.Name, c.TypeOID, c.TypeMod))
	}
	return fmt.Sprintf("params %v, columns [%s]", d.Params, strings.Join(parts, ", "))
}

// TypeInfo is what Types.Type returns.
type TypeInfo struct {
	// Known is false when no type has the OID.
	Known bool
	// Name is the type as format_type writes it; Base is the base type
	// when Name is a domain (else equal to Name).
	Name, Base string
	// Scalar is true for a base, enum, range or multirange type (after
	// resolving domains) that is neither an array nor subscriptable
	// like one: ARRAY(subquery) of it is a one-dimensional array whose
	// element type is the type itself, so "x = ANY (ARRAY(S))" looks up
	// the same "=" operator as "x IN (S)".
	Scalar bool
	// Why says why the type is not scalar ("an array type", "a
	// composite type", ...), when it is not.
	Why string
}

// rejected reports whether err is the server refusing a statement (as
// opposed to a failed connection), with its SQLSTATE and message.
func rejected(err error) (string, bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code + " " + pe.Message, true
	}
	return "", false
}

// stmtSpan is one statement of the input: its text span and the
// description of its original text, learnt once.
type stmtSpan struct {
	start, end int
	raw        *pg_query.RawStmt
	described  bool
	desc       Description
	descErr    string // the server's rejection of the original, if any
}

// spans returns the statements of st.sql with their byte spans.
func (s *statement) spanOf(loc int) *stmtSpan {
	if s.spans == nil {
		for _, raw := range s.tree.Stmts {
			start := int(raw.StmtLocation)
			end := len(s.sql)
			if raw.StmtLen > 0 {
				end = start + int(raw.StmtLen)
			}
			s.spans = append(s.spans, &stmtSpan{start: start, end: end, raw: raw})
		}
	}
	for _, sp := range s.spans {
		if loc >= sp.start && loc < sp.end {
			return sp
		}
	}
	return nil
}

// original describes the original text of the statement holding byte
// offset loc, once. It returns the server's rejection as a reason.
func (s *statement) original(ctx context.Context, loc int) (*stmtSpan, string, error) {
	sp := s.spanOf(loc)
	if sp == nil {
		return nil, "", fmt.Errorf("rewrite: no statement at offset %d", loc)
	}
	if !sp.described {
		d, err := s.describe(ctx, s.sql[sp.start:sp.end], s.paramOIDs)
		if err != nil {
			why, ok := rejected(err)
			if !ok {
				return nil, "", fmt.Errorf("rewrite: describe the statement: %w", err)
			}
			sp.descErr = why
		}
		sp.desc, sp.described = d, true
	}
	if sp.descErr != "" {
		return sp, "the server does not prepare the statement as written (" + sp.descErr + "), so its types are unknown", nil
	}
	return sp, "", nil
}

// answer is a Describe's outcome, remembered for one Rewrite call.
type answer struct {
	d   Description
	err error
}

// describeKey is the memo key of a Describe.
func describeKey(sql string, params []uint32) string {
	var b strings.Builder
	b.WriteString(sql)
	b.WriteByte(0)
	for _, o := range params {
		fmt.Fprintf(&b, "%d,", o)
	}
	return b.String()
}

// describe is Types.Describe, answered from the batch (prefetch) when
// it asked the same question.
func (s *statement) describe(ctx context.Context, sql string, params []uint32) (Description, error) {
	if a, ok := s.answers[describeKey(sql, params)]; ok {
		return a.d, a.err
	}
	return s.types.Describe(ctx, sql, params)
}

// tempRelations is Types.TempRelations, answered from the batch when it
// asked about the same names (within this Rewrite call: the answer is
// never kept beyond it).
func (s *statement) tempRelations(ctx context.Context, names []string) (string, error) {
	if s.tempAsked != nil && slices.Equal(s.tempAsked, names) {
		return s.tempFound, nil
	}
	return s.types.TempRelations(ctx, names)
}

// relationNames returns the relation names raw refers to and those of
// them that a temporary relation could hide (no schema, or pg_temp).
func relationNames(raw *pg_query.RawStmt) (all, hideable []string) {
	walk(raw.Stmt, nil, func(m proto.Message, _ []proto.Message) bool {
		if rv, ok := m.(*pg_query.RangeVar); ok {
			if !slices.Contains(all, rv.Relname) {
				all = append(all, rv.Relname)
			}
			if (rv.Schemaname == "" || rv.Schemaname == "pg_temp") && !slices.Contains(hideable, rv.Relname) {
				hideable = append(hideable, rv.Relname)
			}
		}
		return true
	})
	return all, hideable
}

// subquery is the text of an arm's subquery and whether it refers to
// parameters ($n): one without is described without parameter types
// (they cannot change its columns), so that the batch can ask for it
// before the original's parameter types are known.
type subquery struct {
	text   string
	params bool
	form   string // the arm's operator as written: "IN", "= ANY" or "= SOME"
	sl     *pg_query.SubLink
}

// prefetch asks a Batcher (if Types is one) in one round trip what the
// checks and validation of the statement holding loc will ask, given the
// rule's edits there (nil: no Describes), its subqueries, the catalog
// questions q and the compared columns' types. It reports whether it
// asked.
func (s *statement) prefetch(ctx context.Context, loc int, edits []edit, subs []subquery, q catalogQuestions, colTypes []uint32) (bool, error) {
	bt, ok := s.types.(Batcher)
	if !ok {
		return false, nil
	}
	sp := s.spanOf(loc)
	if sp == nil {
		return false, nil
	}
	b := Batch{Types: colTypes, Columns: q.columns, Functions: q.functions}
	if edits != nil {
		if !sp.described {
			b.Describes = append(b.Describes, BatchDescribe{SQL: s.sql[sp.start:sp.end], ParamOIDs: s.paramOIDs})
		}
		for _, sub := range subs {
			if sub.params {
				continue
			}
			b.Describes = append(b.Describes, BatchDescribe{SQL: sub.text})
			// The guard's view (guardBlock), when nothing before it
			// vetoes.
			if v, err := guardViewSQL(s, sub.sl, nil, nil); err == nil && s.views[v] == nil {
				b.Resolves = append(b.Resolves, &Resolution{View: v})
			}
		}
		var rel []edit
		for _, e := range edits {
			if e.start >= sp.start && e.start <= sp.end {
				rel = append(rel, e.shift(-sp.start))
			}
		}
		if text, err := splice(s.sql[sp.start:sp.end], rel); err == nil {
			b.Describes = append(b.Describes, BatchDescribe{SQL: text, ParamOIDs: s.paramOIDs})
		}
		_, names := relationNames(sp.raw)
		if len(names) > 0 {
			b.TempNames = names
		}
	}
	if err := bt.Batch(ctx, &b); err != nil {
		return false, fmt.Errorf("rewrite: describe: %w", err)
	}
	if s.answers == nil {
		s.answers = map[string]answer{}
	}
	for _, d := range b.Describes {
		s.answers[describeKey(d.SQL, d.ParamOIDs)] = answer{d.Desc, d.Err}
	}
	if b.TempNames != nil {
		s.tempAsked, s.tempFound = b.TempNames, b.TempFound
	}
	for _, r := range b.Resolves {
		if s.views == nil {
			s.views = map[string]*Resolution{}
		}
		s.views[r.View] = r
	}
	for _, c := range b.Columns {
		if c.Answered {
			if s.columns == nil {
				s.columns = map[[3]string]ColumnInfo{}
			}
			s.columns[[3]string{c.Schema, c.Rel, c.Col}] = c.Info
		}
	}
	for _, f := range b.Functions {
		if f.Answered {
			if s.functions == nil {
				s.functions = map[string][2]bool{}
			}
			s.functions[f.Name] = [2]bool{f.Volatile, f.Known}
		}
	}
	return true, nil
}

// catalogQuestions are Catalog questions for a Batch.
type catalogQuestions struct {
	columns   []BatchColumn
	functions []BatchFunction
}

// questionRecorder is a Catalog that answers every question as the rule
// would need it to rewrite (the relation is visible and has the column,
// which leads an index and is no array; the function exists and is not
// volatile) and records the questions: running the catalog checks on it
// lists what they will ask the real Catalog when the answers are those.
type questionRecorder struct{ q *catalogQuestions }

func (r questionRecorder) Column(_ context.Context, schema, rel, col string) (ColumnInfo, error) {
	if !slices.ContainsFunc(r.q.columns, func(c BatchColumn) bool { return c.Schema == schema && c.Rel == rel && c.Col == col }) {
		r.q.columns = append(r.q.columns, BatchColumn{Schema: schema, Rel: rel, Col: col})
	}
	return ColumnInfo{RelationKnown: true, Exists: true, LeadingIndex: true}, nil
}

func (r questionRecorder) Volatile(_ context.Context, name string) (bool, bool, error) {
	if !slices.ContainsFunc(r.q.functions, func(f BatchFunction) bool { return f.Name == name }) {
		r.q.functions = append(r.q.functions, BatchFunction{Name: name})
	}
	return false, true, nil
}

// memoCatalog is the statement's Catalog answering first from what a
// Batch learnt (this Rewrite call only).
type memoCatalog struct{ st *statement }

func (m memoCatalog) Column(ctx context.Context, schema, rel, col string) (ColumnInfo, error) {
	if ci, ok := m.st.columns[[3]string{schema, rel, col}]; ok {
		return ci, nil
	}
	return m.st.catalog.Column(ctx, schema, rel, col)
}

func (m memoCatalog) Volatile(ctx context.Context, name string) (bool, bool, error) {
	if f, ok := m.st.functions[name]; ok {
		return f[0], f[1], nil
	}
	return m.st.catalog.Volatile(ctx, name)
}

// typeBlock reports why the type with OID oid of what (e.g. "the
// subquery's output") is not a known scalar type, or "".
func typeBlock(ctx context.Context, types Types, oid uint32, what string) (string, error) {
	ti, err := types.Type(ctx, oid)
	if err != nil {
		return "", err
	}
	if !ti.Known {
		return fmt.Sprintf("%s has type OID %d, unknown to the server", what, oid), nil
	}
	if !ti.Scalar {
		name := ti.Name
		if ti.Base != ti.Name {
			name += " (a domain over " + ti.Base + ")"
		}
		return fmt.Sprintf("%s is of type %s, %s, not a scalar type", what, name, ti.Why), nil
	}
	return "", nil
}

// subqueryTypeBlock describes the subquery (uncorrelated, so it is a
// statement of its own) with the statement's parameter types params when
// it has parameters, and reports why its single output column is not a
// scalar type, or "".
// prepareArgTypes returns the type OIDs a PREPARE declares for $1, $2, ...
// (PREPARE name(int, bigint) AS ...), as the server resolves the type
// names: it describes SELECT NULL::type1, NULL::type2, ... deparsed from
// the PREPARE's own type names. nil when none are declared or the server
// cannot say (the subqueries are then described without them).
func prepareArgTypes(ctx context.Context, st *statement, ps *pg_query.PrepareStmt) []uint32 {
	if len(ps.Argtypes) == 0 {
		return nil
	}
	sel := &pg_query.SelectStmt{}
	for _, a := range ps.Argtypes {
		tn := a.GetTypeName()
		if tn == nil {
			return nil
		}
		null := &pg_query.Node{Node: &pg_query.Node_AConst{AConst: &pg_query.A_Const{Isnull: true, Location: -1}}}
		cast := &pg_query.Node{Node: &pg_query.Node_TypeCast{TypeCast: &pg_query.TypeCast{Arg: null, TypeName: tn, Location: -1}}}
		sel.TargetList = append(sel.TargetList, pg_query.MakeResTargetNodeWithVal(cast, -1))
	}
	sql, err := pg_query.Deparse(&pg_query.ParseResult{Version: st.tree.Version, Stmts: []*pg_query.RawStmt{{Stmt: &pg_query.Node{Node: &pg_query.Node_SelectStmt{SelectStmt: sel}}}}})
	if err != nil {
		return nil
	}
	d, err := st.describe(ctx, sql, nil)
	if err != nil || len(d.Columns) != len(ps.Argtypes) {
		return nil
	}
	oids := make([]uint32, len(d.Columns))
	for i, c := range d.Columns {
		oids[i] = c.TypeOID
	}
	return oids
}

func subqueryTypeBlock(ctx context.Context, st *statement, params []uint32, sub subquery) (string, error) {
	if !sub.params {
		params = nil
	}
	d, err := st.describe(ctx, sub.text, params)
	if err != nil {
		why, ok := rejected(err)
		if !ok {
			return "", fmt.Errorf("rewrite: describe a subquery: %w", err)
		}
		return "the server does not prepare the subquery alone (" + why + "), so its type is unknown", nil
	}
	if len(d.Columns) != 1 {
		return fmt.Sprintf("the subquery returns %d columns", len(d.Columns)), nil
	}
	return typeBlock(ctx, st.types, d.Columns[0].TypeOID, "the subquery's output")
}

// validate checks, for every statement that has edits, that the server
// prepares the rewritten text with the original's parameter and result
// column types, and that no temporary relation could hide a relation it
// names. It returns the edits that passed and moves the firings of the
// others to vetoes; failed is true when the server rejected a rewritten
// text or described it differently.
func validate(ctx context.Context, st *statement, edits []edit, fired []Firing, vetoes []Veto) ([]edit, []Firing, []Veto, bool, error) {
	failed := false
	var keepE []edit
	var keepF []Firing
	for _, raw := range st.tree.Stmts {
		sp := st.spanOf(int(raw.StmtLocation))
		var es []edit
		for _, e := range edits {
			if e.start >= sp.start && e.start <= sp.end {
				es = append(es, e.shift(-sp.start))
			}
		}
		var fs []Firing
		for _, f := range fired {
			if f.Location >= sp.start && f.Location < sp.end {
				fs = append(fs, f)
			}
		}
		if len(es) == 0 {
			continue
		}
		why, err := validateOne(ctx, st, sp, raw, es)
		if err != nil {
			return nil, nil, nil, false, err
		}
		if strings.HasPrefix(why, validationFailed) {
			failed = true
		}
		if why != "" {
			for _, f := range fs {
				vetoes = append(vetoes, Veto{Rule: f.Rule, Location: f.Location, Reason: why})
			}
			continue
		}
		for _, e := range es {
			keepE = append(keepE, e.shift(sp.start))
		}
		keepF = append(keepF, fs...)
	}
	return keepE, keepF, vetoes, failed, nil
}

// validationFailed starts the reason of a veto by validation.
const validationFailed = "validation failed: "

func validateOne(ctx context.Context, st *statement, sp *stmtSpan, raw *pg_query.RawStmt, es []edit) (string, error) {
	all, names := relationNames(raw)
	for _, n := range all {
		if !slices.Contains(st.relations, n) {
			st.relations = append(st.relations, n)
		}
	}
	if len(names) > 0 {
		n, err := st.tempRelations(ctx, names)
		if err != nil {
			return "", err
		}
		if n != "" {
			return fmt.Sprintf("a temporary relation named %s exists: a client session may resolve %s to it, not to what the server described", n, n), nil
		}
	}
	if _, why, err := st.original(ctx, sp.start); err != nil || why != "" {
		return why, err
	}
	text, err := splice(st.sql[sp.start:sp.end], es)
	if err != nil {
		return "", err
	}
	d, err := st.describe(ctx, text, st.paramOIDs)
	if err != nil {
		why, ok := rejected(err)
		if !ok {
			return "", fmt.Errorf("rewrite: describe the rewritten statement: %w", err)
		}
		return validationFailed + "the server rejects the rewritten statement (" + why + ")", nil
	}
	if !slices.Equal(d.Params, sp.desc.Params) || !slices.Equal(d.Columns, sp.desc.Columns) {
		return fmt.Sprintf(validationFailed+"the rewritten statement describes as %s, the original as %s", d, sp.desc), nil
	}
	return "", nil
}
