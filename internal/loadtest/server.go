package loadtest

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/pgcluster"
)

// server is the run's server: the embedded throwaway cluster when Run
// was given none (DSN "" and no PG* environment), else the one given.
type server struct {
	dsn      string
	desc     string // for the results and the banner: redacted DSN, "embedded", ...
	embedded bool
	force    bool // set-up may write into a database holding foreign tables
	cluster  *pgcluster.Cluster
	keep     bool
}

// openServer starts the embedded server sized for poolSize connections,
// or takes the one opts give.
func openServer(ctx context.Context, opts Options, poolSize int, out io.Writer) (*server, error) {
	s := &server{dsn: opts.DSN, desc: conninfo.Redact(opts.DSN), force: opts.Force}
	switch {
	case opts.DSN == "" && !opts.EnvGiven:
		c, err := StartEmbedded(ctx, out, opts.OSUser, poolSize+20+crowdSize(opts.Workload), opts.Keep)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ErrInterrupted
			}
			return nil, err
		}
		s.cluster, s.keep, s.embedded = c, opts.Keep, true
		s.dsn, s.desc, s.force = c.DSN("erplab"), "embedded", true
	case opts.DSN == "":
		s.desc = "from PG* environment"
	}
	return s, nil
}

// close stops the embedded server, or with Keep says how to reach it.
func (s *server) close(out io.Writer) {
	if s.cluster == nil {
		return
	}
	if s.keep {
		fmt.Fprintln(out, s.cluster.Keep("erplab"))
		return
	}
	if err := s.cluster.Stop(); err != nil {
		fmt.Fprintf(out, "warning: stopping the embedded server: %v\n", err)
	}
}

// StartEmbedded starts erplab's throwaway server for a command that was
// given no server: it first removes clusters left by killed erplab
// processes, then starts one sized for maxConnections, creates database
// "erplab" (see its DSN with c.DSN("erplab")) and says so on out. keep
// tells whether the cluster will be handed to the user at the end; if
// not, it dies with this process even when erplab is killed outright.
func StartEmbedded(ctx context.Context, out io.Writer, osUser string, maxConnections int, keep bool) (*pgcluster.Cluster, error) {
	return startEmbedded(ctx, out, pgcluster.Options{OSUser: osUser, MaxConnections: maxConnections, StopWithParent: !keep})
}

// StartEmbeddedSettings is StartEmbedded (not kept) with extra
// postgresql.conf settings (pgcluster.Options.Settings): vs-pgbench's
// server, which writes the csvlog its replay rows replay.
func StartEmbeddedSettings(ctx context.Context, out io.Writer, osUser string, maxConnections int, settings map[string]string) (*pgcluster.Cluster, error) {
	return startEmbedded(ctx, out, pgcluster.Options{OSUser: osUser, MaxConnections: maxConnections, StopWithParent: true, Settings: settings})
}

// StartEmbeddedWaits is StartEmbedded (not kept) with pg_wait_sampling
// preloaded beside pg_stat_statements when it is installed
// (pgcluster.Options.WaitSampling): erplab ab's server, whose run
// databases get both extensions.
func StartEmbeddedWaits(ctx context.Context, out io.Writer, osUser string, maxConnections int) (*pgcluster.Cluster, error) {
	return startEmbedded(ctx, out, pgcluster.Options{OSUser: osUser, MaxConnections: maxConnections, StopWithParent: true, WaitSampling: true})
}

func startEmbedded(ctx context.Context, out io.Writer, opts pgcluster.Options) (*pgcluster.Cluster, error) {
	if _, err := pgcluster.ReapOrphans(ctx, out); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "no --dsn: starting a throwaway PostgreSQL (initdb into a temporary directory)...\n")
	t0 := time.Now()
	c, err := pgcluster.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := c.CreateDatabase(ctx, "erplab"); err != nil {
		c.Stop()
		return nil, fmt.Errorf("embedded server: %w", err)
	}
	// Statement statistics for doctor and diagnosis, when the contrib
	// library is preloaded (pgcluster does so when it is installed).
	if conn, err := pgx.Connect(ctx, c.DSN("erplab")); err == nil {
		var libs string
		if conn.QueryRow(ctx, `SELECT current_setting('shared_preload_libraries')`).Scan(&libs) == nil && strings.Contains(libs, "pg_stat_statements") {
			conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`) //nolint:errcheck // optional
		}
		conn.Close(ctx)
	}
	fmt.Fprintf(out, "PostgreSQL %s ready in %s (data %s, port %d, Unix socket only)\n", c.Version(), time.Since(t0).Round(10*time.Millisecond), c.Dir(), c.Port())
	return c, nil
}
