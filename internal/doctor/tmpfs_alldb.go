package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	tmpfsfix "github.com/erplab/erplab/internal/remedy/tmpfs"
	"github.com/erplab/erplab/internal/sampler"
)

// A permanent relation in a tmpfs tablespace is lost at the next reboot
// whichever database it belongs to, and pg_class is per database. A
// tablespace keeps each database's files in its own directory,
// <location>/PG_<major>_<catversion>/<database oid>, and the tmpfs fix
// mounts the tmpfs on that directory (one database's), while a tmpfs may
// also be mounted on the location itself (every database's). So the
// temp-tablespace check looks, for every tablespace but pg_default and
// pg_global and every database the role may connect to, at the file
// system under that directory (local servers only), and reads the
// databases that have one on tmpfs, one connection at a time
// (sampler.ForEachDatabase): the relations placed in those tablespaces
// (reltablespace) and, when it is the database's default tablespace
// (dattablespace), all with reltablespace 0.

// tmpfsPerm is what one database stores in one tmpfs tablespace.
type tmpfsPerm struct {
	Database   string `json:"database"`
	Tablespace string `json:"tablespace"`
	// Count is the number of non-temporary relations with storage;
	// Rels names up to 10 of them ("schema.name (kind)").
	Count int      `json:"count"`
	Rels  []string `json:"rels,omitempty"`
	// DatabaseDefault is true when the tablespace is the database's
	// default (its catalogs live there too).
	DatabaseDefault bool `json:"database_default,omitempty"`
}

// tmpfsScan is the result of the scan of all databases.
type tmpfsScan struct {
	// Dirs are the databases' directories on tmpfs, "tablespace for
	// database (mount point)"; Checked counts the database x tablespace
	// directories looked at.
	Dirs    []string `json:"dirs"`
	Checked int      `json:"checked"`
	// Read are the databases read (those with a directory on tmpfs);
	// Unread those that could not be, with the reason.
	Read   []string          `json:"read,omitempty"`
	Unread map[string]string `json:"unread,omitempty"`
	Perm   []tmpfsPerm       `json:"permanent,omitempty"`
}

// relLabelSQL names a relation of pg_class c (namespace n) as
// "schema.name (kind[, unlogged])".
const relLabelSQL = `n.nspname::text || '.' || c.relname::text || ' (' ||
       CASE c.relkind WHEN 'r' THEN 'table' WHEN 'i' THEN 'index' WHEN 'm' THEN 'materialized view' WHEN 'S' THEN 'sequence' ELSE c.relkind::text END ||
       CASE c.relpersistence WHEN 'u' THEN ', unlogged' ELSE '' END || ')'`

// tmpfsRelsSQL lists the connected database's non-temporary relations
// with storage in the tablespaces $1 (OIDs), reltablespace 0 standing for
// the database's default tablespace. TOAST tables and their indexes go
// with their table and are not listed.
//
// Rows: tablespace name, relation label.
const tmpfsRelsSQL = `SELECT t.spcname::text, ` + relLabelSQL + `
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_tablespace t ON t.oid = CASE c.reltablespace WHEN 0 THEN (SELECT dattablespace FROM pg_catalog.pg_database WHERE datname = current_database()) ELSE c.reltablespace END
WHERE t.oid = ANY($1::oid[]) AND c.relpersistence <> 't' AND c.relkind IN ('r', 'i', 'm', 'S') AND n.nspname <> 'pg_toast'
ORDER BY 1, 2`

