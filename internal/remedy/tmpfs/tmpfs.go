package tmpfs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/hostfacts"
)

// Name is the fix's name on the command line.
const Name = "tmpfs-temp-tablespace"

// DefaultTablespace is the tablespace the fix creates unless told
// otherwise.
const DefaultTablespace = "erplab_temp_tmpfs"

// probeTable is the dummy temp table of step 3 and of Verify.
const probeTable = "erplab_tmpfs_probe"

// reloadTimeout bounds the wait for sessions to see a reloaded setting.
const reloadTimeout = 15 * time.Second

// FullWarning explains the full-tmpfs failure mode and how to size it.
const FullWarning = `When the tmpfs is full, INSERT into a temp table fails (SQLSTATE 53100, "could not extend file
...: No space left on device") and the file stays; even TRUNCATE fails, as it writes new files and rebuilds
the table's indexes;
only DROP TABLE frees the space. Platforms such as 1C fall back to DROP by themselves; other applications
may not. Size it for the peak: run the load test, watch 'df -h <mount>' (or erplab doctor, check
temp-tablespace) at the busiest moment and take twice that. tmpfs takes RAM (then swap) only as it
fills, so the size is a cap, not a reservation; count the peak in the memory budget.`

// Scope says where temp_tablespaces is set.
type Scope string

const (
	// ScopeSystem: ALTER SYSTEM SET temp_tablespaces; pg_reload_conf()
	// makes running sessions use it from their next statement. Applies to
	// every database (other databases' temp files land in the tablespace
	// on disk unless they get a mount too) and is overridden by per-role
	// or per-database settings.
	ScopeSystem Scope = "system"
	// ScopeDatabase: ALTER DATABASE <db> SET temp_tablespaces; only this
	// database, only sessions started afterwards.
	ScopeDatabase Scope = "database"
)

// Options configure the fix.
type Options struct {
	// Size is the tmpfs size option: a number with k, m, g (or K, M, G)
	// or %, e.g. "2G", "512m", "10%" (of RAM). Required for Apply and the
	// procedure.
	Size string
	// Tablespace is the tablespace name (default DefaultTablespace).
	Tablespace string
	// Location is the tablespace directory (default: next to the data
	// directory, <parent of data_directory>/<Tablespace>).
	Location string
	// Scope is where temp_tablespaces is set (default ScopeSystem).
	Scope Scope
	// ProcRoot is the proc tree whose self/mountinfo is read (default
	// "/proc").
	ProcRoot string
	// StateDir is erplab's state directory holding the state files
	// (default StateDir()); the files are in its subdirectory tmpfs.
	StateDir string
	// GrantTo are the roles given CREATE on the tablespace (without it
	// temp_tablespaces skips the tablespace for a role that is neither
	// superuser nor its owner). "PUBLIC" grants it to every role, which
	// also lets any role put permanent tables there (lost at reboot): only
	// when asked for. Empty: no grant (superusers only).
	GrantTo []string
	// Force makes Undo remove a tablespace, mount or setting erplab has
	// no record of creating (no state file, or the tablespace's OID or
	// the mount differs from the record): it then removes what a DBA may
	// have made. Apply ignores it.
	Force bool

	// recordMount (the ab remedy, on a throwaway server) records the
	// tmpfs in erplab's crash-safe record (leftover.AddMount) before
	// mounting it, so that the next erplab command unmounts it after a
	// kill -9; the fix's own --apply leaves its mount to --undo.
	recordMount bool

	// stopBefore, set by tests only, makes Apply return errStopped right
	// after recording the intent of that step ("directory",
	// "tablespace", "grant", "mount", "setting", "verify"), as a crash
	// there would leave it.
	stopBefore string
}

func (o *Options) normalize() error {
	if o.Tablespace == "" {
		o.Tablespace = DefaultTablespace
	}
	if o.Scope == "" {
		o.Scope = ScopeSystem
	}
	if o.Scope != ScopeSystem && o.Scope != ScopeDatabase {
		return fmt.Errorf("scope must be %s or %s, got %q", ScopeSystem, ScopeDatabase, o.Scope)
	}
	if o.ProcRoot == "" {
		o.ProcRoot = hostfacts.DefaultProcRoot
	}
	if o.Location != "" && !filepath.IsAbs(o.Location) {
		return fmt.Errorf("location must be an absolute path, got %q", o.Location)
	}
	for _, r := range o.GrantTo {
		if strings.TrimSpace(r) == "" {
			return errors.New("grant-to: empty role name")
		}
	}
	return nil
}

