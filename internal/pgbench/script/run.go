package script

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"time"
	"unsafe"

	"github.com/erplab/erplab/internal/pgbench/expr"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// ifState is fe_utils/conditional.h's ifState, as pgbench uses it.
type ifState uint8

const (
	ifTrue      ifState = iota // in a true branch
	ifFalse                    // in a false branch, looking for \elif/\else
	ifIgnored                  // in a nested \if of a skipped branch, or done
	ifElseTrue                 // in an \else after false branches
	ifElseFalse                // in an \else after a true branch
)

// failure is a failed try: at which command, why, and whether pgbench
// would retry it.
type failure struct {
	cmd       int
	err       error
	sqlState  string
	query     string // the SQL text libpq would keep for the error ("" for none)
	retryable bool
	// incomplete: the script ended inside a transaction block
	incomplete bool
}

// Run executes one transaction: one pass of script number script (an index
// into the scripts given to NewClient) on conn, retrying it from its first
// command after a serialization failure or deadlock while tries remain
// (pgbench's CSTATE_ERROR/CSTATE_RETRY: the open transaction is rolled back
// and the client's random state restored; variables keep their values).
// A transaction that fails is rolled back too, so that conn is idle again
// unless Result.ConnBroken.
//
// Cancelling ctx interrupts a \sleep or a shell command, and I/O on conn by
// closing the connection; Run then returns ctx's error. Prepared statements
// are made once per connection (a different conn, or one with another
// backend PID, starts over).
func (c *Client) Run(ctx context.Context, conn *pgconn.PgConn, script int) Result {
	res := Result{Script: script, Tries: 1}
	if script < 0 || script >= len(c.scripts) {
		res.Failed, res.Aborted = true, true
		res.Err = fmt.Errorf("script index %d out of range (%d scripts)", script, len(c.scripts))
		return res
	}
	if err := ctx.Err(); err != nil {
		res.Failed, res.Aborted, res.Err = true, true, err
		return res
	}
	if conn != c.conn || conn.PID() != c.connPID {
		if err := c.newConn(conn); err != nil {
			res.Failed, res.Aborted, res.ConnBroken = true, true, conn.IsClosed()
			res.Err = err
			return res
		}
	}
	c.watch(ctx, conn)
	defer c.cur.Store(nil)
	cs := &c.scripts[script]
	saved := *c.rand
	c.ectx.Script = script
	if c.opt.Trace != nil {
		fmt.Fprintf(c.opt.Trace, "pgbench: debug: client %d executing script \"%s\"\n", c.opt.ClientID, cs.s.Name)
	}
	for {
		f := c.try(ctx, conn, cs)
		if f == nil {
			return res
		}
		if v := c.opt.VerboseErrors; v != nil && f.retryable {
			var pgErr *pgconn.PgError
			if errors.As(f.err, &pgErr) {
				fmt.Fprintf(v, "pgbench: client %d got an error in command %d (SQL) of script %d; %s\n", c.opt.ClientID, f.cmd, script, LibpqMessageFor(pgErr, f.query))
			}
			what := "ends the failed transaction"
			if c.maxTries < 0 || res.Tries < c.maxTries {
				what = "repeats the transaction after the error"
			}
			limit := ""
			if c.maxTries > 0 {
				limit = "/" + strconv.Itoa(c.maxTries)
			}
			fmt.Fprintf(v, "pgbench: client %d %s (try %d%s)\n", c.opt.ClientID, what, res.Tries, limit)
		}
		ok := c.cleanup(conn)
		if err := ctx.Err(); err != nil {
			res.Failed, res.Aborted, res.ConnBroken, res.Err = true, true, !ok, err
			return res
		}
		if f.incomplete {
			// pgbench counts the transaction, then aborts the client
			res.Incomplete, res.Aborted, res.ConnBroken = true, true, !ok
			res.Err = &RunError{File: cs.s.Name, Line: cs.s.Commands[f.cmd].Line, Command: f.cmd, Err: f.err, Query: f.query}
			return res
		}
		if f.retryable && ok && (c.maxTries < 0 || res.Tries < c.maxTries) {
			cs.stats[f.cmd].Retries++
			res.Tries++
			*c.rand = saved
			continue
		}
		cs.stats[f.cmd].Failures++
		res.Failed = true
		res.SQLState = f.sqlState
		res.Aborted = !f.retryable
		res.ConnBroken = !ok
		res.Err = &RunError{File: cs.s.Name, Line: cs.s.Commands[f.cmd].Line, Command: f.cmd, Err: f.err, Query: f.query}
		return res
	}
}

