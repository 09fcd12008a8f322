package proxy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/rewrite"
)

// sideKey identifies the side connections of one database and user.
type sideKey struct{ db, user string }

// sideEntry is a small pool of side connections for one database and
// user: they log in with the upstream DSN's credentials and act as the
// client's user (SET ROLE when it differs), and answer the rules'
// catalog questions and Describe requests (prepare only, never execute)
// and create the guard's temporary views (in transactions they roll back:
// rewrite.Types.Resolve).
type sideEntry struct {
	pool *pgxpool.Pool
	// cfgPath is the search_path a session gets from the server's
	// configuration alone (no database or role setting), or "" when it
	// cannot be known (the login role or the upstream DSN sets its own).
	cfgPath string
	err     error
	at      time.Time // when err happened
	types   *rewrite.TypeCache
	mu      sync.Mutex
	set     map[*pgx.Conn]string // the session path each connection was last given (setPath's argument)
}

// sideRetry is how long a failed side connection is not retried.
const sideRetry = 30 * time.Second

// side returns the side pool of database db and user user, opening it
// once (and again sideRetry after a failure).
func (p *Proxy) side(ctx context.Context, db, user string) (*sideEntry, error) {
	if user == "" {
		user = p.catCfg.ConnConfig.User
	}
	k := sideKey{db, user}
	p.catMu.Lock()
	defer p.catMu.Unlock()
	if e, ok := p.sides[k]; ok && (e.err == nil || time.Since(e.at) < sideRetry) {
		return e, e.err
	}
	e := &sideEntry{types: rewrite.NewTypeCache(), set: map[*pgx.Conn]string{}}
	err := p.openSide(ctx, e, db, user)
	if err != nil {
		e.err, e.at = fmt.Errorf("side connection to database %q as %q: %w", db, user, err), time.Now()
		// One line (pgconn's error lists every address tried, one
		// per line), without the password.
		p.log.Warn("no side connection: statements of this database and user stay unchanged until a retry works", "database", db, "user", user, "retry_in", sideRetry, "err", conninfo.DescribeFlag(err, "--upstream"))
	}
	p.sides[k] = e
	return e, e.err
}

func (p *Proxy) openSide(ctx context.Context, e *sideEntry, db, user string) error {
	cfg := p.catCfg.Copy()
	cfg.ConnConfig.Database = db
	login := cfg.ConnConfig.User
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		set := "SET statement_timeout = '10s'; SET lock_timeout = '5s'"
		if user != login {
			set += "; SET ROLE " + pgx.Identifier{user}.Sanitize()
		}
		if serverMajor(c) >= 12 { // plan_cache_mode is new in 12
			// The rules' catalog queries, prepared once, are then
			// never planned again (a decision's round trip planned the
			// column query for 0.3-0.8 ms); Describe plans nothing.
			set += "; SET plan_cache_mode = force_generic_plan"
		}
		if _, err := c.Exec(ctx, set); err != nil {
			var pe *pgconn.PgError
			if user != login && errors.As(err, &pe) && pe.Code == "42501" {
				// Not a connection privilege (conninfo would say
				// GRANT CONNECT): the login may not act as the client.
				return fmt.Errorf("the side connection logs in as %q and may not SET ROLE %q (the client's user): %s; GRANT %s TO %s, or give --upstream a user that is a member of the clients' roles",
					login, user, pe.Message, pgx.Identifier{user}.Sanitize(), pgx.Identifier{login}.Sanitize())
			}
			return err
		}
		return rewrite.PrepareCatalog(ctx, c)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The configured search_path: the login's value when neither the
	// login role nor the DSN sets its own.
	var own bool
	var reset string
	err = pool.QueryRow(pctx, `
SELECT EXISTS (SELECT 1 FROM pg_db_role_setting s, unnest(s.setconfig) c
               WHERE c LIKE 'search\_path=%' AND s.setrole = (SELECT oid FROM pg_roles WHERE rolname = $1)),
       (SELECT reset_val FROM pg_settings WHERE name = 'search_path')`, login).Scan(&own, &reset)
	if err != nil {
		pool.Close()
		return err
	}
	_, dsnPath := cfg.ConnConfig.RuntimeParams["search_path"]
	_, dsnOpts := cfg.ConnConfig.RuntimeParams["options"]
	if !own && !dsnPath && !dsnOpts {
		e.cfgPath = reset
	}
	e.pool = pool
	// One decision on catalog tables, so that the first client statement
	// finds the side backend's catalog caches and pgx's prepared catalog
	// queries ready (a fresh backend's first catalog lookups cost
	// milliseconds each).
	conn, err := pool.Acquire(pctx)
	if err != nil {
		pool.Close()
		return err
	}
	defer conn.Release()
	// The built-in types too: a subquery returning one then needs no
	// round trip after its Describe to learn what the type is.
	cat := rewrite.NewPGCatalogConn(conn.Conn()).ShareTypes(e.types)
	if _, err := cat.LearnBuiltins(pctx); err != nil {
		p.log.Debug("side connection: built-in types not learnt", "database", db, "err", err)
	}
	if ok, err := e.setPath(pctx, conn.Conn(), db, user, ""); err == nil && ok {
		_, _ = rewrite.Rewrite(pctx, warmSideSQL, rewrite.Options{Catalog: cat, Types: cat})
		// warmSideSQL names only catalog tables, which cannot be
		// temporary: the temporary-relation check (every decision on a
		// user's tables) runs once here, or the first decision pays its
		// first planning and pg_class lookups (0.6 ms of a 3 ms one)
		_, _ = cat.TempRelations(pctx, []string{"erplab_warm"})
	}
	if user == login {
		// The functions whose call may change the schema, on this
		// connection while everything waits for it anyway: a first
		// statement calling a function (count(*) is one) then needs no
		// listing of its own (mutatorsFor) to wait for.
		gen := p.generation(db)
		if m, err := listMutatorsOn(pctx, conn.Conn(), gen); err == nil {
			p.keepMutators(db, gen, m, true)
		}
	}
	return nil
}

