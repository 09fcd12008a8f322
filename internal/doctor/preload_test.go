package doctor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/sampler"
)

// extensionChecks are the checks whose needs or evidence say what
// pg_stat_statements and pg_wait_sampling lack.
var extensionChecks = []string{"planning-time", "lwlock-waits"}

// runExtensionChecks runs extensionChecks on dsn with a short sample.
func runExtensionChecks(t *testing.T, dsn string) (pgss *Finding, waits string) {
	t.Helper()
	rep := run(t, Options{DSN: dsn, Only: extensionChecks, Sample: 300 * time.Millisecond, Windows: 2, Interval: 150 * time.Millisecond, Host: sampler.HostOff})
	return find(t, rep, "planning-time"), strings.Join(evTexts(find(t, rep, "lwlock-waits")), "\n")
}

// The package's server preloads pg_stat_statements and pg_wait_sampling:
// a database without the extensions needs only CREATE EXTENSION, and
// the doctor says so, without shared_preload_libraries or a restart.
func TestPreloadedExtensionNeedsOnlyCreate(t *testing.T) {
	srv.NeedWaitSampling(t)
	dsn := newDatabase(t)
	db := dial(t, dsn).Config().Database
	f, waits := runExtensionChecks(t, dsn)
	want := "pg_stat_statements: CREATE EXTENSION pg_stat_statements; in database " + db + " (its library is already loaded by shared_preload_libraries: no restart)"
	if f.Severity != NotChecked || f.Needs != want {
		t.Errorf("planning-time [%s] needs %q, want %q", f.Severity, f.Needs, want)
	}
	if want := "pg_wait_sampling is not created in this database: waits are pg_stat_activity's at each sample; its profile needs CREATE EXTENSION pg_wait_sampling; in database " + db + " (its library is already loaded by shared_preload_libraries: no restart)"; !strings.Contains(waits, want) || strings.Contains(waits, "shared_preload_libraries =") {
		t.Errorf("lwlock-waits evidence:\n%s\nwant %q", waits, want)
	}
}

// A server without the libraries: the doctor says shared_preload_libraries
// (restart), then CREATE EXTENSION; with the extension created but the
// library not loaded, only the library and the restart.
func TestNotPreloadedExtensionNeedsRestart(t *testing.T) {
	pgtest.SkipShort(t)
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{MaxConnections: 20, SharedBuffers: "32MB", StopWithParent: true,
		Settings: map[string]string{"shared_preload_libraries": ""}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	if err := c.CreateDatabase(ctx, "plain"); err != nil {
		t.Fatal(err)
	}
	dsn := c.DSN("plain")
	f, waits := runExtensionChecks(t, dsn)
	want := "pg_stat_statements: shared_preload_libraries = 'pg_stat_statements' (restart), then CREATE EXTENSION pg_stat_statements; in database plain"
	if f.Severity != NotChecked || f.Needs != want {
		t.Errorf("planning-time [%s] needs %q, want %q", f.Severity, f.Needs, want)
	}
	if want := "pg_wait_sampling is not created in this database: waits are pg_stat_activity's at each sample; its profile needs shared_preload_libraries = 'pg_wait_sampling' (restart), then CREATE EXTENSION pg_wait_sampling; in database plain"; !strings.Contains(waits, want) {
		t.Errorf("lwlock-waits evidence:\n%s\nwant %q", waits, want)
	}

	// Created but not loaded, each extension on its own: either may be
	// missing from this machine (pg_wait_sampling is a package of its own).
	conn := dial(t, dsn)
	t.Run("pg_stat_statements created", func(t *testing.T) {
		pgtest.NeedExtension(t, dsn, "pg_stat_statements")
		exec(t, conn, "CREATE EXTENSION pg_stat_statements")
		f, _ := runExtensionChecks(t, dsn)
		want := "pg_stat_statements: shared_preload_libraries = 'pg_stat_statements' and a restart (the extension is already created in database plain)"
		if f.Severity != NotChecked || f.Needs != want {
			t.Errorf("created, not loaded: planning-time [%s] needs %q, want %q", f.Severity, f.Needs, want)
		}
	})
	t.Run("pg_wait_sampling created", func(t *testing.T) {
		pgtest.NeedExtension(t, dsn, "pg_wait_sampling")
		exec(t, conn, "CREATE EXTENSION pg_wait_sampling")
		_, waits := runExtensionChecks(t, dsn)
		if want := "pg_wait_sampling is created in this database but its library is not loaded: waits are pg_stat_activity's at each sample; its profile needs shared_preload_libraries = 'pg_wait_sampling' and a restart (the extension is already created in database plain)"; !strings.Contains(waits, want) {
			t.Errorf("created, not loaded: lwlock-waits evidence:\n%s\nwant %q", waits, want)
		}
	})
}

// What an extension needs follows from the settings the role sees: the
// list given keeps the libraries already preloaded, and a library's own
// settings say it is loaded when shared_preload_libraries is hidden.
func TestExtensionNeedsFromSettings(t *testing.T) {
	mk := func(set map[string]string) *env {
		e := &env{srv: ServerInfo{Database: "erp"}, set: map[string]setting{}}
		for k, v := range set {
			e.set[k] = setting{Raw: v, Show: v}
		}
		return e
	}
	for _, c := range []struct {
		set     map[string]string
		created bool
		want    string
	}{
		{map[string]string{"shared_preload_libraries": "pg_wait_sampling"}, false,
			"shared_preload_libraries = 'pg_wait_sampling, pg_stat_statements' (restart), then CREATE EXTENSION pg_stat_statements; in database erp"},
		{map[string]string{"shared_preload_libraries": "pg_wait_sampling"}, true,
			"shared_preload_libraries = 'pg_wait_sampling, pg_stat_statements' and a restart (the extension is already created in database erp)"},
		{map[string]string{"shared_preload_libraries": `auto_explain, "pg_stat_statements"`}, false,
			"CREATE EXTENSION pg_stat_statements; in database erp (its library is already loaded by shared_preload_libraries: no restart)"},
		// shared_preload_libraries hidden from the role, the library's settings shown.
		{map[string]string{"pg_stat_statements.max": "5000"}, false,
			"CREATE EXTENSION pg_stat_statements; in database erp (its library is already loaded by shared_preload_libraries: no restart)"},
		{map[string]string{"pg_stat_statements.max": "5000"}, true, ""},
		{map[string]string{"shared_preload_libraries": "pg_stat_statements_extra"}, false,
			"shared_preload_libraries = 'pg_stat_statements_extra, pg_stat_statements' (restart), then CREATE EXTENSION pg_stat_statements; in database erp"},
	} {
		if got := mk(c.set).extensionNeeds("pg_stat_statements", c.created); got != c.want {
			t.Errorf("%v, created %v: %q, want %q", c.set, c.created, got, c.want)
		}
	}
}
