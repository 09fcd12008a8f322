package disk

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/erp"
	"github.com/erplab/erplab/internal/leftover"
	"github.com/erplab/erplab/internal/workload"
)

// Macro operation names: the ERP workload's key operations timed on each
// tablespace (CONTEXT.md section 2: a turnover report and re-posting of
// documents; section 3: the temp-table storm) plus the data load.
const (
	MacroInit     = "init"
	MacroTurnover = "sales_turnover_report"
	MacroRepost   = "repost_day"
	MacroStorm    = "temp_table_storm"
)

// MacroOps lists the timed operations in run order (MacroInit first).
func MacroOps() []string { return []string{MacroInit, MacroTurnover, MacroRepost, MacroStorm} }

var macroOpIndex = map[string]int{MacroTurnover: erp.OpSalesTurnoverReport, MacroRepost: erp.OpRepostDay, MacroStorm: erp.OpTempTableStorm}

// Server is the PostgreSQL server the macro part uses: the embedded one
// (pgcluster) or the test harness's.
type Server struct {
	// DSN returns the DSN of a database on the server.
	DSN func(dbname string) string
	// AdminDB is an existing database to connect to for CREATE/DROP
	// DATABASE and TABLESPACE ("postgres" when empty).
	AdminDB string
	// OSUser is the OS user the server runs as; the tablespace directory
	// is chowned to it (PostgreSQL requires the location to be owned by
	// the server's user: doc page "Tablespaces"). Empty: the current user.
	OSUser string
}

// MacroOptions bound the macro measurement.
type MacroOptions struct {
	// Scale is the ERP data scale (erp.Options.Scale; 0.01 loads in
	// seconds).
	Scale float64
	// Seed makes the data and the operations' parameters the same on
	// every path and in every repeat.
	Seed uint64
	// Runs is the number of timed executions of each operation per
	// repeat (1..100); the repeat's figure is their mean.
	Runs int
	// Repeats is how many times the data load and each operation are
	// measured on each path (1..MaxRepeats), interleaved across paths.
	Repeats int
	// Progress, when not nil, receives progress lines.
	Progress func(format string, args ...any)
}

// OpTime is one operation's timings on one path.
type OpTime struct {
	Op string `json:"op"`
	// Runs is the timed executions per repeat (1 for the data load).
	Runs int `json:"runs_per_repeat"`
	// Ms is the spread of the repeats' mean times, ms.
	Ms Spread `json:"ms"`
}

// Target is one candidate path of MacroAll and the server that puts a
// tablespace there.
type Target struct {
	Server Server
	Path   string
	// WALDir is where that server writes its WAL when it is on the path
	// (PutWALOn); "" means the server's own data directory.
	WALDir string
}

// MacroResult is the macro measurement of one path.
type MacroResult struct {
	Path       string `json:"path"`
	Tablespace string `json:"tablespace"`
	// TablespaceBytes is pg_tablespace_size of the tablespace after the
	// last data load, bytes.
	TablespaceBytes int64 `json:"tablespace_bytes"`
	// WALDir is the directory holding the server's WAL when it is on the
	// path; empty when the WAL stayed in the server's data directory.
	WALDir string   `json:"wal_dir,omitempty"`
	Ops    []OpTime `json:"ops"`
}

// Op returns the timing of one operation, false when it did not run.
func (m MacroResult) Op(name string) (OpTime, bool) {
	for _, o := range m.Ops {
		if o.Op == name {
			return o, true
		}
	}
	return OpTime{}, false
}

// Validate checks the options; errors are one line.
func (o MacroOptions) Validate() error {
	if o.Scale <= 0 || o.Scale > float64(erp.MaxScale) {
		return fmt.Errorf("disk: macro scale %g: want > 0 and at most %g", o.Scale, float64(erp.MaxScale))
	}
	if o.Runs < 1 || o.Runs > 100 {
		return fmt.Errorf("disk: macro runs %d: want 1..100", o.Runs)
	}
	if o.Repeats < 1 || o.Repeats > MaxRepeats {
		return fmt.Errorf("disk: macro repeats %d: want 1..%d", o.Repeats, MaxRepeats)
	}
	return nil
}

// macroPath is one target's objects during MacroAll.
type macroPath struct {
	t        Target
	name, id string // tablespace and database name, and it quoted
	dir      string // the tablespace directory
	rec      *leftover.Record
	entry    *leftover.Entry // dir's crash-safe record
	admin    *pgx.Conn
	pool     *pgxpool.Pool
	conn     *pgxpool.Conn
	ts       bool // the tablespace exists
	res      MacroResult
	times    map[string][]float64 // op -> repeats, ms
}

