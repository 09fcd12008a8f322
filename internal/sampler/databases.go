package sampler

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/conninfo"
)

// Some figures are per database (catalogs, pg_class): a server's ERP
// database is one of many, and one connection sees only its own. The
// helpers here reach the others one at a time: connect, read, close, so
// no connection stays open between readings.

// databasesSQL lists the databases the role may connect to: accepting
// connections (datallowconn, so template0 is left out) with the CONNECT
// privilege, by name.
const databasesSQL = `SELECT datname::text, oid::int8, dattablespace::int8 FROM pg_catalog.pg_database
WHERE datallowconn AND pg_catalog.has_database_privilege(datname, 'CONNECT')
ORDER BY datname`

// Database is one database of the server.
type Database struct {
	Name string
	// OID is pg_database.oid (the name of its directories); Tablespace
	// the OID of its default tablespace (dattablespace).
	OID, Tablespace uint32
}

// Databases returns the databases the role of conn may connect to
// (datallowconn and CONNECT privilege), sorted by name; template0 is not
// among them. Errors: the query's, wrapped.
func Databases(ctx context.Context, conn *pgx.Conn) ([]Database, error) {
	rows, err := conn.Query(ctx, databasesSQL)
	if err != nil {
		return nil, fmt.Errorf("list databases: %w", err)
	}
	var out []Database
	var name string
	var oid, ts int64
	if _, err := pgx.ForEachRow(rows, []any{&name, &oid, &ts}, func() error {
		out = append(out, Database{Name: name, OID: uint32(oid), Tablespace: uint32(ts)})
		return nil
	}); err != nil {
		return nil, fmt.Errorf("list databases: %w", err)
	}
	return out, nil
}

// DatabaseTimeout bounds one database's connect and read in
// ForEachDatabase.
const DatabaseTimeout = 10 * time.Second

// ForEachDatabase connects to each of dbs in turn with a copy of cfg
// (its Database replaced, application_name ApplicationName unless cfg
// sets one), calls fn on that connection and closes it before the next,
// so at most one extra connection is open at a time; each database gets
// DatabaseTimeout. It returns the errors by database (connection errors
// as one line without passwords, conninfo.Describe; fn's as returned);
// a database missing from the map was read. A cancelled ctx stops the
// loop: the remaining databases get ctx's error.
func ForEachDatabase(ctx context.Context, cfg *pgx.ConnConfig, dbs []string, fn func(ctx context.Context, db string, conn *pgx.Conn) error) map[string]error {
	errs := map[string]error{}
	for _, db := range dbs {
		if err := ctx.Err(); err != nil {
			errs[db] = err
			continue
		}
		if err := readDatabase(ctx, cfg, db, fn); err != nil {
			errs[db] = err
		}
	}
	return errs
}

func readDatabase(ctx context.Context, cfg *pgx.ConnConfig, db string, fn func(ctx context.Context, db string, conn *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, DatabaseTimeout)
	defer cancel()
	c := cfg.Copy()
	c.Database = db
	if _, ok := c.RuntimeParams["application_name"]; !ok {
		c.RuntimeParams["application_name"] = ApplicationName
	}
	conn, err := pgx.ConnectConfig(ctx, c)
	if err != nil {
		return fmt.Errorf("connect: %s", conninfo.Describe(err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return fn(ctx, db, conn)
}
