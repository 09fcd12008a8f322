package replay

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/conninfo"
)

// CopyPrefix starts the name of every database CopyDatabase makes: a
// copy left by a process killed outright is recognised by it.
const CopyPrefix = "erplab_replay_"

// CopyDatabase creates CopyPrefix<time> as a copy of template on the
// server of dsn (CREATE DATABASE ... TEMPLATE, as 'createdb -T'), from a
// connection to dsn's database, or to postgres when that is the template
// (a copy needs its template without other sessions). It returns the
// copy's name and the DSN of that admin connection (DropCopy's).
func CopyDatabase(ctx context.Context, dsn, template string) (db, admin string, err error) {
	admin = dsn
	if cfg, perr := pgx.ParseConfig(dsn); perr == nil && cfg.Database == template {
		admin = WithDatabase(dsn, "postgres")
	}
	db = CopyPrefix + strings.ReplaceAll(time.Now().UTC().Format("20060102_150405.000000"), ".", "_")
	err = adminExec(ctx, admin, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()+" TEMPLATE "+pgx.Identifier{template}.Sanitize())
	if err != nil {
		return "", "", err
	}
	return db, admin, nil
}

// DropCopy drops database db (WITH (FORCE)) from a connection to admin,
// on a context of its own bounded to a minute: also after an error or
// an interruption.
func DropCopy(admin, db string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return adminExec(ctx, admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)")
}

// adminExec runs one statement on a connection of its own.
func adminExec(ctx context.Context, dsn, q string) error {
	conn, err := conninfo.Connect(ctx, dsn, "erplab-replay", nil)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, q); err != nil {
		return errors.New(conninfo.Describe(err))
	}
	return nil
}

// WithDatabase is dsn connecting to database db: a URL with its path
// replaced, else the key=value string with dbname appended (the last
// one wins in libpq).
func WithDatabase(dsn, db string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			u.Path = "/" + db
			return u.String()
		}
	}
	return strings.TrimSpace(dsn + " dbname=" + conninfo.QuoteValue(db))
}
