package doctor

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	tmpfsfix "github.com/erplab/erplab/internal/remedy/tmpfs"
	"github.com/erplab/erplab/internal/sampler"
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
	srcFastPath      = "src/include/storage/proc.h (FP_LOCK_SLOTS_PER_BACKEND 16); pg_locks.fastpath (https://www.postgresql.org/docs/current/view-pg-locks.html)"
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

// catRel is one catalog's size and tuple counts (pg_stat_sys_tables).
type catRel struct {
	Name       string `json:"name"`
	Bytes      int64  `json:"bytes"`
	Live       int64  `json:"live"`
	Dead       int64  `json:"dead"`
	LastVacuum string `json:"last_vacuum"`
}

func (e *env) catalogRels(ctx context.Context) ([]catRel, error) {
	if e.rec != nil {
		if e.rec.Catalog == nil {
			return nil, errNotRecorded("catalog")
		}
		return e.rec.Catalog, nil
	}
	rows, err := e.conn.Query(ctx, catalogRelsQuery)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (catRel, error) {
		var c catRel
		err := r.Scan(&c.Name, &c.Bytes, &c.Live, &c.Dead, &c.LastVacuum)
		return c, err
	})
}

// vacuumFix returns fix unchanged, or, when a holder of the xmin horizon
// blocks dead-tuple removal, the commands that release it instead (a
// VACUUM would remove nothing) and the evidence naming it.
func (e *env) vacuumFix(ctx context.Context, fix []string) ([]string, []Evidence, *holder) {
	hz, err := e.horizon(ctx)
	if err != nil {
		return fix, []Evidence{{Text: "xmin horizon holders not read: " + oneLine(err), From: "pg_stat_activity, pg_prepared_xacts, pg_replication_slots"}}, nil
	}
	b := hz.blocker()
	if b == nil {
		return fix, nil, nil
	}
	out := []string{"# VACUUM removes nothing while the xmin horizon is held; release the holder first (" + b.Kind + "):"}
	out = append(out, b.fix()...)
	out = append(out, "# then autovacuum removes the dead rows on its next visit; see check xmin-horizon")
	return out, []Evidence{{Text: "dead tuples cannot be removed: the xmin horizon is held by " + b.String(), From: "pg_stat_activity, pg_prepared_xacts, pg_replication_slots"}}, b
}

