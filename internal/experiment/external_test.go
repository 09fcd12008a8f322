package experiment

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// The DSNs of a server erplab did not start keep the user's credentials
// and change the database (and, for a proxy, host and port), in both
// libpq forms; the maintenance connection leaves the database ab copies.
func TestExternalDSN(t *testing.T) {
	for _, conn := range []string{"host=db1 port=5433 user=u password=pw dbname=shop", "postgres://u:pw@db1:5433/shop?sslmode=require"} {
		e := &External{Conn: conn, UserTemplate: "shop"}
		for _, c := range []struct {
			dsn, host string
			port      uint16
			db        string
		}{
			{e.DSN("erplab_ab_1_run_a_1"), "db1", 5433, "erplab_ab_1_run_a_1"},
			{e.DSNAt("127.0.0.1", 9, "erplab_ab_1_run_b_1"), "127.0.0.1", 9, "erplab_ab_1_run_b_1"},
			{e.Admin(), "db1", 5433, "postgres"},
			{(&External{Conn: conn}).Admin(), "db1", 5433, "shop"},
		} {
			cfg, err := pgconn.ParseConfig(c.dsn)
			if err != nil {
				t.Fatalf("%s: %v", c.dsn, err)
			}
			if cfg.Host != c.host || cfg.Port != c.port || cfg.Database != c.db || cfg.User != "u" || cfg.Password != "pw" {
				t.Errorf("%s: host %s port %d database %s user %s, want %s %d %s u", c.dsn, cfg.Host, cfg.Port, cfg.Database, cfg.User, c.host, c.port, c.db)
			}
		}
	}
}
