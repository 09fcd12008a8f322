package doctor

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Sources of the server rules.
const (
	srcConnections   = "https://www.postgresql.org/docs/current/runtime-config-connection.html#GUC-MAX-CONNECTIONS"
	srcConnWiki      = "https://wiki.postgresql.org/wiki/Number_Of_Database_Connections"
	srcPgStatAct     = "https://www.postgresql.org/docs/current/monitoring-stats.html#MONITORING-PG-STAT-ACTIVITY-VIEW"
	srcPgStatDB      = "https://www.postgresql.org/docs/current/monitoring-stats.html#MONITORING-PG-STAT-DATABASE-VIEW"
	srcIdleTimeout   = "https://www.postgresql.org/docs/current/runtime-config-client.html#GUC-IDLE-IN-TRANSACTION-SESSION-TIMEOUT"
	srcStmtTimeout   = "https://www.postgresql.org/docs/current/runtime-config-client.html#GUC-STATEMENT-TIMEOUT"
	srcResource      = "https://www.postgresql.org/docs/current/runtime-config-resource.html#RUNTIME-CONFIG-RESOURCE-MEMORY"
	srcLogTempFiles  = "https://www.postgresql.org/docs/current/runtime-config-logging.html#GUC-LOG-TEMP-FILES"
	srcPgStatIO      = "https://www.postgresql.org/docs/current/monitoring-stats.html#MONITORING-PG-STAT-IO-VIEW"
	srcAutovacuum    = "https://www.postgresql.org/docs/current/routine-vacuuming.html#AUTOVACUUM"
	srcAutovacuumGUC = "https://www.postgresql.org/docs/current/runtime-config-autovacuum.html"
	srcWraparound    = "https://www.postgresql.org/docs/current/routine-vacuuming.html#VACUUM-FOR-WRAPAROUND"
	srcJIT           = "https://www.postgresql.org/docs/current/jit-decision.html"
	srcFieldTemp     = "docs/field-notes.md section 1 (work_mem, temp_buffers, hash_mem_multiplier raised until temp files stopped)"
)

// Thresholds of the server checks.
const (
	connUsageWarn     = 0.75 // client sessions / usable connections
	connUsageCritical = 0.90
	connsPerCPUInfo   = 10 // max_connections above this many per CPU: info
	newSessionsWarn   = 10.0
	newSessionsInfo   = 1.0
	shortConnAge      = 60 * time.Second // average age below this with...
	shortConnMin      = 10               // ...at least this many sessions
	idleTxWarn        = time.Minute
	idleTxCritical    = 30 * time.Minute
	longQueryWarn     = time.Minute
	longQueryCritical = time.Hour
	// tempFilesPer1000Xact: temp files per 1000 transactions at or above
	// this are a warning (an OLTP workload should spill almost never).
	tempFilesPer1000Xact = 1.0
	// tempWritesWarnBlocks: temp relation blocks written by client
	// backends (pg_stat_io) at or above this are a warning (8 MB).
	tempWritesWarnBlocks = 1024
	// jitShareWarn: JIT compile time as % of execution time at or above
	// this is a warning.
	jitShareWarn = 10.0
	// Wraparound: critical at or above this age; warning at or above
	// 1.5 x autovacuum_(multixact_)freeze_max_age.
	wraparoundCritical = 1_500_000_000
	freezeWarnFactor   = 1.5
)

func init() {
	register(Check{ID: "max-connections", Title: "Connections vs max_connections and CPUs", order: secSessions + 10, run: checkMaxConnections,
		Rule:    "critical at >= 90 % of usable connections in use (peak over the sample), warning at >= 75 %; info when max_connections > 10 per CPU",
		Why:     "At the limit new sessions are refused, and far more sessions than CPUs turn a short stall into thousands of queued active sessions.",
		Sources: []string{srcConnections, srcConnWiki, srcFieldLockMgr}})
}