func init() {
	register(Check{ID: "catalog-size", Title: "Catalog size and dead tuples", order: secCatalog + 10, run: checkCatalogSize,
		Rule:    "warning when pg_class + pg_attribute + pg_depend + pg_type >= 1 GiB, or one of them has >= 20 % and >= 10,000 dead tuples",
		Why:     "Every temp table and index adds and removes catalog rows; a bloated catalog slows every cache miss, planning and autovacuum.",
		Sources: []string{srcHeapCreate, srcPgStatTables, srcFieldCatalog}})
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
		total += c.Bytes
		share := float64(c.Dead) / float64(max(c.Live+c.Dead, 1))
		ev = append(ev, Evidence{Text: fmt.Sprintf("%s: %s, %d live and %d dead tuples (%.0f %% dead), last vacuum %s", c.Name, fmtBytes(c.Bytes), c.Live, c.Dead, 100*share, c.LastVacuum),
			From: "pg_total_relation_size, pg_stat_sys_tables (database " + e.srv.Database + ")"})
		m[c.Name+"_bytes"] = float64(c.Bytes)
		m[c.Name+"_dead"] = float64(c.Dead)
		m[c.Name+"_dead_pct"] = round2(100 * share)
		if c.Dead >= catalogDeadMin && share >= catalogDeadShareWarn && share > worstShare {
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
	if total < catalogSizeWarn && worst == nil {
		return result{sev: OK, summary: fmt.Sprintf("catalogs take %s, dead tuples under %.0f %% or fewer than %d", fmtBytes(total), 100*catalogDeadShareWarn, catalogDeadMin), evidence: ev, metrics: m}
	}
	fix, hev, b := e.vacuumFix(ctx, fix)
	ev = append(ev, hev...)
	held := ""
	if b != nil {
		m["held_by_xmin_age"] = float64(b.XminAge)
		held = "; the xmin horizon is held by " + b.Kind + " " + or(b.Name, fmt.Sprint(b.PID)) + ", so vacuum cannot remove them"
	}
	if total >= catalogSizeWarn {
		return result{sev: Warning, summary: fmt.Sprintf("catalogs pg_class, pg_attribute, pg_depend, pg_type take %s in database %s%s", fmtBytes(total), e.srv.Database, held), evidence: ev, metrics: m, fix: fix}
	}
	if b != nil {
		return result{sev: Warning, summary: fmt.Sprintf("%s is %.0f %% dead tuples (%d dead)%s", worst.Name, 100*worstShare, worst.Dead, held), evidence: ev, metrics: m, fix: fix}
	}
	return result{sev: Warning, summary: fmt.Sprintf("%s is %.0f %% dead tuples (%d dead): temp-table DDL churns the catalog faster than vacuum cleans it", worst.Name, 100*worstShare, worst.Dead), evidence: ev, metrics: m, fix: fix}
}

func init() {
	register(Check{ID: "catalog-bloat", Title: "Catalog free space (pgstattuple)", order: secCatalog + 20, run: checkCatalogBloat,
		Rule:    "warning when a catalog of >= 64 MiB is >= 50 % free space and dead tuples (pgstattuple_approx)",
		Why:     "Space freed by vacuum stays in the catalog files, so scans of pg_class and pg_attribute read mostly empty pages.",
		Sources: []string{srcPgstattuple, srcFieldCatalog}})
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
		return notRun(NeedsPrivilege, "permission to run pgstattuple_approx (superuser or pg_stat_scan_tables, in pg_monitor: GRANT pg_monitor TO "+e.srv.role()+"): "+oneLine(err))
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
		return notRun(NeedsPrivilege, "permission to run pgstattuple_approx (superuser or pg_stat_scan_tables, in pg_monitor: GRANT pg_monitor TO "+e.srv.role()+"): "+oneLine(err))
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
		// VACUUM FULL copies the dead rows a held horizon still needs.
		fix, hev, _ := e.vacuumFix(ctx, []string{fmt.Sprintf("VACUUM FULL pg_catalog.%s;   -- ACCESS EXCLUSIVE lock on the catalog: every query waits; maintenance window only", worst.name)})
		return result{sev: Warning, summary: fmt.Sprintf("%s is %.0f %% free space and dead tuples (heap %s)", worst.name, worst.free+worst.dead, fmtBytes(worst.size)), evidence: append(ev, hev...), metrics: m, fix: fix}
	}
	return result{sev: OK, summary: fmt.Sprintf("no catalog of %s or more is over %.0f %% free space and dead tuples", fmtBytes(bloatMinBytes), bloatShareWarn), evidence: ev, metrics: m}
}

// churnRates are the pg_class-based churn figures of one window (or the
// whole sample), per second: inserts (CREATE), non-HOT updates
// (TRUNCATE and other relfilenode changes) and their sum, new relation
// files.
type churnRates struct {
	ins, nonHot, files float64
}

func rates(d catDelta, secs float64) churnRates {
	t := max(secs, 1e-9)
	return churnRates{ins: round2(float64(d.Ins) / t), nonHot: round2(float64(max(d.Upd-d.HotUpd, 0)) / t), files: round2(float64(d.newFiles()) / t)}
}

// churnByWindow returns the pg_class churn of the whole sample, of its
// worst window (most new files per second) and that window's number
// (1-based); ok false without catalog counters.
func churnByWindow(ws []window) (mean, worst churnRates, worstN int, ok bool) {
	tot := sumWindows(ws)
	d, ok := tot.Catalog["pg_class"]
	if !ok {
		return churnRates{}, churnRates{}, 0, false
	}
	mean = rates(d, tot.Seconds)
	for i, w := range ws {
		if r := rates(w.Catalog["pg_class"], w.Seconds); worstN == 0 || r.files > worst.files {
			worst, worstN = r, i+1
		}
	}
	return mean, worst, worstN, true
}

func init() {
	register(Check{ID: "catalog-churn", Title: "Catalog churn rate (temp-table DDL and TRUNCATE)", Needs: NeedsSample, order: secCatalog + 40, run: checkCatalogChurn,
		Rule:    "warning at >= 50 new relation files per second (pg_class inserts + non-HOT updates: CREATE, TRUNCATE, rewrites) in the worst sampling window of any database read (--catalog-databases, default all)",
		Why:     "Temp-table DDL at this rate writes catalog rows, creates and unlinks files and floods the shared invalidation queue that every backend must read.",
		Sources: []string{srcHeapCreate, srcSinval, srcFieldCatalog, srcFieldLockMgr}})
}

