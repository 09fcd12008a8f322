// Package sampler samples a PostgreSQL server and the host it runs on, the
// instrument of the field reports (docs CONTEXT.md): sessions by state and
// active sessions by wait event from pg_stat_activity, rates from
// pg_stat_database, the size and churn of the catalogs that temp tables
// bloat, and the host's CPU split, memory and transparent huge page
// counters from /proc.
//
// A Sampler takes one Sample per call on its own connection: every source
// in one pipelined batch (one round trip, one implicit transaction; the
// statements are in sql.go). A Session runs a Sampler every interval for
// the length of a load test, keeps the time series on the load test's time
// base, runs storm detection (package storm) and reports its own cost;
// Session.Observations is the "observations" section of the results file.
package sampler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/opmap"
)

// Interval bounds: DefaultInterval is the sampling period unless a caller
// picks another; MinInterval the shortest accepted.
const (
	DefaultInterval = time.Second
	MinInterval     = 100 * time.Millisecond
	// DefaultTimeout bounds one sample's round trip.
	DefaultTimeout = 5 * time.Second
	// DefaultQueryChars is how much query text Options.Queries keeps.
	DefaultQueryChars = 200
	// ApplicationName is set on the sampler's own connection (unless the
	// DSN sets one), so it can be told apart in pg_stat_activity.
	ApplicationName = "erplab sampler"
)

// HostMode says whether to sample the host's /proc.
type HostMode int

const (
	// HostAuto samples /proc when the server is reached over a Unix
	// socket or a loopback address, i.e. runs on this machine.
	HostAuto HostMode = iota
	// HostOn always samples /proc (e.g. a server in a local container
	// reached through a bridge address).
	HostOn
	// HostOff never samples /proc.
	HostOff
)

// Options configure a Sampler. The zero value samples sessions, database
// and catalog, the host when local, and no query list.
type Options struct {
	// Queries is how many longest-running active queries to fetch per
	// sample (0 = none; erplab top shows them).
	Queries int
	// QueryChars is how many characters of each query's text to keep
	// (default DefaultQueryChars).
	QueryChars int
	// Host chooses whether to read /proc (default HostAuto).
	Host HostMode
	// ProcRoot is the proc tree to read (default "/proc"; tests pass
	// fixture trees).
	ProcRoot string
	// Timeout bounds one sample's round trip (default DefaultTimeout). A
	// sample that times out loses its connection (pgx closes it); the next
	// sample reconnects when the Sampler was made by Connect.
	Timeout time.Duration
	// Ops, when set, is the load test's backend-PID-to-key-operation map
	// (engine.Config.Ops): each sample then attributes the wait event of
	// every active backend running a key operation to that operation
	// (Sample.OpWaits), and notes the query_id it runs (for
	// Session.Statements).
	Ops *opmap.Map
	// Catalogs, when set, also reads the catalog figures of other
	// databases, connecting to each in turn every Catalogs.Every
	// (othercatalogs.go): Sample.OtherCatalogs.
	Catalogs OtherCatalogs
	// Locks, when set, also reads pg_locks every sample: the relation
	// locks each backend holds, in its fast-path slots and outside them
	// (locks.go). With Ops, only the backends running a key operation,
	// attributed to it as the waits are (Sample.Locks, Session's
	// Observations.Locks); without, every backend but the sampler's own.
	Locks bool
}

// Sessions counts client backends by pg_stat_activity.state.
type Sessions struct {
	Active                   int `json:"active"`
	Idle                     int `json:"idle"`
	IdleInTransaction        int `json:"idle_in_transaction"`
	IdleInTransactionAborted int `json:"idle_in_transaction_aborted"`
	// Other counts the remaining states: "fastpath function call",
	// "disabled" (track_activities off) and NULL (another user's session
	// seen without pg_read_all_stats).
	Other int `json:"other,omitempty"`
}

// Total is the number of client sessions.
func (s Sessions) Total() int {
	return s.Active + s.Idle + s.IdleInTransaction + s.IdleInTransactionAborted + s.Other
}

