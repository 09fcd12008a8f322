package tmpfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/erplab/erplab/internal/leftover"
)

// Undo reverts what Apply recorded for opts.Tablespace on the server dsn
// names (local, root, superuser), in reverse order: temp_tablespaces set
// back to its value before Apply at the scope Apply set it (RESET when it
// was unset; left alone, with a line, when someone changed it since), the
// tmpfs unmounted once no temp file is left on it, the tablespace dropped
// (its grant goes with it), the directory removed (or its owner and mode
// put back when it existed before), then the state file removed. Each
// reverted step is recorded at once, so an interrupted undo resumes.
//
// It refuses, in one line naming what it found and changing nothing, a
// tablespace or mount erplab did not create: no state file while the
// tablespace or a mount under its directory exists, a tablespace whose
// OID differs from the record, a mount at the recorded point that is not
// the recorded one (mount ID, device, type). opts.Force overrides the
// refusal; without a state file it then resets every temp_tablespaces
// setting naming the tablespace, unmounts every mount under its directory
// and drops it. With nothing recorded and nothing there, Undo says so and
// succeeds. Errors: the refusals, temp files still on the tmpfs (sessions
// holding temp tables), failed steps.
func Undo(ctx context.Context, dsn string, opts Options, log io.Writer) error {
	if err := opts.normalize(); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("tmpfs fix: --undo needs root (umount)")
	}
	conn, err := Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	t, err := undoTarget(ctx, conn, opts)
	if err != nil {
		return err
	}
	say := func(format string, a ...any) { fmt.Fprintf(log, format+"\n", a...) }
	path, err := StatePath(opts, t.SystemIdentifier, t.DataDir, t.Tablespace)
	if err != nil {
		return err
	}
	st, err := LoadState(path)
	switch {
	case err == nil:
		return undoJournal(ctx, conn, dsn, st, path, opts, say)
	case !errors.Is(err, os.ErrNotExist):
		return err
	case opts.Force:
		say("no state file %s: --force removes tablespace %s and every mount under %s whoever made them", path, t.Tablespace, or(t.Location, "its directory"))
		return forceUndo(ctx, conn, dsn, t, opts, say)
	}
	if err := refuseUnrecorded(t, opts, path); err != nil {
		return err
	}
	say("nothing to undo: no state file %s and no tablespace %s", path, t.Tablespace)
	return nil
}

// undoTarget inspects the server and refuses, in one line, what Undo
// cannot do there: a remote server, a role that is not a superuser, no
// system identifier or data directory.
func undoTarget(ctx context.Context, conn *pgx.Conn, opts Options) (*Target, error) {
	t, err := Inspect(ctx, conn, opts)
	if err != nil {
		return nil, err
	}
	switch {
	case !t.Local:
		return nil, errors.New("tmpfs fix: --undo works on a server on this host only (Unix socket or loopback)")
	case !t.Superuser:
		return nil, errors.New("tmpfs fix: --undo needs a superuser role")
	case t.SystemIdentifier == "" || t.DataDir == "":
		return nil, errors.New("tmpfs fix: cannot read pg_control_system() and data_directory (they name the server in erplab's state file)")
	}
	return t, nil
}

// refuseUnrecorded refuses, without a state file, the tablespace and
// the mounts under its directory that exist: erplab did not create them.
func refuseUnrecorded(t *Target, opts Options, path string) error {
	var found []string
	if t.TablespaceExists {
		found = append(found, fmt.Sprintf("tablespace %s (oid %d at %s)", t.Tablespace, t.TablespaceOID, t.Location))
	}
	if t.Location != "" {
		mounts, err := readMounts(opts.ProcRoot)
		if err != nil {
			return err
		}
		for _, mp := range mountsUnder(mounts, resolve(t.Location)) {
			found = append(found, fmt.Sprintf("%s mount at %s", mp.FSType, mp.MountPoint))
		}
	}
	if len(found) > 0 {
		return fmt.Errorf("tmpfs fix: refusing to undo what erplab did not create: found %s, but no state file %s (--force removes them anyway)", strings.Join(found, " and "), path)
	}
	return nil
}

