package proxy

import (
	"errors"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"

	"github.com/erplab/erplab/internal/rewrite"
)

// words is what the word pre-filter found in a statement text.
type words struct {
	// match: the text holds OR and one of IN / ANY / SOME followed by
	// an opening parenthesis and SELECT, WITH, VALUES or TABLE (or a
	// comment, which the scan does not look through), so it may hold an
	// OR over an IN subquery. A text with constants only (a IN (1, 2) OR
	// b = 3), which ERP applications send with new literals all the
	// time, is not parsed.
	match bool
	// context: the text holds a word of a statement that may change how
	// the session resolves names (SET/RESET search_path or role,
	// DISCARD, set_config, DDL: CREATE/ALTER/DROP, TEMP tables, a DO
	// block, CALL).
	context bool
	// calls: an identifier-like word is followed by an opening
	// parenthesis (after white space and a closing double quote): the
	// text may call a function (see mutators).
	calls bool
}

// scanWords is the cheap pre-filter: one pass over the identifier-like
// words of s (any case, also inside literals and comments, so it errs
// towards parsing), without allocating. Only texts it flags are parsed.
//
// DO is flagged where it may start a statement (DO is never inside one,
// ON CONFLICT DO of an upsert is not flagged): at the start of the
// text, after a semicolon, or after a comment's start or end (or the
// end of a line after "--"), wherever these are (in a literal too).
func scanWords[T string | []byte](s T) words {
	var or, sub bool
	var w words
	n := len(s)
	start, lineComment := true, false // a statement may start here; "--" seen on this line
	for i := 0; i < n; {
		c := s[i]
		if !isIdentStart(c) {
			switch {
			case c == ';':
				start = true
			case c == '\n' && lineComment:
				start, lineComment = true, false
			case i+1 < n && c == '-' && s[i+1] == '-':
				start, lineComment = true, true
			case i+1 < n && ((c == '/' && s[i+1] == '*') || (c == '*' && s[i+1] == '/')):
				start = true
			}
			i++
			continue
		}
		j := i + 1
		for j < n && isIdentChar(s[j]) {
			j++
		}
		w.calls = w.calls || callAfter(s, j)
		switch wordKind(s[i:j], start) {
		case wordContext:
			w.context = true
		case wordOr:
			or = true
		case wordSubquery:
			sub = sub || subqueryAfter(s, j)
		}
		i, start = j, false
	}
	w.match = or && sub
	return w
}

// Word kinds (wordKind).
const (
	wordOther    = iota
	wordContext  // a word of a statement that may change the context (see words.context)
	wordOr       // OR
	wordSubquery // IN, ANY or SOME: a subquery may follow
)

// wordKind is what word v (an identifier-like word of a statement text)
// means to the pre-filter; start says whether a statement may start
// there (see scanWords).
func wordKind[T string | []byte](v T, start bool) int {
	switch len(v) {
	case 2:
		if start && eqFold(v, "do") {
			return wordContext
		} else if eqFold(v, "or") {
			return wordOr
		} else if eqFold(v, "in") {
			return wordSubquery
		}
	case 3:
		if eqFold(v, "any") {
			return wordSubquery
		}
	case 4:
		if eqFold(v, "some") {
			return wordSubquery
		} else if eqFold(v, "drop") || eqFold(v, "temp") || eqFold(v, "role") || eqFold(v, "call") {
			return wordContext
		}
	case 5:
		if eqFold(v, "reset") || eqFold(v, "alter") {
			return wordContext
		}
	case 6:
		if eqFold(v, "create") {
			return wordContext
		}
	case 7:
		if eqFold(v, "discard") {
			return wordContext
		}
	case 9:
		if eqFold(v, "temporary") {
			return wordContext
		}
	case 10:
		if eqFold(v, "set_config") {
			return wordContext
		}
	case 11:
		if eqFold(v, "search_path") {
			return wordContext
		}
	case 13:
		if eqFold(v, "authorization") {
			return wordContext
		}
	}
	return wordOther
}

// callAfter reports whether s[j:], after the word that ends at j, is an
// opening parenthesis, after an optional closing double quote and white
// space: the word may name a called function.
func callAfter[T string | []byte](s T, j int) bool {
	n := len(s)
	if j < n && s[j] == '"' {
		j++
	}
	for j < n && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r' || s[j] == '\f' || s[j] == '\v') {
		j++
	}
	return j < n && s[j] == '('
}

// eachCall calls fn with every word of s that callAfter says may name a
// called function, until fn returns true; it reports whether one did.
func eachCall[T string | []byte](s T, fn func(T) bool) bool {
	n := len(s)
	for i := 0; i < n; {
		if !isIdentStart(s[i]) {
			i++
			continue
		}
		j := i + 1
		for j < n && isIdentChar(s[j]) {
			j++
		}
		if callAfter(s, j) && fn(s[i:j]) {
			return true
		}
		i = j
	}
	return false
}

