package tmpfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/erplab/erplab/internal/leftover"
)

// The steps of procedure(): each do and its undo, in the table's order.

// doDirectory (1) creates the tablespace directory, or takes an empty
// one that exists (its owner and mode recorded for the undo), owned by
// the server's user, mode 0700.
func doDirectory(_ context.Context, a *applier) error {
	t := a.t
	dir := &DirRecord{Path: t.Location}
	fi, err := os.Stat(t.Location)
	if err == nil {
		sys := fi.Sys().(*syscall.Stat_t)
		dir.Existed, dir.PrevUID, dir.PrevGID, dir.PrevMode = true, int(sys.Uid), int(sys.Gid), fi.Mode().Perm()
	}
	a.st.Directory = dir
	if err := a.intend(); err != nil {
		return err
	}
	if !dir.Existed {
		if err := os.Mkdir(t.Location, 0o700); err != nil {
			return fmt.Errorf("tmpfs fix: %w", err)
		}
	}
	if err := os.Chown(t.Location, t.UID, t.GID); err != nil {
		return fmt.Errorf("tmpfs fix: %w", err)
	}
	if err := os.Chmod(t.Location, 0o700); err != nil {
		return fmt.Errorf("tmpfs fix: %w", err)
	}
	dir.Done = true
	a.line("1. directory %s owned by %s (uid %d, gid %d), mode 0700", t.Location, or(t.OSUser, "the server's user"), t.UID, t.GID)
	return nil
}

// undoDirectoryStep removes the directory or puts its owner and mode back.
func undoDirectoryStep(_ context.Context, u *undoer) error {
	return undoDirectory(u.st.Directory, u.say)
}

// doTablespace (2) creates the tablespace and records its OID.
func doTablespace(ctx context.Context, a *applier) error {
	a.st.Tablespace = &TablespaceRecord{Name: a.t.Tablespace, Location: a.t.Location}
	if err := a.intend(); err != nil {
		return err
	}
	if err := a.exec(ctx, "CREATE TABLESPACE "+ident(a.t.Tablespace)+" LOCATION "+quoteLiteral(a.t.Location)); err != nil {
		return err
	}
	var oid int64
	if err := a.conn.QueryRow(ctx, `SELECT oid::int8 FROM pg_catalog.pg_tablespace WHERE spcname = $1`, a.t.Tablespace).Scan(&oid); err != nil {
		return fmt.Errorf("tmpfs fix: oid of the new tablespace: %w", err)
	}
	a.st.Tablespace.OID, a.st.Tablespace.Done = uint32(oid), true
	return nil
}

// undoTablespace drops the recorded tablespace (its grants go with it)
// when it is still the one created (any, with opts.Force).
func undoTablespace(ctx context.Context, u *undoer) error {
	u.noteOverrides(ctx)
	r := u.st.Tablespace
	oid, _, found, err := tablespaceByName(ctx, u.conn, r.Name)
	if err != nil {
		return err
	}
	if found && (u.opts.Force || r.OID == 0 || oid == r.OID) {
		return dropTablespace(ctx, u.conn, r.Name, r.Location, u.say)
	}
	return nil
}

// doGrant (2, continued) grants CREATE on the tablespace to
// Options.GrantTo, if any.
func doGrant(ctx context.Context, a *applier) error {
	ts := ident(a.t.Tablespace)
	grant := "no grant (--grant-to not given: only superusers and the owner use it)"
	if len(a.opts.GrantTo) > 0 {
		to := grantees(a.opts.GrantTo)
		a.st.Grant = &GrantRecord{Privilege: "CREATE", To: to}
		if err := a.intend(); err != nil {
			return err
		}
		if err := a.exec(ctx, "GRANT CREATE ON TABLESPACE "+ts+" TO "+to); err != nil {
			return err
		}
		a.st.Grant.Done = true
		grant = "GRANT CREATE ON TABLESPACE " + ts + " TO " + to
	}
	a.line("2. CREATE TABLESPACE %s LOCATION '%s' (oid %d); %s", ts, a.t.Location, a.st.Tablespace.OID, grant)
	return nil
}

// undoGrant has nothing to revoke: DROP TABLESPACE, the next undo, takes
// the grant with it.
func undoGrant(context.Context, *undoer) error { return nil }