func checkCatalogChurn(_ context.Context, e *env) result {
	ws := e.smp.windows
	tot := sumWindows(ws)
	var ev []Evidence
	m := map[string]float64{}
	from := fmt.Sprintf("pg_stat_sys_tables read by the doctor at the bounds of %d windows over %.1f s (database %s)", len(ws), tot.Seconds, e.srv.Database)
	for _, rel := range []string{"pg_class", "pg_attribute", "pg_depend", "pg_type"} {
		d, ok := tot.Catalog[rel]
		if !ok {
			continue
		}
		t := max(tot.Seconds, 1e-9)
		insS, updS, delS := round2(float64(d.Ins)/t), round2(float64(d.Upd)/t), round2(float64(d.Del)/t)
		growth := round2(float64(d.Bytes1-d.Bytes0) / t)
		ev = append(ev, Evidence{Text: fmt.Sprintf("%s: %.1f inserts/s, %.1f updates/s (%.1f HOT), %.1f deletes/s, size %s -> %s", rel, insS, updS, round2(float64(d.HotUpd)/t), delS, fmtBytes(d.Bytes0), fmtBytes(d.Bytes1)), From: from})
		m[rel+"_ins_per_s"], m[rel+"_upd_per_s"], m[rel+"_del_per_s"], m[rel+"_growth_bytes_per_s"] = insS, updS, delS, growth
	}
	mean, worst, wn, ok := churnByWindow(ws)
	if !ok {
		return notChecked("catalog counters in the sample")
	}
	for i, w := range ws {
		r := rates(w.Catalog["pg_class"], w.Seconds)
		ev = append(ev, Evidence{Text: fmt.Sprintf("window %d (%.1f s): %.1f new relation files/s = %.1f pg_class inserts/s (CREATE) + %.1f non-HOT updates/s (TRUNCATE, rewrites)", i+1, w.Seconds, r.files, r.ins, r.nonHot), From: "pg_stat_sys_tables (pg_class n_tup_ins, n_tup_upd - n_tup_hot_upd)"})
	}
	m["new_files_per_s"], m["new_files_worst_per_s"], m["pg_class_nonhot_upd_per_s"], m["windows"] = mean.files, worst.files, mean.nonHot, float64(len(ws))
	// Other databases (catalog_alldb.go): the worst of them is judged when
	// it churns more than this one.
	oev, odb, omean, oworst, own := e.smp.others.churnOthers(worst.files)
	ev = append(ev, oev...)
	where := ""
	if e.smp.others != nil {
		m["other_databases"] = float64(len(e.smp.others.windows))
	}
	if odb != "" {
		mean, worst, wn = omean, oworst, own
		where = " in database " + odb
		m["worst_database_new_files_per_s"] = oworst.files
	}
	if worst.files >= churnWarnPerS {
		fix := []string{
			"# every CREATE/DROP of a temp table or index writes catalog rows and shared-invalidation messages, and every",
			"# CREATE and TRUNCATE gives the table (and each index) a new file: reuse temp tables where the application allows,",
			"# and move their files to tmpfs unless check temp-tablespace finds them there already:",
			tmpfsFixCommand,
			"ALTER SYSTEM SET autovacuum_naptime = '15s'; SELECT pg_reload_conf();   -- vacuum the churned catalogs more often",
		}
		kind := "temp tables and their indexes are created (and dropped) at a high rate"
		if worst.nonHot > worst.ins {
			kind = "temp tables are emptied by TRUNCATE (cached temp tables, lsFusion-style): each TRUNCATE creates new files for the table and its indexes"
			fix[1] = "# TRUNCATE of a temp table gives it and each index a new file (the old one is unlinked at commit): TRUNCATE-based reuse"
			fix[2] = "# saves catalog rows but not file churn; put those files on tmpfs unless check temp-tablespace finds them there already:"
		}
		return result{sev: Warning, summary: fmt.Sprintf("%.0f new relation files per second%s in window %d of %d (mean %.0f): %.0f pg_class inserts/s and %.0f non-HOT updates/s: %s",
			worst.files, where, wn, len(ws), mean.files, worst.ins, worst.nonHot, kind), evidence: ev, metrics: m, fix: fix}
	}
	return result{sev: OK, summary: fmt.Sprintf("catalog churn low%s: %.1f new relation files/s mean, %.1f in the worst of %d windows (%.1f pg_class inserts/s, %.1f non-HOT updates/s)",
		where, mean.files, worst.files, len(ws), mean.ins, mean.nonHot), evidence: ev, metrics: m}
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
	vdir, err := versionDir(location, e.srv.VersionNum)
	if err != nil {
		return "", err
	}
	return filepath.Join(vdir, strconv.FormatUint(uint64(e.dbOID), 10)), nil
}

