package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	tmpfsfix "github.com/erplab/erplab/internal/remedy/tmpfs"
)

// Sources of the catalog and wait rules.
const (
	srcHeapCreate    = "src/backend/catalog/heap.c (heap_create_with_catalog: rows in pg_class, pg_type, pg_attribute, pg_depend per table)"
	srcPgStatTables  = "https://www.postgresql.org/docs/current/monitoring-stats.html#MONITORING-PG-STAT-ALL-TABLES-VIEW"
	srcPgstattuple   = "https://www.postgresql.org/docs/current/pgstattuple.html"
	srcTempTblspc    = "https://www.postgresql.org/docs/current/runtime-config-client.html#GUC-TEMP-TABLESPACES"
	srcTablespaces   = "https://www.postgresql.org/docs/current/manage-ag-tablespaces.html"
	srcTmpfsKernel   = "https://docs.kernel.org/filesystems/tmpfs.html (Documentation/filesystems/tmpfs.rst)"
	srcWaitEvents    = "https://www.postgresql.org/docs/current/monitoring-stats.html#WAIT-EVENT-LWLOCK-TABLE"
	srcLockManager   = "src/backend/storage/lmgr/README (fast-path locks, lock manager partitions)"
	srcSinval        = "src/backend/storage/ipc/sinvaladt.c (shared invalidation queue, MAXNUMMESSAGES, catch-up and reset)"
	srcFieldCatalog  = "docs/field-notes.md section 3 (pg_class 30 MB -> 1 GB in two hours; tmpfs temp tablespace cut file-system time 13.5 % -> 1.6 %)"
	srcFieldLockMgr  = "docs/field-notes.md section 1 (active sessions jumped to thousands waiting on LWLock:LockManager; shared invalidation queue)"
	tmpfsFixCommand  = "erplab doctor fix tmpfs-temp-tablespace --size 2G --dsn '<dsn>'   # prints the procedure; --apply performs it on a local server as root"
	catalogRelsQuery = `SELECT s.relname::text, pg_catalog.pg_total_relation_size(s.relid), s.n_live_tup, s.n_dead_tup,
       coalesce(to_char(greatest(s.last_vacuum, s.last_autovacuum), 'YYYY-MM-DD HH24:MI'), 'never')
FROM pg_catalog.pg_stat_sys_tables s
WHERE s.schemaname = 'pg_catalog' AND s.relname IN ('pg_class', 'pg_attribute', 'pg_depend', 'pg_type')
ORDER BY s.relname`
)

// Thresholds of the catalog and wait checks.
const (
	// catalogSizeWarn: the four catalogs together at or above this are a
	// warning (the field saw pg_class alone grow from 30 MB to 1 GB).
	catalogSizeWarn = 1 << 30
	// catalogDeadShareWarn and catalogDeadMin: a catalog with at least
	// this share of dead tuples and at least this many is a warning.
	catalogDeadShareWarn = 0.20
	catalogDeadMin       = 10_000
	// bloatMinBytes and bloatShareWarn: pgstattuple_approx free + dead
	// space at or above this share of a catalog at least this big.
	bloatMinBytes  = 64 << 20
	bloatShareWarn = 50.0
	// churnWarnPerS: pg_class rows inserted per second during the sample
	// (about one per temp table and one per index) at or above this are a
	// warning: temp tables are created and dropped at a high rate.
	churnWarnPerS = 50.0
	// tmpfsFullWarn: a tmpfs temp tablespace this full (%) is a warning.
	tmpfsFullWarn = 90.0
	// LWLock waits: share of active session-samples, with at least
	// waitMinActive active sessions on average.
	lockMgrWarnShare = 0.20
	lockMgrCritShare = 0.50
	lockMgrCritAvg   = 10.0
	sinvalWarnShare  = 0.05
	waitMinActive    = 1.0
)

type catRel struct {
	name       string
	bytes      int64
	live, dead int64
	lastVacuum string
}

func (e *env) catalogRels(ctx context.Context) ([]catRel, error) {
	rows, err := e.conn.Query(ctx, catalogRelsQuery)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (catRel, error) {
		var c catRel
		err := r.Scan(&c.name, &c.bytes, &c.live, &c.dead, &c.lastVacuum)
		return c, err
	})
}

