package erp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/erplab/erplab/internal/workload"
)

// Options are the parameters of [Init].
type Options struct {
	// Scale is the data scale factor: 1 is about 1 GB (see package doc);
	// 0 < Scale <= MaxScale. 0.01 builds in seconds.
	Scale float64
	// Seed makes the data deterministic: the same (Scale, Seed, Separator)
	// gives the same rows.
	Seed uint64
	// Separator adds the data-separator column _fld1000 numeric(7,0) as
	// the first column of every table and every index (value 0).
	Separator bool
	// Parallel is the number of COPY streams and of concurrent index
	// builds, each on its own pool connection; 0 means GOMAXPROCS. It is
	// capped at the pool's MaxConns.
	Parallel int
	// Force lets Init write into a database that holds tables erplab did
	// not create (they are left untouched).
	Force bool
	// Progress, when not nil, receives progress lines (rows/s and MB/s per
	// phase, every 2 s and at the end of each phase).
	Progress func(format string, args ...any)
}

// LoadStats reports what Init did.
type LoadStats struct {
	// Rows is the number of rows written to all tables.
	Rows int64
	// CopyBytes is the size of the binary COPY data sent, bytes.
	CopyBytes int64
	// Bytes is the growth of pg_database_size over Init (tables, indexes,
	// TOAST, free space map, visibility map), bytes.
	Bytes int64
	// Duration is the whole Init; the phases are CopyDuration (generate +
	// binary COPY), IndexDuration (turnover totals INSERT ... SELECT and
	// CREATE INDEX), AnalyzeDuration (VACUUM ANALYZE).
	Duration, CopyDuration, IndexDuration, AnalyzeDuration time.Duration
	// PerTable is the row count of every table.
	PerTable map[string]int64
	// Reused is true when the database already held this data set (same
	// scale, seed and separator) and Init changed nothing.
	Reused bool
}

// Meta is the content of the marker table _erplab_meta: what Init created.
type Meta struct {
	Workload  string    // "erp"
	Scale     float64   // Options.Scale
	Seed      uint64    // Options.Seed
	Separator bool      // Options.Separator
	CreatedAt time.Time // when Init started (UTC)
	Schema    string    // schema holding the tables (current_schema() at Init)
	Tables    []string  // tables Init created, marker excluded
	// Ready is false while Init is loading (or after it was interrupted).
	Ready bool
}

// ErrInstalledDifferent is wrapped by Init when the database already holds
// erplab ERP data of another scale, seed or separator setting.
var ErrInstalledDifferent = errors.New("database already holds erplab ERP data with other parameters (drop it first)")

// metaWorkload is the "workload" value of the marker.
const metaWorkload = workload.MarkerWorkload

// Init creates the ERP schema in the current schema of the pool's database
// and loads it with generated data: tables without indexes, binary COPY on
// Parallel connections, the turnover totals by INSERT ... SELECT, indexes
// (Parallel at a time), VACUUM ANALYZE. It records what it creates in the
// marker table _erplab_meta (state "loading", then "ready").
//
// If the database already holds a ready data set with the same Scale, Seed
// and Separator, Init returns at once with Reused set; with other
// parameters it returns an error wrapping ErrInstalledDifferent. A data set
// left "loading" by an interrupted Init is dropped and rebuilt. If the
// database holds tables erplab did not create, Init returns an error
// wrapping workload.ErrForeignDatabase naming a few of them, unless
// opts.Force. On failure Init drops what it created.
func Init(ctx context.Context, pool *pgxpool.Pool, opts Options) (LoadStats, error) {
	start := time.Now()
	p, err := newPlan(opts.Scale, opts.Seed, opts.Separator)
	if err != nil {
		return LoadStats{}, err
	}
	meta, ok, err := Installed(ctx, pool)
	if err != nil {
		return LoadStats{}, err
	}
	if ok {
		if meta.Ready {
			if meta.Scale == opts.Scale && meta.Seed == opts.Seed && meta.Separator == opts.Separator {
				st, err := tableRows(ctx, pool, meta.Tables)
				return LoadStats{Reused: true, PerTable: st, Rows: sumRows(st), Duration: time.Since(start)}, err
			}
			return LoadStats{}, fmt.Errorf("erp: scale %g seed %d separator %t installed, asked for scale %g seed %d separator %t: %w",
				meta.Scale, meta.Seed, meta.Separator, opts.Scale, opts.Seed, opts.Separator, ErrInstalledDifferent)
		}
		if err := Drop(ctx, pool); err != nil {
			return LoadStats{}, fmt.Errorf("erp: drop the unfinished data set of an interrupted init: %w", err)
		}
	}
	foreign, err := workload.ForeignTables(ctx, pool)
	if err != nil {
		return LoadStats{}, err
	}
	if len(foreign) > 0 && !opts.Force {
		return LoadStats{}, workload.ForeignError("erp", foreign)
	}

	par := opts.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	if mc := int(pool.Config().MaxConns); mc > 0 && par > mc {
		par = mc
	}
	l := &loader{pool: pool, p: p, par: par, progress: opts.Progress}
	st, err := l.run(ctx, opts, start)
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if derr := Drop(cctx, pool); derr != nil {
			err = fmt.Errorf("%w (and dropping the partial data set failed: %v)", err, derr)
		}
		return st, err
	}
	return st, nil
}