// tsFact is one tablespace of temp_tablespaces as the doctor found it.
type tsFact struct {
	Name   string `json:"name"`
	OID    uint32 `json:"oid,omitempty"`
	Exists bool   `json:"exists"`
	// Dir is where this database's files go in it; FSType and Mount the
	// file system under Dir ("" when not known: remote server, or Note
	// says why).
	Dir    string `json:"dir,omitempty"`
	FSType string `json:"fs_type,omitempty"`
	Mount  string `json:"mount,omitempty"`
	Note   string `json:"note,omitempty"`
	// UsedPct is the tmpfs use (statfs), -1 when not known; SizeBytes its size.
	UsedPct   float64 `json:"used_pct"`
	SizeBytes int64   `json:"size_bytes,omitempty"`
	// Permanent names up to 10 non-temporary relations (permanent or
	// unlogged) stored in it in this database; PermanentCount counts all.
	Permanent      []string `json:"permanent,omitempty"`
	PermanentCount int      `json:"permanent_count,omitempty"`
}

// permanentRelsSQL lists the non-temporary relations of the connected
// database stored in tablespace $1.
const permanentRelsSQL = `SELECT ` + relLabelSQL + `, c.relkind = 'i'
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.reltablespace = (SELECT oid FROM pg_catalog.pg_tablespace WHERE spcname = $1) AND c.relpersistence <> 't'
  AND n.nspname <> 'pg_toast'   -- TOAST tables and their indexes go with their table
ORDER BY 1`

// tablespaces reads the facts of the named tablespaces (or returns the
// recorded ones).
func (e *env) tablespaces(ctx context.Context, names []string) ([]tsFact, error) {
	if e.rec != nil {
		if e.rec.Tablespaces == nil {
			return nil, errNotRecorded("tablespaces")
		}
		return e.rec.Tablespaces, nil
	}
	var out []tsFact
	for _, name := range names {
		f := tsFact{Name: name, UsedPct: -1}
		var loc string
		err := e.conn.QueryRow(ctx, `SELECT oid, pg_catalog.pg_tablespace_location(oid) FROM pg_catalog.pg_tablespace WHERE spcname = $1`, name).Scan(&f.OID, &loc)
		if errors.Is(err, pgx.ErrNoRows) {
			out = append(out, f)
			continue
		}
		if err != nil {
			return nil, err
		}
		f.Exists = true
		rows, err := e.conn.Query(ctx, permanentRelsSQL, name)
		if err != nil {
			return nil, err
		}
		var rel string
		var isIndex bool
		if _, err := pgx.ForEachRow(rows, []any{&rel, &isIndex}, func() error {
			f.PermanentCount++
			if len(f.Permanent) < 10 {
				f.Permanent = append(f.Permanent, rel)
			}
			return nil
		}); err != nil {
			return nil, err
		}
		if e.host == nil {
			out = append(out, f)
			continue
		}
		dir, err := e.tablespaceDir(loc)
		if err != nil {
			f.Note = err.Error()
			out = append(out, f)
			continue
		}
		f.Dir = dir
		path := dir
		if p, err := filepath.EvalSymlinks(dir); err == nil {
			path = p
		}
		fsType, mp, err := tmpfsfix.MountOf(e.host.fs.ProcRoot(), path)
		if err != nil {
			f.Note = err.Error()
			out = append(out, f)
			continue
		}
		f.FSType, f.Mount = fsType, mp
		var st unix.Statfs_t
		if fsType == "tmpfs" && unix.Statfs(path, &st) == nil && st.Blocks > 0 {
			f.UsedPct = round2(100 * float64(st.Blocks-st.Bfree) / float64(st.Blocks))
			f.SizeBytes = int64(st.Blocks) * int64(st.Bsize)
		}
		out = append(out, f)
	}
	return out, nil
}

func init() {
	register(Check{ID: "temp-tablespace", Title: "Temp tablespace on tmpfs under temp-table churn", Needs: WantsSample, order: secCatalog + 50, run: checkTempTablespace,
		Rule:    "critical when a tmpfs tablespace directory of any database holds a non-temporary relation (lost at reboot); warning when churn >= 50 new relation files/s (worst window) and temp_tablespaces is empty or (local server) not on tmpfs; warning when a tmpfs temp tablespace is >= 90 % full; critical when the server log (local server) has disk_full errors on temp tables or temp files of a tablespace (pg_tblspc/<oid>/.../t<N>_<M>, pgsql_tmp): the temp tablespace is full",
		Why:     "Each CREATE, TRUNCATE and DROP of a temp table creates or unlinks files; on a disk file system that is kernel time and I/O waits a RAM-backed tmpfs avoids.",
		Sources: []string{srcTempTblspc, srcTablespaces, srcTmpfsKernel, srcFieldCatalog}})
}

