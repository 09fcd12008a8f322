package rewrite

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// typesDB creates the schema of the type-aware tests and returns a
// connection to it.
func typesDB(t *testing.T) (*pgx.Conn, string) {
	t.Helper()
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, `
CREATE TABLE ta (id int, other int, s text, n numeric);
CREATE INDEX ON ta (id); CREATE INDEX ON ta (other); CREATE INDEX ON ta (s);
INSERT INTO ta SELECT g, g % 5, 'v' || g, g FROM generate_series(1, 50) g;
CREATE TABLE tb2 (tags int[], v int, c ta); CREATE INDEX ON tb2 (c);
INSERT INTO tb2 VALUES ('{1,2}', 4, NULL), ('{7,8}', NULL, NULL);
CREATE DOMAIN dint AS int; CREATE DOMAIN dd AS dint; CREATE DOMAIN darr AS int[];
CREATE TABLE td (d dd, a darr); CREATE INDEX ON td (d); CREATE INDEX ON td (a); INSERT INTO td VALUES (5, '{5}'), (NULL, NULL);
CREATE TABLE publication (mtid int PRIMARY KEY, last_modifier int, note text);
CREATE INDEX ON publication (last_modifier);
INSERT INTO publication SELECT g, g % 100, 'p' FROM generate_series(1, 2000) g;
ANALYZE;`); err != nil {
		t.Fatal(err)
	}
	return conn, dsn
}

