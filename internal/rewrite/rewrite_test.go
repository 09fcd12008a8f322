package rewrite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/erplab/erplab/internal/pgtest"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

// The rule's table cases (rewrites and vetoes without a catalog) are the
// golden cases of testdata/cases (TestGoldenCases); the options and
// errors stay here.
func TestDisabledRuleAndParseError(t *testing.T) {
	t.Run("disabled rule", func(t *testing.T) {
		in := "SELECT 1 FROM t WHERE t.a = 1 OR t.a IN (SELECT u.x FROM u)"
		r, err := Rewrite(context.Background(), in, Options{Disabled: map[string]bool{RuleORAnyArray: true}})
		if err != nil || r.Changed {
			t.Fatalf("got %+v, %v", r, err)
		}
	})
	t.Run("parse error", func(t *testing.T) {
		if _, err := Rewrite(context.Background(), "SELEC 1", Options{}); err == nil {
			t.Fatal("want a parse error")
		}
	})
}

func TestCatalogPreconditions(t *testing.T) {
	ctx := context.Background()
	pool := srv.Pool(t, srv.NewDatabase(t))
	if _, err := pool.Exec(ctx, `
CREATE TABLE t (a int, b int, arr int[]);
CREATE INDEX t_a ON t (a);
CREATE INDEX t_arr ON t (arr);
CREATE TABLE u (x int, y int);
CREATE TABLE c (a int, b int);
CREATE INDEX c_a ON c (a);
CREATE TABLE w (b int);
CREATE FUNCTION stable_f(int) RETURNS int LANGUAGE sql STABLE AS 'SELECT $1';
CREATE FUNCTION vol_f(int) RETURNS int LANGUAGE sql VOLATILE AS 'SELECT $1';
INSERT INTO t SELECT g, g % 10, ARRAY[g] FROM generate_series(1, 1000) g;
INSERT INTO u VALUES (1, 1), (2, NULL), (NULL, 3), (2, 2);
INSERT INTO w VALUES (1);
ANALYZE t; ANALYZE u;`); err != nil {
		t.Fatal(err)
	}
	cat := NewPGCatalog(pool)
	cases := []struct {
		name, in string
		changed  bool
		reason   string
	}{
		{"unqualified proven inner", "SELECT t.b FROM t WHERE t.a = 5 OR t.a IN (SELECT x FROM u)", true, ""},
		{"unqualified outer column", "SELECT t.b FROM t WHERE t.a = 5 OR t.a IN (SELECT b FROM u)", false, "correlated"},
		{"no leading index", "SELECT t.a FROM t WHERE t.b = 5 OR t.b IN (SELECT u.x FROM u)", false, "no index"},
		{"stable function", "SELECT t.b FROM t WHERE t.a = 5 OR t.a IN (SELECT stable_f(u.x) FROM u)", true, ""},
		{"volatile function", "SELECT t.b FROM t WHERE t.a = 5 OR t.a IN (SELECT vol_f(u.x) FROM u)", false, "volatile"},
		{"array column", "SELECT t.b FROM t WHERE t.arr = '{1}' OR t.arr IN (SELECT ARRAY[u.x] FROM u)", false, "array"},
		{"unqualified left column", "SELECT b FROM t WHERE a = 5 OR a IN (SELECT u.x FROM u)", true, ""},
		// A sampled table is read by a Sample Scan only: no index serves
		// the rewritten arm (TestSampledTableHasNoIndexPath).
		{"compared table sampled", "SELECT t.b FROM t TABLESAMPLE SYSTEM (50) WHERE t.a = 5 OR t.a IN (SELECT u.x FROM u)", false, "t.a is a column of t, read with TABLESAMPLE"},
		{"unqualified column of a sampled table", "SELECT b FROM t TABLESAMPLE BERNOULLI (50) REPEATABLE (1), u WHERE a = 5 OR a IN (SELECT u.x FROM u)", false, "a is a column of t, read with TABLESAMPLE"},
		// The subquery is evaluated once either way, on one sample (the
		// REPEATABLE seed makes the sample, and so the rows, comparable).
		{"sampled subquery", "SELECT t.b FROM t WHERE t.a = 5 OR t.a IN (SELECT x FROM u TABLESAMPLE BERNOULLI (50) REPEATABLE (3))", true, ""},
		// A WITH query shadows a table of its name: w's x is the outer t's... b.
		{"WITH query shadows a table", "WITH w AS (SELECT 1 AS z) SELECT t.b FROM t WHERE t.a = 5 OR t.a IN (SELECT b FROM w)", false, "correlated: unqualified column b is not a column of its FROM items"},
		{"column of a WITH query", "WITH w AS (SELECT u.x AS k FROM u) SELECT t.b FROM t WHERE t.a = 5 OR t.a IN (SELECT k FROM w)", true, ""},
		{"WITH query column names", "WITH w(k) AS (SELECT u.x FROM u) SELECT t.b FROM t WHERE t.a = 5 OR t.a IN (SELECT k FROM w)", true, ""},
		{"compared column of a WITH query", "WITH c AS (SELECT t.a, t.b FROM t) SELECT c.b FROM c WHERE c.a = 5 OR c.a IN (SELECT u.x FROM u)", false, "c.a is a column of WITH query c, not of a table"},
		{"compared column of a subquery in FROM", "SELECT s.b FROM (SELECT t.a, t.b FROM t) s WHERE s.a = 5 OR s.a IN (SELECT u.x FROM u)", false, "s.a is a column of subquery s, not of a table"},
		{"subquery in FROM without column names", "SELECT t.b FROM t WHERE t.a = 5 OR t.a IN (SELECT x FROM (SELECT u.x FROM u) s)", true, ""},
		{"function with column names", "SELECT t.b FROM t WHERE t.a = 5 OR t.a IN (SELECT x FROM unnest(ARRAY[1, 2]) AS f(x))", true, ""},
		{"function without column names", "SELECT t.b FROM t WHERE t.a = 5 OR t.a IN (SELECT g FROM generate_series(1, 3) g)", false, "cannot tell the columns of function g in FROM"},
		{"LATERAL in the subquery", "SELECT t.b FROM t WHERE t.a = 5 OR t.a IN (SELECT l.x FROM u, LATERAL (SELECT u.x) l)", true, ""},
		{"LATERAL item of the outer query", "SELECT t.b FROM t, LATERAL (SELECT t.b AS lb) l WHERE t.a = 5 OR t.a IN (SELECT l.lb FROM u)", false, "correlated: l.lb refers to an outer relation"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Rewrite(ctx, c.in, Options{Catalog: cat})
			if err != nil {
				t.Fatal(err)
			}
			if r.Changed != c.changed || (c.reason != "" && !strings.Contains(r.Explain(), c.reason)) {
				t.Fatalf("changed=%v %q: %s", r.Changed, r.SQL, r.Explain())
			}
			if !r.Changed {
				return
			}
			// Same rows both ways (as multisets), and the array form is indexable.
			same(t, pool, c.in, r.SQL)
		})
	}
}