// tmpfsPermanent scans every database for non-temporary relations in
// tmpfs tablespaces (or returns the recorded scan). Without host facts
// (a remote server: mounts unknown) it returns nil, nil.
func (e *env) tmpfsPermanent(ctx context.Context) (*tmpfsScan, error) {
	if e.rec != nil {
		if e.rec.TmpfsScan == nil {
			return nil, errNotRecorded("tmpfs_scan")
		}
		return e.rec.TmpfsScan, nil
	}
	if e.host == nil {
		return nil, nil
	}
	type tablespace struct {
		oid        int64
		name, vdir string // vdir: <location>/PG_<major>_<catversion>
	}
	rows, err := e.conn.Query(ctx, `SELECT oid::int8, spcname::text, pg_catalog.pg_tablespace_location(oid) FROM pg_catalog.pg_tablespace WHERE spcname NOT IN ('pg_default', 'pg_global') ORDER BY spcname`)
	if err != nil {
		return nil, fmt.Errorf("tablespaces: %w", err)
	}
	var tss []tablespace
	var ts tablespace
	var loc string
	if _, err := pgx.ForEachRow(rows, []any{&ts.oid, &ts.name, &loc}, func() error {
		if vdir, err := versionDir(loc, e.srv.VersionNum); err == nil {
			ts.vdir = vdir
			tss = append(tss, ts)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("tablespaces: %w", err)
	}
	scan := &tmpfsScan{Unread: map[string]string{}}
	if len(tss) == 0 {
		return scan, nil
	}
	dbs, err := sampler.Databases(ctx, e.conn)
	if err != nil {
		return nil, err
	}
	onTmpfs := map[string][]int64{} // database -> tablespace OIDs whose directory for it is on tmpfs
	defaults := map[string]int64{}  // database -> default tablespace OID
	tsName := map[int64]string{}    // OID -> name
	var names []string
	for _, db := range dbs {
		defaults[db.Name] = int64(db.Tablespace)
		for _, t := range tss {
			tsName[t.oid] = t.name
			scan.Checked++
			dir := filepath.Join(t.vdir, strconv.FormatUint(uint64(db.OID), 10))
			if p, err := filepath.EvalSymlinks(dir); err == nil {
				dir = p
			}
			if fs, mp, err := tmpfsfix.MountOf(e.host.fs.ProcRoot(), dir); err == nil && fs == "tmpfs" {
				if len(onTmpfs[db.Name]) == 0 {
					names = append(names, db.Name)
				}
				onTmpfs[db.Name] = append(onTmpfs[db.Name], t.oid)
				scan.Dirs = append(scan.Dirs, fmt.Sprintf("%s for database %s (%s)", t.name, db.Name, mp))
			}
		}
	}
	read := func(ctx context.Context, db string, conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, tmpfsRelsSQL, onTmpfs[db])
		if err != nil {
			return err
		}
		var ts, rel string
		byTS := map[string]*tmpfsPerm{}
		if _, err := pgx.ForEachRow(rows, []any{&ts, &rel}, func() error {
			p := byTS[ts]
			if p == nil {
				p = &tmpfsPerm{Database: db, Tablespace: ts, DatabaseDefault: tsName[defaults[db]] == ts}
				byTS[ts] = p
			}
			p.Count++
			if len(p.Rels) < 10 {
				p.Rels = append(p.Rels, rel)
			}
			return nil
		}); err != nil {
			return err
		}
		for _, p := range byTS {
			scan.Perm = append(scan.Perm, *p)
		}
		scan.Read = append(scan.Read, db)
		return nil
	}
	var others []string
	for _, db := range names {
		if db == e.srv.Database {
			if err := read(ctx, db, e.conn); err != nil {
				scan.Unread[db] = oneLine(err)
			}
			continue
		}
		others = append(others, db)
	}
	if len(others) > 0 {
		cfg, err := pgx.ParseConfig(e.opts.DSN)
		if err != nil {
			return nil, fmt.Errorf("dsn: %w", err)
		}
		for db, err := range sampler.ForEachDatabase(ctx, cfg, others, read) {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			scan.Unread[db] = oneLine(err)
		}
	}
	sort.Strings(scan.Read)
	sort.Slice(scan.Perm, func(i, j int) bool {
		if scan.Perm[i].Database != scan.Perm[j].Database {
			return scan.Perm[i].Database < scan.Perm[j].Database
		}
		return scan.Perm[i].Tablespace < scan.Perm[j].Tablespace
	})
	return scan, nil
}

// versionDir is a tablespace's directory of this server version,
// <location>/PG_<major>_<catversion> (src/include/catalog/catversion.h,
// TABLESPACE_VERSION_DIRECTORY).
func versionDir(location string, versionNum int) (string, error) {
	prefix := fmt.Sprintf("PG_%d_", versionNum/10000)
	ents, err := os.ReadDir(location)
	if err != nil {
		return "", err
	}
	for _, de := range ents {
		if de.IsDir() && strings.HasPrefix(de.Name(), prefix) {
			return filepath.Join(location, de.Name()), nil
		}
	}
	return "", fmt.Errorf("no %s* directory in %s", prefix, location)
}

// evidence says what the scan read.
func (s *tmpfsScan) evidence() []Evidence {
	ev := []Evidence{{Text: fmt.Sprintf("tablespace directories on tmpfs (of %d database x tablespace directories): %s; databases read for relations stored there: %s", s.Checked, strings.Join(s.Dirs, ", "), strings.Join(s.Read, ", ")),
		From: "pg_tablespace, pg_database, /proc/self/mountinfo; pg_class of each of those databases (one connection at a time)"}}
	if len(s.Unread) > 0 {
		var parts []string
		for _, db := range sortedKeys(s.Unread) {
			parts = append(parts, db+": "+s.Unread[db])
		}
		ev = append(ev, Evidence{Text: "databases not read: " + strings.Join(parts, "; "), From: "pg_database"})
	}
	return ev
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// lostRelations merges the connected database's findings of the temp
// tablespaces (facts) with the scan of all databases (nil when not
// made): one entry per database and tablespace.
func lostRelations(db string, facts []tsFact, scan *tmpfsScan) []tmpfsPerm {
	var out []tmpfsPerm
	seen := map[[2]string]bool{}
	if scan != nil {
		for _, p := range scan.Perm {
			out = append(out, p)
			seen[[2]string{p.Database, p.Tablespace}] = true
		}
	}
	for _, f := range facts {
		if f.FSType == "tmpfs" && f.PermanentCount > 0 && !seen[[2]string{db, f.Name}] {
			out = append(out, tmpfsPerm{Database: db, Tablespace: f.Name, Count: f.PermanentCount, Rels: f.Permanent})
		}
	}
	return out
}

// lostResult is the critical result for relations in tmpfs tablespaces:
// per database the statements that move them off, then the grants.
// shown are the tablespaces whose relations in the connected database
// the evidence lists already.
func lostResult(connected string, lost []tmpfsPerm, shown map[string]bool, ev []Evidence, m map[string]float64) result {
	total := 0
	var fix []string
	var tss []string
	perDB := map[string]int{}
	for _, p := range lost {
		total += p.Count
		perDB[p.Database] += p.Count
		if !slices.Contains(tss, p.Tablespace) {
			tss = append(tss, p.Tablespace)
		}
		if p.DatabaseDefault {
			fix = append(fix, fmt.Sprintf("-- database %s has tmpfs tablespace %s as its default: move it whole (no one may be connected to it):", p.Database, p.Tablespace),
				fmt.Sprintf("ALTER DATABASE %s SET TABLESPACE pg_default;", pgx.Identifier{p.Database}.Sanitize()))
			continue
		}
		fix = append(fix, fmt.Sprintf("-- move them off the tmpfs now (each rewrite takes an ACCESS EXCLUSIVE lock on the relation), in database %s:", p.Database))
		for _, r := range p.Rels {
			name, kind, _ := strings.Cut(r, " (")
			stmt := "ALTER TABLE"
			switch {
			case strings.HasPrefix(kind, "index"):
				stmt = "ALTER INDEX"
			case strings.HasPrefix(kind, "materialized view"):
				stmt = "ALTER MATERIALIZED VIEW"
			case strings.HasPrefix(kind, "sequence"), strings.HasPrefix(kind, "TOAST"):
				continue // moves with its table
			}
			fix = append(fix, fmt.Sprintf("%s %s SET TABLESPACE pg_default;", stmt, quoteQualified(name)))
		}
		if p.Count > len(p.Rels) {
			fix = append(fix, fmt.Sprintf("-- ... and %d more: SELECT relname FROM pg_class WHERE reltablespace = (SELECT oid FROM pg_tablespace WHERE spcname = %s) AND relpersistence <> 't';", p.Count-len(p.Rels), quoteLit(p.Tablespace)))
		}
	}
	for _, name := range tss {
		ts := pgx.Identifier{name}.Sanitize()
		fix = append(fix,
			fmt.Sprintf("REVOKE CREATE ON TABLESPACE %s FROM PUBLIC;   -- then only the roles that need temp tables may use it:", ts),
			fmt.Sprintf("GRANT CREATE ON TABLESPACE %s TO <application role>;   -- erplab doctor fix %s --grant-to <role> does this", ts, tmpfsfix.Name))
	}
	m["permanent_relations"] = float64(total)
	f := lost[0]
	for _, p := range lost {
		if p.Database == connected && shown[p.Tablespace] {
			continue
		}
		ev = append(ev, Evidence{Text: fmt.Sprintf("tmpfs tablespace %s holds %d non-temporary relations in database %s: %s", p.Tablespace, p.Count, p.Database, strings.Join(p.Rels, ", ")), From: "pg_class.reltablespace, relpersistence (pg_database.dattablespace for 0)"})
	}
	if len(lost) == 1 && f.Database == connected {
		return result{sev: Critical, summary: fmt.Sprintf("tmpfs tablespace %s holds %d non-temporary relations (%s): their files are lost at the next reboot or remount", f.Tablespace, f.Count, strings.Join(f.Rels[:min(3, len(f.Rels))], ", ")),
			evidence: ev, metrics: m, fix: fix}
	}
	m["permanent_databases"] = float64(len(perDB))
	var dbs []string
	for _, p := range lost {
		dbs = append(dbs, fmt.Sprintf("%s: %d in %s", p.Database, p.Count, p.Tablespace))
	}
	plural := "s"
	if len(perDB) == 1 {
		plural = ""
	}
	return result{sev: Critical, summary: fmt.Sprintf("tmpfs tablespaces hold %d non-temporary relations in %d database%s (%s; e.g. %s in %s): their files are lost at the next reboot or remount",
		total, len(perDB), plural, strings.Join(dbs, ", "), f.Rels[0], f.Database), evidence: ev, metrics: m, fix: fix}
}

// scanTmpfs runs the scan for checkTempTablespace: the scan (nil when
// not made or not recorded) and its evidence.
func (e *env) scanTmpfs(ctx context.Context) (*tmpfsScan, []Evidence) {
	scan, err := e.tmpfsPermanent(ctx)
	var nr errNotRecorded
	switch {
	case errors.As(err, &nr):
		return nil, nil
	case err != nil:
		return nil, []Evidence{{Text: "other databases not scanned for relations in tmpfs tablespaces: " + oneLine(err), From: "pg_tablespace, pg_database"}}
	case scan == nil:
		return nil, []Evidence{{Text: "other databases not scanned for relations in tmpfs tablespaces: the server is not on this host (mounts unknown)", From: "/proc/self/mountinfo"}}
	case len(scan.Dirs) == 0:
		return scan, []Evidence{{Text: fmt.Sprintf("no database's directory in a tablespace is on tmpfs (%d database x tablespace directories checked)", scan.Checked), From: "pg_tablespace, pg_database, /proc/self/mountinfo"}}
	}
	return scan, scan.evidence()
}