func checkTempTablespace(ctx context.Context, e *env) result {
	val := e.show("temp_tablespaces")
	names := tmpfsfix.TablespaceNames(val)
	ev := []Evidence{{Text: fmt.Sprintf("temp_tablespaces = '%s' (as this session sees it in database %s)", val, e.srv.Database), From: "pg_settings"}}
	m := map[string]float64{"on_tmpfs": 0}
	churn := -1.0
	var churnText string
	if e.smp != nil {
		if mean, worst, wn, ok := churnByWindow(e.smp.windows); ok {
			churn = worst.files
			churnText = fmt.Sprintf("%.0f new relation files/s in window %d (%.0f CREATE, %.0f TRUNCATE/rewrite per s; mean %.0f)", worst.files, wn, worst.ins, worst.nonHot, mean.files)
			ev = append(ev, Evidence{Text: fmt.Sprintf("temp-table file churn: %.1f new relation files/s mean, %.1f in the worst of %d windows (%.1f pg_class inserts/s, %.1f non-HOT updates/s mean)", mean.files, worst.files, len(e.smp.windows), mean.ins, mean.nonHot), From: "pg_stat_sys_tables"})
			m["pg_class_ins_per_s"], m["new_files_per_s"], m["new_files_worst_per_s"] = mean.ins, mean.files, worst.files
		}
	}
	high := churn >= churnWarnPerS
	fixTmpfs := []string{tmpfsFixCommand}
	if len(names) == 0 {
		names = []string{"pg_default"}
	}
	facts, err := e.tablespaces(ctx, names)
	if err != nil {
		return failed(err)
	}
	allTmpfs, fsKnown := true, e.host != nil || e.rec != nil
	var full []string
	shown := map[string]bool{} // tablespaces whose relations here the evidence lists
	for _, f := range facts {
		switch {
		case !f.Exists:
			ev = append(ev, Evidence{Text: fmt.Sprintf("tablespace %q does not exist (ignored by the server)", f.Name), From: "pg_tablespace"})
			allTmpfs = false
			continue
		case f.FSType == "" && f.Note != "":
			ev = append(ev, Evidence{Text: fmt.Sprintf("tablespace %s: %s", f.Name, f.Note), From: "pg_tablespace_location, /proc/self/mountinfo"})
			allTmpfs, fsKnown = false, false
		case f.FSType == "":
			allTmpfs, fsKnown = false, false
		default:
			ev = append(ev, Evidence{Text: fmt.Sprintf("tablespace %s: temp files of this database go to %s, on %s mounted at %s", f.Name, f.Dir, f.FSType, f.Mount), From: "/proc/self/mountinfo"})
		}
		if f.PermanentCount > 0 {
			ev = append(ev, Evidence{Text: fmt.Sprintf("tablespace %s holds %d non-temporary relations in database %s: %s", f.Name, f.PermanentCount, e.srv.Database, strings.Join(f.Permanent, ", ")), From: "pg_class.reltablespace, relpersistence"})
			shown[f.Name] = true
		}
		if f.FSType != "tmpfs" {
			allTmpfs = allTmpfs && f.FSType == "tmpfs"
			continue
		}
		if f.UsedPct >= 0 {
			ev = append(ev, Evidence{Text: fmt.Sprintf("tmpfs %s: %.1f %% of %s used", f.Mount, f.UsedPct, fmtBytes(f.SizeBytes)), From: "statfs(2)"})
			m["tmpfs_used_pct"] = f.UsedPct
			if f.UsedPct >= tmpfsFullWarn {
				full = append(full, f.Mount)
			}
		}
	}
	if fsKnown && allTmpfs {
		m["on_tmpfs"] = 1
	}
	scan, scanEv := e.scanTmpfs(ctx)
	ev = append(ev, scanEv...)
	if lost := lostRelations(e.srv.Database, facts, scan); len(lost) > 0 {
		return lostResult(e.srv.Database, lost, shown, ev, m)
	}
	if r, ok := e.tempFullFromLog(ctx, facts, ev, m); ok {
		return r
	}
	switch {
	case len(full) > 0:
		return result{sev: Warning, summary: fmt.Sprintf("tmpfs temp tablespace %s is over %.0f %% full: when full, INSERT and even TRUNCATE of temp tables fail; only DROP TABLE frees space", strings.Join(full, ", "), tmpfsFullWarn), evidence: ev, metrics: m,
			fix: []string{fmt.Sprintf("mount -o remount,size=<larger> %s   # tmpfs can grow online; it takes RAM (and swap) only as filled", full[0])}}
	case fsKnown && allTmpfs:
		sum := "temp tables go to tmpfs"
		if churnText != "" {
			sum += " (" + churnText + ")"
		}
		return result{sev: OK, summary: sum, evidence: ev, metrics: m}
	case high && val == "":
		return result{sev: Warning, summary: fmt.Sprintf("temp tables churn (%s) in the default tablespace: every CREATE, TRUNCATE and DROP creates or unlinks files on the data disk", churnText), evidence: ev, metrics: m, fix: fixTmpfs}
	case high && fsKnown:
		return result{sev: Warning, summary: fmt.Sprintf("temp tables churn (%s) and temp_tablespaces is not on tmpfs", churnText), evidence: ev, metrics: m, fix: fixTmpfs}
	case high:
		return result{sev: Info, summary: fmt.Sprintf("temp tables churn (%s); the file system under temp_tablespaces could not be checked", churnText), evidence: ev, metrics: m, fix: fixTmpfs}
	case churn < 0:
		return result{sev: OK, summary: "temp-table churn not measured (no sample); temp_tablespaces = '" + val + "'", evidence: ev, metrics: m}
	}
	return result{sev: OK, summary: fmt.Sprintf("temp-table churn low (%s); a tmpfs temp tablespace would not pay", churnText), evidence: ev, metrics: m}
}