// grantees returns the GRANT target list of roles: PUBLIC (any case)
// as the keyword, other names quoted as identifiers.
func grantees(roles []string) string {
	out := make([]string, len(roles))
	for i, r := range roles {
		if strings.EqualFold(r, "public") {
			out[i] = "PUBLIC"
		} else {
			out[i] = ident(r)
		}
	}
	return strings.Join(out, ", ")
}

// ValidSize checks a tmpfs size option: digits followed by at most one of
// k, m, g, K, M, G, % (Documentation/filesystems/tmpfs.rst, "size").
func ValidSize(s string) error {
	if s == "" {
		return errors.New("size is required, e.g. 2G")
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 || (i < len(s) && (i != len(s)-1 || !strings.ContainsRune("kmgKMG%", rune(s[i])))) {
		return fmt.Errorf("size %q: want a number with k, m, g or %% (e.g. 2G, 512m, 10%%)", s)
	}
	if n, _ := strconv.ParseUint(s[:i], 10, 64); n == 0 {
		return fmt.Errorf("size %q must be greater than 0", s)
	}
	return nil
}

// Target is what the fix works on, read from the server (read-only).
type Target struct {
	Database string
	DBOID    uint32
	// Version is server_version, VersionNum server_version_num.
	Version    string
	VersionNum int
	// VersionDir is PG_<major>_<catversion> (TABLESPACE_VERSION_DIRECTORY,
	// src/include/catalog/catversion.h); "" when pg_control_system() is
	// not readable.
	VersionDir string
	// DataDir is data_directory ("" without superuser).
	DataDir string
	// OSUser, UID, GID own DataDir (the server's OS user); UID -1 when
	// DataDir cannot be read here.
	OSUser   string
	UID, GID int
	// Location is the tablespace directory; DBDir the per-database
	// directory under it, the tmpfs mount point.
	Location string
	DBDir    string
	// Tablespace is the name; TablespaceExists whether it exists now,
	// TablespaceOID its oid then (else 0).
	Tablespace       string
	TablespaceExists bool
	TablespaceOID    uint32
	// SystemIdentifier is pg_control_system().system_identifier as
	// decimal text ("" when not readable).
	SystemIdentifier string
	// Local: connected over a Unix socket or loopback. Superuser: the
	// role is a superuser.
	Local     bool
	Superuser bool
	// TempTablespaces is temp_tablespaces as the session sees it;
	// Overrides the per-database or per-role settings of it
	// ("database erp: temp_tablespaces=x").
	TempTablespaces string
	Overrides       []string
}

// Connect opens a session for the fix (not read-only) with
// application_name "erplab doctor fix". Errors are one line without
// passwords.
func Connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	return conninfo.Connect(ctx, dsn, "erplab doctor fix", nil)
}

// Inspect reads the target of the fix from the server conn is connected
// to, without changing anything. opts.Location and Tablespace default as
// documented in Options. Errors: a failed query, wrapped.
func Inspect(ctx context.Context, conn *pgx.Conn, opts Options) (*Target, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	t := &Target{Tablespace: opts.Tablespace, UID: -1, GID: -1}
	var oid int64
	err := conn.QueryRow(ctx, `SELECT current_database()::text, (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())::int8,
       current_setting('server_version'), current_setting('server_version_num')::int4,
       coalesce((SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user), false),
       current_setting('temp_tablespaces'), coalesce(current_setting('data_directory', true), '')`).
		Scan(&t.Database, &oid, &t.Version, &t.VersionNum, &t.Superuser, &t.TempTablespaces, &t.DataDir)
	if err != nil {
		return nil, fmt.Errorf("tmpfs fix: inspect server: %w", err)
	}
	t.DBOID = uint32(oid)
	t.Local = isLocal(conn)
	var cat int64
	var sysid string
	if err := conn.QueryRow(ctx, `SELECT catalog_version_no::int8, system_identifier::text FROM pg_catalog.pg_control_system()`).Scan(&cat, &sysid); err == nil {
		t.VersionDir = fmt.Sprintf("PG_%d_%d", t.VersionNum/10000, cat)
		t.SystemIdentifier = sysid
	}
	var loc string
	var tsOID int64
	err = conn.QueryRow(ctx, `SELECT oid::int8, pg_catalog.pg_tablespace_location(oid) FROM pg_catalog.pg_tablespace WHERE spcname = $1`, t.Tablespace).Scan(&tsOID, &loc)
	switch {
	case err == nil:
		t.TablespaceExists, t.Location, t.TablespaceOID = true, loc, uint32(tsOID)
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("tmpfs fix: inspect tablespace: %w", err)
	}
	t.locate(opts)
	if t.Overrides, err = inspectOverrides(ctx, conn); err != nil {
		return nil, err
	}
	return t, nil
}

