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
		{"text column, parameters", "SELECT id FROM ta WHERE s = $1 OR s IN (SELECT 'v' || tb2.v FROM tb2 WHERE tb2.v > $2)", true, ""},
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
		other, err := pgx.Connect(ctx, conn.Config().ConnString())
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close(ctx)
		if _, err := other.Exec(ctx, "CREATE TEMP TABLE tb2 (v int[])"); err != nil {
			t.Fatal(err)
		}
		// Dropped before the next case (a closed session's temporary
		// tables go away only once its backend has exited).
		defer func() { _, _ = other.Exec(ctx, "DROP TABLE pg_temp.tb2") }()
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
		want := "SELECT 1; SELECT id FROM ta WHERE id IN (SELECT tags FROM tb2) OR id = 3; SELECT id FROM ta WHERE id = 2 OR id = ANY (ARRAY (SELECT tb2.v FROM tb2))"
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
