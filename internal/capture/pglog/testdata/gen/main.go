// Command gen is the hand session of make.sh: statements the pgbench
// runs do not produce (multi-line text, quotes, errors, NULL parameters,
// named and unnamed extended-protocol statements, COPY FROM STDIN), sent
// to the server whose log make.sh records. Usage: go run ./gen DSN
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen DSN")
		os.Exit(2)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer conn.Close(ctx)
	for _, s := range steps {
		err := s.run(ctx, conn)
		if (err != nil) != s.fails {
			fmt.Fprintf(os.Stderr, "%s: error %v, want failure %v\n", s.name, err, s.fails)
			os.Exit(1)
		}
	}
}

type step struct {
	name  string
	fails bool
	run   func(context.Context, *pgx.Conn) error
}

// simple sends sql with the simple protocol.
func simple(sql string) func(context.Context, *pgx.Conn) error {
	return func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol)
		return err
	}
}

// unnamed sends sql with the extended protocol's unnamed statement.
func unnamed(sql string, args ...any) func(context.Context, *pgx.Conn) error {
	return func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
		return err
	}
}

// named executes the prepared statement name.
func named(name string, args ...any) func(context.Context, *pgx.Conn) error {
	return func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, name, args...)
		return err
	}
}

var steps = []step{
	{"create", false, simple("CREATE TABLE hand (id int PRIMARY KEY, note text)")},
	{"multi-line", false, simple("SELECT 'it''s a quote' AS q,\n       2 AS \"two\"\n  -- a comment\n")},
	{"tx", false, simple("BEGIN")},
	{"insert", false, simple("INSERT INTO hand(id, note) VALUES (1, 'one')")},
	{"commit", false, simple("COMMIT")},
	{"division", true, simple("SELECT 1/0")},
	{"syntax", true, simple("SELEC 1")},
	{"tx2", false, simple("BEGIN")},
	{"dup", true, simple("INSERT INTO hand(id, note) VALUES (1, 'again')")},
	{"aborted", true, simple("SELECT 1")},
	{"rollback", false, simple("ROLLBACK")},
	{"one query", false, simple("BEGIN; UPDATE hand SET note = 'x' WHERE id = 1; COMMIT")},
	{"unnamed", false, unnamed("INSERT INTO hand(id, note) VALUES ($1, $2)", 2, nil)},
	{"unnamed quote", false, unnamed("INSERT INTO hand(id, note) VALUES ($1, $2)", 3, "O'Reilly")},
	{"unnamed lines", false, unnamed("INSERT INTO hand(id, note)\nVALUES ($1, $2)", 4, "two\nlines")},
	{"prepare", false, func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Prepare(ctx, "ins_note", "INSERT INTO hand(id, note) VALUES ($1, $2)")
		return err
	}},
	{"named null", false, named("ins_note", 10, nil)},
	{"named quote", false, named("ins_note", 11, "x'y")},
	{"named dup", true, named("ins_note", 10, "dup")},
	{"copy", false, func(ctx context.Context, c *pgx.Conn) error {
		rows := [][]any{{20, "copied"}, {21, nil}}
		_, err := c.CopyFrom(ctx, pgx.Identifier{"hand"}, []string{"id", "note"}, pgx.CopyFromRows(rows))
		return err
	}},
	{"count", false, simple("SELECT count(*) FROM hand")},
}