// serverMajor is the major version in the server_version parameter, 0
// when unknown.
func serverMajor(c *pgx.Conn) int {
	v := c.PgConn().ParameterStatus("server_version")
	n := 0
	for _, r := range v {
		if r < '0' || r > '9' {
			break
		}
		n = n*10 + int(r-'0')
	}
	return n
}

// warmSideSQL is a statement the rule rewrites in any database.
const warmSideSQL = "SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid = 1 OR c.oid IN (SELECT i.indexrelid FROM pg_catalog.pg_index i WHERE i.indisunique)"

// defaultPathSQL sets the search_path a new session of user $2 in
// database $1 starts with: the most specific pg_db_role_setting entry,
// else $3 (the configured value); NULL when neither is known.
const defaultPathSQL = `
SELECT CASE WHEN v IS NULL THEN NULL ELSE set_config('search_path', v, false) END
FROM (SELECT coalesce(
  (SELECT substr(c, 13) FROM pg_db_role_setting s, unnest(s.setconfig) c
   WHERE c LIKE 'search\_path=%'
     AND s.setrole IN (0, (SELECT oid FROM pg_roles WHERE rolname = $2))
     AND s.setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = $1))
   ORDER BY (s.setdatabase <> 0 AND s.setrole <> 0) DESC, (s.setrole <> 0) DESC LIMIT 1),
  nullif($3, '')) AS v) x`

// setPath gives side connection c the search_path of a session: the
// default of its database and user, then the session's own setting
// (path: "" for none, "cfg:" + a value from the startup packet, "sql:" +
// a SET statement the session ran). It returns false when the default
// cannot be known. It does nothing when c was last given path (until
// forget).
func (e *sideEntry) setPath(ctx context.Context, c *pgx.Conn, db, user, path string) (bool, error) {
	e.mu.Lock()
	last, ok := e.set[c]
	e.mu.Unlock()
	if ok && last == path {
		return true, nil
	}
	e.mu.Lock()
	delete(e.set, c)
	e.mu.Unlock()
	var v *string
	if err := c.QueryRow(ctx, defaultPathSQL, db, user, e.cfgPath).Scan(&v); err != nil {
		return false, fmt.Errorf("side connection: search_path: %w", err)
	}
	if v == nil && path == "" {
		return false, nil
	}
	switch {
	case strings.HasPrefix(path, "cfg:"):
		if _, err := c.Exec(ctx, "SELECT set_config('search_path', $1, false)", path[4:]); err != nil {
			return false, fmt.Errorf("side connection: search_path: %w", err)
		}
	case strings.HasPrefix(path, "sql:"):
		if _, err := c.Exec(ctx, path[4:], pgx.QueryExecModeSimpleProtocol); err != nil {
			return false, fmt.Errorf("side connection: replay %q: %w", path[4:], err)
		}
	}
	e.mu.Lock()
	e.set[c] = path
	e.mu.Unlock()
	return true, nil
}

// forget makes the next setPath of every connection of database db (of
// every database when all) set its path again (a schema change may have
// changed a role's or the database's default).
func (p *Proxy) forget(db string, all bool) {
	p.catMu.Lock()
	defer p.catMu.Unlock()
	for k, e := range p.sides {
		if all || k.db == db {
			e.mu.Lock()
			clear(e.set)
			e.mu.Unlock()
		}
	}
}

func (p *Proxy) closeSides() {
	p.catMu.Lock()
	defer p.catMu.Unlock()
	for _, e := range p.sides {
		if e.pool != nil {
			e.pool.Close()
		}
	}
	p.sides = map[sideKey]*sideEntry{}
}