func TestTypeAwareVetoes(t *testing.T) {
	ctx := context.Background()
	conn, _ := typesDB(t)
	cat := NewPGCatalogConn(conn)
	cases := []struct {
		name, in string
		changed  bool
		reason   string
	}{
		// The wrong result: int IN (SELECT int[]) is an error
		// direct; ARRAY(SELECT int[]) would flatten into a 2-D int array.
		{"subquery returns an array", "SELECT id FROM ta WHERE id IN (SELECT tags FROM tb2) OR id = 3", false, "integer[], an array type"},
		{"composite column", "SELECT 1 FROM tb2 WHERE tb2.c IN (SELECT x.c FROM tb2 x) OR tb2.c IN (SELECT y.c FROM tb2 y)", false, "column tb2.c is of type ta, a composite type"},
		{"subquery over a domain over an array", "SELECT id FROM ta WHERE id = 3 OR id IN (SELECT td.a FROM td)", false, "integer[], an array type"},
		{"subquery over a domain over a domain over int", "SELECT id FROM ta WHERE id = 3 OR id IN (SELECT td.d FROM td)", true, ""},
		{"domain column (a domain over a domain over int)", "SELECT 1 FROM td WHERE td.d = 5 OR td.d IN (SELECT tb2.v FROM tb2)", true, ""},
		{"domain column over an array", "SELECT 1 FROM td WHERE td.a = '{5}' OR td.a IN (SELECT td.a FROM td)", false, "td.a is an array column"},
		{"numeric column against an int subquery", "SELECT id FROM ta WHERE n = 3 OR n IN (SELECT tb2.v FROM tb2)", false, "no index"},
		{"text column, parameters", "SELECT id FROM ta WHERE s = $1 OR s IN (SELECT tb2.v::text FROM tb2 WHERE tb2.v > $2)", false, "converts a value to text through its text form (an I/O conversion"},
		{"text column, parameters, leakproof", "SELECT id FROM ta WHERE s = $1 OR s IN (SELECT ta2.s FROM ta ta2 WHERE ta2.id > $2 AND ta2.s <> $1)", true, ""},
		// (RowDescription reports a domain column as its base type.)
		// 42704: pg_node_tree has no array type. Only the server's
		// verdict on the rewritten text catches it.
		{"no array type: validation fails", "SELECT id FROM ta WHERE s = 'x' OR s IN (SELECT adbin FROM pg_attrdef)", false, "validation failed: the server rejects the rewritten statement (42704"},
		// The arms of dba.stackexchange question 114337: two columns, each
		// leading an index.
		{"arms on different indexed columns", "SELECT mtid FROM publication WHERE mtid IN (SELECT 976271) OR last_modifier = 21321", true, ""},
		{"arms on different columns, one without an index", "SELECT mtid FROM publication WHERE mtid IN (SELECT 976271) OR note = 'x'", false, "no index of publication has note"},
		{"statement the server rejects as written", "SELECT id FROM ta WHERE id = 1 OR id IN (SELECT tb2.nosuch FROM tb2)", false, "(42703"},
		{"operator missing for the statement as written", "SELECT id FROM ta WHERE s = 'x' OR s IN (SELECT tb2.v FROM tb2)", false, "does not prepare the statement as written (42883"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Rewrite(ctx, c.in, Options{Catalog: cat, Types: cat})
			if err != nil {
				t.Fatal(err)
			}
			if r.Changed != c.changed || r.Validated != c.changed || (c.reason != "" && !strings.Contains(r.Explain(), c.reason)) {
				t.Fatalf("changed=%v validated=%v %q: %s", r.Changed, r.Validated, r.SQL, r.Explain())
			}
			if !r.Changed {
				if r.SQL != c.in {
					t.Fatalf("unchanged text differs: %q", r.SQL)
				}
				return
			}
			// Both give the same rows (or the same error).
			if !strings.Contains(c.in, "$1") {
				a, ea := connRows(ctx, conn, c.in)
				b, eb := connRows(ctx, conn, r.SQL)
				if a != b || ea != eb {
					t.Fatalf("%s -> %q %q\n%s -> %q %q", c.in, a, ea, r.SQL, b, eb)
				}
			}
		})
	}
	t.Run("types unknown", func(t *testing.T) {
		in := "SELECT id FROM ta WHERE id IN (SELECT tb2.v FROM tb2) OR id = 3"
		r, err := Rewrite(ctx, in, Options{RequireTypes: true})
		if err != nil || r.Changed || !strings.Contains(r.Explain(), "types unknown: not rewritten") {
			t.Fatalf("%+v %v", r, err)
		}
		r, err = Rewrite(ctx, in, Options{Catalog: cat, Types: cat})
		if err != nil || !r.Changed || !r.Validated {
			t.Fatalf("with the server's types: %s, %v", r.Explain(), err)
		}
	})
	t.Run("a temporary relation of the name", func(t *testing.T) {
		in := "SELECT id FROM ta WHERE id = 1 OR id IN (SELECT tb2.v FROM tb2)"
		defer tempTableElsewhere(t, conn)()
		r, err := Rewrite(ctx, in, Options{Catalog: NewPGCatalogConn(conn), Types: NewPGCatalogConn(conn)})
		if err != nil || r.Changed || !strings.Contains(r.Explain(), "a temporary relation named tb2") {
			t.Fatalf("%s, %v", r.Explain(), err)
		}
	})
	t.Run("multi-statement text: each statement on its own", func(t *testing.T) {
		in := "SELECT 1; SELECT id FROM ta WHERE id IN (SELECT tags FROM tb2) OR id = 3; SELECT id FROM ta WHERE id = 2 OR id IN (SELECT tb2.v FROM tb2)"
		r, err := Rewrite(ctx, in, Options{Catalog: cat, Types: cat})
		if err != nil || !r.Changed || len(r.Fired) != 1 || len(r.Vetoes) != 1 {
			t.Fatalf("%s, %v", r.Explain(), err)
		}
		want := "SELECT 1; SELECT id FROM ta WHERE id IN (SELECT tags FROM tb2) OR id = 3; SELECT id FROM ta WHERE id = 2 OR CASE WHEN false THEN id IN (SELECT tb2.v FROM tb2) ELSE id = ANY (ARRAY (SELECT tb2.v FROM tb2)) END"
		if r.SQL != want {
			t.Fatalf("got %q", r.SQL)
		}
	})
}

