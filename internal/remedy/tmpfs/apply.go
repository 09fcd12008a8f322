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
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// Verification is the proof that temp tables land on the tmpfs.
type Verification struct {
	// TempTablespaces is temp_tablespaces in the verifying session.
	TempTablespaces string
	// RelPath is pg_relation_filepath of a new temp table
	// ("pg_tblspc/16390/PG_15_202209061/16384/t3_16391"), File the
	// absolute path with symbolic links resolved.
	RelPath string
	File    string
	// MountPoint, FSType and MountOptions are those of the mount holding
	// File, from /proc/self/mountinfo.
	MountPoint   string
	FSType       string
	MountOptions string
}

// OnTmpfs reports whether the file is on a tmpfs mounted at dbDir.
func (v *Verification) OnTmpfs(dbDir string) bool {
	return v.FSType == "tmpfs" && v.MountPoint == resolve(dbDir)
}

// String is a one-line summary.
func (v *Verification) String() string {
	return fmt.Sprintf("temp_tablespaces = '%s'; new temp table file %s is on %s mounted at %s (%s)", v.TempTablespaces, v.File, v.FSType, v.MountPoint, v.MountOptions)
}

// Apply performs the procedure on the server dsn names, which must run on
// this host, as root, with a superuser role: see the package
// documentation for the steps. It writes one line per step to log and
// returns the verification. On failure it undoes the steps already done
// and returns the error (with the undo's error joined, if any). Errors:
// not root, remote server, not superuser, the tablespace existing, the
// location not empty, a failed step.
func Apply(ctx context.Context, dsn string, opts Options, log io.Writer) (*Verification, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	if err := ValidSize(opts.Size); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("tmpfs fix: --apply needs root (mount, chown); run it as root on the database host, or run the printed procedure by hand")
	}
	conn, err := Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	t, err := Inspect(ctx, conn, opts)
	if err != nil {
		return nil, err
	}
	switch {
	case !t.Local:
		return nil, errors.New("tmpfs fix: --apply works on a server on this host only (Unix socket or loopback); print the procedure and run it there")
	case !t.Superuser:
		return nil, errors.New("tmpfs fix: --apply needs a superuser role (CREATE TABLESPACE, ALTER SYSTEM)")
	case t.TablespaceExists:
		return nil, fmt.Errorf("tmpfs fix: tablespace %s already exists (at %s); run with --undo first, or pick another --tablespace", t.Tablespace, t.Location)
	case t.DataDir == "" || t.UID < 0:
		return nil, errors.New("tmpfs fix: cannot read data_directory and its owner (the server's OS user)")
	case t.UID == 0:
		return nil, fmt.Errorf("tmpfs fix: %s is owned by root; cannot tell the server's OS user", t.DataDir)
	}
	if ents, err := os.ReadDir(t.Location); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("tmpfs fix: %s exists and is not empty; pick another --location", t.Location)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("tmpfs fix: %w", err)
	}
	say := func(format string, a ...any) { fmt.Fprintf(log, format+"\n", a...) }

	var undo []func() error
	rollback := func(cause error) error {
		errs := []error{cause}
		for i := len(undo) - 1; i >= 0; i-- {
			if err := undo[i](); err != nil {
				errs = append(errs, fmt.Errorf("rollback: %w", err))
			}
		}
		return errors.Join(errs...)
	}
	exec := func(sql string) error {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("tmpfs fix: %s: %w", sql, err)
		}
		return nil
	}
	cleanCtx := context.WithoutCancel(ctx)

	// 1. Directory.
	created := false
	if _, err := os.Stat(t.Location); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(t.Location, 0o700); err != nil {
			return nil, fmt.Errorf("tmpfs fix: %w", err)
		}
		created = true
	}
	if err := os.Chown(t.Location, t.UID, t.GID); err != nil {
		return nil, rollback(fmt.Errorf("tmpfs fix: %w", err))
	}
	if err := os.Chmod(t.Location, 0o700); err != nil {
		return nil, rollback(fmt.Errorf("tmpfs fix: %w", err))
	}
	if created {
		undo = append(undo, func() error { return os.Remove(t.Location) })
	}
	say("1. directory %s owned by %s (uid %d, gid %d), mode 0700", t.Location, or(t.OSUser, "the server's user"), t.UID, t.GID)

	// 2. Tablespace.
	ts := ident(t.Tablespace)
	if err := exec("CREATE TABLESPACE " + ts + " LOCATION " + quoteLiteral(t.Location)); err != nil {
		return nil, rollback(err)
	}
	undo = append(undo, func() error {
		_, err := conn.Exec(cleanCtx, "DROP TABLESPACE IF EXISTS "+ts)
		return err
	})
	if err := exec("GRANT CREATE ON TABLESPACE " + ts + " TO PUBLIC"); err != nil {
		return nil, rollback(err)
	}
	say("2. CREATE TABLESPACE %s LOCATION '%s'; GRANT CREATE ON TABLESPACE %s TO PUBLIC", ts, t.Location, ts)

	// 3. Per-database directory via a dummy temp table.
	var rel string
	if err := exec("CREATE TEMP TABLE " + probeTable + " (x int) TABLESPACE " + ts); err != nil {
		return nil, rollback(err)
	}
	err = conn.QueryRow(ctx, "SELECT pg_catalog.pg_relation_filepath('pg_temp."+probeTable+"')").Scan(&rel)
	if derr := exec("DROP TABLE pg_temp." + probeTable); err == nil {
		err = derr
	}
	if err != nil {
		return nil, rollback(fmt.Errorf("tmpfs fix: dummy temp table: %w", err))
	}
	dbDir := resolve(filepath.Dir(filepath.Join(t.DataDir, rel)))
	if t.DBDir != "" && dbDir != resolve(t.DBDir) {
		return nil, rollback(fmt.Errorf("tmpfs fix: the dummy temp table went to %s, expected %s", dbDir, t.DBDir))
	}
	t.DBDir = dbDir
	say("3. dummy temp table %s: %s; per-database directory %s", probeTable, rel, dbDir)

	// 4. tmpfs.
	if ents, err := os.ReadDir(dbDir); err != nil || len(ents) > 0 {
		return nil, rollback(fmt.Errorf("tmpfs fix: %s must exist and be empty before mounting (%d entries, %v)", dbDir, len(ents), err))
	}
	mopts := mountOptions(opts.Size, t.UID, t.GID)
	if err := unix.Mount("tmpfs", dbDir, "tmpfs", unix.MS_NODEV|unix.MS_NOSUID|unix.MS_NOEXEC, mopts); err != nil {
		return nil, rollback(fmt.Errorf("tmpfs fix: mount tmpfs on %s: %w", dbDir, err))
	}
	undo = append(undo, func() error { return unix.Unmount(dbDir, 0) })
	say("4. mount -t tmpfs -o %s,nodev,nosuid,noexec tmpfs %s", mopts, dbDir)

	// 5. temp_tablespaces.
	if opts.Scope == ScopeDatabase {
		if err := exec("ALTER DATABASE " + ident(t.Database) + " SET temp_tablespaces = " + quoteLiteral(t.Tablespace)); err != nil {
			return nil, rollback(err)
		}
		undo = append(undo, func() error {
			_, err := conn.Exec(cleanCtx, "ALTER DATABASE "+ident(t.Database)+" RESET temp_tablespaces")
			return err
		})
	} else {
		if err := exec("ALTER SYSTEM SET temp_tablespaces = " + quoteLiteral(t.Tablespace)); err != nil {
			return nil, rollback(err)
		}
		undo = append(undo, func() error {
			if _, err := conn.Exec(cleanCtx, "ALTER SYSTEM RESET temp_tablespaces"); err != nil {
				return err
			}
			_, err := conn.Exec(cleanCtx, "SELECT pg_catalog.pg_reload_conf()")
			return err
		})
	}
	if err := exec("SELECT pg_catalog.pg_reload_conf()"); err != nil {
		return nil, rollback(err)
	}
	if opts.Scope == ScopeDatabase {
		say("5. ALTER DATABASE %s SET temp_tablespaces = '%s'; SELECT pg_reload_conf()", ident(t.Database), t.Tablespace)
	} else {
		say("5. ALTER SYSTEM SET temp_tablespaces = '%s'; SELECT pg_reload_conf()", t.Tablespace)
	}
	for _, o := range t.Overrides {
		say("   note: overridden for some sessions by %s", o)
	}

	// 6. Verify.
	v, err := Verify(ctx, dsn, opts)
	if err != nil {
		return nil, rollback(err)
	}
	if !v.OnTmpfs(dbDir) {
		return nil, rollback(fmt.Errorf("tmpfs fix: verification failed: %s", v))
	}
	say("6. verified: %s", v)
	return v, nil
}

