package tmpfs

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/erplab/erplab/internal/leftover"
	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/remedy"
)

// stateOpts is opts with a state directory of the test's own.
func stateOpts(t *testing.T, opts Options) Options {
	t.Helper()
	opts.StateDir = t.TempDir()
	return opts
}

// serverOwner is the uid and gid owning the test server's data directory.
func serverOwner(t *testing.T) (int, int) {
	t.Helper()
	st, err := os.Stat(srv.Cluster(t).DataDir())
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	return int(sys.Uid), int(sys.Gid)
}

// dbaTablespace plays a DBA: a directory owned by the server's user and a
// tablespace in it, dropped (with the directory) at the end of the test.
// It returns the tablespace's oid.
func dbaTablespace(t *testing.T, conn *pgx.Conn, name, dir string) uint32 {
	t.Helper()
	ctx := context.Background()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	uid, gid := serverOwner(t)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLESPACE "+ident(name)+" LOCATION "+quoteLiteral(dir)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := Connect(context.Background(), srv.DSN(t, "postgres"))
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP TABLESPACE IF EXISTS "+ident(name))
			c.Close(context.Background())
		}
		_ = os.RemoveAll(dir)
	})
	oid, _, found, err := tablespaceByName(ctx, conn, name)
	if err != nil || !found {
		t.Fatalf("tablespace %s: %v", name, err)
	}
	return oid
}

// tablespaceOID is the oid of tablespace name, 0 when there is none.
func tablespaceOID(t *testing.T, conn *pgx.Conn, name string) uint32 {
	t.Helper()
	oid, _, _, err := tablespaceByName(context.Background(), conn, name)
	if err != nil {
		t.Fatal(err)
	}
	return oid
}

// autoConf is temp_tablespaces as postgresql.auto.conf holds it, and
// whether it holds it.
func autoConf(t *testing.T, conn *pgx.Conn) (bool, string) {
	t.Helper()
	set, v, err := scopeSetting(context.Background(), conn, ScopeSystem, 0)
	if err != nil {
		t.Fatal(err)
	}
	return set, v
}

// systemSetting sets temp_tablespaces with ALTER SYSTEM (RESET for "")
// and reloads; the test's end resets it.
func systemSetting(t *testing.T, conn *pgx.Conn, value string) {
	t.Helper()
	ctx := context.Background()
	q := "ALTER SYSTEM RESET temp_tablespaces"
	if value != "" {
		q = "ALTER SYSTEM SET temp_tablespaces = " + value
	}
	for _, q := range []string{q, "SELECT pg_reload_conf()"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		c, err := Connect(context.Background(), srv.DSN(t, "postgres"))
		if err == nil {
			_, _ = c.Exec(context.Background(), "ALTER SYSTEM RESET temp_tablespaces")
			_, _ = c.Exec(context.Background(), "SELECT pg_reload_conf()")
			c.Close(context.Background())
		}
	})
}

// Attack 1: a DBA's own empty tablespace with the default name. Without a
// state file undo refuses in one line naming it, and leaves it (same oid,
// directory there); apply refuses too; --force drops it.
func TestUndoRefusesDBATablespaceOfDefaultName(t *testing.T) {
	needRoot(t)
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	conn := dial(t, dsn)
	opts := stateOpts(t, Options{})
	tg, err := Inspect(ctx, conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := tg.Location // where erplab's would go: the most confusing place
	oid := dbaTablespace(t, conn, DefaultTablespace, dir)

	err = Undo(ctx, dsn, opts, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "refusing to undo") || !strings.Contains(err.Error(), DefaultTablespace) ||
		!strings.Contains(err.Error(), "no state file") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("undo of a DBA's tablespace: %v", err)
	}
	t.Log(err)
	if got := tablespaceOID(t, conn, DefaultTablespace); got != oid {
		t.Fatalf("tablespace oid %d after the refused undo, want %d", got, oid)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the DBA's directory: %v", err)
	}
	if _, err := Apply(ctx, dsn, stateOpts(t, Options{Size: "16M"}), io.Discard); err == nil || !strings.Contains(err.Error(), "no record") {
		t.Fatalf("apply over a DBA's tablespace: %v", err)
	}

	// The override is explicit and does what it says.
	opts.Force = true
	var log strings.Builder
	if err := Undo(ctx, dsn, opts, &log); err != nil {
		t.Fatalf("undo --force: %v\n%s", err, log.String())
	}
	if got := tablespaceOID(t, conn, DefaultTablespace); got != 0 {
		t.Errorf("undo --force left tablespace oid %d", got)
	}
}

