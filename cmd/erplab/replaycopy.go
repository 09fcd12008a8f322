package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/leftover"
	"github.com/erplab/erplab/internal/replay"
)

// kindReplayCopy is the leftover kind of the database erplab replay
// --template makes: a replay killed outright (kill -9) leaves it, and the
// next erplab command's sweep drops it.
const kindReplayCopy = "replay-copy"

// replayCopySweepTimeout bounds the sweep's work on one copy (connect and
// drop), so that a server gone away does not stall every command.
const replayCopySweepTimeout = 15 * time.Second

func init() { leftover.Register(leftover.Kind{Name: kindReplayCopy, Undo: undoReplayCopy}) }

// replayCopyData is the Data of a replay-copy entry.
type replayCopyData struct {
	// DSN is the server's DSN (the database to connect to for the drop)
	// without any password: the sweep finds one where libpq would
	// (PGPASSWORD, the password file), or names the copy to drop by hand.
	DSN string `json:"dsn"`
	// DB is the copy's name.
	DB string `json:"db"`
	// OID is the copy's pg_database OID once made (0 before): the proof
	// that the database found under DB is the one erplab made.
	OID uint32 `json:"oid,omitempty"`
}

// replayCopy is a copy made by copyTemplate, with its leftover entry.
type replayCopy struct {
	db, admin string
	rec       *leftover.Record
	entry     *leftover.Entry
	data      replayCopyData
}

// serverName is "host=H port=P" of dsn (no user, no password), for the
// entry's Path and the sweep's line.
func serverName(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "the --dsn server"
	}
	return fmt.Sprintf("host=%s port=%d", cfg.Host, cfg.Port)
}

// copyTemplate creates erplab_replay_<time> as a copy of template on the
// server of dsn (connected to its database, or to postgres when that is
// the template: a copy needs its template without other sessions). The
// copy is recorded in erplab's leftover record before it is made, with
// the DSN stripped of its password, and its OID once made.
func copyTemplate(ctx context.Context, dsn, template string) (*replayCopy, error) {
	admin := dsn
	if cfg, perr := pgx.ParseConfig(dsn); perr == nil && cfg.Database == template {
		admin = replay.WithDatabase(dsn, "postgres")
	}
	rec, err := leftover.Open()
	if err != nil {
		return nil, fmt.Errorf("--template: %w", err)
	}
	db := replay.CopyPrefix + strings.ReplaceAll(time.Now().UTC().Format("20060102_150405.000000"), ".", "_")
	c := &replayCopy{db: db, admin: admin, rec: rec, data: replayCopyData{DB: db}}
	if argv, _, err := conninfo.Split(admin); err == nil {
		c.data.DSN = argv
	}
	if c.entry, err = rec.Add(kindReplayCopy, db+" on "+serverName(admin), c.data); err != nil {
		return nil, fmt.Errorf("--template: %w", err)
	}
	conn, err := conninfo.Connect(ctx, admin, "erplab-replay", nil)
	if err != nil {
		_ = rec.Remove(c.entry)
		return nil, fmt.Errorf("--template %s: %w", template, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()+" TEMPLATE "+pgx.Identifier{template}.Sanitize()); err != nil {
		c.forgetFailed(err)
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) {
			return nil, fmt.Errorf("--template %s: CREATE DATABASE %s TEMPLATE %s: %s (SQLSTATE %s)", template, db, template, pgErr.Message, pgErr.Code)
		}
		return nil, fmt.Errorf("--template %s: %s", template, conninfo.Describe(err))
	}
	if conn.QueryRow(ctx, "SELECT oid FROM pg_database WHERE datname = $1", db).Scan(&c.data.OID) == nil {
		_ = rec.Update(c.entry, c.data)
	}
	return c, nil
}

// forgetFailed removes the entry of a copy whose CREATE DATABASE failed:
// at once when the name was taken (42P04: not ours), else after a DROP
// DATABASE IF EXISTS (an interrupted CREATE may have completed); when
// that fails the entry stays for the next sweep.
func (c *replayCopy) forgetFailed(err error) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42P04" {
		if replay.DropCopy(c.admin, c.db) != nil {
			return
		}
	}
	_ = c.rec.Remove(c.entry)
}

// drop drops the copy unless keep, also after an error or an
// interruption, and removes its leftover entry (a kept copy is the
// user's). A copy it cannot drop stays in the record for the next sweep.
func (c *replayCopy) drop(out, errOut io.Writer, keep bool) {
	if keep {
		_ = c.rec.Remove(c.entry)
		fmt.Fprintf(out, "kept the replayed database: %s\n", c.db)
		return
	}
	if err := replay.DropCopy(c.admin, c.db); err != nil {
		fmt.Fprintf(errOut, "warning: could not drop the replayed copy %s: %v\n", c.db, err)
		return
	}
	_ = c.rec.Remove(c.entry)
}

// undoReplayCopy is the sweep of a replay-copy entry: it drops the
// database when it exists with the recorded OID (any database of that
// name when the replay died before recording it: the name holds the
// millisecond it was made). When it cannot connect or drop (a password
// the sweep does not have, a server gone), it names the database to drop
// by hand (leftover.ErrByHand).
func undoReplayCopy(ctx context.Context, e leftover.Entry) (string, error) {
	var d replayCopyData
	if json.Unmarshal(e.Data, &d) != nil || !strings.HasPrefix(d.DB, replay.CopyPrefix) {
		return "", fmt.Errorf("unreadable entry: %w", leftover.ErrNotOurs)
	}
	byHand := func(why string) error {
		return fmt.Errorf("%s: %w: DROP DATABASE %s WITH (FORCE)", why, leftover.ErrByHand, pgx.Identifier{d.DB}.Sanitize())
	}
	ctx, cancel := context.WithTimeout(ctx, replayCopySweepTimeout)
	defer cancel()
	conn, err := sweepConn(ctx, d.DSN)
	if err != nil {
		return "", byHand(err.Error())
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var oid uint32
	switch err := conn.QueryRow(ctx, "SELECT oid FROM pg_database WHERE datname = $1", d.DB).Scan(&oid); {
	case errors.Is(err, pgx.ErrNoRows):
		return "", nil
	case err != nil:
		return "", byHand(conninfo.Describe(err))
	case d.OID != 0 && oid != d.OID:
		return "", fmt.Errorf("database %s has OID %d, not the %d erplab made: %w", d.DB, oid, d.OID, leftover.ErrNotOurs)
	}
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{d.DB}.Sanitize()+" WITH (FORCE)"); err != nil {
		return "", byHand(conninfo.Describe(err))
	}
	return "dropped", nil
}
