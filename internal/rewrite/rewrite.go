// Package rewrite rewrites SQL text before PostgreSQL plans it, with rules
// that each match a parse-tree shape, check preconditions and splice new
// text at the parser's token positions (never deparsing: comments,
// literals, casing and $n parameters stay as written).
//
// The first rule, "or_any_array", is the field remedy for OR over
// subqueries (docs/field-notes.md, section 1, cause 3): in an OR whose arms all
// test columns with "=", each arm "col IN (S)" / "col = ANY (S)"
// becomes "col = ANY (ARRAY(S))", with the arm as written kept in a branch
// the planner removes: "CASE WHEN false THEN col IN (S) ELSE col = ANY
// (ARRAY(S)) END" (see guardOpen: a re-analysis in a context the decision
// did not see raises the original's errors). PostgreSQL evaluates ARRAY(S) once as an
// InitPlan and can use the array as an index condition (a BitmapOr of index
// scans), where the sublink form keeps a sequential scan with a SubPlan
// filter (src/backend/optimizer/plan/subselect.c; indexable
// ScalarArrayOpExpr: src/backend/optimizer/path/indxpath.c).
//
// The rule's preconditions are syntactic (an OR of equality arms on
// plain columns, uncorrelated subqueries, no volatile function, ...), on
// the catalog (Options.Catalog: each compared column leads an index, the
// arms may test different columns) and on types (Options.Types: the
// server's types of each compared column and of each subquery's output
// are scalar, non-array types after resolving domains, so that
// ARRAY(subquery) is one-dimensional and "= ANY" finds the same "="
// operator as IN). With Types the rewritten statement is also prepared
// by the server (never executed) and kept only if it has the original's
// parameter and result column types (validate). When Types is also a
// Batcher (PGCatalog is), the Describes, the temporary-relation check and
// the column types of one matched statement go to the server in one
// round trip (prefetch). With Types, an arm is also rewritten only when
// every function the server evaluates for its subquery is leakproof and
// not volatile (guard.go): the rewritten form evaluates the subquery
// where the original may not. Without Types the rule trusts the text
// unless Options.RequireTypes.
//
// Parsing uses the real PostgreSQL parser (pg_query_go, libpg_query).
package rewrite

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// Catalog answers the questions the rules cannot answer from the text
// alone. Names are as the parser returns them (unquoted, case-folded);
// schema may be "". known=false means the relation or function is not
// visible to the catalog (e.g. another session's temporary table): rules
// treat that as "cannot prove" and leave the statement unchanged.
type Catalog interface {
	// Column describes column col of relation schema.rel: whether it
	// exists, whether its type is an array, and whether some valid index
	// of the relation has it as its leading column.
	Column(ctx context.Context, schema, rel, col string) (ColumnInfo, error)
	// Volatile reports whether any function named name (any schema, any
	// argument types) is VOLATILE (pg_proc.provolatile = 'v').
	Volatile(ctx context.Context, name string) (volatile, known bool, err error)
}

// ColumnInfo is what Catalog.Column returns.
type ColumnInfo struct {
	// RelationKnown is false when the relation is not visible.
	RelationKnown bool
	// Exists is true when the relation has the column.
	Exists bool
	// IsArray is true when the column's type is an array type.
	IsArray bool
	// LeadingIndex is true when a valid index's first key is the column.
	LeadingIndex bool
	// TypeOID is the column's declared type (pg_attribute.atttypid), 0
	// when it does not exist.
	TypeOID uint32
}

// Options tune Rewrite.
type Options struct {
	// Catalog, if set, resolves unqualified names, function volatility
	// and indexes (proxy and --dsn mode). With a Catalog, rules that need
	// an index on the left column require it.
	Catalog Catalog
	// Disabled lists rule names that must not fire.
	Disabled map[string]bool
	// Types, if set, is asked for the server's types: an arm is rewritten
	// only when its compared column and its subquery's output are scalar,
	// non-array types (see Types), and a rewritten statement is used only
	// when the server prepares it with the original's parameter and
	// result column types. It needs Catalog too (PGCatalog serves as
	// both).
	Types Types
	// ParamOIDs are the parameter types a client declared (a Parse
	// message's), passed to every Describe.
	ParamOIDs []uint32
	// RequireTypes: without Types, veto every arm ("types unknown: not
	// rewritten") instead of trusting the text alone. erplab rewrite
	// without --dsn sets it unless the user asserts the types.
	RequireTypes bool
	// MaxTokens, when above 0, refuses a text of more tokens unparsed
	// (CheckWork).
	MaxTokens int
	// Checked, when it is Check's result for the same text and
	// MaxTokens, stands for the check Rewrite would run itself.
	Checked *Checked
}

// Firing says that a rule changed the statement at byte offset Location
// of Rewrite's input, which is at Line and Column (1-based, the column in
// characters: see LineColumn).
type Firing struct {
	Rule         string
	Location     int
	Line, Column int
	// Detail names the change, with the arm's operator as written:
	// "t.a IN (subquery) -> t.a = ANY (ARRAY(subquery))".
	Detail string
}

