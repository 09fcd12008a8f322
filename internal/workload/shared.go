package workload

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// What several workloads, remedies and services share, so that none of
// them imports another plugin: the table list of the --force guard and the
// temp-table styles.

// MarkerTable is the ERP data set's marker table (erp's TableMeta): rows
// of key and value saying what `erplab init --workload erp` created, among
// them "workload" (MarkerWorkload), "schema" and "tables" (a comma list).
const MarkerTable = "_erplab_meta"

// MarkerWorkload is the marker's "workload" value; a table of that name
// holding another is no ERP marker.
const MarkerWorkload = "erp"

// ForeignTables lists the objects of the database that erplab did not
// create (ForeignObjects: every relation kind, type and routine outside
// the system schemas, extension members such as pg_stat_statements'
// views, and schemas named erplab_*), less the tables listed in the ERP
// marker (MarkerTable) and the marker itself. Tables are "schema.name",
// other objects "schema.name (kind)". Every workload's guard starts from
// it (erp's set-up, pgbench's tables).
func ForeignTables(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	ours, err := markerTables(ctx, pool)
	if err != nil {
		return nil, err
	}
	out, err := ForeignObjects(ctx, pool, ours)
	if err != nil {
		return nil, fmt.Errorf("erp: %w", err)
	}
	return out, nil
}

// markerTables reads the ERP marker of the pool's database: its tables and
// itself as "schema.name", none when there is no marker or it is not an
// ERP marker.
func markerTables(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	kv, ok, err := MarkerRows(ctx, pool)
	if err != nil || !ok {
		return nil, err
	}
	var wl, schema string
	var tables []string
	for _, e := range kv {
		switch e[0] {
		case "workload":
			wl = e[1]
		case "schema":
			schema = e[1]
		case "tables":
			if e[1] != "" {
				tables = strings.Split(e[1], ",")
			}
		}
	}
	if wl != MarkerWorkload {
		return nil, nil
	}
	var ours []string
	for _, t := range append(tables, MarkerTable) {
		ours = append(ours, schema+"."+t)
	}
	return ours, nil
}

// MarkerRows returns the key and value rows of the pool's database's
// MarkerTable (erp's Installed reads them); ok is false when there is no
// such table.
func MarkerRows(ctx context.Context, pool *pgxpool.Pool) (kv [][2]string, ok bool, err error) {
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", MarkerTable).Scan(&exists); err != nil {
		return nil, false, fmt.Errorf("erp: look for %s: %w", MarkerTable, err)
	}
	if !exists {
		return nil, false, nil
	}
	rows, err := pool.Query(ctx, "SELECT key, value FROM "+MarkerTable)
	if err != nil {
		return nil, false, fmt.Errorf("erp: read %s: %w", MarkerTable, err)
	}
	kv, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var e [2]string
		err := r.Scan(&e[0], &e[1])
		return e, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("erp: read %s: %w", MarkerTable, err)
	}
	return kv, true, nil
}

// Temp-table styles: the erp workload's --temp-style (see erp's
// queries/temp_tables.sql), which the remedy temp-style sets per variant.
const (
	// TempStyle1C creates, indexes, fills, analyzes and drops a temporary
	// table on every use, as 1C:Enterprise does.
	TempStyle1C = "1c"
	// TempStyleLsFusion keeps temporary tables t_N per connection, fills
	// and analyzes them (statistics target 10) and returns them with
	// TRUNCATE, dropping one whose TRUNCATE fails, as lsFusion does.
	TempStyleLsFusion = "lsfusion"
)