func checkMaxConnections(ctx context.Context, e *env) result {
	maxConn, _ := e.num("max_connections")
	reserved, _ := e.num("superuser_reserved_connections")
	r2, _ := e.num("reserved_connections") // PostgreSQL 16+
	usable := maxConn - reserved - r2
	var clients int
	if err := e.conn.QueryRow(ctx, `SELECT count(*)::int4 FROM pg_catalog.pg_stat_activity WHERE backend_type = 'client backend'`).Scan(&clients); err != nil {
		return failed(err)
	}
	peak := clients
	if e.smp != nil {
		for _, s := range e.smp.series {
			peak = max(peak, s.Sessions.Total()+1) // +1: the sampler's own session
		}
	}
	usage := float64(peak) / max(usable, 1)
	ev := []Evidence{
		{Text: fmt.Sprintf("max_connections %.0f, reserved for superusers %.0f", maxConn, reserved+r2), From: "pg_settings"},
		{Text: fmt.Sprintf("client sessions now %d, peak %d (%.0f %% of %.0f usable)", clients, peak, 100*usage, usable), From: "pg_stat_activity"},
	}
	m := map[string]float64{"max_connections": maxConn, "client_sessions": float64(clients), "peak_sessions": float64(peak), "usage_pct": round2(100 * usage)}
	var cpus int
	if e.host != nil && e.host.cpusErr == nil {
		cpus = e.host.cpus
		ev = append(ev, Evidence{Text: fmt.Sprintf("%d CPUs", cpus), From: e.host.procPath("cpuinfo")})
		m["cpus"] = float64(cpus)
	}
	pool := []string{
		"# put a transaction-mode pooler (PgBouncer, Odyssey) in front and size the server pool to a few sessions per CPU",
		"ALTER SYSTEM SET max_connections = <pool size + headroom>;   -- restart",
	}
	switch {
	case usage >= connUsageCritical:
		return result{sev: Critical, summary: fmt.Sprintf("%d of %.0f usable connections in use (%.0f %%): new sessions will be refused", peak, usable, 100*usage), evidence: ev, metrics: m, fix: pool}
	case usage >= connUsageWarn:
		return result{sev: Warning, summary: fmt.Sprintf("%d of %.0f usable connections in use (%.0f %%)", peak, usable, 100*usage), evidence: ev, metrics: m, fix: pool}
	case cpus > 0 && maxConn > float64(connsPerCPUInfo*cpus):
		return result{sev: Info, summary: fmt.Sprintf("max_connections %.0f is over %d per CPU (%d CPUs): a burst of active sessions queues on locks, not on CPUs", maxConn, connsPerCPUInfo, cpus), evidence: ev, metrics: m, fix: pool}
	}
	return result{sev: OK, summary: fmt.Sprintf("%d client sessions, %.0f %% of usable connections", peak, 100*usage), evidence: ev, metrics: m}
}

func init() {
	register(Check{ID: "connection-age", Title: "Connection pooling (session age, new sessions)", order: secSessions + 20, run: checkConnectionAge,
		Rule:    "warning at >= 10 new sessions/s during the sample (pg_stat_database.sessions, PostgreSQL 14+); info at >= 1/s, or (no sample) >= 10 sessions averaging under 60 s of age",
		Why:     "Each new session forks a backend and rebuilds its catalog caches, which costs CPU and catalog reads that a pool pays once.",
		Sources: []string{srcPgStatAct, srcPgStatDB, srcConnWiki}})
}

func checkConnectionAge(ctx context.Context, e *env) result {
	var n int
	var avg float64
	if err := e.conn.QueryRow(ctx, `SELECT count(*)::int4, coalesce(avg(extract(epoch FROM now() - backend_start)), 0)::float8
FROM pg_catalog.pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_catalog.pg_backend_pid()`).Scan(&n, &avg); err != nil {
		return failed(err)
	}
	ev := []Evidence{{Text: fmt.Sprintf("other client sessions: %d, average age %s", n, fmtDur(secs(avg))), From: "pg_stat_activity.backend_start"}}
	m := map[string]float64{"sessions": float64(n), "avg_age_s": round2(avg)}
	rate := -1.0
	if e.smp != nil && e.srv.VersionNum >= 140000 && e.smp.elapsed > 0 {
		// The sampler's own connection is one session, made before the first sample.
		rate = round2(float64(max(e.smp.last.DBTotals.Sessions-e.smp.first.DBTotals.Sessions, 0)) / e.smp.elapsed)
		ev = append(ev, Evidence{Text: fmt.Sprintf("new sessions during the %.1f s sample: %.2f/s", e.smp.elapsed, rate), From: "pg_stat_database.sessions"})
		m["new_sessions_per_s"] = rate
	}
	fix := []string{"# keep connections open: a pooler (PgBouncer) or the application's own pool; each new backend forks and rebuilds its catalog caches"}
	switch {
	case rate >= newSessionsWarn:
		return result{sev: Warning, summary: fmt.Sprintf("%.1f new sessions/s: connections are opened per request, not pooled", rate), evidence: ev, metrics: m, fix: fix}
	case rate >= newSessionsInfo:
		return result{sev: Info, summary: fmt.Sprintf("%.1f new sessions/s", rate), evidence: ev, metrics: m, fix: fix}
	case rate < 0 && n >= shortConnMin && avg < shortConnAge.Seconds():
		// Without a sample: young sessions may also be a pool that just started.
		return result{sev: Info, summary: fmt.Sprintf("%d sessions average only %s of age: connections may not be pooled", n, fmtDur(secs(avg))), evidence: ev, metrics: m, fix: fix}
	}
	return result{sev: OK, summary: fmt.Sprintf("other client sessions: %d, average age %s", n, fmtDur(secs(avg))), evidence: ev, metrics: m}
}

// activityRow is one client backend of pg_stat_activity.
type activityRow struct {
	pid             int
	user, db, wait  string
	age             float64 // seconds since state_change or query_start
	xminAge         int64
	query           string
	state           string
	applicationName string
}