// try runs the script once (advanceConnectionState from CSTATE_START_TX to
// CSTATE_END_TX).
func (c *Client) try(ctx context.Context, conn *pgconn.PgConn, cs *clientScript) *failure {
	cmds := cs.s.Commands
	c.cstack = c.cstack[:0]
	measure := c.opt.PerCommand
	for i := 0; i < len(cmds); {
		if !c.active() {
			// CSTATE_SKIP_COMMAND: on to the next command to execute (which
			// may be an \elif of the inactive branch)
			if i = c.skip(cmds, i); i >= len(cmds) {
				break
			}
		}
		var t0 time.Time
		if measure {
			t0 = time.Now()
		}
		if c.opt.Trace != nil {
			c.trace(cs, i)
		}
		if f := c.exec(ctx, conn, cs, i); f != nil {
			f.cmd = i
			return f
		}
		if c.opt.Trace != nil && cmds[i].Meta == SQL && c.pipe == nil {
			fmt.Fprintf(c.opt.Trace, "pgbench: debug: client %d receiving\n", c.opt.ClientID)
		}
		if measure {
			st := &cs.stats[i]
			st.Count++
			st.SumUS += int64(time.Since(t0) / time.Microsecond)
		}
		i++
	}
	last := len(cmds) - 1
	if c.pipe != nil {
		return &failure{cmd: last, err: errors.New(errPipelineOpen)}
	}
	if conn.IsClosed() {
		return &failure{cmd: last, err: errors.New("connection closed")}
	}
	if ts := conn.TxStatus(); ts != 'I' {
		return &failure{cmd: last, err: ErrIncomplete, incomplete: true}
	}
	return nil
}

const errPipelineOpen = "end of script reached with pipeline open"

// ErrIncomplete is the cause of a Result.Incomplete transaction.
var ErrIncomplete = errors.New("end of script reached without completing the last transaction")

// trace writes pgbench -d's line for command i before it runs.
func (c *Client) trace(cs *clientScript, i int) {
	cmd := &cs.s.Commands[i]
	id := c.opt.ClientID
	if cmd.Meta != SQL {
		fmt.Fprintf(c.opt.Trace, "pgbench: debug: client %d executing \\%s\n", id, cmd.Meta)
		return
	}
	switch c.opt.Mode {
	case Simple:
		fmt.Fprintf(c.opt.Trace, "pgbench: debug: client %d sending %s\n", id, c.simpleSQL(cs, cmd))
	case Extended:
		fmt.Fprintf(c.opt.Trace, "pgbench: debug: client %d sending %s\n", id, cmd.paramSQL)
	default:
		if !cs.cmds[i].prepared {
			fmt.Fprintf(c.opt.Trace, "pgbench: debug: client %d preparing %s\n", id, cs.cmds[i].prepName)
		}
		fmt.Fprintf(c.opt.Trace, "pgbench: debug: client %d sending %s\n", id, cs.cmds[i].prepName)
	}
}

// ---- conditionals ----

func (c *Client) active() bool {
	if len(c.cstack) == 0 {
		return true
	}
	s := c.cstack[len(c.cstack)-1]
	return s == ifTrue || s == ifElseTrue
}

func (c *Client) poke(s ifState) { c.cstack[len(c.cstack)-1] = s }

// skip is CSTATE_SKIP_COMMAND: it walks over commands of an inactive branch
// and returns the index of the next command to execute.
func (c *Client) skip(cmds []Command, i int) int {
	for i < len(cmds) {
		m := cmds[i].Meta
		if m != If && m != Elif && m != Else && m != Endif {
			i++
			continue
		}
		switch c.cstack[len(c.cstack)-1] {
		case ifFalse:
			switch m {
			case If:
				c.cstack = append(c.cstack, ifIgnored)
			case Elif:
				return i // evaluate it
			case Else:
				c.poke(ifElseTrue)
				return i + 1
			case Endif:
				c.cstack = c.cstack[:len(c.cstack)-1]
				if c.active() {
					return i + 1
				}
			}
		default: // ifIgnored, ifElseFalse
			switch m {
			case If:
				c.cstack = append(c.cstack, ifIgnored)
			case Endif:
				c.cstack = c.cstack[:len(c.cstack)-1]
				if c.active() {
					return i + 1
				}
			}
		}
		i++
	}
	return i
}

