package sampler

import (
	"context"
	"testing"
)

// A role without pg_monitor: the sampler connects (it read the
// superuser-only shared_preload_libraries with current_setting, which
// failed with 42501), names the role and says it lacks pg_read_all_stats,
// still finds pg_stat_statements' library loaded, and counts the other
// roles' sessions, whose state it may not see, as "other".
func TestUnprivilegedRole(t *testing.T) {
	dsn := srv.NewDatabase(t)
	role, roleDSN := srv.NewRole(t, dsn)
	admin := connect(t, dsn) // the superuser's session, hidden from the role
	var preloaded bool
	if err := admin.QueryRow(context.Background(), "SELECT position('pg_stat_statements' IN current_setting('shared_preload_libraries')) > 0").Scan(&preloaded); err != nil {
		t.Fatal(err)
	}

	s := newSampler(t, roleDSN, Options{})
	info := s.Info()
	if info.StatsPrivileged || info.Role != role || info.StatementsPreloaded != preloaded {
		t.Errorf("info: stats privileged %v, role %q, pg_stat_statements preloaded %v; want false, %q, %v", info.StatsPrivileged, info.Role, info.StatementsPreloaded, role, preloaded)
	}
	// Every client backend but the sampler's own is another role's here.
	var others int
	waitFor(t, "the other roles' sessions counted as other", func() bool {
		if err := admin.QueryRow(context.Background(), "SELECT count(*)::int4 FROM pg_stat_activity WHERE backend_type = 'client backend' AND usename <> $1", role).Scan(&others); err != nil {
			t.Fatal(err)
		}
		x := sample(t, s)
		return x.Sessions.Other == others && x.Sessions.Total() == others
	})
	if others < 1 {
		t.Fatalf("%d sessions of other roles, want the admin's at least", others)
	}
}