type loader struct {
	pool     *pgxpool.Pool
	p        *plan
	par      int
	progress func(format string, args ...any)
}

func (l *loader) say(format string, args ...any) {
	if l.progress != nil {
		l.progress(format, args...)
	}
}

func (l *loader) run(ctx context.Context, opts Options, start time.Time) (LoadStats, error) {
	var st LoadStats
	var before int64
	if err := l.pool.QueryRow(ctx, "SELECT pg_database_size(current_database())").Scan(&before); err != nil {
		return st, fmt.Errorf("erp: database size: %w", err)
	}
	schema, err := RenderSchema(opts.Separator)
	if err != nil {
		return st, err
	}
	if err := createSchema(ctx, l.pool, schema, opts, start); err != nil {
		return st, err
	}
	l.say("erp: scale %g seed %d: %d warehouses, %d items, %d counterparties, %d sales invoices; %d connections",
		l.p.scale, l.p.seed, l.p.warehouses, l.p.items, l.p.counterparties, l.p.salesDocs, l.par)

	t0 := time.Now()
	perTable, copyBytes, err := l.copyPhase(ctx)
	if err != nil {
		return st, err
	}
	st.CopyDuration = time.Since(t0)
	st.CopyBytes = copyBytes
	rows := sumRows(perTable)
	l.say("erp: copy done: %d rows, %.1f MB in %.1f s (%.0f rows/s, %.1f MB/s)", rows, mb(copyBytes),
		st.CopyDuration.Seconds(), float64(rows)/st.CopyDuration.Seconds(), mb(copyBytes)/st.CopyDuration.Seconds())

	t1 := time.Now()
	totalsRows, err := l.indexPhase(ctx, schema.Indexes, perTable)
	if err != nil {
		return st, err
	}
	perTable[TableSalesTurnoverTotals] = totalsRows
	st.IndexDuration = time.Since(t1)
	l.say("erp: turnover totals (%d rows) and %d indexes in %.1f s", totalsRows, len(schema.Indexes), st.IndexDuration.Seconds())

	t2 := time.Now()
	if err := l.analyzePhase(ctx, perTable); err != nil {
		return st, err
	}
	st.AnalyzeDuration = time.Since(t2)
	l.say("erp: vacuum analyze in %.1f s", st.AnalyzeDuration.Seconds())

	if _, err := l.pool.Exec(ctx, "UPDATE "+TableMeta+" SET value = 'ready' WHERE key = 'state'"); err != nil {
		return st, fmt.Errorf("erp: mark the data set ready: %w", err)
	}
	var after int64
	if err := l.pool.QueryRow(ctx, "SELECT pg_database_size(current_database())").Scan(&after); err != nil {
		return st, fmt.Errorf("erp: database size: %w", err)
	}
	st.PerTable = perTable
	st.Rows = sumRows(perTable)
	st.Bytes = after - before
	st.Duration = time.Since(start)
	l.say("erp: ready: %d rows, database grew %.1f MB, %.1f s (%.1f MB/s overall)",
		st.Rows, mb(st.Bytes), st.Duration.Seconds(), mb(st.Bytes)/st.Duration.Seconds())
	return st, nil
}