// forceUndo is Undo without a record (--force): every temp_tablespaces
// setting naming the tablespace is reset, every mount under its
// directory unmounted, the tablespace dropped, the directory removed.
func forceUndo(ctx context.Context, conn *pgx.Conn, dsn string, t *Target, opts Options, say func(string, ...any)) error {
	if t.Location == "" {
		return errors.New("tmpfs fix: cannot tell the tablespace directory: pass --location")
	}
	if err := resetSettingsNaming(ctx, conn, dsn, t.Tablespace, say); err != nil {
		return err
	}
	mounts, err := readMounts(opts.ProcRoot)
	if err != nil {
		return err
	}
	for _, mi := range mountsUnder(mounts, resolve(t.Location)) { // deepest first
		if err := unmountEmpty(mi.MountPoint, say); err != nil {
			return err
		}
	}
	if t.TablespaceExists {
		if err := dropTablespace(ctx, conn, t.Tablespace, t.Location, say); err != nil {
			return err
		}
	}
	if err := os.Remove(t.Location); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("tmpfs fix: remove %s: %w", t.Location, err)
	} else if err == nil {
		say("rmdir %s", t.Location)
	}
	if left, err := Leftovers(ctx, conn, opts, t.Location); err != nil {
		return err
	} else if len(left) > 0 {
		return fmt.Errorf("tmpfs fix: undo left: %s", strings.Join(left, "; "))
	}
	say("undone: no mount, no tablespace, no directory left")
	return nil
}

// resetSettingsNaming resets every temp_tablespaces setting naming
// tablespace ts (postgresql.auto.conf, per database, per role), reloads
// and waits until new sessions no longer see it.
func resetSettingsNaming(ctx context.Context, conn *pgx.Conn, dsn, ts string, say func(string, ...any)) error {
	exec := func(sql string) error {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("tmpfs fix: %s: %w", sql, err)
		}
		return nil
	}
	reset := false
	_, auto, err := scopeSetting(ctx, conn, ScopeSystem, 0)
	if err != nil {
		return err
	}
	if slices.Contains(TablespaceNames(auto), ts) {
		if err := exec("ALTER SYSTEM RESET temp_tablespaces"); err != nil {
			return err
		}
		say("ALTER SYSTEM RESET temp_tablespaces (was '%s')", auto)
		reset = true
	}
	ovs, err := overrides(ctx, conn)
	if err != nil {
		return err
	}
	for _, o := range ovs {
		if !slices.Contains(TablespaceNames(o.value), ts) {
			continue
		}
		if err := exec(o.resetSQL()); err != nil {
			return err
		}
		say("%s (was temp_tablespaces=%s)", o.resetSQL(), o.value)
		reset = true
	}
	if !reset {
		return nil
	}
	if err := exec("SELECT pg_catalog.pg_reload_conf()"); err != nil {
		return err
	}
	// Let sessions see the reset before the files are checked.
	if err := waitSetting(ctx, dsn, ts); err != nil {
		return err
	}
	say("SELECT pg_reload_conf()")
	return nil
}

// unmountEmpty unmounts the tmpfs at mp once no file is left on it.
// Errors: files still there (named, up to five), umount failing.
func unmountEmpty(mp string, say func(string, ...any)) error {
	ents, err := os.ReadDir(mp)
	if err != nil {
		return fmt.Errorf("tmpfs fix: %w", err)
	}
	if len(ents) > 0 {
		names := make([]string, 0, 5)
		for i, e := range ents {
			if i == 5 {
				names = append(names, "...")
				break
			}
			names = append(names, e.Name())
		}
		return fmt.Errorf("tmpfs fix: %d temp files still on %s (%s): sessions that created temp tables before the reset still hold them; end those sessions and run --undo again", len(ents), mp, strings.Join(names, " "))
	}
	if err := unix.Unmount(mp, 0); err != nil {
		return fmt.Errorf("tmpfs fix: umount %s: %w", mp, err)
	}
	say("umount %s", mp)
	return nil
}

// dropTablespace drops tablespace name (its grants go with it).
func dropTablespace(ctx context.Context, conn *pgx.Conn, name, location string, say func(string, ...any)) error {
	sql := "DROP TABLESPACE " + ident(name)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("tmpfs fix: %s: %w (files of other databases or sessions may still be in %s)", sql, err, location)
	}
	say("%s", sql)
	return nil
}