// Attack 2: a DBA's own tmpfs mounted in a DBA's own tablespace, named
// with --tablespace. Undo refuses, the mount and the tablespace stay.
func TestUndoRefusesDBATmpfs(t *testing.T) {
	needRoot(t)
	safetyNet(t)
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	conn := dial(t, dsn)
	dir := filepath.Join(srv.Cluster(t).Dir(), "usertemp")
	oid := dbaTablespace(t, conn, "usertemp", dir)
	var rel string
	for _, q := range []string{"CREATE TEMP TABLE dba_probe (x int) TABLESPACE usertemp"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.QueryRow(ctx, "SELECT pg_relation_filepath('dba_probe')").Scan(&rel); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "DROP TABLE dba_probe"); err != nil {
		t.Fatal(err)
	}
	dbDir := resolve(filepath.Dir(filepath.Join(srv.Cluster(t).DataDir(), rel)))
	uid, gid := serverOwner(t)
	if err := unix.Mount("tmpfs", dbDir, "tmpfs", 0, mountOptions("8M", uid, gid)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dbDir, 0) })

	err := Undo(ctx, dsn, stateOpts(t, Options{Tablespace: "usertemp"}), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "refusing to undo") || !strings.Contains(err.Error(), "tmpfs mount at "+dbDir) ||
		!strings.Contains(err.Error(), "tablespace usertemp") {
		t.Fatalf("undo of a DBA's tmpfs: %v", err)
	}
	t.Log(err)
	if m := mountPointsUnder(t, dbDir); len(m) != 1 {
		t.Errorf("the DBA's tmpfs: mounts %q at %s after the refused undo", m, dbDir)
	}
	if got := tablespaceOID(t, conn, "usertemp"); got != oid {
		t.Errorf("tablespace usertemp oid %d after the refused undo, want %d", got, oid)
	}
}

// With a state file, undo refuses a tablespace of the recorded name with
// another oid, and a mount at the recorded point that is not the one
// erplab mounted; then, the real ones back, it undoes.
func TestUndoRefusesReplacedTablespaceAndMount(t *testing.T) {
	needRoot(t)
	safetyNet(t)
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	conn := dial(t, dsn)
	opts := stateOpts(t, Options{Size: "16M", Scope: ScopeDatabase, Tablespace: "erplab_replaced"})
	if _, err := Apply(ctx, dsn, opts, io.Discard); err != nil {
		t.Fatal(err)
	}
	tg, err := Inspect(ctx, conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	path, err := StatePath(opts, tg.SystemIdentifier, tg.DataDir, opts.Tablespace)
	if err != nil {
		t.Fatal(err)
	}
	st, err := LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tg.Location) })

	// A second tmpfs over erplab's: not the recorded mount.
	uid, gid := serverOwner(t)
	if err := unix.Mount("tmpfs", st.Mount.Point, "tmpfs", 0, mountOptions("4M", uid, gid)); err != nil {
		t.Fatal(err)
	}
	err = Undo(ctx, dsn, opts, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "refusing to undo: the mount at "+st.Mount.Point) || !strings.Contains(err.Error(), "not the tmpfs erplab mounted") {
		t.Fatalf("undo under a foreign mount: %v", err)
	}
	t.Log(err)
	if m := mountPointsUnder(t, st.Mount.Point); len(m) != 2 {
		t.Fatalf("mounts %q after the refused undo, want erplab's and the other", m)
	}
	if err := unix.Unmount(st.Mount.Point, 0); err != nil {
		t.Fatal(err)
	}

	// The tablespace dropped and made again by someone else: another oid.
	if err := unix.Unmount(st.Mount.Point, 0); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"ALTER DATABASE " + ident(tg.Database) + " RESET temp_tablespaces", "DROP TABLESPACE erplab_replaced"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	other := dbaTablespace(t, conn, "erplab_replaced", filepath.Join(srv.Cluster(t).Dir(), "replaced_by_dba"))
	err = Undo(ctx, dsn, opts, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "refusing to undo: tablespace erplab_replaced is oid") || !strings.Contains(err.Error(), "not oid") {
		t.Fatalf("undo of a replaced tablespace: %v", err)
	}
	t.Log(err)
	if got := tablespaceOID(t, conn, "erplab_replaced"); got != other || other == st.Tablespace.OID {
		t.Errorf("tablespace oid %d after the refused undo, want the DBA's %d (erplab's was %d)", got, other, st.Tablespace.OID)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("state file after a refused undo: %v", err)
	}
}

