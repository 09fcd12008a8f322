package tables

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/erplab/erplab/internal/workload"
)

// progressEvery is the interval of the row-count progress lines while
// generating data (pgbench -q: LOG_STEP_SECONDS).
const progressEvery = 5 * time.Second

// StepTime is the wall time of one initialisation step.
type StepTime struct {
	Step     byte          // 'd', 't', 'g', 'G', 'v', 'p' or 'f'
	Name     string        // pgbench's name, e.g. "client-side generate"
	Duration time.Duration // wall time
}

// Stats reports what Init did.
type Stats struct {
	// Steps are the steps run, in order.
	Steps []StepTime
	// Duration is the sum of the steps (pgbench's "done in").
	Duration time.Duration
	// Rows is the number of rows generated (branches, tellers, accounts)
	// by step g or G; 0 when neither ran.
	Rows int64
	// Connections is the number of connections used at once.
	Connections int
}

// Summary is pgbench's closing line, e.g. "done in 1.52 s (drop tables
// 0.00 s, create tables 0.01 s, client-side generate 0.90 s, vacuum 0.12
// s, primary keys 0.49 s)."
func (s Stats) Summary() string {
	parts := make([]string, len(s.Steps))
	for i, st := range s.Steps {
		parts[i] = fmt.Sprintf("%s %.2f s", st.Name, st.Duration.Seconds())
	}
	return fmt.Sprintf("done in %.2f s (%s).", s.Duration.Seconds(), strings.Join(parts, ", "))
}

// Init runs pgbench -i's steps (opts.Steps, default "dtgvp") on the
// pool's database with the same result as PostgreSQL 15's pgbench (see the
// package doc): step d drops the four tables whatever they hold, as
// pgbench does. It returns the time of every step.
//
// Data is generated client-side with binary COPY (step g) or server-side
// with INSERT ... SELECT generate_series (step G). pgbench_accounts is
// loaded on up to opts.Parallel connections at once:
//
//   - partitions created by this Init (step t before g) are loaded one per
//     transaction, TRUNCATE then COPY FREEZE straight into the partition,
//     so that rows are written frozen and all-visible as pgbench's
//     unpartitioned COPY FREEZE writes them, and VACUUM has nothing to do
//     but ANALYZE; hash partitions (up to 16) are routed by the client
//     with PostgreSQL's own partition hash (checked against the server's
//     satisfies_hash_partition first);
//   - an ordinary table gets pgbench's single COPY FREEZE below 4
//     connections and aid ranges in parallel from 4 (see
//     plainParallelMin);
//   - anything else (steps g without t, more hash partitions, G) goes in
//     aid ranges through pgbench_accounts, which routes the rows.
//
// VACUUM and the primary keys of branches, tellers and each partition also
// run in parallel; foreign keys (step f) are added one by one, as in
// pgbench.
//
// Before doing anything Init checks the database: when it holds tables
// that are neither pgbench's nor erplab's (ForeignTables) it returns an
// error wrapping workload.ErrForeignDatabase, unless opts.Force. Bad
// options give a one-line error (Options.Validate). If generating data
// fails, the four tables are truncated (best effort) so that no half data
// set passes for a full one; other failures leave the tables as they are,
// as pgbench does.
func Init(ctx context.Context, pool *pgxpool.Pool, opts Options) (Stats, error) {
	o, err := opts.normalized()
	if err != nil {
		return Stats{}, err
	}
	if !o.Force {
		foreign, err := ForeignTables(ctx, pool)
		if err != nil {
			return Stats{}, err
		}
		if len(foreign) > 0 {
			return Stats{}, workload.ForeignError("pgbench init", foreign)
		}
	}
	var version int
	if err := pool.QueryRow(ctx, "select current_setting('server_version_num')::int").Scan(&version); err != nil {
		return Stats{}, fmt.Errorf("pgbench init: server version: %w", err)
	}
	par := o.Parallel
	if par == 0 {
		par = runtime.GOMAXPROCS(0)
	}
	if mc := int(pool.Config().MaxConns); mc > 0 && par > mc {
		par = mc
	}
	r := &runner{pool: pool, o: o, par: par, version: version}
	st := Stats{Connections: par}
	for i := 0; i < len(o.Steps); i++ {
		c := o.Steps[i]
		if c == ' ' {
			continue
		}
		start := time.Now()
		var err error
		switch c {
		case 'd':
			r.say("dropping old tables...")
			err = r.exec(ctx, dropSQL)
		case 't':
			err = r.createTables(ctx)
			r.created = err == nil
		case 'g':
			err = r.generate(ctx, false)
		case 'G':
			err = r.generate(ctx, true)
		case 'v':
			err = r.vacuum(ctx)
		case 'p':
			err = r.primaryKeys(ctx)
		case 'f':
			r.say("creating foreign keys...")
			for _, s := range foreignKeySQL {
				if err = r.exec(ctx, s); err != nil {
					break
				}
			}
		}
		if err != nil {
			return st, err
		}
		d := time.Since(start)
		st.Steps = append(st.Steps, StepTime{Step: c, Name: stepName(c), Duration: d})
		st.Duration += d
	}
	st.Rows = r.rows
	r.say("%s", st.Summary())
	return st, nil
}