func (e *env) activity(ctx context.Context, states []string, ageCol string) ([]activityRow, error) {
	q := `SELECT pid, coalesce(usename::text, ''), coalesce(datname::text, ''), coalesce(application_name, ''), coalesce(state, ''),
       coalesce(wait_event_type || ':' || wait_event, 'CPU'),
       coalesce(extract(epoch FROM now() - ` + ageCol + `), 0)::float8,
       coalesce(pg_catalog.age(backend_xmin), 0)::int8, left(coalesce(query, ''), 300)
FROM pg_catalog.pg_stat_activity
WHERE backend_type = 'client backend' AND pid <> pg_catalog.pg_backend_pid() AND state = ANY($1)
ORDER BY 7 DESC`
	rows, err := e.conn.Query(ctx, q, states)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (activityRow, error) {
		var a activityRow
		err := r.Scan(&a.pid, &a.user, &a.db, &a.applicationName, &a.state, &a.wait, &a.age, &a.xminAge, &a.query)
		return a, err
	})
}

func init() {
	register(Check{ID: "idle-in-transaction", Title: "Sessions idle in transaction", order: secSessions + 30, run: checkIdleInTransaction,
		Rule:    "warning when one has been idle in transaction >= 1 min, critical >= 30 min",
		Why:     "An open transaction keeps its locks and holds back the xmin horizon, so vacuum cannot remove dead rows, catalogs included.",
		Sources: []string{srcPgStatAct, srcIdleTimeout}})
}

func checkIdleInTransaction(ctx context.Context, e *env) result {
	if !e.srv.StatsPrivileged && !e.srv.Superuser {
		return needsMonitor(e, "other users' session states are hidden")
	}
	rows, err := e.activity(ctx, []string{"idle in transaction", "idle in transaction (aborted)"}, "state_change")
	if err != nil {
		return failed(err)
	}
	timeout := e.show("idle_in_transaction_session_timeout")
	ev := []Evidence{{Text: "idle_in_transaction_session_timeout = " + timeout, From: "pg_settings"}}
	m := map[string]float64{"count": float64(len(rows))}
	if len(rows) == 0 {
		return result{sev: OK, summary: "no session idle in transaction", evidence: ev, metrics: m}
	}
	oldest := rows[0]
	m["oldest_s"] = round2(oldest.age)
	for i, r := range rows {
		if i == 5 {
			ev = append(ev, Evidence{Text: fmt.Sprintf("... and %d more", len(rows)-5), From: "pg_stat_activity"})
			break
		}
		ev = append(ev, Evidence{Text: fmt.Sprintf("pid %d %s@%s (%s) %s for %s, holding back xmin by %d transactions: %s", r.pid, r.user, r.db, r.applicationName, r.state,
			fmtDur(secs(r.age)), r.xminAge, clip(r.query, 120)), From: "pg_stat_activity"})
	}
	fix := []string{
		fmt.Sprintf("SELECT pg_terminate_backend(%d);   -- the oldest", oldest.pid),
		"ALTER SYSTEM SET idle_in_transaction_session_timeout = '5min'; SELECT pg_reload_conf();",
	}
	sum := fmt.Sprintf("%d sessions idle in transaction, the oldest for %s", len(rows), fmtDur(secs(oldest.age)))
	switch {
	case oldest.age >= idleTxCritical.Seconds():
		return result{sev: Critical, summary: sum, evidence: ev, metrics: m, fix: fix}
	case oldest.age >= idleTxWarn.Seconds():
		return result{sev: Warning, summary: sum, evidence: ev, metrics: m, fix: fix}
	}
	return result{sev: OK, summary: sum + " (short)", evidence: ev, metrics: m}
}

func init() {
	register(Check{ID: "long-queries", Title: "Long-running active queries", order: secSessions + 40, run: checkLongQueries,
		Rule:    "warning when a query has been active >= 1 min, critical >= 1 h",
		Why:     "A minute-long statement in an OLTP ERP is a key operation far beyond its target time and holds its locks and snapshot all along.",
		Sources: []string{srcPgStatAct, srcStmtTimeout}})
}

