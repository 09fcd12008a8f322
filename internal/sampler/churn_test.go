package sampler

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestRelFileChurn creates temp tables and TRUNCATEs them in transactions
// of their own (a TRUNCATE in the creating transaction reuses the file):
// every CREATE and every TRUNCATE makes a new file, which the churn counts
// (pg_class inserts + updates), each TRUNCATE visibly giving the table a
// new relfilenode.
func TestRelFileChurn(t *testing.T) {
	const tables, truncates = 10, 5
	dsn := srv.NewDatabase(t)
	s := newSampler(t, dsn, Options{Host: HostOff})
	base := sample(t, s)
	c := connect(t, dsn)
	ctx := context.Background()
	newFiles := 0
	for i := range tables {
		if _, err := c.Exec(ctx, fmt.Sprintf("CREATE TEMP TABLE ch%d (a int, b int)", i)); err != nil {
			t.Fatal(err)
		}
		newFiles++
		prev := filenode(t, c, i)
		for range truncates {
			if _, err := c.Exec(ctx, fmt.Sprintf("TRUNCATE ch%d", i)); err != nil {
				t.Fatal(err)
			}
			if f := filenode(t, c, i); f != prev {
				newFiles++
				prev = f
			}
		}
	}
	if newFiles != tables*(1+truncates) {
		t.Fatalf("%d new files, want %d: TRUNCATE did not change the relfilenode", newFiles, tables*(1+truncates))
	}
	c.Close(ctx) // flushes its statistics at once
	var files, msgs float64
	var last *Sample
	waitFor(t, "pg_class statistics", func() bool {
		last = sample(t, s)
		if last.Churn != nil {
			files += last.Churn.RelFilesPerS * last.Elapsed
			msgs += last.Churn.SInvalPerS * last.Elapsed
		}
		var ins, upd int64
		for i, r := range last.Catalog {
			if r.Name == "pg_class" {
				ins, upd = r.Ins-base.Catalog[i].Ins, r.Upd-base.Catalog[i].Upd
			}
		}
		return ins+upd >= int64(newFiles)
	})
	if math.Abs(files-float64(newFiles)) > 1 {
		t.Errorf("churn summed to %.1f files, want %d (%d creates + %d truncates)", files, newFiles, tables, tables*truncates)
	}
	// Each file change is a pg_class change: 2 catcache messages and one
	// relcache/smgr message at least; the CREATEs add pg_type and
	// pg_attribute rows.
	if msgs < 3*float64(newFiles) {
		t.Errorf("sinval estimate %.0f messages, want at least %d", msgs, 3*newFiles)
	}
	if want := math.Round(last.Churn.SInvalPerS) / SInvalQueueSize; math.Abs(last.Churn.SInvalQueuesPerS-want) > 0.001 {
		t.Errorf("queues per s %.3f, want %.3f", last.Churn.SInvalQueuesPerS, want)
	}
}

func filenode(t *testing.T, c *pgx.Conn, i int) int64 {
	t.Helper()
	var f int64
	if err := c.QueryRow(context.Background(), fmt.Sprintf("SELECT pg_relation_filenode('ch%d')::int8", i)).Scan(&f); err != nil {
		t.Fatal(err)
	}
	return f
}
