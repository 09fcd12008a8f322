// Package pgbenchinit compares the data-loading rate of erplab's workload
// initialisation with `pgbench -i` on the same server in one go: each tool
// loads a database of about the same size, indexes included, and the
// comparison is their time per GB and rows per second. Ratios, not single
// timings, are the result: the machines this runs on are noisy.
package pgbenchinit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/erplab/erplab/internal/conninfo"
)

// Result is one tool's load.
type Result struct {
	// Tool names the loader, e.g. "erplab init --workload erp --scale 0.2".
	Tool string
	// Rows written to all tables.
	Rows int64
	// Bytes is the growth of pg_database_size: tables, indexes, TOAST,
	// free space and visibility maps.
	Bytes int64
	// Duration is the wall time of the whole load, indexes and
	// VACUUM/ANALYZE included.
	Duration time.Duration
}

// MBPerSecond is Bytes per second in MB (10^6 bytes).
func (r Result) MBPerSecond() float64 { return float64(r.Bytes) / 1e6 / r.Duration.Seconds() }

// RowsPerSecond is Rows per second.
func (r Result) RowsPerSecond() float64 { return float64(r.Rows) / r.Duration.Seconds() }

// SecondsPerGB is the load time per 10^9 bytes of database.
func (r Result) SecondsPerGB() float64 { return r.Duration.Seconds() / (float64(r.Bytes) / 1e9) }

// PgbenchBytesPerScale is the approximate database growth of `pgbench -i`
// per scale unit (100,000 pgbench_accounts rows with their primary key):
// about 15 MB, as the pgbench documentation's sizing rule of thumb and a
// measurement on PostgreSQL 15 agree. Used only to pick a pgbench scale of
// comparable size; the comparison itself uses measured sizes.
const PgbenchBytesPerScale = 15_000_000

// PgbenchScaleFor returns the pgbench scale whose database is closest to
// bytes (at least 1).
func PgbenchScaleFor(bytes int64) int {
	return max(1, int(math.Round(float64(bytes)/PgbenchBytesPerScale)))
}

// FindPgbench looks for the pgbench binary next to the server binaries in
// binDir, then on PATH.
func FindPgbench(binDir string) (string, error) {
	if binDir != "" {
		p := filepath.Join(binDir, "pgbench")
		if _, err := exec.LookPath(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("pgbench")
	if err != nil {
		return "", errors.New("pgbench not found next to the server binaries nor on PATH (Debian: apt-get install postgresql-15 or postgresql-contrib)")
	}
	return p, nil
}

// RunPgbench runs `pgbench -i -s scale -q` into the database of dsn (a
// libpq connection string pgbench accepts as its dbname argument) and
// measures it. Rows counts pgbench's four tables as documented for -i
// (branches = scale, tellers = 10 x scale, accounts = 100,000 x scale,
// history empty). The error includes pgbench's own message.
func RunPgbench(ctx context.Context, pgbench, dsn string, scale int) (Result, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return Result{}, fmt.Errorf("pgbench comparison: %w", err)
	}
	defer conn.Close(context.Background())
	before, err := DatabaseSize(ctx, conn)
	if err != nil {
		return Result{}, err
	}
	// The password goes in the environment, not on the command line
	// where ps would show it.
	target, env, err := conninfo.Split(dsn)
	if err != nil {
		return Result{}, fmt.Errorf("pgbench comparison: %w", err)
	}
	cmd := exec.CommandContext(ctx, pgbench, "-i", "-q", "-s", fmt.Sprint(scale), target)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return Result{}, fmt.Errorf("pgbench -i -s %d: %w: %s", scale, err, lastLine(out.String()))
	}
	d := time.Since(start)
	after, err := DatabaseSize(ctx, conn)
	if err != nil {
		return Result{}, err
	}
	return Result{
		Tool:     fmt.Sprintf("pgbench -i -s %d", scale),
		Rows:     int64(scale) * (1 + 10 + 100_000),
		Bytes:    after - before,
		Duration: d,
	}, nil
}

// WithDatabase returns dsn pointing at database db instead (a key=value
// string; a later dbname overrides an earlier one in libpq's rules).
func WithDatabase(dsn, db string) (string, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "", fmt.Errorf("pgbench comparison: %w", err)
	}
	q := conninfo.QuoteValue
	s := fmt.Sprintf("host=%s port=%d user=%s dbname=%s", q(cfg.Host), cfg.Port, q(cfg.User), q(db))
	if cfg.Password != "" {
		s += " password=" + q(cfg.Password)
	}
	return s, nil
}

// DatabaseSize is pg_database_size of the connection's database, bytes.
func DatabaseSize(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var n int64
	if err := conn.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&n); err != nil {
		return 0, fmt.Errorf("database size: %w", err)
	}
	return n, nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// Ratio is ours' time per GB divided by the reference's: below 1 we load
// faster per GB, 2 means twice the time.
func Ratio(ours, ref Result) float64 { return ours.SecondsPerGB() / ref.SecondsPerGB() }

// Print writes the side-by-side table and the ratio line.
func Print(w io.Writer, ours, ref Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "loader\trows\tMB\tseconds\trows/s\tMB/s\ts per GB\t")
	for _, r := range []Result{ours, ref} {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.2f\t%.0f\t%.1f\t%.1f\t\n", r.Tool, r.Rows, float64(r.Bytes)/1e6,
			r.Duration.Seconds(), r.RowsPerSecond(), r.MBPerSecond(), r.SecondsPerGB())
	}
	tw.Flush()
	verdict := "within"
	if Ratio(ours, ref) > 2 {
		verdict = "MISSES"
	}
	fmt.Fprintf(w, "time per GB, erplab / pgbench: %.2fx (%s the goal of at most 2x, i.e. no more than twice pgbench's time per GB, indexes included); rows/s ratio %.2fx\n",
		Ratio(ours, ref), verdict, ours.RowsPerSecond()/ref.RowsPerSecond())
}
