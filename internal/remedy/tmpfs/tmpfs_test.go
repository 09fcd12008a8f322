package tmpfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/erplab/erplab/internal/pgtest"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

func TestValidSize(t *testing.T) {
	for _, s := range []string{"2G", "512m", "64M", "10%", "1048576", "4k"} {
		if err := ValidSize(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{"", "G", "2GB", "-1G", "2 G", "0", "1.5G", "2G,uid=0"} {
		if err := ValidSize(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestTablespaceNames(t *testing.T) {
	cases := map[string][]string{
		"":                       nil,
		"erplab_temp_tmpfs":      {"erplab_temp_tmpfs"},
		" Fast , slow":           {"fast", "slow"},
		`"Fast,One", x`:          {"Fast,One", "x"},
		`"a""b"`:                 {`a"b`},
		"a,,b":                   {"a", "b"},
		`pg_default, "Temp TS" `: {"pg_default", "Temp TS"},
	}
	for in, want := range cases {
		if got := TablespaceNames(in); !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

func dial(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// The printed procedure carries the server's real values: the data
// directory's owner and its uid/gid, the per-database directory with the
// catalog version and database oid, and the setting for the scope.
func TestProcedureValues(t *testing.T) {
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	conn := dial(t, dsn)
	var oid uint32
	var dataDir string
	var cat int64
	if err := conn.QueryRow(ctx, `SELECT oid, current_setting('data_directory'), (SELECT catalog_version_no FROM pg_control_system())
FROM pg_database WHERE datname = current_database()`).Scan(&oid, &dataDir, &cat); err != nil {
		t.Fatal(err)
	}
	tg, err := Inspect(ctx, conn, Options{Size: "2G"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	uid := int(st.Sys().(*syscall.Stat_t).Uid)
	wantLoc := filepath.Join(filepath.Dir(dataDir), DefaultTablespace)
	wantDir := filepath.Join(wantLoc, fmt.Sprintf("PG_%d_%d", tg.VersionNum/10000, cat), strconv.FormatUint(uint64(oid), 10))
	if tg.UID != uid || tg.Location != wantLoc || tg.DBDir != wantDir || !tg.Local || !tg.Superuser || tg.TablespaceExists {
		t.Fatalf("target %+v; want uid %d location %s dir %s", tg, uid, wantLoc, wantDir)
	}
	p := Procedure(tg, Options{Size: "2G", GrantTo: []string{"PUBLIC"}})
	for _, want := range []string{
		fmt.Sprintf("install -d -o %s -g %s -m 0700 %s", tg.OSUser, tg.OSUser, wantLoc),
		fmt.Sprintf(`CREATE TABLESPACE "%s" LOCATION '%s';`, DefaultTablespace, wantLoc),
		`GRANT CREATE ON TABLESPACE "` + DefaultTablespace + `" TO PUBLIC;`,
		fmt.Sprintf("mount -t tmpfs -o size=2G,uid=%d,gid=%d,mode=0700,nodev,nosuid,noexec tmpfs %s", uid, tg.GID, wantDir),
		"ALTER SYSTEM SET temp_tablespaces = '" + DefaultTablespace + "';",
		"SELECT pg_reload_conf();",
		"\n# only DROP TABLE frees the space",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("procedure lacks %q:\n%s", want, p)
		}
	}
	p = Procedure(tg, Options{Size: "2G", Scope: ScopeDatabase})
	if !strings.Contains(p, fmt.Sprintf("ALTER DATABASE %s SET temp_tablespaces = '%s';", pgx.Identifier{tg.Database}.Sanitize(), DefaultTablespace)) || strings.Contains(p, "ALTER SYSTEM SET") {
		t.Errorf("database scope:\n%s", p)
	}
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the fix mounts a tmpfs and chowns a directory")
	}
}

// mountPointsUnder lists mount points at or under dir in /proc/self/mountinfo.
func mountPointsUnder(t *testing.T, dir string) []string {
	t.Helper()
	ms, err := readMounts("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		if m.MountPoint == dir || strings.HasPrefix(m.MountPoint, dir+"/") {
			out = append(out, m.MountPoint)
		}
	}
	return out
}

// safetyNet unmounts whatever a failed test left under the cluster
// directory, so the cluster's removal does not trip over a mount.
func safetyNet(t *testing.T) {
	dir := resolve(srv.Cluster(t).Dir())
	t.Cleanup(func() {
		for _, mp := range mountPointsUnder(t, dir) {
			_ = syscall.Unmount(mp, 0)
		}
	})
}

// The fix applied to the test server: a new session's temp table lands on
// the tmpfs (pg_relation_filepath vs /proc/self/mountinfo), owned by the
// server's user with mode 0700; undo refuses while a session still holds
// a temp table there, then leaves nothing once it is gone.
func TestApplyVerifyUndo(t *testing.T) {
	needRoot(t)
	safetyNet(t)
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	var log strings.Builder
	v, err := Apply(ctx, dsn, Options{Size: "64M"}, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Log(log.String())
	tg, err := Inspect(ctx, dial(t, dsn), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !tg.TablespaceExists || !v.OnTmpfs(tg.DBDir) || !strings.Contains(v.MountOptions, "size=65536k") || !strings.Contains(v.MountOptions, "mode=700") ||
		!strings.Contains(v.MountOptions, fmt.Sprintf("uid=%d", tg.UID)) {
		t.Fatalf("verification %s; target %+v", v, tg)
	}
	st, err := os.Stat(tg.DBDir)
	if err != nil {
		t.Fatal(err)
	}
	if sys := st.Sys().(*syscall.Stat_t); int(sys.Uid) != tg.UID || st.Mode().Perm() != 0o700 {
		t.Errorf("%s owned by %d mode %v, want %d 0700", tg.DBDir, sys.Uid, st.Mode().Perm(), tg.UID)
	}

	// An application session: temp table with data, file on the tmpfs.
	app := dial(t, dsn)
	var rel, dataDir string
	if _, err := app.Exec(ctx, "CREATE TEMP TABLE doc_buf AS SELECT g AS id, repeat('x', 100) AS pad FROM generate_series(1, 20000) g"); err != nil {
		t.Fatal(err)
	}
	if err := app.QueryRow(ctx, "SELECT current_setting('data_directory'), pg_relation_filepath('doc_buf')").Scan(&dataDir, &rel); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dataDir, rel)
	fsType, mp, err := MountOf("/proc", file)
	if err != nil || fsType != "tmpfs" || mp != resolve(tg.DBDir) {
		t.Fatalf("%s is on %s at %s (%v), want tmpfs at %s", file, fsType, mp, err, tg.DBDir)
	}
	if fi, err := os.Stat(file); err != nil || fi.Size() == 0 {
		t.Errorf("temp table file %s: %v", file, err)
	}

	// Undo refuses while the temp table lives, and says why.
	err = Undo(ctx, dsn, Options{}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "temp files still on "+resolve(tg.DBDir)) {
		t.Fatalf("undo with a live temp table: %v", err)
	}
	app.Close(ctx)
	// The backend removes its temp files when it exits; wait for it.
	waitEmpty(t, tg.DBDir)

	log.Reset()
	if err := Undo(ctx, dsn, Options{}, &log); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Log(log.String())
	left, err := Leftovers(ctx, dial(t, dsn), Options{}, tg.Location)
	if err != nil || len(left) > 0 {
		t.Errorf("leftovers %q (%v)", left, err)
	}
	if m := mountPointsUnder(t, resolve(tg.Location)); len(m) > 0 {
		t.Errorf("mounts left in /proc/self/mountinfo: %q", m)
	}
	if _, err := os.Lstat(tg.Location); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists (%v)", tg.Location, err)
	}
	var ts string
	if err := dial(t, dsn).QueryRow(ctx, "SHOW temp_tablespaces").Scan(&ts); err != nil || ts != "" {
		t.Errorf("temp_tablespaces %q after undo (%v)", ts, err)
	}
	// A second undo finds nothing to do.
	if err := Undo(ctx, dsn, Options{}, io.Discard); err != nil {
		t.Errorf("second undo: %v", err)
	}
}

// waitEmpty waits until dir has no entries (a closed session's backend
// deletes its temp files as it exits).
func waitEmpty(t *testing.T, dir string) {
	t.Helper()
	for i := 0; i < 200; i++ {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s not empty", dir)
}

// The failure mode FullWarning describes, on a 1 MB tmpfs with database
// scope: INSERT fails with disk_full, TRUNCATE of the indexed temp table
// fails too, DROP TABLE frees the space.
func TestFullTmpfs(t *testing.T) {
	needRoot(t)
	safetyNet(t)
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	if _, err := Apply(ctx, dsn, Options{Size: "1M", Scope: ScopeDatabase, Tablespace: "erplab_full_test"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	opts := Options{Tablespace: "erplab_full_test"}
	t.Cleanup(func() {
		if err := Undo(context.Background(), dsn, opts, io.Discard); err != nil {
			t.Errorf("undo: %v", err)
		}
	})
	app := dial(t, dsn)
	for _, q := range []string{"CREATE TEMP TABLE buf (id int, pad text)", "CREATE INDEX ON buf (id)"} {
		if _, err := app.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	_, err := app.Exec(ctx, "INSERT INTO buf SELECT g, repeat('x', 200) FROM generate_series(1, 20000) g")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53100" {
		t.Fatalf("INSERT into a full tmpfs: %v, want disk_full (53100)", err)
	}
	_, err = app.Exec(ctx, "TRUNCATE buf")
	if !errors.As(err, &pe) || pe.Code != "53100" {
		t.Errorf("TRUNCATE on a full tmpfs: %v, want disk_full (53100)", err)
	}
	var before, after syscall.Statfs_t
	tg, err := Inspect(ctx, dial(t, dsn), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Statfs(tg.DBDir, &before); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Exec(ctx, "DROP TABLE buf"); err != nil {
		t.Fatalf("DROP TABLE on a full tmpfs: %v", err)
	}
	if err := syscall.Statfs(tg.DBDir, &after); err != nil {
		t.Fatal(err)
	}
	if after.Bfree <= before.Bfree || after.Bfree != after.Blocks {
		t.Errorf("free blocks %d -> %d of %d after DROP", before.Bfree, after.Bfree, after.Blocks)
	}
	app.Close(ctx)
}

func TestApplyRefusals(t *testing.T) {
	ctx := context.Background()
	if _, err := Apply(ctx, srv.DSN(t, "postgres"), Options{Size: "2GB"}, io.Discard); err == nil || !strings.Contains(err.Error(), "2GB") {
		t.Errorf("bad size: %v", err)
	}
	if _, err := Apply(ctx, srv.DSN(t, "postgres"), Options{Size: "2G", Scope: "cluster"}, io.Discard); err == nil || !strings.Contains(err.Error(), "scope") {
		t.Errorf("bad scope: %v", err)
	}
	if os.Geteuid() != 0 {
		if _, err := Apply(ctx, srv.DSN(t, "postgres"), Options{Size: "2G"}, io.Discard); err == nil || !strings.Contains(err.Error(), "root") {
			t.Errorf("not root: %v", err)
		}
		return
	}
	// A tablespace that already exists is not taken over.
	dsn := srv.NewDatabase(t)
	conn := dial(t, dsn)
	dir := filepath.Join(srv.Cluster(t).Dir(), "other_ts")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(srv.Cluster(t).DataDir())
	sys := st.Sys().(*syscall.Stat_t)
	if err := os.Chown(dir, int(sys.Uid), int(sys.Gid)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLESPACE erplab_exists LOCATION '"+dir+"'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Exec(context.Background(), "DROP TABLESPACE erplab_exists") })
	if _, err := Apply(ctx, dsn, Options{Size: "2G", Tablespace: "erplab_exists"}, io.Discard); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("existing tablespace: %v", err)
	}
}

// The grant goes only to the roles of GrantTo: without it the procedure
// names a placeholder role and Apply grants nothing; with roles, only
// them (PUBLIC keeps no CREATE); a role that does not exist is refused
// before any change.
func TestGrantTo(t *testing.T) {
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	conn := dial(t, dsn)
	tg, err := Inspect(ctx, conn, Options{Size: "2G"})
	if err != nil {
		t.Fatal(err)
	}
	p := Procedure(tg, Options{Size: "2G"})
	if strings.Contains(p, "TO PUBLIC") || !strings.Contains(p, "TO <application role>") {
		t.Errorf("procedure without --grant-to:\n%s", p)
	}
	p = Procedure(tg, Options{Size: "2G", GrantTo: []string{"erp_app", "Report"}})
	if !strings.Contains(p, `GRANT CREATE ON TABLESPACE "`+DefaultTablespace+`" TO "erp_app", "Report";`) {
		t.Errorf("procedure with roles:\n%s", p)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for Apply")
	}
	if _, err := Apply(ctx, dsn, Options{Size: "16M", Scope: ScopeDatabase, Tablespace: "erplab_grant_test", GrantTo: []string{"no_such_role_x"}}, io.Discard); err == nil || !strings.Contains(err.Error(), "no_such_role_x") {
		t.Fatalf("unknown role: %v", err)
	}
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_tablespace WHERE spcname = 'erplab_grant_test')`).Scan(&exists); err != nil || exists {
		t.Fatalf("refused apply left a tablespace (%v)", err)
	}
	if _, err := conn.Exec(ctx, "DROP ROLE IF EXISTS erp_app_t; CREATE ROLE erp_app_t"); err != nil {
		t.Fatal(err)
	}
	opts := Options{Size: "16M", Scope: ScopeDatabase, Tablespace: "erplab_grant_test", GrantTo: []string{"erp_app_t"}}
	if _, err := Apply(ctx, dsn, opts, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Undo(context.Background(), dsn, opts, io.Discard); err != nil {
			t.Errorf("undo: %v", err)
		}
		conn.Exec(context.Background(), "DROP ROLE IF EXISTS erp_app_t")
	})
	var app, public bool
	if err := conn.QueryRow(ctx, `SELECT has_tablespace_privilege('erp_app_t', 'erplab_grant_test', 'CREATE'),
       coalesce((SELECT bool_or(a.grantee = 0) FROM pg_tablespace t, aclexplode(t.spcacl) a WHERE t.spcname = 'erplab_grant_test'), false)`).Scan(&app, &public); err != nil {
		t.Fatal(err)
	}
	if !app || public {
		t.Errorf("CREATE for erp_app_t %v, for PUBLIC %v", app, public)
	}
}