// quoteQualified quotes "schema.name" as an identifier pair.
func quoteQualified(s string) string {
	sch, name, ok := strings.Cut(s, ".")
	if !ok {
		return pgx.Identifier{s}.Sanitize()
	}
	return pgx.Identifier{sch, name}.Sanitize()
}

// lockMgrWaits are the wait events of the lock manager: its partition
// locks and the per-backend fast-path locks (a fast-path miss moves the
// lock to the shared table, so both queue on the same overflow).
var lockMgrWaits = map[string]bool{"LWLock:LockManager": true, "LWLock:lock_manager": true, "LWLock:LockFastPath": true}

// sinvalWaits are the shared invalidation queue's wait events.
var sinvalWaits = map[string]bool{"LWLock:SInvalRead": true, "LWLock:SInvalWrite": true, "LWLock:SInvalReadLock": true, "LWLock:SInvalWriteLock": true}

// waitCounts are a window's (or the sample's) session-samples. With a
// pg_wait_sampling profile, lockMgr and sinval are its mean sessions in
// those waits times the samples (waitprofile.go).
type waitCounts struct {
	samples, active int
	lockMgr, sinval float64
}

func countWaits(w window) waitCounts {
	c := waitCounts{samples: w.Samples, active: w.Active}
	if w.ProfileSeconds > 0 {
		c.lockMgr = w.profileMean(lockMgrWaits) * float64(w.Samples)
		c.sinval = w.profileMean(sinvalWaits) * float64(w.Samples)
		return c
	}
	for k, n := range w.Waits {
		switch {
		case lockMgrWaits[k]:
			c.lockMgr += float64(n)
		case sinvalWaits[k]:
			c.sinval += float64(n)
		}
	}
	return c
}

func (c waitCounts) avg() float64     { return float64(c.active) / float64(max(c.samples, 1)) }
func (c waitCounts) lmShare() float64 { return c.lockMgr / float64(max(c.active, 1)) }
func (c waitCounts) siShare() float64 { return c.sinval / float64(max(c.active, 1)) }

// topWaits lists the 5 most frequent wait events "key count".
func topWaits(w map[string]int) []string {
	var top []string
	for _, k := range keysByValue(w, 5) {
		top = append(top, fmt.Sprintf("%s %d", k, w[k]))
	}
	return top
}

func init() {
	register(Check{ID: "lwlock-waits", Title: "LWLock:LockManager and SInval waits during the sample", Needs: NeedsSample, order: secWaits + 10, run: checkLWLockWaits,
		Rule:    "judged on the worst sampling window: critical when >= 50 % of active session-samples wait on LWLock:LockManager or LockFastPath with >= 10 active on average; warning >= 20 % (>= 1 active), SInval >= 5 %, or a session storm; waits from pg_wait_sampling's 10 ms profile when it is created in the database",
		Why:     "Sessions queued on the lock manager or the invalidation queue make active sessions jump to thousands while the CPU idles.",
		Sources: []string{srcWaitEvents, srcLockManager, srcFastPath, srcSinval, srcFieldLockMgr}})
}

