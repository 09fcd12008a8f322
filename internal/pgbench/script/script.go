// Package script runs pgbench 15-17 custom scripts unchanged, with erplab's
// own interpreter: it parses a script the way pgbench does (SQL commands
// split like psql's lexer, backslash meta-commands, \gset/\aset, \if
// blocks, pipelines) and executes one pass of a script — one pgbench
// "transaction" — for one client on a *pgconn.PgConn, in the simple,
// extended or prepared query mode of pgbench -M, with pgbench's retry rules
// for serialization failures and deadlocks (--max-tries) and per-command
// latencies (-r).
//
// Sources: src/bin/pgbench/pgbench.c (ParseScript, process_backslash_command,
// postprocess_sql_command, parseQuery, assignVariables, advanceConnectionState,
// executeMetaCommand, sendCommand, readCommandResponse, runShellCommand,
// evaluateSleep, doRetry, printResults), src/bin/pgbench/exprscan.l,
// src/fe_utils/psqlscan.l and the "pgbench" reference page of PostgreSQL 15,
// 16 and 17. Expressions (\set, \if, \elif) are package
// internal/pgbench/expr.
//
// Variables are substituted exactly where pgbench substitutes them: every
// ":name" of the SQL text whose first character is a letter, "_" or a
// non-ASCII byte, also inside quoted literals and comments ("::" casts
// and runs of colons are skipped). In the simple mode an undefined
// variable is left as written; in the extended and prepared modes each
// reference becomes a $n parameter and an undefined variable is NULL.
//
// # Deviations from pgbench
//
//   - A SQL error other than a serialization failure or a deadlock fails the
//     transaction (Result.Failed, Result.Aborted) and the client goes on with
//     its next transaction, the connection rolled back to idle; pgbench 15-17
//     aborts the client instead (exit status 2). Meta-command errors (\set
//     division by zero, \gset without a row, ...) are handled the same way.
//     Such failures are counted in CommandStats.Failures, which pgbench
//     15-17 only does for serialization failures and deadlocks.
//   - Parse errors carry the line and column of the faulty word in the file,
//     also inside continued (backslash-newline) lines; pgbench prints the line
//     of the backslash and a column counted from it.
//   - "\if without matching \endif" points at the unmatched \if.
//   - \syncpipeline (pgbench 17) is accepted whatever the server version.
//   - A failed PREPARE fails the transaction at once with the server's error
//     unless Options.Log is set (then, as pgbench, the error is printed and
//     the command fails on "prepared statement does not exist"). In the
//     prepared mode, the first Run on a connection deallocates statements
//     named like the client's (P_<n>) left on it.
//
// As pgbench: COPY FROM STDIN / TO STDOUT fails the transaction ("COPY is
// not supported in pgbench, aborting", found with the PostgreSQL grammar
// when the script is parsed); a script ending inside a transaction block
// counts the transaction and aborts the client (Result.Incomplete).
//   - \shell and \setshell commands have no 256-byte length limit.
//   - \sleep durations are 64-bit (pgbench's int overflows past ~35 minutes).
//   - Retries are bounded by Options.MaxTries and by ctx, not by -L.
package script

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/erplab/erplab/internal/pgbench/expr"
)

// MaxArgs is pgbench's MAX_ARGS: at most MaxArgs-1 variable references in
// one SQL command in the extended and prepared modes, and MaxArgs-1
// arguments to a meta-command.
const MaxArgs = 256

