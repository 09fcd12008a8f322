package tables

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/workload"
)

// Querier is what Installed, Vacuum, Drop and Size need: *pgx.Conn,
// *pgxpool.Pool, *pgxpool.Conn and pgx.Tx all satisfy it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Layout describes a pgbench data set found in a database.
type Layout struct {
	// Scale is count(*) of pgbench_branches, pgbench's :scale.
	Scale int
	// Partitions is the number of partitions of pgbench_accounts, 0 when
	// it is an ordinary table.
	Partitions int
	// PartitionMethod is "range", "hash", or "" when not partitioned.
	PartitionMethod string
}

// layoutSQL is pgbench's GetTableInfo catalog query: the first
// pgbench_accounts in search_path, its partition strategy (NULL when not
// partitioned) and number of partitions.
const layoutSQL = `select o.n, p.partstrat, pg_catalog.count(i.inhparent)
from pg_catalog.pg_class as c
join pg_catalog.pg_namespace as n on (n.oid = c.relnamespace)
cross join lateral (select pg_catalog.array_position(pg_catalog.current_schemas(true), n.nspname)) as o(n)
left join pg_catalog.pg_partitioned_table as p on (p.partrelid = c.oid)
left join pg_catalog.pg_inherits as i on (c.oid = i.inhparent)
where c.relname = 'pgbench_accounts' and o.n is not null
group by 1, 2
order by 1 asc
limit 1`

// InstalledLayout reads what pgbench reads before a run (pgbench.c
// GetTableInfo): the scale as count(*) of pgbench_branches, then the
// partitioning of the first pgbench_accounts in search_path. ok is false,
// with a nil error, when pgbench_branches does not exist (SQLSTATE 42P01;
// inside a transaction that error aborts it). A scale of 0 means the
// tables exist but are empty. It returns an error when pgbench_branches
// exists but pgbench_accounts does not, or the partition strategy is
// neither range nor hash.
func InstalledLayout(ctx context.Context, q Querier) (Layout, bool, error) {
	var l Layout
	var n int64
	if err := q.QueryRow(ctx, "select count(*) from pgbench_branches").Scan(&n); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42P01" {
			return l, false, nil
		}
		return l, false, fmt.Errorf("pgbench tables: count branches: %w", err)
	}
	l.Scale = int(n)
	var pos int
	var strat *string
	var parts int64
	err := q.QueryRow(ctx, layoutSQL).Scan(&pos, &strat, &parts)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, false, errors.New("pgbench tables: pgbench_branches exists but no pgbench_accounts in search_path (run 'erplab init --workload pgbench')")
	}
	if err != nil {
		return l, false, fmt.Errorf("pgbench tables: read partitioning of pgbench_accounts: %w", err)
	}
	if strat != nil {
		switch *strat {
		case "r":
			l.PartitionMethod = PartitionRange
		case "h":
			l.PartitionMethod = PartitionHash
		default:
			return l, false, fmt.Errorf("pgbench tables: unexpected partition method %q of pgbench_accounts", *strat)
		}
		l.Partitions = int(parts)
	}
	return l, true, nil
}

// Installed is InstalledLayout reduced to what sets pgbench's :scale and
// its "partitions" report line: scale (count(*) of pgbench_branches),
// number of partitions of pgbench_accounts (0: not partitioned) and
// whether the tables exist.
func Installed(ctx context.Context, q Querier) (scale int, partitions int, ok bool, err error) {
	l, ok, err := InstalledLayout(ctx, q)
	return l.Scale, l.Partitions, ok, err
}

