package runenv

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// SettingNames returns (a fresh slice of) the names of the settings
// [ReadServer] records: those that matter to an ERP load, i.e. memory for
// sorts, hashes and temp tables, connection and lock limits, planner limits
// on many-JOIN queries, autovacuum, WAL and durability, I/O cost and
// parallelism, and preloaded extensions.
func SettingNames() []string {
	return []string{
		"shared_buffers",
		"work_mem",
		"maintenance_work_mem",
		"temp_buffers",
		"hash_mem_multiplier",
		"effective_cache_size",
		"max_connections",
		"max_locks_per_transaction",
		"huge_pages",
		"jit",
		"join_collapse_limit",
		"from_collapse_limit",
		"geqo_threshold",
		"temp_tablespaces",
		"autovacuum",
		"autovacuum_max_workers",
		"autovacuum_vacuum_cost_limit",
		"synchronous_commit",
		"fsync",
		"wal_level",
		"max_wal_size",
		"checkpoint_timeout",
		"random_page_cost",
		"effective_io_concurrency",
		"max_parallel_workers_per_gather",
		"shared_preload_libraries",
	}
}

// Server describes the PostgreSQL server a run loaded. In JSON field names
// are snake_case.
type Server struct {
	// Version is server_version, e.g. "15.8 (Debian 15.8-1.pgdg120+1)".
	Version string `json:"version"`
	// VersionNum is server_version_num, e.g. 150008.
	VersionNum int `json:"version_num"`
	// Settings maps a setting name from [SettingNames] to its value as SHOW
	// prints it, with its unit: "shared_buffers": "128MB",
	// "checkpoint_timeout": "5min", "jit": "on". Settings the server does
	// not have (e.g. hash_mem_multiplier before PostgreSQL 13) or the role
	// may not read (shared_preload_libraries without pg_read_all_settings)
	// are absent. Values are those of the reading session, so a SET in that
	// session shows.
	Settings map[string]string `json:"settings"`
	// InRecovery is pg_is_in_recovery(): true on a standby.
	InRecovery bool `json:"in_recovery"`
	// SystemIdentifier is pg_control_system().system_identifier, the
	// cluster's identity whatever address reaches it (a decimal string;
	// empty when the role may not execute pg_control_system), and
	// Database is current_database(): together they tell whether two
	// runs (e.g. the segments of one run, erplab merge) used one server.
	SystemIdentifier string `json:"system_identifier,omitempty"`
	Database         string `json:"database,omitempty"`
}

// serverQuery reads everything in one round trip. pg_settings lists only the
// settings this role may see, so current_setting never fails on them;
// current_setting formats a value with its unit as SHOW does
// (PostgreSQL docs, "System Administration Functions", current_setting;
// src/backend/utils/misc/guc.c, ShowGUCOption).
const serverQuery = `
SELECT current_setting('server_version'),
       current_setting('server_version_num')::int,
       pg_is_in_recovery(),
       current_database(),
       CASE WHEN has_function_privilege('pg_control_system()', 'EXECUTE')
            THEN (SELECT system_identifier::text FROM pg_control_system()) END,
       coalesce((SELECT json_object_agg(name, current_setting(name))
                   FROM pg_settings
                  WHERE name = ANY($1::text[])), '{}'::json)`

// ReadServer reads the version, the recovery state, the identity
// (system identifier, database) and the [SettingNames]
// settings of the server conn is connected to, with one query. It returns
// the query error wrapped, e.g. when ctx is done or the connection is
// closed.
func ReadServer(ctx context.Context, conn *pgx.Conn) (Server, error) {
	s := Server{Settings: map[string]string{}}
	var sysID pgtype.Text
	err := conn.QueryRow(ctx, serverQuery, SettingNames()).
		Scan(&s.Version, &s.VersionNum, &s.InRecovery, &s.Database, &sysID, &s.Settings)
	s.SystemIdentifier = sysID.String
	if err != nil {
		return Server{}, fmt.Errorf("read server version and settings: %w", err)
	}
	return s, nil
}