// Verify opens a new session on dsn, waits (up to 15 s) until its
// temp_tablespaces names opts.Tablespace (a reload reaches sessions
// asynchronously), creates a temp table, resolves pg_relation_filepath
// under data_directory and finds its mount in <ProcRoot>/self/mountinfo.
// The temp table is dropped. Errors: connection, queries, the setting not
// arriving, the mount not found.
func Verify(ctx context.Context, dsn string, opts Options) (*Verification, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	conn, err := Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	v := &Verification{}
	deadline := time.Now().Add(reloadTimeout)
	for {
		if err := conn.QueryRow(ctx, "SELECT current_setting('temp_tablespaces')").Scan(&v.TempTablespaces); err != nil {
			return nil, fmt.Errorf("tmpfs fix: verify: %w", err)
		}
		if slices.Contains(TablespaceNames(v.TempTablespaces), opts.Tablespace) {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("tmpfs fix: verify: a new session still has temp_tablespaces = '%s' after %s", v.TempTablespaces, reloadTimeout)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("tmpfs fix: verify: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	var dataDir string
	if _, err := conn.Exec(ctx, "CREATE TEMP TABLE erplab_tmpfs_check (x int)"); err != nil {
		return nil, fmt.Errorf("tmpfs fix: verify: %w", err)
	}
	err = conn.QueryRow(ctx, "SELECT current_setting('data_directory'), pg_catalog.pg_relation_filepath('pg_temp.erplab_tmpfs_check')").Scan(&dataDir, &v.RelPath)
	if _, derr := conn.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS pg_temp.erplab_tmpfs_check"); err == nil {
		err = derr
	}
	if err != nil {
		return nil, fmt.Errorf("tmpfs fix: verify: %w", err)
	}
	// The file is dropped by now; resolve its directory, which stays.
	v.File = filepath.Join(resolve(filepath.Dir(filepath.Join(dataDir, v.RelPath))), filepath.Base(v.RelPath))
	mounts, err := readMounts(opts.ProcRoot)
	if err != nil {
		return nil, err
	}
	mi := mountOf(mounts, v.File)
	if mi == nil {
		return nil, fmt.Errorf("tmpfs fix: verify: no mount holds %s", v.File)
	}
	v.MountPoint, v.FSType = mi.MountPoint, mi.FSType
	v.MountOptions = joinOptions(mi.SuperOptions)
	return v, nil
}

// Undo reverses Apply for opts.Tablespace on the server dsn names (local,
// root, superuser): it resets every temp_tablespaces setting that names
// the tablespace (ALTER SYSTEM, per database, per role), reloads, checks
// that no temp file is left on the mounts, unmounts every mount under the
// tablespace directory, drops the tablespace and removes the directory.
// It is idempotent: parts already undone are skipped. Errors name what is
// left, e.g. temp files of sessions that still hold temp tables there.
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
	t, err := Inspect(ctx, conn, opts)
	if err != nil {
		return err
	}
	switch {
	case !t.Local:
		return errors.New("tmpfs fix: --undo works on a server on this host only (Unix socket or loopback)")
	case !t.Superuser:
		return errors.New("tmpfs fix: --undo needs a superuser role")
	case t.Location == "":
		return errors.New("tmpfs fix: cannot tell the tablespace directory: pass --location")
	}
	say := func(format string, a ...any) { fmt.Fprintf(log, format+"\n", a...) }
	exec := func(sql string) error {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("tmpfs fix: %s: %w", sql, err)
		}
		return nil
	}

	// 1. Settings naming the tablespace.
	reset := false
	var auto string
	err = conn.QueryRow(ctx, `SELECT coalesce((SELECT setting FROM pg_catalog.pg_file_settings
WHERE name = 'temp_tablespaces' AND sourcefile LIKE '%postgresql.auto.conf' ORDER BY seqno DESC LIMIT 1), '')`).Scan(&auto)
	if err != nil {
		return fmt.Errorf("tmpfs fix: read postgresql.auto.conf settings: %w", err)
	}
	if slices.Contains(TablespaceNames(auto), t.Tablespace) {
		if err := exec("ALTER SYSTEM RESET temp_tablespaces"); err != nil {
			return err
		}
		say("ALTER SYSTEM RESET temp_tablespaces (was '%s')", auto)
		reset = true
	}
	rows, err := conn.Query(ctx, `SELECT coalesce(d.datname::text, ''), coalesce(r.rolname::text, ''), c
FROM pg_catalog.pg_db_role_setting s
LEFT JOIN pg_catalog.pg_database d ON d.oid = s.setdatabase
LEFT JOIN pg_catalog.pg_roles r ON r.oid = s.setrole,
LATERAL unnest(s.setconfig) AS c
WHERE c LIKE 'temp\_tablespaces=%'`)
	if err != nil {
		return fmt.Errorf("tmpfs fix: read per-database settings: %w", err)
	}
	type ov struct{ db, role, cfg string }
	ovs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ov, error) {
		var o ov
		err := r.Scan(&o.db, &o.role, &o.cfg)
		return o, err
	})
	if err != nil {
		return fmt.Errorf("tmpfs fix: read per-database settings: %w", err)
	}
	for _, o := range ovs {
		_, val, _ := strings.Cut(o.cfg, "=")
		if !slices.Contains(TablespaceNames(val), t.Tablespace) {
			continue
		}
		var sql string
		switch {
		case o.role != "" && o.db != "":
			sql = "ALTER ROLE " + ident(o.role) + " IN DATABASE " + ident(o.db) + " RESET temp_tablespaces"
		case o.role != "":
			sql = "ALTER ROLE " + ident(o.role) + " RESET temp_tablespaces"
		default:
			sql = "ALTER DATABASE " + ident(o.db) + " RESET temp_tablespaces"
		}
		if err := exec(sql); err != nil {
			return err
		}
		say("%s (was %s)", sql, o.cfg)
		reset = true
	}
	if reset {
		if err := exec("SELECT pg_catalog.pg_reload_conf()"); err != nil {
			return err
		}
		// Let sessions see the reset before the files are checked.
		if err := waitSetting(ctx, dsn, t.Tablespace); err != nil {
			return err
		}
		say("SELECT pg_reload_conf()")
	}

	// 2. Mounts under the tablespace directory, deepest first.
	mounts, err := readMounts(opts.ProcRoot)
	if err != nil {
		return err
	}
	loc := resolve(t.Location)
	var under []string
	for _, mi := range mounts {
		if strings.HasPrefix(mi.MountPoint, loc+"/") || mi.MountPoint == loc {
			under = append(under, mi.MountPoint)
		}
	}
	sort.Slice(under, func(i, j int) bool { return len(under[i]) > len(under[j]) })
	for _, mp := range under {
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
	}

	// 3. Tablespace.
	if t.TablespaceExists {
		if err := exec("DROP TABLESPACE " + ident(t.Tablespace)); err != nil {
			return fmt.Errorf("%w (files of other databases or sessions may still be in %s)", err, t.Location)
		}
		say("DROP TABLESPACE %s", ident(t.Tablespace))
	}

	// 4. Directory.
	if err := os.Remove(t.Location); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("tmpfs fix: remove %s: %w", t.Location, err)
	} else if err == nil {
		say("rmdir %s", t.Location)
	}

	// 5. Nothing left.
	if left, err := Leftovers(ctx, conn, opts, t.Location); err != nil {
		return err
	} else if len(left) > 0 {
		return fmt.Errorf("tmpfs fix: undo left: %s", strings.Join(left, "; "))
	}
	say("undone: no mount, no tablespace, no directory left")
	return nil
}

