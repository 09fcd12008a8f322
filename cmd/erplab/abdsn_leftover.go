package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/experiment"
	"github.com/erplab/erplab/internal/leftover"
	"github.com/erplab/erplab/internal/remedy/tmpfs"
)

// The leftover kinds of ab --dsn: a database it made on a server erplab
// did not start (the template it built, a run's copy) and the settings a
// settings remedy changed there with ALTER SYSTEM. A killed ab leaves
// them; the next erplab command's sweep drops and resets them.
const (
	kindABDatabase = "ab-database"
	kindABSettings = "ab-settings"
	// kindABTablespace is the tablespace of the tmpfs remedy on the
	// user's server (its mount is a leftover of its own, newer: unmounted
	// first).
	kindABTablespace = "ab-tablespace"
)

func init() {
	leftover.Register(leftover.Kind{Name: kindABDatabase, Undo: undoABDatabase})
	leftover.Register(leftover.Kind{Name: kindABSettings, Undo: undoABSettings})
	leftover.Register(leftover.Kind{Name: kindABTablespace, Undo: undoABTablespace})
}

// abDatabaseData is the Data of an ab-database entry: the server's DSN
// without any password (the sweep finds one where libpq would) and the
// database, whose name starts with experiment.ExternalPrefix and a random
// id.
type abDatabaseData struct {
	DSN string `json:"dsn"`
	DB  string `json:"db"`
}

// abSettingsData is the Data of an ab-settings entry: the server's DSN
// without any password and the settings set by ALTER SYSTEM, with the
// values set. RestartDataDir, set when ab had --allow-restart, is the
// server's data directory: a setting of context postmaster that the
// sweep resets needs a restart, which the sweep then does (the same
// checks as ab's: findLocalServer, the same data directory); without it
// the sweep says what to run by hand.
type abSettingsData struct {
	DSN            string   `json:"dsn"`
	Names          []string `json:"names"`
	Values         []string `json:"values"`
	RestartDataDir string   `json:"restart_data_dir,omitempty"`
}

// abTablespaceData is the Data of an ab-tablespace entry: the server's
// DSN without any password and the tablespace, named
// experiment.ExternalPrefix...
type abTablespaceData struct {
	DSN        string `json:"dsn"`
	Tablespace string `json:"tablespace"`
}

