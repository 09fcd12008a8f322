package sampler

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestOtherCatalogs samples database A while temp tables churn in
// database B: B's catalog figures come from its own connection, read
// every Catalogs.Every only, with rates between its readings; A (the
// connected database) is not among the others, and All adds postgres.
func TestOtherCatalogs(t *testing.T) {
	dsnA, dsnB := srv.NewDatabase(t), srv.NewDatabase(t)
	cfgB, err := pgx.ParseConfig(dsnB)
	if err != nil {
		t.Fatal(err)
	}
	b := connect(t, dsnB)
	names := []string{cfgB.Database, "no_such_db"}
	hourly := newSampler(t, dsnA, Options{Host: HostOff, Catalogs: OtherCatalogs{Names: names, Every: time.Hour}})
	first := sample(t, hourly)
	if len(first.OtherCatalogs) != 2 || first.OtherCatalogs[1].Database != cfgB.Database || first.OtherCatalogs[1].CatalogBytes() <= 0 || first.OtherCatalogs[0].Error == "" {
		t.Fatalf("first reading %+v", first.OtherCatalogs)
	}
	if again := sample(t, hourly); again.OtherCatalogs != nil {
		t.Errorf("read again within Every: %+v", again.OtherCatalogs)
	}
	s := newSampler(t, dsnA, Options{Host: HostOff, Catalogs: OtherCatalogs{Names: names, Every: time.Nanosecond}})
	sample(t, s)
	for i := 0; i < 50; i++ {
		if _, err := b.Exec(context.Background(), "CREATE TEMP TABLE churn_t (id int PRIMARY KEY, v text); DROP TABLE churn_t"); err != nil {
			t.Fatal(err)
		}
	}
	b.Close(context.Background()) // flushes its statistics
	var x *Sample
	waitFor(t, "B's pg_class inserts", func() bool {
		time.Sleep(100 * time.Millisecond)
		x = sample(t, s)
		return x.OtherCatalogs != nil && x.OtherCatalogs[1].RelFilesPerS() > 0
	})
	if x.OtherCatalogs[1].Catalog[0].Name != "pg_attribute" || x.OtherCatalogs[1].CatalogBytes() <= 0 {
		t.Errorf("B's catalog %+v", x.OtherCatalogs[1])
	}
	for _, c := range x.Catalog {
		if c.Name == "pg_class" && c.InsPerS >= x.OtherCatalogs[1].RelFilesPerS() {
			t.Errorf("A's pg_class rate %v is not below B's %v: the churn was in B", c.InsPerS, x.OtherCatalogs[1].RelFilesPerS())
		}
	}

	all := newSampler(t, dsnA, Options{Host: HostOff, Catalogs: OtherCatalogs{All: true}})
	got := map[string]bool{}
	t0 := time.Now()
	x = sample(t, all)
	t.Logf("a sample reading %d other databases took %s", len(x.OtherCatalogs), time.Since(t0))
	for _, d := range x.OtherCatalogs {
		if d.Error != "" {
			t.Errorf("%s: %s", d.Database, d.Error)
		}
		got[d.Database] = true
	}
	cfgA, _ := pgx.ParseConfig(dsnA)
	if !got["postgres"] || !got[cfgB.Database] || got[cfgA.Database] || got["template0"] {
		t.Errorf("All read %v", got)
	}
}