// Leftovers lists what of the fix remains: mounts under location (from
// <ProcRoot>/self/mountinfo), the location directory, the tablespace, and
// settings naming it. Empty means nothing is left.
func Leftovers(ctx context.Context, conn *pgx.Conn, opts Options, location string) ([]string, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	var left []string
	mounts, err := readMounts(opts.ProcRoot)
	if err != nil {
		return nil, err
	}
	loc := resolve(location)
	for _, mi := range mounts {
		if mi.MountPoint == loc || strings.HasPrefix(mi.MountPoint, loc+"/") {
			left = append(left, "mount "+mi.MountPoint+" ("+mi.FSType+")")
		}
	}
	if _, err := os.Lstat(location); err == nil {
		left = append(left, "directory "+location)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*)::int4 FROM pg_catalog.pg_tablespace WHERE spcname = $1`, opts.Tablespace).Scan(&n); err != nil {
		return nil, fmt.Errorf("tmpfs fix: %w", err)
	}
	if n > 0 {
		left = append(left, "tablespace "+opts.Tablespace)
	}
	var cfg int
	if err := conn.QueryRow(ctx, `SELECT count(*)::int4 FROM pg_catalog.pg_db_role_setting s, LATERAL unnest(s.setconfig) c
WHERE c LIKE 'temp\_tablespaces=%' AND position($1 in c) > 0`, opts.Tablespace).Scan(&cfg); err != nil {
		return nil, fmt.Errorf("tmpfs fix: %w", err)
	}
	if cfg > 0 {
		left = append(left, fmt.Sprintf("%d per-database/role temp_tablespaces settings", cfg))
	}
	return left, nil
}

// waitSetting waits until a new session's temp_tablespaces no longer
// names ts (bounded by reloadTimeout): new backends start from the
// postmaster's settings, which the reload reaches asynchronously.
func waitSetting(ctx context.Context, dsn, ts string) error {
	deadline := time.Now().Add(reloadTimeout)
	for {
		conn, err := Connect(ctx, dsn)
		if err != nil {
			return err
		}
		var v string
		err = conn.QueryRow(ctx, "SELECT current_setting('temp_tablespaces')").Scan(&v)
		conn.Close(context.WithoutCancel(ctx))
		if err != nil {
			return fmt.Errorf("tmpfs fix: %w", err)
		}
		if !slices.Contains(TablespaceNames(v), ts) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("tmpfs fix: temp_tablespaces still '%s' %s after the reload", v, reloadTimeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("tmpfs fix: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// readMounts reads <procRoot>/self/mountinfo (proc(5)).
func readMounts(procRoot string) ([]*procfs.MountInfo, error) {
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return nil, fmt.Errorf("tmpfs fix: %w", err)
	}
	m, err := fs.GetMounts()
	if err != nil {
		return nil, fmt.Errorf("tmpfs fix: read %s: %w", filepath.Join(procRoot, "self", "mountinfo"), err)
	}
	return m, nil
}

// mountOf returns the mount holding path: the last-mounted entry whose
// mount point is the longest prefix of path (a later mount on the same
// point hides an earlier one).
func mountOf(mounts []*procfs.MountInfo, path string) *procfs.MountInfo {
	var best *procfs.MountInfo
	for _, mi := range mounts {
		mp := mi.MountPoint
		if path == mp || mp == "/" || strings.HasPrefix(path, strings.TrimSuffix(mp, "/")+"/") {
			if best == nil || len(mp) >= len(best.MountPoint) {
				best = mi
			}
		}
	}
	return best
}

// MountOf returns the file-system type and mount point holding path,
// from <procRoot>/self/mountinfo; path is resolved through symbolic
// links when it exists.
func MountOf(procRoot, path string) (fsType, mountPoint string, err error) {
	mounts, err := readMounts(procRoot)
	if err != nil {
		return "", "", err
	}
	mi := mountOf(mounts, resolve(path))
	if mi == nil {
		return "", "", fmt.Errorf("tmpfs fix: no mount holds %s", path)
	}
	return mi.FSType, mi.MountPoint, nil
}

// resolve returns path with symbolic links resolved, or path itself when
// that fails (e.g. it does not exist).
func resolve(path string) string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		return p
	}
	return filepath.Clean(path)
}

func joinOptions(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		if m[k] == "" {
			parts[i] = k
		} else {
			parts[i] = k + "=" + m[k]
		}
	}
	return strings.Join(parts, ",")
}

// TablespaceNames splits a temp_tablespaces value, a list of identifiers
// as SplitIdentifierString parses it (src/backend/utils/adt/varlena.c):
// separated by commas, unquoted names folded to lower case, double-quoted
// names kept as written ("" inside quotes is one quote).
func TablespaceNames(v string) []string {
	var out []string
	space := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	i := 0
	for {
		for i < len(v) && space(v[i]) {
			i++
		}
		if i >= len(v) {
			break
		}
		if v[i] == '"' {
			var name strings.Builder
			for i++; i < len(v); i++ {
				if v[i] == '"' {
					if i+1 < len(v) && v[i+1] == '"' {
						name.WriteByte('"')
						i++
						continue
					}
					i++
					break
				}
				name.WriteByte(v[i])
			}
			out = append(out, name.String())
		} else {
			start := i
			for i < len(v) && v[i] != ',' && !space(v[i]) {
				i++
			}
			if i > start {
				out = append(out, strings.ToLower(v[start:i]))
			}
		}
		for i < len(v) && v[i] != ',' {
			i++
		}
		if i >= len(v) {
			break
		}
		i++
	}
	return out
}
