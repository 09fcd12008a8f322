package experiment

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/proxy"
	"github.com/erplab/erplab/internal/tmpfsfix"
	"github.com/erplab/erplab/internal/workload/erp"
)

// Remedy kinds, as written on the command line (see ParseRemedy).
const (
	// KindTempStyle "temp-style:1c|lsfusion" sets how the ERP workload
	// treats temporary tables in the run (erp.WorkloadOptions.TempStyle).
	KindTempStyle = "temp-style"
	// KindSettings "settings:<file>" applies the GUCs of a
	// postgresql.conf-style file with ALTER SYSTEM SET and
	// pg_reload_conf() before the run and resets them (ALTER SYSTEM
	// RESET) after it (PostgreSQL docs: sql-altersystem.html). Settings
	// of context postmaster (they need a restart) are refused.
	KindSettings = "settings"
	// KindRewriteProxy "rewrite-proxy" sends the run's connections through
	// an in-process erplab proxy (package proxy) on 127.0.0.1.
	KindRewriteProxy = "rewrite-proxy"
	// KindTmpfs "tmpfs-temp-tablespace" applies the tmpfs temp-tablespace
	// procedure (package tmpfsfix) before the run and undoes it after;
	// root only.
	KindTmpfs = tmpfsfix.Name
)

// Remedy is one named switch a run applies.
type Remedy struct {
	Kind string // one of the Kind* constants
	Arg  string // temp style or settings file; "" for the others
}

// String is the remedy as written on the command line.
func (r Remedy) String() string {
	if r.Arg == "" {
		return r.Kind
	}
	return r.Kind + ":" + r.Arg
}

// ParseRemedy parses "temp-style:1c", "temp-style:lsfusion",
// "settings:FILE", "rewrite-proxy" or "tmpfs-temp-tablespace". A settings
// file is read and checked for syntax here. Errors are one line.
func ParseRemedy(s string) (Remedy, error) {
	kind, arg, _ := strings.Cut(strings.TrimSpace(s), ":")
	switch kind {
	case KindTempStyle:
		if arg != erp.TempStyle1C && arg != erp.TempStyleLsFusion {
			return Remedy{}, fmt.Errorf("remedy %q: temp-style must be %s or %s", s, erp.TempStyle1C, erp.TempStyleLsFusion)
		}
	case KindSettings:
		if arg == "" {
			return Remedy{}, fmt.Errorf("remedy %q: settings needs a file, settings:FILE", s)
		}
		if _, err := ReadSettingsFile(arg); err != nil {
			return Remedy{}, fmt.Errorf("remedy %q: %w", s, err)
		}
	case KindRewriteProxy, KindTmpfs:
		if arg != "" {
			return Remedy{}, fmt.Errorf("remedy %q: %s takes no argument", s, kind)
		}
	default:
		return Remedy{}, fmt.Errorf("unknown remedy %q (known: temp-style:1c|lsfusion, settings:FILE, rewrite-proxy, tmpfs-temp-tablespace)", s)
	}
	return Remedy{Kind: kind, Arg: arg}, nil
}

// Variant is a named set of remedies; the baseline has none.
type Variant struct {
	Name     string
	Remedies []Remedy
}

// ParseVariant parses "NAME=remedy[,remedy...]" (see ParseRemedy). The
// name must be a word of letters, digits, '-' and '_' (it names files and
// databases) and not "baseline". A remedy kind may appear once.
func ParseVariant(s string) (Variant, error) {
	name, list, ok := strings.Cut(s, "=")
	if !ok || name == "" || list == "" {
		return Variant{}, fmt.Errorf("--variant %q: want NAME=remedy[,remedy...]", s)
	}
	if name == BaselineName {
		return Variant{}, fmt.Errorf("--variant %q: the name %q is taken by the baseline", s, BaselineName)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') || len(name) > 40 {
			return Variant{}, fmt.Errorf("--variant %q: the name must be up to 40 letters, digits, '-' or '_'", s)
		}
	}
	v := Variant{Name: name}
	seen := map[string]bool{}
	for _, part := range strings.Split(list, ",") {
		r, err := ParseRemedy(part)
		if err != nil {
			return Variant{}, fmt.Errorf("--variant %s: %w", name, err)
		}
		if seen[r.Kind] {
			return Variant{}, fmt.Errorf("--variant %s: remedy %s given twice", name, r.Kind)
		}
		seen[r.Kind] = true
		v.Remedies = append(v.Remedies, r)
	}
	return v, nil
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

// Record is what one remedy changed, kept in the results as
// extra.remedies (a list, in the variant's order).
type Record struct {
	Remedy  string         `json:"remedy"`
	Kind    string         `json:"kind"`
	Changed map[string]any `json:"changed"`
}