// Query is one active query of the longest-running list.
type Query struct {
	PID         int
	User        string
	Database    string
	Application string
	// Duration is now() - query_start.
	Duration time.Duration
	// Wait is the wait event key ("Lock:advisory", "CPU").
	Wait string
	// Text is the query, cut to Options.QueryChars characters.
	Text string
	// Workers is the number of parallel workers of this leader (0 on
	// PostgreSQL 12, which has no leader_pid).
	Workers int
}

// DBCounters are cumulative pg_stat_database counters summed over all
// databases of the server.
type DBCounters struct {
	XactCommit   int64 `json:"xact_commit"`
	XactRollback int64 `json:"xact_rollback"`
	BlksRead     int64 `json:"blks_read"`
	BlksHit      int64 `json:"blks_hit"`
	TempFiles    int64 `json:"temp_files"`
	TempBytes    int64 `json:"temp_bytes"`
	Deadlocks    int64 `json:"deadlocks"`
	// Sessions is the number of sessions established (PostgreSQL 14+,
	// else 0).
	Sessions int64 `json:"sessions"`
}

// DBRates are pg_stat_database counters per second over the interval
// since the previous sample. A counter that went backwards (statistics
// reset) counts 0 for that interval. Backends flush their statistics to
// shared memory at transaction end at most once a second
// (PGSTAT_MIN_INTERVAL), an idle backend within 10 s
// (PGSTAT_IDLE_INTERVAL), an exiting one at once (src/backend/utils/
// activity/pgstat.c, PostgreSQL 15+), so rates come in bursts, more so at
// intervals under 1 s.
// The sampler's own transaction adds one commit per sample.
type DBRates struct {
	// TPS is (commits + rollbacks) per second.
	TPS       float64 `json:"tps"`
	Commits   float64 `json:"xact_commit_per_s,omitempty"`
	Rollbacks float64 `json:"xact_rollback_per_s,omitempty"`
	BlksRead  float64 `json:"blks_read_per_s,omitempty"`
	BlksHit   float64 `json:"blks_hit_per_s,omitempty"`
	TempFiles float64 `json:"temp_files_per_s,omitempty"`
	TempBytes float64 `json:"temp_bytes_per_s,omitempty"`
	Deadlocks float64 `json:"deadlocks_per_s,omitempty"`
	Sessions  float64 `json:"sessions_per_s,omitempty"`
	// Delta are the counter increases behind the rates.
	Delta DBCounters `json:"-"`
}

// CatalogRel is one system catalog of the connected database.
type CatalogRel struct {
	Name string `json:"rel"`
	// Bytes is pg_total_relation_size: heap, indexes and TOAST.
	Bytes   int64 `json:"bytes"`
	LiveTup int64 `json:"live_tup,omitempty"`
	DeadTup int64 `json:"dead_tup,omitempty"`
	// Ins, Upd, Del are the cumulative n_tup_ins, n_tup_upd, n_tup_del.
	Ins int64 `json:"-"`
	Upd int64 `json:"-"`
	Del int64 `json:"-"`
	// Rates per second since the previous sample (zero on the first).
	InsPerS     float64 `json:"ins_per_s,omitempty"`
	UpdPerS     float64 `json:"upd_per_s,omitempty"`
	DelPerS     float64 `json:"del_per_s,omitempty"`
	GrowthBytes float64 `json:"growth_bytes_per_s,omitempty"`
}

