package rewrite

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Querier is what PGCatalog needs from a connection or pool
// (*pgx.Conn and *pgxpool.Pool both satisfy it).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// PGCatalog is a Catalog over a live database, caching every answer for
// its lifetime (a new index or a dropped function is seen by a new
// PGCatalog). It is safe for concurrent use. Relation names resolve with
// the querier's search_path (to_regclass), so a temporary table of another
// session is "not visible".
type PGCatalog struct {
	q     Querier
	mu    sync.Mutex
	cols  map[[3]string]ColumnInfo
	funcs map[string][2]bool
}

// NewPGCatalog returns a caching catalog reading through q.
func NewPGCatalog(q Querier) *PGCatalog {
	return &PGCatalog{q: q, cols: map[[3]string]ColumnInfo{}, funcs: map[string][2]bool{}}
}

// Column implements Catalog from pg_class, pg_attribute, pg_type and
// pg_index (a valid index whose indkey[0] is the column).
func (c *PGCatalog) Column(ctx context.Context, schema, rel, col string) (ColumnInfo, error) {
	key := [3]string{schema, rel, col}
	c.mu.Lock()
	ci, ok := c.cols[key]
	c.mu.Unlock()
	if ok {
		return ci, nil
	}
	id := pgx.Identifier{rel}
	if schema != "" {
		id = pgx.Identifier{schema, rel}
	}
	const q = `
SELECT r.oid IS NOT NULL,
       a.attnum IS NOT NULL,
       coalesce(t.typcategory = 'A', false),
       coalesce(EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = r.oid AND i.indisvalid AND i.indkey[0] = a.attnum), false)
FROM (SELECT to_regclass($1) AS oid) r
LEFT JOIN pg_attribute a ON a.attrelid = r.oid AND a.attname = $2 AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_type t ON t.oid = a.atttypid`
	if err := c.q.QueryRow(ctx, q, id.Sanitize(), col).Scan(&ci.RelationKnown, &ci.Exists, &ci.IsArray, &ci.LeadingIndex); err != nil {
		return ci, fmt.Errorf("rewrite catalog: column %s.%s: %w", id.Sanitize(), col, err)
	}
	c.mu.Lock()
	c.cols[key] = ci
	c.mu.Unlock()
	return ci, nil
}

// Volatile implements Catalog from pg_proc.provolatile.
func (c *PGCatalog) Volatile(ctx context.Context, name string) (volatile, known bool, err error) {
	c.mu.Lock()
	v, ok := c.funcs[name]
	c.mu.Unlock()
	if ok {
		return v[0], v[1], nil
	}
	var n int
	if err := c.q.QueryRow(ctx, `SELECT coalesce(bool_or(provolatile = 'v'), false), count(*) FROM pg_proc WHERE proname = $1`, name).Scan(&volatile, &n); err != nil {
		return false, false, fmt.Errorf("rewrite catalog: function %s: %w", name, err)
	}
	known = n > 0
	c.mu.Lock()
	c.funcs[name] = [2]bool{volatile, known}
	c.mu.Unlock()
	return volatile, known, nil
}
