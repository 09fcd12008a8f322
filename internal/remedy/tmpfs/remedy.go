package tmpfs

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/leftover"
	"github.com/erplab/erplab/internal/remedy"
)

// SizeParam is the remedy parameter (erplab ab --tmpfs-size) holding the
// tmpfs size of the remedy; default DefaultSize.
const SizeParam = "tmpfs-size"

// DefaultSize is the remedy's tmpfs size unless SizeParam says otherwise.
const DefaultSize = "1G"

// init registers the remedy Name: Apply (system scope, default
// tablespace) through the run's database before the run, Undo after it.
func init() {
	remedy.Register(remedy.Kind{
		Name:      Name,
		Doc:       "temp tables on a tmpfs tablespace (erplab doctor's fix), undone after",
		NeedsRoot: "it mounts a tmpfs",
		Params:    []remedy.Param{{Name: SizeParam, Default: DefaultSize, Usage: "size of the tmpfs (k, m, g or %)", Check: ValidSize}},
		// Temp tables on tmpfs: the temp-table storm is the operation it
		// targets (its p95 and APDEX: the APDEX of one operation can be
		// constant within each side), the integral says whether the rest
		// paid for it, and with --profile the file system's share of the
		// server's CPU is what it removes (the field's 13.5 % -> 1.6 %;
		// declared but not in the comparison without a profile).
		Primary: []string{"integral:apdex", "temp_table_storm:p95_ms", "temp_table_storm:apdex", "cpu file system:share_pct:lower"},
		Apply:   applyRemedy,
		Undo:    undoRemedy,
	})
}

// applyRemedy runs Apply on the target's database (Cluster.DSN(Database)
// or ServerDSN, not a proxy's) and records the verification and the
// state file. On ab's throwaway server (t.Cluster) the scope is system
// and everything goes with the server: the state file is kept in the
// cluster's own directory (<Cluster.Dir()>/erplab-state, removed with
// it). On a server erplab did not start (ab --dsn, local, as root:
// checked before) the scope is the run database, the tablespace is
// <run database>_tmpfs and the state file is in erplab's state directory
// (leftover.StateDir). Either way the tmpfs is recorded in erplab's
// crash-safe record (package leftover) before it is mounted: after a
// kill -9 of ab the next erplab command unmounts it (newest entry first).
//
// CREATE on the tablespace goes to the role the run connects as (from
// t.DSN), not to PUBLIC; with no t.DSN to no one (superusers need none).
func applyRemedy(ctx context.Context, t *remedy.Target, _ string) (*remedy.Effect, error) {
	opts := Options{Size: t.Param(SizeParam), Scope: ScopeSystem, recordMount: true}
	dsn := t.ServerDSN
	if t.Cluster != nil {
		dsn, opts.StateDir = t.Cluster.DSN(t.Database), filepath.Join(t.Cluster.Dir(), "erplab-state")
	} else {
		dir, err := leftover.StateDir()
		if err != nil {
			return nil, fmt.Errorf("remedy %s: %w", Name, err)
		}
		opts.StateDir, opts.Scope, opts.Tablespace = dir, ScopeDatabase, runTablespace(t.Database)
	}
	forget := func() {}
	if t.Cluster == nil && t.RecordTablespace != nil {
		var err error
		if forget, err = t.RecordTablespace(ctx, opts.Tablespace); err != nil {
			return nil, fmt.Errorf("remedy %s: %w", Name, err)
		}
	}
	// Without a DSN pgx would fill in the OS user, which need not be a role.
	if cfg, err := pgx.ParseConfig(t.DSN); t.DSN != "" && err == nil && cfg.User != "" {
		opts.GrantTo = []string{cfg.User}
	}
	v, err := Apply(ctx, dsn, opts, t.Log)
	if err != nil {
		return nil, fmt.Errorf("remedy %s: %w", Name, err) // Apply undid its steps; a record left is dropped by the sweep
	}
	return &remedy.Effect{Changed: map[string]any{
		"tablespace": or(opts.Tablespace, DefaultTablespace), "tmpfs_size": opts.Size, "scope": string(opts.Scope),
		"verification": v.String(), "fs_type": v.FSType, "mount_point": v.MountPoint,
		"state_file": v.StateFile,
	}, State: applied{dsn: dsn, opts: opts, forget: forget}}, nil
}

// applied is the Effect.State of the remedy: where and how it applied.
type applied struct {
	dsn    string
	opts   Options
	forget func() // the tablespace's leftover record, once dropped
}

// runTablespace is the tablespace of run database db on a server erplab
// did not start: db_tmpfs, db cut to fit PostgreSQL's 63 bytes.
func runTablespace(db string) string {
	const suffix, maxIdent = "_tmpfs", 63
	if len(db) > maxIdent-len(suffix) {
		db = db[:maxIdent-len(suffix)]
	}
	return db + suffix
}

// undoRemedy runs Undo with the options of applyRemedy and records
// undone: true.
func undoRemedy(ctx context.Context, t *remedy.Target, e *remedy.Effect) error {
	a := e.State.(applied)
	if err := Undo(ctx, a.dsn, a.opts, t.Log); err != nil {
		return fmt.Errorf("remedy %s: undo: %w", Name, err)
	}
	a.forget()
	e.Changed["undone"] = true
	return nil
}