// mb converts bytes to MB of 10^6 bytes, as the init summary and the
// pgbench comparison print them.
func mb(b int64) float64 { return float64(b) / 1e6 }

func sumRows(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// createSchema creates the marker table, records the data set as
// "loading" and creates every table, in one transaction: if any table
// cannot be created (e.g. a foreign table of the same name under Force),
// nothing is left behind and the marker never lists a table erplab did not
// create.
func createSchema(ctx context.Context, pool *pgxpool.Pool, s Schema, opts Options, start time.Time) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("erp: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op
	if _, err := tx.Exec(ctx, "CREATE TABLE "+TableMeta+" (key text PRIMARY KEY, value text NOT NULL)"); err != nil {
		return fmt.Errorf("erp: create marker table %s: %w", TableMeta, err)
	}
	var schema string
	if err := tx.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return fmt.Errorf("erp: current schema: %w", err)
	}
	kv := [][2]string{
		{"workload", metaWorkload},
		{"scale", strconv.FormatFloat(opts.Scale, 'g', -1, 64)},
		{"seed", strconv.FormatUint(opts.Seed, 10)},
		{"separator", strconv.FormatBool(opts.Separator)},
		{"created_at", start.UTC().Format(time.RFC3339)},
		{"schema", schema},
		{"tables", strings.Join(AllTables(), ",")},
		{"state", "loading"},
	}
	for _, e := range kv {
		if _, err := tx.Exec(ctx, "INSERT INTO "+TableMeta+" (key, value) VALUES ($1, $2)", e[0], e[1]); err != nil {
			return fmt.Errorf("erp: write marker %s: %w", e[0], err)
		}
	}
	if _, err := tx.Exec(ctx, s.Tables); err != nil {
		return fmt.Errorf("erp: create tables: %w", err)
	}
	if _, err := tx.Exec(ctx, commentSQL("", append(AllTables(), TableMeta))); err != nil {
		return fmt.Errorf("erp: mark tables: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("erp: commit schema: %w", err)
	}
	return nil
}

// Marker is the COMMENT erp puts on every table it creates and on its
// marker table: it starts with workload.CreatedComment, so the --force
// guard of every workload (smoke's too) knows them as erplab's.
const Marker = workload.CreatedComment + " init or run --workload erp"

// commentSQL is the statements putting Marker on tables (of schema, or
// of the current schema when schema is "").
func commentSQL(schema string, tables []string) string {
	var b strings.Builder
	for _, t := range tables {
		id := pgx.Identifier{t}
		if schema != "" {
			id = pgx.Identifier{schema, t}
		}
		fmt.Fprintf(&b, "COMMENT ON TABLE %s IS '%s';\n", id.Sanitize(), strings.ReplaceAll(Marker, "'", "''"))
	}
	return b.String()
}

// markInstalled puts Marker on the tables of an installed data set (and
// its marker table) that lack it: a data set an older erplab built.
func markInstalled(ctx context.Context, pool *pgxpool.Pool, m Meta) error {
	rows, err := pool.Query(ctx, `SELECT t FROM unnest($1::text[]) t
WHERE pg_catalog.obj_description(pg_catalog.to_regclass(quote_ident($2) || '.' || quote_ident(t)), 'pg_catalog.pg_class') IS DISTINCT FROM $3`,
		append(slices.Clone(m.Tables), TableMeta), m.Schema, Marker)
	if err != nil {
		return fmt.Errorf("erp: mark tables: %w", err)
	}
	unmarked, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(unmarked) == 0 {
		return err
	}
	if _, err := pool.Exec(ctx, commentSQL(m.Schema, unmarked)); err != nil {
		return fmt.Errorf("erp: mark tables: %w", err)
	}
	return nil
}

// copyPhase generates all data and streams it with binary COPY over l.par
// connections. It returns rows per table and the COPY bytes sent.
func (l *loader) copyPhase(ctx context.Context) (map[string]int64, int64, error) {
	var rows [numTables]atomic.Int64
	var sent atomic.Int64
	var docs atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	batches := make(chan *copyBuf, 2*l.par)
	free := make(chan []byte, 4*l.par+int(numTables)*l.par)
	newBuf := func() []byte {
		select {
		case b := <-free:
			return b
		default:
			return make([]byte, 0, flushBytes+64<<10)
		}
	}
	send := func(cb *copyBuf) error {
		select {
		case batches <- cb:
			return nil
		case <-gctx.Done():
			return gctx.Err()
		}
	}
	gen := errgroup.Group{}
	gen.Go(func() error {
		defer close(batches)
		return l.p.generate(gctx, l.par, &docs, send, newBuf)
	})
	for i := 0; i < l.par; i++ {
		g.Go(func() error {
			conn, err := l.pool.Acquire(gctx)
			if err != nil {
				return fmt.Errorf("erp: acquire a COPY connection: %w", err)
			}
			defer conn.Release()
			if _, err := conn.Exec(gctx, "SET synchronous_commit = off"); err != nil {
				return fmt.Errorf("erp: set synchronous_commit: %w", err)
			}
			for cb := range batches {
				payload := cb.finish()
				tag, err := conn.Conn().PgConn().CopyFrom(gctx, bytes.NewReader(payload),
					"COPY "+cb.table+" FROM STDIN (FORMAT binary)")
				if err != nil {
					return fmt.Errorf("erp: COPY %s: %w", cb.table, err)
				}
				rows[cb.id].Add(tag.RowsAffected())
				sent.Add(int64(len(payload)))
				select {
				case free <- cb.b[:0]:
				default:
				}
			}
			if _, err := conn.Exec(gctx, "RESET synchronous_commit"); err != nil {
				return fmt.Errorf("erp: reset synchronous_commit: %w", err)
			}
			return nil
		})
	}
	stop := l.ticker("copy", func() string {
		var r int64
		for i := range rows {
			r += rows[i].Load()
		}
		pct := 100 * float64(docs.Load()) / float64(max(1, l.p.totalSales()))
		return fmt.Sprintf("%3.0f%% of sales invoices, %d rows, %.1f MB", min(pct, 100), r, mb(sent.Load()))
	}, func() (int64, int64) {
		var r int64
		for i := range rows {
			r += rows[i].Load()
		}
		return r, sent.Load()
	})
	genErr := gen.Wait()
	err := g.Wait()
	stop()
	if err != nil { // a COPY failed (the generator then stops with context.Canceled)
		return nil, 0, err
	}
	if genErr != nil {
		return nil, 0, fmt.Errorf("erp: generate: %w", genErr)
	}
	out := make(map[string]int64, numTables)
	for i := range rows {
		out[tableID(i).name()] = rows[i].Load()
	}
	return out, sent.Load(), nil
}

// ticker prints a progress line every 2 s, with rows/s and MB/s computed
// from counters when counters is not nil; the returned function stops it.
func (l *loader) ticker(phase string, line func() string, counters func() (rows, bytes int64)) func() {
	if l.progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		var lastR, lastB int64
		if counters != nil {
			lastR, lastB = counters()
		}
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				if counters == nil {
					l.say("erp: %s: %s", phase, line())
					continue
				}
				r, b := counters()
				dt := now.Sub(last).Seconds()
				l.say("erp: %s: %s (%.0f rows/s, %.1f MB/s)", phase, line(), float64(r-lastR)/dt, mb(b-lastB)/dt)
				lastR, lastB, last = r, b, now
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// memBudget is the maintenance_work_mem / work_mem each of n concurrent
// index builds gets: 4 GB shared, between 64 MB and 1 GB each.
func memBudget(n int) string {
	m := 4096 / max(1, n)
	m = min(1024, max(64, m))
	return strconv.Itoa(m) + "MB"
}

// turnoverTotalsSQL fills the sales turnover totals from the movements:
// per month and dimension set, the sums of active records (the same
// aggregation a "recalculate totals" performs).
func turnoverTotalsSQL(sep bool) string {
	s := ""
	if sep {
		s = SeparatorColumn + ", "
	}
	return "INSERT INTO " + TableSalesTurnoverTotals + " (" + s + "_period, _fld1261rref, _fld1262rref, _fld1263rref, _fld1264, _fld1265, _fld1266, _splitter)\n" +
		"SELECT " + s + "date_trunc('month', _period), _fld1261rref, _fld1262rref, _fld1263rref, sum(_fld1264), sum(_fld1265), sum(_fld1266), 0\n" +
		"FROM " + TableSalesMovements + " WHERE _active\n" +
		"GROUP BY " + s + "date_trunc('month', _period), _fld1261rref, _fld1262rref, _fld1263rref"
}

// indexPhase computes the turnover totals and builds every index, l.par
// statements at a time, the largest tables first; the totals table's
// indexes wait for its INSERT. It returns the totals row count.
func (l *loader) indexPhase(ctx context.Context, idx []IndexStmt, perTable map[string]int64) (int64, error) {
	type job struct {
		sql   string
		gated bool // waits for the totals
	}
	sorted := slices.Clone(idx)
	sort.SliceStable(sorted, func(a, b int) bool { return perTable[sorted[a].Table] > perTable[sorted[b].Table] })
	jobs := []job{{sql: turnoverTotalsSQL(l.p.sep)}}
	var gated []job
	for _, s := range sorted {
		if s.Table == TableSalesTurnoverTotals {
			gated = append(gated, job{sql: s.SQL, gated: true})
			continue
		}
		jobs = append(jobs, job{sql: s.SQL})
	}
	jobs = append(jobs, gated...)

	totalsDone := make(chan struct{})
	var totalsRows atomic.Int64
	var next, done atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	mem := memBudget(l.par)
	for i := 0; i < l.par; i++ {
		g.Go(func() error {
			conn, err := l.pool.Acquire(gctx)
			if err != nil {
				return fmt.Errorf("erp: acquire an index connection: %w", err)
			}
			defer conn.Release()
			for _, set := range []string{
				"SET maintenance_work_mem = '" + mem + "'",
				"SET work_mem = '" + mem + "'",
				"SET max_parallel_maintenance_workers = 0",
			} {
				if _, err := conn.Exec(gctx, set); err != nil {
					return fmt.Errorf("erp: %s: %w", set, err)
				}
			}
			for {
				k := int(next.Add(1)) - 1
				if k >= len(jobs) {
					break
				}
				j := jobs[k]
				if j.gated {
					select {
					case <-totalsDone:
					case <-gctx.Done():
						return gctx.Err()
					}
				}
				t0 := time.Now()
				tag, err := conn.Exec(gctx, j.sql)
				if err != nil {
					return fmt.Errorf("erp: %s: %w", firstLine(j.sql), err)
				}
				if d := time.Since(t0); d > time.Second {
					l.say("erp: index: %.1f s: %s", d.Seconds(), firstLine(j.sql))
				}
				if k == 0 {
					totalsRows.Store(tag.RowsAffected())
					close(totalsDone)
				}
				done.Add(1)
			}
			for _, reset := range []string{"RESET maintenance_work_mem", "RESET work_mem", "RESET max_parallel_maintenance_workers"} {
				if _, err := conn.Exec(gctx, reset); err != nil {
					return fmt.Errorf("erp: %s: %w", reset, err)
				}
			}
			return nil
		})
	}
	stop := l.ticker("index", func() string {
		return fmt.Sprintf("%d of %d statements done", done.Load(), len(jobs))
	}, nil)
	err := g.Wait()
	stop()
	return totalsRows.Load(), err
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// analyzePhase runs VACUUM (ANALYZE) on every table, l.par at a time, the
// largest first: fresh statistics for the planner and an all-visible
// visibility map (index-only scans, no insert-triggered autovacuum storm at
// the start of a run), as pgbench -i does for its tables.
func (l *loader) analyzePhase(ctx context.Context, perTable map[string]int64) error {
	tables := append(AllTables(), TableMeta)
	sort.SliceStable(tables, func(a, b int) bool { return perTable[tables[a]] > perTable[tables[b]] })
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for i := 0; i < min(l.par, len(tables)); i++ {
		g.Go(func() error {
			conn, err := l.pool.Acquire(gctx)
			if err != nil {
				return fmt.Errorf("erp: acquire a vacuum connection: %w", err)
			}
			defer conn.Release()
			for {
				k := int(next.Add(1)) - 1
				if k >= len(tables) {
					return nil
				}
				if _, err := conn.Exec(gctx, "VACUUM (ANALYZE) "+tables[k]); err != nil {
					return fmt.Errorf("erp: vacuum analyze %s: %w", tables[k], err)
				}
			}
		})
	}
	return g.Wait()
}

// tableRows counts the rows of tables (estimates from pg_class after
// VACUUM ANALYZE are exact enough; reltuples).
func tableRows(ctx context.Context, pool *pgxpool.Pool, tables []string) (map[string]int64, error) {
	out := map[string]int64{}
	rows, err := pool.Query(ctx, "SELECT c.relname, greatest(c.reltuples, 0)::bigint FROM pg_class c "+
		"WHERE c.oid = ANY (SELECT to_regclass(t) FROM unnest($1::text[]) t)", tables)
	if err != nil {
		return nil, fmt.Errorf("erp: table rows: %w", err)
	}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, fmt.Errorf("erp: table rows: %w", err)
		}
		out[name] = n
	}
	return out, rows.Err()
}

// Installed reads the marker table of the pool's database. ok is false
// when there is no marker (or it is not an ERP marker).
func Installed(ctx context.Context, pool *pgxpool.Pool) (Meta, bool, error) {
	kv, ok, err := workload.MarkerRows(ctx, pool)
	if err != nil || !ok {
		return Meta{}, false, err
	}
	var m Meta
	for _, e := range kv {
		v := e[1]
		switch e[0] {
		case "workload":
			m.Workload = v
		case "scale":
			m.Scale, err = strconv.ParseFloat(v, 64)
		case "seed":
			m.Seed, err = strconv.ParseUint(v, 10, 64)
		case "separator":
			m.Separator, err = strconv.ParseBool(v)
		case "created_at":
			m.CreatedAt, err = time.Parse(time.RFC3339, v)
		case "schema":
			m.Schema = v
		case "tables":
			if v != "" {
				m.Tables = strings.Split(v, ",")
			}
		case "state":
			m.Ready = v == "ready"
		}
		if err != nil {
			return Meta{}, false, fmt.Errorf("erp: %s: bad %s value %q: %w", TableMeta, e[0], v, err)
		}
	}
	if m.Workload != metaWorkload {
		return m, false, nil
	}
	return m, true, nil
}

// Drop removes what Init created, per the marker: the tables it lists that
// are ERP tables (a name outside schema.sql is never dropped) and the marker
// itself, in one transaction. Without a marker it does nothing.
func Drop(ctx context.Context, pool *pgxpool.Pool) error {
	m, ok, err := Installed(ctx, pool)
	if err != nil || !ok {
		return err
	}
	known := map[string]bool{}
	for _, t := range AllTables() {
		known[t] = true
	}
	qualify := func(t string) string {
		if m.Schema == "" {
			return pgx.Identifier{t}.Sanitize()
		}
		return pgx.Identifier{m.Schema, t}.Sanitize()
	}
	names := []string{}
	for _, t := range m.Tables {
		if known[t] {
			names = append(names, qualify(t))
		}
	}
	names = append(names, qualify(TableMeta))
	if _, err := pool.Exec(ctx, "DROP TABLE IF EXISTS "+strings.Join(names, ", ")); err != nil {
		return fmt.Errorf("erp: drop: %w", err)
	}
	return nil
}