// subqueryAfter reports whether s[i:] (after an IN, ANY or SOME) starts,
// after white space, with one or more opening parentheses and then
// SELECT, WITH, VALUES or TABLE; true as well when a comment comes first
// (it errs towards parsing).
func subqueryAfter[T string | []byte](s T, i int) bool {
	n := len(s)
	parens := 0
	for i < n {
		switch c := s[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '(':
			parens++
			i++
		case i+1 < n && ((c == '/' && s[i+1] == '*') || (c == '-' && s[i+1] == '-')):
			return true
		default:
			if parens == 0 || !isIdentStart(c) {
				return false
			}
			j := i + 1
			for j < n && isIdentChar(s[j]) {
				j++
			}
			return subqueryWord(s[i:j])
		}
	}
	return false
}

// subqueryWord reports whether v, the first word inside the parentheses
// after an IN, ANY or SOME, starts a subquery.
func subqueryWord[T string | []byte](v T) bool {
	switch len(v) {
	case 4:
		return eqFold(v, "with")
	case 5:
		return eqFold(v, "table")
	case 6:
		return eqFold(v, "select") || eqFold(v, "values")
	}
	return false
}

// mayMatch reports whether s may hold an OR over an IN subquery.
func mayMatch[T string | []byte](s T) bool { return scanWords(s).match }

// contextChange is what a statement does to the session's name
// resolution, as far as the proxy can follow it.
type contextChange struct {
	// ddl: the statement changes the schema (CREATE, ALTER, a DO
	// block, ...): cached decisions of the database are stale.
	ddl bool
	// names: relations the statement creates as temporary tables or
	// drops: the cached decisions naming them are stale. (CREATE INDEX,
	// TRUNCATE and the like change no decision's meaning: the decision
	// time-out picks up a new index.)
	names []string
	// unknown: the session's search_path or role changes in a way the
	// proxy does not follow (SET LOCAL, inside a transaction or with
	// other statements, set_config, SET ROLE): rewriting stops for it.
	unknown bool
	// reset: DISCARD ALL or RESET ALL: back to the defaults.
	reset bool
	// setPath is a SET search_path statement to replay on the side
	// connection ("" when none); toDefault: RESET or SET ... TO DEFAULT.
	setPath   string
	toDefault bool
}

// tooLargeContext is what a text too large or deep to parse may do: it
// may change anything, a schema change and an unknown context.
func tooLargeContext() contextChange { return contextChange{ddl: true, unknown: true} }

// classifyContext parses text (the pre-filter flagged it) and says what
// it does to the session's context. A call of a function of m (nil: none)
// is a schema change (ddl), as are DO and CALL. alone is true when the session has
// no other request under way and is idle (not in a transaction), and the
// text came as a simple Query: only then is a SET search_path followed
// rather than making the context unknown. Text that does not parse
// changes nothing (the server rejects it too); text too large or deep
// to parse (rewrite.CheckLimits) may change anything: a schema change and
// an unknown context.
func classifyContext(text string, alone bool, m *mutators) contextChange {
	var c contextChange
	tree, err := rewrite.Parse(text)
	if errors.Is(err, rewrite.ErrLimit) {
		return tooLargeContext()
	}
	if err != nil {
		return c
	}
	single := len(tree.Stmts) == 1
	for _, raw := range tree.Stmts {
		switch n := raw.Stmt.GetNode().(type) {
		case *pg_query.Node_VariableSetStmt:
			v := n.VariableSetStmt
			switch v.Name {
			case "search_path":
				switch {
				case v.IsLocal || !alone || !single:
					c.unknown = true
				case v.Kind == pg_query.VariableSetKind_VAR_SET_VALUE:
					c.setPath = text
				case v.Kind == pg_query.VariableSetKind_VAR_SET_DEFAULT || v.Kind == pg_query.VariableSetKind_VAR_RESET:
					c.toDefault = true
				default:
					c.unknown = true
				}
			case "role", "session_authorization", "session.authorization":
				c.unknown = true
			case "":
				if v.Kind == pg_query.VariableSetKind_VAR_RESET_ALL {
					if alone && single {
						c.reset = true
					} else {
						c.unknown = true
					}
				}
			}
		case *pg_query.Node_DiscardStmt:
			// Dropping temporary tables unhides, it never hides: no
			// decision made without them changes meaning.
			if n.DiscardStmt.Target == pg_query.DiscardMode_DISCARD_ALL && alone && single {
				c.reset = true
			}
		case *pg_query.Node_SelectStmt:
			if into := n.SelectStmt.IntoClause; into != nil {
				c.created(into.Rel)
			}
		case *pg_query.Node_CreateStmt:
			c.created(n.CreateStmt.Relation)
		case *pg_query.Node_CreateTableAsStmt:
			if into := n.CreateTableAsStmt.Into; into != nil {
				c.created(into.Rel)
			} else {
				c.ddl = true
			}
		case *pg_query.Node_DropStmt:
			if !dropsNames(n.DropStmt, &c.names) {
				c.ddl = true
			}
		case *pg_query.Node_IndexStmt, *pg_query.Node_ReindexStmt, *pg_query.Node_ClusterStmt, *pg_query.Node_CommentStmt:
		case *pg_query.Node_InsertStmt, *pg_query.Node_UpdateStmt, *pg_query.Node_DeleteStmt, *pg_query.Node_MergeStmt,
			*pg_query.Node_TransactionStmt, *pg_query.Node_VariableShowStmt, *pg_query.Node_ExplainStmt,
			*pg_query.Node_PrepareStmt, *pg_query.Node_ExecuteStmt, *pg_query.Node_DeallocateStmt,
			*pg_query.Node_CopyStmt, *pg_query.Node_LockStmt, *pg_query.Node_TruncateStmt,
			*pg_query.Node_ListenStmt, *pg_query.Node_NotifyStmt, *pg_query.Node_UnlistenStmt,
			*pg_query.Node_VacuumStmt, *pg_query.Node_CheckPointStmt, *pg_query.Node_GrantStmt, *pg_query.Node_GrantRoleStmt:
		default:
			c.ddl = true
		}
		setConfig, mutator := funcCalls(raw, m)
		if setConfig {
			c.unknown = true
		}
		if mutator {
			c.ddl = true
		}
	}
	return c
}