// ---- commands ----

func metaFailure(m Meta, format string, args ...any) *failure {
	return &failure{err: fmt.Errorf(m.String()+": "+format, args...)}
}

func (c *Client) eval(cs *clientScript, i int) (expr.Value, error) {
	cc := &cs.cmds[i]
	c.evars.names, c.evars.slots = cc.exprNames, cc.exprSlots
	c.ectx.Command = i + 1
	return cs.s.Commands[i].expr.Eval(&c.ectx)
}

// exec executes command i (executeMetaCommand, or sendCommand and
// readCommandResponse for SQL).
func (c *Client) exec(ctx context.Context, conn *pgconn.PgConn, cs *clientScript, i int) *failure {
	cmd := &cs.s.Commands[i]
	switch cmd.Meta {
	case SQL:
		return c.execSQL(conn, cs, i)
	case Set:
		v, err := c.eval(cs, i)
		if err != nil {
			return metaFailure(Set, "%w", err)
		}
		s := cs.remap[cmd.target]
		vr := &c.vars[s]
		if !vr.defined && !vr.valid {
			return metaFailure(Set, "invalid variable name: %q", vr.name)
		}
		vr.set(v)
	case If:
		v, err := c.eval(cs, i)
		if err != nil {
			return metaFailure(If, "%w", err)
		}
		if v.Truth() {
			c.cstack = append(c.cstack, ifTrue)
		} else {
			c.cstack = append(c.cstack, ifFalse)
		}
	case Elif:
		if c.cstack[len(c.cstack)-1] == ifTrue {
			c.poke(ifIgnored) // a previous branch ran
			return nil
		}
		v, err := c.eval(cs, i)
		if err != nil {
			return metaFailure(Elif, "%w", err)
		}
		if v.Truth() {
			c.poke(ifTrue)
		} else {
			c.poke(ifFalse)
		}
	case Else:
		c.poke(ifElseFalse)
	case Endif:
		c.cstack = c.cstack[:len(c.cstack)-1]
	case Sleep:
		return c.execSleep(ctx, cs, cmd)
	case Shell, SetShell:
		return c.execShell(ctx, cs, cmd)
	case StartPipeline:
		if c.opt.Mode == Simple {
			return metaFailure(StartPipeline, "cannot use pipeline mode with the simple query protocol")
		}
		if c.pipe != nil {
			return metaFailure(StartPipeline, "already in pipeline mode")
		}
		if c.opt.Mode == Prepared {
			// Prepare the pipeline's commands first, as pgbench does, so that
			// e.g. BEGIN ISOLATION LEVEL SERIALIZABLE in it works.
			for j := i + 1; j < cmd.pipeEnd; j++ {
				if cs.s.Commands[j].Meta != SQL {
					continue
				}
				if _, err := c.prepare(conn, cs, j); err != nil {
					return sqlFailure(err)
				}
			}
		}
		c.pipe = conn.StartPipeline(context.Background())
	case SyncPipeline:
		if c.pipe == nil {
			return metaFailure(SyncPipeline, "not in pipeline mode")
		}
		c.pipe.SendPipelineSync()
	case EndPipeline:
		if c.pipe == nil {
			return metaFailure(EndPipeline, "not in pipeline mode")
		}
		p := c.pipe
		c.pipe = nil
		err := p.Sync()
		if cerr := p.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return sqlFailure(err)
		}
	}
	return nil
}

func sqlFailure(err error) *failure {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return &failure{err: err, sqlState: pgErr.Code,
			retryable: pgErr.Code == SerializationFailure || pgErr.Code == DeadlockDetected}
	}
	return &failure{err: err}
}

