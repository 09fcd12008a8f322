// Package pglog turns a PostgreSQL 15+ server log into capture events
// (internal/capture, source "pglog"): the client sessions, their simple
// and extended-protocol statements with bind parameters, errors and
// transaction status, ready for erplab replay.
//
// # Input
//
// Three log formats, detected per file (the extension .csv or .json, else
// the first line; a file may be gzip-compressed): csvlog, jsonlog, and
// stderr written with exactly the log_line_prefix of Prefix:
//
//	log_line_prefix = '%m [%p] %q%c %l %e user=%u db=%d app=%a '
//
// (time with milliseconds, pid, then for session processes only: session
// id, line number, SQLSTATE, user, database, application). A stderr file
// whose first lines do not start with it is refused with one line naming
// file:line and the prefix expected. The server must log in English
// (lc_messages = 'C'), with
//
//	log_statement = 'all'               # or log_min_duration_statement = 0, or both
//	log_connections = on
//	log_disconnections = on
//
// Rotated files are given in order; sessions continue across them.
//
// # What becomes an event
//
// connection authorized -> connect (user, database, application_name;
// its time is the connection received line's when there is one);
// statement: -> query; parse NAME: -> prepare (named statements only: an
// unnamed statement travels with its execute); execute NAME: with its
// "parameters: $1 = '...', $2 = NULL" detail -> execute (values as text;
// "fetch from" re-executions of a portal are skipped and counted); the
// prepare of a named statement whose parse is not in the log (log_statement
// alone never logs it, or the session began before the log) is made from
// the execute's text; disconnection -> disconnect. COPY ... FROM STDIN is
// skipped and counted: the log has no data. Fast-path function calls are
// skipped and counted. Lines of background processes (checkpointer,
// autovacuum, ...) and messages that are not about a client statement
// are ignored and counted.
//
// Start times: a statement logged by log_statement is logged when it
// starts; one logged only with its duration is logged when it ends and
// starts at the log time minus the duration. An execute starts at its
// bind (named statement) or its parse (unnamed), when those are logged,
// and its duration is the server's parse + bind + execute time. Times in
// a log have milliseconds: within a session, an event computed earlier
// than the previous one is moved to the previous one's time.
//
// Errors (ERROR, and FATAL or PANIC naming a statement) are attached to
// the statement they belong to: the one running in that session when its
// text matches the error's statement (csvlog query, jsonlog statement,
// stderr STATEMENT line), else a bound execute waiting for its end, else
// a new query event of the error's statement text (a statement that failed
// before it was logged: a syntax error, or any failure when only
// durations are logged). Their SQLSTATE is the csvlog sql_state_code,
// the jsonlog state_code or the stderr %e.
//
// Transaction status after each statement (Event.TxAfter) follows BEGIN,
// START TRANSACTION, COMMIT, END, ROLLBACK, ABORT, PREPARE TRANSACTION and
// ROLLBACK TO SAVEPOINT (recognized by pg_query through the rewrite
// package's bounded parser), and errors: a failure inside a transaction
// block leaves it failed ('E').
//
// A session whose connection is not in the log (it began before) is
// still replayed: a connect event is made at its first statement, with
// the user, database and application of the log line. Sessions still open
// at the end of the input get a disconnect at the last log time.
//
// # Order
//
// A log is in order of logging, not of start: events are sorted by start
// time within a window of log time (Options.Window, default
// DefaultWindow): an event is written once the log has reached its start
// plus the window. A statement that ran longer than the window is written
// at the window's edge, later than it started, and counted (Summary.Late).
// A negative window sorts everything in memory.
//
// # Partial logs
//
// A log with log_min_duration_statement above 0 (and no log_statement)
// holds only the slow statements; a replay of it is not the workload.
// Options.Partial states it; otherwise it is detected, over the statements
// seen before the first event is written, when no statement of ten or
// more logged with their duration took under a millisecond, or when a
// prepared statement is executed in a session whose connection and
// statements are logged but whose parse is not. Either sets
// capture.Header.Partial.
//
// # Bad input
//
// A line that does not parse, a record cut at the end of a file, a
// mixed-in line of another format: one problem each, "file:line: why",
// in Summary.Problems; the rest is converted. A file in which ten lines
// fail before any line of a client session parses is refused whole with
// one problem (an unknown prefix, another format, not a log): the lines
// of background processes look alike under most prefixes and do not
// count. The line and part lines (DETAIL, STATEMENT) of a bad stderr
// message are dropped with it.
package pglog
