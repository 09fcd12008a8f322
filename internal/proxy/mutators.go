package proxy

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// SideApplicationName is the application_name of the proxy's side
// connections (unless the upstream DSN sets one), so that a DBA tells
// them apart from the clients' sessions in pg_stat_activity.
const SideApplicationName = "erplab proxy (side)"

// mutatorsSQL lists the functions whose call may change the schema: the
// volatile ones not built in (OIDs from FirstNormalObjectId, 16384, are
// the database's own and its extensions') in a language that runs SQL.
// A stable or immutable function cannot (PL/pgSQL and SQL functions
// refuse "ALTER TABLE is not allowed in a non-volatile function"); C and
// internal functions are left out, so that extension functions an ERP
// calls all the time (uuid_generate_v4()) cost nothing. dblink_exec is
// one of those left out: its DDL comes from another connection.
const mutatorsSQL = `
SELECT p.proname FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_language l ON l.oid = p.prolang
WHERE p.provolatile = 'v' AND p.oid >= 16384 AND l.lanname NOT IN ('c', 'internal')`

// mutators is the set of functions of one database whose call may change
// the schema (mutatorsSQL), by name whatever the schema or argument types
// (a call is matched by its name only, which errs towards a match).
type mutators struct {
	names map[string]struct{} // names, ASCII letters in lower case
	// all: every call may change the schema (the list is unknown, or a
	// name the word scan cannot match: one with a character that is
	// not an identifier's).
	all bool
	gen uint64    // the database's generation when listed
	at  time.Time // when listed
	// refreshing: a background listing to replace this one (older than
	// Config.DecisionTTL) is under way
	refreshing atomic.Bool
}

// dbState is what the proxy keeps per database, read without a lock on
// every statement that calls a function or passes the pre-filter (the
// writers, invalidate, Flush and the listings' stores, hold Proxy.mu,
// so that a list is kept only if no schema change came while it was
// made).
type dbState struct {
	gen  atomic.Uint64            // DDL generations seen (see Proxy.generation)
	muts atomic.Pointer[mutators] // functions whose call may change the schema; nil: not listed
}

// genOf is the generation of the database whose state is st (see
// Proxy.generation).
func (p *Proxy) genOf(st *dbState) uint64 { return st.gen.Load() + p.epoch.Load() }

// dbState returns database db's state, created on first use.
func (p *Proxy) dbState(db string) *dbState {
	if st, ok := p.dbs.Load(db); ok {
		return st.(*dbState)
	}
	st, _ := p.dbs.LoadOrStore(db, new(dbState))
	return st.(*dbState)
}

// has reports whether word, a function name as written (ASCII case
// folded, truncated to PostgreSQL's 63 bytes as the server does), may
// name a function of m. A nil m has none.
func has[T string | []byte](m *mutators, word T) bool {
	if m == nil {
		return false
	}
	if m.all {
		return true
	}
	if len(m.names) == 0 {
		return false
	}
	var buf [63]byte
	n := min(len(word), len(buf))
	for i := 0; i < n; i++ {
		c := word[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	_, ok := m.names[string(buf[:n])] // no allocation for the lookup
	return ok
}

// calledIn reports whether text calls (a word followed by an opening
// parenthesis, see scanWords) a function that may be in m.
func (m *mutators) calledIn(text []byte) bool {
	if m == nil || (!m.all && len(m.names) == 0) {
		return false // no scan: the common case of a database without such functions
	}
	return eachCall(text, func(w []byte) bool { return has(m, w) })
}

// mutatorsFor returns database db's mutators, listing them on its side
// connection (the upstream DSN's user) when there is no list or it is
// older than the database's generation (a schema change through the proxy
// may have created such a function: listed before the next call is
// judged); a list older than Config.DecisionTTL is used once more while a
// background listing replaces it, so that no client statement waits for
// the periodic refresh. When the side connection fails, a set where every
// call counts as a schema change.
//
// It takes no lock (atomic loads: it runs for every statement that calls
// a function, count(*) included). The list is loaded before the
// generation, so a schema change between the two makes the list look
// older than it is (listed again), never newer.
func (p *Proxy) mutatorsFor(ctx context.Context, db string) *mutators {
	return p.mutatorsIn(ctx, db, p.dbState(db))
}

// mutatorsIn is mutatorsFor with db's state at hand (a session keeps its
// database's: session.state), so that not even the sync.Map lookup runs.
func (p *Proxy) mutatorsIn(ctx context.Context, db string, st *dbState) *mutators {
	m := st.muts.Load()
	gen := p.genOf(st)
	if m != nil && m.gen == gen {
		if time.Since(m.at) >= p.cfg.DecisionTTL && m.refreshing.CompareAndSwap(false, true) {
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.listMutatorsInto(context.WithoutCancel(ctx), db, gen)
			}()
		}
		return m
	}
	return p.listMutatorsInto(ctx, db, gen)
}

// listMutatorsInto lists db's mutators for generation gen and keeps them
// unless the generation moved meanwhile; see mutatorsFor.
func (p *Proxy) listMutatorsInto(ctx context.Context, db string, gen uint64) *mutators {
	m, err := p.listMutators(ctx, db, gen)
	if err != nil {
		p.log.Info("functions that may change the schema not listed: every function call counts as one", "database", db, "err", err)
		return &mutators{all: true}
	}
	p.keepMutators(db, gen, m, false)
	return m
}

// keepMutators stores m, listed for generation gen, as db's list if the
// generation did not move meanwhile (and, with ifNone, if db has no list
// yet).
func (p *Proxy) keepMutators(db string, gen uint64, m *mutators, ifNone bool) {
	st := p.dbState(db)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.genOf(st) != gen {
		return
	}
	if ifNone {
		st.muts.CompareAndSwap(nil, m)
	} else {
		st.muts.Store(m)
	}
}

func (p *Proxy) listMutators(ctx context.Context, db string, gen uint64) (*mutators, error) {
	e, err := p.side(ctx, db, "")
	if err != nil {
		return nil, err
	}
	return listMutatorsOn(ctx, e.pool, gen)
}

// querier is a pgx pool or connection.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// listMutatorsOn runs mutatorsSQL on q for generation gen.
func listMutatorsOn(ctx context.Context, q querier, gen uint64) (*mutators, error) {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rows, err := q.Query(qctx, mutatorsSQL)
	if err != nil {
		return nil, fmt.Errorf("list functions: %w", err)
	}
	defer rows.Close()
	m := &mutators{names: map[string]struct{}{}, gen: gen, at: time.Now()}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("list functions: %w", err)
		}
		b := []byte(name)
		for i, c := range b {
			switch {
			case c >= 'A' && c <= 'Z':
				b[i] = c + 'a' - 'A'
			case !isIdentChar(c) || (i == 0 && !isIdentStart(c)):
				m.all = true
			}
		}
		m.names[string(b)] = struct{}{}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list functions: %w", err)
	}
	return m, nil
}