// Attack 3: temp_tablespaces set before apply, at each scope: undo puts
// back exactly the previous value ('pg_default' plus a quoted mixed-case
// name in postgresql.auto.conf; a DBA's tablespace for the database).
func TestUndoRestoresPreviousSetting(t *testing.T) {
	needRoot(t)
	safetyNet(t)
	ctx := context.Background()

	t.Run("system", func(t *testing.T) {
		dsn := srv.NewDatabase(t)
		conn := dial(t, dsn)
		systemSetting(t, conn, `'pg_default', 'Temp TS'`)
		_, before := autoConf(t, conn)
		if before != `pg_default, "Temp TS"` {
			t.Fatalf("auto.conf before: %q", before)
		}
		opts := stateOpts(t, Options{Size: "16M"})
		if _, err := Apply(ctx, dsn, opts, io.Discard); err != nil {
			t.Fatal(err)
		}
		if _, during := autoConf(t, conn); during != `"`+DefaultTablespace+`"` && during != DefaultTablespace {
			t.Fatalf("auto.conf after apply: %q", during)
		}
		var log strings.Builder
		if err := Undo(ctx, dsn, opts, &log); err != nil {
			t.Fatalf("%v\n%s", err, log.String())
		}
		t.Log(log.String())
		set, after := autoConf(t, conn)
		if !set || after != before {
			t.Errorf("auto.conf after undo: %q (set %v), want %q", after, set, before)
		}
		var show string
		if err := dial(t, dsn).QueryRow(ctx, "SHOW temp_tablespaces").Scan(&show); err != nil || show != before {
			t.Errorf("a new session's temp_tablespaces %q (%v), want %q", show, err, before)
		}
	})

	t.Run("database", func(t *testing.T) {
		dsn := srv.NewDatabase(t)
		conn := dial(t, dsn)
		dbaTablespace(t, conn, "dba_temp", filepath.Join(srv.Cluster(t).Dir(), "dba_temp"))
		var db string
		var dboid uint32
		if err := conn.QueryRow(ctx, "SELECT current_database(), oid FROM pg_database WHERE datname = current_database()").Scan(&db, &dboid); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(db)+" SET temp_tablespaces = dba_temp"); err != nil {
			t.Fatal(err)
		}
		opts := stateOpts(t, Options{Size: "16M", Scope: ScopeDatabase})
		if _, err := Apply(ctx, dsn, opts, io.Discard); err != nil {
			t.Fatal(err)
		}
		if _, v, _ := scopeSetting(ctx, conn, ScopeDatabase, dboid); !strings.Contains(v, DefaultTablespace) {
			t.Fatalf("database setting after apply: %q", v)
		}
		if err := Undo(ctx, dsn, opts, io.Discard); err != nil {
			t.Fatal(err)
		}
		set, v, err := scopeSetting(ctx, conn, ScopeDatabase, dboid)
		if err != nil || !set || v != "dba_temp" {
			t.Errorf("database setting after undo: %q (set %v, %v), want dba_temp", v, set, err)
		}
		if set, v := autoConf(t, conn); set {
			t.Errorf("auto.conf holds temp_tablespaces %q after a database-scope apply and undo", v)
		}
	})

	// Changed by someone after apply: undo leaves the new value alone.
	t.Run("changed since", func(t *testing.T) {
		dsn := srv.NewDatabase(t)
		conn := dial(t, dsn)
		opts := stateOpts(t, Options{Size: "16M"})
		if _, err := Apply(ctx, dsn, opts, io.Discard); err != nil {
			t.Fatal(err)
		}
		systemSetting(t, conn, `'pg_default'`)
		var log strings.Builder
		if err := Undo(ctx, dsn, opts, &log); err != nil {
			t.Fatalf("%v\n%s", err, log.String())
		}
		if set, v := autoConf(t, conn); !set || v != "pg_default" {
			t.Errorf("auto.conf after undo: %q (set %v), want the later pg_default", v, set)
		}
		if !strings.Contains(log.String(), "not what erplab set") {
			t.Errorf("undo log does not say it left the setting:\n%s", log.String())
		}
	})
}