// Sample is one observation of the server (and host).
type Sample struct {
	// Time is when the sample was requested (the statistics snapshot is
	// taken within the round trip that follows).
	Time time.Time `json:"-"`
	// T is Time in seconds since the Session's start (the load test's
	// time base); 0 for a bare Sampler.
	T float64 `json:"t"`
	// Elapsed is the time since the previous sample in seconds, the
	// denominator of every rate; 0 on the first sample.
	Elapsed float64 `json:"dt_s,omitempty"`
	// SpanS and Samples mark a coarse sample of a thinned series (run
	// --soak past its horizon; FoldSamples): the seconds it covers and
	// the number of samples it stands for, its Weight. 0 on a sample.
	SpanS   float64 `json:"span_s,omitempty"`
	Samples int     `json:"samples,omitempty"`
	// RoundTrip is the time from sending the batch to reading its last
	// result.
	RoundTrip time.Duration `json:"-"`

	Sessions Sessions `json:"sessions"`
	// Waits counts active client sessions by "WaitEventType:WaitEvent",
	// "CPU" when not waiting (wait_event_type NULL).
	Waits map[string]int `json:"waits,omitempty"`
	// ParallelWorkers is the number of parallel workers running (folded
	// into their leaders' sessions).
	ParallelWorkers int `json:"parallel_workers,omitempty"`
	// XminAge is the age in transactions of the oldest xmin or xid a
	// backend holds (pg_stat_activity backend_xmin, backend_xid): how far
	// back it holds the xmin horizon; OldestXactS how long, in seconds,
	// the oldest transaction holding one has been open. 0 when none (and
	// in results written before they were recorded).
	XminAge     int `json:"xmin_age,omitempty"`
	OldestXactS int `json:"oldest_xact_s,omitempty"`
	// OpWaits counts the active backends running a key operation (Options.Ops)
	// by operation name, then wait event key as in Waits. A backend counts
	// only when the same execution ran on it from before the sample was
	// sent until its results were read (opmap.Stable); the others are
	// OpUnattributed.
	OpWaits        map[string]map[string]int `json:"op_waits,omitempty"`
	OpUnattributed int                       `json:"op_unattributed,omitempty"`
	// WaitProfile is pg_wait_sampling's profile over the interval (when
	// the extension is there, Info.WaitSampling): the mean number of
	// client backends in each wait event key, from its in-server sampling
	// every profile_period ms; idle waits (Client, Activity) left out. Nil
	// on the first sample and without the extension.
	WaitProfile map[string]float64 `json:"wait_profile,omitempty"`
	// Queries are the longest-running active queries, oldest first
	// (Options.Queries of them at most).
	Queries []Query `json:"-"`

	// DBTotals are the cumulative counters; DB the rates (nil on the
	// first sample).
	DBTotals DBCounters `json:"-"`
	DB       *DBRates   `json:"db,omitempty"`
	// Catalog are pg_class, pg_attribute, pg_depend, pg_index, pg_type of
	// the connected database, by name.
	Catalog []CatalogRel `json:"catalog,omitempty"`
	// OtherCatalogs are other databases' catalogs (Options.Catalogs),
	// set on the samples that read them (every Catalogs.Every), nil on
	// the others.
	OtherCatalogs []DatabaseCatalog `json:"other_catalogs,omitempty"`
	// Churn is the temp-relation file churn and the shared-invalidation
	// estimate derived from Catalog's rates (churn.go); nil on the first
	// sample.
	Churn *Churn `json:"churn,omitempty"`

	// Host is nil when the host is not sampled; HostError says why a host
	// reading failed (the database part is still valid).
	Host      *Host  `json:"host,omitempty"`
	HostError string `json:"host_error,omitempty"`
	// Locks are the relation locks of the backends that hold any
	// (Options.Locks): with an op map, those that ran one key operation
	// throughout the sample, named by it.
	Locks []BackendLocks `json:"-"`
	// opRows, lockRows and profile are raw readings, kept until the
	// sample is complete.
	opRows   []opRow
	lockRows []BackendLocks
	profile  map[string]int64

	// Noise splits the host's CPU between the server, erplab and the
	// rest (proctree.go); nil on the first sample and when the server's
	// processes are not visible.
	Noise *Noise `json:"noise,omitempty"`
}

// CatalogBytes is the summed size of the sampled catalogs, bytes.
func (s *Sample) CatalogBytes() int64 { return catalogBytes(s.Catalog) }

// CatalogGrowth is the summed growth of the sampled catalogs, bytes/s.
func (s *Sample) CatalogGrowth() float64 { return catalogGrowth(s.Catalog) }