// connRows runs q in the simple protocol and returns its rows in order of
// their text, and the SQLSTATE of its error.
func connRows(ctx context.Context, conn *pgx.Conn, q string) (string, string) {
	res, err := conn.PgConn().Exec(ctx, q).ReadAll()
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return "", pe.Code
		}
		return "", err.Error()
	}
	var rows []string
	for _, r := range res {
		for _, row := range r.Rows {
			var b strings.Builder
			for _, v := range row {
				b.Write(v)
				b.WriteByte('|')
			}
			rows = append(rows, b.String())
		}
	}
	slices.Sort(rows)
	return strings.Join(rows, "\n"), ""
}

// Batch answers what the single calls answer, in one pipeline: a
// rejection answers only its own question, and the temporary-relation
// check sees another session's temporary table.
func TestBatchMatchesSingleCalls(t *testing.T) {
	ctx := context.Background()
	conn, _ := typesDB(t)
	defer tempTableElsewhere(t, conn)()
	var dd uint32
	if err := conn.QueryRow(ctx, "SELECT 'dd'::regtype::oid").Scan(&dd); err != nil {
		t.Fatal(err)
	}
	reqs := []BatchDescribe{
		{SQL: "SELECT id, s FROM ta WHERE id = $1 OR s = $2"},
		{SQL: "SELECT nosuch FROM ta"}, // 42703: answers only itself
		{SQL: "SELECT id FROM ta WHERE n = $1", ParamOIDs: []uint32{20}},
		{SQL: "SELECT tags FROM tb2"},
	}
	cols := []BatchColumn{{Rel: "ta", Col: "id"}, {Rel: "ta", Col: "n"}, {Rel: "tb2", Col: "tags"}, {Rel: "td", Col: "d"},
		{Rel: "ta", Col: "nosuch"}, {Schema: "nosuch", Rel: "ta", Col: "id"}, {Schema: "public", Rel: "tb2", Col: "c"}}
	funcs := []BatchFunction{{Name: "abs"}, {Name: "random"}, {Name: "nosuch"}}
	b := Batch{Describes: slices.Clone(reqs), TempNames: []string{"ta", "tb2"}, Types: []uint32{23, 1007, dd, 23, 4294967000},
		Columns: slices.Clone(cols), Functions: slices.Clone(funcs)}
	bcat := NewPGCatalogConn(conn)
	if err := bcat.Batch(ctx, &b); err != nil {
		t.Fatal(err)
	}
	single := NewPGCatalogConn(conn)
	for i, r := range reqs {
		want, werr := single.Describe(ctx, r.SQL, r.ParamOIDs)
		got := b.Describes[i]
		var wpe, gpe *pgconn.PgError
		if errors.As(werr, &wpe) != errors.As(got.Err, &gpe) || (wpe != nil && wpe.Code != gpe.Code) {
			t.Fatalf("%s: batch error %v, single %v", r.SQL, got.Err, werr)
		}
		if werr == nil && (!slices.Equal(got.Desc.Params, want.Params) || !slices.Equal(got.Desc.Columns, want.Columns)) {
			t.Fatalf("%s: batch %s, single %s", r.SQL, got.Desc, want)
		}
	}
	if b.Describes[1].Err == nil || b.Describes[2].Err != nil || len(b.Describes[3].Desc.Columns) != 1 {
		t.Fatalf("want only the second rejected: %+v", b.Describes)
	}
	if found, err := single.TempRelations(ctx, b.TempNames); err != nil || found != b.TempFound || found != "tb2" {
		t.Fatalf("temporary relations: batch %q, single %q, %v", b.TempFound, found, err)
	}
	for _, o := range []uint32{23, 1007, dd} {
		bcat.tc.mu.Lock()
		got, ok := bcat.tc.m[o]
		bcat.tc.mu.Unlock()
		want, err := single.Type(ctx, o)
		if err != nil || !ok || got != want {
			t.Fatalf("type %d: batch %+v (%v), single %+v, %v", o, got, ok, want, err)
		}
	}
	if _, ok := bcat.tc.m[4294967000]; ok {
		t.Fatal("an unknown type OID was cached")
	}
	for i, q := range cols {
		want, err := single.Column(ctx, q.Schema, q.Rel, q.Col)
		if got := b.Columns[i]; err != nil || !got.Answered || got.Info != want {
			t.Fatalf("column %+v: batch %+v, single %+v, %v", q, got, want, err)
		}
		if !want.Exists {
			continue
		}
		// The column's type was learnt with it.
		bcat.tc.mu.Lock()
		got, ok := bcat.tc.m[want.TypeOID]
		bcat.tc.mu.Unlock()
		if wt, err := single.Type(ctx, want.TypeOID); err != nil || !ok || got != wt {
			t.Fatalf("type of column %+v: batch %+v (%v), single %+v, %v", q, got, ok, wt, err)
		}
	}
	for i, q := range funcs {
		v, k, err := single.Volatile(ctx, q.Name)
		if got := b.Functions[i]; err != nil || !got.Answered || got.Volatile != v || got.Known != k {
			t.Fatalf("function %s: batch %+v, single %v %v, %v", q.Name, got, v, k, err)
		}
	}
	if b.Functions[1].Volatile != true || b.Functions[2].Known || b.Columns[4].Info.Exists || b.Columns[5].Info.RelationKnown {
		t.Fatalf("answers: %+v %+v", b.Functions, b.Columns)
	}
	// The built-in types, learnt in one query, are those Type answers.
	lcat := NewPGCatalogConn(conn)
	if n, err := lcat.LearnBuiltins(ctx); err != nil || n < 100 {
		t.Fatalf("built-in types: %d, %v", n, err)
	}
	for _, o := range []uint32{23, 25, 1007, 1700, 2249, 142, 3904} { // int4, text, int4[], numeric, record, xml, int4range
		want, err := single.Type(ctx, o)
		if got := lcat.tc.m[o]; err != nil || got != want {
			t.Fatalf("built-in type %d: learnt %+v, single %+v, %v", o, got, want, err)
		}
	}
	// The connection is usable afterwards.
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM ta").Scan(&n); err != nil || n != 50 {
		t.Fatalf("after the batch: %d, %v", n, err)
	}
}