func checkCatalogSize(ctx context.Context, e *env) result {
	rels, err := e.catalogRels(ctx)
	if err != nil {
		return failed(err)
	}
	var total int64
	var ev []Evidence
	m := map[string]float64{}
	var worst *catRel
	worstShare := 0.0
	for i := range rels {
		c := &rels[i]
		total += c.bytes
		share := float64(c.dead) / float64(max(c.live+c.dead, 1))
		ev = append(ev, Evidence{Text: fmt.Sprintf("%s: %s, %d live and %d dead tuples (%.0f %% dead), last vacuum %s", c.name, fmtBytes(c.bytes), c.live, c.dead, 100*share, c.lastVacuum),
			From: "pg_total_relation_size, pg_stat_sys_tables (database " + e.srv.Database + ")"})
		m[c.name+"_bytes"] = float64(c.bytes)
		m[c.name+"_dead"] = float64(c.dead)
		m[c.name+"_dead_pct"] = round2(100 * share)
		if c.dead >= catalogDeadMin && share >= catalogDeadShareWarn && share > worstShare {
			worst, worstShare = c, share
		}
	}
	m["total_bytes"] = float64(total)
	fix := []string{
		"VACUUM (VERBOSE) pg_catalog.pg_class, pg_catalog.pg_attribute, pg_catalog.pg_depend, pg_catalog.pg_type;",
		"-- if they stay big: VACUUM FULL of these catalogs takes an ACCESS EXCLUSIVE lock on them (every query waits): maintenance window only",
		"ALTER SYSTEM SET autovacuum_naptime = '15s'; SELECT pg_reload_conf();   -- visit churned catalogs more often",
		"# and reduce the churn itself: see checks catalog-churn and temp-tablespace",
	}
	switch {
	case total >= catalogSizeWarn:
		return result{sev: Warning, summary: fmt.Sprintf("catalogs pg_class, pg_attribute, pg_depend, pg_type take %s in database %s", fmtBytes(total), e.srv.Database), evidence: ev, metrics: m, fix: fix}
	case worst != nil:
		return result{sev: Warning, summary: fmt.Sprintf("%s is %.0f %% dead tuples (%d dead): temp-table DDL churns the catalog faster than vacuum cleans it", worst.name, 100*worstShare, worst.dead), evidence: ev, metrics: m, fix: fix}
	}
	return result{sev: OK, summary: fmt.Sprintf("catalogs take %s, dead tuples under %.0f %% or fewer than %d", fmtBytes(total), 100*catalogDeadShareWarn, catalogDeadMin), evidence: ev, metrics: m}
}

func checkCatalogBloat(ctx context.Context, e *env) result {
	var schema string
	err := e.conn.QueryRow(ctx, `SELECT n.nspname::text FROM pg_catalog.pg_extension x JOIN pg_catalog.pg_namespace n ON n.oid = x.extnamespace WHERE x.extname = 'pgstattuple'`).Scan(&schema)
	if errors.Is(err, pgx.ErrNoRows) {
		return notChecked("pgstattuple: CREATE EXTENSION pgstattuple in database " + e.srv.Database + " (and superuser or pg_stat_scan_tables)")
	}
	if err != nil {
		return failed(err)
	}
	fn := pgx.Identifier{schema, "pgstattuple_approx"}.Sanitize()
	rows, err := e.conn.Query(ctx, `SELECT c.relname::text, a.table_len, a.approx_free_percent, a.dead_tuple_percent
FROM unnest(ARRAY['pg_class', 'pg_attribute', 'pg_depend', 'pg_type']) AS c(relname),
     LATERAL `+fn+`(('pg_catalog.' || c.relname)::regclass) a ORDER BY 1`)
	if err != nil {
		return notChecked("permission to run pgstattuple_approx (superuser or pg_stat_scan_tables): " + oneLine(err))
	}
	type bl struct {
		name       string
		size       int64
		free, dead float64
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (bl, error) {
		var b bl
		err := r.Scan(&b.name, &b.size, &b.free, &b.dead)
		return b, err
	})
	if err != nil {
		return notChecked("permission to run pgstattuple_approx (superuser or pg_stat_scan_tables): " + oneLine(err))
	}
	var ev []Evidence
	m := map[string]float64{}
	var worst *bl
	for i := range list {
		b := &list[i]
		ev = append(ev, Evidence{Text: fmt.Sprintf("%s: heap %s, %.1f %% free space, %.1f %% dead tuples", b.name, fmtBytes(b.size), b.free, b.dead), From: "pgstattuple_approx"})
		m[b.name+"_wasted_pct"] = round2(b.free + b.dead)
		if b.size >= bloatMinBytes && b.free+b.dead >= bloatShareWarn && (worst == nil || b.free+b.dead > worst.free+worst.dead) {
			worst = b
		}
	}
	if worst != nil {
		return result{sev: Warning, summary: fmt.Sprintf("%s is %.0f %% free space and dead tuples (heap %s)", worst.name, worst.free+worst.dead, fmtBytes(worst.size)), evidence: ev, metrics: m,
			fix: []string{fmt.Sprintf("VACUUM FULL pg_catalog.%s;   -- ACCESS EXCLUSIVE lock on the catalog: every query waits; maintenance window only", worst.name)}}
	}
	return result{sev: OK, summary: fmt.Sprintf("no catalog of %s or more is over %.0f %% free space and dead tuples", fmtBytes(bloatMinBytes), bloatShareWarn), evidence: ev, metrics: m}
}

