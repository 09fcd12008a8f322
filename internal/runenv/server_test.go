package runenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/pgtest"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

func connect(t *testing.T, cfg *pgx.ConnConfig) *pgx.Conn {
	t.Helper()
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestReadServer(t *testing.T) {
	ctx := t.Context()
	cfg, err := pgx.ParseConfig(srv.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, cfg)
	if _, err := conn.Exec(ctx, "SET work_mem = '7MB'"); err != nil {
		t.Fatal(err)
	}
	s, err := ReadServer(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server: %s (%d), %d settings", s.Version, s.VersionNum, len(s.Settings))
	if s.VersionNum < 120000 {
		t.Errorf("VersionNum = %d, want >= 120000", s.VersionNum)
	}
	if major := strconv.Itoa(s.VersionNum/10000) + "."; !strings.HasPrefix(s.Version, major) {
		t.Errorf("Version %q does not start with %q (VersionNum %d)", s.Version, major, s.VersionNum)
	}
	if s.InRecovery {
		t.Error("InRecovery = true on a primary")
	}
	var wantID, wantDB string
	if err := conn.QueryRow(ctx, "SELECT system_identifier::text, current_database() FROM pg_control_system()").Scan(&wantID, &wantDB); err != nil {
		t.Fatal(err)
	}
	if s.SystemIdentifier != wantID || s.Database != wantDB || wantID == "" {
		t.Errorf("identity = %q/%q, want %q/%q", s.SystemIdentifier, s.Database, wantID, wantDB)
	}
	if got := s.Settings["work_mem"]; got != "7MB" {
		t.Errorf(`Settings["work_mem"] = %q, want "7MB" (set on the session)`, got)
	}
	// A superuser on PostgreSQL >= 13 sees every setting of the list, each
	// formatted exactly as SHOW prints it.
	if len(s.Settings) != len(SettingNames()) {
		t.Errorf("%d settings, want %d: %v", len(s.Settings), len(SettingNames()), s.Settings)
	}
	for _, name := range SettingNames() {
		var shown string
		if err := conn.QueryRow(ctx, "SHOW "+pgx.Identifier{name}.Sanitize()).Scan(&shown); err != nil {
			t.Fatalf("SHOW %s: %v", name, err)
		}
		got, ok := s.Settings[name]
		if !ok || got != shown {
			t.Errorf("Settings[%q] = %q (present %v), SHOW gives %q", name, got, ok, shown)
		}
	}
}

func TestReadServerUnprivilegedRole(t *testing.T) {
	ctx := t.Context()
	dsn := srv.NewDatabase(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	admin := connect(t, cfg)
	role := fmt.Sprintf("runenv_plain_%d", os.Getpid())
	if _, err := admin.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize())
	})

	plainCfg := cfg.Copy()
	plainCfg.User = role
	plain, err := pgx.ConnectConfig(ctx, plainCfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ReadServer(ctx, plain)
	plain.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// shared_preload_libraries is readable only by superusers and
	// pg_read_all_settings (guc.c: GUC_SUPERUSER_ONLY): left out, no error.
	if v, ok := s.Settings["shared_preload_libraries"]; ok {
		t.Errorf("unprivileged role sees shared_preload_libraries = %q", v)
	}
	if s.Settings["work_mem"] == "" {
		t.Errorf("unprivileged role: work_mem missing: %v", s.Settings)
	}
	// pg_control_system is executable by PUBLIC (no REVOKE in
	// system_functions.sql): the identity is there for a plain role too.
	if s.SystemIdentifier == "" || s.Database == "" {
		t.Errorf("unprivileged role: identity %q/%q, want both", s.SystemIdentifier, s.Database)
	}
}

func TestReadServerCanceled(t *testing.T) {
	cfg, err := pgx.ParseConfig(srv.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, cfg)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = ReadServer(ctx, conn)
	if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "read server") {
		t.Fatalf("canceled ctx: err = %v", err)
	}
}

// Temp-table churn grows the catalogs CatalogSizes measures.
func TestCatalogSizesGrowWithTempTables(t *testing.T) {
	ctx := context.Background()
	pool := srv.Pool(t, srv.NewDatabase(t))
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	before, err := CatalogSizes(ctx, conn.Conn())
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != len(CatalogTables()) || before["pg_class"] <= 0 {
		t.Fatalf("sizes %v", before)
	}
	for i := 0; i < 300; i++ {
		if _, err := conn.Exec(ctx, `CREATE TEMP TABLE churn (a int, b text, c numeric); CREATE INDEX ON churn (a); DROP TABLE churn`); err != nil {
			t.Fatal(err)
		}
	}
	after, err := CatalogSizes(ctx, conn.Conn())
	if err != nil {
		t.Fatal(err)
	}
	if after["pg_attribute"] <= before["pg_attribute"] || after["pg_class"] <= before["pg_class"] {
		t.Fatalf("catalogs did not grow: before %v after %v", before, after)
	}
}
