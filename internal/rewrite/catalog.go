package rewrite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Querier is what PGCatalog needs from a connection or pool
// (*pgx.Conn and *pgxpool.Pool both satisfy it).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// PGCatalog is a Catalog over a live database, caching every answer for
// its lifetime (a new index or a dropped function is seen by a new
// PGCatalog). It is safe for concurrent use. Relation names resolve with
// the querier's search_path (to_regclass), so a temporary table of another
// session is "not visible".
//
// Built with NewPGCatalogConn it also implements Types over that one
// connection (Describe prepares the unnamed statement, never executes).
type PGCatalog struct {
	q     Querier
	pg    *pgconn.PgConn // for Describe; nil without NewPGCatalogConn
	conn  *pgx.Conn      // its pgx connection (parameter encoding in Batch)
	mu    sync.Mutex
	cols  map[[3]string]ColumnInfo
	funcs map[string][2]bool
	types map[uint32]TypeInfo
	tc    *TypeCache // shared instead of types, if set
}

// NewPGCatalog returns a caching catalog reading through q.
func NewPGCatalog(q Querier) *PGCatalog {
	return &PGCatalog{q: q, cols: map[[3]string]ColumnInfo{}, funcs: map[string][2]bool{}, types: map[uint32]TypeInfo{}}
}

// NewPGCatalogConn returns a caching catalog that also implements Types,
// over one connection (not safe for concurrent use, as c is not).
func NewPGCatalogConn(c *pgx.Conn) *PGCatalog {
	cat := NewPGCatalog(c)
	cat.pg, cat.conn = c.PgConn(), c
	return cat
}

// Describe implements Types: Parse and Describe of the unnamed
// statement, then Sync; never Bind or Execute.
func (c *PGCatalog) Describe(ctx context.Context, sql string, paramOIDs []uint32) (Description, error) {
	if c.pg == nil {
		return Description{}, errors.New("rewrite catalog: describe needs a connection (NewPGCatalogConn)")
	}
	sd, err := c.pg.Prepare(ctx, "", sql, paramOIDs)
	if err != nil {
		return Description{}, fmt.Errorf("rewrite catalog: describe: %w", err)
	}
	return describedAs(sd), nil
}

// typeCache returns the cache Type reads and fills.
func (c *PGCatalog) typeCache() (*sync.Mutex, map[uint32]TypeInfo) {
	if c.tc != nil {
		return &c.tc.mu, c.tc.m
	}
	return &c.mu, c.types
}

// typeSQL describes type $1 with domains resolved (no row: no such type).
const typeSQL = `
WITH RECURSIVE d(oid, depth) AS (
  SELECT $1::oid, 0
  UNION ALL
  SELECT t.typbasetype, d.depth + 1 FROM pg_type t JOIN d ON t.oid = d.oid WHERE t.typtype = 'd')
SELECT format_type($1::oid, NULL), format_type(t.oid, NULL), t.typtype::text, t.typcategory::text,
       t.typlen, t.typelem <> 0, t.typarray <> 0
FROM d JOIN pg_type t ON t.oid = d.oid
ORDER BY d.depth DESC LIMIT 1`

// Type implements Types from pg_type, following typbasetype through
// domains.
func (c *PGCatalog) Type(ctx context.Context, oid uint32) (TypeInfo, error) {
	mu, m := c.typeCache()
	mu.Lock()
	ti, ok := m[oid]
	mu.Unlock()
	if ok {
		return ti, nil
	}
	var typtype, category string
	var length int16
	var hasElem, hasArray bool
	err := c.q.QueryRow(ctx, typeSQL, oid).Scan(&ti.Name, &ti.Base, &typtype, &category, &length, &hasElem, &hasArray)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return TypeInfo{}, nil
	case err != nil:
		return ti, fmt.Errorf("rewrite catalog: type %d: %w", oid, err)
	}
	ti = classifyType(ti.Name, ti.Base, typtype, category, length, hasElem)
	mu.Lock()
	m[oid] = ti
	mu.Unlock()
	return ti, nil
}

// classifyType is the TypeInfo of a row of typeSQL.
func classifyType(name, base, typtype, category string, length int16, hasElem bool) TypeInfo {
	ti := TypeInfo{Known: true, Name: name, Base: base}
	switch {
	case category == "A":
		ti.Why = "an array type"
	case typtype == "c":
		ti.Why = "a composite type"
	case typtype == "p":
		ti.Why = "a pseudo-type"
	case typtype != "b" && typtype != "e" && typtype != "r" && typtype != "m":
		ti.Why = "not a base type"
	case length == -1 && hasElem:
		ti.Why = "a subscriptable variable-length type"
	default:
		ti.Scalar = true
	}
	return ti
}

