// Package settings is the remedy "settings:FILE": the GUCs of a
// postgresql.conf-style file (ReadSettingsFile) are applied with ALTER
// SYSTEM SET and pg_reload_conf() before the run and reset with ALTER
// SYSTEM RESET after it (PostgreSQL docs: sql-altersystem.html). Settings
// of context postmaster are applied and reset with a restart instead of
// the reload when the Target can restart its server (Target.Restart: ab
// --dsn --allow-restart on a local server), and refused otherwise; those
// of context internal and unknown settings are refused. The record
// keeps, per setting, its value in a new session before, during (after
// the reload or restart) and after the reset. On a
// server erplab did not start (Target.RecordSettings set, ab --dsn) the
// settings are recorded in the leftover record before they are set, and
// one postgresql.auto.conf already sets is refused; Preflight checks a
// file against such a server before any run.
package settings

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/remedy"
)

// Name is the remedy's name on the command line.
const Name = "settings"

func init() {
	remedy.Register(remedy.Kind{
		Name:   Name,
		Syntax: Name + ":FILE",
		Doc: `GUCs of a postgresql.conf-style file: ALTER SYSTEM SET + pg_reload_conf()
before the run, ALTER SYSTEM RESET after (reloadable settings only; a restart
for postmaster ones with ab --dsn --allow-restart; see examples/erp-profile.conf)`,
		// A settings profile is meant to help the whole workload.
		Primary: []string{"integral:apdex"},
		Parse:   parse,
		Apply:   apply,
		Undo:    undo,
	})
}

// parse checks that the file is given and reads as a settings file.
func parse(arg string) error {
	if arg == "" {
		return errors.New("settings needs a file, settings:FILE")
	}
	_, err := ReadSettingsFile(arg)
	return err
}

// Setting is one GUC of a settings file.
type Setting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// ReadSettingsFile reads a postgresql.conf-style file: one "name = value"
// (or "name value") a line, '#' starts a comment outside single quotes,
// values may be single-quoted (two single quotes stand for one), as in
// config-setting.html "Parameter Interaction via the Configuration File".
// Errors name the file and line.
func ReadSettingsFile(path string) ([]Setting, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("settings file: %w", err)
	}
	defer f.Close()
	return parseSettings(f, path)
}

func parseSettings(r io.Reader, path string) ([]Setting, error) {
	var out []Setting
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(stripComment(sc.Text()))
		if line == "" {
			continue
		}
		i := strings.IndexAny(line, "= \t")
		if i <= 0 {
			return nil, fmt.Errorf("settings file %s line %d: want name = value", path, n)
		}
		name := strings.ToLower(line[:i])
		val := strings.TrimSpace(line[i:])
		val = strings.TrimSpace(strings.TrimPrefix(val, "="))
		if len(val) >= 2 && val[0] == '\'' && val[len(val)-1] == '\'' {
			val = strings.ReplaceAll(val[1:len(val)-1], "''", "'")
		}
		if val == "" {
			return nil, fmt.Errorf("settings file %s line %d: %s has no value", path, n, name)
		}
		for _, c := range name {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
				return nil, fmt.Errorf("settings file %s line %d: %q is not a setting name", path, n, name)
			}
		}
		if seen[name] {
			return nil, fmt.Errorf("settings file %s line %d: %s given twice", path, n, name)
		}
		seen[name] = true
		out = append(out, Setting{Name: name, Value: val})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("settings file %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("settings file %s: no settings", path)
	}
	return out, nil
}

// stripComment removes a '#' comment that is not inside single quotes.
func stripComment(s string) string {
	in := false
	for i, c := range s {
		switch {
		case c == '\'':
			in = !in
		case c == '#' && !in:
			return s[:i]
		}
	}
	return s
}

// SettingChange is what the settings remedy did to one GUC: its value in a
// new session before, during (after the reload) and after the reset.
type SettingChange struct {
	Name   string `json:"name"`
	File   string `json:"file_value"`
	Before string `json:"before"`
	During string `json:"during"`
	After  string `json:"after_reset,omitempty"`
}

