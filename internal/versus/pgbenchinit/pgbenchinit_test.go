package pgbenchinit_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/versus/pgbenchinit"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

func TestPgbenchScaleFor(t *testing.T) {
	for bytes, want := range map[int64]int{0: 1, 7e6: 1, 15e6: 1, 31e6: 2, 1_370_000_000: 91} {
		if got := pgbenchinit.PgbenchScaleFor(bytes); got != want {
			t.Errorf("PgbenchScaleFor(%d) = %d, want %d", bytes, got, want)
		}
	}
}

// pgbench -i -s 1 really loads 100,000 accounts and the database grows by
// about the documented 15 MB.
func TestRunPgbench(t *testing.T) {
	pgbench, err := pgbenchinit.FindPgbench(srv.BinDir(t))
	if err != nil {
		t.Skipf("no pgbench: %v", err)
	}
	dsn := srv.NewDatabase(t)
	r, err := pgbenchinit.RunPgbench(context.Background(), pgbench, dsn+" password=unused", 1)
	if err != nil {
		t.Fatal(err)
	}
	var accounts int64
	srv.Pool(t, dsn).QueryRow(context.Background(), `SELECT count(*) FROM pgbench_accounts`).Scan(&accounts)
	if accounts != 100_000 || r.Rows != 100_011 {
		t.Fatalf("accounts %d, reported rows %d", accounts, r.Rows)
	}
	if r.Bytes < 10e6 || r.Bytes > 30e6 {
		t.Fatalf("database grew %d bytes, want about 15 MB", r.Bytes)
	}
	if r.Duration <= 0 || r.SecondsPerGB() <= 0 {
		t.Fatalf("duration %s", r.Duration)
	}
}

func TestPrintRatio(t *testing.T) {
	ours := pgbenchinit.Result{Tool: "ours", Rows: 1000, Bytes: 1e9, Duration: 20 * time.Second}
	ref := pgbenchinit.Result{Tool: "pgbench", Rows: 1000, Bytes: 2e9, Duration: 20 * time.Second}
	if r := pgbenchinit.Ratio(ours, ref); r != 2 {
		t.Fatalf("ratio %g, want 2 (20 s/GB vs 10 s/GB)", r)
	}
	var b strings.Builder
	pgbenchinit.Print(&b, ours, ref)
	if !strings.Contains(b.String(), "2.00x") {
		t.Fatalf("output:\n%s", b.String())
	}
}

func TestWithDatabaseKeepsPassword(t *testing.T) {
	s, err := pgbenchinit.WithDatabase("host=/tmp port=5 user=u password='it\\'s' dbname=a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s, "dbname=b") || !strings.Contains(s, `password='it\'s'`) {
		t.Fatalf("%s", s)
	}
}