// locate fills in the tablespace directory (the tablespace's, else
// opts.Location, else next to the data directory), the per-database
// directory under it, and, for a local server, the data directory's
// owner.
func (t *Target) locate(opts Options) {
	if t.Location == "" {
		t.Location = opts.Location
	}
	if t.Location == "" && t.DataDir != "" {
		t.Location = filepath.Join(filepath.Dir(t.DataDir), t.Tablespace)
	}
	if t.Location != "" && t.VersionDir != "" {
		t.DBDir = filepath.Join(t.Location, t.VersionDir, strconv.FormatUint(uint64(t.DBOID), 10))
	}
	if t.DataDir == "" || !t.Local {
		return
	}
	if st, err := os.Stat(t.DataDir); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			t.UID, t.GID = int(sys.Uid), int(sys.Gid)
			if u, err := user.LookupId(strconv.Itoa(t.UID)); err == nil {
				t.OSUser = u.Username
			}
		}
	}
}

// inspectOverrides reads the per-database and per-role temp_tablespaces
// settings as Target.Overrides shows them.
func inspectOverrides(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT coalesce(d.datname::text, ''), coalesce(r.rolname::text, ''), c
FROM pg_catalog.pg_db_role_setting s
LEFT JOIN pg_catalog.pg_database d ON d.oid = s.setdatabase
LEFT JOIN pg_catalog.pg_roles r ON r.oid = s.setrole,
LATERAL unnest(s.setconfig) AS c
WHERE c LIKE 'temp\_tablespaces=%'`)
	if err != nil {
		return nil, fmt.Errorf("tmpfs fix: inspect settings: %w", err)
	}
	var out []string
	var db, role, cfg string
	if _, err := pgx.ForEachRow(rows, []any{&db, &role, &cfg}, func() error {
		out = append(out, overrideText(db, role, cfg))
		return nil
	}); err != nil {
		return nil, fmt.Errorf("tmpfs fix: inspect settings: %w", err)
	}
	return out, nil
}

func overrideText(db, role, cfg string) string {
	switch {
	case db != "" && role != "":
		return fmt.Sprintf("role %s in database %s: %s", role, db, cfg)
	case role != "":
		return fmt.Sprintf("role %s: %s", role, cfg)
	}
	return fmt.Sprintf("database %s: %s", db, cfg)
}

func isLocal(conn *pgx.Conn) bool {
	switch a := conn.PgConn().Conn().RemoteAddr().(type) {
	case *net.UnixAddr:
		return true
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	}
	return false
}

// or returns s, or the placeholder when s is empty.
func or(s, placeholder string) string {
	if s == "" {
		return placeholder
	}
	return s
}

// quoteLiteral quotes a string as an SQL literal (standard_conforming_strings on).
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

// mountOptions are the tmpfs options of step 4.
func mountOptions(size string, uid, gid int) string {
	return fmt.Sprintf("size=%s,uid=%d,gid=%d,mode=0700", size, uid, gid)
}

// Procedure returns the whole procedure as commands to run by hand, with
// the target's values filled in (placeholders in <...> where t lacks
// them, e.g. for a remote server), followed by FullWarning.
func Procedure(t *Target, opts Options) string {
	_ = opts.normalize()
	size := or(opts.Size, "<size, e.g. 2G>")
	ts := ident(t.Tablespace)
	loc := or(t.Location, "<directory next to the data directory>")
	owner := or(t.OSUser, "postgres")
	uid, gid := "<uid of "+owner+">", "<gid of "+owner+">"
	if t.UID >= 0 {
		uid, gid = strconv.Itoa(t.UID), strconv.Itoa(t.GID)
	}
	dbdir := or(t.DBDir, loc+"/PG_<major>_<catversion>/"+strconv.FormatUint(uint64(t.DBOID), 10))
	db := ident(t.Database)
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("# Temp tables of database %s on tmpfs (%s). Run as root on the database host; SQL as a superuser", t.Database, Name)
	p("# connected to database %s (psql -d %s).", t.Database, t.Database)
	p("")
	p("# 1. Tablespace directory owned by the server's OS user (%s), mode 0700.", owner)
	p("install -d -o %s -g %s -m 0700 %s", owner, owner, loc)
	p("")
	p("# 2. The tablespace; CREATE on it for the roles that make temp tables (temp_tablespaces skips it for roles without it).")
	p("#    Only those roles: with CREATE a role can also put permanent tables there, which a reboot wipes.")
	p("CREATE TABLESPACE %s LOCATION %s;", ts, quoteLiteral(loc))
	if len(opts.GrantTo) > 0 {
		p("GRANT CREATE ON TABLESPACE %s TO %s;", ts, grantees(opts.GrantTo))
	} else {
		p("GRANT CREATE ON TABLESPACE %s TO <application role>;   -- --grant-to ROLE[,ROLE] fills this in", ts)
	}
	p("")
	p("# 3. A dummy temp table makes the server create the per-database directory, then goes.")
	p("CREATE TEMP TABLE %s (x int) TABLESPACE %s;", probeTable, ts)
	p("SELECT pg_relation_filepath('pg_temp.%s');   -- pg_tblspc/<oid>/%s/%d/t<n>_<relfilenode>", probeTable, or(t.VersionDir, "PG_<major>_<catversion>"), t.DBOID)
	p("DROP TABLE pg_temp.%s;", probeTable)
	p("")
	p("# 4. tmpfs over the per-database directory (empty now), owned by %s, mode 0700.", owner)
	p("mount -t tmpfs -o size=%s,uid=%s,gid=%s,mode=0700,nodev,nosuid,noexec tmpfs %s", size, uid, gid, dbdir)
	p("# persist it (mounted before PostgreSQL starts; without it temp files fall back to the directory on disk):")
	p("echo 'tmpfs %s tmpfs size=%s,uid=%s,gid=%s,mode=0700,nodev,nosuid,noexec 0 0' >> /etc/fstab", dbdir, size, uid, gid)
	p("")
	if opts.Scope == ScopeDatabase {
		p("# 5. temp_tablespaces for this database only; sessions started from now on use it.")
		p("ALTER DATABASE %s SET temp_tablespaces = %s;", db, quoteLiteral(t.Tablespace))
	} else {
		p("# 5. temp_tablespaces for the server; running sessions use it from their next statement after the reload.")
		p("#    (--scope database: ALTER DATABASE instead, this database only, new sessions only)")
		p("ALTER SYSTEM SET temp_tablespaces = %s;", quoteLiteral(t.Tablespace))
	}
	p("SELECT pg_reload_conf();")
	for _, o := range t.Overrides {
		p("#    note: a per-database/role setting overrides it: %s", o)
	}
	p("")
	p("# 6. Verify from a new session: the file of a new temp table is on the tmpfs.")
	p("CREATE TEMP TABLE erplab_tmpfs_check (x int);")
	p("SELECT current_setting('data_directory') || '/' || pg_relation_filepath('pg_temp.erplab_tmpfs_check');")
	p("findmnt -T <that path>   # FSTYPE tmpfs, TARGET %s", dbdir)
	p("")
	p("# Undo: erplab doctor fix %s --undo (temp_tablespaces back, umount %s, DROP TABLESPACE %s, rmdir %s):", Name, dbdir, ts, loc)
	p("# it reverts what --apply recorded; steps run by hand have no record: undo them by hand, or --undo --force.")
	p("")
	for _, l := range strings.Split(FullWarning, "\n") {
		p("# %s", l)
	}
	return b.String()
}