// Info describes the server a Sampler watches.
type Info struct {
	// VersionNum is server_version_num, e.g. 150018; Version is
	// server_version.
	VersionNum int    `json:"server_version_num"`
	Version    string `json:"server_version"`
	// Database is the connected database (the catalog figures are its).
	Database string `json:"database"`
	// Role is the session's role (current_user) as an SQL identifier
	// (quote_ident), for the advice to a role without pg_monitor; not
	// kept in results.
	Role string `json:"-"`
	// BackendPID is the sampler's own backend.
	BackendPID int `json:"sampler_backend_pid"`
	// Local is true when the connection is over a Unix socket or a
	// loopback address.
	Local bool `json:"local"`
	// HostSampled is true when /proc is read.
	HostSampled bool `json:"host_sampled"`
	// StatsPrivileged is false when the role lacks pg_read_all_stats
	// (granted by pg_monitor): other users' sessions then count as
	// "other" and their waits and queries are hidden.
	StatsPrivileged bool `json:"stats_privileged"`
	// Statements is pg_stat_statements' version when the extension is
	// created in the connected database ("" otherwise);
	// StatementsPreloaded says whether its library is in
	// shared_preload_libraries.
	Statements          string `json:"pg_stat_statements,omitempty"`
	StatementsPreloaded bool   `json:"pg_stat_statements_preloaded,omitempty"`
	// WaitSampling is true when pg_wait_sampling is created in the
	// connected database and its library loaded; WaitSamplingPeriodMs is
	// its profile_period.
	WaitSampling         bool    `json:"pg_wait_sampling,omitempty"`
	WaitSamplingPeriodMs float64 `json:"pg_wait_sampling_period_ms,omitempty"`
}

// extensions are the optional extensions' schemas in the connected
// database ("" when not created).
type extensions struct {
	pgssSchema, pwsSchema string
}

// Sampler samples one server on one connection. It is not safe for
// concurrent use.
type Sampler struct {
	opts  Options
	cfg   *pgx.ConnConfig // nil when the caller owns conn
	conn  *pgx.Conn
	info  Info
	stmts sqlSet
	host  *hostReader
	tree  *treeReader // nil when the server's processes are not visible

	prev     *Sample
	prevTime time.Time
	// ext are the optional extensions found at attach.
	ext extensions
	// before, after are the op map's snapshots around a sample;
	// sightings count (operation, query_id) pairs seen in samples.
	before, after map[uint32]opmap.State
	sightings     map[sighting]int
	// profile is pg_wait_sampling's cumulative profile at the previous
	// sample.
	profile map[string]int64
	// connected is when the current connection was made (for the
	// backend CPU accounting of Session).
	connected time.Time
	// other is the state of the readings of other databases' catalogs.
	other otherState
}