func checkCatalogChurn(_ context.Context, e *env) result {
	d := e.smp
	var ev []Evidence
	m := map[string]float64{}
	var classIns float64
	for _, rel := range []string{"pg_class", "pg_attribute", "pg_depend", "pg_type"} {
		ins, upd, del, a, b, ok := d.catalogDelta(rel)
		if !ok {
			continue
		}
		t := max(d.elapsed, 1e-9)
		insS, updS, delS := round2(float64(ins)/t), round2(float64(upd)/t), round2(float64(del)/t)
		growth := round2(float64(b.Bytes-a.Bytes) / t)
		ev = append(ev, Evidence{Text: fmt.Sprintf("%s: %.1f inserts/s, %.1f updates/s, %.1f deletes/s, size %s -> %s", rel, insS, updS, delS, fmtBytes(a.Bytes), fmtBytes(b.Bytes)),
			From: fmt.Sprintf("pg_stat_sys_tables over the %.1f s sample (database %s)", d.elapsed, e.srv.Database)})
		m[rel+"_ins_per_s"], m[rel+"_del_per_s"], m[rel+"_growth_bytes_per_s"] = insS, delS, growth
		if rel == "pg_class" {
			classIns = insS
		}
	}
	if len(ev) == 0 {
		return notChecked("catalog counters in the sample")
	}
	if classIns >= churnWarnPerS {
		return result{sev: Warning, summary: fmt.Sprintf("%.0f pg_class rows inserted per second: temp tables and their indexes are created (and dropped) at a high rate", classIns), evidence: ev, metrics: m,
			fix: []string{
				"# every CREATE/DROP of a temp table or index writes catalog rows and shared-invalidation messages:",
				"# reuse temp tables (TRUNCATE instead of DROP) where the application allows, and move their files to tmpfs",
				"# unless check temp-tablespace finds them there already:",
				tmpfsFixCommand,
				"ALTER SYSTEM SET autovacuum_naptime = '15s'; SELECT pg_reload_conf();   -- vacuum the churned catalogs more often",
			}}
	}
	return result{sev: OK, summary: fmt.Sprintf("catalog churn low (%.1f pg_class inserts/s)", classIns), evidence: ev, metrics: m}
}

// tablespaceDir is where temp files of the connected database go in a
// tablespace: <location>/PG_<major>_<catversion>/<dboid>, or
// <data_directory>/base/<dboid> for pg_default (src/include/catalog/
// catversion.h, TABLESPACE_VERSION_DIRECTORY; src/common/relpath.c).
func (e *env) tablespaceDir(location string) (string, error) {
	if location == "" {
		dd := e.show("data_directory")
		if dd == "" {
			return "", errors.New("data_directory is not visible to this role")
		}
		return filepath.Join(dd, "base", strconv.FormatUint(uint64(e.dbOID), 10)), nil
	}
	prefix := fmt.Sprintf("PG_%d_", e.srv.VersionNum/10000)
	ents, err := os.ReadDir(location)
	if err != nil {
		return "", err
	}
	for _, de := range ents {
		if de.IsDir() && strings.HasPrefix(de.Name(), prefix) {
			return filepath.Join(location, de.Name(), strconv.FormatUint(uint64(e.dbOID), 10)), nil
		}
	}
	return "", fmt.Errorf("no %s* directory in %s", prefix, location)
}