func checkLongQueries(ctx context.Context, e *env) result {
	if !e.srv.StatsPrivileged && !e.srv.Superuser {
		return needsMonitor(e, "other users' queries are hidden")
	}
	rows, err := e.activity(ctx, []string{"active"}, "query_start")
	if err != nil {
		return failed(err)
	}
	ev := []Evidence{{Text: "statement_timeout = " + e.show("statement_timeout"), From: "pg_settings"}}
	var long []activityRow
	for _, r := range rows {
		if r.age >= longQueryWarn.Seconds() {
			long = append(long, r)
		}
	}
	m := map[string]float64{"active": float64(len(rows)), "long": float64(len(long))}
	if len(rows) > 0 {
		m["longest_s"] = round2(rows[0].age)
	}
	if len(long) == 0 {
		s := fmt.Sprintf("no query running %s or longer (%d active)", fmtDur(longQueryWarn), len(rows))
		return result{sev: OK, summary: s, evidence: ev, metrics: m}
	}
	for i, r := range long {
		if i == 5 {
			ev = append(ev, Evidence{Text: fmt.Sprintf("... and %d more", len(long)-5), From: "pg_stat_activity"})
			break
		}
		ev = append(ev, Evidence{Text: fmt.Sprintf("pid %d %s@%s running %s, wait %s: %s", r.pid, r.user, r.db, fmtDur(secs(r.age)), r.wait, clip(r.query, 160)), From: "pg_stat_activity"})
	}
	fix := []string{
		fmt.Sprintf("SELECT pg_cancel_backend(%d);   -- the longest, if it should not run", long[0].pid),
		"-- EXPLAIN (ANALYZE, BUFFERS) the statement on a copy; an ERP key operation should not need a minute",
		"ALTER ROLE <application role> SET statement_timeout = '5min';",
	}
	sev := Warning
	if long[0].age >= longQueryCritical.Seconds() {
		sev = Critical
	}
	return result{sev: sev, summary: fmt.Sprintf("%d queries running %s or longer, the longest %s", len(long), fmtDur(longQueryWarn), fmtDur(secs(long[0].age))), evidence: ev, metrics: m, fix: fix}
}

func init() {
	register(Check{ID: "memory-budget", Title: "Memory budget vs RAM", Needs: NeedsHost, order: secMemory + 10, run: checkMemoryBudget,
		Rule:    "warning when shared_buffers + max_connections x (work_mem x hash_mem_multiplier + temp_buffers) + autovacuum_max_workers x autovacuum_work_mem + maintenance_work_mem exceeds MemTotal",
		Why:     "The settings promise more memory than the host has, so a burst of sorting sessions ends in swap or the OOM killer.",
		Sources: []string{srcResource}})
}

func checkMemoryBudget(_ context.Context, e *env) result {
	if e.host == nil {
		return notChecked(e.hostWhy)
	}
	ram := e.host.memTotal()
	sb, _ := e.bytes("shared_buffers")
	wm, _ := e.bytes("work_mem")
	tb, _ := e.bytes("temp_buffers")
	mwm, _ := e.bytes("maintenance_work_mem")
	awm, _ := e.bytes("autovacuum_work_mem")
	if awm < 0 {
		awm = mwm
	}
	hmm, ok := e.num("hash_mem_multiplier")
	if !ok || hmm < 1 {
		hmm = 1
	}
	conns, _ := e.num("max_connections")
	workers, _ := e.num("autovacuum_max_workers")
	perSession := float64(wm)*hmm + float64(tb)
	budget := float64(sb) + conns*perSession + workers*float64(awm) + float64(mwm)
	share := 100 * budget / float64(max(ram, 1))
	ev := []Evidence{
		{Text: fmt.Sprintf("shared_buffers %s + max_connections %.0f x (work_mem %s x hash_mem_multiplier %g + temp_buffers %s) + autovacuum_max_workers %.0f x %s + maintenance_work_mem %s = %s",
			e.show("shared_buffers"), conns, e.show("work_mem"), hmm, e.show("temp_buffers"), workers, fmtBytes(awm), e.show("maintenance_work_mem"), fmtBytes(int64(budget))), From: "pg_settings"},
		{Text: "MemTotal " + fmtBytes(ram), From: e.host.procPath("meminfo")},
	}
	m := map[string]float64{"budget_bytes": budget, "ram_bytes": float64(ram), "budget_pct_of_ram": round2(share)}
	sum := fmt.Sprintf("memory budget %s is %.0f %% of RAM %s", fmtBytes(int64(budget)), share, fmtBytes(ram))
	if budget > float64(ram) {
		return result{sev: Warning, summary: sum + ": a burst of sorting sessions can push the host into swap or the OOM killer", evidence: ev, metrics: m,
			fix: []string{"# lower max_connections behind a pooler, or work_mem / temp_buffers globally and raise them only for the roles that need them:",
				"ALTER ROLE <reporting role> SET work_mem = '256MB';"}}
	}
	return result{sev: OK, summary: sum, evidence: ev, metrics: m}
}

// dbTemp is one database's temp file counters.
type dbTemp struct {
	name         string
	files, bytes int64
	xacts        int64
	since        string
}

func init() {
	register(Check{ID: "temp-files", Title: "Temp files (work_mem, hash_mem_multiplier)", order: secMemory + 20, run: checkTempFiles,
		Rule:    "warning when a database wrote >= 1 temp file per 1000 transactions since its statistics reset, or did during the sample",
		Why:     "A sort or hash that exceeds work_mem (x hash_mem_multiplier) spills to temp files on disk and runs many times slower.",
		Sources: []string{srcResource, srcPgStatDB, srcLogTempFiles, srcFieldTemp}})
}

