// Package smoke is erplab's built-in small workload: a tiny schema of its
// own (schema erplab_smoke) and five key operations that touch the shapes an
// ERP load has (point lookup, list page, posting in a transaction,
// temp-table churn, aggregate report), so the whole path of `erplab run`
// works end to end in seconds on any PostgreSQL.
package smoke

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/workload"
)

// Schema is the PostgreSQL schema that holds every smoke table.
const Schema = "erplab_smoke"

// Items is the number of rows in the items table at scale 1.
const Items = 10000

// Operation indexes, in the order of Operations.
const (
	OpLookup = iota
	OpList
	OpPost
	OpTempChurn
	OpReport
)

// SQL of the schema and of each operation, kept together for reading.
const (
	sqlSchema = `
CREATE SCHEMA IF NOT EXISTS erplab_smoke;
CREATE TABLE IF NOT EXISTS erplab_smoke.items (
  id int PRIMARY KEY, name text NOT NULL, price numeric(15,2) NOT NULL, qty numeric(15,3) NOT NULL);
CREATE TABLE IF NOT EXISTS erplab_smoke.orders (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, item_id int NOT NULL REFERENCES erplab_smoke.items,
  qty numeric(15,3) NOT NULL, amount numeric(15,2) NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX IF NOT EXISTS orders_item_created ON erplab_smoke.orders (item_id, created_at);
CREATE TABLE IF NOT EXISTS erplab_smoke.meta (key text PRIMARY KEY, value text NOT NULL);`

	sqlFill = `
INSERT INTO erplab_smoke.items (id, name, price, qty)
SELECT g, 'item ' || g, (g % 997) + 0.99, 1000
FROM generate_series(1, $1::int) g`

	sqlLookup = `SELECT id, name, price, qty FROM erplab_smoke.items WHERE id = $1`

	sqlList = `
SELECT o.id, o.created_at, i.name, o.qty, o.amount
FROM erplab_smoke.orders o JOIN erplab_smoke.items i ON i.id = o.item_id
WHERE o.item_id = $1
ORDER BY o.created_at DESC
LIMIT 20`

	sqlPostItem  = `UPDATE erplab_smoke.items SET qty = qty - $2 WHERE id = $1 RETURNING price`
	sqlPostOrder = `INSERT INTO erplab_smoke.orders (item_id, qty, amount) VALUES ($1, $2, $3)`

	sqlTempCreate = `CREATE TEMP TABLE smoke_tt (item_id int, qty numeric)`
	sqlTempIndex  = `CREATE INDEX ON smoke_tt (item_id)`
	sqlTempFill   = `INSERT INTO smoke_tt SELECT id, qty FROM erplab_smoke.items WHERE id BETWEEN $1 AND $1 + 200`
	sqlTempAn     = `ANALYZE smoke_tt`
	sqlTempRead   = `SELECT count(*), sum(t.qty) FROM smoke_tt t JOIN erplab_smoke.items i ON i.id = t.item_id`
	sqlTempDrop   = `DROP TABLE IF EXISTS smoke_tt`

	sqlReport = `
SELECT i.id % 10 AS grp, count(*), sum(o.amount)
FROM erplab_smoke.orders o JOIN erplab_smoke.items i ON i.id = o.item_id
WHERE o.created_at > now() - interval '1 hour'
GROUP BY 1 ORDER BY 1`
)

// Workload is the smoke workload. The zero value is ready to use.
type Workload struct{}

// New returns the smoke workload.
func New() *Workload { return &Workload{} }

// Name implements workload.Workload.
func (*Workload) Name() string { return "smoke" }

// Operations implements workload.Workload.
func (*Workload) Operations() []workload.Operation {
	return []workload.Operation{
		{Name: "item_lookup", Target: 50 * time.Millisecond, Priority: 1, Description: "read one item by primary key"},
		{Name: "order_list", Target: 100 * time.Millisecond, Priority: 2, Description: "page of an item's last 20 orders with a join"},
		{Name: "post_order", Target: 200 * time.Millisecond, Priority: 1, Description: "transaction: decrement stock, insert an order"},
		{Name: "temp_churn", Target: 300 * time.Millisecond, Priority: 3, Description: "create, index, fill, analyze, read and drop a temp table"},
		{Name: "hour_report", Target: 500 * time.Millisecond, Priority: 4, Description: "aggregate of the last hour's orders"},
	}
}

