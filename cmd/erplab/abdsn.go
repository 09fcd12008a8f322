package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/experiment"
	"github.com/erplab/erplab/internal/leftover"
	"github.com/erplab/erplab/internal/remedy/settings"
	"github.com/erplab/erplab/internal/remedy/tmpfs"
	"github.com/erplab/erplab/internal/workload"
)

// checkABFlags refuses, before the plan, a file or a server, what the
// flags alone show ab cannot do: --template-db without --dsn and, with
// --dsn (the server erplab did not start), --cold (a restart) and the
// tmpfs remedy (a mount beside the server's data directory); an
// --out-dir that exists and is no directory. Each refusal is one line,
// a usage error.
func checkABFlags(dsn, templateDB, outDir string, cold bool, vs []experiment.Variant) error {
	if outDir != "" {
		if fi, err := os.Stat(outDir); err == nil && !fi.IsDir() {
			return withCode(exitUsage, fmt.Errorf("--out-dir %s exists and is not a directory", outDir))
		}
	}
	if dsn == "" {
		if templateDB != "" {
			return withCode(exitUsage, errors.New("--template-db names a database on the --dsn server: give --dsn"))
		}
		return nil
	}
	if cold {
		return withCode(exitUsage, errors.New("--cold restarts the server before every run: ab --dsn never restarts a server erplab did not start; drop --cold"))
	}
	for _, v := range vs {
		for _, r := range v.Remedies {
			if r.Kind == tmpfs.Name {
				return withCode(exitUsage, fmt.Errorf("--variant %s: %s mounts a tmpfs beside the server's data directory: only on ab's own server; drop --dsn", v.Name, tmpfs.Name))
			}
		}
	}
	return nil
}

// checkABServer refuses, before anything is built, what ab cannot do on
// the server of dsn, which erplab did not start (ab --dsn), beyond
// checkABFlags: a role without CREATEDB (every run is a copy), settings
// the role may not ALTER SYSTEM or that need a restart, and a
// --template-db that does not exist. Each refusal is one line, a usage
// error.
func checkABServer(ctx context.Context, dsn, templateDB string, vs []experiment.Variant) error {
	conn, err := conninfo.Connect(ctx, dsn, "erplab-ab", nil)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var role string
	var super, createdb bool
	if err := conn.QueryRow(ctx, `SELECT current_user, rolsuper, rolcreatedb FROM pg_roles WHERE rolname = current_user`).Scan(&role, &super, &createdb); err != nil {
		return fmt.Errorf("--dsn: role: %s", conninfo.Describe(err))
	}
	if !super && !createdb {
		return withCode(exitUsage, fmt.Errorf("--dsn: role %s has no CREATEDB: every ab run is a CREATE DATABASE ... TEMPLATE copy (ALTER ROLE %s CREATEDB, or connect as a role that has it)", role, role))
	}
	if templateDB != "" {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, templateDB).Scan(&n); err != nil {
			return fmt.Errorf("--template-db: %s", conninfo.Describe(err))
		}
		if n == 0 {
			return withCode(exitUsage, fmt.Errorf("--template-db %s: no such database on the --dsn server", templateDB))
		}
	}
	for _, v := range vs {
		for _, r := range v.Remedies {
			if r.Kind != settings.Name {
				continue
			}
			if err := settings.Preflight(ctx, dsn, r.Arg); err != nil {
				return withCode(exitUsage, fmt.Errorf("--variant %s: %w", v.Name, err))
			}
		}
	}
	return nil
}

// startABServer prepares the server of dsn for ab: the template is the
// user's database templateDB (copied, never written) or one erplab builds
// there from tw (erplab_ab_<id>_template); every database made and every
// setting changed is in the leftover record until undone. done drops the
// template erplab built (warnings on out).
func startABServer(ctx context.Context, out io.Writer, dsn, templateDB string, tw workload.Workload, scale float64, seed uint64) (ext *experiment.External, template string, done func(), err error) {
	var id [4]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read does not fail
	ext = &experiment.External{Conn: dsn, Prefix: experiment.ExternalPrefix + hex.EncodeToString(id[:]) + "_", UserTemplate: templateDB}
	rec, err := leftover.Open()
	if err != nil {
		return nil, "", nil, fmt.Errorf("ab --dsn: %w", err)
	}
	argv, _, err := conninfo.Split(dsn)
	if err != nil {
		argv = "" // the sweep names the database to drop by hand
	}
	ext.Track = func(_ context.Context, db string) (func(), error) {
		return trackEntry(rec, kindABDatabase, db+" on "+serverName(dsn), abDatabaseData{DSN: argv, DB: db})
	}
	ext.TrackSettings = func(_ context.Context, names, values []string) (func(), error) {
		return trackEntry(rec, kindABSettings, "ALTER SYSTEM "+fmt.Sprint(names)+" on "+serverName(dsn), abSettingsData{DSN: argv, Names: names, Values: values})
	}
	if templateDB != "" {
		fmt.Fprintf(out, "template: your database %s, copied for every run (never written)\n", templateDB)
		return ext, templateDB, func() {}, nil
	}
	template = ext.Prefix + "template"
	forget, err := experiment.BuildExternalTemplate(ctx, ext, template, tw, scale, seed, out)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", nil, withCode(exitInterrupted, fmt.Errorf("ab: %w", err))
		}
		return nil, "", nil, err
	}
	done = func() {
		if err := experiment.DropExternal(context.WithoutCancel(ctx), ext, template); err != nil {
			fmt.Fprintf(out, "warning: dropping the template %s: %v\n", template, err)
			return
		}
		forget()
	}
	return ext, template, done, nil
}

// trackEntry adds an entry of kind to rec before the thing is made and
// returns its forget (removal once undone).
func trackEntry(rec *leftover.Record, kind, path string, data any) (func(), error) {
	e, err := rec.Add(kind, path, data)
	if err != nil {
		return nil, fmt.Errorf("ab --dsn: %w", err)
	}
	return func() { _ = rec.Remove(e) }, nil
}

// quoteIdent is name as an SQL identifier.
func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }
