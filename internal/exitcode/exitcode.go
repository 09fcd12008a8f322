package exitcode

import "errors"

// Code is a process exit status, 0..255.
type Code int

// The exit codes erplab uses; see the package doc for when each applies.
const (
	OK             Code = 0
	Error          Code = 1
	Usage          Code = 2
	ScriptRun      Code = 2 // deliberately equal to Usage: pgbench's code for errors during a run
	CheckFailed    Code = 3
	DoctorWarning  Code = 4
	DoctorCritical Code = 5
	// ResultsIncomplete: a run's results file could not be written, a
	// merge's segments are missing, a doctor's checks could not run.
	ResultsIncomplete Code = 6
	// ServerNotAnswering: the server stopped answering during a run, or
	// was lost (every operation failing for want of it).
	ServerNotAnswering Code = 7
	Threshold          Code = 99
	Interrupted        Code = 130
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
		{OK, "OK", "success; for `erplab doctor`, nothing worse than info and every check could run"},
		{Error, "Error", "runtime failure (server unreachable, file unreadable, ...); in script mode (`run -f`) also a bad pgbench option, as pgbench exits 1"},
		{Usage, "Usage", "bad command line: unknown command or flag, bad flag value, wrong number of arguments, options that exclude each other"},
		{ScriptRun, "ScriptRun", "script mode (`run -f`): clients hit errors during the run, as pgbench exits 2 (deliberately equal to Usage)"},
		{CheckFailed, "CheckFailed", "`erplab check`: totals rows differ from their movements"},
		{DoctorWarning, "DoctorWarning", "`erplab doctor`: the worst finding is a warning"},
		{DoctorCritical, "DoctorCritical", "`erplab doctor`: the worst finding is critical"},
		{ResultsIncomplete, "ResultsIncomplete", "`run`: a results file could not be written (full disk): the stream stopped mid-run or the final document failed; the summary was printed, one line says where everything so far is, and what was written is valid (wins over 7); `merge`: segments missing, nothing written; `doctor`: nothing worse than info found but checks could not run (the role lacks pg_monitor, a query failed): the report and one line on stderr say which and why (4 and 5 win over 6)"},
		{ServerNotAnswering, "ServerNotAnswering", "`run`: the server stopped answering (no answer, not even to the probe, with operations in flight) or was lost (every operation failing: unreachable, shutting down, or not back from start-up / recovery) and had not come back by the end of the run or for `--server-gone-after`; results say from when"},
		{Threshold, "Threshold", "a threshold failed: `run --apdex-min`, `compare --fail-on-regression` (k6's 99)"},
		{Interrupted, "Interrupted", "interrupted by SIGINT, SIGTERM or SIGHUP (the shell's 128+2); results so far are written; `erplab pgbench` exits 128 + the signal instead (Interruption), as pgbench killed by it"},
	}
}

// Coder is implemented by errors that carry an exit code. Of finds it
// with errors.As anywhere in an error's chain.
type Coder interface {
	error
	ExitCode() Code
}

// coded is the error With returns.
type coded struct {
	code Code
	err  error
}

func (e *coded) Error() string  { return e.err.Error() }
func (e *coded) Unwrap() error  { return e.err }
func (e *coded) ExitCode() Code { return e.code }

// With returns err carrying code: its message and chain are err's
// (errors.Is/As see through it). With of a nil err is nil.
func With(code Code, err error) error {
	if err == nil {
		return nil
	}
	return &coded{code: code, err: err}
}

// Of returns the exit code for err: OK for nil, the code of the outermost
// Coder in its chain, Error when none carries one.
func Of(err error) Code {
	if err == nil {
		return OK
	}
	var c Coder
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	return Error
}