func checkTempFiles(ctx context.Context, e *env) result {
	rows, err := e.conn.Query(ctx, `SELECT d.datname::text, d.temp_files, d.temp_bytes, d.xact_commit + d.xact_rollback,
       coalesce(to_char(d.stats_reset, 'YYYY-MM-DD HH24:MI'), 'statistics reset')
FROM pg_catalog.pg_stat_database d WHERE d.datname IS NOT NULL ORDER BY d.datname`)
	if err != nil {
		return failed(err)
	}
	dbs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (dbTemp, error) {
		var d dbTemp
		err := r.Scan(&d.name, &d.files, &d.bytes, &d.xacts, &d.since)
		return d, err
	})
	if err != nil {
		return failed(err)
	}
	ratio := func(files, xacts int64) float64 { return 1000 * float64(files) / float64(max(xacts, 1)) }
	sort.SliceStable(dbs, func(i, j int) bool { return ratio(dbs[i].files, dbs[i].xacts) > ratio(dbs[j].files, dbs[j].xacts) })
	ev := []Evidence{{Text: fmt.Sprintf("work_mem = %s, hash_mem_multiplier = %s, log_temp_files = %s", e.show("work_mem"), e.show("hash_mem_multiplier"), e.show("log_temp_files")), From: "pg_settings"}}
	m := map[string]float64{}
	var worst *dbTemp
	for i := range dbs {
		d := &dbs[i]
		if d.files == 0 {
			continue
		}
		if worst == nil {
			worst = d
		}
		if len(ev) <= 5 {
			ev = append(ev, Evidence{Text: fmt.Sprintf("database %s: %d temp files, %s, in %d transactions (%.2f per 1000) since %s; average file %s",
				d.name, d.files, fmtBytes(d.bytes), d.xacts, ratio(d.files, d.xacts), d.since, fmtBytes(d.bytes/d.files)), From: "pg_stat_database"})
		}
	}
	var sFiles, sBytes, sXacts int64
	if e.smp != nil {
		a, b := e.smp.first.DBTotals, e.smp.last.DBTotals
		sFiles, sBytes = max(b.TempFiles-a.TempFiles, 0), max(b.TempBytes-a.TempBytes, 0)
		sXacts = max(b.XactCommit+b.XactRollback-a.XactCommit-a.XactRollback, 0)
		ev = append(ev, Evidence{Text: fmt.Sprintf("during the %.1f s sample: %d temp files, %s, in %d transactions (all databases)", e.smp.elapsed, sFiles, fmtBytes(sBytes), sXacts), From: "pg_stat_database"})
		m["sample_temp_files"], m["sample_temp_bytes"], m["sample_xacts"] = float64(sFiles), float64(sBytes), float64(sXacts)
	}
	cumulative := worst != nil && ratio(worst.files, worst.xacts) >= tempFilesPer1000Xact
	inSample := sFiles > 0 && ratio(sFiles, sXacts) >= tempFilesPer1000Xact
	if worst != nil {
		m["temp_files"], m["temp_bytes"], m["xacts"] = float64(worst.files), float64(worst.bytes), float64(worst.xacts)
		m["temp_files_per_1000_xacts"] = round2(ratio(worst.files, worst.xacts))
	}
	if !cumulative && !inSample {
		if worst == nil {
			return result{sev: OK, summary: "no temp files", evidence: ev, metrics: m}
		}
		return result{sev: OK, summary: fmt.Sprintf("temp files are rare (at most %.2f per 1000 transactions, in %s)", ratio(worst.files, worst.xacts), worst.name), evidence: ev, metrics: m}
	}
	avg := int64(0)
	db := e.srv.Database
	var sum string
	if worst != nil {
		avg, db = worst.bytes/max(worst.files, 1), worst.name
		sum = fmt.Sprintf("database %s wrote %d temp files (%s) in %d transactions: %.1f per 1000", worst.name, worst.files, fmtBytes(worst.bytes), worst.xacts, ratio(worst.files, worst.xacts))
	}
	if inSample {
		if sum != "" {
			sum += "; "
		}
		sum += fmt.Sprintf("%d temp files (%s) during the sample", sFiles, fmtBytes(sBytes))
		if avg == 0 {
			avg = sBytes / sFiles
		}
	}
	target, note := suggestWorkMem(e, avg)
	fix := []string{
		"ALTER SYSTEM SET log_temp_files = '10MB'; SELECT pg_reload_conf();   -- name the statements that spill in the server log",
		fmt.Sprintf("ALTER DATABASE %s SET work_mem = '%s';   -- %s; new sessions; raise step by step while temp files go on", pgx.Identifier{db}.Sanitize(), target, note),
		"ALTER SYSTEM SET hash_mem_multiplier = 4; SELECT pg_reload_conf();   -- hash joins and aggregates spill first",
	}
	if st := e.statements(ctx); st.needs == "" {
		top := topBy(st.rows, func(r pgssRow) float64 { return float64(r.TempBlksWritten) }, 3)
		for _, r := range top {
			ev = append(ev, Evidence{Text: fmt.Sprintf("queryid %d (%s): %d temp blocks written in %d calls: %s", r.QueryID, r.Database, r.TempBlksWritten, r.Calls, clip(r.Query, 120)), From: "pg_stat_statements.temp_blks_written"})
		}
	}
	return result{sev: Warning, summary: sum, evidence: ev, metrics: m, fix: fix}
}

