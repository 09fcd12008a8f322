package doctor

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/sampler"
)

// TestCatalogChurnOtherDatabase churns temp tables in database B while
// the doctor is connected to database A: catalog-churn reads B on
// connections of its own at the window bounds, names B and fires (at 50+
// new files/s, about 67 here on a quiet machine); with
// Catalogs naming none it reads only A and stays ok.
func TestCatalogChurnOtherDatabase(t *testing.T) {
	dsnA, dsnB := newDatabase(t), newDatabase(t)
	cfgB, err := pgx.ParseConfig(dsnB)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn := dial(t, dsnB)
	sampleWith := func(cats *sampler.OtherCatalogs) *Finding {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var churnErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, churnErr = churn(ctx, conn, 25, stop)
		}()
		rep := run(t, Options{DSN: dsnA, Only: []string{"catalog-churn"}, Sample: 1500 * time.Millisecond, Windows: 2,
			Interval: 250 * time.Millisecond, Host: sampler.HostOff, Catalogs: cats})
		close(stop)
		wg.Wait()
		if churnErr != nil {
			t.Fatal(churnErr)
		}
		return find(t, rep, "catalog-churn")
	}
	f := sampleWith(nil)
	ev := strings.Join(evTexts(f), "\n")
	// The rate the churn reaches depends on the machine's load: the
	// severity must follow it, and B must be the database judged.
	rate := f.Metrics["worst_database_new_files_per_s"]
	if rate <= 0 || (f.Severity == Warning) != (rate >= churnWarnPerS) || !strings.Contains(f.Summary, "in database "+cfgB.Database) {
		t.Errorf("catalog-churn %s: %s %v\n%s", f.Severity, f.Summary, f.Metrics, ev)
	}
	if !strings.Contains(ev, "other databases read: ") || !strings.Contains(ev, "postgres") || !strings.Contains(ev, "database "+cfgB.Database+": ") {
		t.Errorf("evidence does not say what was read:\n%s", ev)
	}
	t.Logf("%s\n%s", f.Summary, ev)

	f = sampleWith(&sampler.OtherCatalogs{})
	if f.Severity != OK || f.Metrics["other_databases"] != 0 || strings.Contains(f.Summary, cfgB.Database) {
		t.Errorf("without other databases: %s: %s %v", f.Severity, f.Summary, f.Metrics)
	}
}