// Roles implements workload.Workload: clerks post and look up, managers
// read lists and reports.
func (*Workload) Roles() []workload.Role {
	return []workload.Role{
		{Name: "clerk", Share: 3, Mix: map[string]float64{"item_lookup": 5, "post_order": 3, "temp_churn": 1}},
		{Name: "manager", Share: 1, Mix: map[string]float64{"order_list": 4, "hour_report": 1, "temp_churn": 1}},
	}
}

// Setup implements workload.Workload: it creates schema erplab_smoke and
// fills Items*scale items (at least 100), or, when they are there, resets
// the orders and stock so that every run starts from the same state. A database holding objects
// erplab did not create (workload.ForeignObjects: tables, views, foreign tables, sequences,
// types, functions...) is refused unless opts.Force.
func (w *Workload) Setup(ctx context.Context, pool *pgxpool.Pool, opts workload.SetupOptions) error {
	if !opts.Force {
		foreign, err := workload.ForeignObjects(ctx, pool, nil)
		if err != nil {
			return fmt.Errorf("smoke setup: %w", err)
		}
		if len(foreign) > 0 {
			return workload.ForeignError("smoke setup", foreign)
		}
	}
	items := int(float64(Items) * opts.Scale)
	if items < 100 {
		items = 100
	}
	if _, err := pool.Exec(ctx, sqlSchema); err != nil {
		return fmt.Errorf("smoke setup: create schema: %w", err)
	}
	var have string
	err := pool.QueryRow(ctx, `SELECT value FROM erplab_smoke.meta WHERE key = 'items'`).Scan(&have)
	if err == nil && have == fmt.Sprint(items) {
		// Every run starts from the same state: no orders, full stock.
		if _, err := pool.Exec(ctx, `TRUNCATE erplab_smoke.orders; UPDATE erplab_smoke.items SET qty = 1000 WHERE qty <> 1000`); err != nil {
			return fmt.Errorf("smoke setup: reset: %w", err)
		}
		return nil
	}
	if err != nil && err != pgx.ErrNoRows {
		return fmt.Errorf("smoke setup: read meta: %w", err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("smoke setup: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit this is a no-op
	for _, q := range []string{
		`TRUNCATE erplab_smoke.orders, erplab_smoke.items`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return fmt.Errorf("smoke setup: %w", err)
		}
	}
	if _, err := tx.Exec(ctx, sqlFill, items); err != nil {
		return fmt.Errorf("smoke setup: fill items: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO erplab_smoke.meta VALUES ('items', $1) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, fmt.Sprint(items)); err != nil {
		return fmt.Errorf("smoke setup: write meta: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("smoke setup: %w", err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE erplab_smoke.items`); err != nil {
		return fmt.Errorf("smoke setup: analyze: %w", err)
	}
	if opts.Progress != nil {
		opts.Progress("smoke: %d items in schema %s", items, Schema)
	}
	return nil
}

type vuState struct{ items int }

func (w *Workload) items(ctx context.Context, conn *pgx.Conn, vu *workload.VU) (int, error) {
	if st, ok := vu.State.(*vuState); ok {
		return st.items, nil
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM erplab_smoke.items`).Scan(&n); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, fmt.Errorf("smoke: no items; run set-up first")
	}
	vu.State = &vuState{items: n}
	return n, nil
}

// Execute implements workload.Workload.
func (w *Workload) Execute(ctx context.Context, conn *pgx.Conn, vu *workload.VU, op int) error {
	n, err := w.items(ctx, conn, vu)
	if err != nil {
		return err
	}
	item := 1 + vu.Rand.IntN(n)
	switch op {
	case OpLookup:
		rows, err := conn.Query(ctx, sqlLookup, item)
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	case OpList:
		rows, err := conn.Query(ctx, sqlList, item)
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	case OpPost:
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			qty := 1 + vu.Rand.IntN(5)
			var price float64
			if err := tx.QueryRow(ctx, sqlPostItem, item, qty).Scan(&price); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, sqlPostOrder, item, qty, price*float64(qty))
			return err
		})
	case OpTempChurn:
		// Drop even when a step fails, so the connection stays usable.
		defer conn.Exec(context.WithoutCancel(ctx), sqlTempDrop) //nolint:errcheck // best effort
		for _, q := range []string{sqlTempCreate, sqlTempIndex} {
			if _, err := conn.Exec(ctx, q); err != nil {
				return err
			}
		}
		if _, err := conn.Exec(ctx, sqlTempFill, item); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, sqlTempAn); err != nil {
			return err
		}
		var cnt int64
		var sum *float64
		return conn.QueryRow(ctx, sqlTempRead).Scan(&cnt, &sum)
	case OpReport:
		rows, err := conn.Query(ctx, sqlReport)
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	}
	return fmt.Errorf("smoke: no operation %d", op)
}
