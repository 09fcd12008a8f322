package exitcode

import "errors"

// Code is a process exit status, 0..255.
type Code int

// The exit codes erplab uses; see the package doc for when each applies.
const (
	OK             Code = 0
	Error          Code = 1
	Usage          Code = 2
	ScriptRun      Code = 2 // deliberately equal to Usage: pgbench's code for errors during a run (erplab pgbench)
	CheckFailed    Code = 3
	DoctorWarning  Code = 4
	DoctorCritical Code = 5
	// ResultsIncomplete: a run's results file could not be written, a
	// merge's segments are missing, a doctor's checks could not run.
	ResultsIncomplete Code = 6
	// ServerNotAnswering: the server stopped answering during a run, or
	// was lost (every operation failing for want of it).
	ServerNotAnswering Code = 7
	// RunFailed: every attempt of every key operation of a run failed,
	// the server answering with errors (not a lost server: that is 7).
	RunFailed Code = 8
	// Collapse: run --soak --stop-on-collapse ended the run when a
	// window's APDEX or active sessions crossed the limit.
	Collapse    Code = 9
	Threshold   Code = 99
	Interrupted Code = 130
)

// Entry is one row of the table: a code, its constant's name and what it
// means.
type Entry struct {
	Code    Code
	Name    string
	Meaning string
}

// Table returns every code with its meaning, in ascending order of code
// (ScriptRun after Usage, which it equals). A fresh slice each call.
func Table() []Entry {
	return []Entry{
		{OK, "OK", "success; for `erplab doctor`, nothing worse than info (ok, info, not checked for a missing prerequisite) and every check could run"},
		{Error, "Error", "runtime failure (server unreachable, file unreadable, ...), one line on stderr; `erplab run` also when pgbench scripts (`run -f`/`-b`) stopped on errors (clients aborted); `erplab pgbench` also a script or pgbench option error, as pgbench exits 1"},
		{Usage, "Usage", "bad command line: unknown command or flag, bad flag value, wrong number of arguments, options that exclude each other, a `--dsn` libpq cannot parse (`port=abc`) or that the shell split (`--dsn host=h port=1` unquoted: `--dsn takes one argument: quote it: --dsn 'host=h port=1'`, also `--upstream`; not for a `postgres://` URL, whose parameters go after `?`), a `--metrics-addr` that is not HOST:PORT, a `proxy --metrics` that is not HOST:PORT or cannot be bound (a port in use), another workload's option (`--temp-style` with `--workload smoke`), a bad pgbench script of `run -f` (file:line:column), an `ab` variant name given twice, a remedy the workload cannot take, what `ab --dsn` cannot do on a server erplab did not start (`--cold`, the tmpfs remedy, a role without CREATEDB or the right to ALTER SYSTEM a setting, a setting needing a restart or already set by ALTER SYSTEM), or (`capacity --variant`) a remedy this process cannot apply (tmpfs as non-root, `--tmpfs-size banana`) or an existing `--out` (all checked before anything starts)"},
		{ScriptRun, "ScriptRun", "`erplab pgbench`: clients hit errors (aborted) during the run, as pgbench exits 2 (deliberately equal to Usage, as pgbench's; `erplab run -f` exits with run's codes: 1)"},
		{CheckFailed, "CheckFailed", "`erplab check`: totals rows differ from their movements"},
		{DoctorWarning, "DoctorWarning", "`erplab doctor`: the worst finding is a warning"},
		{DoctorCritical, "DoctorCritical", "`erplab doctor`: the worst finding is critical"},
		{ResultsIncomplete, "ResultsIncomplete", "`erplab run`: a results file could not be written (full disk): the stream stopped mid-run or the final document failed; the summary was printed, one line says where everything so far is, and what was written is valid (wins over 7); `erplab merge`: the set of segments is incomplete (missing or marked incomplete) and `--allow-partial` was not given: nothing written; `erplab doctor`: nothing worse than info found, but checks could not run (a role without `pg_monitor`, a failed query): the report and one line on stderr say which and why (4 and 5 win over 6)"},
		{ServerNotAnswering, "ServerNotAnswering", "`erplab run`: the server stopped answering (nothing came back, not even to the probe, with operations in flight) or was lost (every operation failing: unreachable, shutting down, or not back from start-up / recovery) and had not come back by the end of the run or for `--server-gone-after`; results say from when (pgbench scripts of `run -f` too; `erplab pgbench` exits 2 as pgbench's aborted clients)"},
		{RunFailed, "RunFailed", "`erplab run`: the run failed: every attempt of every key operation failed with an error while the server answered (e.g. the workload's tables missing: a segment on a database `erplab init` did not prepare; a segmented run refuses that before the load, exit 1); the summary names the errors by SQLSTATE and the results are written, status `failed: ...`, a segment marked incomplete; `erplab ab`: a round's run failed so (ab stops there, the runs so far kept); `erplab merge`: every attempt in the merged segments failed (the merged document is written, status `failed: ...`); `erplab capacity` judges such a step bad instead"},
		{Collapse, "Collapse", "`erplab run --soak --stop-on-collapse`: a window's APDEX fell below `--collapse-apdex` or its active sessions reached `--collapse-active`: the run was stopped there (status `aborted: collapse ...`), the summary printed and the results so far written, with the soak's windows, trends and warnings in `extra.soak`"},
		{Threshold, "Threshold", "a threshold failed: `run --apdex-min`, `capacity --require`, `compare --fail-on-regression` (k6 exits 99 too)"},
		{Interrupted, "Interrupted", "stopped by SIGINT, SIGTERM or SIGHUP (the shell's 128+2), by every long-running command (`run`, `init`, `disk`, `ab`, `doctor fix`, ...); results so far are written; a second signal exits at once, without cleaning up (a throwaway server dies with erplab and the next command removes its directory); `erplab proxy` is the exception: its first signal is a safe shutdown that exits 0, and a second one ends the remaining sessions (FATAL 57P01 to each) and exits 130 after the summary, a third at once; `erplab pgbench` (a run or `-i`) exits instead as the shell reports pgbench killed by the signal, 128 + its number: 130 SIGINT, 143 SIGTERM, 129 SIGHUP. A signal erplab started with ignored (`nohup` ignores SIGHUP; a non-interactive shell starts `&` jobs with SIGINT ignored) stays ignored, for every command"},
	}
}

