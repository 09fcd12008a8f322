package experiment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/workload"
)

// ExternalPrefix starts the name of every database an experiment makes on
// a server erplab did not start (ab --dsn): its template and run copies,
// erplab_ab_<8 hex>_..., so that a leftover one is recognised by its name
// and never taken for the user's.
const ExternalPrefix = "erplab_ab_"

// External is a server erplab did not start (ab --dsn): the runs copy a
// template there and drop their copies; nothing else on it is written.
type External struct {
	// Conn is the user's connection string (its database is the
	// maintenance connection's: CREATE and DROP DATABASE are sent there).
	Conn string
	// Prefix starts every database the experiment makes, ExternalPrefix
	// and a random id, e.g. "erplab_ab_1a2b3c4d_".
	Prefix string
	// UserTemplate, when set, is the template: the user's own database
	// (ab --template-db), copied, never marked, changed or dropped.
	UserTemplate string
	// Track records database db in the crash-safe leftover record before
	// it is made (a kill -9 of ab leaves it to the next erplab command);
	// forget removes the record once db is dropped. Nil records nothing.
	Track func(ctx context.Context, db string) (forget func(), err error)
	// TrackSettings is remedy.Target.RecordSettings of every run.
	TrackSettings func(ctx context.Context, names, values []string) (forget func(), err error)
	// TrackTablespace is remedy.Target.RecordTablespace of every run.
	TrackTablespace func(ctx context.Context, name string) (forget func(), err error)
	// Restart, when set (ab --dsn --allow-restart on a local server),
	// restarts the server and waits until it accepts connections: a Cold
	// run restarts it before the run, and it is remedy.Target.Restart of
	// every run (settings of context postmaster). Nil: neither is done.
	Restart func(ctx context.Context) error
}

// DSN is Conn with database db ("" keeps Conn's).
func (e *External) DSN(db string) string {
	if db == "" {
		return e.Conn
	}
	return withParams(e.Conn, [][2]string{{"dbname", db}})
}

// DSNAt is Conn at host:port (a proxy in front of the server, without
// TLS) with database db; user and password stay Conn's.
func (e *External) DSNAt(host string, port int, db string) string {
	return withParams(e.Conn, [][2]string{{"host", host}, {"port", fmt.Sprint(port)}, {"dbname", db}, {"sslmode", "disable"}})
}

// Admin is the maintenance connection's DSN: Conn, or Conn with database
// postgres (template1 when that is the template) when Conn's database is
// UserTemplate: a copy needs its template without other sessions.
func (e *External) Admin() string {
	if e.UserTemplate == "" {
		return e.Conn
	}
	if cfg, err := pgconn.ParseConfig(e.Conn); err == nil && cfg.Database == e.UserTemplate {
		if e.UserTemplate == "postgres" {
			return e.DSN("template1")
		}
		return e.DSN("postgres")
	}
	return e.Conn
}

// withParams sets parameters of dsn: the query of a URI, else key=value
// pairs appended (libpq and pgx take the last of a key given twice).
func withParams(dsn string, kv [][2]string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			q := u.Query()
			for _, p := range kv {
				q.Set(p[0], p[1])
			}
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	for _, p := range kv {
		dsn += " " + p[0] + "=" + conninfo.QuoteValue(p[1])
	}
	return strings.TrimSpace(dsn)
}

// server is where an experiment's databases live: the embedded cluster
// or an External.
type server interface {
	DSN(db string) string
	DSNAt(host string, port int, db string) string
	Admin() string
}

// embedded is the throwaway cluster as a server.
type embedded struct{ *pgcluster.Cluster }

func (e embedded) Admin() string { return e.DSN("postgres") }

// server is cfg's: cfg.External when set, else the embedded cluster.
func (cfg Config) server() server {
	if cfg.External != nil {
		return cfg.External
	}
	return embedded{cfg.Cluster}
}

// runDatabase is variant v's run database of round: run_<v>_<round>,
// after the External's prefix on a server erplab did not start.
func (cfg Config) runDatabase(v Variant, round int) string {
	db := fmt.Sprintf("run_%s_%d", strings.ToLower(strings.ReplaceAll(v.Name, "-", "_")), round)
	if cfg.External != nil {
		db = cfg.External.Prefix + db
	}
	return db
}

// track records db with the External's Track (a no-op forget otherwise).
func (cfg Config) track(ctx context.Context, db string) (func(), error) {
	if cfg.External == nil || cfg.External.Track == nil {
		return func() {}, nil
	}
	return cfg.External.Track(ctx, db)
}

// BuildExternalTemplate builds the template database name on e as
// BuildTemplate does (the workload's set-up, then marked), after
// recording it with e.Track; a failed build drops it. The caller drops it
// after the experiment (DropExternal) and then calls forget.
func BuildExternalTemplate(ctx context.Context, e *External, name string, w workload.Workload, scale float64, seed uint64, out io.Writer) (forget func(), err error) {
	if !strings.HasPrefix(name, ExternalPrefix) {
		return nil, fmt.Errorf("template %s: not a name erplab owns (%s...)", name, ExternalPrefix)
	}
	forget = func() {}
	if e.Track != nil {
		if forget, err = e.Track(ctx, name); err != nil {
			return nil, err
		}
	}
	err = execOn(ctx, e.Admin(), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	if err == nil {
		err = fillTemplate(ctx, e, name, w, scale, seed, out)
	}
	if err != nil {
		if derr := DropExternal(context.WithoutCancel(ctx), e, name); derr != nil {
			return nil, errors.Join(fmt.Errorf("template %s: %w", name, err), derr)
		}
		forget()
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	return forget, nil
}

// DropExternal drops database db of e, which must carry e's prefix (a
// template it marked first loses IS_TEMPLATE: PostgreSQL refuses to drop
// a template database).
func DropExternal(ctx context.Context, e *External, db string) error {
	if !strings.HasPrefix(db, ExternalPrefix) {
		return fmt.Errorf("drop %s: not a database erplab made", db)
	}
	return dropOn(ctx, e, db)
}

// dropOn drops db on s WITH (FORCE) if it exists, clearing IS_TEMPLATE
// first on a server erplab did not start.
func dropOn(ctx context.Context, s server, db string) error {
	conn, err := conninfo.Connect(ctx, s.Admin(), "erplab-ab", nil)
	if err != nil {
		return fmt.Errorf("drop %s: %w", db, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	id := pgx.Identifier{db}.Sanitize()
	if _, ext := s.(*External); ext {
		var isTemplate bool
		err := conn.QueryRow(ctx, `SELECT datistemplate FROM pg_database WHERE datname = $1`, db).Scan(&isTemplate)
		if err == nil && isTemplate {
			if _, err := conn.Exec(ctx, "ALTER DATABASE "+id+" WITH IS_TEMPLATE false"); err != nil {
				return fmt.Errorf("drop %s: %w", db, err)
			}
		}
	}
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop %s: %w", db, err)
	}
	return nil
}

// execOn runs q on a connection of its own to dsn.
func execOn(ctx context.Context, dsn, q string) error {
	conn, err := conninfo.Connect(ctx, dsn, "erplab-ab", nil)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, q)
	return err
}

// copyError is CREATE DATABASE ... TEMPLATE's error, with one line on
// the cause PostgreSQL names 55006 (the template has other sessions).
func copyError(template, db string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55006" {
		return fmt.Errorf("copy template %s to %s: %s: CREATE DATABASE ... TEMPLATE needs no other session on %s: close them (pg_stat_activity) and run ab again", template, db, pgErr.Message, template)
	}
	return fmt.Errorf("copy template %s to %s: %w", template, db, err)
}