func checkLWLockWaits(ctx context.Context, e *env) result {
	if !e.srv.StatsPrivileged && !e.srv.Superuser {
		return needsMonitor(e, "other users' wait events are hidden")
	}
	ws := e.smp.windows
	tot := sumWindows(ws)
	all := countWaits(tot)
	// The worst window for each figure, among windows with enough active sessions.
	var lmW, siW waitCounts
	lmN, siN := 0, 0
	var ev []Evidence
	src := waitSource(ws, e.smp.profilePeriodMs)
	for i, w := range ws {
		c := countWaits(w)
		ev = append(ev, Evidence{Text: fmt.Sprintf("window %d (%.1f s, %d samples): %.1f active on average; LockManager+LockFastPath %.1f %%, SInval %.1f %%", i+1, w.Seconds, w.Samples, c.avg(), 100*c.lmShare(), 100*c.siShare()),
			From: src})
		if c.avg() < waitMinActive {
			continue
		}
		if lmN == 0 || c.lmShare() > lmW.lmShare() {
			lmW, lmN = c, i+1
		}
		if siN == 0 || c.siShare() > siW.siShare() {
			siW, siN = c, i+1
		}
	}
	head := Evidence{Text: fmt.Sprintf("%d samples in %d windows over %.1f s: %.1f active sessions on average; LWLock:LockManager + LockFastPath %.1f %% mean, %.1f %% worst window; SInval %.1f %% mean, %.1f %% worst window (of active session-samples)",
		all.samples, len(ws), tot.Seconds, all.avg(), 100*all.lmShare(), 100*lmW.lmShare(), 100*all.siShare(), 100*siW.siShare()), From: src}
	ev = append([]Evidence{head}, ev...)
	if windowsProfiled(ws) {
		if top := topProfile(tot); len(top) > 0 {
			ev = append(ev, Evidence{Text: "wait events (mean sessions, pg_wait_sampling): " + strings.Join(top, ", "), From: "pg_wait_sampling_profile"})
		}
	} else if e.rec == nil {
		ev = append(ev, waitSamplingMissing(ctx, e))
	}
	if top := topWaits(tot.Waits); len(top) > 0 {
		ev = append(ev, Evidence{Text: "wait events (session-samples): " + strings.Join(top, ", "), From: "pg_stat_activity"})
	}
	for _, st := range e.smp.storms {
		ev = append(ev, Evidence{Text: "storm at " + fmt.Sprintf("%.1f s: %s", st.T, st.Message), From: "sampler storm rule (package storm)"})
	}
	m := map[string]float64{"avg_active": round2(all.avg()), "lockmanager_share_pct": round2(100 * all.lmShare()), "sinval_share_pct": round2(100 * all.siShare()),
		"lockmanager_worst_pct": round2(100 * lmW.lmShare()), "sinval_worst_pct": round2(100 * siW.siShare()), "windows": float64(len(ws)), "storms": float64(len(e.smp.storms))}
	if windowsProfiled(ws) {
		m["pg_wait_sampling"] = 1
	}
	fix := []string{
		"# LockManager/LockFastPath: too many relations locked per transaction (temp tables, partitions, indexes) exceed the 16 fast-path slots;",
		"# fewer temp tables/indexes per transaction, fewer partitions touched, a pooler to cap concurrent active sessions",
		"# SInval: catalog DDL (CREATE/DROP temp tables and indexes) floods the shared invalidation queue; see checks catalog-churn and temp-tablespace",
	}
	held, heldOK := e.smp.locks.OpLocksFor("")
	if heldOK {
		ev = append(ev, Evidence{Text: "relation locks per backend at the samples: a backend " + held.Phrase(), From: "pg_locks (locktype relation, granted, fastpath)"})
		m["relation_locks_max"], m["relation_locks_max_outside_fastpath"] = float64(held.HeldMax), float64(held.HeldMaxOutside)
		m["relation_locks_p50"], m["relation_locks_outside_fastpath_p50"] = float64(held.HeldP50), float64(held.OutsideP50)
	}
	in := func(n int, c waitCounts) string {
		s := fmt.Sprintf("in window %d of %d (%.1f active on average; mean over the sample %.0f %%)", n, len(ws), c.avg(), 100*all.lmShare())
		if heldOK && held.HeldMaxOutside > 0 {
			s += fmt.Sprintf("; a backend holds up to %d relation locks, %d outside the %d fast-path slots", held.HeldMax, held.HeldMaxOutside, sampler.FastPathSlots)
		}
		return s
	}
	if heldOK && held.HeldMaxOutside > 0 {
		fix = append(fix, lockReductions(held)...)
	}
	switch {
	case lmN > 0 && lmW.avg() >= lockMgrCritAvg && lmW.lmShare() >= lockMgrCritShare:
		return result{sev: Critical, summary: fmt.Sprintf("%.0f %% of active sessions wait on LWLock:LockManager/LockFastPath %s", 100*lmW.lmShare(), in(lmN, lmW)), evidence: ev, metrics: m, fix: fix}
	case lmN > 0 && lmW.lmShare() >= lockMgrWarnShare:
		return result{sev: Warning, summary: fmt.Sprintf("%.0f %% of active sessions wait on LWLock:LockManager/LockFastPath %s", 100*lmW.lmShare(), in(lmN, lmW)), evidence: ev, metrics: m, fix: fix}
	case siN > 0 && siW.siShare() >= sinvalWarnShare:
		return result{sev: Warning, summary: fmt.Sprintf("%.0f %% of active sessions wait on the shared invalidation queue (SInval) in window %d of %d (mean %.0f %%)", 100*siW.siShare(), siN, len(ws), 100*all.siShare()), evidence: ev, metrics: m, fix: fix}
	case len(e.smp.storms) > 0:
		return result{sev: Warning, summary: "session storm during the sample: " + e.smp.storms[0].Message, evidence: ev, metrics: m, fix: fix}
	}
	return result{sev: OK, summary: fmt.Sprintf("no lock-manager or invalidation waits of note: LockManager+LockFastPath %.1f %% mean, %.1f %% worst of %d windows; SInval %.1f %% mean, %.1f %% worst; %.1f active on average",
		100*all.lmShare(), 100*lmW.lmShare(), len(ws), 100*all.siShare(), 100*siW.siShare(), all.avg()), evidence: ev, metrics: m}
}