// tempSQL returns one of the names $1 that a temporary relation has.
const tempSQL = `SELECT min(relname::text) FROM pg_class WHERE relname = ANY ($1::text[]) AND relpersistence = 't'`

// TempRelations implements Types from pg_class, in one query, uncached
// (another session may create a temporary table at any time).
func (c *PGCatalog) TempRelations(ctx context.Context, names []string) (string, error) {
	var found *string
	if err := c.q.QueryRow(ctx, tempSQL, names).Scan(&found); err != nil {
		return "", fmt.Errorf("rewrite catalog: temporary relations %v: %w", names, err)
	}
	if found == nil {
		return "", nil
	}
	return *found, nil
}

// TypeCache holds TypeInfo answers for several PGCatalogs (a type OID's
// kind and base type do not change while it exists). Safe for concurrent
// use; the zero value is not usable (NewTypeCache).
type TypeCache struct {
	mu sync.Mutex
	m  map[uint32]TypeInfo
}

// NewTypeCache returns an empty TypeCache.
func NewTypeCache() *TypeCache { return &TypeCache{m: map[uint32]TypeInfo{}} }

// ShareTypes makes c read and fill tc instead of its own type cache, and
// returns c.
func (c *PGCatalog) ShareTypes(tc *TypeCache) *PGCatalog {
	c.tc = tc
	return c
}

// Column implements Catalog from pg_class, pg_attribute, pg_type and
// pg_index (a valid index whose indkey[0] is the column).
func (c *PGCatalog) Column(ctx context.Context, schema, rel, col string) (ColumnInfo, error) {
	key := [3]string{schema, rel, col}
	c.mu.Lock()
	ci, ok := c.cols[key]
	c.mu.Unlock()
	if ok {
		return ci, nil
	}
	id := pgx.Identifier{rel}
	if schema != "" {
		id = pgx.Identifier{schema, rel}
	}
	const q = `
SELECT r.oid IS NOT NULL,
       a.attnum IS NOT NULL,
       coalesce(t.typcategory = 'A', false), coalesce(a.atttypid, 0),
       coalesce(EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = r.oid AND i.indisvalid AND i.indkey[0] = a.attnum), false)
FROM (SELECT to_regclass($1) AS oid) r
LEFT JOIN pg_attribute a ON a.attrelid = r.oid AND a.attname = $2 AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_type t ON t.oid = a.atttypid`
	if err := c.q.QueryRow(ctx, q, id.Sanitize(), col).Scan(&ci.RelationKnown, &ci.Exists, &ci.IsArray, &ci.TypeOID, &ci.LeadingIndex); err != nil {
		return ci, fmt.Errorf("rewrite catalog: column %s.%s: %w", id.Sanitize(), col, err)
	}
	c.mu.Lock()
	c.cols[key] = ci
	c.mu.Unlock()
	return ci, nil
}

// Volatile implements Catalog from pg_proc.provolatile.
func (c *PGCatalog) Volatile(ctx context.Context, name string) (volatile, known bool, err error) {
	c.mu.Lock()
	v, ok := c.funcs[name]
	c.mu.Unlock()
	if ok {
		return v[0], v[1], nil
	}
	var n int
	if err := c.q.QueryRow(ctx, `SELECT coalesce(bool_or(provolatile = 'v'), false), count(*) FROM pg_proc WHERE proname = $1`, name).Scan(&volatile, &n); err != nil {
		return false, false, fmt.Errorf("rewrite catalog: function %s: %w", name, err)
	}
	known = n > 0
	c.mu.Lock()
	c.funcs[name] = [2]bool{volatile, known}
	c.mu.Unlock()
	return volatile, known, nil
}