// Veto says that a rule matched at byte offset Location (at Line and
// Column, as in Firing) but a precondition did not hold, so the text
// there was left unchanged.
type Veto struct {
	Rule         string
	Location     int
	Line, Column int
	Reason       string
}

// Result is the outcome of Rewrite.
type Result struct {
	// SQL is the rewritten text, or the input byte for byte if nothing
	// fired.
	SQL string
	// Changed is true when SQL differs from the input.
	Changed bool
	Fired   []Firing
	Vetoes  []Veto
	// Validated is true when Changed and the server (Options.Types)
	// prepared every rewritten statement with the original's parameter
	// and result column types.
	Validated bool
	// ValidationFailed is true when a rule fired but the server rejected
	// the rewritten text or described it differently from the original
	// (so it was not used: a caller may remember never to try again).
	ValidationFailed bool
	// Relations are the names (without schema) of the relations the
	// statements that Types validated refer to: a new or dropped relation
	// of one of these names may change what they mean.
	Relations []string
	// Statements is the number of statements in the input.
	Statements int
	// Positions maps offsets in SQL back to the input (see
	// PositionMap); the zero value is the identity.
	Positions PositionMap
	// BindChecks, when not empty, are the parameters ($n numbers, in
	// order) whose values decide whether SQL may be run instead of the
	// input: only an execution where each is NULL or passes
	// LikePatternSafe (in the server's encoding) may run SQL; any
	// other must run the input. A subquery the rewrite moves has a
	// LIKE whose pattern is one of them (see the guard).
	BindChecks []int
}

// warmSQL exercises the parser, scanner, tree walk and splice.
const warmSQL = "SELECT t.a FROM t WHERE t.a = $1 OR t.a IN (SELECT u.x FROM u WHERE u.y = 'w') /* warm */"

// Warm runs the parser, the scanner, the fingerprinter and the rules'
// tree walk once on a small statement, so that their one-time
// initialisation (libpg_query's memory contexts, protobuf reflection of
// the parse tree's types) is not paid by a client's first statement. It
// is safe to call more than once and from several goroutines.
func Warm() {
	_, _ = Rewrite(context.Background(), warmSQL, Options{})
	_, _ = pg_query.Fingerprint(warmSQL)
}

// Explain is a one-line human summary of r: which rules fired and why
// the others did not, each at its line and column.
func (r Result) Explain() string {
	var parts []string
	for _, f := range r.Fired {
		parts = append(parts, fmt.Sprintf("%s fired at line %d, column %d (%s)", f.Rule, f.Line, f.Column, f.Detail))
	}
	for _, v := range r.Vetoes {
		parts = append(parts, fmt.Sprintf("%s vetoed at line %d, column %d: %s", v.Rule, v.Line, v.Column, v.Reason))
	}
	if len(parts) == 0 {
		return "unchanged: no rule matched (no OR with an IN/= ANY subquery arm)"
	}
	if !r.Changed {
		return "unchanged: " + strings.Join(parts, "; ")
	}
	if len(r.BindChecks) > 0 {
		ps := make([]string, len(r.BindChecks))
		for i, n := range r.BindChecks {
			ps[i] = fmt.Sprintf("$%d", n)
		}
		parts = append(parts, "only for executions where "+strings.Join(ps, ", ")+" are NULL or LIKE patterns that cannot fail (no trailing escape character)")
	}
	return strings.Join(parts, "; ")
}

// edit replaces input[start:end] with text.
type edit struct {
	start, end int
	text       string
	// text[copyAt:copyAt+copyLen] is the input's bytes from copyFrom (the
	// arm a rewrite keeps as written); copyLen 0: none.
	copyAt, copyFrom, copyLen int
}

// shift returns e moved by d bytes (to or from a statement's own span).
func (e edit) shift(d int) edit {
	e.start, e.end = e.start+d, e.end+d
	if e.copyLen > 0 {
		e.copyFrom += d
	}
	return e
}

// rule is one rewrite: it inspects one parsed statement and returns the
// edits it wants (at token positions) and the places it refused.
type rule interface {
	name() string
	apply(ctx context.Context, st *statement) ([]edit, []Firing, []Veto, error)
}

// statement is one parsed input with lazily scanned tokens.
type statement struct {
	sql          string
	tree         *pg_query.ParseResult
	tokens       []*pg_query.ScanToken
	catalog      Catalog
	types        Types
	paramOIDs    []uint32
	requireTypes bool
	spans        []*stmtSpan // the statements' spans, built by spanOf
	// answers, columns, functions and tempAsked/tempFound hold what
	// prefetch learnt (this call only).
	answers   map[string]answer
	columns   map[[3]string]ColumnInfo
	functions map[string][2]bool
	tempAsked []string
	tempFound string
	views     map[string]*Resolution // Types.Resolve of a view, by its text
	relations []string               // relation names of the validated statements
	// bindChecks: Result.BindChecks.
	bindChecks []int
}

