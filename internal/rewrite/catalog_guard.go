package rewrite

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// factsSQL answers Types.Resolve's questions about stored objects: the
// trees of the views $1 (regclass[]: names or OIDs) and the relations,
// functions and operators pg_depend records they depend on (none pinned:
// no built-in one), the operators $3 (with their functions), the
// functions $2, and each aggregate's support functions. Rows: kind ('v'
// view, 'r' relation, 'o' operator, 'f' function), OID, name, then
// ev_action, relkind, oprcode or provolatile; relrowsecurity or
// proleakproof; an aggregate's support functions.
const factsSQL = `
WITH rules AS (
  SELECT r.oid, r.ev_class, r.ev_action FROM pg_rewrite r
  WHERE r.ev_class = ANY ($1::regclass[]) AND r.ev_type = '1' AND r.rulename = '_RETURN'),
deps AS (
  SELECT DISTINCT d.refclassid, d.refobjid FROM pg_depend d JOIN rules r ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid),
ops AS (
  SELECT o.oid, o.oprname, o.oprcode::oid AS code FROM pg_operator o
  WHERE o.oid = ANY ($3::oid[]) OR o.oid IN (SELECT refobjid FROM deps WHERE refclassid = 'pg_operator'::regclass)),
fns AS (
  SELECT unnest($2::oid[]) AS oid
  UNION SELECT refobjid FROM deps WHERE refclassid = 'pg_proc'::regclass
  UNION SELECT code FROM ops),
aggs AS (` + aggSupport + ` WHERE a.aggfnoid IN (SELECT oid FROM fns))
SELECT 'v', r.ev_class::oid, NULL, r.ev_action::text, NULL::bool, NULL::oid[] FROM rules r
UNION ALL
SELECT 'r', c.oid, c.relname::text, c.relkind::text, c.relrowsecurity, NULL FROM deps d JOIN pg_class c ON d.refclassid = 'pg_class'::regclass AND c.oid = d.refobjid
UNION ALL
SELECT 'o', o.oid, o.oprname::text, o.code::text, NULL, NULL FROM ops o
UNION ALL
SELECT 'f', p.oid, p.proname::text, p.provolatile::text, p.proleakproof, a.support FROM pg_proc p LEFT JOIN aggs a ON a.oid = p.oid
WHERE p.oid IN (SELECT oid FROM fns UNION SELECT unnest(support) FROM aggs)`

// aggSupport selects aggregates' support functions (a is pg_aggregate).
const aggSupport = `
  SELECT a.aggfnoid::oid AS oid, array_remove(ARRAY[a.aggtransfn::oid, a.aggfinalfn, a.aggcombinefn, a.aggserialfn, a.aggdeserialfn,
         a.aggmtransfn, a.aggminvtransfn, a.aggmfinalfn], 0) AS support
  FROM pg_aggregate a`

// builtinFactsSQL is factsSQL's rows of every built-in operator and
// function (OID < 16384: FirstNormalObjectId).
const builtinFactsSQL = `
SELECT 'o', o.oid, o.oprname::text, o.oprcode::oid::text, NULL::bool, NULL::oid[] FROM pg_operator o WHERE o.oid < 16384
UNION ALL
SELECT 'f', p.oid, p.proname::text, p.provolatile::text, p.proleakproof, a.support FROM pg_proc p
LEFT JOIN (` + aggSupport + `) a ON a.oid = p.oid WHERE p.oid < 16384`

// identsSQL returns the schema and name of the types $1.
const identsSQL = `SELECT t.oid, n.nspname::text, t.typname::text FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE t.oid = ANY ($1::oid[])`

// Resolve implements Types: the view in a transaction that is always
// rolled back (a savepoint inside a transaction the connection is in; a
// connection in a failed transaction answers ViewErr), the other
// questions from the built-in facts LearnBuiltins learnt and one query
// for the rest.
func (c *PGCatalog) Resolve(ctx context.Context, q *Resolution) error {
	if c.pg == nil {
		return errors.New("rewrite catalog: resolve needs a connection (NewPGCatalogConn)")
	}
	if err := c.resolveIdents(ctx, q); err != nil {
		return err
	}
	if q.View != "" {
		if err := c.Batch(ctx, &Batch{Resolves: []*Resolution{q}}); err != nil {
			return err
		}
	}
	return c.resolveObjects(ctx, q)
}