// A normal apply records every step (file 0600 in a 0700 directory, the
// tablespace's real oid, the mount's id in mountinfo, the previous
// setting unset); applying again changes nothing; undo leaves no mount,
// no directory, no tablespace, no setting and no state file.
func TestApplyRecordsAndUndoLeavesNothing(t *testing.T) {
	needRoot(t)
	safetyNet(t)
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	conn := dial(t, dsn)
	opts := stateOpts(t, Options{Size: "32M", GrantTo: []string{"PUBLIC"}}) // PUBLIC only when asked
	if set, v := autoConf(t, conn); set {
		t.Fatalf("auto.conf holds temp_tablespaces %q before the test", v)
	}
	if _, err := Apply(ctx, dsn, opts, io.Discard); err != nil {
		t.Fatal(err)
	}
	tg, err := Inspect(ctx, conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	path, err := StatePath(opts, tg.SystemIdentifier, tg.DataDir, DefaultTablespace)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700 | os.ModeDir, opts.StateDir: 0o700 | os.ModeDir} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode(), err, want)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st State
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	ms, err := readMounts("/proc")
	if err != nil {
		t.Fatal(err)
	}
	mi := topMountAt(ms, resolve(tg.DBDir))
	switch {
	case !st.Complete || st.SystemIdentifier != tg.SystemIdentifier || st.DataDir != tg.DataDir:
		t.Errorf("state %s", raw)
	case st.Directory == nil || st.Directory.Existed || st.Directory.Path != tg.Location || !st.Directory.Done:
		t.Errorf("directory record %+v", st.Directory)
	case st.Tablespace == nil || st.Tablespace.OID != tg.TablespaceOID || st.Tablespace.OID == 0:
		t.Errorf("tablespace record %+v, server oid %d", st.Tablespace, tg.TablespaceOID)
	case st.Grant == nil || !st.Grant.Done || st.Grant.To != "PUBLIC":
		t.Errorf("grant record %+v", st.Grant)
	case mi == nil || st.Mount == nil || st.Mount.MountID != mi.MountID || st.Mount.Device != mi.MajorMinorVer || !st.Mount.Mounted || st.Mount.Size != "32M":
		t.Errorf("mount record %+v, mountinfo %+v", st.Mount, mi)
	case st.Setting == nil || st.Setting.WasSet || st.Setting.Scope != ScopeSystem || st.Setting.Value != DefaultTablespace:
		t.Errorf("setting record %+v", st.Setting)
	}

	// Again: nothing changes.
	var log strings.Builder
	if _, err := Apply(ctx, dsn, opts, &log); err != nil || !strings.Contains(log.String(), "already applied") {
		t.Fatalf("re-apply: %v\n%s", err, log.String())
	}
	if ms2 := mountPointsUnder(t, resolve(tg.Location)); len(ms2) != 1 {
		t.Errorf("mounts after re-apply: %q", ms2)
	}
	if got := tablespaceOID(t, conn, DefaultTablespace); got != st.Tablespace.OID {
		t.Errorf("tablespace oid %d after re-apply, want %d", got, st.Tablespace.OID)
	}
	if _, err := Apply(ctx, dsn, Options{Size: "64M", StateDir: opts.StateDir}, io.Discard); err == nil || !strings.Contains(err.Error(), "already applied with size 32M") {
		t.Errorf("re-apply with another size: %v", err)
	}

	log.Reset()
	if err := Undo(ctx, dsn, opts, &log); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Log(log.String())
	assertNothingLeft(t, conn, tg, path)
	// Undo again: nothing recorded, nothing there.
	log.Reset()
	if err := Undo(ctx, dsn, opts, &log); err != nil || !strings.Contains(log.String(), "nothing to undo") {
		t.Errorf("second undo: %v\n%s", err, log.String())
	}
}