// tablespaceByName returns the oid and location of tablespace name;
// found false when there is none.
func tablespaceByName(ctx context.Context, conn *pgx.Conn, name string) (oid uint32, location string, found bool, err error) {
	var o int64
	err = conn.QueryRow(ctx, `SELECT oid::int8, pg_catalog.pg_tablespace_location(oid) FROM pg_catalog.pg_tablespace WHERE spcname = $1`, name).Scan(&o, &location)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, "", false, nil
	case err != nil:
		return 0, "", false, fmt.Errorf("tmpfs fix: look up tablespace %s: %w", name, err)
	}
	return uint32(o), location, true, nil
}

// mountsUnder returns the mounts at or under dir (resolved), deepest
// first.
func mountsUnder(mounts []*procfs.MountInfo, dir string) []*procfs.MountInfo {
	var out []*procfs.MountInfo
	for _, mi := range mounts {
		if mi.MountPoint == dir || strings.HasPrefix(mi.MountPoint, dir+"/") {
			out = append(out, mi)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].MountPoint) > len(out[j].MountPoint) })
	return out
}

// topMountAt returns the mount visible at exactly point (the last one
// mounted there), or nil.
func topMountAt(mounts []*procfs.MountInfo, point string) *procfs.MountInfo {
	var top *procfs.MountInfo
	for _, mi := range mounts {
		if mi.MountPoint == point {
			top = mi
		}
	}
	return top
}

// sameMount reports whether mi is the mount r records: same type and,
// once recorded, the same mount ID and device. A record of an intended
// mount (no ID yet: a crash between mount and record) matches a mount of
// the recorded type.
func sameMount(mi *procfs.MountInfo, r *MountRecord) bool {
	if mi.FSType != r.FSType {
		return false
	}
	return r.MountID == 0 || mi.MountID == r.MountID && mi.MajorMinorVer == r.Device
}

// checkOwned refuses, in one line, when the tablespace or mount that st
// records is now another one: a tablespace of the recorded name with
// another OID (or, when only intended, another location), a mount at the
// recorded point that is not the recorded mount.
func checkOwned(ctx context.Context, conn *pgx.Conn, st *State, opts Options, path string) error {
	if r := st.Tablespace; r != nil {
		oid, loc, found, err := tablespaceByName(ctx, conn, r.Name)
		if err != nil {
			return err
		}
		switch {
		case found && r.OID != 0 && oid != r.OID:
			return fmt.Errorf("tmpfs fix: refusing to undo: tablespace %s is oid %d at %s, not oid %d that erplab created (state file %s; --force drops it anyway)", r.Name, oid, loc, r.OID, path)
		case found && r.OID == 0 && resolve(loc) != resolve(r.Location):
			return fmt.Errorf("tmpfs fix: refusing to undo: tablespace %s (oid %d) is at %s, not at %s where erplab meant to create it (state file %s; --force drops it anyway)", r.Name, oid, loc, r.Location, path)
		}
	}
	if r := st.Mount; r != nil {
		mounts, err := readMounts(opts.ProcRoot)
		if err != nil {
			return err
		}
		if mi := topMountAt(mounts, resolve(r.Point)); mi != nil && !sameMount(mi, r) {
			return fmt.Errorf("tmpfs fix: refusing to undo: the mount at %s is %s (mount id %d, device %s), not the %s erplab mounted (mount id %d, device %s; state file %s; --force unmounts it anyway)",
				r.Point, mi.FSType, mi.MountID, mi.MajorMinorVer, r.FSType, r.MountID, r.Device, path)
		}
	}
	return nil
}

// scopeSetting reads temp_tablespaces as set at scope: the last entry in
// postgresql.auto.conf (ALTER SYSTEM) for ScopeSystem, the database's own
// entry in pg_db_role_setting (ALTER DATABASE, no role) for
// ScopeDatabase. set is false when there is none.
func scopeSetting(ctx context.Context, conn *pgx.Conn, scope Scope, dboid uint32) (set bool, value string, err error) {
	var q string
	var args []any
	if scope == ScopeDatabase {
		q = `SELECT substr(c, length('temp_tablespaces=') + 1) FROM pg_catalog.pg_db_role_setting s, LATERAL unnest(s.setconfig) c
WHERE s.setdatabase = $1 AND s.setrole = 0 AND c LIKE 'temp\_tablespaces=%'`
		args = []any{int64(dboid)}
	} else {
		q = `SELECT setting FROM pg_catalog.pg_file_settings
WHERE name = 'temp_tablespaces' AND sourcefile = current_setting('data_directory') || '/postgresql.auto.conf'
ORDER BY seqno DESC LIMIT 1`
	}
	err = conn.QueryRow(ctx, q, args...).Scan(&value)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, "", nil
	case err != nil:
		return false, "", fmt.Errorf("tmpfs fix: read temp_tablespaces at %s scope: %w", scope, err)
	}
	return true, value, nil
}

