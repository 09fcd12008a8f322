package runenv

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// CatalogTables returns the system catalogs that temp-table churn grows:
// every CREATE TEMP TABLE inserts rows into pg_class, pg_type,
// pg_attribute and pg_depend (and pg_index per index); DROP deletes them,
// leaving dead tuples until vacuum (src/backend/catalog/heap.c,
// heap_create_with_catalog).
func CatalogTables() []string {
	return []string{"pg_class", "pg_attribute", "pg_depend", "pg_type", "pg_index"}
}

// CatalogSizes returns pg_total_relation_size (heap, indexes, TOAST;
// bytes) of each catalog in CatalogTables, in one query.
func CatalogSizes(ctx context.Context, conn *pgx.Conn) (map[string]int64, error) {
	rows, err := conn.Query(ctx, `SELECT c.relname, pg_total_relation_size(c.oid)
FROM pg_class c WHERE c.relnamespace = 'pg_catalog'::regnamespace AND c.relname = ANY($1)`, CatalogTables())
	if err != nil {
		return nil, fmt.Errorf("catalog sizes: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct {
		name string
		size int64
	}, error) {
		var v struct {
			name string
			size int64
		}
		err := r.Scan(&v.name, &v.size)
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog sizes: %w", err)
	}
	m := make(map[string]int64, len(out))
	for _, v := range out {
		m[v.name] = v.size
	}
	return m, nil
}