// suggestWorkMem returns the work_mem to suggest against temp files of
// avg bytes on average (0: unknown) and what it is based on: about the
// average file (at least 4MB, at most 1GB), and always above the current
// work_mem (twice it when the average is not larger), since the spills
// happen at the current value.
func suggestWorkMem(e *env, avg int64) (string, string) {
	cur, ok := e.bytes("work_mem")
	if !ok || cur <= 0 {
		if avg <= 0 {
			return "<average temp file size>", "about the average temp file"
		}
		return fmtSetting(min(max(avg, 4<<20), 1<<30)), "about the average temp file"
	}
	if avg > 0 {
		if t := min(max(avg, 4<<20), 1<<30); t > cur {
			return fmtSetting(t), fmt.Sprintf("about the average temp file, above the current %s", e.show("work_mem"))
		}
	}
	return fmtSetting(2 * cur), fmt.Sprintf("twice the current %s (the spills happen at it)", e.show("work_mem"))
}

// topBy returns up to n rows with the largest positive key, largest first.
func topBy(rows []pgssRow, key func(pgssRow) float64, n int) []pgssRow {
	var out []pgssRow
	for _, r := range rows {
		if key(r) > 0 {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return key(out[i]) > key(out[j]) })
	if len(out) > n {
		out = out[:n]
	}
	return out
}

func init() {
	register(Check{ID: "temp-buffers", Title: "temp_buffers vs local-buffer writes", order: secMemory + 30, run: checkTempBuffers,
		Rule:    "warning when client backends wrote >= 1024 temp-relation blocks (pg_stat_io, PostgreSQL 16+)",
		Why:     "A temp table larger than temp_buffers is written to and read back from disk although it lives only as long as the session.",
		Sources: []string{srcResource, srcPgStatIO, srcFieldTemp}})
}

func checkTempBuffers(ctx context.Context, e *env) result {
	if e.srv.VersionNum < 160000 {
		return notChecked("PostgreSQL 16 or later (pg_stat_io counts local-buffer writes of temp tables)")
	}
	var reads, writes, extends, hits int64
	var since string
	err := e.conn.QueryRow(ctx, `SELECT coalesce(sum(reads), 0)::int8, coalesce(sum(writes), 0)::int8, coalesce(sum(extends), 0)::int8, coalesce(sum(hits), 0)::int8,
       coalesce(to_char(min(stats_reset), 'YYYY-MM-DD HH24:MI'), 'statistics reset')
FROM pg_catalog.pg_stat_io WHERE object = 'temp relation'`).Scan(&reads, &writes, &extends, &hits, &since)
	if err != nil {
		return failed(err)
	}
	ev := []Evidence{
		{Text: "temp_buffers = " + e.show("temp_buffers"), From: "pg_settings"},
		{Text: fmt.Sprintf("temp relations since %s: %d hits, %d reads, %d writes, %d extends (blocks)", since, hits, reads, writes, extends), From: "pg_stat_io (object 'temp relation')"},
	}
	m := map[string]float64{"temp_writes": float64(writes), "temp_reads": float64(reads), "temp_hits": float64(hits)}
	if writes >= tempWritesWarnBlocks {
		return result{sev: Warning, summary: fmt.Sprintf("temp tables overflowed temp_buffers: %d blocks (%s) written to disk and %d read back", writes, fmtBytes(writes*8192), reads), evidence: ev, metrics: m,
			fix: []string{"ALTER SYSTEM SET temp_buffers = '64MB'; SELECT pg_reload_conf();   -- per session, only as used; takes effect in new sessions (before their first temp table)",
				"# and see check memory-budget: max_connections x temp_buffers"}}
	}
	return result{sev: OK, summary: fmt.Sprintf("temp tables fit temp_buffers (%d blocks written)", writes), evidence: ev, metrics: m}
}

func init() {
	register(Check{ID: "autovacuum", Title: "Autovacuum enabled, workers, cost limit", order: secMaintenance + 10, run: checkAutovacuum,
		Rule:    "critical when autovacuum or track_counts is off; warning with < 3 workers; info when all workers are busy now",
		Why:     "Temp-table churn leaves dead catalog rows that only vacuum removes, and fresh statistics keep ERP plans sane.",
		Sources: []string{srcAutovacuum, srcAutovacuumGUC}})
}

