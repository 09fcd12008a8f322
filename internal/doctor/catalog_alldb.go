package doctor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/sampler"
)

// Catalogs are per database: the ERP database's temp-table churn shows
// in its own pg_class only. At every window bound the doctor reads, beside
// its own database's catalog counters, those of the other databases
// (Options.Catalogs; all it may connect to by default), each on a
// connection opened, read and closed in turn (sampler.ForEachDatabase):
// (windows + 1) connection start-ups per database. catalog-churn then
// judges the database with the worst window.

// otherCatalogs are the other databases' catalog windows of a sample.
type otherCatalogs struct {
	// windows are each database's windows (only Catalog is filled).
	windows map[string][]window
	// unread are the databases not read at every bound, with the reason.
	unread map[string]string
}

// otherDatabases are the databases whose catalogs the sample reads besides
// the connected one (capped at sampler.MaxOtherDatabases).
func (e *env) otherDatabases(ctx context.Context) ([]string, error) {
	o := e.opts.Catalogs
	var names []string
	switch {
	case o == nil || o.All:
		dbs, err := sampler.Databases(ctx, e.conn)
		if err != nil {
			return nil, err
		}
		for _, d := range dbs {
			names = append(names, d.Name)
		}
	default:
		names = slices.Clone(o.Names)
	}
	names = slices.DeleteFunc(names, func(n string) bool { return n == e.srv.Database })
	return names[:min(len(names), sampler.MaxOtherDatabases)], nil
}

// otherCounters reads the catalog counters of dbs, one connection at a
// time; errs holds the databases that could not be read.
func (e *env) otherCounters(ctx context.Context, cfg *pgx.ConnConfig, dbs []string) (map[string]map[string]catCounters, map[string]error) {
	out := map[string]map[string]catCounters{}
	errs := sampler.ForEachDatabase(ctx, cfg, dbs, func(ctx context.Context, db string, conn *pgx.Conn) error {
		c, err := catalogCountersOn(ctx, conn)
		if err != nil {
			return err
		}
		out[db] = c
		return nil
	})
	return out, errs
}

// otherWindows turns the readings at each bound into each database's
// windows; a database missing from a reading is unread.
func otherWindows(dbs []string, bounds []time.Time, reads []map[string]map[string]catCounters, errs []map[string]error) *otherCatalogs {
	o := &otherCatalogs{windows: map[string][]window{}, unread: map[string]string{}}
	for _, db := range dbs {
		cats := make([]map[string]catCounters, 0, len(bounds))
		for i, r := range reads {
			c, ok := r[db]
			if !ok {
				why := "not read"
				if err := errs[i][db]; err != nil {
					why = oneLine(err)
				}
				o.unread[db] = why
				break
			}
			cats = append(cats, c)
		}
		if _, bad := o.unread[db]; bad {
			continue
		}
		o.windows[db] = splitWindows(nil, bounds, cats, true)
	}
	return o
}

// churnOthers adds the other databases' churn to catalog-churn's
// evidence and returns the database with the worst window (its name
// "" when none is worse than worstFiles).
func (o *otherCatalogs) churnOthers(worstFiles float64) (ev []Evidence, db string, mean, worst churnRates, wn int) {
	if o == nil {
		return nil, "", churnRates{}, churnRates{}, 0
	}
	dbs := make([]string, 0, len(o.windows))
	for d := range o.windows {
		dbs = append(dbs, d)
	}
	slices.Sort(dbs)
	for _, d := range dbs {
		ws := o.windows[d]
		m, w, n, ok := churnByWindow(ws)
		if !ok {
			continue
		}
		c := sumWindows(ws).Catalog["pg_class"]
		ev = append(ev, Evidence{Text: fmt.Sprintf("database %s: %.1f new relation files/s mean, %.1f in the worst window (%.1f pg_class inserts/s, %.1f non-HOT updates/s mean); pg_class %s -> %s", d, m.files, w.files, m.ins, m.nonHot, fmtBytes(c.Bytes0), fmtBytes(c.Bytes1)),
			From: "pg_stat_sys_tables of " + d + " (a connection of its own at each window bound)"})
		if w.files > worstFiles {
			db, mean, worst, wn, worstFiles = d, m, w, n, w.files
		}
	}
	read := strings.Join(dbs, ", ")
	if read == "" {
		read = "none"
	}
	head := Evidence{Text: "other databases read: " + read, From: "pg_database (datallowconn, CONNECT privilege)"}
	if len(o.unread) > 0 {
		var parts []string
		for _, d := range sortedKeys(o.unread) {
			parts = append(parts, d+": "+o.unread[d])
		}
		head.Text += "; not read: " + strings.Join(parts, "; ")
	}
	return append([]Evidence{head}, ev...), db, mean, worst, wn
}