// MacroAll builds, on each target's path, a tablespace (directory
// erplab-ts-* under the path, owned by the server's OS user) and a
// database whose default tablespace it is (CREATE DATABASE ...
// TABLESPACE), and measures there, opts.Repeats times each, the ERP data
// load (erp.Init into a database created afresh for each repeat; the last
// load stays) and then the sales turnover report, the re-posting of a
// day's documents and the temp-table storm through erp.Workload.Execute
// on one connection per path with temp_tablespaces set to the tablespace
// (one untimed execution, then opts.Runs timed ones per repeat). Repeats
// are interleaved across the paths as MeasureAll does (round r in the
// order Order(n, r) of the paths sorted by name, per operation). The
// virtual user's random source is seeded from opts.Seed alone for every
// repeat, so every path and repeat runs the same parameters. Paths must
// be distinct. Databases, tablespaces and their directories are dropped
// before MacroAll returns, also on error or cancellation (with a fresh
// 1-minute context). Results are in the order of targets.
func MacroAll(ctx context.Context, targets []Target, opts MacroOptions) (res []MacroResult, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	paths := make([]string, len(targets))
	for i, t := range targets {
		paths[i] = t.Path
	}
	canon, err := canonical(paths)
	if err != nil {
		return nil, err
	}
	say := func(format string, args ...any) {
		if opts.Progress != nil {
			opts.Progress(format, args...)
		}
	}
	mps := make([]*macroPath, len(targets))
	defer func() {
		for _, mp := range mps {
			if mp != nil {
				if cerr := mp.close(); cerr != nil && err == nil {
					err = cerr
				}
			}
		}
	}()
	for i, t := range targets {
		mps[i] = &macroPath{t: t, times: map[string][]float64{}}
		if err := mps[i].setup(ctx, i); err != nil {
			return nil, err
		}
	}
	// each runs f once per path per round, interleaved.
	each := func(f func(mp *macroPath, r int) error) error {
		for r := range opts.Repeats {
			for _, ci := range Order(len(canon), r) {
				if err := f(mps[canon[ci]], r); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := each(func(mp *macroPath, r int) error {
		say("round %d/%d %s: loading ERP data (scale %g) into tablespace %s", r+1, opts.Repeats, mp.t.Path, opts.Scale, mp.name)
		return mp.load(ctx, opts)
	}); err != nil {
		return nil, err
	}
	for _, mp := range mps {
		if err := mp.connect(ctx); err != nil {
			return nil, err
		}
	}
	// The turnover report covers the whole history, as in the field's
	// storage comparison (CONTEXT.md section 2).
	w := erp.NewWholeHistory()
	for _, op := range MacroOps()[1:] {
		if err := each(func(mp *macroPath, r int) error {
			vu := &workload.VU{ID: 1, Role: "accountant", Rand: rand.New(rand.NewPCG(opts.Seed, 42))}
			conn := mp.conn.Conn()
			// One untimed execution logs the VU in and warms the catalog
			// caches, as a user's session has them.
			if err := w.Execute(ctx, conn, vu, macroOpIndex[op]); err != nil {
				return fmt.Errorf("disk: macro: %s: %s: %w", mp.t.Path, op, err)
			}
			var sum time.Duration
			for range opts.Runs {
				t := time.Now()
				if err := w.Execute(ctx, conn, vu, macroOpIndex[op]); err != nil {
					return fmt.Errorf("disk: macro: %s: %s: %w", mp.t.Path, op, err)
				}
				sum += time.Since(t)
			}
			ms := durMs(sum / time.Duration(opts.Runs))
			mp.times[op] = append(mp.times[op], ms)
			say("round %d/%d %s: %s mean %.1f ms", r+1, opts.Repeats, mp.t.Path, op, ms)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	for _, mp := range mps {
		for _, op := range MacroOps() {
			runs := opts.Runs
			if op == MacroInit {
				runs = 1
			}
			mp.res.Ops = append(mp.res.Ops, OpTime{Op: op, Runs: runs, Ms: NewSpread(mp.times[op])})
		}
		res = append(res, mp.res)
	}
	return res, nil
}

// durMs is d in ms rounded to 0.01 ms.
func durMs(d time.Duration) float64 { return math.Round(float64(d.Microseconds())/10) / 100 }

// setup makes the tablespace of target i.
func (mp *macroPath) setup(ctx context.Context, i int) error {
	mp.name = fmt.Sprintf("erplab_disk_%d_%d", os.Getpid(), i)
	mp.id = pgx.Identifier{mp.name}.Sanitize()
	mp.res = MacroResult{Path: mp.t.Path, Tablespace: mp.name, WALDir: mp.t.WALDir}
	admin := mp.t.Server.AdminDB
	if admin == "" {
		admin = "postgres"
	}
	rec, err := leftover.Open()
	if err != nil {
		return fmt.Errorf("disk: macro: %w", err)
	}
	dir, e, err := rec.MkdirTemp(mp.t.Path, "erplab-ts-")
	if err != nil {
		return fmt.Errorf("disk: macro: %w", err)
	}
	mp.dir, mp.rec, mp.entry = dir, rec, e
	if err := chownTo(dir, mp.t.Server.OSUser); err != nil {
		return err
	}
	if mp.admin, err = pgx.Connect(ctx, mp.t.Server.DSN(admin)); err != nil {
		return fmt.Errorf("disk: macro: connect: %w", err)
	}
	loc, err := mp.admin.PgConn().EscapeString(dir)
	if err != nil {
		return fmt.Errorf("disk: macro: %w", err)
	}
	if _, err := mp.admin.Exec(ctx, "CREATE TABLESPACE "+mp.id+" LOCATION '"+loc+"'"); err != nil {
		return fmt.Errorf("disk: macro: create tablespace on %s: %w", dir, err)
	}
	mp.ts = true
	return nil
}

// load (re)creates the database in the tablespace and times erp.Init.
func (mp *macroPath) load(ctx context.Context, opts MacroOptions) error {
	if mp.pool != nil {
		mp.pool.Close()
		mp.pool = nil
	}
	if _, err := mp.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+mp.id+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("disk: macro: drop database %s: %w", mp.name, err)
	}
	if _, err := mp.admin.Exec(ctx, "CREATE DATABASE "+mp.id+" TABLESPACE "+mp.id); err != nil {
		return fmt.Errorf("disk: macro: create database: %w", err)
	}
	pool, err := pgxpool.New(ctx, mp.t.Server.DSN(mp.name))
	if err != nil {
		return fmt.Errorf("disk: macro: pool: %w", err)
	}
	mp.pool = pool
	t0 := time.Now()
	if _, err := erp.Init(ctx, pool, erp.Options{Scale: opts.Scale, Seed: opts.Seed, Parallel: 2}); err != nil {
		return fmt.Errorf("disk: macro: %s: %w", mp.t.Path, err)
	}
	mp.times[MacroInit] = append(mp.times[MacroInit], durMs(time.Since(t0)))
	return nil
}

// connect reads the tablespace size and opens the operations' session.
func (mp *macroPath) connect(ctx context.Context) error {
	if err := mp.pool.QueryRow(ctx, "SELECT pg_tablespace_size($1)", mp.name).Scan(&mp.res.TablespaceBytes); err != nil {
		return fmt.Errorf("disk: macro: tablespace size: %w", err)
	}
	pc, err := mp.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("disk: macro: %w", err)
	}
	mp.conn = pc
	if _, err := pc.Exec(ctx, "SET temp_tablespaces = "+quoteLiteral(mp.name)); err != nil {
		return fmt.Errorf("disk: macro: set temp_tablespaces: %w", err)
	}
	return nil
}

// close drops what setup and load made, with a fresh 1-minute context.
func (mp *macroPath) close() error {
	var errs []error
	if mp.conn != nil {
		mp.conn.Release()
	}
	if mp.pool != nil {
		mp.pool.Close()
	}
	if mp.admin != nil {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := mp.admin.Exec(cctx, "DROP DATABASE IF EXISTS "+mp.id+" WITH (FORCE)"); err != nil {
			errs = append(errs, fmt.Errorf("disk: macro: drop database %s: %w", mp.name, err))
		}
		if mp.ts {
			if _, err := mp.admin.Exec(cctx, "DROP TABLESPACE IF EXISTS "+mp.id); err != nil {
				errs = append(errs, fmt.Errorf("disk: macro: drop tablespace %s: %w", mp.name, err))
			}
		}
		_ = mp.admin.Close(cctx)
	}
	if mp.dir != "" {
		if err := mp.rec.RemoveDir(mp.entry); err != nil {
			errs = append(errs, fmt.Errorf("disk: macro: remove %s: %w", mp.dir, err))
		}
	}
	return errors.Join(errs...)
}

// quoteLiteral quotes a plain identifier-like value as an SQL string
// literal (names made by Macro hold only [a-z0-9_]).
func quoteLiteral(s string) string { return "'" + s + "'" }

// chownTo gives dir to OS user name (no-op for ""), checking that every
// parent lets that user in.
func chownTo(dir, name string) error {
	if name == "" {
		return nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("disk: macro: OS user %s: %w", name, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("disk: macro: OS user %s: %w", name, err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return fmt.Errorf("disk: macro: chown %s to %s: %w", dir, name, err)
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("disk: macro: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("disk: macro: OS user %s cannot enter %s (mode %v), a parent of the tablespace; pick a path it can reach", name, d, fi.Mode().Perm())
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}

// RankMacro ranks the paths that ran op by the repeats of its time
// (less is better) under rule (Rank).
func RankMacro(res []MacroResult, op string, rule Rule) (Ranking, error) {
	var ss []Sample
	for _, r := range res {
		if o, ok := r.Op(op); ok {
			ss = append(ss, Sample{Path: r.Path, Values: o.Ms.Values})
		}
	}
	return Rank(op, false, ss, rule)
}

// NeedBytes is the free space the macro part needs on a path: about
// 1 GB per unit of scale for the ERP data (erp package doc) with half
// again for temp files and re-posting, plus 64 MiB; with the WAL on the
// path (walOnPath) as much again for the WAL, at most 1 GiB (max_wal_size
// default), plus one 16 MiB segment.
func (o MacroOptions) NeedBytes(walOnPath bool) int64 {
	n := int64(o.Scale*1.5*(1<<30)) + 64<<20
	if walOnPath {
		n += min(int64(o.Scale*1.5*(1<<30)), 1<<30) + walSegmentBytes
	}
	return n
}