// Batch implements Batcher over the connection of NewPGCatalogConn: one
// pipeline holding each Describe (Parse and Describe of the unnamed
// statement), the temporary-relation query and a query per uncached type,
// each followed by its own Sync, sent with one write and read back in
// order. Types learnt go to the type cache.
func (c *PGCatalog) Batch(ctx context.Context, b *Batch) error {
	if c.pg == nil {
		return errors.New("rewrite catalog: batch needs a connection (NewPGCatalogConn)")
	}
	mu, m := c.typeCache()
	var oids []uint32
	mu.Lock()
	for _, o := range b.Types {
		if _, ok := m[o]; !ok && !slices.Contains(oids, o) {
			oids = append(oids, o)
		}
	}
	mu.Unlock()
	var tempArg []byte
	if b.TempNames != nil {
		var err error
		if tempArg, err = c.conn.TypeMap().Encode(pgtype.TextArrayOID, pgtype.TextFormatCode, b.TempNames, nil); err != nil {
			return fmt.Errorf("rewrite catalog: batch: %w", err)
		}
	}
	pl := c.pg.StartPipeline(ctx)
	for _, d := range b.Describes {
		pl.SendPrepare("", d.SQL, d.ParamOIDs)
		pl.SendPipelineSync()
	}
	if b.TempNames != nil {
		pl.SendQueryParams(tempSQL, [][]byte{tempArg}, []uint32{pgtype.TextArrayOID}, nil, nil)
		pl.SendPipelineSync()
	}
	for _, o := range oids {
		pl.SendQueryParams(typeSQL, [][]byte{strconv.AppendUint(nil, uint64(o), 10)}, []uint32{pgtype.OIDOID}, nil, nil)
		pl.SendPipelineSync()
	}
	if err := pl.Flush(); err != nil {
		_ = pl.Close()
		return fmt.Errorf("rewrite catalog: batch: %w", err)
	}
	fail := func(err error) error {
		_ = pl.Close()
		return fmt.Errorf("rewrite catalog: batch: %w", err)
	}
	// synced consumes the Sync that follows each request.
	synced := func() error {
		res, err := pl.GetResults()
		if err != nil {
			return err
		}
		if _, ok := res.(*pgconn.PipelineSync); !ok {
			return fmt.Errorf("expected the end of a request, got %T", res)
		}
		return nil
	}
	for i := range b.Describes {
		res, err := pl.GetResults()
		var pe *pgconn.PgError
		switch {
		case errors.As(err, &pe):
			b.Describes[i].Err = fmt.Errorf("rewrite catalog: describe: %w", err)
		case err != nil:
			return fail(err)
		default:
			sd, ok := res.(*pgconn.StatementDescription)
			if !ok {
				return fail(fmt.Errorf("describe answered with %T", res))
			}
			b.Describes[i].Desc = describedAs(sd)
		}
		if err := synced(); err != nil {
			return fail(err)
		}
	}
	// rows reads the text-format rows of a query result.
	rows := func() ([][][]byte, error) {
		res, err := pl.GetResults()
		if err != nil {
			return nil, err
		}
		rr, ok := res.(*pgconn.ResultReader)
		if !ok {
			return nil, fmt.Errorf("query answered with %T", res)
		}
		var out [][][]byte
		for rr.NextRow() {
			var row [][]byte
			for _, v := range rr.Values() {
				row = append(row, bytes.Clone(v))
			}
			out = append(out, row)
		}
		if _, err := rr.Close(); err != nil {
			return nil, err
		}
		return out, synced()
	}
	if b.TempNames != nil {
		rs, err := rows()
		if err != nil {
			return fail(fmt.Errorf("temporary relations %v: %w", b.TempNames, err))
		}
		b.TempFound = ""
		if len(rs) == 1 && rs[0][0] != nil {
			b.TempFound = string(rs[0][0])
		}
	}
	learnt := map[uint32]TypeInfo{}
	for _, o := range oids {
		rs, err := rows()
		if err != nil {
			return fail(fmt.Errorf("type %d: %w", o, err))
		}
		if len(rs) == 0 {
			continue // unknown: Type asks again and answers "not known"
		}
		r := rs[0]
		length, err := strconv.ParseInt(string(r[4]), 10, 16)
		if err != nil {
			return fail(fmt.Errorf("type %d: typlen %q: %w", o, r[4], err))
		}
		learnt[o] = classifyType(string(r[0]), string(r[1]), string(r[2]), string(r[3]), int16(length), string(r[5]) == "t")
	}
	if err := pl.Close(); err != nil {
		return fmt.Errorf("rewrite catalog: batch: %w", err)
	}
	mu.Lock()
	maps.Copy(m, learnt)
	mu.Unlock()
	return nil
}

// describedAs is the Description of a prepared statement.
func describedAs(sd *pgconn.StatementDescription) Description {
	d := Description{Params: sd.ParamOIDs}
	for _, f := range sd.Fields {
		d.Columns = append(d.Columns, DescribedColumn{Name: f.Name, TypeOID: f.DataTypeOID, TypeMod: f.TypeModifier})
	}
	return d
}
