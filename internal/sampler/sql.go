package sampler

// SQL of the samplers, one statement per source, chosen by the server's
// version (server_version_num). All of them run in one pipelined batch per
// tick: one round trip and one implicit transaction, so the sources share
// one statistics snapshot (stats_fetch_consistency and the backend status
// snapshot are per transaction; runtime-config-statistics.html,
// monitoring-stats.html "Statistics Functions") and nothing is held
// between ticks. Only Options.Locks reads pg_locks (locks.go): that view
// takes every lock manager partition lock in shared mode
// (src/backend/utils/adt/lockfuncs.c, GetLockStatusData), so it is one
// aggregated statement per sample, its time in the sample's round trip.
//
// Privileges: pg_monitor (through pg_read_all_stats) shows other users'
// state, wait events and query text in pg_stat_activity; without it those
// columns are NULL and the sessions count as "other". pg_stat_database,
// pg_stat_sys_tables and pg_total_relation_size need no privilege.

// ClientSession is the condition on a pg_stat_activity row (columns
// backend_type, datid and usesysid) of a client session: backend_type
// 'client backend', or a row this role may not see. To a role without
// pg_read_all_stats (pg_monitor) another role's row shows only pid,
// datid, database, usesysid, user and application_name: backend_type,
// state, waits and query are hidden (pg_stat_get_activity). Such a row
// with a user and a database is another role's session, its parallel
// workers or a database-connected background worker (the kinds cannot be
// told apart); auxiliary processes and autovacuum have no user and stay
// out.
const ClientSession = `(backend_type = 'client backend' OR (backend_type IS NULL AND usesysid IS NOT NULL AND datid IS NOT NULL))`

// minVersion is the oldest server the samplers support: 12, for
// WITH ... AS MATERIALIZED and the 'parallel worker' backend_type.
const minVersion = 120000

// sessionsSQL counts client backends (backend_type 'client backend',
// which leaves out parallel workers, autovacuum, walsenders and other
// background processes) by state, active client backends by wait event
// ("Type:Event", or "CPU" when wait_event_type is NULL: running, or in a
// wait that is not instrumented), and parallel workers. Parallel workers
// are folded into their leader: the leader is one session, the workers
// only a count. The sampler's own backend is excluded. Two rows hold the
// xmin horizon as the backends hold it back: 'x' the age in transactions
// of the oldest backend_xmin or backend_xid of any backend, 'o' the
// seconds since the oldest transaction holding one started (0 when none;
// hidden, so 0, for other roles' backends without pg_read_all_stats).
//
// Without pg_read_all_stats, other roles' sessions are counted too
// (ClientSession); a hidden row has no state, and counts as "other".
//
// Rows: kind ('s' state, 'w' wait event, 'p' parallel workers, 'x' xmin
// age, 'o' oldest transaction's seconds), key, count.
const sessionsSQL = `WITH a AS MATERIALIZED (
  SELECT backend_type, datid, usesysid, state, wait_event_type, wait_event, backend_xid, backend_xmin, xact_start
  FROM pg_catalog.pg_stat_activity
  WHERE pid <> pg_catalog.pg_backend_pid()
)
SELECT 's', coalesce(state, ''), count(*)::int4 FROM a
  WHERE ` + ClientSession + ` GROUP BY state
UNION ALL
SELECT 'w', coalesce(wait_event_type || ':' || wait_event, 'CPU'), count(*)::int4 FROM a
  WHERE backend_type = 'client backend' AND state = 'active' GROUP BY 2
UNION ALL
SELECT 'p', '', count(*)::int4 FROM a WHERE backend_type = 'parallel worker'
UNION ALL
SELECT 'x', '', coalesce(max(greatest(pg_catalog.age(backend_xmin), pg_catalog.age(backend_xid))), 0)::int4 FROM a
UNION ALL
SELECT 'o', '', coalesce(extract(epoch FROM pg_catalog.now() - min(xact_start)
    FILTER (WHERE backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)), 0)::int4 FROM a`

