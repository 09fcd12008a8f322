package disk

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/pgtest"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

// TestMacroBuildsAndRemovesTablespace runs the macro part on /dev/shm at
// scale 0.01 with 2 repeats: the data lands in the tablespace, every
// operation is timed in every repeat, and the database, the tablespace
// and its directory are gone afterwards.
func TestMacroBuildsAndRemovesTablespace(t *testing.T) {
	path := "/dev/shm"
	if _, err := os.Stat(path); err != nil {
		t.Skip("no /dev/shm")
	}
	before, _ := filepath.Glob(filepath.Join(path, "erplab-ts-*"))
	s := Server{DSN: func(db string) string { return srv.DSN(t, db) }, AdminDB: "postgres", OSUser: srv.Cluster(t).OSUser()}
	all, err := MacroAll(context.Background(), []Target{{Server: s, Path: path}}, MacroOptions{Scale: 0.01, Seed: 1, Runs: 1, Repeats: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 {
		t.Fatalf("%d results, want 1", len(all))
	}
	res := all[0]
	t.Logf("%+v", res)
	if res.TablespaceBytes < 1<<20 {
		t.Errorf("tablespace holds %d bytes after the load, want the ERP data (> 1 MiB)", res.TablespaceBytes)
	}
	for _, op := range MacroOps() {
		o, ok := res.Op(op)
		if !ok || o.Runs < 1 || o.Ms.Median <= 0 || len(o.Ms.Values) != 2 || o.Ms.Min > o.Ms.Median || o.Ms.Median > o.Ms.Max {
			t.Errorf("%s: %+v, %v", op, o, ok)
		}
	}
	pool := srv.Pool(t, srv.DSN(t, "postgres"))
	var n int
	if err := pool.QueryRow(context.Background(),
		"SELECT (SELECT count(*) FROM pg_tablespace WHERE spcname = $1) + (SELECT count(*) FROM pg_database WHERE datname = $1)",
		res.Tablespace).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d tablespace/database objects named %s left", n, res.Tablespace)
	}
	after, _ := filepath.Glob(filepath.Join(path, "erplab-ts-*"))
	if len(after) != len(before) {
		t.Errorf("tablespace directories: %d before, %d after", len(before), len(after))
	}
	if r, err := RankMacro([]MacroResult{res}, MacroTurnover, DefaultRule()); err != nil || len(r.Places) != 1 || r.Places[0].Rank != 1 || r.Places[0].Tied {
		t.Errorf("rank: %+v %v", r, err)
	}
}

// reachableDir is a fresh directory under /var/tmp that the server's OS
// user can enter (t.TempDir's parents are mode 0700).
func reachableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "erplab-disk-test-")
	if err != nil {
		t.Skip(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestWALOnPath moves a throwaway cluster's WAL onto a directory, runs
// the macro part there and checks that WAL went to that directory: the
// current WAL file is there, pg_wal is a link to it, and the WAL
// directory grew during the load (a fresh cluster has one 16 MiB
// segment; the scale-0.01 load writes more WAL than that).
func TestWALOnPath(t *testing.T) {
	pgtest.SkipShort(t) // starts a server of its own
	ctx := context.Background()
	path := reachableDir(t)
	c, err := pgcluster.Start(ctx, pgcluster.Options{SharedBuffers: "128MB", MaxConnections: 20, StopWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	dir, err := PutWALOn(ctx, c, path)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(dir) != path {
		t.Fatalf("WAL directory %s not under %s", dir, path)
	}
	link, err := os.Readlink(filepath.Join(c.DataDir(), "pg_wal"))
	if err != nil || link != dir {
		t.Fatalf("pg_wal -> %q (%v), want %s", link, err, dir)
	}
	before := dirBytes(t, dir)
	s := Server{DSN: c.DSN, AdminDB: "postgres", OSUser: c.OSUser()}
	res, err := MacroAll(ctx, []Target{{Server: s, Path: path, WALDir: dir}}, MacroOptions{Scale: 0.01, Seed: 1, Runs: 1, Repeats: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].WALDir != dir {
		t.Errorf("result WAL dir %q, want %s", res[0].WALDir, dir)
	}
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var name string
	if err := conn.QueryRow(ctx, "SELECT pg_walfile_name(pg_current_wal_lsn())").Scan(&name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
		t.Errorf("current WAL file %s not in %s: %v", name, dir, err)
	}
	after := dirBytes(t, dir)
	t.Logf("WAL dir %s: %d -> %d bytes, current %s", dir, before, after, name)
	if after <= before {
		t.Errorf("WAL directory did not grow during the load: %d -> %d bytes", before, after)
	}
	conn.Close(ctx)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := RemoveWALDir(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("RemoveWALDir left %s (%v)", dir, err)
	}
}

// dirBytes sums the sizes of the regular files directly in dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range es {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n
}
