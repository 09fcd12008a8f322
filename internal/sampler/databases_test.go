package sampler

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestForEachDatabase lists the databases (a fresh one among them,
// template0 not) and reads each on a connection of its own; a database
// that cannot be reached gets its error and does not stop the others.
func TestForEachDatabase(t *testing.T) {
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	c := connect(t, dsn)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	dbs, err := Databases(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range dbs {
		names = append(names, d.Name)
		if d.OID == 0 || d.Tablespace == 0 {
			t.Errorf("database %+v: OIDs missing", d)
		}
	}
	if !slices.Contains(names, cfg.Database) || !slices.Contains(names, "postgres") || slices.Contains(names, "template0") || !slices.IsSorted(names) {
		t.Fatalf("databases %v", names)
	}
	seen := map[string]string{}
	var apps []string
	errs := ForEachDatabase(ctx, cfg, append(names, "no_such_db"), func(ctx context.Context, db string, conn *pgx.Conn) error {
		var cur, app string
		if err := conn.QueryRow(ctx, "SELECT current_database(), current_setting('application_name')").Scan(&cur, &app); err != nil {
			return err
		}
		seen[db] = cur
		apps = append(apps, app)
		return nil
	})
	for _, n := range names {
		if seen[n] != n {
			t.Errorf("database %s read as %q", n, seen[n])
		}
	}
	if len(errs) != 1 || errs["no_such_db"] == nil || !strings.Contains(errs["no_such_db"].Error(), "no_such_db") {
		t.Errorf("errors %v: want one for no_such_db", errs)
	}
	if apps[0] != ApplicationName {
		t.Errorf("application_name %q", apps[0])
	}
}