// queriesSQL13 lists the longest-running active client backends,
// oldest query first, with their parallel workers counted through
// leader_pid (PostgreSQL 13+). $1 is the row limit, $2 the number of
// characters of query text kept.
//
// Rows: pid, user, database, application_name, seconds since query_start,
// wait event key, query text, parallel workers.
const queriesSQL13 = `WITH a AS MATERIALIZED (
  SELECT pid, leader_pid, backend_type, state, usename, datname, application_name,
         query_start, wait_event_type, wait_event, query
  FROM pg_catalog.pg_stat_activity
  WHERE pid <> pg_catalog.pg_backend_pid()
), w AS (
  SELECT leader_pid, count(*)::int4 AS n FROM a
  WHERE backend_type = 'parallel worker' AND leader_pid IS NOT NULL GROUP BY leader_pid
)
SELECT a.pid, coalesce(a.usename::text, ''), coalesce(a.datname::text, ''), coalesce(a.application_name, ''),
       coalesce(extract(epoch FROM now() - a.query_start)::float8, 0),
       coalesce(a.wait_event_type || ':' || a.wait_event, 'CPU'),
       coalesce(left(a.query, $2::int4), ''), coalesce(w.n, 0)
FROM a LEFT JOIN w ON w.leader_pid = a.pid
WHERE a.backend_type = 'client backend' AND a.state = 'active'
ORDER BY a.query_start NULLS LAST, a.pid
LIMIT $1::int4`

// queriesSQL12 is queriesSQL13 for PostgreSQL 12, which has no leader_pid:
// the parallel workers column is 0.
const queriesSQL12 = `SELECT a.pid, coalesce(a.usename::text, ''), coalesce(a.datname::text, ''), coalesce(a.application_name, ''),
       coalesce(extract(epoch FROM now() - a.query_start)::float8, 0),
       coalesce(a.wait_event_type || ':' || a.wait_event, 'CPU'),
       coalesce(left(a.query, $2::int4), ''), 0::int4
FROM pg_catalog.pg_stat_activity a
WHERE a.pid <> pg_catalog.pg_backend_pid() AND a.backend_type = 'client backend' AND a.state = 'active'
ORDER BY a.query_start NULLS LAST, a.pid
LIMIT $1::int4`

// databaseSQL14 sums the cumulative counters of pg_stat_database over all
// databases (server-wide; the row with datid 0 holds shared objects).
// sessions exists from PostgreSQL 14.
const databaseSQL14 = `SELECT coalesce(sum(xact_commit), 0)::int8, coalesce(sum(xact_rollback), 0)::int8,
       coalesce(sum(blks_read), 0)::int8, coalesce(sum(blks_hit), 0)::int8,
       coalesce(sum(temp_files), 0)::int8, coalesce(sum(temp_bytes), 0)::int8,
       coalesce(sum(deadlocks), 0)::int8, coalesce(sum(sessions), 0)::int8
FROM pg_catalog.pg_stat_database`

// databaseSQL12 is databaseSQL14 before PostgreSQL 14: sessions is 0.
const databaseSQL12 = `SELECT coalesce(sum(xact_commit), 0)::int8, coalesce(sum(xact_rollback), 0)::int8,
       coalesce(sum(blks_read), 0)::int8, coalesce(sum(blks_hit), 0)::int8,
       coalesce(sum(temp_files), 0)::int8, coalesce(sum(temp_bytes), 0)::int8,
       coalesce(sum(deadlocks), 0)::int8, 0::int8
FROM pg_catalog.pg_stat_database`

// catalogSQL reads, for the catalogs that temp-table churn bloats (CONTEXT.md
// section 1 and 3: every CREATE/DROP of a temp table or index inserts and
// deletes rows in them), the total size (heap, indexes and TOAST,
// pg_total_relation_size, bytes) and the cumulative tuple counters of
// pg_stat_sys_tables. Catalogs are per database: these are the connected
// database's. pg_total_relation_size takes AccessShareLock on each catalog
// and its indexes for the (short) transaction; these weak locks on
// non-shared relations normally use the fast path (src/backend/storage/lmgr/README).
const catalogSQL = `SELECT s.relname::text, pg_catalog.pg_total_relation_size(s.relid),
       s.n_live_tup, s.n_dead_tup, s.n_tup_ins, s.n_tup_upd, s.n_tup_del
FROM pg_catalog.pg_stat_sys_tables s
WHERE s.schemaname = 'pg_catalog'
  AND s.relname IN ('pg_class', 'pg_attribute', 'pg_depend', 'pg_type', 'pg_index')
ORDER BY s.relname`