// settingSQL sets temp_tablespaces to names at scope (ALTER SYSTEM, or
// ALTER DATABASE db), each name a literal the server quotes as an
// identifier when it needs it (GUC_LIST_QUOTE), or RESETs it when names
// is empty.
func settingSQL(scope Scope, db string, names []string) string {
	head := "ALTER SYSTEM"
	if scope == ScopeDatabase {
		head = "ALTER DATABASE " + ident(db)
	}
	if len(names) == 0 {
		return head + " RESET temp_tablespaces"
	}
	lits := make([]string, len(names))
	for i, n := range names {
		lits[i] = quoteLiteral(n)
	}
	return head + " SET temp_tablespaces = " + strings.Join(lits, ", ")
}

// undoDirectory removes the directory Apply created (it must be empty by
// now), or gives one that existed its owner and mode back.
func undoDirectory(d *DirRecord, say func(string, ...any)) error {
	if !d.Existed {
		if err := os.Remove(d.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("tmpfs fix: remove %s: %w", d.Path, err)
		} else if err == nil {
			say("rmdir %s", d.Path)
		}
		return nil
	}
	if _, err := os.Stat(d.Path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := os.Chown(d.Path, d.PrevUID, d.PrevGID); err != nil {
		return fmt.Errorf("tmpfs fix: %w", err)
	}
	if err := os.Chmod(d.Path, d.PrevMode); err != nil {
		return fmt.Errorf("tmpfs fix: %w", err)
	}
	say("%s existed before: owner %d:%d and mode %04o put back", d.Path, d.PrevUID, d.PrevGID, d.PrevMode)
	return nil
}

func currentDB(ctx context.Context, conn *pgx.Conn) string {
	var db string
	_ = conn.QueryRow(ctx, "SELECT current_database()::text").Scan(&db)
	return db
}

// override is one per-database or per-role temp_tablespaces setting.
type override struct{ db, role, value string }

func (o override) String() string {
	switch {
	case o.db != "" && o.role != "":
		return "the setting of role " + o.role + " in database " + o.db
	case o.role != "":
		return "the setting of role " + o.role
	}
	return "the setting of database " + o.db
}

// resetSQL is the statement that resets the setting.
func (o override) resetSQL() string {
	switch {
	case o.role != "" && o.db != "":
		return "ALTER ROLE " + ident(o.role) + " IN DATABASE " + ident(o.db) + " RESET temp_tablespaces"
	case o.role != "":
		return "ALTER ROLE " + ident(o.role) + " RESET temp_tablespaces"
	}
	return "ALTER DATABASE " + ident(o.db) + " RESET temp_tablespaces"
}

// overrides reads every per-database/role temp_tablespaces setting.
func overrides(ctx context.Context, conn *pgx.Conn) ([]override, error) {
	rows, err := conn.Query(ctx, `SELECT coalesce(d.datname::text, ''), coalesce(r.rolname::text, ''), substr(c, length('temp_tablespaces=') + 1)
FROM pg_catalog.pg_db_role_setting s
LEFT JOIN pg_catalog.pg_database d ON d.oid = s.setdatabase
LEFT JOIN pg_catalog.pg_roles r ON r.oid = s.setrole,
LATERAL unnest(s.setconfig) AS c
WHERE c LIKE 'temp\_tablespaces=%'`)
	if err != nil {
		return nil, fmt.Errorf("tmpfs fix: read per-database settings: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (override, error) {
		var o override
		err := r.Scan(&o.db, &o.role, &o.value)
		return o, err
	})
}

// UndoOrphan reverts, without a server, what the state file at path
// records for a server that is no longer running (e.g. the throwaway
// server of an `erplab ab` killed during its tmpfs run): it unmounts the
// recorded tmpfs (when it is still the recorded mount, or opts.Force;
// files on it are temp files of dead sessions), and, when the data
// directory is gone too, removes the server's PG_* directories under the
// tablespace directory and the directory erplab created, then the state
// file. While the data directory exists the tablespace is still in its
// catalog: the state file is kept (without the mount) for an undo with
// the server running, or for another UndoOrphan once the data directory
// is removed. Errors: not root, the server running (postmaster.pid names
// a live process), a mount or directory that is not the recorded one.
func UndoOrphan(ctx context.Context, path string, opts Options, log io.Writer) error {
	if err := opts.normalize(); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("tmpfs fix: --undo needs root (umount)")
	}
	say := func(format string, a ...any) { fmt.Fprintf(log, format+"\n", a...) }
	st, err := LoadState(path)
	if err != nil {
		return err
	}
	if pid, alive := postmasterAlive(st.DataDir); alive {
		return fmt.Errorf("tmpfs fix: the server of %s is running (postmaster pid %d): undo with --dsn naming it, or stop it first", st.DataDir, pid)
	}
	if st.Mount != nil {
		if err := orphanUnmount(st, path, opts, say); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(st.DataDir, "PG_VERSION")); err == nil {
		say("the stopped server at %s still has the tablespace in its catalog: start it and run --undo with --dsn, or remove that data directory and run this again; state kept in %s", st.DataDir, path)
		return nil
	}
	if d := st.Directory; d != nil {
		if err := orphanDirectory(d, st.DataDir, path, say); err != nil {
			return err
		}
	}
	if err := removeState(path); err != nil {
		return err
	}
	say("undone: the server's data directory %s is gone; state file %s removed", st.DataDir, path)
	return nil
}