func checkTempTablespace(ctx context.Context, e *env) result {
	val := e.show("temp_tablespaces")
	names := tmpfsfix.TablespaceNames(val)
	ev := []Evidence{{Text: fmt.Sprintf("temp_tablespaces = '%s' (as this session sees it in database %s)", val, e.srv.Database), From: "pg_settings"}}
	m := map[string]float64{"on_tmpfs": 0}
	churn := -1.0
	if e.smp != nil {
		if ins, _, _, _, _, ok := e.smp.catalogDelta("pg_class"); ok {
			churn = round2(float64(ins) / max(e.smp.elapsed, 1e-9))
			ev = append(ev, Evidence{Text: fmt.Sprintf("temp-table churn: %.1f pg_class inserts/s during the sample", churn), From: "pg_stat_sys_tables"})
			m["pg_class_ins_per_s"] = churn
		}
	}
	high := churn >= churnWarnPerS
	fixTmpfs := []string{tmpfsFixCommand}
	if len(names) == 0 {
		names = []string{"pg_default"}
	}
	allTmpfs, fsKnown := true, e.host != nil
	var full []string
	for _, name := range names {
		var loc string
		err := e.conn.QueryRow(ctx, `SELECT pg_catalog.pg_tablespace_location(oid) FROM pg_catalog.pg_tablespace WHERE spcname = $1`, name).Scan(&loc)
		if errors.Is(err, pgx.ErrNoRows) {
			ev = append(ev, Evidence{Text: fmt.Sprintf("tablespace %q does not exist (ignored by the server)", name), From: "pg_tablespace"})
			allTmpfs = false
			continue
		}
		if err != nil {
			return failed(err)
		}
		if !fsKnown {
			allTmpfs = false
			continue
		}
		dir, err := e.tablespaceDir(loc)
		if err != nil {
			ev = append(ev, Evidence{Text: fmt.Sprintf("tablespace %s: %v", name, err), From: "pg_tablespace_location"})
			allTmpfs, fsKnown = false, false
			continue
		}
		path := dir
		if p, err := filepath.EvalSymlinks(dir); err == nil {
			path = p
		}
		fsType, mp, err := tmpfsfix.MountOf(e.host.fs.ProcRoot(), path)
		if err != nil {
			ev = append(ev, Evidence{Text: err.Error(), From: e.host.procPath("self", "mountinfo")})
			allTmpfs, fsKnown = false, false
			continue
		}
		ev = append(ev, Evidence{Text: fmt.Sprintf("tablespace %s: temp files of this database go to %s, on %s mounted at %s", name, dir, fsType, mp), From: e.host.procPath("self", "mountinfo")})
		if fsType != "tmpfs" {
			allTmpfs = false
			continue
		}
		var st unix.Statfs_t
		if err := unix.Statfs(path, &st); err == nil && st.Blocks > 0 {
			used := 100 * float64(st.Blocks-st.Bfree) / float64(st.Blocks)
			ev = append(ev, Evidence{Text: fmt.Sprintf("tmpfs %s: %.1f %% of %s used", mp, used, fmtBytes(int64(st.Blocks)*int64(st.Bsize))), From: "statfs(2)"})
			m["tmpfs_used_pct"] = round2(used)
			if used >= tmpfsFullWarn {
				full = append(full, mp)
			}
		}
	}
	if fsKnown && allTmpfs {
		m["on_tmpfs"] = 1
	}
	switch {
	case len(full) > 0:
		return result{sev: Warning, summary: fmt.Sprintf("tmpfs temp tablespace %s is over %.0f %% full: when full, INSERT and even TRUNCATE of temp tables fail; only DROP TABLE frees space", strings.Join(full, ", "), tmpfsFullWarn), evidence: ev, metrics: m,
			fix: []string{fmt.Sprintf("mount -o remount,size=<larger> %s   # tmpfs can grow online; it takes RAM (and swap) only as filled", full[0])}}
	case fsKnown && allTmpfs:
		return result{sev: OK, summary: "temp tables go to tmpfs", evidence: ev, metrics: m}
	case high && val == "":
		return result{sev: Warning, summary: fmt.Sprintf("temp tables churn (%.0f pg_class inserts/s) in the default tablespace: every CREATE, TRUNCATE and DROP creates or unlinks files on the data disk", churn), evidence: ev, metrics: m, fix: fixTmpfs}
	case high && fsKnown:
		return result{sev: Warning, summary: fmt.Sprintf("temp tables churn (%.0f pg_class inserts/s) and temp_tablespaces is not on tmpfs", churn), evidence: ev, metrics: m, fix: fixTmpfs}
	case high:
		return result{sev: Info, summary: fmt.Sprintf("temp tables churn (%.0f pg_class inserts/s); the file system under temp_tablespaces could not be checked", churn), evidence: ev, metrics: m, fix: fixTmpfs}
	case churn < 0:
		return result{sev: OK, summary: "temp-table churn not measured (no sample); temp_tablespaces = '" + val + "'", evidence: ev, metrics: m}
	}
	return result{sev: OK, summary: fmt.Sprintf("temp-table churn low (%.1f pg_class inserts/s); a tmpfs temp tablespace would not pay", churn), evidence: ev, metrics: m}
}