// resolveIdents answers q.TypeNames.
func (c *PGCatalog) resolveIdents(ctx context.Context, q *Resolution) error {
	var ask []uint32
	c.tc.mu.Lock()
	for _, t := range q.TypeNames {
		if id, ok := c.tc.idents[t]; ok {
			q.Idents = mergeMap(q.Idents, map[uint32][2]string{t: id})
		} else {
			ask = append(ask, t)
		}
	}
	c.tc.mu.Unlock()
	if len(ask) == 0 {
		return nil
	}
	res := c.pg.ExecParams(ctx, identsSQL, [][]byte{oidArray(ask)}, nil, nil, nil).Read()
	if res.Err != nil {
		return fmt.Errorf("rewrite catalog: type names: %w", res.Err)
	}
	for _, r := range res.Rows {
		q.Idents = mergeMap(q.Idents, map[uint32][2]string{oidOf(string(r[0])): {string(r[1]), string(r[2])}})
	}
	return nil
}

// resolveObjects answers q.Functions, q.Operators and q.Views: built-in
// objects from the cache, the others with one query.
func (c *PGCatalog) resolveObjects(ctx context.Context, q *Resolution) error {
	var a factsArgs
	c.tc.mu.Lock()
	fromCache := func(f uint32) {
		r, ok := c.tc.funcs[f]
		if !ok {
			a.funcs = append(a.funcs, f)
			return
		}
		q.Funcs = mergeMap(q.Funcs, map[uint32]Routine{f: r})
		for _, s := range r.Support {
			if sr, ok := c.tc.funcs[s]; ok {
				q.Funcs[s] = sr
			} else {
				a.funcs = append(a.funcs, s)
			}
		}
	}
	for _, f := range q.Functions {
		fromCache(f)
	}
	for _, o := range q.Operators {
		op, ok := c.tc.ops[o]
		if !ok {
			a.ops = append(a.ops, o)
			continue
		}
		q.Ops = mergeMap(q.Ops, map[uint32]Operator{o: op})
		fromCache(op.Code)
	}
	c.tc.mu.Unlock()
	for _, v := range q.Views {
		a.views = append(a.views, strconv.FormatUint(uint64(v), 10))
	}
	if len(a.funcs)+len(a.ops)+len(a.views) == 0 {
		return nil
	}
	return c.facts(ctx, q, a)
}

// factsArgs are the arguments of factsSQL, or builtinFactsSQL.
type factsArgs struct {
	views      []string // regclass inputs
	funcs, ops []uint32
	builtin    bool
}

// params are factsSQL's parameters in text format.
func (a factsArgs) params() [][]byte {
	var b strings.Builder
	b.WriteByte('{')
	for i, v := range a.views {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(v)) // an array element in double quotes (names hold no backslash)
	}
	b.WriteByte('}')
	return [][]byte{[]byte(b.String()), oidArray(a.funcs), oidArray(a.ops)}
}

// oidArray is an oid[] in text format.
func oidArray(oids []uint32) []byte {
	b := []byte{'{'}
	for i, o := range oids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(o), 10)
	}
	return append(b, '}')
}

// facts runs factsSQL (builtinFactsSQL) and adds its rows to r.
func (c *PGCatalog) facts(ctx context.Context, r *Resolution, a factsArgs) error {
	var res *pgconn.Result
	switch {
	case a.builtin:
		res = c.pg.ExecParams(ctx, builtinFactsSQL, nil, nil, nil, nil).Read()
	case c.named(ctx, factsStmt, factsSQL) == factsStmt:
		res = c.pg.ExecPrepared(ctx, factsStmt, a.params(), nil, nil).Read()
	default:
		res = c.pg.ExecParams(ctx, factsSQL, a.params(), nil, nil, nil).Read()
	}
	if res.Err != nil {
		return fmt.Errorf("rewrite catalog: functions and views: %w", res.Err)
	}
	for _, row := range res.Rows {
		if err := r.addFact(row); err != nil {
			return fmt.Errorf("rewrite catalog: functions and views: %w", err)
		}
	}
	return nil
}