// Coder is implemented by errors that carry an exit code. Of finds it
// anywhere in an error's chain (first code wins).
type Coder interface {
	error
	ExitCode() Code
}

// coded is the error With, New and Override return.
type coded struct {
	code     Code
	err      error
	override bool
}

func (e *coded) Error() string  { return e.err.Error() }
func (e *coded) Unwrap() error  { return e.err }
func (e *coded) ExitCode() Code { return e.code }

// With returns err carrying code: its message and chain are err's
// (errors.Is/As see through it). With of a nil err is nil. A code err
// already carries wins over code (see Of).
func With(code Code, err error) error {
	if err == nil {
		return nil
	}
	return &coded{code: code, err: err}
}

// New returns a new error with text msg that carries code: the sentinel
// of a condition whose code is known where it is declared
// (errors.Is(err, ErrX) finds it through any wrapping).
func New(code Code, msg string) error {
	return &coded{code: code, err: errors.New(msg)}
}

// Override returns err carrying code in place of every code its chain
// carries: the one exception to "first code wins", for a command that
// speaks another program's codes (run's script mode exits as pgbench,
// 2 for a lost server). Override of a nil err is nil.
func Override(code Code, err error) error {
	if err == nil {
		return nil
	}
	return &coded{code: code, err: err, override: true}
}

// Of returns the exit code for err: OK for nil, Error when nothing in its
// chain carries a code, else the code attached first: the innermost
// Coder, where the condition was detected, wins over any code a caller
// wrapped around it later (With(Interrupted, fmt.Errorf("x: %w",
// With(Usage, e))) is Usage). Of walks the chain as errors.As does, depth
// first, and in a joined error (errors.Join, several %w) the first member
// that carries a code wins. An Override met on the way ends the walk with
// its code.
func Of(err error) Code {
	if err == nil {
		return OK
	}
	if c, ok := first(err); ok {
		return c
	}
	return Error
}

// first is the code attached first in err's tree (see Of) and whether
// any is.
func first(err error) (Code, bool) {
	if c, ok := err.(*coded); ok && c.override {
		return c.code, true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil {
			if c, ok := first(inner); ok {
				return c, true
			}
		}
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if e == nil {
				continue
			}
			if c, ok := first(e); ok {
				return c, true
			}
		}
	}
	if c, ok := err.(Coder); ok {
		return c.ExitCode(), true
	}
	return 0, false
}