// doProbe (3) makes the server create the per-database directory with a
// dummy temp table in the tablespace (dropped at once; DROP TABLESPACE
// removes the directory) and checks it is where Inspect expected it.
func doProbe(ctx context.Context, a *applier) error {
	t := a.t
	var rel string
	if err := a.exec(ctx, "CREATE TEMP TABLE "+probeTable+" (x int) TABLESPACE "+ident(t.Tablespace)); err != nil {
		return err
	}
	err := a.conn.QueryRow(ctx, "SELECT pg_catalog.pg_relation_filepath('pg_temp."+probeTable+"')").Scan(&rel)
	if derr := a.exec(ctx, "DROP TABLE pg_temp."+probeTable); err == nil {
		err = derr
	}
	if err != nil {
		return fmt.Errorf("tmpfs fix: dummy temp table: %w", err)
	}
	dbDir := resolve(filepath.Dir(filepath.Join(t.DataDir, rel)))
	if t.DBDir != "" && dbDir != resolve(t.DBDir) {
		return fmt.Errorf("tmpfs fix: the dummy temp table went to %s, expected %s", dbDir, t.DBDir)
	}
	t.DBDir = dbDir
	a.line("3. dummy temp table %s: %s; per-database directory %s", probeTable, rel, dbDir)
	return nil
}

// doMount (4) mounts the tmpfs on the per-database directory (recorded
// first in erplab's crash-safe record for the ab remedy) and records the
// mount's ID and device from mountinfo.
func doMount(_ context.Context, a *applier) error {
	dbDir := a.t.DBDir
	mopts := mountOptions(a.opts.Size, a.t.UID, a.t.GID)
	m := &MountRecord{Point: dbDir, FSType: "tmpfs", Size: a.opts.Size, Options: mopts + ",nodev,nosuid,noexec"}
	a.st.Mount = m
	if err := a.intend(); err != nil {
		return err
	}
	if ents, err := os.ReadDir(dbDir); err != nil || len(ents) > 0 {
		return fmt.Errorf("tmpfs fix: %s must exist and be empty before mounting (%d entries, %v)", dbDir, len(ents), err)
	}
	source, err := a.recordMount(dbDir)
	if err != nil {
		return err
	}
	if err := unix.Mount(source, dbDir, "tmpfs", unix.MS_NODEV|unix.MS_NOSUID|unix.MS_NOEXEC, mopts); err != nil {
		forgetMount(m)
		return fmt.Errorf("tmpfs fix: mount tmpfs on %s: %w", dbDir, err)
	}
	m.Mounted = true
	mounts, err := readMounts(a.opts.ProcRoot)
	if err != nil {
		return err
	}
	mi := topMountAt(mounts, dbDir)
	if mi == nil || mi.FSType != "tmpfs" {
		return fmt.Errorf("tmpfs fix: the tmpfs mounted on %s is not in %s/self/mountinfo", dbDir, a.opts.ProcRoot)
	}
	m.MountID, m.Device, m.Done = mi.MountID, mi.MajorMinorVer, true
	a.line("4. mount -t tmpfs -o %s,nodev,nosuid,noexec tmpfs %s (mount id %d)", mopts, dbDir, mi.MountID)
	return nil
}

// recordMount returns the source to mount the tmpfs from: "tmpfs", or
// with Options.recordMount the source of a new entry in erplab's
// crash-safe record, its ID journaled before the mount.
func (a *applier) recordMount(point string) (string, error) {
	if !a.opts.recordMount {
		return "tmpfs", nil
	}
	rec, err := leftover.Open()
	if err != nil {
		return "", fmt.Errorf("tmpfs fix: %w", err)
	}
	e, src, err := rec.AddMount(point, "tmpfs", false)
	if err != nil {
		return "", fmt.Errorf("tmpfs fix: %w", err)
	}
	a.st.Mount.LeftoverID = e.ID
	return src, a.record()
}