// assertNothingLeft checks that no mount, directory, tablespace, system
// setting or state file of the fix is left.
func assertNothingLeft(t *testing.T, conn *pgx.Conn, tg *Target, path string) {
	t.Helper()
	if m := mountPointsUnder(t, resolve(tg.Location)); len(m) > 0 {
		t.Errorf("mounts left: %q", m)
	}
	if _, err := os.Lstat(tg.Location); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists (%v)", tg.Location, err)
	}
	if oid := tablespaceOID(t, conn, tg.Tablespace); oid != 0 {
		t.Errorf("tablespace %s (oid %d) left", tg.Tablespace, oid)
	}
	if set, v := autoConf(t, conn); set {
		t.Errorf("auto.conf still sets temp_tablespaces = %q", v)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file %s left (%v)", path, err)
	}
}

// A crash between steps: Apply stops right after recording a step's
// intent (state file written, step not done), or the step is then done
// by hand as if the crash came after it but before its record; a new
// apply refuses, and undo leaves nothing.
func TestUndoAfterCrashBetweenSteps(t *testing.T) {
	needRoot(t)
	safetyNet(t)
	ctx := context.Background()
	for _, tc := range []struct {
		step string
		// done, when set, performs the step as Apply would have.
		done func(t *testing.T, conn *pgx.Conn, st *State)
	}{
		{step: "directory"},
		{step: "tablespace"},
		{step: "tablespace", done: func(t *testing.T, conn *pgx.Conn, st *State) {
			if _, err := conn.Exec(ctx, "CREATE TABLESPACE "+ident(st.Tablespace.Name)+" LOCATION "+quoteLiteral(st.Tablespace.Location)); err != nil {
				t.Fatal(err)
			}
		}},
		{step: "grant"},
		{step: "mount"},
		{step: "mount", done: func(t *testing.T, _ *pgx.Conn, st *State) {
			uid, gid := serverOwner(t)
			if err := unix.Mount("tmpfs", st.Mount.Point, "tmpfs", 0, mountOptions(st.Size, uid, gid)); err != nil {
				t.Fatal(err)
			}
		}},
		{step: "setting"},
		{step: "setting", done: func(t *testing.T, conn *pgx.Conn, st *State) {
			if _, err := conn.Exec(ctx, settingSQL(ScopeSystem, "", []string{st.Setting.Value})); err != nil {
				t.Fatal(err)
			}
		}},
		{step: "verify"},
	} {
		name := tc.step
		if tc.done != nil {
			name += " done"
		}
		t.Run(name, func(t *testing.T) {
			c := crashedApply(t, tc.step)
			dsn, conn, opts, tg, path, st := c.dsn, c.conn, c.opts, c.tg, c.path, c.st
			if st.Complete {
				t.Fatalf("state complete after a crash before %s", tc.step)
			}
			if tc.done != nil {
				tc.done(t, conn, st)
			}
			if _, err := Apply(ctx, dsn, opts, io.Discard); err == nil || !strings.Contains(err.Error(), "did not finish") {
				t.Errorf("apply over an unfinished one: %v", err)
			}
			var log strings.Builder
			if err := Undo(ctx, dsn, opts, &log); err != nil {
				t.Fatalf("undo after a crash before %s: %v\n%s", tc.step, err, log.String())
			}
			t.Log(log.String())
			assertNothingLeft(t, conn, tg, path)
		})
	}
}

