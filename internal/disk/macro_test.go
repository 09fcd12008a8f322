package disk

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/erplab/erplab/internal/pgtest"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

// TestMacroBuildsAndRemovesTablespace runs the macro part on /dev/shm at
// scale 0.01: the data lands in the tablespace, every operation is timed,
// and the database, the tablespace and its directory are gone afterwards.
func TestMacroBuildsAndRemovesTablespace(t *testing.T) {
	path := "/dev/shm"
	if _, err := os.Stat(path); err != nil {
		t.Skip("no /dev/shm")
	}
	before, _ := filepath.Glob(filepath.Join(path, "erplab-ts-*"))
	s := Server{DSN: func(db string) string { return srv.DSN(t, db) }, AdminDB: "postgres", OSUser: srv.Cluster(t).OSUser()}
	res, err := Macro(context.Background(), s, path, 0, MacroOptions{Scale: 0.01, Seed: 1, Runs: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	if res.TablespaceBytes < 1<<20 {
		t.Errorf("tablespace holds %d bytes after the load, want the ERP data (> 1 MiB)", res.TablespaceBytes)
	}
	for _, op := range MacroOps() {
		o, ok := res.Op(op)
		if !ok || o.Runs < 1 || o.MeanMs <= 0 {
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
	if r := RankMacro([]MacroResult{res}, MacroTurnover); len(r) != 1 {
		t.Errorf("rank: %v", r)
	}
}