// The reason of the TABLESAMPLE veto: the rewritten arm of a sampled
// table is no index condition (a Sample Scan filters), while the same
// arm of the table itself is (a BitmapOr of index scans).
func TestSampledTableHasNoIndexPath(t *testing.T) {
	ctx := context.Background()
	pool := srv.Pool(t, srv.NewDatabase(t))
	if _, err := pool.Exec(ctx, `CREATE TABLE t (a int, b int); CREATE INDEX t_a ON t (a); CREATE TABLE u (x int);
INSERT INTO t SELECT g, g FROM generate_series(1, 20000) g; INSERT INTO u VALUES (5), (7); ANALYZE t; ANALYZE u;`); err != nil {
		t.Fatal(err)
	}
	plan := func(from string) string {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
			t.Fatal(err)
		}
		rows, _ := tx.Query(ctx, "EXPLAIN SELECT t.b FROM "+from+" WHERE t.a = 1 OR t.a = ANY (ARRAY(SELECT u.x FROM u))")
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}
	if p := plan("t"); !strings.Contains(p, "Bitmap Index Scan on t_a") {
		t.Errorf("unsampled: want a bitmap index scan of t_a:\n%s", p)
	}
	for _, from := range []string{"t TABLESAMPLE SYSTEM (50)", "t TABLESAMPLE BERNOULLI (50) REPEATABLE (1)"} {
		if p := plan(from); !strings.Contains(p, "Sample Scan on t") || strings.Contains(p, "Index") {
			t.Errorf("%s: want a Sample Scan and no index:\n%s", from, p)
		}
	}
}

// same fails t unless queries a and b return the same rows as multisets.
func same(t *testing.T, pool *pgxpool.Pool, a, b string) {
	t.Helper()
	ra, rb := rowsOf(t, pool, a), rowsOf(t, pool, b)
	if !slices.Equal(ra, rb) {
		t.Fatalf("results differ:\n%s -> %v\n%s -> %v", a, ra, b, rb)
	}
}

func rowsOf(t *testing.T, pool *pgxpool.Pool, q string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	var out []string
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(v...))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	slices.Sort(out)
	return out
}