// undoMount unmounts the recorded tmpfs once no temp file is left on it
// (a mount there that is not the recorded one only with opts.Force) and
// drops its entry from erplab's crash-safe record.
func undoMount(ctx context.Context, u *undoer) error {
	u.noteOverrides(ctx)
	r := u.st.Mount
	mounts, err := readMounts(u.opts.ProcRoot)
	if err != nil {
		return err
	}
	if mi := topMountAt(mounts, resolve(r.Point)); mi != nil && (u.opts.Force || sameMount(mi, r)) {
		if err := unmountEmpty(mi.MountPoint, u.say); err != nil {
			return err
		}
	}
	forgetMount(r)
	return nil
}

// doSetting (5) sets temp_tablespaces to the tablespace at Options.Scope,
// the previous value recorded first, and reloads.
func doSetting(ctx context.Context, a *applier) error {
	t, scope := a.t, a.opts.Scope
	set := &SettingRecord{Scope: scope, Value: t.Tablespace}
	if scope == ScopeDatabase {
		set.Database = t.Database
	}
	var err error
	if set.WasSet, set.Previous, err = scopeSetting(ctx, a.conn, scope, t.DBOID); err != nil {
		return err
	}
	a.st.Setting = set
	if err := a.intend(); err != nil {
		return err
	}
	sql := settingSQL(scope, t.Database, []string{t.Tablespace})
	if err := a.exec(ctx, sql); err != nil {
		return err
	}
	if err := a.exec(ctx, "SELECT pg_catalog.pg_reload_conf()"); err != nil {
		return err
	}
	set.Done = true
	was := "unset"
	if set.WasSet {
		was = "'" + set.Previous + "'"
	}
	a.line("5. %s; SELECT pg_reload_conf() (was %s)", sql, was)
	for _, o := range t.Overrides {
		a.line("   note: overridden for some sessions by %s", o)
	}
	return nil
}

// undoSetting sets temp_tablespaces back to its value before Apply when
// it is still what Apply set, and waits for new sessions to see it; a
// value changed since is left, with a line.
func undoSetting(ctx context.Context, u *undoer) error {
	s := u.st.Setting
	set, cur, err := scopeSetting(ctx, u.conn, s.Scope, u.st.DBOID)
	if err != nil {
		return err
	}
	switch {
	case set && slices.Equal(TablespaceNames(cur), []string{s.Value}):
		if err := u.restoreSetting(ctx, s); err != nil {
			return err
		}
	case s.Done:
		now := "unset"
		if set {
			now = "'" + cur + "'"
		}
		u.say("temp_tablespaces at %s scope is now %s, not what erplab set ('%s'): left as it is", s.Scope, now, s.Value)
	}
	u.noteOverrides(ctx)
	return nil
}

// restoreSetting puts back the value s records (RESET when unset),
// reloads, and waits until new sessions no longer see the tablespace.
func (u *undoer) restoreSetting(ctx context.Context, s *SettingRecord) error {
	var prev []string
	if s.WasSet {
		prev = TablespaceNames(s.Previous)
	}
	sql := settingSQL(s.Scope, s.Database, prev)
	if _, err := u.conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("tmpfs fix: %s: %w", sql, err)
	}
	if _, err := u.conn.Exec(ctx, "SELECT pg_catalog.pg_reload_conf()"); err != nil {
		return fmt.Errorf("tmpfs fix: pg_reload_conf: %w", err)
	}
	was := "unset before apply"
	if s.WasSet {
		was = "'" + s.Previous + "' before apply"
	}
	u.say("%s; SELECT pg_reload_conf() (temp_tablespaces was %s)", sql, was)
	if !slices.Contains(prev, s.Value) && (s.Scope == ScopeSystem || currentDB(ctx, u.conn) == s.Database) {
		return waitSetting(ctx, u.dsn, s.Value)
	}
	return nil
}

// doVerify (6) checks that a new session's temp table lands on the tmpfs
// and marks the journal complete.
func doVerify(ctx context.Context, a *applier) error {
	if err := a.stopHere(); err != nil {
		return err
	}
	v, err := Verify(ctx, a.dsn, a.opts)
	if err != nil {
		return err
	}
	if !v.OnTmpfs(a.t.DBDir) {
		return fmt.Errorf("tmpfs fix: verification failed: %s", v)
	}
	a.st.Complete, a.v = true, v
	a.line("6. verified: %s", v)
	return nil
}

// errStopped is what Apply returns at Options.stopBefore (tests only).
var errStopped = errors.New("tmpfs fix: stopped as a crash would (test)")