// execSleep is evaluateSleep plus the sleep itself.
func (c *Client) execSleep(ctx context.Context, cs *clientScript, cmd *Command) *failure {
	us := cmd.sleepUS
	if cmd.sleepVar >= 0 {
		s := cs.remap[cmd.sleepVar]
		t := c.text(s)
		if t == nil {
			return metaFailure(Sleep, "undefined variable %q", c.vars[s].name)
		}
		us = atoi(unsafe.String(unsafe.SliceData(t), len(t)))
		if us == 0 && (len(t) == 0 || t[0] < '0' || t[0] > '9') {
			return metaFailure(Sleep, "invalid sleep time %q for variable %q", t, c.vars[s].name)
		}
	}
	us *= cmd.sleepUnit
	if us <= 0 {
		return nil
	}
	d := time.Duration(us) * time.Microsecond
	if c.timer == nil {
		c.timer = time.NewTimer(d)
	} else {
		c.timer.Reset(d)
	}
	select {
	case <-c.timer.C:
		return nil
	case <-ctx.Done():
		c.timer.Stop()
		return &failure{err: ctx.Err()}
	}
}

// execShell is runShellCommand: words are joined with spaces, ":name" is a
// variable's text, "::x" is ":x"; the command runs with /bin/sh -c like
// system() (\shell) or popen() (\setshell).
func (c *Client) execShell(ctx context.Context, cs *clientScript, cmd *Command) *failure {
	var b []byte
	for k, w := range cmd.shellWords {
		if k > 0 {
			b = append(b, ' ')
		}
		if w.slot < 0 {
			b = append(b, w.text...)
			continue
		}
		t := c.text(cs.remap[w.slot])
		if t == nil {
			return &failure{err: fmt.Errorf("%s: undefined variable %q", cmd.shellWords[0].text, w.text)}
		}
		b = append(b, t...)
	}
	first := cmd.shellWords[0].text
	sh := exec.CommandContext(ctx, "/bin/sh", "-c", string(b))
	sh.Stderr = c.opt.ShellErr
	if cmd.Meta == Shell {
		sh.Stdout = c.opt.ShellOut
		if err := sh.Run(); err != nil {
			if ctx.Err() != nil {
				return &failure{err: ctx.Err()}
			}
			return &failure{err: fmt.Errorf("%s: could not launch shell command: %w", first, err)}
		}
		return nil
	}
	out, err := sh.Output()
	if err != nil {
		if ctx.Err() != nil {
			return &failure{err: ctx.Err()}
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) { // pclose's status is not checked by pgbench
			return &failure{err: fmt.Errorf("%s: could not launch shell command: %w", first, err)}
		}
	}
	// fgets(res, 64): the first line, at most 63 bytes
	if k := bytes.IndexByte(out, '\n'); k >= 0 {
		out = out[:k+1]
	}
	if len(out) > 63 {
		out = out[:63]
	}
	if len(out) == 0 {
		return &failure{err: fmt.Errorf("%s: could not read result of shell command", first)}
	}
	v, ok := strtol(out)
	if !ok {
		return &failure{err: fmt.Errorf("%s: shell command must return an integer (not %q)", first, out)}
	}
	s := cs.remap[cmd.target]
	vr := &c.vars[s]
	if !vr.defined && !vr.valid {
		return metaFailure(SetShell, "invalid variable name: %q", vr.name)
	}
	vr.set(expr.Value{Kind: expr.Int, I: int64(int32(v))}) // pgbench keeps an int
	return nil
}