// infoSQL identifies the server, the sampler's backend and role once per
// connection, and finds the optional extensions (extensionColumns), in
// one round trip. It needs no privilege (pg_monitor or not).
const infoSQL = `SELECT current_setting('server_version_num')::int4, current_setting('server_version'),
       pg_catalog.pg_backend_pid(), current_database()::text, pg_catalog.quote_ident(current_user),
       pg_catalog.pg_has_role(current_user, 'pg_read_all_stats', 'USAGE'),` + extensionColumns

// sqlSet is the statements for one server version.
type sqlSet struct {
	sessions, queries, opSessions, database, catalog string
}

// statementsFor returns the statements for server_version_num v.
func statementsFor(v int) sqlSet {
	s := sqlSet{sessions: sessionsSQL, queries: queriesSQL13, opSessions: opSessionsSQL14, database: databaseSQL14, catalog: catalogSQL}
	if v < 140000 {
		s.opSessions = opSessionsSQL12
	}
	if v < 130000 {
		s.queries = queriesSQL12
	}
	if v < 140000 {
		s.database = databaseSQL12
	}
	return s
}

// opSessionsSQL14 reads, for the backends on which the engine runs a key
// operation ($1, their PIDs: package opmap), the active ones' wait event
// key (as sessionsSQL) and query_id (PostgreSQL 14+, 0 when
// compute_query_id is off or the statement has none). It runs in the same
// transaction as sessionsSQL, so it reads the same backend status
// snapshot.
//
// Rows: pid, wait event key, query_id.
const opSessionsSQL14 = `SELECT pid, coalesce(wait_event_type || ':' || wait_event, 'CPU'), coalesce(query_id, 0)
FROM pg_catalog.pg_stat_activity
WHERE pid = ANY($1::int4[]) AND state = 'active'`

// opSessionsSQL12 is opSessionsSQL14 before PostgreSQL 14 (no query_id).
const opSessionsSQL12 = `SELECT pid, coalesce(wait_event_type || ':' || wait_event, 'CPU'), 0::int8
FROM pg_catalog.pg_stat_activity
WHERE pid = ANY($1::int4[]) AND state = 'active'`

// extensionColumns (of infoSQL) find the schemas of the
// pg_stat_statements and pg_wait_sampling extensions in the connected
// database (empty when not created), pg_stat_statements' version, whether
// pg_stat_statements is preloaded (shared_preload_libraries), and
// pg_wait_sampling.profile_period in ms (empty when the library is not
// loaded).
//
// shared_preload_libraries is superuser-only (pg_read_all_settings, in
// pg_monitor): current_setting fails for other roles with 42501 and
// pg_settings leaves its row out. Without the row, the library's own
// setting pg_stat_statements.max, defined once the library is loaded,
// says whether it is.
const extensionColumns = `
  coalesce((SELECT n.nspname::text FROM pg_catalog.pg_extension x JOIN pg_catalog.pg_namespace n ON n.oid = x.extnamespace WHERE x.extname = 'pg_stat_statements'), ''),
  coalesce((SELECT x.extversion FROM pg_catalog.pg_extension x WHERE x.extname = 'pg_stat_statements'), ''),
  coalesce((SELECT position('pg_stat_statements' IN s.setting) > 0 FROM pg_catalog.pg_settings s WHERE s.name = 'shared_preload_libraries'),
           current_setting('pg_stat_statements.max', true) IS NOT NULL),
  coalesce((SELECT n.nspname::text FROM pg_catalog.pg_extension x JOIN pg_catalog.pg_namespace n ON n.oid = x.extnamespace WHERE x.extname = 'pg_wait_sampling'), ''),
  coalesce(current_setting('pg_wait_sampling.profile_period', true), '')`

// waitProfileSQL (schema-qualified by the caller with %s) sums
// pg_wait_sampling's cumulative profile (samples taken every
// profile_period ms in the server) per wait event key over the client
// backends that exist now, leaving out idle waits (Client:ClientRead and
// the Activity type of background processes' main loops) so that it
// compares with the active sessions of sessionsSQL.
//
// Rows: wait event key ("CPU" when event_type is NULL), samples.
const waitProfileSQL = `SELECT coalesce(p.event_type || ':' || p.event, 'CPU'), sum(p.count)::int8
FROM %s.pg_wait_sampling_profile p
JOIN pg_catalog.pg_stat_activity a ON a.pid = p.pid AND a.backend_type = 'client backend'
WHERE p.pid <> pg_catalog.pg_backend_pid()
  AND coalesce(p.event_type, '') NOT IN ('Activity', 'Client')
GROUP BY 1`