// tempTableElsewhere creates a temporary table tb2 in another session of
// conn's database and returns the function that drops it and closes that
// session (a closed session's temporary tables go away only once its
// backend has exited, so the test drops it before the next case).
func tempTableElsewhere(t *testing.T, conn *pgx.Conn) func() {
	t.Helper()
	ctx := context.Background()
	other, err := pgx.Connect(ctx, conn.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, "CREATE TEMP TABLE tb2 (v int[])"); err != nil {
		other.Close(ctx)
		t.Fatal(err)
	}
	return func() {
		_, _ = other.Exec(ctx, "DROP TABLE pg_temp.tb2")
		other.Close(ctx)
	}
}

// countingQuerier counts the single queries a PGCatalog sends.
type countingQuerier struct {
	q Querier
	n *int
}

func (c countingQuerier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	*c.n++
	return c.q.QueryRow(ctx, sql, args...)
}

// countingCatalog counts a PGCatalog's round trips: single queries,
// Describes and Batches.
type countingCatalog struct {
	*PGCatalog
	trips int
}

func (c *countingCatalog) Describe(ctx context.Context, sql string, params []uint32) (Description, error) {
	c.trips++
	return c.PGCatalog.Describe(ctx, sql, params)
}

func (c *countingCatalog) Batch(ctx context.Context, b *Batch) error {
	c.trips++
	return c.PGCatalog.Batch(ctx, b)
}

// singleCalls is a Types without Batch: every question alone.
type singleCalls struct{ Types }