// undoABTablespace drops the recorded tablespace when it exists (the
// sweep has unmounted its tmpfs first, and the sessions that had temp
// files there ended with ab); when it cannot, it names the statement to
// run by hand. Once the tablespace is gone it finishes the remedy's undo
// (tmpfs.FinishSweep): the tablespace directory ab made beside the data
// directory, when empty, and the remedy's state file.
func undoABTablespace(ctx context.Context, e leftover.Entry) (string, error) {
	var d abTablespaceData
	if json.Unmarshal(e.Data, &d) != nil || !strings.HasPrefix(d.Tablespace, experiment.ExternalPrefix) {
		return "", fmt.Errorf("unreadable entry: %w", leftover.ErrNotOurs)
	}
	byHand := func(why string) error {
		return fmt.Errorf("%s: %w: DROP TABLESPACE %s", why, leftover.ErrByHand, quoteIdent(d.Tablespace))
	}
	ctx, cancel := context.WithTimeout(ctx, replayCopySweepTimeout)
	defer cancel()
	conn, err := sweepConn(ctx, d.DSN)
	if err != nil {
		return "", byHand(err.Error())
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tablespace WHERE spcname = $1`, d.Tablespace).Scan(&n); err != nil {
		return "", byHand(conninfo.Describe(err))
	}
	var said []string
	if n > 0 { // else never made, or dropped by ab
		if _, err := conn.Exec(ctx, "DROP TABLESPACE "+quoteIdent(d.Tablespace)); err != nil {
			return "", byHand(conninfo.Describe(err))
		}
		said = append(said, "dropped")
	}
	// What the remedy made beside the data directory and its state file.
	state, err := leftover.StateDir()
	if err != nil {
		return strings.Join(said, "; "), err
	}
	what, err := tmpfs.FinishSweep(state, d.Tablespace)
	if what != "" {
		said = append(said, what)
	}
	return strings.Join(said, "; "), err
}

// sweepConn connects to dsn for the sweep, bounded like replay-copy's.
func sweepConn(ctx context.Context, dsn string) (*pgx.Conn, error) {
	if dsn == "" {
		return nil, errors.New("no DSN recorded (a password erplab could not set apart)")
	}
	conn, err := conninfo.Connect(ctx, dsn, "erplab-sweep", nil)
	if err != nil {
		return nil, errors.New("could not connect without a password: " + conninfo.Describe(err))
	}
	return conn, nil
}

// undoABDatabase drops the recorded database (IS_TEMPLATE cleared first)
// when it exists; when it cannot log in or drop, it names the statement
// to run by hand (leftover.ErrByHand).
func undoABDatabase(ctx context.Context, e leftover.Entry) (string, error) {
	var d abDatabaseData
	if json.Unmarshal(e.Data, &d) != nil || !strings.HasPrefix(d.DB, experiment.ExternalPrefix) {
		return "", fmt.Errorf("unreadable entry: %w", leftover.ErrNotOurs)
	}
	id := quoteIdent(d.DB)
	byHand := func(why string) error {
		return fmt.Errorf("%s: %w: ALTER DATABASE %s WITH IS_TEMPLATE false; DROP DATABASE %s WITH (FORCE)", why, leftover.ErrByHand, id, id)
	}
	ctx, cancel := context.WithTimeout(ctx, replayCopySweepTimeout)
	defer cancel()
	conn, err := sweepConn(ctx, d.DSN)
	if err != nil {
		return "", byHand(err.Error())
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var isTemplate bool
	switch err := conn.QueryRow(ctx, "SELECT datistemplate FROM pg_database WHERE datname = $1", d.DB).Scan(&isTemplate); {
	case errors.Is(err, pgx.ErrNoRows):
		return "", nil
	case err != nil:
		return "", byHand(conninfo.Describe(err))
	}
	if isTemplate {
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+id+" WITH IS_TEMPLATE false"); err != nil {
			return "", byHand(conninfo.Describe(err))
		}
	}
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)"); err != nil {
		return "", byHand(conninfo.Describe(err))
	}
	return "dropped", nil
}

// restartAfterReset restarts the server when one of the settings reset
// has context postmaster (the server runs with ab's value until then):
// with --allow-restart recorded (d.RestartDataDir) on the server of that
// data directory; otherwise, or when erplab may not restart it now, it
// names what to run by hand (leftover.ErrByHand).
func restartAfterReset(ctx context.Context, conn *pgx.Conn, d abSettingsData, reset []string) ([]string, error) {
	qctx, cancel := context.WithTimeout(ctx, replayCopySweepTimeout)
	defer cancel()
	var n int
	if err := conn.QueryRow(qctx, `SELECT count(*) FROM pg_settings WHERE name = ANY($1) AND context = 'postmaster'`, reset).Scan(&n); err != nil || n == 0 {
		return nil, nil
	}
	var dataDir string
	_ = conn.QueryRow(qctx, `SELECT current_setting('data_directory')`).Scan(&dataDir)
	byHand := func(why string) error {
		return fmt.Errorf("%s: %w: pg_ctl restart -D %s -m fast (as the data directory's owner)", why, leftover.ErrByHand, dataDir)
	}
	if d.RestartDataDir == "" {
		return nil, byHand("the server runs with ab's value until a restart, and ab had no --allow-restart")
	}
	local, err := findLocalServer(qctx, d.DSN, "restart")
	if err != nil {
		return nil, byHand(err.Error())
	}
	if local.dataDir != d.RestartDataDir {
		return nil, byHand("the server's data directory is " + local.dataDir + ", ab's was " + d.RestartDataDir)
	}
	if err := local.restart(ctx, io.Discard); err != nil {
		return nil, byHand(err.Error())
	}
	return []string{"restarted the server (pg_ctl restart -D " + local.dataDir + " -m fast; its output in " + local.log + ")"}, nil
}

// undoABSettings resets (ALTER SYSTEM RESET, pg_reload_conf) each
// recorded setting that postgresql.auto.conf still sets to the value ab
// set; one set to another value since is someone else's and stays. When
// it cannot log in, it names the statements to run by hand.
func undoABSettings(ctx context.Context, e leftover.Entry) (string, error) {
	var d abSettingsData
	if json.Unmarshal(e.Data, &d) != nil || len(d.Names) == 0 || len(d.Names) != len(d.Values) {
		return "", fmt.Errorf("unreadable entry: %w", leftover.ErrNotOurs)
	}
	var stmts []string
	for _, n := range d.Names {
		stmts = append(stmts, "ALTER SYSTEM RESET "+quoteIdent(n))
	}
	byHand := func(why string) error {
		return fmt.Errorf("%s: %w: %s; SELECT pg_reload_conf()", why, leftover.ErrByHand, strings.Join(stmts, "; "))
	}
	cctx, cancel := context.WithTimeout(ctx, replayCopySweepTimeout)
	defer cancel()
	conn, err := sweepConn(cctx, d.DSN)
	if err != nil {
		return "", byHand(err.Error())
	}
	defer conn.Close(context.WithoutCancel(ctx))
	now := map[string]string{}
	rows, err := conn.Query(cctx, `SELECT name, setting FROM pg_file_settings WHERE name = ANY($1) AND sourcefile LIKE '%/postgresql.auto.conf'`, d.Names)
	if err != nil {
		return "", byHand(conninfo.Describe(err))
	}
	for rows.Next() {
		var n, v string
		if rows.Scan(&n, &v) == nil {
			now[n] = v
		}
	}
	rows.Close()
	var reset, kept []string
	for i, n := range d.Names {
		switch v, ok := now[n]; {
		case !ok:
		case v != d.Values[i]:
			kept = append(kept, n+" (now "+v+")")
		default:
			if _, err := conn.Exec(cctx, "ALTER SYSTEM RESET "+quoteIdent(n)); err != nil {
				return "", byHand(conninfo.Describe(err))
			}
			reset = append(reset, n)
		}
	}
	if len(reset) > 0 {
		if _, err := conn.Exec(cctx, "SELECT pg_reload_conf()"); err != nil {
			return "", byHand(conninfo.Describe(err))
		}
	}
	var said []string
	if len(reset) > 0 {
		said = append(said, "reset "+strings.Join(reset, ", "))
		restarted, err := restartAfterReset(ctx, conn, d, reset)
		if err != nil {
			return "", fmt.Errorf("%s; %w", said[0], err)
		}
		said = append(said, restarted...)
	}
	if len(kept) > 0 {
		said = append(said, "left alone, changed since: "+strings.Join(kept, ", "))
	}
	return strings.Join(said, "; "), nil
}
