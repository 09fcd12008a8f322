package settings

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Preflight checks, before any run, that the settings of file can be
// applied on the server of admin (a server erplab did not start, ab
// --dsn) and undone: every setting known and reloadable (one of context
// postmaster needs a restart, which ab does to such a server only with
// allowRestart, ab --dsn --allow-restart on a local server),
// the role allowed to ALTER SYSTEM it (a superuser, or GRANT ALTER
// SYSTEM ON PARAMETER), and none already set by ALTER SYSTEM
// (postgresql.auto.conf): the reset after the run would remove the
// user's value. Errors are one line.
func Preflight(ctx context.Context, admin, file string, allowRestart bool) error {
	sets, err := ReadSettingsFile(file)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("settings: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var role string
	var super bool
	if err := conn.QueryRow(ctx, `SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&role, &super); err != nil {
		return fmt.Errorf("settings: role: %w", err)
	}
	names := make([]string, len(sets))
	for i, s := range sets {
		names[i] = s.Name
		var sctx string
		err := conn.QueryRow(ctx, `SELECT context FROM pg_settings WHERE name = $1`, s.Name).Scan(&sctx)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("settings %s: unknown setting %s", file, s.Name)
		}
		if err != nil {
			return fmt.Errorf("settings: look up %s: %w", s.Name, err)
		}
		if sctx == "internal" || sctx == "postmaster" && !allowRestart {
			return fmt.Errorf("settings %s: %s needs a server restart (context %s); ab --dsn applies reloadable settings only and restarts your server only with --allow-restart (a server on this host)", file, s.Name, sctx)
		}
		if !super {
			var may bool
			// has_parameter_privilege: PostgreSQL 15 and later.
			if conn.QueryRow(ctx, `SELECT has_parameter_privilege($1, 'ALTER SYSTEM')`, s.Name).Scan(&may) != nil || !may {
				return fmt.Errorf("settings %s: role %s may not ALTER SYSTEM SET %s: connect as a superuser, or GRANT ALTER SYSTEM ON PARAMETER %s TO %s", file, role, s.Name, s.Name, role)
			}
		}
	}
	return autoConfConflict(ctx, conn, file, names)
}

// autoConfConflict refuses names that postgresql.auto.conf already sets
// (pg_file_settings; readable by a superuser: for another role nothing
// is checked).
func autoConfConflict(ctx context.Context, conn *pgx.Conn, file string, names []string) error {
	var set []string
	rows, err := conn.Query(ctx, `SELECT DISTINCT name FROM pg_file_settings WHERE name = ANY($1) AND sourcefile LIKE '%/postgresql.auto.conf' ORDER BY name`, names)
	if err != nil {
		return nil // pg_file_settings is a superuser's
	}
	for rows.Next() {
		var n string
		if rows.Scan(&n) == nil {
			set = append(set, n)
		}
	}
	rows.Close()
	if len(set) > 0 {
		return fmt.Errorf("settings %s: %s already set by ALTER SYSTEM on this server (postgresql.auto.conf): the reset after the run would remove it; ALTER SYSTEM RESET it first or leave it out of the file", file, strings.Join(set, ", "))
	}
	return nil
}