type runner struct {
	pool    *pgxpool.Pool
	o       Options
	par     int
	version int   // server_version_num
	rows    int64 // rows generated
	created bool  // step t ran: the tables have o's layout
}

func (r *runner) say(format string, args ...any) {
	if r.o.Progress != nil {
		r.o.Progress(format, args...)
	}
}

func (r *runner) exec(ctx context.Context, sql string) error {
	if _, err := r.pool.Exec(ctx, sql); err != nil {
		return fmt.Errorf("pgbench init: %s: %w", firstLine(sql), err)
	}
	return nil
}

// parallel runs the statements on up to r.par connections at once and
// returns the first error.
func (r *runner) parallel(ctx context.Context, stmts []string) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.par)
	for _, s := range stmts {
		g.Go(func() error { return r.exec(gctx, s) })
	}
	return g.Wait()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

func (r *runner) createTables(ctx context.Context) error {
	r.say("creating tables...")
	stmts := createTablesSQL(r.o, r.version)
	for i, s := range stmts {
		if i == len(schemaDDL) {
			r.say("creating %d partitions...", r.o.Partitions)
		}
		if err := r.exec(ctx, s); err != nil {
			return err
		}
	}
	// Mark the tables as erplab's: Init and Drop tell them from tables
	// made by pgbench -i, which they leave alone without Force.
	for _, d := range schemaDDL {
		if err := r.exec(ctx, "comment on table "+d.table+" is '"+Marker+"'"); err != nil {
			return err
		}
	}
	return nil
}

// accountJob loads the aids lo..hi (inclusive) of pgbench_accounts into
// table (the table itself or one of its partitions). With freeze the load
// is one transaction: TRUNCATE table, then COPY ... FREEZE, which writes
// the rows frozen and all-visible (pgbench does the same for its
// unpartitioned table: copy.c requires the table to be created or
// truncated in the same transaction).
//
// With modulus > 0 the job loads the hash partition table of that modulus
// and remainder: the aids lo..hi that hash to it.
type accountJob struct {
	table              string
	lo, hi             int64
	freeze             bool
	modulus, remainder int
}

// hashRouteMaxPartitions bounds the hash partitions Init routes itself:
// each partition's load scans all the aids (hashRemainder costs a few ns
// each), so the client's work grows with partitions x accounts. Beyond it
// rows go through the parent table, which routes them (slower per row, and
// not frozen).
const hashRouteMaxPartitions = 16

// plainParallelMin is the number of connections from which an ordinary
// (unpartitioned) pgbench_accounts is loaded in parallel aid ranges rather
// than in pgbench's single COPY FREEZE. Rows loaded without FREEZE make
// VACUUM set hint bits and visibility-map bits on every page: at scale 50
// on two CPUs that cost (+0.5 s) ate what two COPY streams saved, so
// below this the single frozen stream is as fast and leaves the same
// pages as pgbench.
const plainParallelMin = 4