// addFact adds a text-format row of factsSQL to r.
func (r *Resolution) addFact(row [][]byte) error {
	if len(row) != 6 || len(row[0]) != 1 {
		return fmt.Errorf("a row of %d columns", len(row))
	}
	oid := oidOf(string(row[1]))
	name, a, b := string(row[2]), string(row[3]), string(row[4]) == "t"
	switch row[0][0] {
	case 'v':
		r.Trees = mergeMap(r.Trees, map[uint32]string{oid: a})
	case 'r':
		r.Rels = mergeMap(r.Rels, map[uint32]Relation{oid: {Name: name, Kind: a[0], RowSecurity: b}})
	case 'o':
		r.Ops = mergeMap(r.Ops, map[uint32]Operator{oid: {Name: name, Code: oidOf(a)}})
	case 'f':
		if len(a) != 1 {
			return fmt.Errorf("function %d: provolatile %q", oid, a)
		}
		f := Routine{Name: name, Volatility: a[0], Leakproof: b}
		if s := strings.Trim(string(row[5]), "{}"); s != "" {
			for _, o := range strings.Split(s, ",") {
				f.Support = append(f.Support, oidOf(o))
			}
		}
		r.Funcs = mergeMap(r.Funcs, map[uint32]Routine{oid: f})
	default:
		return fmt.Errorf("a row of kind %q", row[0])
	}
	return nil
}

// The statements around a view the guard creates: a transaction, or a
// savepoint in the connection's own.
var (
	viewTx        = [2]string{"BEGIN", "ROLLBACK"}
	viewSavepoint = [2]string{"SAVEPOINT erplab_guard", "ROLLBACK TO SAVEPOINT erplab_guard; RELEASE SAVEPOINT erplab_guard"}
)

// sentView is a Resolution whose view a pipeline creates, and how.
type sentView struct {
	r     *Resolution
	close int // statements after the facts query that close its transaction
}

// sendViews sends, for each Resolution's view: BEGIN (a savepoint when
// the connection is in a transaction), CREATE TEMPORARY VIEW, factsSQL
// of it, ROLLBACK, each with its own Sync: the rollback runs whatever
// fails before it. A connection in a failed transaction sends nothing
// and answers ViewErr.
func (c *PGCatalog) sendViews(pl *pgconn.Pipeline, rs []*Resolution) []sentView {
	var out []sentView
	for _, r := range rs {
		around := viewTx
		switch c.pg.TxStatus() {
		case 'T':
			around = viewSavepoint
		case 'E':
			r.ViewErr = errors.New("the connection is in a failed transaction")
			continue
		}
		pl.SendQueryParams(around[0], nil, nil, nil, nil)
		pl.SendPipelineSync()
		pl.SendQueryParams(r.View, nil, nil, nil, nil)
		pl.SendPipelineSync()
		pl.SendQueryPrepared(factsStmt, factsArgs{views: []string{"pg_temp." + guardView}}.params(), nil, nil)
		pl.SendPipelineSync()
		closing := strings.Split(around[1], "; ")
		for _, s := range closing {
			pl.SendQueryParams(s, nil, nil, nil, nil)
			pl.SendPipelineSync()
		}
		out = append(out, sentView{r, len(closing)})
	}
	return out
}

// readViews reads what sendViews sent.
func (c *PGCatalog) readViews(pl *pgconn.Pipeline, views []sentView) error {
	for _, v := range views {
		if _, rej, err := plResult(pl); err != nil || rej != nil {
			return fmt.Errorf("view: open its transaction: %w", errors.Join(err, rej))
		}
		_, rej, err := plResult(pl)
		if err != nil {
			return fmt.Errorf("view: %w", err)
		}
		v.r.ViewErr = rej
		rows, rej, err := plResult(pl)
		switch {
		case err != nil:
			return fmt.Errorf("view: %w", err)
		case v.r.ViewErr == nil && rej != nil:
			return fmt.Errorf("view: its functions: %w", rej)
		}
		for _, row := range rows {
			if err := v.r.addFact(row); err != nil {
				return fmt.Errorf("view: %w", err)
			}
		}
		if v.r.ViewErr == nil {
			for oid, t := range v.r.Trees {
				v.r.Tree, v.r.TreeOID = t, oid
			}
			if v.r.Tree == "" {
				return errors.New("view: the server gives no tree of the view it created")
			}
		}
		for range v.close {
			if _, rej, err := plResult(pl); err != nil || rej != nil {
				return fmt.Errorf("view: roll it back: %w", errors.Join(err, rej))
			}
		}
	}
	return nil
}
