package sampler

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Catalogs are per database, and the sampler's connection sees only its
// own; the ERP database is often one of many on the server. With
// Options.Catalogs a Sampler also reads the catalog figures (catalogSQL)
// of other databases: every OtherCatalogs.Every (not every sample) it
// connects to each, reads, and closes (ForEachDatabase), so it holds no
// connection to them between readings; the cost is one connection
// start-up (a backend fork and its catalog cache) per database per
// reading.

// DefaultCatalogsEvery is how often other databases' catalogs are read.
const DefaultCatalogsEvery = 10 * time.Second

// MaxOtherDatabases bounds the databases of one reading under
// OtherCatalogs.All; the rest are named in DatabaseCatalog entries with
// an error saying so.
const MaxOtherDatabases = 100

// OtherCatalogs chooses the other databases whose catalogs are read.
type OtherCatalogs struct {
	// All reads every database the role may connect to (Databases);
	// otherwise Names are read. The connected database is never among
	// them (its figures are Sample.Catalog).
	All   bool
	Names []string
	// Every is the period of the readings (default DefaultCatalogsEvery).
	Every time.Duration
}

func (o OtherCatalogs) enabled() bool { return o.All || len(o.Names) > 0 }

// DatabaseCatalog is one other database's catalog reading.
type DatabaseCatalog struct {
	Database string `json:"database"`
	// Catalog are its catalogs as Sample.Catalog; rates are per second
	// since this database's previous reading (zero on the first).
	Catalog []CatalogRel `json:"catalog,omitempty"`
	// Error says why it was not read.
	Error string `json:"error,omitempty"`
}

// CatalogBytes is the summed size of the database's sampled catalogs, bytes.
func (d *DatabaseCatalog) CatalogBytes() int64 { return catalogBytes(d.Catalog) }

// CatalogGrowth is the summed growth of its sampled catalogs, bytes/s.
func (d *DatabaseCatalog) CatalogGrowth() float64 { return catalogGrowth(d.Catalog) }

// RelFilesPerS is pg_class inserts + updates per second, the temp-relation
// file churn figure of Churn (an upper bound of relation files created).
func (d *DatabaseCatalog) RelFilesPerS() float64 {
	for _, c := range d.Catalog {
		if c.Name == "pg_class" {
			return round2(c.InsPerS + c.UpdPerS)
		}
	}
	return 0
}

func catalogBytes(rels []CatalogRel) int64 {
	var n int64
	for _, c := range rels {
		n += c.Bytes
	}
	return n
}

func catalogGrowth(rels []CatalogRel) float64 {
	var g float64
	for _, c := range rels {
		g += c.GrowthBytes
	}
	return g
}

// otherState is what a Sampler keeps between readings of other databases.
type otherState struct {
	at   time.Time               // last reading
	prev map[string][]CatalogRel // database -> its previous reading
	when map[string]time.Time    // database -> when that was
}

// due reports whether a reading of other databases is due at now.
func (s *Sampler) otherDue(now time.Time) bool {
	if !s.opts.Catalogs.enabled() {
		return false
	}
	every := s.opts.Catalogs.Every
	if every <= 0 {
		every = DefaultCatalogsEvery
	}
	return s.other.at.IsZero() || now.Sub(s.other.at) >= every
}

// readOthers reads the other databases' catalogs, one connection at a
// time, and computes their rates against their previous readings.
func (s *Sampler) readOthers(ctx context.Context, now time.Time) []DatabaseCatalog {
	s.other.at = now
	if s.other.prev == nil {
		s.other.prev, s.other.when = map[string][]CatalogRel{}, map[string]time.Time{}
	}
	var out []DatabaseCatalog
	names := s.opts.Catalogs.Names
	if s.opts.Catalogs.All {
		dbs, err := Databases(ctx, s.conn)
		if err != nil {
			return []DatabaseCatalog{{Database: "*", Error: err.Error()}}
		}
		names = names[:0:0]
		for _, d := range dbs {
			names = append(names, d.Name)
		}
	}
	names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == s.info.Database })
	if len(names) > MaxOtherDatabases {
		for _, n := range names[MaxOtherDatabases:] {
			out = append(out, DatabaseCatalog{Database: n, Error: "not read: over the first 100 databases"})
		}
		names = names[:MaxOtherDatabases]
	}
	cfg := s.cfg
	if cfg == nil {
		cfg = s.conn.Config()
	}
	got := map[string][]CatalogRel{}
	errs := ForEachDatabase(ctx, cfg, names, func(ctx context.Context, db string, conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, s.stmts.catalog)
		if err != nil {
			return err
		}
		var c CatalogRel
		var rels []CatalogRel
		if _, err := pgx.ForEachRow(rows, []any{&c.Name, &c.Bytes, &c.LiveTup, &c.DeadTup, &c.Ins, &c.Upd, &c.Del}, func() error {
			rels = append(rels, c)
			return nil
		}); err != nil {
			return err
		}
		got[db] = rels
		return nil
	})
	at := time.Now()
	for _, db := range names {
		if err := errs[db]; err != nil {
			out = append(out, DatabaseCatalog{Database: db, Error: err.Error()})
			continue
		}
		rels := got[db]
		if prev, ok := s.other.prev[db]; ok {
			if dt := at.Sub(s.other.when[db]).Seconds(); dt > 0 {
				catalogRates(prev, rels, dt)
			}
		}
		s.other.prev[db], s.other.when[db] = rels, at
		out = append(out, DatabaseCatalog{Database: db, Catalog: rels})
	}
	slices.SortFunc(out, func(a, b DatabaseCatalog) int {
		switch {
		case a.Database < b.Database:
			return -1
		case a.Database > b.Database:
			return 1
		}
		return 0
	})
	return out
}