// created records relation rv, created: a temporary table hides
// relations of its name (names); a permanent one may as well, in an
// earlier schema of a search_path (ddl).
func (c *contextChange) created(rv *pg_query.RangeVar) {
	if rv == nil {
		c.ddl = true
		return
	}
	if rv.Relpersistence == "t" {
		c.names = append(c.names, rv.Relname)
		return
	}
	c.ddl = true
}

// dropsNames appends the relation names a DROP TABLE/VIEW/... removes
// and reports true, or false for a DROP of another kind of object (a
// type, a function, a schema: treated as a schema change). DROP INDEX
// changes no decision's meaning.
func dropsNames(d *pg_query.DropStmt, names *[]string) bool {
	switch d.RemoveType {
	case pg_query.ObjectType_OBJECT_INDEX:
		return true
	case pg_query.ObjectType_OBJECT_TABLE, pg_query.ObjectType_OBJECT_VIEW, pg_query.ObjectType_OBJECT_MATVIEW,
		pg_query.ObjectType_OBJECT_FOREIGN_TABLE, pg_query.ObjectType_OBJECT_SEQUENCE:
		for _, o := range d.Objects {
			l := o.GetList()
			if l == nil || len(l.Items) == 0 {
				return false
			}
			*names = append(*names, l.Items[len(l.Items)-1].GetString_().GetSval())
		}
		return true
	}
	return false
}

// funcCalls reports whether the statement calls set_config (which may
// change search_path or role in ways the proxy does not follow), and
// whether it calls a function of m (which may change the schema).
func funcCalls(raw *pg_query.RawStmt, m *mutators) (setConfig, mutator bool) {
	rewrite.Walk(raw, func(msg proto.Message) bool {
		if fc, ok := msg.(*pg_query.FuncCall); ok && len(fc.Funcname) > 0 {
			name := fc.Funcname[len(fc.Funcname)-1].GetString_().GetSval()
			setConfig = setConfig || strings.EqualFold(name, "set_config")
			mutator = mutator || has(m, name)
		}
		return !(setConfig && mutator)
	})
	return setConfig, mutator
}

// startupPath returns the session's search_path from its startup
// parameters: "" when they set none, "cfg:" + the value, or unknown when
// they set it (or the role) in a way the proxy does not parse.
func startupPath(params map[string]string) (path string, unknown bool) {
	if v, ok := params["search_path"]; ok {
		path = "cfg:" + v
	}
	if _, ok := params["role"]; ok {
		return "", true
	}
	opts, ok := params["options"]
	if !ok {
		return path, false
	}
	// libpq's options: command-line switches separated by spaces, a
	// backslash escaping the next character.
	var args []string
	var b strings.Builder
	esc := false
	for _, r := range opts {
		switch {
		case esc:
			b.WriteRune(r)
			esc = false
		case r == '\\':
			esc = true
		case r == ' ' || r == '\t':
			if b.Len() > 0 {
				args = append(args, b.String())
				b.Reset()
			}
		default:
			b.WriteRune(r)
		}
	}
	if b.Len() > 0 {
		args = append(args, b.String())
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		var kv string
		switch {
		case a == "-c" && i+1 < len(args):
			i++
			kv = args[i]
		case strings.HasPrefix(a, "-c"):
			kv = a[2:]
		case strings.HasPrefix(a, "--"):
			kv = a[2:]
		default:
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		switch strings.ReplaceAll(strings.ToLower(k), "-", "_") {
		case "search_path":
			path = "cfg:" + v
		case "role", "session_authorization":
			return "", true
		}
	}
	return path, false
}
