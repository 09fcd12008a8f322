package erp

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// tempShape names a temporary table layout of queries/temp_tables.sql.
type tempShape int

const (
	shapeRLSValues tempShape = iota // _type, _rtref, _rrref
	shapeGoods                      // _fld1235rref, _fld1236rref, _fld1237
	numShapes
)

func (q *tempSQL) ddl(s tempShape) (create, index, stats10 string) {
	switch s {
	case shapeRLSValues:
		return q.CreateRLSValues, q.IndexRLSValues, q.Stats10RLSValues
	default:
		return q.CreateGoods, q.IndexGoods, q.Stats10Goods
	}
}

// connTemps is the lsFusion-style cache of one connection: free temporary
// tables per shape, and the number for the next new table t_N. Only the
// VU holding the connection touches it.
type connTemps struct {
	pid  uint32 // backend PID: a different one means a new session
	next int
	free [numShapes][]string
}

// tempTables hands out the temporary tables of one key-operation execution
// on one connection, in the workload's style, and takes them back.
type tempTables struct {
	w     *Workload
	conn  *pgx.Conn
	q     *tempSQL
	cache *connTemps // lsFusion style only
	seq   int        // 1C style: tt1, tt2, ...
	held  []heldTemp
}

type heldTemp struct {
	name  string
	shape tempShape
}

// sweepEvery is how many cache look-ups pass between sweeps of the
// lsFusion cache for closed connections.
const sweepEvery = 256

func (w *Workload) tempTables(conn *pgx.Conn, q *tempSQL) *tempTables {
	t := &tempTables{w: w, conn: conn, q: q}
	if w.opts.TempStyle != TempStyleLsFusion {
		return t
	}
	pid := conn.PgConn().PID()
	w.tmu.Lock()
	defer w.tmu.Unlock()
	w.tuses++
	if w.tuses%sweepEvery == 0 {
		// The map holds the *pgx.Conn, so a closed connection's address
		// cannot be reused by a new one while it is in the map.
		for c := range w.temps {
			if c.IsClosed() {
				delete(w.temps, c)
			}
		}
	}
	c := w.temps[conn]
	if c == nil || c.pid != pid {
		c = &connTemps{pid: pid}
		w.temps[conn] = c
	}
	t.cache = c
	return t
}

// get returns the name of a temporary table of shape s, empty and indexed,
// ready to fill: 1C style creates tt<N> and its index now; lsFusion style
// takes a cached t_N or creates one (with statistics target 10).
func (t *tempTables) get(ctx context.Context, s tempShape) (string, error) {
	create, index, stats10 := t.q.ddl(s)
	if t.cache != nil {
		if free := t.cache.free[s]; len(free) > 0 {
			name := free[len(free)-1]
			t.cache.free[s] = free[:len(free)-1]
			t.held = append(t.held, heldTemp{name, s})
			return name, nil
		}
		name := "t_" + strconv.Itoa(t.cache.next)
		t.cache.next++
		for _, sql := range []string{create, index, stats10} {
			if err := t.exec(ctx, sql, name); err != nil {
				t.dropQuietly(ctx, name)
				return "", fmt.Errorf("create temp table %s: %w", name, err)
			}
		}
		t.held = append(t.held, heldTemp{name, s})
		return name, nil
	}
	t.seq++
	name := "tt" + strconv.Itoa(t.seq)
	err := t.exec(ctx, create, name)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P07" {
		// Left behind by an execution whose DROP failed: drop and retry.
		if err = t.exec(ctx, t.q.Drop, name); err == nil {
			err = t.exec(ctx, create, name)
		}
	}
	if err == nil {
		t.held = append(t.held, heldTemp{name, s})
		err = t.exec(ctx, index, name)
	}
	if err != nil {
		return "", fmt.Errorf("create temp table %s: %w", name, err)
	}
	return name, nil
}

// analyze runs ANALYZE on a table from get.
func (t *tempTables) analyze(ctx context.Context, name string) error {
	return t.exec(ctx, t.q.Analyze, name)
}

// releaseAll returns every held table: 1C style drops it; lsFusion style
// truncates it back into the cache, or drops and forgets it when TRUNCATE
// fails. It runs even when ctx is done (a connection must not keep a
// half-used table) and returns the first error.
func (t *tempTables) releaseAll(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var first error
	for _, h := range t.held {
		if t.cache == nil {
			if err := t.exec(ctx, t.q.Drop, h.name); err != nil && first == nil {
				first = fmt.Errorf("drop temp table %s: %w", h.name, err)
			}
			continue
		}
		if err := t.exec(ctx, t.q.Truncate, h.name); err != nil {
			t.dropQuietly(ctx, h.name)
			continue
		}
		t.cache.free[h.shape] = append(t.cache.free[h.shape], h.name)
	}
	t.held = t.held[:0]
	return first
}

func (t *tempTables) dropQuietly(ctx context.Context, name string) {
	_ = t.exec(ctx, t.q.DropIfExists, name) // best effort: the table is forgotten either way
}

func (t *tempTables) exec(ctx context.Context, sql, name string) error {
	_, err := t.conn.Exec(ctx, withTemp(sql, name, ""), execMode)
	return err
}

// cachedTempTables reports how many cached lsFusion-style temp tables the
// workload holds for conn (free ones), for tests.
func (w *Workload) cachedTempTables(conn *pgx.Conn) int {
	w.tmu.Lock()
	defer w.tmu.Unlock()
	c := w.temps[conn]
	if c == nil {
		return 0
	}
	n := 0
	for _, f := range c.free {
		n += len(f)
	}
	return n
}
