package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/runenv"
)

// catalogAttachment measures the system catalogs that temp tables grow
// before and after the load (extra.catalog); not after it when the
// server is not answering (r.frozen).
type catalogAttachment struct {
	quiet
	growth CatalogGrowth
}

func (c *catalogAttachment) start(ctx context.Context, r *runState) error {
	c.growth.Before = catalogSizes(ctx, r.pool)
	return nil
}

func (c *catalogAttachment) stop(ctx context.Context, r *runState, doc *results.Document) {
	if !r.frozen {
		c.growth.After = catalogSizes(context.WithoutCancel(ctx), r.pool)
	}
	if c.growth.Before != nil && c.growth.After != nil {
		doc.Extra["catalog"], _ = json.Marshal(c.growth)
	}
}

func (c *catalogAttachment) report(w io.Writer, _ *results.Document) { printCatalog(w, c.growth) }

// CatalogGrowth is the size of the system catalogs that temp tables grow,
// before and after the run (bytes by catalog name; see
// runenv.CatalogTables). It goes into the results as extra.catalog.
type CatalogGrowth struct {
	Before map[string]int64 `json:"before_bytes"`
	After  map[string]int64 `json:"after_bytes"`
}

// catalogSizes measures the catalogs, or returns nil if it cannot (a
// server gone mid-run): the results are written without them.
func catalogSizes(ctx context.Context, pool *pgxpool.Pool) map[string]int64 {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pool.Acquire(cctx)
	if err != nil {
		return nil
	}
	defer conn.Release()
	m, err := runenv.CatalogSizes(cctx, conn.Conn())
	if err != nil {
		return nil
	}
	return m
}

func printCatalog(w io.Writer, c CatalogGrowth) {
	if c.Before == nil || c.After == nil {
		return
	}
	parts := make([]string, 0, len(c.Before))
	for _, name := range runenv.CatalogTables() {
		parts = append(parts, fmt.Sprintf("%s %s -> %s", name, fmtBytes(c.Before[name]), fmtBytes(c.After[name])))
	}
	fmt.Fprintf(w, "catalog size before -> after: %s\n", strings.Join(parts, ", "))
}

// fmtBytes prints a size in binary units (kB = 1024 bytes, as PostgreSQL's
// pg_size_pretty does).
func fmtBytes(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(b)/(1<<20))
	default:
		return fmt.Sprintf("%d kB", b>>10)
	}
}
