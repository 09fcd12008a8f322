package workload

import (
	"context"
	"github.com/erplab/erplab/internal/opmap"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/exitcode"
	"github.com/erplab/erplab/internal/results"
)

// What only some workloads have is an optional interface: a command
// type-asserts the Workload that [Build] returned and says "workload X has
// no ..." when it is missing.

// InitOptions are the parameters of [Initializer.InitData]: the options of
// `erplab init` every workload shares (its own ones are the flags of
// Meta.InitFlags, given to Meta.New).
type InitOptions struct {
	// Scale is the data scale factor, Meta.DefaultScale when --scale was
	// not given.
	Scale float64
	// ScaleGiven tells that --scale was given.
	ScaleGiven bool
	// Seed makes the data deterministic (--seed); SeedGiven tells that
	// it was given (a workload whose data has no seed refuses it).
	Seed      uint64
	SeedGiven bool
	// Parallel is the number of COPY streams and concurrent index builds
	// (0: one per CPU).
	Parallel int
	// Force allows writing into a database that holds tables erplab did
	// not create.
	Force bool
	// Progress, when not nil, receives human-readable progress lines.
	Progress func(format string, args ...any)
}

// InitStats is what [Initializer.InitData] did.
type InitStats struct {
	// Rows is the number of rows loaded; Bytes the size the data set
	// takes in the database, bytes; Duration the wall time of the load.
	Rows, Bytes int64
	Duration    time.Duration
	// Reused is true when the database already held this data set and
	// nothing was done.
	Reused bool
	// Summary is the line `erplab init` prints at the end (no newline).
	Summary string
}

// Initializer is implemented by workloads whose data `erplab init` builds
// apart from a run (erp's data set, pgbench's tables).
type Initializer interface {
	// CheckInit validates o (and the workload's own init options) before
	// anything connects; its error is a one-line usage error.
	CheckInit(o InitOptions) error
	// InitConns is the size of the connection pool InitData wants for
	// o.Parallel.
	InitConns(o InitOptions) int
	// InitData creates the schema and loads the data into the database of
	// pool. It refuses a database holding foreign tables unless o.Force
	// (error wrapping ErrForeignDatabase).
	InitData(ctx context.Context, pool *pgxpool.Pool, o InitOptions) (InitStats, error)
	// InitInterrupted is what `erplab init` says when InitData was
	// interrupted: what is left in the database and what to do.
	InitInterrupted() string
}

// Dropper is implemented by workloads that can remove their data set
// (`erplab init --drop`).
type Dropper interface {
	// DropData removes what the workload created in the database of
	// pool, nothing else, and returns the line to print (also when there
	// was nothing to drop). Data it cannot prove erplab created (e.g.
	// pgbench tables made by pgbench -i) is refused with an error
	// wrapping ErrForeignDatabase unless force (--force).
	DropData(ctx context.Context, pool *pgxpool.Pool, force bool) (string, error)
}

// Checker is implemented by workloads that can verify the consistency of
// their data set (`erplab check`).
type Checker interface {
	// CheckData verifies the data set read-only and writes its report to
	// out. It returns an error wrapping ErrCheckFailed when the data is
	// inconsistent, another error when it cannot check (no data set, a
	// connection error).
	CheckData(ctx context.Context, pool *pgxpool.Pool, out io.Writer) error
}

// ErrCheckFailed is wrapped by [Checker.CheckData] errors when the data
// is inconsistent: it carries exitcode.CheckFailed (`erplab check` exits
// 3), as CheckFailed's errors do.
var ErrCheckFailed = exitcode.New(exitcode.CheckFailed, "data check failed")

// CheckFailed returns an error saying msg that wraps ErrCheckFailed, for
// [Checker.CheckData].
func CheckFailed(msg string) error { return checkFailed(msg) }

type checkFailed string

func (e checkFailed) Error() string           { return string(e) }
func (e checkFailed) Is(target error) bool    { return target == ErrCheckFailed }
func (e checkFailed) ExitCode() exitcode.Code { return exitcode.CheckFailed }

// Driver is implemented by workloads that drive their own load instead of
// the engine's virtual users: a replay of captured sessions
// (`--workload replay`), whose load is the captured sessions with their
// own pacing. loadtest.Run sets the data up (Setup) as for any workload,
// closes its connections, then calls Drive instead of running the engine,
// and writes the document Drive returns as the run's results (so ab's
// rounds and verdicts and capacity's steps read it as any run's).
type Driver interface {
	// Drive runs the load on the database of o.DSN (which Setup prepared)
	// and returns the standard results document of the run: its status
	// "interrupted" when ctx ended it. An error is one line without
	// passwords, for a run that could not take place.
	Drive(ctx context.Context, o DriveOptions) (*results.Document, error)
	// Connections is the most connections Drive opens at once for
	// DriveOptions.Users users, so that a server started for the run is
	// sized for them.
	Connections(users int) int
}

// DriveOptions are the parameters of [Driver.Drive].
type DriveOptions struct {
	// DSN is the run's database (a remedy's proxy in between, for ab).
	DSN string
	// Users is the load profile's highest number of virtual users: for a
	// replay, the multiple of its own --users-x (erplab capacity's step).
	Users int
	// Interval is the time-series resolution; OnInterval, when set,
	// receives each closed interval as it closes (the results stream).
	Interval   time.Duration
	OnInterval func(results.Interval)
	// Version, CommandLine and RunID go into the document as `erplab run`
	// writes them.
	Version     string
	CommandLine []string
	RunID       string
	// Out receives the lines a run prints (what was copied, the
	// summary).
	Out io.Writer
	// Observe, when set, is called by Drive as its load starts, with the
	// DSN of the database the load runs in and the load's start (the
	// results' time base); Drive calls the function it returns once the
	// load has ended, before that database goes away.
	// ops maps the load's backends to the operations they run (the
	// samplers' waits per operation).
	Observe func(dsn string, start time.Time, ops *opmap.Map) (stop func())
}

// DataVerifier is implemented by workloads that can tell, read-only,
// whether the database holds the data set their key operations need. A
// run that does not set the data up (a segment of a run split over
// several load machines: erplab init made the data before the agents
// started) asks before the load and refuses a database without it.
type DataVerifier interface {
	// VerifyData returns nil when the data set is there, else a one-line
	// error saying what is missing and how to make it.
	VerifyData(ctx context.Context, pool *pgxpool.Pool) error
}

// Crowd is implemented by workloads that hold idle sessions beside their
// load (erp --idle-sessions): the field's hundreds of idle sessions
// beside the active ones, the backends that fall behind in the shared
// invalidation queue and are reset. loadtest.Run opens IdleSessions()
// connections before the load, each runs one statement and then stays
// idle (not in a transaction) until the load ends; a server started for
// the run is sized for them too.
type Crowd interface {
	IdleSessions() int
}