// crashed is what crashedApply leaves.
type crashed struct {
	dsn  string
	conn *pgx.Conn
	opts Options
	tg   *Target
	path string
	st   *State // the state file's content
}

// crashedApply applies the fix (16M, --grant-to PUBLIC, a state
// directory of the test's own) to a new database, stopped right after
// recording the intent of step as a crash there would leave it.
func crashedApply(t *testing.T, step string) *crashed {
	t.Helper()
	ctx := context.Background()
	c := &crashed{dsn: srv.NewDatabase(t)}
	c.conn = dial(t, c.dsn)
	c.opts = stateOpts(t, Options{Size: "16M", GrantTo: []string{"PUBLIC"}})
	crash := c.opts
	crash.stopBefore = step
	if _, err := Apply(ctx, c.dsn, crash, io.Discard); !errors.Is(err, errStopped) {
		t.Fatalf("apply stopping before %s: %v", step, err)
	}
	var err error
	if c.tg, err = Inspect(ctx, c.conn, c.opts); err != nil {
		t.Fatal(err)
	}
	if c.path, err = StatePath(c.opts, c.tg.SystemIdentifier, c.tg.DataDir, DefaultTablespace); err != nil {
		t.Fatal(err)
	}
	if c.st, err = LoadState(c.path); err != nil {
		t.Fatalf("state file after a crash before %s: %v", step, err)
	}
	return c
}

// A state file whose server is gone: UndoOrphan refuses while the
// postmaster lives, then, with the data directory gone, unmounts the
// recorded tmpfs, removes the tablespace directory and the state file;
// a mount that is not the recorded one is refused.
func TestUndoOrphan(t *testing.T) {
	needRoot(t)
	safetyNet(t)
	ctx := context.Background()
	opts := stateOpts(t, Options{})
	dir, err := stateFiles(opts)
	if err != nil {
		t.Fatal(err)
	}
	// What a killed ab leaves: the tablespace directory with the server's
	// version and database directories, the tmpfs on the latter.
	base := t.TempDir()
	loc := filepath.Join(base, "erplab_temp_tmpfs")
	point := filepath.Join(loc, "PG_15_202209061", "16384")
	if err := os.MkdirAll(point, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", point, "tmpfs", 0, "size=4M,mode=0700"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(point, 0) })
	if err := os.WriteFile(filepath.Join(point, "t3_16391"), []byte("temp"), 0o600); err != nil {
		t.Fatal(err)
	}
	ms, err := readMounts("/proc")
	if err != nil {
		t.Fatal(err)
	}
	mi := topMountAt(ms, resolve(point))
	if mi == nil {
		t.Fatal("test mount not in mountinfo")
	}
	st := &State{Version: StateVersion, SystemIdentifier: "7312345678901234567", DataDir: srv.Cluster(t).DataDir(), Database: "erplab", DBOID: 16384,
		Size: "4M", Scope: ScopeSystem,
		Directory:  &DirRecord{Path: loc, Done: true},
		Tablespace: &TablespaceRecord{Name: DefaultTablespace, Location: loc, OID: 16390, Done: true},
		Mount:      &MountRecord{Point: resolve(point), FSType: "tmpfs", Size: "4M", MountID: mi.MountID, Device: mi.MajorMinorVer, Mounted: true, Done: true},
		Setting:    &SettingRecord{Scope: ScopeSystem, Value: DefaultTablespace, Done: true}, Complete: true}
	path := filepath.Join(dir, "orphan.json")
	if err := st.save(path); err != nil {
		t.Fatal(err)
	}
	// The test server is alive: refused.
	if err := UndoOrphan(ctx, path, opts, io.Discard); err == nil || !strings.Contains(err.Error(), "is running") {
		t.Fatalf("orphan undo with a live server: %v", err)
	}
	// A server that is gone (its data directory removed).
	st.DataDir = filepath.Join(base, "gone", "data")
	// Not the recorded mount: refused.
	wrong := *st
	wm := *st.Mount
	wm.MountID++
	wrong.Mount = &wm
	if err := wrong.save(path); err != nil {
		t.Fatal(err)
	}
	if err := UndoOrphan(ctx, path, opts, io.Discard); err == nil || !strings.Contains(err.Error(), "refusing to undo: the mount at") {
		t.Fatalf("orphan undo of another mount: %v", err)
	}
	if len(mountPointsUnder(t, resolve(point))) != 1 {
		t.Fatal("the refused orphan undo unmounted")
	}
	if err := st.save(path); err != nil {
		t.Fatal(err)
	}
	ents, err := States(opts)
	if err != nil || len(ents) != 1 || ents[0].Path != path || !strings.Contains(ents[0].State.Summary(), "tmpfs 4M at "+resolve(point)) {
		t.Fatalf("states %+v (%v)", ents, err)
	}
	var log strings.Builder
	if err := UndoOrphan(ctx, path, opts, &log); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Log(log.String())
	if m := mountPointsUnder(t, resolve(loc)); len(m) > 0 {
		t.Errorf("mounts left: %q", m)
	}
	if _, err := os.Lstat(loc); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left (%v)", loc, err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file left (%v)", err)
	}
}