func checkAutovacuum(ctx context.Context, e *env) result {
	ev := []Evidence{{Text: fmt.Sprintf("autovacuum = %s, track_counts = %s, autovacuum_max_workers = %s, autovacuum_naptime = %s, autovacuum_vacuum_cost_limit = %s (vacuum_cost_limit %s), autovacuum_vacuum_cost_delay = %s",
		e.show("autovacuum"), e.show("track_counts"), e.show("autovacuum_max_workers"), e.show("autovacuum_naptime"),
		e.show("autovacuum_vacuum_cost_limit"), e.show("vacuum_cost_limit"), e.show("autovacuum_vacuum_cost_delay")), From: "pg_settings"}}
	var running int
	if err := e.conn.QueryRow(ctx, `SELECT count(*)::int4 FROM pg_catalog.pg_stat_activity WHERE backend_type = 'autovacuum worker'`).Scan(&running); err == nil {
		ev = append(ev, Evidence{Text: fmt.Sprintf("%d autovacuum workers running now", running), From: "pg_stat_activity"})
	}
	workers, _ := e.num("autovacuum_max_workers")
	m := map[string]float64{"workers": workers, "running": float64(running)}
	switch {
	case !e.on("autovacuum"):
		return result{sev: Critical, summary: "autovacuum is off: dead tuples and catalog bloat grow, and only an emergency anti-wraparound vacuum still runs", evidence: ev, metrics: m,
			fix: []string{"ALTER SYSTEM SET autovacuum = on; SELECT pg_reload_conf();"}}
	case !e.on("track_counts"):
		return result{sev: Critical, summary: "track_counts is off: autovacuum cannot see which tables need it", evidence: ev, metrics: m,
			fix: []string{"ALTER SYSTEM SET track_counts = on; SELECT pg_reload_conf();"}}
	case workers < 3:
		return result{sev: Warning, summary: fmt.Sprintf("only %.0f autovacuum workers: catalogs churned by temp tables wait behind big tables", workers), evidence: ev, metrics: m,
			fix: []string{"ALTER SYSTEM SET autovacuum_max_workers = 6;   -- restart (before PostgreSQL 18)"}}
	case running >= int(workers) && workers > 0:
		return result{sev: Info, summary: fmt.Sprintf("all %.0f autovacuum workers busy now", workers), evidence: ev, metrics: m,
			fix: []string{"ALTER SYSTEM SET autovacuum_vacuum_cost_limit = 2000; SELECT pg_reload_conf();   -- let each worker do more per cycle"}}
	}
	return result{sev: OK, summary: fmt.Sprintf("autovacuum on with %.0f workers", workers), evidence: ev, metrics: m}
}

func init() {
	register(Check{ID: "jit", Title: "JIT on an OLTP workload", order: secStatements + 40, run: checkJIT,
		Rule:    "warning when JIT compile time is >= 10 % of execution time in pg_stat_statements; info when jit is on and used or unmeasurable",
		Why:     "JIT compiles a costly plan on every execution, which costs more than it saves for the short queries of an OLTP workload.",
		Sources: []string{srcJIT, srcPgss}})
}

func checkJIT(ctx context.Context, e *env) result {
	ev := []Evidence{{Text: fmt.Sprintf("jit = %s, jit_above_cost = %s", e.show("jit"), e.show("jit_above_cost")), From: "pg_settings"}}
	if !e.on("jit") {
		return result{sev: OK, summary: "jit = off", evidence: ev}
	}
	var avail bool
	if err := e.conn.QueryRow(ctx, `SELECT pg_catalog.pg_jit_available()`).Scan(&avail); err == nil {
		ev = append(ev, Evidence{Text: fmt.Sprintf("pg_jit_available() = %t", avail), From: "pg_jit_available()"})
		if !avail {
			return result{sev: OK, summary: "jit = on but JIT is not available (no LLVM provider): no effect", evidence: ev}
		}
	}
	fix := []string{"ALTER SYSTEM SET jit = off; SELECT pg_reload_conf();   -- OLTP: compile time is paid on every execution of a costly plan"}
	st := e.statements(ctx)
	if st.needs != "" || !st.hasJIT {
		why := "pg_stat_statements 1.10+ (PostgreSQL 15+)"
		if st.needs != "" {
			why = st.needs
		}
		return result{sev: Info, summary: "jit = on; measuring its cost needs " + why, evidence: ev, fix: fix}
	}
	var jitMs, execMs float64
	var funcs int64
	for _, r := range st.rows {
		jitMs += r.JITMs
		execMs += r.TotalExecMs
		funcs += r.JITFunctions
	}
	share := 100 * jitMs / max(execMs, 1e-9)
	ev = append(ev, Evidence{Text: fmt.Sprintf("JIT: %d functions compiled in %.1f ms, %.1f %% of %.1f ms total execution time", funcs, jitMs, share, execMs), From: "pg_stat_statements.jit_*"})
	for _, r := range topBy(st.rows, func(r pgssRow) float64 { return r.JITMs }, 3) {
		ev = append(ev, Evidence{Text: fmt.Sprintf("queryid %d (%s): JIT %.1f ms vs execution %.1f ms in %d calls: %s", r.QueryID, r.Database, r.JITMs, r.TotalExecMs, r.Calls, clip(r.Query, 100)), From: "pg_stat_statements"})
	}
	m := map[string]float64{"jit_ms": round2(jitMs), "exec_ms": round2(execMs), "jit_share_pct": round2(share)}
	switch {
	case share >= jitShareWarn:
		return result{sev: Warning, summary: fmt.Sprintf("JIT compilation is %.1f %% of execution time", share), evidence: ev, metrics: m, fix: fix}
	case funcs > 0:
		return result{sev: Info, summary: fmt.Sprintf("JIT used (%d functions, %.1f %% of execution time)", funcs, share), evidence: ev, metrics: m, fix: fix}
	}
	return result{sev: OK, summary: "jit = on but no statement was JIT-compiled", evidence: ev, metrics: m}
}

