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
	"github.com/erplab/erplab/internal/remedy/thp"
	"github.com/erplab/erplab/internal/remedy/tmpfs"
	"github.com/erplab/erplab/internal/workload"
)

// checkABFlags refuses, before the plan, a file or a server, what the
// flags alone show ab cannot do: --template-db without --dsn, --cold
// with --dsn (the server erplab did not start) without --allow-restart,
// --allow-restart without --dsn, --allow-restart or the tmpfs or thp
// remedy with a --dsn host not on this host (onThisHost), and an --out-dir that
// exists and is no directory. What needs the server (its data directory,
// the role's rights) is checkABServer's. Each refusal is one line, a
// usage error.
func checkABFlags(dsn, templateDB, outDir string, cold, allowRestart bool, vs []experiment.Variant) error {
	if outDir != "" {
		if fi, err := os.Stat(outDir); err == nil && !fi.IsDir() {
			return withCode(exitUsage, fmt.Errorf("--out-dir %s exists and is not a directory", outDir))
		}
	}
	if dsn == "" {
		switch {
		case templateDB != "":
			return withCode(exitUsage, errors.New("--template-db names a database on the --dsn server: give --dsn"))
		case allowRestart:
			return withCode(exitUsage, errors.New("--allow-restart is for a --dsn server on this host: ab restarts its own server anyway"))
		}
		return nil
	}
	if cold && !allowRestart {
		return withCode(exitUsage, errors.New("--cold restarts the server before every run: ab --dsn restarts a server erplab did not start only with --allow-restart (a server on this host); drop --cold or add --allow-restart"))
	}
	if allowRestart {
		if err := onThisHost(dsn, "--allow-restart"); err != nil {
			return withCode(exitUsage, err)
		}
	}
	for _, v := range vs {
		for _, r := range v.Remedies {
			if r.Kind == tmpfs.Name || r.Kind == thp.Name {
				if err := onThisHost(dsn, "--variant "+v.Name+": "+r.Kind); err != nil {
					return withCode(exitUsage, err)
				}
			}
		}
	}
	return nil
}

// checkABServer refuses, before anything is built, what ab cannot do on
// the server of dsn, which erplab did not start (ab --dsn): --cold (a
// restart) without allowRestart, allowRestart on a server erplab may not
// restart (findLocalServer), the tmpfs remedy (a mount beside the
// server's data directory), a role without CREATEDB (every run is a
// copy), settings the role may not ALTER SYSTEM or that need a restart
// without allowRestart, and a --template-db that does not exist. Each
// refusal is one line, a usage error. With allowRestart it returns the
// server to restart.
func checkABServer(ctx context.Context, dsn, templateDB string, cold, allowRestart bool, vs []experiment.Variant) (*localServer, error) {
	if cold && !allowRestart {
		return nil, withCode(exitUsage, errors.New("--cold restarts the server before every run: ab --dsn restarts a server erplab did not start only with --allow-restart (a server on this host); drop --cold or add --allow-restart"))
	}
	mounts, err := checkTmpfsServer(ctx, dsn, vs)
	if err != nil {
		return nil, err
	}
	var local *localServer
	if allowRestart {
		if local, err = findLocalServer(ctx, dsn, "--allow-restart"); err != nil {
			return nil, withCode(exitUsage, err)
		}
	}
	conn, err := conninfo.Connect(ctx, dsn, "erplab-ab", nil)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var role string
	var super, createdb bool
	if err := conn.QueryRow(ctx, `SELECT current_user, rolsuper, rolcreatedb FROM pg_roles WHERE rolname = current_user`).Scan(&role, &super, &createdb); err != nil {
		return nil, fmt.Errorf("--dsn: role: %s", conninfo.Describe(err))
	}
	if mounts != "" && !super {
		return nil, withCode(exitUsage, fmt.Errorf("--variant %s: %s needs a superuser role (CREATE TABLESPACE); role %s is not one", mounts, tmpfs.Name, role))
	}
	if !super && !createdb {
		return nil, withCode(exitUsage, fmt.Errorf("--dsn: role %s has no CREATEDB: every ab run is a CREATE DATABASE ... TEMPLATE copy (ALTER ROLE %s CREATEDB, or connect as a role that has it)", role, role))
	}
	if templateDB != "" {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, templateDB).Scan(&n); err != nil {
			return nil, fmt.Errorf("--template-db: %s", conninfo.Describe(err))
		}
		if n == 0 {
			return nil, withCode(exitUsage, fmt.Errorf("--template-db %s: no such database on the --dsn server", templateDB))
		}
	}
	for _, v := range vs {
		for _, r := range v.Remedies {
			if r.Kind != settings.Name {
				continue
			}
			if err := settings.Preflight(ctx, dsn, r.Arg, allowRestart); err != nil {
				return nil, withCode(exitUsage, fmt.Errorf("--variant %s: %w", v.Name, err))
			}
		}
	}
	return local, nil
}

// checkTmpfsServer refuses the tmpfs remedy on the server of dsn unless
// erplab is root and the server is on this host (findLocalServer); it
// returns the first variant that has it ("" for none).
func checkTmpfsServer(ctx context.Context, dsn string, vs []experiment.Variant) (string, error) {
	for _, v := range vs {
		for _, r := range v.Remedies {
			if r.Kind != tmpfs.Name {
				continue
			}
			why := "--variant " + v.Name + ": " + tmpfs.Name
			if os.Geteuid() != 0 {
				return "", withCode(exitUsage, fmt.Errorf("%s mounts a tmpfs beside your server's data directory: run erplab as root", why))
			}
			if _, err := findLocalServer(ctx, dsn, why); err != nil {
				return "", withCode(exitUsage, err)
			}
			return v.Name, nil
		}
	}
	return "", nil
}

// startABServer prepares the server of dsn for ab: the template is the
// user's database templateDB (copied, never written) or one erplab builds
// there from tw (erplab_ab_<id>_template); every database made and every
// setting changed is in the leftover record until undone. With local
// (--allow-restart) the runs may restart it (External.Restart) and the
// record of the settings says so. done drops the template erplab built
// (warnings on out).
func startABServer(ctx context.Context, out io.Writer, dsn, templateDB string, local *localServer, tw workload.Workload, scale float64, seed uint64) (ext *experiment.External, template string, done func(), err error) {
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
	ext.TrackTablespace = func(_ context.Context, name string) (func(), error) {
		return trackEntry(rec, kindABTablespace, "tablespace "+name+" on "+serverName(dsn), abTablespaceData{DSN: argv, Tablespace: name})
	}
	data := abSettingsData{DSN: argv}
	if local != nil {
		ext.Restart = func(ctx context.Context) error { return local.restart(ctx, out) }
		data.RestartDataDir = local.dataDir
	}
	ext.TrackSettings = func(_ context.Context, names, values []string) (func(), error) {
		data.Names, data.Values = names, values
		return trackEntry(rec, kindABSettings, "ALTER SYSTEM "+fmt.Sprint(names)+" on "+serverName(dsn), data)
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