// corpusStatements returns the statements of the SQL files shipped with
// the PostgreSQL server (information_schema.sql, system_views.sql, ...):
// real-world SQL with ORs, subqueries, comments and casts.
func corpusStatements(t *testing.T) []string {
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(srv.BinDir(t)), "..", "..", "..", "share", "postgresql", "*", "*.sql"))
	if len(files) == 0 {
		files, _ = filepath.Glob("/usr/share/postgresql/*/*.sql")
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		stmts, err := pg_query.SplitWithParser(string(b), true)
		if err != nil {
			continue // psql meta-commands in a few files
		}
		out = append(out, stmts...)
	}
	return out
}

func TestCorpusRoundTrip(t *testing.T) {
	stmts := corpusStatements(t)
	stmts = append(stmts, extraCorpus...)
	if len(stmts) < 100 {
		t.Fatalf("corpus has only %d statements", len(stmts))
	}
	changed := 0
	for _, s := range stmts {
		if _, err := pg_query.Parse(s); err != nil {
			continue
		}
		r, err := Rewrite(context.Background(), s, Options{})
		if err != nil {
			t.Fatalf("rewrite of a parseable statement failed: %v\n%s", err, s)
		}
		if !r.Changed {
			if r.SQL != s {
				t.Fatalf("unchanged result differs from input:\n%s", s)
			}
			continue
		}
		changed++
		checkRewritten(t, s, r.SQL)
	}
	t.Logf("%d statements, %d rewritten", len(stmts), changed)
	if changed == 0 {
		t.Error("no corpus statement was rewritten; the corpus should exercise the rule")
	}
}

// checkRewritten: the output parses, keeps the parameters, and a second
// pass changes nothing.
func checkRewritten(t testing.TB, in, out string) {
	t.Helper()
	if _, err := pg_query.Parse(out); err != nil {
		t.Fatalf("rewritten text does not parse: %v\n%s\n->\n%s", err, in, out)
	}
	if p1, p2 := params(t, in), params(t, out); p1 != p2 {
		t.Fatalf("parameters changed %q -> %q", p1, p2)
	}
	r2, err := Rewrite(context.Background(), out, Options{})
	if err != nil || r2.Changed {
		t.Fatalf("second pass changed %q (err %v)", out, err)
	}
}

// params is the set of parameters ($n) s uses, sorted ("$1 $2 "): a
// rewrite keeps them, though the arm it keeps as written (guardOpen)
// repeats those of its subquery.
func params(t testing.TB, s string) string {
	r, err := pg_query.Scan(s)
	if err != nil {
		t.Fatal(err)
	}
	var ps []string
	for _, tk := range r.Tokens {
		if tk.Token == pg_query.Token_PARAM && !slices.Contains(ps, s[tk.Start:tk.End]) {
			ps = append(ps, s[tk.Start:tk.End])
		}
	}
	slices.Sort(ps)
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p + " ")
	}
	return b.String()
}

var extraCorpus = []string{
	"SELECT c._description FROM _accumrg1260 m JOIN _reference58 c ON c._idrref = m._fld1262rref WHERE m._period >= $2 AND m._period < $3 AND m._active AND (m._fld1262rref = $1 OR m._fld1262rref IN (SELECT u._ref FROM tt1 u)) GROUP BY 1",
	"UPDATE t SET b = 1 WHERE t.a = $1 OR t.a IN (SELECT u.x FROM u UNION SELECT v.y FROM v)",
	"SELECT 1 FROM t WHERE t.a = 'x''y' OR t.a IN ((SELECT u.x FROM u))",
	"SELECT 1 FROM t WHERE (t.a = 1 OR t.a IN (SELECT u.x FROM u WHERE u.z IN (SELECT w.q FROM w WHERE w.r = 1 OR w.r IN (SELECT k.k FROM k))))",
	"SELECT $$ OR IN (SELECT $$ FROM t WHERE t.a = E'\\'' OR t.a IN (SELECT u.x FROM u)",
	"SELECT 1 FROM t WHERE t.a = 1 OR t.a IN (VALUES (1), (2))",
}

func FuzzRewrite(f *testing.F) {
	for _, s := range extraCorpus {
		f.Add(s)
	}
	f.Add("SELECT 1 FROM t WHERE t.a = $1 OR t.a = ANY (SELECT u.x FROM u)")
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := pg_query.Parse(s); err != nil {
			return
		}
		r, err := Rewrite(context.Background(), s, Options{})
		if err != nil {
			t.Fatalf("rewrite of a parseable statement failed: %v", err)
		}
		if !r.Changed {
			if r.SQL != s {
				t.Fatal("unchanged result differs from input")
			}
			return
		}
		checkRewritten(t, s, r.SQL)
	})
}