// applied is a remedy in effect on the cluster; undo reverses it and
// completes its record.
type applied struct {
	rec  *Record
	undo func(ctx context.Context) error
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

// applySettings runs ALTER SYSTEM SET for each setting of file and
// pg_reload_conf() on the cluster. It refuses unknown settings and those
// of context postmaster (pg_settings.context; they need a restart).
func applySettings(ctx context.Context, c *pgcluster.Cluster, r Remedy) (*applied, error) {
	sets, err := ReadSettingsFile(r.Arg)
	if err != nil {
		return nil, err
	}
	dsn := c.DSN("postgres")
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("settings: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	names := make([]string, len(sets))
	for i, s := range sets {
		names[i] = s.Name
		var sctx string
		err := conn.QueryRow(ctx, `SELECT context FROM pg_settings WHERE name = $1`, s.Name).Scan(&sctx)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("settings %s: unknown setting %s", r.Arg, s.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("settings: look up %s: %w", s.Name, err)
		}
		if sctx == "postmaster" || sctx == "internal" {
			return nil, fmt.Errorf("settings %s: %s needs a server restart (context %s); ab applies reloadable settings only", r.Arg, s.Name, sctx)
		}
	}
	before, err := readSettings(ctx, dsn, names)
	if err != nil {
		return nil, err
	}
	reset := func(ctx context.Context) error {
		for _, n := range names {
			if _, err := conn.Exec(ctx, "ALTER SYSTEM RESET "+pgx.Identifier{n}.Sanitize()); err != nil {
				return fmt.Errorf("settings: reset %s: %w", n, err)
			}
		}
		_, err := conn.Exec(ctx, `SELECT pg_reload_conf()`)
		return err
	}
	for _, s := range sets {
		if _, err := conn.Exec(ctx, "ALTER SYSTEM SET "+pgx.Identifier{s.Name}.Sanitize()+" = "+quoteLiteral(s.Value)); err != nil {
			rerr := reset(ctx)
			return nil, errors.Join(fmt.Errorf("settings: ALTER SYSTEM SET %s = %s: %w", s.Name, s.Value, err), rerr)
		}
	}
	if _, err := conn.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		return nil, errors.Join(fmt.Errorf("settings: pg_reload_conf: %w", err), reset(ctx))
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
		return nil, errors.Join(err, reset(ctx))
	}
	changes := make([]SettingChange, len(sets))
	for i, s := range sets {
		changes[i] = SettingChange{Name: s.Name, File: s.Value, Before: before[s.Name], During: during[s.Name]}
	}
	rec := &Record{Remedy: r.String(), Kind: r.Kind, Changed: map[string]any{"method": "ALTER SYSTEM SET + pg_reload_conf(), reset after the run", "settings": changes}}
	return &applied{rec: rec, undo: func(ctx context.Context) error {
		uconn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return fmt.Errorf("settings: reset: connect: %w", err)
		}
		defer uconn.Close(context.WithoutCancel(ctx))
		conn = uconn
		if err := reset(ctx); err != nil {
			return err
		}
		after, err := waitSettings(ctx, dsn, names, func(m map[string]string) bool {
			for _, n := range names {
				if m[n] != before[n] {
					return false
				}
			}
			return true
		})
		if err != nil {
			return err
		}
		for i := range changes {
			changes[i].After = after[changes[i].Name]
			if changes[i].After != changes[i].Before {
				return fmt.Errorf("settings: %s is %s after the reset, was %s", changes[i].Name, changes[i].After, changes[i].Before)
			}
		}
		return nil
	}}, nil
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// applyTmpfs runs tmpfsfix.Apply (system scope) on the cluster, through
// database db.
func applyTmpfs(ctx context.Context, c *pgcluster.Cluster, db, size string, log io.Writer) (*applied, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("remedy %s needs root (it mounts a tmpfs); run erplab ab as root or drop the remedy", KindTmpfs)
	}
	opts := tmpfsfix.Options{Size: size, Scope: tmpfsfix.ScopeSystem}
	v, err := tmpfsfix.Apply(ctx, c.DSN(db), opts, log)
	if err != nil {
		return nil, fmt.Errorf("remedy %s: %w", KindTmpfs, err)
	}
	rec := &Record{Remedy: KindTmpfs, Kind: KindTmpfs, Changed: map[string]any{
		"tablespace": tmpfsfix.DefaultTablespace, "tmpfs_size": size, "scope": string(tmpfsfix.ScopeSystem),
		"verification": v.String(), "fs_type": v.FSType, "mount_point": v.MountPoint,
	}}
	return &applied{rec: rec, undo: func(ctx context.Context) error {
		if err := tmpfsfix.Undo(ctx, c.DSN(db), opts, log); err != nil {
			return fmt.Errorf("remedy %s: undo: %w", KindTmpfs, err)
		}
		rec.Changed["undone"] = true
		return nil
	}}, nil
}

// startProxy serves an erplab proxy in front of database db of the
// cluster on 127.0.0.1 (a free port) and returns the DSN clients use.
func startProxy(ctx context.Context, c *pgcluster.Cluster, db string) (*applied, string, error) {
	p, err := proxy.New(proxy.Config{Upstream: c.DSN(db)})
	if err != nil {
		return nil, "", err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("remedy %s: listen: %w", KindRewriteProxy, err)
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- p.Serve(pctx, ln) }()
	port := ln.Addr().(*net.TCPAddr).Port
	dsn := c.DSNAt("127.0.0.1", port, db)
	rec := &Record{Remedy: KindRewriteProxy, Kind: KindRewriteProxy, Changed: map[string]any{"listen": ln.Addr().String()}}
	return &applied{rec: rec, undo: func(context.Context) error {
		cancel()
		err := <-done
		st := p.Stats()
		rec.Changed["statements"] = st.Statements
		rec.Changed["rewrites"] = st.Rewrites
		rec.Changed["fallbacks"] = st.Fallbacks
		rec.Changed["fired"] = st.Fired
		rec.Changed["summary"] = st.String()
		if err != nil {
			return fmt.Errorf("remedy %s: %w", KindRewriteProxy, err)
		}
		return nil
	}}, dsn, nil
}