// readSettings returns current_setting of each name in a new session on
// dsn (new sessions see the postmaster's latest configuration).
func readSettings(ctx context.Context, dsn string, names []string) (map[string]string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("settings: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	m := map[string]string{}
	for _, n := range names {
		var v string
		if err := conn.QueryRow(ctx, `SELECT current_setting($1)`, n).Scan(&v); err != nil {
			return nil, fmt.Errorf("settings: read %s: %w", n, err)
		}
		m[n] = v
	}
	return m, nil
}

// waitSettings polls new sessions until done(values) or 5 s pass, and
// returns the last values read.
func waitSettings(ctx context.Context, dsn string, names []string, done func(map[string]string) bool) (map[string]string, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		m, err := readSettings(ctx, dsn, names)
		if err != nil || done(m) || time.Now().After(deadline) {
			return m, err
		}
		select {
		case <-ctx.Done():
			return m, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// state is what undo needs: the admin DSN, the settings' names, their
// values before and the record's changes (completed by undo).
type state struct {
	dsn     string
	names   []string
	restart func(ctx context.Context) error // nil: a reload is enough
	before  map[string]string
	changes []SettingChange
	forget  func() // the leftover record's, after the reset
}

// apply runs ALTER SYSTEM SET for each setting of file and
// pg_reload_conf() on the target's cluster (database postgres), or a
// restart (t.Restart) when one of them has context postmaster. It refuses
// unknown settings, those of context internal, and those of context
// postmaster without t.Restart (pg_settings.context); on any error it
// resets what it set.
func apply(ctx context.Context, t *remedy.Target, file string) (*remedy.Effect, error) {
	sets, err := ReadSettingsFile(file)
	if err != nil {
		return nil, err
	}
	dsn := t.AdminDSN()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("settings: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	names, restart, err := checkContexts(ctx, conn, t, file, sets)
	if err != nil {
		return nil, err
	}
	before, err := readSettings(ctx, dsn, names)
	if err != nil {
		return nil, err
	}
	forget, err := record(ctx, t, conn, file, sets)
	if err != nil {
		return nil, err
	}
	reset := func(ctx context.Context, conn *pgx.Conn, names []string) error {
		err := reset(ctx, conn, names)
		if err == nil && restart != nil {
			err = restart(ctx)
		}
		if err == nil {
			forget()
		}
		return err
	}
	for _, s := range sets {
		if _, err := conn.Exec(ctx, "ALTER SYSTEM SET "+pgx.Identifier{s.Name}.Sanitize()+" = "+quoteLiteral(s.Value)); err != nil {
			rerr := reset(ctx, conn, names)
			return nil, errors.Join(fmt.Errorf("settings: ALTER SYSTEM SET %s = %s: %w", s.Name, s.Value, err), rerr)
		}
	}
	if restart != nil {
		if err := restart(ctx); err != nil {
			// The restart ended conn's session: reset on a new one.
			return nil, errors.Join(fmt.Errorf("settings: restart: %w", err), resetAnew(ctx, dsn, func(c *pgx.Conn) error { return reset(context.WithoutCancel(ctx), c, names) }))
		}
	} else if _, err := conn.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		return nil, errors.Join(fmt.Errorf("settings: pg_reload_conf: %w", err), reset(ctx, conn, names))
	}
	// Wait until new sessions see every setting whose file text differs
	// from the old value (a value equal after normalisation is not waited
	// for beyond the 5 s bound).
	during, err := waitSettings(ctx, dsn, names, func(m map[string]string) bool {
		for _, s := range sets {
			if s.Value != before[s.Name] && m[s.Name] == before[s.Name] {
				return false
			}
		}
		return true
	})
	if err != nil {
		return nil, errors.Join(err, resetAnew(ctx, dsn, func(c *pgx.Conn) error { return reset(context.WithoutCancel(ctx), c, names) }))
	}
	changes := make([]SettingChange, len(sets))
	for i, s := range sets {
		changes[i] = SettingChange{Name: s.Name, File: s.Value, Before: before[s.Name], During: during[s.Name]}
	}
	method := "ALTER SYSTEM SET + pg_reload_conf(), reset after the run"
	if restart != nil {
		method = "ALTER SYSTEM SET + server restart (pg_ctl restart -m fast), reset + restart after the run"
	}
	return &remedy.Effect{
		Changed: map[string]any{"method": method, "settings": changes},
		State:   &state{dsn: dsn, names: names, restart: restart, before: before, changes: changes, forget: forget},
	}, nil
}

// undo resets the settings in a new session, waits until new sessions
// see the old values and fills after_reset of each change; a value that
// does not come back is an error.
func undo(ctx context.Context, _ *remedy.Target, e *remedy.Effect) error {
	st := e.State.(*state)
	conn, err := pgx.Connect(ctx, st.dsn)
	if err != nil {
		return fmt.Errorf("settings: reset: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := reset(ctx, conn, st.names); err != nil {
		return err
	}
	if st.restart != nil {
		if err := st.restart(ctx); err != nil {
			return fmt.Errorf("settings: reset: restart: %w", err)
		}
	}
	st.forget()
	after, err := waitSettings(ctx, st.dsn, st.names, func(m map[string]string) bool {
		for _, n := range st.names {
			if m[n] != st.before[n] {
				return false
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	for i := range st.changes {
		c := &st.changes[i]
		c.After = after[c.Name]
		if c.After != c.Before {
			return fmt.Errorf("settings: %s is %s after the reset, was %s", c.Name, c.After, c.Before)
		}
	}
	return nil
}

// reset runs ALTER SYSTEM RESET for each name and pg_reload_conf() on
// conn.
func reset(ctx context.Context, conn *pgx.Conn, names []string) error {
	for _, n := range names {
		if _, err := conn.Exec(ctx, "ALTER SYSTEM RESET "+pgx.Identifier{n}.Sanitize()); err != nil {
			return fmt.Errorf("settings: reset %s: %w", n, err)
		}
	}
	if _, err := conn.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		return fmt.Errorf("settings: reset: pg_reload_conf: %w", err)
	}
	return nil
}

// checkContexts returns the names of sets and, when one has context
// postmaster, t.Restart (the settings need a restart); it refuses unknown
// settings, context internal, and context postmaster without t.Restart.
func checkContexts(ctx context.Context, conn *pgx.Conn, t *remedy.Target, file string, sets []Setting) ([]string, func(context.Context) error, error) {
	names := make([]string, len(sets))
	var restart func(context.Context) error
	for i, s := range sets {
		names[i] = s.Name
		var sctx string
		err := conn.QueryRow(ctx, `SELECT context FROM pg_settings WHERE name = $1`, s.Name).Scan(&sctx)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil, fmt.Errorf("settings %s: unknown setting %s", file, s.Name)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("settings: look up %s: %w", s.Name, err)
		}
		switch {
		case sctx == "postmaster" && t.Restart != nil:
			restart = t.Restart
		case sctx == "postmaster" || sctx == "internal":
			return nil, nil, fmt.Errorf("settings %s: %s needs a server restart (context %s); ab applies reloadable settings only", file, s.Name, sctx)
		}
	}
	return names, restart, nil
}

// resetAnew runs reset on a new session to dsn (after a restart, the
// old one is gone).
func resetAnew(ctx context.Context, dsn string, reset func(*pgx.Conn) error) error {
	conn, err := pgx.Connect(context.WithoutCancel(ctx), dsn)
	if err != nil {
		return fmt.Errorf("settings: reset: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return reset(conn)
}

// record refuses, on a server erplab did not start
// (t.RecordSettings set), settings postgresql.auto.conf already sets, and
// records the others in the leftover record before they are set; it
// returns the record's forget (a no-op without one).
func record(ctx context.Context, t *remedy.Target, conn *pgx.Conn, file string, sets []Setting) (func(), error) {
	if t.RecordSettings == nil {
		return func() {}, nil
	}
	names, values := make([]string, len(sets)), make([]string, len(sets))
	for i, s := range sets {
		names[i], values[i] = s.Name, s.Value
	}
	if err := autoConfConflict(ctx, conn, file, names); err != nil {
		return nil, err
	}
	return t.RecordSettings(ctx, names, values)
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
