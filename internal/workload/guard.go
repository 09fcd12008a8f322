package workload

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Rows is what ForeignObjects needs of a connection or pool
// (*pgxpool.Pool, *pgx.Conn and pgx.Tx have it).
type Rows interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// CreatedComment starts the COMMENT erplab puts on every relation one of
// its workloads creates outside its erplab_* schemas (erp's tables and
// marker, the four pgbench tables of erplab init --workload pgbench):
// ForeignObjects counts a relation carrying it, or a partition of one, as
// erplab's own.
const CreatedComment = "erplab: created by erplab"

// foreignObjectsSQL lists the user objects of the database outside the
// system schemas and erplab's own (erplab_*): pg_class relations of the
// kinds r, p, v, m, f, S and c (composite types) that neither carry
// CreatedComment ($1) nor are a partition of one that does, sequences
// not owned by a column (an owned one goes with its table, which is listed itself),
// user types that are not the row type of a relation, an array or an
// automatic multirange, and functions and procedures. Objects that belong
// to an extension (pg_depend deptype 'e') are left out: CREATE EXTENSION
// made them. Columns: the schema, the object's name (name(arguments) for
// a routine, e.g. f(integer)), a kind label ("" for tables).
const foreignObjectsSQL = `
WITH ns AS (
  SELECT oid, nspname FROM pg_catalog.pg_namespace
  WHERE nspname NOT IN ('pg_catalog', 'information_schema')
    AND nspname NOT LIKE 'pg\_toast%' AND nspname NOT LIKE 'pg\_temp\_%'
    AND nspname NOT LIKE 'erplab\_%'),
rel AS (
  SELECT ns.nspname, c.relname::text AS name,
         CASE c.relkind WHEN 'r' THEN '' WHEN 'p' THEN '' WHEN 'v' THEN 'view'
              WHEN 'm' THEN 'materialized view' WHEN 'f' THEN 'foreign table'
              WHEN 'S' THEN 'sequence' ELSE 'type' END AS kind
  FROM pg_catalog.pg_class c JOIN ns ON ns.oid = c.relnamespace
  WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S', 'c')
    AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_description ds
                    WHERE ds.classoid = 'pg_catalog.pg_class'::regclass AND ds.objsubid = 0
                      AND pg_catalog.starts_with(ds.description, $1)
                      AND (ds.objoid = c.oid OR ds.objoid IN (SELECT i.inhparent FROM pg_catalog.pg_inherits i
                                                              WHERE i.inhrelid = c.oid)))
    AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                    WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = c.oid
                      AND (d.deptype = 'e' OR c.relkind = 'S' AND d.deptype IN ('a', 'i')
                           AND d.refclassid = 'pg_catalog.pg_class'::regclass))),
typ AS (
  SELECT ns.nspname, t.typname::text, 'type'
  FROM pg_catalog.pg_type t JOIN ns ON ns.oid = t.typnamespace
  WHERE t.typrelid = 0 AND t.typtype <> 'm'
    AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_type e WHERE e.typarray = t.oid)
    AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                    WHERE d.classid = 'pg_catalog.pg_type'::regclass AND d.objid = t.oid AND d.deptype = 'e')),
fn AS (
  SELECT ns.nspname, p.proname || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')',
         CASE p.prokind WHEN 'p' THEN 'procedure' ELSE 'function' END
  FROM pg_catalog.pg_proc p JOIN ns ON ns.oid = p.pronamespace
  WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                    WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'))
SELECT * FROM rel UNION ALL SELECT * FROM typ UNION ALL SELECT * FROM fn
ORDER BY 1, 2`

// ForeignObjects lists the objects of the database that erplab did not
// create, the --force guard of every workload that writes (smoke, erp,
// pgbench init and run, erplab init --drop): tables, partitioned tables,
// views, materialized views, foreign tables, sequences, composite and
// other user types, functions and procedures, in every schema except the
// system ones and erplab's own (erplab_*), not owned by an extension,
// and not relations carrying erplab's CreatedComment (or partitions of
// one): whichever erplab workload made them, they are erplab's. ours
// names, as schema.name, more relations the caller knows it created (e.g.
// the ERP tables recorded in _erplab_meta by an erplab that did not
// comment them yet): they are left out too. Each object is
// "schema.name" for a table and "schema.name (kind)" otherwise, e.g.
// "public.v (view)", "public.f(integer) (function)", sorted. Errors: the
// catalog query failed (wrapped).
func ForeignObjects(ctx context.Context, q Rows, ours []string) ([]string, error) {
	rows, err := q.Query(ctx, foreignObjectsSQL, CreatedComment)
	if err != nil {
		return nil, fmt.Errorf("list the database's objects: %w", err)
	}
	skip := map[string]bool{}
	for _, o := range ours {
		skip[o] = true
	}
	var out []string
	for rows.Next() {
		var ns, name, kind string
		if err := rows.Scan(&ns, &name, &kind); err != nil {
			return nil, fmt.Errorf("list the database's objects: %w", err)
		}
		q := ns + "." + name
		switch {
		case kind == "" && skip[q]:
		case kind == "":
			out = append(out, q)
		default:
			out = append(out, q+" ("+kind+")")
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the database's objects: %w", err)
	}
	return out, nil
}

// ForeignError is the guard's refusal for objects (ForeignObjects): what
// names at most five of them and how many more, wrapping
// ErrForeignDatabase. prefix starts the message (e.g. "smoke setup").
func ForeignError(prefix string, objects []string) error {
	names, more := objects, ""
	if len(names) > 5 {
		more = fmt.Sprintf(" and %d more", len(names)-5)
		names = names[:5]
	}
	return fmt.Errorf("%s: %s%s: %w", prefix, strings.Join(names, ", "), more, ErrForeignDatabase)
}
