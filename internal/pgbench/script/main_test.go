package script

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/pgtest"
	"github.com/jackc/pgx/v5/pgconn"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func connect(t testing.TB, dsn string) *pgconn.PgConn {
	t.Helper()
	conn, err := pgconn.Connect(testCtx(t), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// query runs SQL on conn, failing the test on error, and returns the rows
// of the last result as text.
func query(t testing.TB, conn *pgconn.PgConn, sql string) [][]string {
	t.Helper()
	res, err := conn.Exec(testCtx(t), sql).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	var rows [][]string
	if len(res) > 0 {
		for _, r := range res[len(res)-1].Rows {
			row := make([]string, len(r))
			for i, v := range r {
				row[i] = string(v)
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// testClient parses src and makes a client for it with debug() output in
// the returned buffer.
func testClient(t testing.TB, src string, opt Options) (*Client, *bytes.Buffer) {
	t.Helper()
	s, err := Parse("t.sql", src)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var dbg bytes.Buffer
	if opt.Debug == nil {
		opt.Debug = &dbg
	}
	c, err := NewClient([]*Script{s}, opt)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c, &dbg
}

var allModes = []Mode{Simple, Extended, Prepared}
