-- Temporary tables of the key operations that use them outside a posting
-- transaction (document list, OR-subquery report, temp-table storm), in two
-- styles (WorkloadOptions.TempStyle):
--   "1c"       create, index, fill, ANALYZE, use, DROP: every use is catalog
--              DDL (pg_class, pg_attribute, pg_type, pg_depend rows and
--              shared-invalidation messages);
--   "lsfusion" create a table t_N once per connection (with statistics
--              target 10 on its columns), then fill, ANALYZE, use and
--              TRUNCATE it to return it to the cache (TRUNCATE makes a new
--              relfilenode and updates pg_class); when TRUNCATE fails the
--              table is dropped and forgotten.
-- {tt} is replaced by the table's name (tt1, tt2, ... or t_0, t_1, ...).
-- Posting transactions create and drop their own temp tables (see
-- register_goods.sql and register_sales.sql).

-- name: create_rls_values
CREATE TEMP TABLE {tt} (_type bytea NOT NULL, _rtref bytea NOT NULL, _rrref bytea NOT NULL)

-- name: index_rls_values
CREATE INDEX {tt}_byvalue ON {tt} (_rrref, _rtref, _type)

-- name: stats10_rls_values
ALTER TABLE {tt} ALTER _type SET STATISTICS 10, ALTER _rtref SET STATISTICS 10, ALTER _rrref SET STATISTICS 10

-- name: create_goods
CREATE TEMP TABLE {tt} (_fld1235rref bytea NOT NULL, _fld1236rref bytea NOT NULL, _fld1237 numeric(21,3) NOT NULL)

-- name: index_goods
CREATE INDEX {tt}_bydims ON {tt} (_fld1236rref, _fld1235rref)

-- name: stats10_goods
ALTER TABLE {tt} ALTER _fld1235rref SET STATISTICS 10, ALTER _fld1236rref SET STATISTICS 10, ALTER _fld1237 SET STATISTICS 10

-- name: analyze
ANALYZE {tt}

-- name: truncate
TRUNCATE {tt}

-- name: drop
DROP TABLE {tt}

-- name: drop_if_exists
DROP TABLE IF EXISTS {tt}