// A first decision (nothing cached but the built-in types, which the
// proxy's side connection learns when it opens) costs one round trip to
// the server, catalog questions included, whatever its outcome, and
// decides as the single calls do.
func TestDecisionIsOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	conn, _ := typesDB(t)
	for _, in := range []string{
		"SELECT id FROM ta WHERE id = 1 OR id IN (SELECT tb2.v FROM tb2)",                              // rewritten
		"SELECT id FROM ta WHERE id = 1 OR id IN (SELECT v FROM tb2)",                                  // unqualified column in the subquery
		"SELECT id FROM ta WHERE id = 1 OR id IN (SELECT abs(tb2.v) FROM tb2)",                         // a function
		"SELECT mtid FROM publication WHERE mtid IN (SELECT 976271) OR last_modifier = 21321",          // two columns
		"SELECT 1 FROM td WHERE td.d = 5 OR td.d IN (SELECT tb2.v FROM tb2)",                           // a domain column
		"SELECT id FROM ta WHERE n = 3 OR n IN (SELECT tb2.v FROM tb2)",                                // no index: vetoed
		"SELECT id FROM ta WHERE id IN (SELECT tags FROM tb2) OR id = 3",                               // array subquery: vetoed
		"SELECT 1 FROM tb2 WHERE tb2.c IN (SELECT x.c FROM tb2 x) OR tb2.c IN (SELECT y.c FROM tb2 y)", // composite: vetoed
		"SELECT id FROM ta WHERE s = 'x' OR s IN (SELECT adbin FROM pg_attrdef)",                       // validation fails
	} {
		// A fresh type cache per statement: nothing is known in advance.
		cat := &countingCatalog{PGCatalog: NewPGCatalogConn(conn)}
		if n, err := cat.LearnBuiltins(ctx); err != nil || n < 100 {
			t.Fatalf("built-in types: %d, %v", n, err)
		}
		cat.q = countingQuerier{conn, &cat.trips}
		got, err := Rewrite(ctx, in, Options{Catalog: cat, Types: cat})
		if err != nil {
			t.Fatal(err)
		}
		if cat.trips != 1 {
			t.Errorf("%s: %d round trips, want 1 (%s)", in, cat.trips, got.Explain())
		}
		single := NewPGCatalogConn(conn)
		want, err := Rewrite(ctx, in, Options{Catalog: single, Types: singleCalls{single}})
		if err != nil {
			t.Fatal(err)
		}
		if got.SQL != want.SQL || got.Explain() != want.Explain() || got.Validated != want.Validated || got.ValidationFailed != want.ValidationFailed {
			t.Errorf("%s:\nbatched %q %s\nsingle  %q %s", in, got.SQL, got.Explain(), want.SQL, want.Explain())
		}
	}
}

// TestOuterWithQueryTypes: with the server's types, a subquery reading a
// WITH query of the statement cannot be described alone (and a table of
// the WITH query's name must not be described instead).
func TestOuterWithQueryTypes(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, `CREATE TABLE t (a int, b int); CREATE INDEX t_a ON t (a); CREATE TABLE w (x int)`); err != nil {
		t.Fatal(err)
	}
	cat := NewPGCatalogConn(conn)
	for _, c := range []struct{ in, want string }{
		{"WITH w AS (SELECT ARRAY[1] AS x) SELECT t.b FROM t WHERE t.a = 5 OR t.a IN (SELECT w.x FROM w)", "reads WITH query w of the statement"},
		{"WITH v(x) AS (SELECT 1) SELECT t.b FROM t WHERE t.a = 5 OR t.a IN (SELECT v.x FROM v)", "reads WITH query v of the statement"},
	} {
		r, err := Rewrite(ctx, c.in, Options{Catalog: cat, Types: cat})
		if err != nil {
			t.Fatal(err)
		}
		if r.Changed || !strings.Contains(r.Explain(), c.want) {
			t.Errorf("%s: changed=%v, %s; want a veto: %s", c.in, r.Changed, r.Explain(), c.want)
		}
	}
	// A WITH query of the subquery's own is described with it.
	in := "SELECT t.b FROM t WHERE t.a = 5 OR t.a IN (WITH v(x) AS (SELECT 1) SELECT v.x FROM v)"
	if r, err := Rewrite(ctx, in, Options{Catalog: cat, Types: cat}); err != nil || !r.Changed {
		t.Errorf("%s: %+v, %v; want it rewritten", in, r, err)
	}
}
