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

	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/procfs"
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
	// StateFile is the state file recording the fix (set by Apply).
	StateFile string
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
// this host, as root, with a superuser role: the steps of procedure()
// (see the package documentation). Each step records in the state file
// (StatePath), the journal, what it will create or change before doing
// it, and what it did once done, before the next step starts, so that
// Undo reverts exactly that even after a crash between steps. It writes
// one line per step to log and returns the verification. On failure (or
// ctx cancelled) it runs the undos of the journaled steps in reverse and
// returns the error (with the undo's error joined, if any). Applying
// again what a complete state file records verifies it and changes
// nothing. Errors: not root, remote server, not superuser, the tablespace
// existing without a state file (not erplab's), an unfinished earlier
// apply, the location not empty, a failed step.
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
	t, err := applyTarget(ctx, conn, opts)
	if err != nil {
		return nil, err
	}
	say := func(format string, a ...any) { fmt.Fprintf(log, format+"\n", a...) }
	path, err := StatePath(opts, t.SystemIdentifier, t.DataDir, t.Tablespace)
	if err != nil {
		return nil, err
	}
	if prev, err := LoadState(path); err == nil {
		return reapply(ctx, conn, dsn, t, prev, path, opts, say)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := checkFresh(t); err != nil {
		return nil, err
	}
	st := &State{Version: StateVersion, SystemIdentifier: t.SystemIdentifier, DataDir: t.DataDir, Database: t.Database, DBOID: t.DBOID,
		Created: time.Now().UTC().Truncate(time.Second), Size: opts.Size, Scope: opts.Scope}
	a := &applier{conn: conn, dsn: dsn, t: t, opts: opts, st: st, path: path, say: say}
	return a.run(ctx)
}

// applyTarget inspects the server and refuses, in one line, what Apply
// cannot do there: a remote server, a role that is not a superuser, a
// data directory (or its owner) it cannot read or owned by root, no
// system identifier, a role of Options.GrantTo that does not exist.
func applyTarget(ctx context.Context, conn *pgx.Conn, opts Options) (*Target, error) {
	t, err := Inspect(ctx, conn, opts)
	if err != nil {
		return nil, err
	}
	switch {
	case !t.Local:
		return nil, errors.New("tmpfs fix: --apply works on a server on this host only (Unix socket or loopback); print the procedure and run it there")
	case !t.Superuser:
		return nil, errors.New("tmpfs fix: --apply needs a superuser role (CREATE TABLESPACE, ALTER SYSTEM)")
	case t.DataDir == "" || t.UID < 0:
		return nil, errors.New("tmpfs fix: cannot read data_directory and its owner (the server's OS user)")
	case t.SystemIdentifier == "":
		return nil, errors.New("tmpfs fix: cannot read pg_control_system() (the system identifier names the server in erplab's state file)")
	case t.UID == 0:
		return nil, fmt.Errorf("tmpfs fix: %s is owned by root; cannot tell the server's OS user", t.DataDir)
	}
	for _, r := range opts.GrantTo {
		if strings.EqualFold(r, "public") {
			continue
		}
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1)`, r).Scan(&ok); err != nil {
			return nil, fmt.Errorf("tmpfs fix: look up role %s: %w", r, err)
		}
		if !ok {
			return nil, fmt.Errorf("tmpfs fix: --grant-to: role %q does not exist", r)
		}
	}
	return t, nil
}

// checkFresh refuses, without a state file, a tablespace of the name
// that exists (not erplab's) and a location that is not a missing or
// empty directory.
func checkFresh(t *Target) error {
	if t.TablespaceExists {
		return fmt.Errorf("tmpfs fix: tablespace %s already exists (oid %d at %s) and erplab has no record of creating it; pick another --tablespace", t.Tablespace, t.TablespaceOID, t.Location)
	}
	fi, err := os.Stat(t.Location)
	switch {
	case err == nil && !fi.IsDir():
		return fmt.Errorf("tmpfs fix: %s exists and is not a directory; pick another --location", t.Location)
	case err == nil:
		if ents, err := os.ReadDir(t.Location); err != nil {
			return fmt.Errorf("tmpfs fix: %w", err)
		} else if len(ents) > 0 {
			return fmt.Errorf("tmpfs fix: %s exists and is not empty; pick another --location", t.Location)
		}
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("tmpfs fix: %w", err)
	}
	return nil
}

// reapply is Apply when a state file exists: a complete one whose
// tablespace and mount are still those recorded is verified and left as
// is; anything else is refused.
func reapply(ctx context.Context, conn *pgx.Conn, dsn string, t *Target, st *State, path string, opts Options, say func(string, ...any)) (*Verification, error) {
	if !st.Complete {
		return nil, fmt.Errorf("tmpfs fix: an earlier apply of tablespace %s did not finish (%s; state file %s); run --undo first", t.Tablespace, st.Summary(), path)
	}
	if st.Size != opts.Size || st.Scope != opts.Scope {
		return nil, fmt.Errorf("tmpfs fix: tablespace %s is already applied with size %s, scope %s (state file %s); run --undo first to change them", t.Tablespace, st.Size, st.Scope, path)
	}
	if err := checkOwned(ctx, conn, st, opts, path); err != nil {
		return nil, err
	}
	if !t.TablespaceExists {
		return nil, fmt.Errorf("tmpfs fix: state file %s records tablespace %s, which is gone; run --undo, then --apply", path, t.Tablespace)
	}
	v, err := Verify(ctx, dsn, opts)
	if err != nil {
		return nil, err
	}
	if !v.OnTmpfs(st.Mount.Point) {
		return nil, fmt.Errorf("tmpfs fix: already applied (state file %s) but verification fails: %s; run --undo, then --apply", path, v)
	}
	say("already applied (state file %s), nothing changed: %s", path, st.Summary())
	say("verified: %s", v)
	v.StateFile = path
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
	fs, err := hostfacts.New(procRoot, "")
	if err != nil {
		return nil, fmt.Errorf("tmpfs fix: %w", err)
	}
	m, err := fs.Mounts()
	if err != nil {
		return nil, fmt.Errorf("tmpfs fix: %w", err)
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
