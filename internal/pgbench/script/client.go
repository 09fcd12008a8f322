package script

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/erplab/erplab/internal/pgbench/expr"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Mode is pgbench's query mode (-M).
type Mode uint8

// The query modes of pgbench -M.
const (
	// Simple sends each SQL command as a simple-protocol query with the
	// variables' text substituted for :name.
	Simple Mode = iota
	// Extended sends each SQL command through the unnamed statement with
	// :name replaced by $1..$n and the variables' text as untyped (OID 0)
	// parameters.
	Extended
	// Prepared prepares each SQL command once per connection, as "P_<n>",
	// and executes it with the variables' text as parameters.
	Prepared
)

var modeNames = [...]string{"simple", "extended", "prepared"}

// String is the pgbench name of the mode.
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode parses a pgbench -M value: simple, extended or prepared.
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if s == n {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("invalid query mode (-M): %q", s)
}

// Options configure one Client.
type Options struct {
	// Mode is the query mode (pgbench -M).
	Mode Mode
	// ClientID is the :client_id variable (pgbench numbers clients from 0).
	ClientID int
	// Scale is the :scale variable; 0 means 1.
	Scale int
	// Defines are pgbench -D NAME=VALUE variables; they take precedence over
	// the automatic client_id, scale, default_seed and random_seed.
	Defines map[string]string
	// RandomSeed is the :random_seed variable (pgbench --random-seed).
	RandomSeed int64
	// DefaultSeed is the :default_seed variable (seed of hash functions).
	DefaultSeed int64
	// Rand is the client's random state (pgbench's cs_func_rs), advanced by
	// random functions and restored when a transaction is retried. Nil
	// means expr.NewPRNG(uint64(RandomSeed) + uint64(ClientID)).
	Rand *expr.PRNG
	// MaxTries is pgbench --max-tries for serialization failures (40001)
	// and deadlocks (40P01): 0 or 1 means one try (no retry, pgbench's
	// default); a negative value means unlimited tries (pgbench
	// --max-tries=0), bounded by ctx.
	MaxTries int
	// PerCommand measures per-command latencies (pgbench -r); failures and
	// retries per command are counted in any case.
	PerCommand bool
	// Debug receives the lines of debug(); nil means os.Stderr.
	Debug io.Writer
	// ShellOut receives the standard output of \shell; nil means os.Stdout.
	ShellOut io.Writer
	// ShellErr receives the standard error of \shell and \setshell; nil
	// means os.Stderr.
	ShellErr io.Writer
	// Log, when set, receives the error lines pgbench prints without
	// aborting ("pgbench: error: ERROR:  ..." for a failed PREPARE, after
	// which the command is executed anyway, as pgbench does); nil: a
	// failed PREPARE fails the transaction at once.
	Log io.Writer
	// Trace, when set, receives pgbench -d's lines ("pgbench: debug:
	// client 0 sending ...", "... receiving", "... executing \set").
	Trace io.Writer
	// VerboseErrors, when set, receives pgbench --verbose-errors' lines
	// for serialization failures and deadlocks ("pgbench: client 0 got an
	// error in command 3 (SQL) of script 0; ERROR:  ..." and whether the
	// transaction is repeated).
	VerboseErrors io.Writer
}

// ParseDefine splits a pgbench -D argument "NAME=VALUE".
func ParseDefine(s string) (name, value string, err error) {
	for i := 0; i < len(s); i++ {
		if s[i] == '=' {
			if i == 0 || i == len(s)-1 {
				break
			}
			return s[:i], s[i+1:], nil
		}
	}
	return "", "", fmt.Errorf("invalid variable definition: %q", s)
}

// CommandStats accumulates one command's executions for one client
// (pgbench -r).
type CommandStats struct {
	// Count is the number of completed executions that were timed (only
	// with Options.PerCommand).
	Count int64
	// SumUS is their total latency in µs.
	SumUS int64
	// Failures counts transactions that failed at this command (after their
	// last try).
	Failures int64
	// Retries counts transactions retried after a serialization failure or
	// deadlock at this command.
	Retries int64
}

// MergeStats adds src into dst, command by command (len(src) <= len(dst)).
func MergeStats(dst, src []CommandStats) {
	for i := range src {
		dst[i].Count += src[i].Count
		dst[i].SumUS += src[i].SumUS
		dst[i].Failures += src[i].Failures
		dst[i].Retries += src[i].Retries
	}
}

// Result is the outcome of one transaction (one pass of a script, with its
// retries).
type Result struct {
	// Script is the index of the script run.
	Script int
	// Tries is the number of tries (1 + retries).
	Tries int
	// Failed is true when the transaction did not complete: its last try
	// ended with an error (Err).
	Failed bool
	// SQLState is the SQLSTATE of the last try's SQL error, "" if none.
	SQLState string
	// Incomplete is true when the script ended inside a transaction block
	// (rolled back since): pgbench counts such a transaction as processed,
	// then aborts the client (Aborted is set, Failed is not, Err is
	// ErrIncomplete in a *RunError).
	Incomplete bool
	// Aborted is true when pgbench 15-17 would have aborted the client
	// (exit status 2): any failure but a serialization failure or deadlock
	// out of tries, or a cancelled ctx.
	Aborted bool
	// ConnBroken is true when the connection is closed or in an unknown
	// state: the caller must reconnect.
	ConnBroken bool
	// Err is nil on success; otherwise a *RunError (or ctx's error).
	Err error
}

// Retries is the number of retries after serialization failures or
// deadlocks.
func (r Result) Retries() int { return max(r.Tries-1, 0) }

// RunError is an error while running a script: where it happened and why.
// Its text is "file:line: cause", e.g.
// `q.sql:3: set: undefined variable "nosuchvariable"` or
// `q.sql:5: ERROR: could not serialize access ... (SQLSTATE 40001)`.
type RunError struct {
	File    string // script name
	Line    int    // 1-based line of the command
	Command int    // 0-based command index, as in pgbench's messages
	Err     error  // cause; *pgconn.PgError for SQL errors
	Query   string // the SQL text of an SQL error, for its cursor display ("" for none)
}

func (e *RunError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }

// Unwrap returns the cause.
func (e *RunError) Unwrap() error { return e.Err }

// SQLSTATEs retried like pgbench's canRetryError.
const (
	SerializationFailure = "40001"
	DeadlockDetected     = "40P01"
)

type variable struct {
	name    string
	valid   bool // valid_variable_name
	defined bool
	hasVal  bool
	hasStr  bool
	val     expr.Value
	str     []byte
}

// clientScript is a Client's view of one script.
type clientScript struct {
	s     *Script
	remap []int32 // script slot -> client slot
	stats []CommandStats
	cmds  []clientCommand
}

type clientCommand struct {
	exprNames []string // expr.Vars() of \set/\if/\elif
	exprSlots []int32  // their client slots
	prepName  string   // prepared mode
	sd        *pgconn.StatementDescription
	prepared  bool
	gsetNames []string // field names of the last \gset/\aset store
	gsetSlots []int32
}

// Client is one pgbench client: its variables, random state, query mode
// and per-command statistics. It runs one transaction at a time (Run) and
// must not be used by several goroutines at once.
type Client struct {
	opt      Options
	maxTries int // <0 unlimited
	scripts  []clientScript
	vars     []variable
	index    map[string]int32
	rand     *expr.PRNG

	ectx    expr.Context
	evars   evalVars
	cstack  []ifState
	sqlBuf  []byte
	params  [][]byte
	scratch [][]byte
	names   []string
	timer   *time.Timer
	pipe    *pgconn.Pipeline

	// the messages of execBound and the simple mode's await, reused
	bind    pgproto3.Bind
	execute pgproto3.Execute
	sync    pgproto3.Sync
	query   pgproto3.Query

	conn    *pgconn.PgConn
	connPID uint32

	cur       atomic.Pointer[pgconn.PgConn]
	watchDone <-chan struct{}
	stopWatch func() bool
	onCancel  func()
}