// Positions: Location stays a byte offset, Line and Column count lines
// and characters as PostgreSQL does (Cyrillic letters are two bytes in
// UTF-8, one column).
func TestPositions(t *testing.T) {
	for _, c := range []struct {
		text      string
		off       int
		line, col int
	}{
		{"SELECT 1", 0, 1, 1},
		{"SELECT 1", 7, 1, 8},
		{"a\nbc", 2, 2, 1},
		{"a\nbc", 3, 2, 2},
		{"а\nбв", 3, 2, 1},  // "а" is 2 bytes, "\n" 1
		{"а\nбв", 5, 2, 2},  // after "б"
		{"а\nбв", 4, 2, 1},  // inside "б": its own position
		{"ёж", 99, 1, 3},    // past the end: the end
		{"x", -1, 1, 1},     // below 0: the start
		{"a\r\nb", 3, 2, 1}, // CR is a character of line 1
	} {
		if l, col := LineColumn(c.text, c.off); l != c.line || col != c.col {
			t.Errorf("LineColumn(%q, %d) = %d:%d, want %d:%d", c.text, c.off, l, col, c.line, c.col)
		}
	}

	in := "-- отчёт\nSELECT т.наименование FROM справочник т\nWHERE т.вид = 'Товар' OR т.вид IN (SELECT в.код FROM виды в)\n  OR т.вид = ANY (SELECT в.код FROM виды в)"
	r, err := Rewrite(context.Background(), in, Options{})
	if err != nil || len(r.Fired) != 2 {
		t.Fatalf("%+v, %v", r, err)
	}
	for i, want := range []struct {
		at        string
		line, col int
		detail    string
	}{
		{"IN (SELECT", 3, 32, "т.вид IN (subquery) -> т.вид = ANY (ARRAY(subquery))"},
		{"= ANY (SELECT", 4, 12, "т.вид = ANY (subquery) -> т.вид = ANY (ARRAY(subquery))"},
	} {
		f := r.Fired[i]
		if f.Location != strings.Index(in, want.at) || f.Line != want.line || f.Column != want.col || f.Detail != want.detail {
			t.Errorf("firing %d: %+v, want byte %d, %d:%d, %q", i, f, strings.Index(in, want.at), want.line, want.col, want.detail)
		}
	}

	// A veto about one arm names that arm's operator, where a firing
	// would be; Relocate moves both into a larger text (erplab rewrite
	// trims a file's leading blank lines).
	in = "SELECT 1 FROM t\nWHERE t.a = 'ж' OR t.a NOT IN (SELECT u.x FROM u)"
	r, err = Rewrite(context.Background(), in, Options{})
	if err != nil || len(r.Vetoes) != 1 {
		t.Fatalf("%+v, %v", r, err)
	}
	if v := r.Vetoes[0]; v.Location != strings.Index(in, "NOT IN") || v.Line != 2 || v.Column != 24 ||
		!strings.Contains(r.Explain(), "vetoed at line 2, column 24: an arm is NOT IN (subquery)") {
		t.Errorf("veto %+v (%s), want byte %d at 2:24", v, r.Explain(), strings.Index(in, "NOT IN"))
	}
	r.Relocate("\n\n  "+in, 4)
	if v := r.Vetoes[0]; v.Location != strings.Index(in, "NOT IN") || v.Line != 4 || v.Column != 24 {
		t.Errorf("relocated veto %+v, want byte %d at 4:24", v, strings.Index(in, "NOT IN"))
	}

	// An arm's operator on a later line than the OR (the user's report:
	// the veto named the first OR's line); a veto about the whole OR
	// names the OR.
	for _, c := range []struct {
		in, at    string
		line, col int
		reason    string
	}{
		{"SELECT * FROM t\nWHERE t.a = 1 OR t.a IN (SELECT u.x FROM u)\n  OR random() > 0.5", ">", 3, 15, "an arm uses operator >, not ="},
		{"SELECT 1 FROM t\nWHERE t.a = 1 OR\n t.a + 1 IN (SELECT u.x FROM u)", "IN (", 3, 10, "the left side of an arm is an expression, not a plain column"},
		{"SELECT 1 FROM t\nWHERE NOT (t.a = 1 OR\n t.a IN (SELECT u.x FROM u))", "OR", 2, 20, "the OR is under NOT"},
	} {
		r, err := Rewrite(context.Background(), c.in, Options{})
		if err != nil || len(r.Vetoes) != 1 {
			t.Fatalf("%q: %+v, %v", c.in, r, err)
		}
		if v := r.Vetoes[0]; v.Location != strings.Index(c.in, c.at) || v.Line != c.line || v.Column != c.col || !strings.HasPrefix(v.Reason, c.reason) {
			t.Errorf("%q: veto %+v, want byte %d at %d:%d, %q", c.in, v, strings.Index(c.in, c.at), c.line, c.col, c.reason)
		}
	}
}