// addBindChecks adds parameter numbers to s.bindChecks.
func (s *statement) addBindChecks(ns []int) {
	for _, n := range ns {
		if !slices.Contains(s.bindChecks, n) {
			s.bindChecks = append(s.bindChecks, n)
		}
	}
	slices.Sort(s.bindChecks)
}

func (s *statement) scan() ([]*pg_query.ScanToken, error) {
	if s.tokens == nil { // Rewrite stores CheckLimits' tokens
		r, err := pg_query.Scan(s.sql)
		if err != nil {
			return nil, fmt.Errorf("rewrite: scan: %w", err)
		}
		s.tokens = r.Tokens
	}
	return s.tokens, nil
}

// Rules lists the names of all rules, in the order they run.
func Rules() []string {
	var out []string
	for _, r := range allRules() {
		out = append(out, r.name())
	}
	return out
}

// registered is every rule, in the order they run (by name). register
// fills it from the init functions of the files that declare the rules;
// nothing changes it after.
var registered []rule

// register adds r to the rules; call it from an init function of the file
// that declares r's type. It panics on a programming error, found by the
// first test of the package: an empty name or a name registered twice.
func register(r rule) {
	n := r.name()
	i, dup := slices.BinarySearchFunc(registered, n, func(o rule, n string) int { return strings.Compare(o.name(), n) })
	if n == "" {
		panic("rewrite.register: a rule needs a name")
	}
	if dup {
		panic(fmt.Sprintf("rewrite.register: %q registered twice", n))
	}
	registered = slices.Insert(registered, i, r)
}

// allRules is every rule, in the order they run.
func allRules() []rule { return registered }

// Rewrite parses sql (one or more statements) with the PostgreSQL parser
// and applies every enabled rule. A text that CheckWork refuses is
// an error wrapping a *LimitError (never parsed); a statement that fails
// to parse is an error (the text is returned unchanged in Result.SQL as well). Catalog
// errors are returned wrapped.
func Rewrite(ctx context.Context, sql string, opts Options) (Result, error) {
	res := Result{SQL: sql}
	var toks []*pg_query.ScanToken
	if c := opts.Checked; c != nil && c.sql == sql && c.maxTokens == opts.MaxTokens {
		toks = c.tokens
	} else {
		var err error
		if toks, err = checkLimits(sql, opts.MaxTokens); err != nil {
			return res, fmt.Errorf("rewrite: %w", err)
		}
	}
	// toks is nil after a scanner error: the parser reports it.
	tree, err := pg_query.Parse(sql)
	if err != nil {
		return res, fmt.Errorf("rewrite: %w", syntaxError(sql, err))
	}
	st := &statement{sql: sql, tree: tree, tokens: toks, catalog: opts.Catalog, types: opts.Types, paramOIDs: opts.ParamOIDs, requireTypes: opts.RequireTypes}
	res.Statements = len(tree.Stmts)
	var edits []edit
	for _, r := range allRules() {
		if opts.Disabled[r.name()] {
			continue
		}
		e, f, v, err := r.apply(ctx, st)
		if err != nil {
			return res, err
		}
		edits = append(edits, e...)
		res.Fired = append(res.Fired, f...)
		res.Vetoes = append(res.Vetoes, v...)
	}
	if len(edits) > 0 && opts.Types != nil {
		edits, res.Fired, res.Vetoes, res.ValidationFailed, err = validate(ctx, st, edits, res.Fired, res.Vetoes)
		if err != nil {
			return res, err
		}
		res.Validated = len(edits) > 0
		res.Relations = st.relations
	}
	res.locate(sql)
	if len(edits) == 0 {
		return res, nil
	}
	out, err := splice(sql, edits)
	if err != nil {
		return res, err
	}
	res.SQL, res.Changed = out, out != sql
	if res.Changed {
		res.BindChecks = st.bindChecks
	}
	res.Positions = PositionMap{edits: edits} // sorted by splice
	for _, raw := range st.tree.Stmts {
		sp := st.spanOf(int(raw.StmtLocation))
		if sp != nil && slices.ContainsFunc(edits, func(e edit) bool { return e.start >= sp.start && e.start < sp.end }) {
			res.Positions.changed = append(res.Positions.changed, [2]int{sp.start, sp.end})
		}
	}
	return res, nil
}

// splice applies non-overlapping edits to s.
func splice(s string, edits []edit) (string, error) {
	sort.SliceStable(edits, func(i, j int) bool { return edits[i].start < edits[j].start })
	var b strings.Builder
	b.Grow(len(s) + 32*len(edits))
	pos := 0
	for _, e := range edits {
		if e.start < pos || e.end < e.start || e.end > len(s) {
			return "", fmt.Errorf("rewrite: overlapping or out-of-range edit [%d,%d) after %d", e.start, e.end, pos)
		}
		b.WriteString(s[pos:e.start])
		b.WriteString(e.text)
		pos = e.end
	}
	b.WriteString(s[pos:])
	return b.String(), nil
}