// lockReductions are the fix lines of a backend seen holding relation
// locks outside the fast path: what takes fewer of them.
func lockReductions(x sampler.OpLocks) []string {
	return []string{
		fmt.Sprintf("# %d relation locks held by one backend, %d outside the %d fast-path slots (FP_LOCK_SLOTS_PER_BACKEND, src/include/storage/proc.h): each of those takes a LockManager partition LWLock; to hold fewer:",
			x.HeldMax, x.HeldMaxOutside, sampler.FastPathSlots),
		"#   touch fewer partitions (a partition key in the WHERE clause, so the planner prunes: a statement locks every partition it does not prune at plan time) and fewer indexes (the planner locks every index of every table it plans; drop unused ones);",
		"#   plan caching: a prepared statement's cached plan skips the planner's locks on the indexes it does not use (src/backend/optimizer/util/plancat.c get_relation_info; src/backend/utils/cache/plancache.c AcquireExecutorLocks: PostgreSQL 15 still locks every partition of a generic plan);",
		"#   pooling (pgbouncer in transaction mode, fewer application-server connections): fewer backends contending for the 16 partition LWLocks at once",
		"# erplab run prints this figure per key operation (relation locks per key operation; extra.observations.locks)",
	}
}

// waitSamplingMissing is the evidence of a sample without pg_wait_sampling's
// profile: what the extension lacks in this database (not created, its
// library not loaded, or both) and exactly what it needs.
func waitSamplingMissing(ctx context.Context, e *env) Evidence {
	const from = "pg_extension, shared_preload_libraries, pg_wait_sampling.profile_period"
	const src = "waits are pg_stat_activity's at each sample"
	created, err := e.extensionCreated(ctx, "pg_wait_sampling")
	if err != nil {
		return Evidence{Text: "pg_wait_sampling's profile not read (" + oneLine(err) + "): " + src, From: from}
	}
	needs := e.extensionNeeds("pg_wait_sampling", created)
	switch {
	case needs == "":
		return Evidence{Text: "pg_wait_sampling's profile not read in every window: " + src, From: from}
	case created:
		return Evidence{Text: "pg_wait_sampling is created in this database but its library is not loaded: " + src + "; its profile needs " + needs, From: from}
	}
	return Evidence{Text: "pg_wait_sampling is not created in this database: " + src + "; its profile needs " + needs, From: from}
}