// accountJobs splits pgbench_accounts into loads. When this Init created
// range partitions (step t ran before), one frozen load per partition with
// data (freeze: see accountJob); hash partitions likewise when hashRouted.
// Otherwise aid ranges of the table, which routes rows to whatever
// partitions it has: a single frozen load for an ordinary table on fewer
// than plainParallelMin connections (pgbench's own way), else a few ranges
// per connection.
func (r *runner) accountJobs(freeze, partitioned, hashRouted bool) []accountJob {
	o := r.o
	n := o.accounts()
	if hashRouted {
		jobs := make([]accountJob, o.Partitions)
		for p := range jobs {
			jobs[p] = accountJob{table: partitionName(p + 1), lo: 1, hi: n, freeze: freeze, modulus: o.Partitions, remainder: p}
		}
		return jobs
	}
	if r.created && o.PartitionMethod == PartitionRange {
		var jobs []accountJob
		for p := 1; p <= o.Partitions; p++ {
			lo, hi := rangeAids(o, p)
			if lo <= hi {
				jobs = append(jobs, accountJob{table: partitionName(p), lo: lo, hi: hi, freeze: freeze})
			}
		}
		return jobs
	}
	if r.par < plainParallelMin && !partitioned {
		return []accountJob{{table: Accounts, lo: 1, hi: n, freeze: freeze}}
	}
	chunks := int64(r.par) * 2 // some slack for connections that run slower
	size := max((n+chunks-1)/chunks, 10_000)
	var jobs []accountJob
	for lo := int64(1); lo <= n; lo += size {
		jobs = append(jobs, accountJob{table: Accounts, lo: lo, hi: min(lo+size-1, n)})
	}
	return jobs
}

// hashRoutingAgrees asks the server whether hashRemainder puts a sample of
// aids in the partitions it would (satisfies_hash_partition); a server
// with another hash would make the per-partition COPY fail on the
// partition constraint, so Init then lets the parent route instead.
func (r *runner) hashRoutingAgrees(ctx context.Context) (bool, error) {
	n := r.o.accounts()
	var aids []int64
	var rems []int32
	for _, a := range []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 99_999, 100_000, 100_001, n / 3, n / 2, n - 1, n} {
		if a >= 1 && a <= n {
			aids = append(aids, a)
			rems = append(rems, int32(hashRemainder(a, r.o.bigAid(), r.o.Partitions)))
		}
	}
	cast := "int"
	if r.o.bigAid() {
		cast = "bigint"
	}
	var wrong int
	err := r.pool.QueryRow(ctx, `select count(*) from unnest($1::bigint[], $2::int[]) as s(aid, r)
where not pg_catalog.satisfies_hash_partition('pgbench_accounts'::regclass, $3::int, r, aid::`+cast+`)`,
		aids, rems, r.o.Partitions).Scan(&wrong)
	if err != nil {
		return false, fmt.Errorf("pgbench init: check hash partitioning: %w", err)
	}
	return wrong == 0, nil
}

// accountParts returns the partitions of pgbench_accounts (as regclass
// text, quoted and qualified as needed) in creation order, and whether it
// is a partitioned table at all.
func (r *runner) accountParts(ctx context.Context) (parts []string, partitioned bool, err error) {
	err = r.pool.QueryRow(ctx, `select coalesce(c.relkind = 'p', false),
  coalesce((select array_agg(i.inhrelid::regclass::text order by i.inhrelid)
            from pg_catalog.pg_inherits i where i.inhparent = c.oid), '{}')
from (select pg_catalog.to_regclass('pgbench_accounts') as oid) as r
left join pg_catalog.pg_class c on c.oid = r.oid`).Scan(&partitioned, &parts)
	if err != nil {
		return nil, false, fmt.Errorf("pgbench init: read the partitions of pgbench_accounts: %w", err)
	}
	return parts, partitioned, nil
}