// Connect opens the sampler's own connection to dsn (libpq key=value or
// URL, or "" for the PG* environment), sets application_name to
// ApplicationName unless the DSN sets one, and returns a Sampler that
// reconnects by itself after losing the connection. Errors are one line
// without passwords (conninfo.Describe). Close the Sampler when done.
func Connect(ctx context.Context, dsn string, opts Options) (*Sampler, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New(conninfo.Describe(err))
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = ApplicationName
	}
	s := &Sampler{opts: opts, cfg: cfg}
	if err := s.normalize(); err != nil {
		return nil, err
	}
	if err := s.reconnect(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// New returns a Sampler on conn, which the caller keeps owning (Close
// does not close it) and must not use concurrently with the Sampler. conn
// must not be inside a transaction: each sample is its own transaction.
func New(ctx context.Context, conn *pgx.Conn, opts Options) (*Sampler, error) {
	s := &Sampler{opts: opts}
	if err := s.normalize(); err != nil {
		return nil, err
	}
	if err := s.attach(ctx, conn); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Sampler) normalize() error {
	o := &s.opts
	if o.Queries < 0 {
		return fmt.Errorf("sampler: queries must be >= 0, got %d", o.Queries)
	}
	if o.QueryChars <= 0 {
		o.QueryChars = DefaultQueryChars
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ProcRoot == "" {
		o.ProcRoot = hostfacts.DefaultProcRoot
	}
	return nil
}

func (s *Sampler) reconnect(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, s.cfg)
	if err != nil {
		return fmt.Errorf("sampler: %s", conninfo.Describe(err))
	}
	if err := s.attach(ctx, conn); err != nil {
		conn.Close(context.Background())
		return err
	}
	return nil
}

// attach reads the server's identity on conn and prepares for sampling.
func (s *Sampler) attach(ctx context.Context, conn *pgx.Conn) error {
	qctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	var info Info
	var ext extensions
	var period string
	if err := conn.QueryRow(qctx, infoSQL).Scan(&info.VersionNum, &info.Version, &info.BackendPID, &info.Database, &info.Role, &info.StatsPrivileged,
		&ext.pgssSchema, &info.Statements, &info.StatementsPreloaded, &ext.pwsSchema, &period); err != nil {
		return fmt.Errorf("sampler: identify server: %w", err)
	}
	if info.VersionNum < minVersion {
		return fmt.Errorf("sampler: PostgreSQL %s is not supported (need 12 or later)", info.Version)
	}
	if ext.pwsSchema != "" && period != "" {
		if ms, err := strconv.ParseFloat(period, 64); err == nil && ms > 0 {
			info.WaitSampling, info.WaitSamplingPeriodMs = true, ms
		}
	}
	s.ext = ext
	info.Local = conninfo.IsLocal(conn.PgConn().Conn().RemoteAddr())
	switch s.opts.Host {
	case HostOn:
		info.HostSampled = true
	case HostAuto:
		info.HostSampled = info.Local
	}
	if info.HostSampled && s.host == nil {
		h, err := newHostReader(s.opts.ProcRoot)
		if err != nil {
			return err
		}
		s.host = h
	}
	if info.HostSampled && (s.tree == nil || !s.tree.owns(info.BackendPID)) {
		s.tree, _ = newTreeReader(s.opts.ProcRoot, info.BackendPID) // nil: no noise figures
	}
	s.conn, s.info, s.stmts, s.connected = conn, info, statementsFor(info.VersionNum), time.Now()
	return nil
}

// Info describes the server (as of the current connection).
func (s *Sampler) Info() Info { return s.info }

// HostCPUs returns the CPU count of the server's host when the host is
// sampled (a local server), the figure the storm crowd rule needs
// (storm.Rule.CPUs); 0 for a remote server or when /proc cannot be read.
func (s *Sampler) HostCPUs() int {
	if !s.info.HostSampled {
		return 0
	}
	fs, err := hostfacts.New(s.opts.ProcRoot, "")
	if err != nil {
		return 0
	}
	cpus, err := fs.CPUInfo()
	if err != nil {
		return 0
	}
	return len(cpus)
}

// Close closes the connection if the Sampler opened it.
func (s *Sampler) Close(ctx context.Context) error {
	if s.cfg == nil || s.conn == nil {
		return nil
	}
	err := s.conn.Close(ctx)
	s.conn = nil
	return err
}

// Sample takes one sample: it reads the host (when sampled), sends the
// statements of all sources in one batch and computes rates against the
// previous sample. A host reading error does not fail the sample (see
// Sample.HostError); a database error does, and leaves the previous
// sample as the base of the next rates. When the connection was lost and
// the Sampler was made by Connect, Sample reconnects first.
func (s *Sampler) Sample(ctx context.Context) (*Sample, error) {
	if s.conn == nil || s.conn.IsClosed() {
		if s.cfg == nil {
			return nil, errors.New("sampler: connection closed")
		}
		if err := s.reconnect(ctx); err != nil {
			return nil, err
		}
	}
	now := time.Now()
	out := &Sample{Time: now}
	var elapsed float64
	if s.prev != nil {
		elapsed = now.Sub(s.prevTime).Seconds()
		out.Elapsed = round3(elapsed)
	}
	if s.host != nil {
		h, err := s.host.read(now)
		if err != nil {
			out.HostError = err.Error()
		} else {
			out.Host = h
		}
	}
	if s.tree != nil {
		out.Noise, _ = s.tree.read() // a failed reading leaves no noise figures
	}

	qctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	b := &pgx.Batch{}
	b.Queue(s.stmts.sessions)
	if s.opts.Queries > 0 {
		b.Queue(s.stmts.queries, s.opts.Queries, s.opts.QueryChars)
	}
	var pids []int32
	if s.opts.Ops != nil {
		s.before = s.opts.Ops.Snapshot(s.before)
		for pid, st := range s.before {
			if st.Op != opmap.Idle {
				pids = append(pids, int32(pid))
			}
		}
		b.Queue(s.stmts.opSessions, pids)
		if s.opts.Locks {
			b.Queue(locksOpsSQL, pids)
		}
	} else if s.opts.Locks {
		b.Queue(locksAllSQL)
	}
	b.Queue(s.stmts.database)
	b.Queue(s.stmts.catalog)
	if s.info.WaitSampling {
		b.Queue(fmt.Sprintf(waitProfileSQL, pgx.Identifier{s.ext.pwsSchema}.Sanitize()))
	}
	br := s.conn.SendBatch(qctx, b)
	err := s.readBatch(br, out)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("sampler: %w", err)
	}
	out.RoundTrip = time.Since(now)
	if s.opts.Ops != nil {
		s.after = s.opts.Ops.Snapshot(s.after)
		s.attribute(out)
	}
	s.attributeLocks(out)

	if s.prev != nil && elapsed > 0 {
		out.DB = dbRates(s.prev.DBTotals, out.DBTotals, elapsed)
		catalogRates(s.prev.Catalog, out.Catalog, elapsed)
		out.Churn = churnOf(out.Catalog, out.Waits, out.Sessions.Active)
		if s.info.WaitSampling && s.profile != nil {
			out.WaitProfile = profileRates(s.profile, out.profile, elapsed, s.info.WaitSamplingPeriodMs)
		}
	}
	if out.profile != nil {
		s.profile, out.profile = out.profile, nil
	}
	if s.otherDue(now) {
		out.OtherCatalogs = s.readOthers(ctx, now)
	}
	s.prev, s.prevTime = out, now
	return out, nil
}