// NewClient prepares a client for scripts (the run's scripts, in the order
// Run's script index refers to; prepared statement names are numbered
// across them like pgbench's P_<n>). Errors: an invalid -D name, or (in
// the extended and prepared modes) a SQL command with more than MaxArgs-1
// variable references, reported as a *ParseError.
func NewClient(scripts []*Script, opt Options) (*Client, error) {
	if len(scripts) == 0 {
		return nil, errors.New("no script")
	}
	if opt.Mode > Prepared {
		return nil, fmt.Errorf("invalid query mode %d", opt.Mode)
	}
	if opt.Scale == 0 {
		opt.Scale = 1
	}
	if opt.Debug == nil {
		opt.Debug = os.Stderr
	}
	if opt.ShellOut == nil {
		opt.ShellOut = os.Stdout
	}
	if opt.ShellErr == nil {
		opt.ShellErr = os.Stderr
	}
	c := &Client{opt: opt, index: map[string]int32{}}
	switch {
	case opt.MaxTries < 0:
		c.maxTries = -1
	case opt.MaxTries == 0:
		c.maxTries = 1
	default:
		c.maxTries = opt.MaxTries
	}
	c.rand = opt.Rand
	if c.rand == nil {
		c.rand = expr.NewPRNG(uint64(opt.RandomSeed) + uint64(opt.ClientID))
	}
	names := make([]string, 0, len(opt.Defines))
	for n := range opt.Defines {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !validVarName(n) {
			return nil, fmt.Errorf("option: invalid variable name: %q", n)
		}
		c.setText(c.intern(n), []byte(opt.Defines[n]))
	}
	for _, auto := range []struct {
		name string
		v    int64
	}{{"scale", int64(opt.Scale)}, {"client_id", int64(opt.ClientID)},
		{"default_seed", opt.DefaultSeed}, {"random_seed", opt.RandomSeed}} {
		if _, ok := opt.Defines[auto.name]; !ok {
			c.vars[c.intern(auto.name)].set(expr.Value{Kind: expr.Int, I: auto.v})
		}
	}
	depth := 0
	prepNum := 0
	maxRefs := 0
	c.scripts = make([]clientScript, len(scripts))
	for si, s := range scripts {
		cs := &c.scripts[si]
		cs.s = s
		cs.remap = make([]int32, len(s.vars))
		for i, n := range s.vars {
			cs.remap[i] = c.intern(n)
		}
		cs.stats = make([]CommandStats, len(s.Commands))
		cs.cmds = make([]clientCommand, len(s.Commands))
		for i := range s.Commands {
			cmd := &s.Commands[i]
			cc := &cs.cmds[i]
			if cmd.expr != nil {
				cc.exprNames = cmd.expr.Vars()
				cc.exprSlots = make([]int32, len(cmd.exprVars))
				for k, sl := range cmd.exprVars {
					cc.exprSlots[k] = cs.remap[sl]
				}
			}
			if cmd.Meta != SQL {
				continue
			}
			if opt.Mode != Simple && len(cmd.refs) > MaxArgs-1 {
				return nil, &ParseError{File: s.Name, Line: cmd.Line, Column: cmd.Column,
					Msg: fmt.Sprintf("statement has too many arguments (maximum is %d): %s", MaxArgs-1, cmd.FirstLine)}
			}
			maxRefs = max(maxRefs, len(cmd.refs))
			if opt.Mode == Prepared {
				cc.prepName = "P_" + strconv.Itoa(prepNum)
			}
			prepNum++
		}
		depth = max(depth, s.maxDepth)
	}
	c.cstack = make([]ifState, 0, depth)
	c.params = make([][]byte, 0, maxRefs)
	c.evars.c = c
	c.ectx.Vars = &c.evars
	c.ectx.Rand = c.rand
	c.ectx.Debug = opt.Debug
	c.onCancel = c.cancelCurrent
	return c, nil
}

// Stats returns the per-command statistics of script i, indexed like
// Script.Commands. The slice is the client's own: read it only between
// calls to Run.
func (c *Client) Stats(i int) []CommandStats { return c.scripts[i].stats }

// Rand returns the client's random state.
func (c *Client) Rand() *expr.PRNG { return c.rand }

// Var returns the text of variable name as pgbench substitutes it into SQL;
// ok is false when it is not defined.
func (c *Client) Var(name string) (text string, ok bool) {
	s, found := c.index[name]
	if !found || !c.vars[s].defined {
		return "", false
	}
	return string(c.text(s)), true
}

// Value returns the value of variable name, converting its text as pgbench's
// makeVariableValue does.
func (c *Client) Value(name string) (v expr.Value, ok bool, err error) {
	s, found := c.index[name]
	if !found {
		return expr.Value{}, false, nil
	}
	return c.value(s)
}