// Vacuum does what pgbench does before a benchmark unless -n (pgbench.c
// main, "starting vacuum...end."): VACUUM pgbench_branches, VACUUM
// pgbench_tellers, TRUNCATE pgbench_history, and with accounts (pgbench
// -v) VACUUM ANALYZE pgbench_accounts. pgbench reports a failing statement
// and goes on; so does Vacuum, which runs every statement and returns the
// failures joined (nil if none). q must not be in a transaction block
// (VACUUM cannot run there).
func Vacuum(ctx context.Context, q Querier, accounts bool) error {
	stmts := []string{"vacuum pgbench_branches", "vacuum pgbench_tellers", "truncate pgbench_history"}
	if accounts {
		stmts = append(stmts, "vacuum analyze pgbench_accounts")
	}
	var errs []error
	for _, s := range stmts {
		if _, err := q.Exec(ctx, s); err != nil {
			errs = append(errs, fmt.Errorf("pgbench vacuum: %s: %w", s, err))
			if ctx.Err() != nil {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// Drop removes the four pgbench tables (and the partitions of
// pgbench_accounts) if they exist, as pgbench -i's first step does.
func Drop(ctx context.Context, q Querier) error {
	if _, err := q.Exec(ctx, dropSQL); err != nil {
		return fmt.Errorf("pgbench tables: drop: %w", err)
	}
	return nil
}

// Size is the total size in bytes of the pgbench tables found through
// search_path, partitions, indexes and TOAST included
// (pg_total_relation_size); 0 when there are none.
func Size(ctx context.Context, q Querier) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, `
select coalesce(sum(pg_catalog.pg_total_relation_size(r)), 0)::bigint
from (select pg_catalog.to_regclass(t) as r
      from unnest(array['pgbench_accounts', 'pgbench_branches', 'pgbench_history', 'pgbench_tellers']) as t
      union all
      select i.inhrelid::regclass from pg_catalog.pg_inherits i
      where i.inhparent = pg_catalog.to_regclass('pgbench_accounts')) as s
where r is not null`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("pgbench tables: size: %w", err)
	}
	return n, nil
}

// Marker is the COMMENT that erplab's Init puts on each of the four
// pgbench tables it creates: tables made by pgbench -i (or anyone else)
// lack it, and Init and Drop treat them as someone else's.
// It starts with workload.CreatedComment, so every workload's guard
// counts erplab's pgbench tables as erplab's.
const Marker = "erplab: created by erplab init --workload pgbench"

// pgbenchRelsSQL lists, as schema.name, the four pgbench tables found
// through search_path and the partitions of pgbench_accounts, with
// whether each of the four carries Marker (partitions: their parent's).
const pgbenchRelsSQL = `
with t as (
  select pg_catalog.to_regclass(x) as r from unnest(array['pgbench_accounts', 'pgbench_branches', 'pgbench_history', 'pgbench_tellers']) as x)
select n.nspname || '.' || c.relname,
       coalesce(pg_catalog.obj_description(coalesce(i.inhparent, c.oid), 'pg_class') = $1, false)
from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
left join pg_catalog.pg_inherits i on i.inhrelid = c.oid and i.inhparent = pg_catalog.to_regclass('pgbench_accounts')
where c.oid in (select r from t where r is not null
                union all
                select i.inhrelid from pg_catalog.pg_inherits i
                where i.inhparent = pg_catalog.to_regclass('pgbench_accounts'))`

// pgbenchRels returns the pgbench tables of the database (pgbenchRelsSQL)
// and whether all of them carry Marker (false when there are none).
func pgbenchRels(ctx context.Context, pool workload.Rows) (names []string, marked bool, err error) {
	rows, err := pool.Query(ctx, pgbenchRelsSQL, Marker)
	if err != nil {
		return nil, false, fmt.Errorf("pgbench tables: list pgbench tables: %w", err)
	}
	marked = true
	for rows.Next() {
		var name string
		var m bool
		if err := rows.Scan(&name, &m); err != nil {
			return nil, false, fmt.Errorf("pgbench tables: list pgbench tables: %w", err)
		}
		names, marked = append(names, name), marked && m
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("pgbench tables: list pgbench tables: %w", err)
	}
	return names, marked && len(names) > 0, nil
}

// Marked reports whether the pgbench tables of the database are the ones
// erplab's Init created (each carries Marker); false when there are none.
func Marked(ctx context.Context, pool workload.Rows) (bool, error) {
	_, m, err := pgbenchRels(ctx, pool)
	return m, err
}

// ForeignTables lists the objects of the database that Init must not
// overwrite (its first step drops the pgbench tables): those that erplab
// did not create (workload.ForeignTables), less
// the four pgbench tables and the partitions of pgbench_accounts when
// they carry erplab's Marker. Tables made by pgbench -i are foreign here.
func ForeignTables(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	return foreign(ctx, pool, false)
}

// ForeignForRun lists the objects a run of the pgbench workload must not
// write next to without --force: as ForeignTables, but the pgbench tables
// are the run's own whoever made them (a run over pgbench -i's tables is
// what pgbench does).
func ForeignForRun(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	return foreign(ctx, pool, true)
}

func foreign(ctx context.Context, pool *pgxpool.Pool, anyPgbench bool) ([]string, error) {
	all, err := workload.ForeignTables(ctx, pool)
	if err != nil || len(all) == 0 {
		return nil, err
	}
	ours, marked, err := pgbenchRels(ctx, pool)
	if err != nil {
		return nil, err
	}
	if !marked && !anyPgbench {
		return all, nil
	}
	var out []string
	for _, t := range all {
		if !slices.Contains(ours, t) {
			out = append(out, t)
		}
	}
	return out, nil
}