// ParseError is a script syntax error. Its text is "file:line:column: msg"
// on one line; Msg uses pgbench's wording, e.g.
// `unrecognized time unit, must be us, ms or s (week) in command "sleep"`.
type ParseError struct {
	File   string
	Line   int // 1-based
	Column int // 1-based, in bytes
	Msg    string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

// Meta identifies a command: SQL or one of pgbench's backslash commands.
type Meta uint8

// The command kinds. \gset and \aset are not commands of their own: they
// mark the SQL command before them (Command.Gset, Command.Aset).
const (
	SQL Meta = iota
	Set
	SetShell
	Shell
	Sleep
	If
	Elif
	Else
	Endif
	StartPipeline
	SyncPipeline
	EndPipeline
)

var metaNames = [...]string{"SQL", "set", "setshell", "shell", "sleep", "if", "elif", "else", "endif",
	"startpipeline", "syncpipeline", "endpipeline"}

// String is the pgbench name of the command, e.g. "set", or "SQL".
func (m Meta) String() string {
	if int(m) < len(metaNames) {
		return metaNames[m]
	}
	return "meta(" + strconv.Itoa(int(m)) + ")"
}

// Command is one parsed command of a script (pgbench's struct Command).
// Commands are numbered from 0 in script order, as in pgbench's messages;
// \gset/\aset do not take a number.
type Command struct {
	Meta Meta
	// Line and Column (1-based) locate the command's first character (its
	// backslash for a meta-command).
	Line, Column int
	// FirstLine is the first line of the command as pgbench -r prints it:
	// the whole meta-command up to its end of line (continuations
	// included), or the first line of the SQL text, at most 127 bytes.
	FirstLine string
	// Text is the SQL text as sent in the simple mode before variable
	// substitution (SQL commands only), ending with its ";" if it had one.
	Text string
	// Gset is set when \gset follows the SQL command, Aset for \aset;
	// Prefix is their variable-name prefix.
	Gset, Aset bool
	Prefix     string

	// Arguments of meta-commands, as words (argv[1:] in pgbench terms).
	args []string
	// expression of \set, \if, \elif
	expr     *expr.Expr
	exprVars []int32 // script slots of expr.Vars(), same order
	// target slot of \set and \setshell
	target int32
	// \sleep: literal microsecond multiplier and value, or a variable slot
	sleepVar  int32 // -1 for a literal
	sleepUS   int64 // literal amount (before unit)
	sleepUnit int64 // microseconds per unit
	// \shell and \setshell words: literal text or variable slot (-1)
	shellWords []shellWord

	// SQL: variable references in Text, in order
	refs []sqlRef
	// SQL: Text with the references replaced by $1..$n (extended/prepared)
	paramSQL string
	// index of the matching \endpipeline for \startpipeline, else -1
	pipeEnd int
	// SQL: a COPY from standard input or to standard output, which
	// pgbench does not support (the client aborts)
	copyStdio bool
}

type shellWord struct {
	text string // literal text, or the variable name for error messages
	slot int32  // -1 for a literal
}

// sqlRef is one :name occurrence in a SQL command's text.
type sqlRef struct {
	off, end int // byte range of ":name" in Text
	slot     int32
}

// Script is a parsed pgbench script. It is immutable and may be shared by
// many clients.
type Script struct {
	// Name is the file name given to Parse, or pgbench's description of a
	// builtin script, e.g. "<builtin: select only>".
	Name string
	// Weight is the script's selection weight (pgbench -f file@W, default 1).
	Weight int
	// Commands in script order.
	Commands []Command

	vars     []string // variable names referenced, indexed by slot
	maxDepth int      // deepest \if nesting
}

// Vars returns the names of the variables the script references, in order
// of first appearance.
func (s *Script) Vars() []string { return append([]string(nil), s.vars...) }

// ParseWeighted splits a pgbench -f/-b argument "name@weight" into name and
// weight (1 when there is no "@"), like pgbench's parseScriptWeight (the last
// "@" separates). Errors use pgbench's wording: `invalid weight
// specification: @one`, `weight specification out of range (0 ..
// 2147483647): -1`.
func ParseWeighted(spec string) (name string, weight int, err error) {
	i := strings.LastIndexByte(spec, '@')
	if i < 0 {
		return spec, 1, nil
	}
	name, w := spec[:i], spec[i+1:]
	n, perr := strconv.ParseInt(w, 10, 64)
	if perr != nil {
		if errors.Is(perr, strconv.ErrRange) {
			return "", 0, fmt.Errorf("weight specification out of range (0 .. %d): %s", int32max, w)
		}
		return "", 0, fmt.Errorf("invalid weight specification: %s", spec[i:])
	}
	if n < 0 || n > int32max {
		return "", 0, fmt.Errorf("weight specification out of range (0 .. %d): %d", int32max, n)
	}
	return name, int(n), nil
}

const int32max = 1<<31 - 1

// validVarName is pgbench's valid_variable_name: ASCII letters, "_" and
// non-ASCII bytes, then also digits.
func validVarName(name string) bool {
	if name == "" || !varStart(name[0]) {
		return false
	}
	for i := 1; i < len(name); i++ {
		if !varChar(name[i]) {
			return false
		}
	}
	return true
}

func varStart(c byte) bool {
	return c >= 0x80 || c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

func varChar(c byte) bool { return varStart(c) || (c >= '0' && c <= '9') }

// ValidVarName reports whether name is a valid pgbench variable name
// (pgbench's valid_variable_name), as -D NAME=VALUE requires.
func ValidVarName(name string) bool { return validVarName(name) }