func (s *Sampler) readBatch(br pgx.BatchResults, out *Sample) error {
	// Sessions.
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	out.Waits = map[string]int{}
	var kind, key string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&kind, &key, &n}, func() error {
		switch kind {
		case "s":
			switch key {
			case "active":
				out.Sessions.Active += n
			case "idle":
				out.Sessions.Idle += n
			case "idle in transaction":
				out.Sessions.IdleInTransaction += n
			case "idle in transaction (aborted)":
				out.Sessions.IdleInTransactionAborted += n
			default:
				out.Sessions.Other += n
			}
		case "w":
			out.Waits[key] += n
		case "p":
			out.ParallelWorkers += n
		case "x":
			out.XminAge = n
		case "o":
			out.OldestXactS = n
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sessions: %w", err)
	}

	// Longest-running queries.
	if s.opts.Queries > 0 {
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("queries: %w", err)
		}
		var q Query
		var secs float64
		_, err = pgx.ForEachRow(rows, []any{&q.PID, &q.User, &q.Database, &q.Application, &secs, &q.Wait, &q.Text, &q.Workers}, func() error {
			q.Duration = time.Duration(math.Max(secs, 0) * float64(time.Second))
			q.Text = strings.Join(strings.Fields(q.Text), " ")
			out.Queries = append(out.Queries, q)
			return nil
		})
		if err != nil {
			return fmt.Errorf("queries: %w", err)
		}
	}

	// Backends running key operations.
	if s.opts.Ops != nil {
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("operation sessions: %w", err)
		}
		var r opRow
		_, err = pgx.ForEachRow(rows, []any{&r.pid, &r.wait, &r.queryID}, func() error {
			out.opRows = append(out.opRows, r)
			return nil
		})
		if err != nil {
			return fmt.Errorf("operation sessions: %w", err)
		}
	}

	// Relation locks per backend.
	if s.opts.Locks {
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("locks: %w", err)
		}
		var r BackendLocks
		_, err = pgx.ForEachRow(rows, []any{&r.PID, &r.FastPath, &r.Outside}, func() error {
			out.lockRows = append(out.lockRows, r)
			return nil
		})
		if err != nil {
			return fmt.Errorf("locks: %w", err)
		}
	}

	// Database counters.
	d := &out.DBTotals
	if err := br.QueryRow().Scan(&d.XactCommit, &d.XactRollback, &d.BlksRead, &d.BlksHit,
		&d.TempFiles, &d.TempBytes, &d.Deadlocks, &d.Sessions); err != nil {
		return fmt.Errorf("database: %w", err)
	}

	// Catalog.
	rows, err = br.Query()
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	var c CatalogRel
	_, err = pgx.ForEachRow(rows, []any{&c.Name, &c.Bytes, &c.LiveTup, &c.DeadTup, &c.Ins, &c.Upd, &c.Del}, func() error {
		out.Catalog = append(out.Catalog, c)
		return nil
	})
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}

	// pg_wait_sampling's profile.
	if s.info.WaitSampling {
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("pg_wait_sampling profile: %w", err)
		}
		out.profile = map[string]int64{}
		var n int64
		_, err = pgx.ForEachRow(rows, []any{&key, &n}, func() error {
			out.profile[key] = n
			return nil
		})
		if err != nil {
			return fmt.Errorf("pg_wait_sampling profile: %w", err)
		}
	}
	return nil
}