// waitShares sums active session-samples and those waiting on the lock
// manager and on the shared invalidation queue over the sample.
func waitShares(e *env) (active, lockMgr, sinval int, avg float64, top []string) {
	byKey := map[string]int{}
	for _, s := range e.smp.series {
		active += s.Sessions.Active
		for k, n := range s.Waits {
			byKey[k] += n
			switch k {
			case "LWLock:LockManager", "LWLock:lock_manager":
				lockMgr += n
			case "LWLock:SInvalRead", "LWLock:SInvalWrite", "LWLock:SInvalReadLock", "LWLock:SInvalWriteLock":
				sinval += n
			}
		}
	}
	avg = float64(active) / float64(max(len(e.smp.series), 1))
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if byKey[keys[i]] != byKey[keys[j]] {
			return byKey[keys[i]] > byKey[keys[j]]
		}
		return keys[i] < keys[j]
	})
	for i, k := range keys {
		if i == 5 {
			break
		}
		top = append(top, fmt.Sprintf("%s %d", k, byKey[k]))
	}
	return
}

func checkLWLockWaits(_ context.Context, e *env) result {
	active, lm, si, avg, top := waitShares(e)
	share := func(n int) float64 { return float64(n) / float64(max(active, 1)) }
	ev := []Evidence{
		{Text: fmt.Sprintf("%d samples over %.1f s: %.1f active sessions on average; LWLock:LockManager %.1f %%, SInval %.1f %% of active session-samples",
			len(e.smp.series), e.smp.elapsed, avg, 100*share(lm), 100*share(si)), From: "pg_stat_activity (wait_event_type, wait_event)"},
	}
	if len(top) > 0 {
		ev = append(ev, Evidence{Text: "wait events (session-samples): " + strings.Join(top, ", "), From: "pg_stat_activity"})
	}
	for _, st := range e.smp.storms {
		ev = append(ev, Evidence{Text: "storm at " + fmt.Sprintf("%.1f s: %s", st.T, st.Message), From: "sampler storm rule (package storm)"})
	}
	m := map[string]float64{"avg_active": round2(avg), "lockmanager_share_pct": round2(100 * share(lm)), "sinval_share_pct": round2(100 * share(si)), "storms": float64(len(e.smp.storms))}
	fix := []string{
		"# LockManager: too many relations locked per transaction (temp tables, partitions, indexes) exceed the 16 fast-path slots;",
		"# fewer temp tables/indexes per transaction, fewer partitions touched, a pooler to cap concurrent active sessions",
		"# SInval: catalog DDL (CREATE/DROP temp tables and indexes) floods the shared invalidation queue; see checks catalog-churn and temp-tablespace",
	}
	lmShare, siShare := share(lm), share(si)
	switch {
	case avg >= lockMgrCritAvg && lmShare >= lockMgrCritShare:
		return result{sev: Critical, summary: fmt.Sprintf("%.0f %% of active sessions wait on LWLock:LockManager (%.1f active on average)", 100*lmShare, avg), evidence: ev, metrics: m, fix: fix}
	case avg >= waitMinActive && lmShare >= lockMgrWarnShare:
		return result{sev: Warning, summary: fmt.Sprintf("%.0f %% of active sessions wait on LWLock:LockManager", 100*lmShare), evidence: ev, metrics: m, fix: fix}
	case avg >= waitMinActive && siShare >= sinvalWarnShare:
		return result{sev: Warning, summary: fmt.Sprintf("%.0f %% of active sessions wait on the shared invalidation queue (SInval)", 100*siShare), evidence: ev, metrics: m, fix: fix}
	case len(e.smp.storms) > 0:
		return result{sev: Warning, summary: "session storm during the sample: " + e.smp.storms[0].Message, evidence: ev, metrics: m, fix: fix}
	}
	return result{sev: OK, summary: fmt.Sprintf("no lock-manager or invalidation waits of note (%.1f active on average)", avg), evidence: ev, metrics: m}
}