// accountsReferenced tells whether a foreign key references
// pgbench_accounts (steps f before g): its partitions cannot then be
// truncated one by one.
func (r *runner) accountsReferenced(ctx context.Context) (bool, error) {
	var ref bool
	err := r.pool.QueryRow(ctx, `select exists (select 1 from pg_catalog.pg_constraint
where contype = 'f' and confrelid = pg_catalog.to_regclass('pgbench_accounts'))`).Scan(&ref)
	if err != nil {
		return false, fmt.Errorf("pgbench init: look for foreign keys: %w", err)
	}
	return ref, nil
}

// generate is step g (client-side, binary COPY) or G (server-side,
// INSERT ... SELECT generate_series). Branches and tellers go first, in the
// transaction that truncates the four tables (pgbench fills branches,
// tellers, accounts in that order in case foreign keys exist); accounts
// follow in parallel jobs.
func (r *runner) generate(ctx context.Context, serverSide bool) (err error) {
	o := r.o
	side := "client-side"
	if serverSide {
		side = "server-side"
	}
	conns := "connections"
	if r.par == 1 {
		conns = "connection"
	}
	r.say("generating data (%s, %d %s)...", side, r.par, conns)
	defer func() {
		if err == nil {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if _, terr := r.pool.Exec(cctx, truncateSQL); terr != nil {
			err = fmt.Errorf("%w (and emptying the tables afterwards failed: %v)", err, terr)
		}
	}()
	referenced, err := r.accountsReferenced(ctx)
	if err != nil {
		return err
	}
	_, partitioned, err := r.accountParts(ctx)
	if err != nil {
		return err
	}
	freeze := !serverSide && !referenced
	branches, tellers := int64(o.Scale)*BranchesPerScale, int64(o.Scale)*TellersPerScale

	var done atomic.Int64
	err = pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, truncateSQL); err != nil {
			return fmt.Errorf("pgbench init: %s: %w", truncateSQL, err)
		}
		if serverSide {
			for _, s := range []string{
				fmt.Sprintf("insert into pgbench_branches(bid,bbalance) select bid, 0 from generate_series(1, %d) as bid", branches),
				fmt.Sprintf("insert into pgbench_tellers(tid,bid,tbalance) select tid, (tid - 1) / %d + 1, 0 from generate_series(1, %d) as tid", TellersPerScale, tellers),
			} {
				if _, err := tx.Exec(ctx, s); err != nil {
					return fmt.Errorf("pgbench init: %s: %w", s, err)
				}
			}
			return nil
		}
		for _, t := range []struct {
			table string
			kind  rowKind
			n     int64
		}{{Branches, branchRows, branches}, {Tellers, tellerRows, tellers}} {
			sql := copySQL(t.table, t.kind, true)
			if _, err := tx.Conn().PgConn().CopyFrom(ctx, newRowReader(t.kind, 1, t.n, false, nil), sql); err != nil {
				return fmt.Errorf("pgbench init: %s: %w", sql, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.rows = branches + tellers

	hashRouted := false
	if r.created && o.PartitionMethod == PartitionHash && o.Partitions <= hashRouteMaxPartitions && !serverSide {
		if hashRouted, err = r.hashRoutingAgrees(ctx); err != nil {
			return err
		}
	}
	jobs := r.accountJobs(freeze, partitioned, hashRouted)
	total := o.accounts()
	start := time.Now()
	stop := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				r.sayRows(done.Load(), total, time.Since(start))
			}
		}
	}()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.par)
	for _, j := range jobs {
		g.Go(func() error {
			if serverSide {
				s := fmt.Sprintf("insert into %s(aid,bid,abalance,filler) select aid, (aid - 1) / %d + 1, 0, '' from generate_series(%d, %d) as aid",
					j.table, AccountsPerScale, j.lo, j.hi)
				if err := r.exec(gctx, s); err != nil {
					return err
				}
				done.Add(j.hi - j.lo + 1)
				return nil
			}
			return r.copyAccounts(gctx, j, &done)
		})
	}
	err = g.Wait()
	close(stop)
	<-ticked
	if err != nil {
		return err
	}
	r.sayRows(done.Load(), total, time.Since(start))
	r.rows += total
	return nil
}