// strtol parses like C's strtol(s, &end, 10) followed by pgbench's check
// that only whitespace follows.
func strtol(s []byte) (int64, bool) {
	isSpace := func(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	j := i
	if j < len(s) && (s[j] == '+' || s[j] == '-') {
		j++
	}
	k := j
	for k < len(s) && s[k] >= '0' && s[k] <= '9' {
		k++
	}
	end := k
	if k == j { // no digits: end = start of string
		end = 0
	}
	for end < len(s) && isSpace(s[end]) {
		end++
	}
	if end != len(s) || k == j {
		return 0, false
	}
	v, err := strconv.ParseInt(string(s[i:k]), 10, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

// ---- SQL ----

// params returns the parameter values of a SQL command: the variables'
// text, nil (NULL) for undefined ones, as pgbench's getQueryParams.
func (c *Client) bindParams(cs *clientScript, cmd *Command) [][]byte {
	ps := c.params[:0]
	for _, r := range cmd.refs {
		ps = append(ps, c.text(cs.remap[r.slot]))
	}
	c.params = ps
	return ps
}

// simpleSQL builds the simple-mode text (assignVariables): each :name of a
// defined variable replaced by its text, undefined ones left as they are.
// The string aliases the client's buffer and is valid until the next call.
func (c *Client) simpleSQL(cs *clientScript, cmd *Command) string {
	if len(cmd.refs) == 0 {
		return cmd.Text
	}
	b := c.sqlBuf[:0]
	last := 0
	for _, r := range cmd.refs {
		b = append(b, cmd.Text[last:r.off]...)
		if t := c.text(cs.remap[r.slot]); t != nil {
			b = append(b, t...)
		} else {
			b = append(b, cmd.Text[r.off:r.end]...)
		}
		last = r.end
	}
	b = append(b, cmd.Text[last:]...)
	c.sqlBuf = b
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// newConn forgets what was prepared on the previous connection. In the
// prepared mode it also deallocates statements named like the client's
// (P_<n>) that another user of conn left, so that preparing them again
// does not fail inside a transaction.
func (c *Client) newConn(conn *pgconn.PgConn) error {
	c.conn, c.connPID = nil, 0
	names := map[string]bool{}
	for si := range c.scripts {
		for k := range c.scripts[si].cmds {
			cc := &c.scripts[si].cmds[k]
			cc.prepared, cc.sd = false, nil
			if cc.prepName != "" {
				names[cc.prepName] = true
			}
		}
	}
	if len(names) > 0 {
		ctx := context.Background()
		res := conn.ExecParams(ctx, "SELECT name FROM pg_catalog.pg_prepared_statements", nil, nil, nil, nil).Read()
		if res.Err != nil {
			return fmt.Errorf("list prepared statements: %w", res.Err)
		}
		for _, row := range res.Rows {
			if n := string(row[0]); names[n] {
				if err := conn.Deallocate(ctx, n); err != nil {
					return fmt.Errorf("deallocate %s: %w", n, err)
				}
			}
		}
	}
	c.conn, c.connPID = conn, conn.PID()
	return nil
}

// prepare prepares command i on conn once (prepareCommand).
func (c *Client) prepare(conn *pgconn.PgConn, cs *clientScript, i int) (*pgconn.StatementDescription, error) {
	cc := &cs.cmds[i]
	if cc.prepared {
		return cc.sd, nil
	}
	sql := cs.s.Commands[i].paramSQL
	sd, err := conn.Prepare(context.Background(), cc.prepName, sql, nil)
	if err != nil {
		return nil, err
	}
	cc.sd, cc.prepared = sd, true
	return sd, nil
}

// execSQL sends SQL command i and reads its results (sendCommand and
// readCommandResponse); in a pipeline it only queues it.
func (c *Client) execSQL(conn *pgconn.PgConn, cs *clientScript, i int) *failure {
	f := c.execSQLText(conn, cs, i)
	if f != nil && f.query == "" && c.pipe == nil {
		// libpq's text for the error's cursor display (LibpqMessageFor):
		// what the simple protocol sent, or the statement of extended mode
		// (a prepared statement's execution keeps none)
		switch c.opt.Mode {
		case Simple:
			f.query = c.simpleSQL(cs, &cs.s.Commands[i])
		case Extended:
			f.query = cs.s.Commands[i].paramSQL
		}
	}
	return f
}

// execSQLText is execSQL without the error's query text.
func (c *Client) execSQLText(conn *pgconn.PgConn, cs *clientScript, i int) *failure {
	cmd := &cs.s.Commands[i]
	ctx := context.Background() // cancellation: see watch
	if cmd.copyStdio {
		return &failure{err: errors.New(errCopy)}
	}
	if c.pipe != nil {
		if cmd.Gset {
			return &failure{err: errors.New(`gset: \gset is not allowed in pipeline mode`)}
		}
		if cmd.Aset {
			return &failure{err: errors.New(`aset: \aset is not allowed in pipeline mode`)}
		}
		params := c.bindParams(cs, cmd)
		if c.opt.Mode == Extended {
			c.pipe.SendQueryParams(cmd.paramSQL, params, nil, nil, nil)
			return nil
		}
		cc := &cs.cmds[i]
		switch {
		case cc.sd != nil:
			c.pipe.SendQueryStatement(cc.sd, params, nil, nil)
		default:
			if !cc.prepared {
				c.pipe.SendPrepare(cc.prepName, cmd.paramSQL, nil)
				cc.prepared = true
			}
			c.pipe.SendQueryPrepared(cc.prepName, params, nil, nil)
		}
		return nil
	}
	switch c.opt.Mode {
	case Simple:
		if !cmd.Gset && !cmd.Aset && !conn.IsClosed() {
			c.query.String = c.simpleSQL(cs, cmd)
			conn.Frontend().SendQuery(&c.query)
			return c.await(conn)
		}
		return c.readMulti(cs, i, conn.Exec(ctx, c.simpleSQL(cs, cmd)))
	case Extended:
		return c.readOne(cs, i, conn.ExecParams(ctx, cmd.paramSQL, c.bindParams(cs, cmd), nil, nil, nil))
	default:
		sd, err := c.prepare(conn, cs, i)
		if err != nil {
			if f := c.prepareFailed(err, cmd.paramSQL); f != nil {
				f.query = cmd.paramSQL // the Parse's text
				return f
			}
		}
		params := c.bindParams(cs, cmd)
		switch {
		case sd == nil:
			return c.readOne(cs, i, conn.ExecPrepared(ctx, cs.cmds[i].prepName, params, nil, nil))
		case !cmd.Gset && !cmd.Aset && !conn.IsClosed():
			return c.execBound(conn, sd.Name, params)
		}
		return c.readOne(cs, i, conn.ExecStatement(ctx, sd, params, nil, nil))
	}
}

// prepareFailed handles a failed PREPARE: with a log, pgbench reports it
// and executes anyway (the server then says the statement does not exist),
// so the result is nil; otherwise the failure. Apart from execSQL so that
// the errors.As target escapes only on this path.
func (c *Client) prepareFailed(err error, query string) *failure {
	var pgErr *pgconn.PgError
	if c.opt.Log != nil && errors.As(err, &pgErr) {
		fmt.Fprintf(c.opt.Log, "pgbench: error: %s\n", LibpqMessageFor(pgErr, query))
		return nil
	}
	return sqlFailure(err)
}

// execBound runs prepared statement name with params and discards its rows,
// as ExecStatement + readOne would: Bind, Execute and Sync go out through
// the connection's frontend (no Describe: the row shape is not needed),
// then await reads the replies.
func (c *Client) execBound(conn *pgconn.PgConn, name string, params [][]byte) *failure {
	fe := conn.Frontend()
	c.bind = pgproto3.Bind{PreparedStatement: name, Parameters: params}
	fe.SendBind(&c.bind)
	fe.SendExecute(&c.execute)
	fe.SendSync(&c.sync)
	return c.await(conn)
}

// await flushes the messages queued on conn's frontend and reads the
// replies up to ReadyForQuery, discarding rows, as pgconn's Exec and
// ExecStatement with their result readers would but allocating nothing
// and arming no timer: PgConn.ReceiveMessage keeps the transaction status
// and calls the notice handler; pgconn's readers would allocate the command
// tag's string, and its flush arms and stops a 15 ms write-deadlock timer
// per message (a futex wake-up of an idle thread, measured with perf in
// simple mode). The first ErrorResponse is the failure. A broken
// connection is closed, as pgconn does: the failure is then the error
// before it, or the I/O error.
func (c *Client) await(conn *pgconn.PgConn) *failure {
	fe := conn.Frontend()
	var first error
	if err := fe.Flush(); err != nil {
		first = err
	}
	for first == nil {
		msg, err := conn.ReceiveMessage(context.Background())
		if err != nil {
			first = errors.Unwrap(err) // "receive message failed: %w" in pgconn
			if first == nil {
				first = err
			}
			break
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			return c.drainToReady(conn, pgconn.ErrorResponseToPgError(m))
		case *pgproto3.ReadyForQuery:
			return nil
		}
	}
	closeBroken(conn)
	return sqlFailure(first)
}

// drainToReady reads up to ReadyForQuery after the error failed of
// await.
func (c *Client) drainToReady(conn *pgconn.PgConn, failed error) *failure {
	for {
		msg, err := conn.ReceiveMessage(context.Background())
		if err != nil {
			closeBroken(conn)
			break
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			break
		}
	}
	return sqlFailure(failed)
}

// closeBroken closes conn after an I/O error (pgconn's asyncClose): the
// socket first, so that the Terminate message cannot block.
func closeBroken(conn *pgconn.PgConn) {
	if nc := conn.Conn(); nc != nil {
		_ = nc.Close()
	}
	_ = conn.Close(context.Background())
}

// capture copies a row into the client's scratch buffers (NULL as "", as
// PQgetvalue gives it).
func (c *Client) capture(vals [][]byte) {
	n := len(vals)
	if cap(c.scratch) < n {
		c.scratch = append(c.scratch[:cap(c.scratch)], make([][]byte, n-cap(c.scratch))...)
	}
	c.scratch = c.scratch[:n]
	for k, v := range vals {
		c.scratch[k] = append(c.scratch[k][:0], v...)
	}
}

func (c *Client) fieldNames(fds []pgconn.FieldDescription) []string {
	c.names = c.names[:0]
	for k := range fds {
		c.names = append(c.names, fds[k].Name)
	}
	return c.names
}

// drain reads every row of rr, capturing each (the last one wins) when
// the command stores its result (\gset, \aset), and returns the count.
func (c *Client) drain(rr *pgconn.ResultReader, capture bool) int {
	n := 0
	for rr.NextRow() {
		n++
		if capture {
			c.capture(rr.Values())
		}
	}
	return n
}

// readOne reads the result of an extended-protocol command.
func (c *Client) readOne(cs *clientScript, i int, rr *pgconn.ResultReader) *failure {
	cmd := &cs.s.Commands[i]
	want := cmd.Gset || cmd.Aset
	n := c.drain(rr, want)
	if _, err := rr.Close(); err != nil {
		return sqlFailure(err)
	}
	if !want {
		return nil
	}
	if cmd.Gset && n != 1 {
		return &failure{err: fmt.Errorf("gset: expected one row, got %d", n)}
	}
	if n == 0 {
		return nil // \aset skips empty results
	}
	return c.store(cs, i, c.fieldNames(rr.FieldDescriptions()))
}

// readMulti reads the results of a simple-protocol command, which may hold
// several queries ("\;"): \gset takes the last one's row, \aset every
// non-empty one's last row.
func (c *Client) readMulti(cs *clientScript, i int, mrr *pgconn.MultiResultReader) *failure {
	cmd := &cs.s.Commands[i]
	want := cmd.Gset || cmd.Aset
	lastN := 0
	var f *failure
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		n := c.drain(rr, want)
		if _, err := rr.Close(); err != nil {
			break // mrr.Close reports it
		}
		lastN = n
		if want && n > 0 {
			c.fieldNames(rr.FieldDescriptions())
			if cmd.Aset && f == nil {
				f = c.store(cs, i, c.names)
			}
		}
	}
	if err := mrr.Close(); err != nil {
		return sqlFailure(err)
	}
	if f != nil || !cmd.Gset {
		return f
	}
	if lastN != 1 {
		return &failure{err: fmt.Errorf("gset: expected one row, got %d", lastN)}
	}
	return c.store(cs, i, c.names)
}

// store assigns the captured row to variables named prefix+column.
func (c *Client) store(cs *clientScript, i int, names []string) *failure {
	cmd := &cs.s.Commands[i]
	cc := &cs.cmds[i]
	if !sameStrings(cc.gsetNames, names) {
		cc.gsetNames = append(cc.gsetNames[:0], names...)
		cc.gsetSlots = cc.gsetSlots[:0]
		for _, n := range names {
			cc.gsetSlots = append(cc.gsetSlots, c.intern(cmd.Prefix+n))
		}
	}
	word := "gset"
	if cmd.Aset {
		word = "aset"
	}
	for k, s := range cc.gsetSlots {
		v := &c.vars[s]
		if !v.defined && !v.valid {
			return &failure{err: fmt.Errorf("%s: invalid variable name: %q: error storing into variable %s", word, v.name, v.name)}
		}
		c.setText(s, c.scratch[k])
	}
	return nil
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// cleanup is CSTATE_ERROR: leave the pipeline, roll back an open
// transaction. It reports whether conn is still usable.
func (c *Client) cleanup(conn *pgconn.PgConn) bool {
	c.cstack = c.cstack[:0]
	if p := c.pipe; p != nil {
		c.pipe = nil
		_ = p.Sync()
		_ = p.Close()
	}
	if conn.IsClosed() {
		return false
	}
	if ts := conn.TxStatus(); ts == 'T' || ts == 'E' {
		mrr := conn.Exec(context.Background(), "ROLLBACK")
		for mrr.NextResult() {
			_, _ = mrr.ResultReader().Close()
		}
		if err := mrr.Close(); err != nil {
			return false
		}
	}
	return !conn.IsClosed() && conn.TxStatus() == 'I'
}