// orphanUnmount unmounts the tmpfs st records, files and all (they are
// temp files of ended sessions), when it is still the recorded mount (any
// with opts.Force), and journals the mount as undone.
func orphanUnmount(st *State, path string, opts Options, say func(string, ...any)) error {
	r := st.Mount
	mounts, err := readMounts(opts.ProcRoot)
	if err != nil {
		return err
	}
	if mi := topMountAt(mounts, resolve(r.Point)); mi != nil {
		if !opts.Force && !sameMount(mi, r) {
			return fmt.Errorf("tmpfs fix: refusing to undo: the mount at %s is %s (mount id %d, device %s), not the %s erplab mounted (mount id %d, device %s; state file %s; --force unmounts it anyway)",
				r.Point, mi.FSType, mi.MountID, mi.MajorMinorVer, r.FSType, r.MountID, r.Device, path)
		}
		if err := unix.Unmount(mi.MountPoint, 0); err != nil {
			return fmt.Errorf("tmpfs fix: umount %s: %w", mi.MountPoint, err)
		}
		say("umount %s (the server is not running: files on it were temp files of ended sessions)", mi.MountPoint)
	}
	forgetMount(r)
	st.Mount = nil
	return st.save(path)
}

// orphanDirectory removes the PG_* directories of the removed server at
// dataDir under the tablespace directory d records (anything else there
// is refused), then undoes the directory.
func orphanDirectory(d *DirRecord, dataDir, path string, say func(string, ...any)) error {
	if ents, err := os.ReadDir(d.Path); err == nil {
		for _, e := range ents {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), "PG_") {
				return fmt.Errorf("tmpfs fix: %s holds %s, which is not a server's PG_* directory: left alone (state file %s)", d.Path, e.Name(), path)
			}
		}
		for _, e := range ents {
			if err := os.RemoveAll(filepath.Join(d.Path, e.Name())); err != nil {
				return fmt.Errorf("tmpfs fix: %w", err)
			}
			say("rm -r %s (tablespace files of the removed server %s)", filepath.Join(d.Path, e.Name()), dataDir)
		}
	}
	return undoDirectory(d, say)
}

// postmasterAlive reads the PID on the first line of
// <dataDir>/postmaster.pid and reports whether that process exists.
func postmasterAlive(dataDir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, false
	}
	err = syscall.Kill(pid, 0)
	return pid, err == nil || errors.Is(err, syscall.EPERM)
}

// forgetMount removes the mount's entry from erplab's crash-safe record
// (MountRecord.LeftoverID), once the mount is gone or was never made.
// Best effort: an entry left behind names a mount that is not there, and
// the next sweep drops it.
func forgetMount(r *MountRecord) {
	if r == nil || r.LeftoverID == "" {
		return
	}
	if rec, err := leftover.Open(); err == nil {
		_ = rec.Remove(&leftover.Entry{ID: r.LeftoverID})
	}
}
