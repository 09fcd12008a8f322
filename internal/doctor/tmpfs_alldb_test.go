package doctor

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	tmpfsfix "github.com/erplab/erplab/internal/remedy/tmpfs"
)

// TestTmpfsPermanentOtherDatabase: the tmpfs fix, applied for database
// A, mounts a tmpfs on A's directory of its tablespace; a permanent table
// of A in that tablespace is lost at reboot, the same in database B
// (B's directory is on the data disk) is not. The doctor, connected to a
// third database C whose temp_tablespaces is empty, reports A's table
// critical, naming A, and not B's.
func TestTmpfsPermanentOtherDatabase(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the tmpfs fix mounts a tmpfs")
	}
	ctx := context.Background()
	dsnA, dsnB, dsnC := newDatabase(t), newDatabase(t), newDatabase(t)
	name := func(dsn string) string {
		c, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		return c.Database
	}
	fix := tmpfsfix.Options{Size: "16M", Scope: tmpfsfix.ScopeDatabase, Tablespace: "doctor_tmpfs_other"}
	if _, err := tmpfsfix.Apply(ctx, dsnA, fix, io.Discard); err != nil {
		t.Fatal(err)
	}
	connA, connB := dial(t, dsnA), dial(t, dsnB)
	t.Cleanup(func() {
		// A dropped table's first file stays (empty) until the next checkpoint.
		connA.Exec(context.Background(), "DROP TABLE IF EXISTS lost_doc")
		connB.Exec(context.Background(), "DROP TABLE IF EXISTS safe_doc")
		connB.Exec(context.Background(), "CHECKPOINT")
		if err := tmpfsfix.Undo(context.Background(), dsnA, fix, io.Discard); err != nil {
			t.Errorf("undo: %v", err)
		}
	})
	exec(t, connA, "CREATE TABLE lost_doc (id int PRIMARY KEY, body text) TABLESPACE doctor_tmpfs_other")
	exec(t, connB, "CREATE TABLE safe_doc (id int PRIMARY KEY, body text) TABLESPACE doctor_tmpfs_other")

	rep := run(t, Options{DSN: dsnC, Only: []string{"temp-tablespace"}, Sample: 0})
	f := find(t, rep, "temp-tablespace")
	ev := strings.Join(evTexts(f), "\n")
	if f.Severity != Critical || f.Metrics["permanent_relations"] != 1 || f.Metrics["permanent_databases"] != 1 ||
		!strings.Contains(f.Summary, name(dsnA)+": 1 in doctor_tmpfs_other") || !strings.Contains(f.Summary, "public.lost_doc (table) in "+name(dsnA)) ||
		strings.Contains(f.Summary+ev, "safe_doc") {
		t.Errorf("temp-tablespace %s: %s %v\n%s", f.Severity, f.Summary, f.Metrics, ev)
	}
	if !strings.Contains(ev, "doctor_tmpfs_other for database "+name(dsnA)+" (") || !strings.Contains(ev, "databases read for relations stored there: "+name(dsnA)+"\n") {
		t.Errorf("evidence does not say what was read:\n%s", ev)
	}
	fx := strings.Join(f.Fix, "\n")
	if !strings.Contains(fx, "in database "+name(dsnA)+":\nALTER TABLE \"public\".\"lost_doc\" SET TABLESPACE pg_default;") {
		t.Errorf("fix:\n%s", fx)
	}
	t.Logf("%s\n%s", f.Summary, ev)
}
