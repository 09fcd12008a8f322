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
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/workload"
	"github.com/erplab/erplab/internal/workload/erp"
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
	// every path.
	Seed uint64
	// Runs is the number of timed executions of each operation (1..100).
	Runs int
	// Progress, when not nil, receives progress lines.
	Progress func(format string, args ...any)
}

// OpTime is one operation's timings on one path, ms.
type OpTime struct {
	Op     string  `json:"op"`
	Runs   int     `json:"runs"`
	MeanMs float64 `json:"mean_ms"`
	MinMs  float64 `json:"min_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// MacroResult is the macro measurement of one path.
type MacroResult struct {
	Path       string `json:"path"`
	Tablespace string `json:"tablespace"`
	// TablespaceBytes is pg_tablespace_size of the tablespace after the
	// data load, bytes.
	TablespaceBytes int64    `json:"tablespace_bytes"`
	Ops             []OpTime `json:"ops"`
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
	return nil
}

// Macro builds, on path, a tablespace (directory erplab-ts-* under path,
// owned by srv.OSUser) and a database whose default tablespace it is
// (CREATE DATABASE ... TABLESPACE), loads the ERP data there with
// erp.Init, and times opts.Runs executions of the sales turnover report,
// the re-posting of a day's documents and the temp-table storm through
// erp.Workload.Execute on one connection with temp_tablespaces set to the
// tablespace. The virtual user's random source is seeded from opts.Seed
// alone, so every path runs the same parameters. The database, the
// tablespace and its directory are dropped before Macro returns, also on
// error or cancellation (with a fresh 1-minute context). tag makes the
// object names unique (e.g. the path's index).
func Macro(ctx context.Context, srv Server, path string, tag int, opts MacroOptions) (res MacroResult, err error) {
	if err := opts.Validate(); err != nil {
		return MacroResult{}, err
	}
	say := func(format string, args ...any) {
		if opts.Progress != nil {
			opts.Progress(format, args...)
		}
	}
	res.Path = path
	name := fmt.Sprintf("erplab_disk_%d_%d", os.Getpid(), tag)
	res.Tablespace = name
	admin := srv.AdminDB
	if admin == "" {
		admin = "postgres"
	}
	dir, err := os.MkdirTemp(path, "erplab-ts-")
	if err != nil {
		return res, fmt.Errorf("disk: macro: %w", err)
	}
	defer func() {
		if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
			err = fmt.Errorf("disk: macro: remove %s: %w", dir, rerr)
		}
	}()
	if err := chownTo(dir, srv.OSUser); err != nil {
		return res, err
	}
	aconn, err := pgx.Connect(ctx, srv.DSN(admin))
	if err != nil {
		return res, fmt.Errorf("disk: macro: connect: %w", err)
	}
	defer aconn.Close(context.Background())
	loc, err := aconn.PgConn().EscapeString(dir)
	if err != nil {
		return res, fmt.Errorf("disk: macro: %w", err)
	}
	id := pgx.Identifier{name}.Sanitize()
	if _, err := aconn.Exec(ctx, "CREATE TABLESPACE "+id+" LOCATION '"+loc+"'"); err != nil {
		return res, fmt.Errorf("disk: macro: create tablespace on %s: %w", dir, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, derr := aconn.Exec(cctx, "DROP TABLESPACE IF EXISTS "+id); derr != nil && err == nil {
			err = fmt.Errorf("disk: macro: drop tablespace %s: %w", name, derr)
		}
	}()
	if _, err := aconn.Exec(ctx, "CREATE DATABASE "+id+" TABLESPACE "+id); err != nil {
		return res, fmt.Errorf("disk: macro: create database: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, derr := aconn.Exec(cctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)"); derr != nil && err == nil {
			err = fmt.Errorf("disk: macro: drop database %s: %w", name, derr)
		}
	}()
	pool, err := pgxpool.New(ctx, srv.DSN(name))
	if err != nil {
		return res, fmt.Errorf("disk: macro: pool: %w", err)
	}
	defer pool.Close()
	say("%s: loading ERP data (scale %g) into tablespace %s", path, opts.Scale, name)
	t0 := time.Now()
	if _, err := erp.Init(ctx, pool, erp.Options{Scale: opts.Scale, Seed: opts.Seed, Parallel: 2}); err != nil {
		return res, fmt.Errorf("disk: macro: %s: %w", path, err)
	}
	res.Ops = append(res.Ops, opTime(MacroInit, []time.Duration{time.Since(t0)}))
	if err := pool.QueryRow(ctx, "SELECT pg_tablespace_size($1)", name).Scan(&res.TablespaceBytes); err != nil {
		return res, fmt.Errorf("disk: macro: tablespace size: %w", err)
	}
	pc, err := pool.Acquire(ctx)
	if err != nil {
		return res, fmt.Errorf("disk: macro: %w", err)
	}
	defer pc.Release()
	conn := pc.Conn()
	if _, err := conn.Exec(ctx, "SET temp_tablespaces = "+quoteLiteral(name)); err != nil {
		return res, fmt.Errorf("disk: macro: set temp_tablespaces: %w", err)
	}
	// The turnover report covers the whole history, as in the field's
	// storage comparison (CONTEXT.md section 2).
	w := erp.NewWholeHistory()
	for _, op := range MacroOps()[1:] {
		vu := &workload.VU{ID: 1, Role: "accountant", Rand: rand.New(rand.NewPCG(opts.Seed, 42))}
		// One untimed execution logs the VU in and warms the catalog
		// caches, as a user's session has them.
		if err := w.Execute(ctx, conn, vu, macroOpIndex[op]); err != nil {
			return res, fmt.Errorf("disk: macro: %s: %w", path, err)
		}
		var ds []time.Duration
		for range opts.Runs {
			t := time.Now()
			if err := w.Execute(ctx, conn, vu, macroOpIndex[op]); err != nil {
				return res, fmt.Errorf("disk: macro: %s: %w", path, err)
			}
			ds = append(ds, time.Since(t))
		}
		ot := opTime(op, ds)
		say("%s: %s mean %.1f ms", path, op, ot.MeanMs)
		res.Ops = append(res.Ops, ot)
	}
	return res, nil
}

// quoteLiteral quotes a plain identifier-like value as an SQL string
// literal (names made by Macro hold only [a-z0-9_]).
func quoteLiteral(s string) string { return "'" + s + "'" }

func opTime(op string, ds []time.Duration) OpTime {
	ms := func(d time.Duration) float64 { return math.Round(float64(d.Microseconds())/10) / 100 }
	o := OpTime{Op: op, Runs: len(ds), MinMs: math.Inf(1)}
	var sum time.Duration
	for _, d := range ds {
		sum += d
		o.MinMs = math.Min(o.MinMs, ms(d))
		o.MaxMs = math.Max(o.MaxMs, ms(d))
	}
	if len(ds) > 0 {
		o.MeanMs = ms(sum / time.Duration(len(ds)))
	}
	return o
}

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

// RankMacro orders macro results for one operation by mean time, fastest
// first, returning indexes into res.
func RankMacro(res []MacroResult, op string) []int {
	var idx []int
	for i, r := range res {
		if _, ok := r.Op(op); ok {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool {
		x, _ := res[idx[a]].Op(op)
		y, _ := res[idx[b]].Op(op)
		return x.MeanMs < y.MeanMs
	})
	return idx
}

// NeedBytes is the free space the macro part needs on a path: about
// 1 GB per unit of scale for the ERP data (erp package doc) with half
// again for temp files and re-posting, plus 64 MiB.
func (o MacroOptions) NeedBytes() int64 {
	return int64(o.Scale*1.5*(1<<30)) + 64<<20
}