// What an `erplab ab` killed during its tmpfs run leaves, and how it is
// cleaned: a throwaway server with the fix applied (as the remedy does:
// system scope, default tablespace) and a temp table on the tmpfs loses
// its postmaster to SIGKILL; UndoOrphan unmounts the tmpfs and keeps the
// state while the data directory exists; the cluster directory can then
// be removed (it could not with the mount), and UndoOrphan again removes
// the state file.
func TestUndoAfterServerKilled(t *testing.T) {
	pgtest.SkipShort(t) // starts a server of its own
	needRoot(t)
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{StopWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := resolve(c.Dir())
	t.Cleanup(func() {
		for _, mp := range mountPointsUnder(t, dir) {
			_ = syscall.Unmount(mp, 0)
		}
		_ = c.Stop()
	})
	if err := c.CreateDatabase(ctx, "erplab"); err != nil {
		t.Fatal(err)
	}
	dsn := c.DSN("erplab")
	opts := stateOpts(t, Options{Size: "8M"})
	if _, err := Apply(ctx, dsn, opts, io.Discard); err != nil {
		t.Fatal(err)
	}
	app := dial(t, dsn)
	if _, err := app.Exec(ctx, "CREATE TEMP TABLE doc_buf AS SELECT g FROM generate_series(1, 1000) g"); err != nil {
		t.Fatal(err)
	}
	ents, err := States(opts)
	if err != nil || len(ents) != 1 || ents[0].Err != nil || ents[0].State.DataDir != c.DataDir() {
		t.Fatalf("states after apply: %+v (%v)", ents, err)
	}
	path := ents[0].Path
	point := ents[0].State.Mount.Point

	pid := c.PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, alive := postmasterAlive(c.DataDir()); !alive {
			break
		}
		if i == 400 {
			t.Fatalf("postmaster %d alive 20 s after SIGKILL", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Backends notice the postmaster's death and exit; until then the
	// tmpfs is busy.
	var log strings.Builder
	for i := 0; ; i++ {
		log.Reset()
		err = UndoOrphan(ctx, path, opts, &log)
		if err == nil || !errors.Is(err, syscall.EBUSY) || i == 400 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("orphan undo after the kill: %v\n%s", err, log.String())
	}
	t.Log(log.String())
	if m := mountPointsUnder(t, dir); len(m) > 0 {
		t.Fatalf("mounts left after the orphan undo: %q", m)
	}
	st, err := LoadState(path)
	if err != nil || st.Mount != nil || st.Tablespace == nil || !strings.Contains(log.String(), "still has the tablespace") {
		t.Fatalf("state after the orphan undo with the data directory there: %+v (%v)\n%s", st, err, log.String())
	}
	if _, err := os.Stat(point); err != nil {
		t.Errorf("the per-database directory went with the unmount: %v", err)
	}
	// The cluster directory goes (the next run's reaper, here Stop).
	// A killed postmaster's Stop says what it cleaned up after it (its
	// shared memory) as an error; only another error fails the test.
	if err := c.Stop(); err != nil && !strings.Contains(err.Error(), "exited without removing its shared memory") {
		t.Fatalf("remove the killed cluster: %v", err)
	}
	log.Reset()
	if err := UndoOrphan(ctx, path, opts, &log); err != nil {
		t.Fatalf("orphan undo with the data directory gone: %v\n%s", err, log.String())
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file left (%v)", err)
	}
}

// An `erplab ab` killed (kill -9) during its tmpfs variant: the remedy
// recorded its mount in erplab's crash-safe record and kept its state
// file in the throwaway cluster's directory, so the next erplab command's
// sweep (leftover.Sweep, as every command's start runs it) unmounts the
// tmpfs first (newest entry) and then removes the cluster's directory
// with the state file: no mount, no directory, no state file left.
func TestRemedyKilledCleanedBySweep(t *testing.T) {
	pgtest.SkipShort(t) // starts a server of its own
	needRoot(t)
	t.Setenv(leftover.EnvStateDir, filepath.Join(t.TempDir(), "state"))
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{StopWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := resolve(c.Dir())
	t.Cleanup(func() {
		for _, mp := range mountPointsUnder(t, dir) {
			_ = syscall.Unmount(mp, unix.MNT_DETACH)
		}
		_ = c.Stop()
	})
	if err := c.CreateDatabase(ctx, "erplab"); err != nil {
		t.Fatal(err)
	}
	eff, err := applyRemedy(ctx, &remedy.Target{Cluster: c, Database: "erplab", Params: map[string]string{SizeParam: "8M"}, Log: io.Discard}, "")
	if err != nil {
		t.Fatal(err)
	}
	stateFile, _ := eff.Changed["state_file"].(string)
	if !strings.HasPrefix(stateFile, c.Dir()+"/") {
		t.Fatalf("state file %q not in the cluster directory %s", stateFile, c.Dir())
	}
	st, err := LoadState(stateFile)
	if err != nil || st.Mount == nil || st.Mount.LeftoverID == "" {
		t.Fatalf("state %+v (%v): want a mount with its leftover entry", st, err)
	}
	app := dial(t, c.DSN("erplab"))
	if _, err := app.Exec(ctx, "CREATE TEMP TABLE doc_buf AS SELECT g FROM generate_series(1, 1000) g"); err != nil {
		t.Fatal(err)
	}
	if len(mountPointsUnder(t, dir)) != 1 {
		t.Fatalf("mounts under %s: %v", dir, mountPointsUnder(t, dir))
	}
	// The kill: the postmaster dies, and so does the owner of every
	// entry (faked: the entries are made to name a dead process).
	if err := syscall.Kill(c.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	rec, err := leftover.Open()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := rec.Entries()
	if err != nil || len(entries) != 2 {
		t.Fatalf("entries %+v (%v): want the cluster's and the mount's", entries, err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		e.Owner = leftover.Process{PID: dead.Process.Pid, Start: 1}
		if err := rec.Update(&e, nil); err != nil {
			t.Fatal(err)
		}
	}
	var line strings.Builder
	if _, err := leftover.Sweep(ctx, &line); err != nil {
		t.Fatal(err)
	}
	t.Log(line.String())
	if m := mountPointsUnder(t, dir); len(m) > 0 {
		t.Errorf("mounts left after the sweep: %q", m)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster directory %s left (%v)", dir, err)
	}
	for _, want := range []string{"cleaned up after killed erplab commands: mount " + st.Mount.Point + " (unmounted tmpfs", "; pgcluster " + c.Dir()} {
		if !strings.Contains(line.String(), want) {
			t.Errorf("sweep line lacks %q:\n%s", want, line.String())
		}
	}
	if left, _ := rec.Entries(); len(left) != 0 {
		t.Errorf("entries left: %+v", left)
	}
}