func init() {
	register(Check{ID: "wraparound", Title: "Transaction ID and multixact wraparound age", order: secMaintenance + 20, run: checkWraparound,
		Rule:    "critical at age >= 1.5 billion; warning at >= 1.5 x autovacuum_freeze_max_age (or the multixact one)",
		Why:     "Near 2^31 transactions the server stops assigning transaction IDs to avoid data loss and needs a long vacuum to recover.",
		Sources: []string{srcWraparound}})
}

func checkWraparound(ctx context.Context, e *env) result {
	var db string
	var xid, mxid int64
	err := e.conn.QueryRow(ctx, `SELECT datname::text, pg_catalog.age(datfrozenxid)::int8
FROM pg_catalog.pg_database ORDER BY 2 DESC LIMIT 1`).Scan(&db, &xid)
	if err != nil {
		return failed(err)
	}
	var mdb string
	if err := e.conn.QueryRow(ctx, `SELECT datname::text, pg_catalog.mxid_age(datminmxid)::int8 FROM pg_catalog.pg_database ORDER BY 2 DESC LIMIT 1`).Scan(&mdb, &mxid); err != nil {
		return failed(err)
	}
	fma, _ := e.num("autovacuum_freeze_max_age")
	mfma, _ := e.num("autovacuum_multixact_freeze_max_age")
	ev := []Evidence{
		{Text: fmt.Sprintf("oldest datfrozenxid: database %s, age %d transactions (autovacuum_freeze_max_age %.0f)", db, xid, fma), From: "pg_database.datfrozenxid"},
		{Text: fmt.Sprintf("oldest datminmxid: database %s, age %d multixacts (autovacuum_multixact_freeze_max_age %.0f)", mdb, mxid, mfma), From: "pg_database.datminmxid"},
	}
	m := map[string]float64{"xid_age": float64(xid), "mxid_age": float64(mxid)}
	fix := []string{
		fmt.Sprintf("-- in database %s, find the oldest tables: SELECT oid::regclass, age(relfrozenxid) FROM pg_class WHERE relkind IN ('r','m','t') ORDER BY 2 DESC LIMIT 10;", db),
		"VACUUM (FREEZE, VERBOSE) <table>;   -- and look for what holds xmin back: long transactions, prepared transactions, replication slots",
	}
	switch {
	case xid >= wraparoundCritical || mxid >= wraparoundCritical:
		return result{sev: Critical, summary: fmt.Sprintf("transaction ID age %d / multixact age %d: the server stops assigning IDs near 2^31", xid, mxid), evidence: ev, metrics: m, fix: fix}
	case float64(xid) >= freezeWarnFactor*fma || float64(mxid) >= freezeWarnFactor*mfma:
		return result{sev: Warning, summary: fmt.Sprintf("transaction ID age %d / multixact age %d: anti-wraparound vacuum is not keeping up", xid, mxid), evidence: ev, metrics: m, fix: fix}
	}
	return result{sev: OK, summary: fmt.Sprintf("transaction ID age %d, multixact age %d", xid, mxid), evidence: ev, metrics: m}
}

// failed turns a query error of a check into a NotChecked finding that
// could not run (Failed).
func failed(err error) result {
	needs := "its query to succeed: " + oneLine(err)
	return result{sev: NotChecked, summary: "not checked: " + oneLine(err), needs: needs, couldNotRun: Failed}
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// fmtDur formats a duration to whole seconds, or ms under a second.
func fmtDur(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// fmtSetting formats bytes as a PostgreSQL memory setting ("64MB", "1GB").
func fmtSetting(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%dGB", b>>30)
	case b >= 1<<20:
		return fmt.Sprintf("%dMB", (b+(1<<20)-1)>>20)
	}
	return fmt.Sprintf("%dkB", (b+1023)>>10)
}

// clip collapses whitespace and cuts s to n characters.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