// counterRate is the per-second rate of a cumulative counter, 0 when it
// went backwards (a statistics reset).
func counterRate(prev, cur int64, elapsed float64) float64 {
	if cur < prev {
		return 0
	}
	return round2(float64(cur-prev) / elapsed)
}

func nonNeg(prev, cur int64) int64 {
	if cur < prev {
		return 0
	}
	return cur - prev
}

func dbRates(a, b DBCounters, elapsed float64) *DBRates {
	r := &DBRates{
		Commits:   counterRate(a.XactCommit, b.XactCommit, elapsed),
		Rollbacks: counterRate(a.XactRollback, b.XactRollback, elapsed),
		BlksRead:  counterRate(a.BlksRead, b.BlksRead, elapsed),
		BlksHit:   counterRate(a.BlksHit, b.BlksHit, elapsed),
		TempFiles: counterRate(a.TempFiles, b.TempFiles, elapsed),
		TempBytes: counterRate(a.TempBytes, b.TempBytes, elapsed),
		Deadlocks: counterRate(a.Deadlocks, b.Deadlocks, elapsed),
		Sessions:  counterRate(a.Sessions, b.Sessions, elapsed),
		Delta: DBCounters{
			XactCommit: nonNeg(a.XactCommit, b.XactCommit), XactRollback: nonNeg(a.XactRollback, b.XactRollback),
			BlksRead: nonNeg(a.BlksRead, b.BlksRead), BlksHit: nonNeg(a.BlksHit, b.BlksHit),
			TempFiles: nonNeg(a.TempFiles, b.TempFiles), TempBytes: nonNeg(a.TempBytes, b.TempBytes),
			Deadlocks: nonNeg(a.Deadlocks, b.Deadlocks), Sessions: nonNeg(a.Sessions, b.Sessions),
		},
	}
	r.TPS = round2(r.Commits + r.Rollbacks)
	return r
}

// catalogRates fills the rates of cur from prev, matched by name.
func catalogRates(prev, cur []CatalogRel, elapsed float64) {
	byName := make(map[string]CatalogRel, len(prev))
	for _, p := range prev {
		byName[p.Name] = p
	}
	for i := range cur {
		p, ok := byName[cur[i].Name]
		if !ok {
			continue
		}
		c := &cur[i]
		c.InsPerS = counterRate(p.Ins, c.Ins, elapsed)
		c.UpdPerS = counterRate(p.Upd, c.Upd, elapsed)
		c.DelPerS = counterRate(p.Del, c.Del, elapsed)
		c.GrowthBytes = round2(float64(c.Bytes-p.Bytes) / elapsed)
	}
}

// WaitKeys returns the keys of waits sorted by count (descending), then
// name.
func WaitKeys(waits map[string]int) []string {
	keys := make([]string, 0, len(waits))
	for k := range waits {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if waits[keys[i]] != waits[keys[j]] {
			return waits[keys[i]] > waits[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }
func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
