package pglog

import (
	"fmt"
	"time"

	"github.com/erplab/erplab/internal/capture"
)

// Format is a server log format (log_destination).
type Format string

// The formats read.
const (
	FormatCSV    Format = "csvlog"
	FormatJSON   Format = "jsonlog"
	FormatStderr Format = "stderr"
)

// Prefix is the log_line_prefix a stderr log must be written with.
const Prefix = "%m [%p] %q%c %l %e user=%u db=%d app=%a "

// Settings are the server settings a log to convert is written with, one
// per line as in postgresql.conf (for help texts).
const Settings = `lc_messages = 'C'
log_statement = 'all'                 # or log_min_duration_statement = 0, or both
log_connections = on
log_disconnections = on
log_destination = 'csvlog'            # or 'jsonlog', or 'stderr' with:
log_line_prefix = '` + Prefix + `'`

// DefaultWindow is the sorting window of Options.Window.
const DefaultWindow = time.Minute

// Options tune a conversion.
type Options struct {
	// Format of every file; "" detects it per file.
	Format Format
	// Partial, when not "", says the log holds only some statements
	// (e.g. "log_min_duration_statement = 100ms") and is written to
	// capture.Header.Partial; "" lets the conversion detect it.
	Partial string
	// Window is the sorting window in log time (0: DefaultWindow;
	// negative: sort the whole log in memory).
	Window time.Duration
	// Location is the time zone of log times whose zone is a name other
	// than UTC or GMT (e.g. "MSK"); nil: the local zone when its
	// abbreviation matches, else UTC (with a warning).
	Location *time.Location
}

// MaxProblems is how many problems a Summary keeps; more are counted.
const MaxProblems = 1000

// Summary is what a conversion read, wrote and skipped; the results of a
// replay carry it.
type Summary struct {
	Files  []string          `json:"files"`
	Format map[string]Format `json:"format"` // per file
	Lines  int64             `json:"lines"`  // physical lines read
	// Records is the log messages parsed (a message with its detail and
	// statement lines is one).
	Records  int64                  `json:"records"`
	Sessions int                    `json:"sessions"`
	Events   map[capture.Kind]int64 `json:"events"`
	// Failed is the statements written with a SQLSTATE.
	Failed int64 `json:"failed"`
	// BadLines is the lines skipped as bad input, each named in Problems
	// (a refused file counts all its lines).
	BadLines int64 `json:"bad_lines"`
	// Problems: "file:line: why", one per bad line or refused file, the
	// first MaxProblems; Dropped counts the rest.
	Problems []string `json:"problems,omitempty"`
	Dropped  int64    `json:"problems_dropped,omitempty"`
	// Ignored is the messages of background processes and those not about
	// a client statement.
	Ignored int64 `json:"ignored"`
	// Skipped statements the log cannot replay: COPY FROM STDIN (no
	// data), fast-path function calls, "fetch from" re-executions.
	Copy     int64 `json:"copy_skipped"`
	FastPath int64 `json:"fastpath_skipped"`
	Fetch    int64 `json:"fetch_skipped"`
	// Synthetic is the sessions whose connection is not in the log;
	// OpenAtEnd those still connected at its end.
	Synthetic int `json:"synthetic_connects"`
	OpenAtEnd int `json:"open_at_end"`
	// Late is the events written later than their start, having arrived
	// after the sorting window (see Options.Window).
	Late int64 `json:"late"`
	// Partial is why the log is taken as partial ("" when it is not).
	Partial  string   `json:"partial,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// problem records one bad-input line (or a refused file: lines > 1).
func (s *Summary) problem(lines int64, at, format string, a ...any) {
	s.BadLines += lines
	if len(s.Problems) >= MaxProblems {
		s.Dropped++
		return
	}
	s.Problems = append(s.Problems, at+": "+fmt.Sprintf(format, a...))
}

// warn records a warning once.
func (s *Summary) warn(format string, a ...any) {
	w := fmt.Sprintf(format, a...)
	for _, old := range s.Warnings {
		if old == w {
			return
		}
	}
	s.Warnings = append(s.Warnings, w)
}