// Close releases the client's context watch and timer. The connection
// given to Run is the caller's to close.
func (c *Client) Close() {
	if c.stopWatch != nil {
		c.stopWatch()
		c.stopWatch, c.watchDone = nil, nil
	}
	if c.timer != nil {
		c.timer.Stop()
	}
}

// ---- variables ----

func (c *Client) intern(name string) int32 {
	if s, ok := c.index[name]; ok {
		return s
	}
	s := int32(len(c.vars))
	c.vars = append(c.vars, variable{name: name, valid: validVarName(name)})
	c.index[name] = s
	return s
}

func (v *variable) set(val expr.Value) {
	v.defined, v.hasVal, v.hasStr, v.val = true, true, false, val
}

func (c *Client) setText(s int32, b []byte) {
	v := &c.vars[s]
	v.defined, v.hasVal, v.hasStr = true, false, true
	if v.str == nil {
		v.str = make([]byte, 0, len(b)+8) // non-nil: "" is not NULL
	}
	v.str = append(v.str[:0], b...)
}

// text returns the variable's text as substituted into SQL (pgbench's
// getVariable), or nil when it is not defined.
func (c *Client) text(s int32) []byte {
	v := &c.vars[s]
	if !v.defined {
		return nil
	}
	if !v.hasStr {
		if v.str == nil {
			v.str = make([]byte, 0, 24)
		}
		if v.val.Kind == expr.Int {
			v.str = strconv.AppendInt(v.str[:0], v.val.I, 10)
		} else {
			v.str = append(v.str[:0], v.val.String()...)
		}
		v.hasStr = true
	}
	return v.str
}

// value returns the variable's value (pgbench's makeVariableValue).
func (c *Client) value(s int32) (expr.Value, bool, error) {
	v := &c.vars[s]
	if !v.defined {
		return expr.Value{}, false, nil
	}
	if !v.hasVal {
		// makeVariableValue; the text is not retained
		val, err := expr.ParseVariable(v.name, unsafe.String(unsafe.SliceData(v.str), len(v.str)))
		if err != nil {
			return expr.Value{}, true, err
		}
		v.val, v.hasVal = val, true
	}
	return v.val, true, nil
}

// evalVars gives expressions the client's variables; the names of the
// current command's expression are looked up by a short scan.
type evalVars struct {
	c     *Client
	names []string
	slots []int32
}

func (ev *evalVars) Get(name string) (expr.Value, bool, error) {
	for i, n := range ev.names {
		if n == name {
			return ev.c.value(ev.slots[i])
		}
	}
	if s, ok := ev.c.index[name]; ok {
		return ev.c.value(s)
	}
	return expr.Value{}, false, nil
}

// ---- random ----

// ChooseScript picks a script by weight like pgbench's chooseScript, with
// the thread's script-choice random state (ts_choose_rs); with one script
// it returns 0 without drawing. It returns -1 when all weights are zero.
func ChooseScript(r *expr.PRNG, scripts []*Script) int {
	if len(scripts) == 1 {
		return 0
	}
	var total int64
	for _, s := range scripts {
		total += int64(s.Weight)
	}
	if total <= 0 {
		return -1
	}
	w := r.Rand(0, total-1)
	i := 0
	for {
		w -= int64(scripts[i].Weight)
		i++
		if w < 0 {
			return i - 1
		}
	}
}

// ---- context ----

// watch arranges for a cancellation of ctx to interrupt I/O on conn (by
// setting a past deadline on its socket, which closes it). The watch is
// registered once per distinct ctx, not per query, so that queries
// themselves run with a non-cancellable context and allocate nothing.
func (c *Client) watch(ctx context.Context, conn *pgconn.PgConn) {
	done := ctx.Done()
	if done == nil {
		return
	}
	c.cur.Store(conn)
	if done != c.watchDone {
		if c.stopWatch != nil {
			c.stopWatch()
		}
		c.watchDone = done
		c.stopWatch = context.AfterFunc(ctx, c.onCancel)
	}
}

func (c *Client) cancelCurrent() {
	if conn := c.cur.Load(); conn != nil {
		if nc := conn.Conn(); nc != nil {
			_ = nc.SetDeadline(time.Unix(1, 0))
		}
	}
}
