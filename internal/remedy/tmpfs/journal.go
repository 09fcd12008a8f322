package tmpfs

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// step is one step of the procedure (the package documentation's list).
// do performs it: it records in the journal (the state file, State) what
// it is about to create or change (applier.intend) before doing it, and
// what it did once done; the runner saves that record before the next
// step starts. undo reverts the step from its record alone; nil when the
// step leaves nothing of its own to revert.
type step struct {
	name string
	do   func(ctx context.Context, a *applier) error
	undo func(ctx context.Context, u *undoer) error
}

// procedure is the table of steps, in the order Apply runs them; undo
// runs the undos of the journaled ones in reverse. The names are those
// of Options.stopBefore and of State.journaled.
func procedure() []step {
	return []step{
		{name: "directory", do: doDirectory, undo: undoDirectoryStep},
		{name: "tablespace", do: doTablespace, undo: undoTablespace},
		{name: "grant", do: doGrant, undo: undoGrant},
		{name: "probe", do: doProbe},
		{name: "mount", do: doMount, undo: undoMount},
		{name: "setting", do: doSetting, undo: undoSetting},
		{name: "verify", do: doVerify},
	}
}

// applier is one run of Apply's steps: the server, the journal and the
// lines of the running step.
type applier struct {
	conn *pgx.Conn
	dsn  string
	t    *Target
	opts Options
	st   *State
	path string
	say  func(string, ...any)
	// step is the running step's name; lines are its lines, said once
	// its record is saved.
	step  string
	lines []string
	v     *Verification
}

// run executes the steps in order, saving the journal after each (the
// step recorded as done) before saying its lines and starting the next.
// On an error (a failed step, Ctrl-C cancelling ctx) it undoes the
// journaled steps in reverse and returns the error.
func (a *applier) run(ctx context.Context) (*Verification, error) {
	for _, s := range procedure() {
		a.step, a.lines = s.name, nil
		err := s.do(ctx, a)
		if err == nil {
			err = a.record()
		}
		if err != nil {
			return nil, a.fail(ctx, err)
		}
		for _, l := range a.lines {
			a.say("%s", l)
		}
	}
	a.say("recorded in %s (--undo reverts exactly that)", a.path)
	a.v.StateFile = a.path
	return a.v, nil
}

// record saves the journal.
func (a *applier) record() error { return a.st.save(a.path) }

// intend saves the journal with the running step's intent recorded; a
// test's Options.stopBefore stops there, as a crash would.
func (a *applier) intend() error {
	if err := a.record(); err != nil {
		return err
	}
	return a.stopHere()
}

// stopHere returns errStopped at the step Options.stopBefore names.
func (a *applier) stopHere() error {
	if a.opts.stopBefore == a.step {
		return errStopped
	}
	return nil
}

// line adds a line to say once the running step is recorded as done.
func (a *applier) line(format string, args ...any) {
	a.lines = append(a.lines, fmt.Sprintf(format, args...))
}

func (a *applier) exec(ctx context.Context, sql string) error {
	if _, err := a.conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("tmpfs fix: %s: %w", sql, err)
	}
	return nil
}

// fail undoes the journaled steps (each line said as "rollback: ...")
// and returns cause, with the undo's error joined; a test's stop is a
// crash and undoes nothing.
func (a *applier) fail(ctx context.Context, cause error) error {
	if errors.Is(cause, errStopped) {
		return cause
	}
	say := func(format string, args ...any) { a.say("rollback: "+format, args...) }
	if err := undoJournal(context.WithoutCancel(ctx), a.conn, a.dsn, a.st, a.path, a.opts, say); err != nil {
		return errors.Join(cause, fmt.Errorf("rollback: %w (state kept in %s; run --undo again)", err, a.path))
	}
	return cause
}

// undoer is one run of the undos over a journal.
type undoer struct {
	conn *pgx.Conn
	dsn  string
	st   *State
	opts Options
	say  func(string, ...any)
	// tablespace is the journaled tablespace's name ("" when none);
	// noted: the settings naming it that erplab did not make are said.
	tablespace string
	noted      bool
}

// undoJournal reverts what st records: the undos of the journaled steps,
// newest first, the journal saved after each (without that step's
// record), then the state file removed. Unless opts.Force it first
// refuses a tablespace or mount that is not the recorded one
// (checkOwned), changing nothing.
func undoJournal(ctx context.Context, conn *pgx.Conn, dsn string, st *State, path string, opts Options, say func(string, ...any)) error {
	if !opts.Force {
		if err := checkOwned(ctx, conn, st, opts, path); err != nil {
			return err
		}
	}
	u := &undoer{conn: conn, dsn: dsn, st: st, opts: opts, say: say}
	if st.Tablespace != nil {
		u.tablespace = st.Tablespace.Name
	}
	for _, s := range slices.Backward(procedure()) {
		if s.undo == nil || !st.journaled(s.name) {
			continue
		}
		if err := s.undo(ctx, u); err != nil {
			return err
		}
		st.forget(s.name)
		if st.empty() {
			break // the state file goes next; an empty one would not load
		}
		st.Complete = false
		if err := st.save(path); err != nil {
			return err
		}
	}
	if err := removeState(path); err != nil {
		return err
	}
	say("undone: what erplab recorded is reverted; state file %s removed", path)
	return nil
}

// noteOverrides says, once, which per-database or per-role settings
// erplab did not make still name the journaled tablespace: after the
// setting's undo, or before the first undo after it when the setting was
// not journaled.
func (u *undoer) noteOverrides(ctx context.Context) {
	if u.noted || u.tablespace == "" {
		return
	}
	u.noted = true
	ovs, err := overrides(ctx, u.conn)
	if err != nil {
		return
	}
	for _, o := range ovs {
		if slices.Contains(TablespaceNames(o.value), u.tablespace) {
			u.say("note: %s still names %s; erplab did not set it and leaves it", o, u.tablespace)
		}
	}
}