func (r *runner) sayRows(done, total int64, elapsed time.Duration) {
	remaining := 0.0
	if done > 0 {
		remaining = float64(total-done) * elapsed.Seconds() / float64(done)
	}
	r.say("%d of %d tuples (%d%%) of %s done (elapsed %.2f s, remaining %.2f s)",
		done, total, done*100/total, Accounts, elapsed.Seconds(), remaining)
}

// copyAccounts runs one accountJob on its own connection.
func (r *runner) copyAccounts(ctx context.Context, j accountJob, done *atomic.Int64) error {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pgbench init: connect: %w", err)
	}
	defer conn.Release()
	sql := copySQL(j.table, accountRows, j.freeze)
	rows := newRowReader(accountRows, j.lo, j.hi, r.o.bigAid(), done)
	rows.modulus, rows.remainder = j.modulus, j.remainder
	if !j.freeze {
		if _, err := conn.Conn().PgConn().CopyFrom(ctx, rows, sql); err != nil {
			return fmt.Errorf("pgbench init: %s: %w", sql, err)
		}
		return nil
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "truncate table "+j.table); err != nil {
			return fmt.Errorf("pgbench init: truncate table %s: %w", j.table, err)
		}
		if _, err := tx.Conn().PgConn().CopyFrom(ctx, rows, sql); err != nil {
			return fmt.Errorf("pgbench init: %s: %w", sql, err)
		}
		return nil
	})
}

// vacuum is step v: pgbench's VACUUM ANALYZE of the four tables
// (initVacuum), run on several connections. A partitioned
// pgbench_accounts gets VACUUM per partition in parallel, then ANALYZE of
// the parent, which analyses each partition and the whole (the same work
// as VACUUM ANALYZE of the parent).
func (r *runner) vacuum(ctx context.Context) error {
	r.say("vacuuming...")
	parts, partitioned, err := r.accountParts(ctx)
	if err != nil {
		return err
	}
	stmts := []string{"vacuum analyze " + Branches, "vacuum analyze " + Tellers}
	if !partitioned {
		stmts = append(stmts, "vacuum analyze "+Accounts)
	}
	for _, t := range parts {
		stmts = append(stmts, "vacuum "+t)
	}
	stmts = append(stmts, "vacuum analyze "+History)
	// One after the other, as pgbench does: a concurrent ANALYZE's
	// snapshot can keep a VACUUM from marking pages all-visible, and the
	// visibility map must come out as pgbench -i leaves it.
	for _, st := range stmts {
		if err := r.exec(ctx, st); err != nil {
			return err
		}
	}
	if partitioned {
		return r.exec(ctx, "analyze "+Accounts)
	}
	return nil
}

// primaryKeys is step p (initCreatePKeys) on several connections: a
// partitioned pgbench_accounts gets the primary key of each partition
// first, in parallel, then the parent's, which adopts them (DefineIndex
// attaches a matching index with its constraint) instead of building
// them one after the other. Names are those pgbench's statements give:
// pgbench_accounts_pkey and pgbench_accounts_<n>_pkey.
func (r *runner) primaryKeys(ctx context.Context) error {
	r.say("creating primary keys...")
	parts, partitioned, err := r.accountParts(ctx)
	if err != nil {
		return err
	}
	ts := r.o.IndexTablespace
	stmts := []string{primaryKeySQL(Branches, ts), primaryKeySQL(Tellers, ts)}
	if !partitioned {
		stmts = append(stmts, primaryKeySQL(Accounts, ts))
	}
	for _, t := range parts {
		stmts = append(stmts, primaryKeySQL(t, ts))
	}
	if err := r.parallel(ctx, stmts); err != nil {
		return err
	}
	if partitioned {
		return r.exec(ctx, primaryKeySQL(Accounts, ts))
	}
	return nil
}
