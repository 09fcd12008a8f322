package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/experiment"
	"github.com/erplab/erplab/internal/leftover"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/results"
)

// abDSNSetting is the setting the tests' settings remedy changes on the
// package's server (which erplab did not start): a value nobody else
// sets, reloadable.
const abDSNSetting = "work_mem = '7777kB'\n"

// abDSNState is what ab --dsn leaves on the server: its databases
// (erplab_ab_...) and whether postgresql.auto.conf sets work_mem to the
// tests' value, with work_mem as a new session sees it.
func abDSNState(t *testing.T, pool *pgxpool.Pool) (dbs []string, set bool, workMem string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := pool.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE $1 ORDER BY 1`, experiment.ExternalPrefix+"%")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			t.Fatal(err)
		}
		dbs = append(dbs, d)
	}
	rows.Close()
	if err := pool.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_file_settings WHERE name = 'work_mem' AND setting = '7777kB'`).Scan(&set); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, srv.DSN(t, "postgres")) // a new session sees the last reload
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(ctx, `SELECT current_setting('work_mem')`).Scan(&workMem); err != nil {
		t.Fatal(err)
	}
	return dbs, set, workMem
}

// waitClean polls until the server has no ab database and work_mem is
// back to before in a new session (a reload is asynchronous).
func waitClean(t *testing.T, pool *pgxpool.Pool, before, out string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		dbs, set, wm := abDSNState(t, pool)
		if len(dbs) == 0 && !set && wm == before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left on the server: databases %v, work_mem in postgresql.auto.conf %v, work_mem %s (was %s)\n%s", dbs, set, wm, before, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// withState runs cmd with a leftover record of the test's own.
func withState(cmd *exec.Cmd, state string) *exec.Cmd {
	cmd.Env = append(cmd.Env, "ERPLAB_STATE_DIR="+state)
	return cmd
}

// ab --dsn on a server erplab did not start: the template built there,
// each run on a copy, the settings variant applied by ALTER SYSTEM and
// reset after; nothing of ab's stays (databases, setting, record), and
// the run databases had pg_stat_statements when the server preloads it.
func TestABDSN(t *testing.T) {
	pgtest.SkipShort(t) // builds the binary and runs on the package's server
	dir := t.TempDir()
	conf := filepath.Join(dir, "p.conf")
	if err := os.WriteFile(conf, []byte(abDSNSetting), 0o644); err != nil {
		t.Fatal(err)
	}
	pool := srv.Pool(t, srv.DSN(t, "postgres"))
	_, _, before := abDSNState(t, pool)
	state := filepath.Join(dir, "state")
	out, err := withState(erplab(t, dir, "ab", "--dsn", srv.DSN(t, "postgres"), "--workload", "smoke", "--users", "2", "--duration", "2s",
		"--think", "20ms", "--interval", "500ms", "--progress", "0", "--graceful-stop", "1s", "--rounds", "1",
		"--variant", "s=settings:"+conf, "--out-dir", "res"), state).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	waitClean(t, pool, before, string(out))
	if left, _ := filepath.Glob(filepath.Join(state, "leftover", "*.json")); len(left) != 0 {
		t.Fatalf("leftover entries after a clean ab --dsn: %v\n%s", left, out)
	}
	doc, err := results.Read(filepath.Join(dir, "res", "s-1.json"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	recs, err := experiment.Remedies(doc)
	b, _ := json.Marshal(recs)
	if err != nil || len(recs) != 1 || !strings.Contains(string(b), `"during":"7777kB"`) {
		t.Fatalf("remedies %+v (%v)\n%s", recs, err, out)
	}
	var libs string
	if err := pool.QueryRow(context.Background(), `SELECT current_setting('shared_preload_libraries')`).Scan(&libs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(libs, "pg_stat_statements") {
		t.Logf("the server does not preload pg_stat_statements (%q): statements not checked", libs)
		return
	}
	obs, err := compare.Observations(doc)
	if err != nil || obs == nil || obs.Statements == nil || obs.Statements.Total.Calls == 0 {
		t.Fatalf("no pg_stat_statements rows in the run on your server (%v)\n%s", err, out)
	}
}

// Each refusal of ab --dsn is one line and a usage error, before any
// database is made.
func TestABDSNRefusals(t *testing.T) {
	pgtest.SkipShort(t)
	if os.Geteuid() != 0 {
		t.Skip("the tmpfs refusal is checked as root (as non-root the remedy is refused earlier)")
	}
	dir := t.TempDir()
	dsn := srv.DSN(t, "postgres")
	pool := srv.Pool(t, dsn)
	ctx := context.Background()
	conf := filepath.Join(dir, "p.conf")
	restart := filepath.Join(dir, "restart.conf")
	auto := filepath.Join(dir, "auto.conf")
	for f, text := range map[string]string{conf: abDSNSetting, restart: "shared_buffers = '64MB'\n", auto: "log_min_duration_statement = 12345\n"} {
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `ALTER SYSTEM SET log_min_duration_statement = 12345`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `ALTER SYSTEM RESET log_min_duration_statement`) })
	_, plainDSN := srv.NewRole(t, dsn)
	creator, creatorDSN := srv.NewRole(t, dsn+" dbname=postgres")
	if _, err := pool.Exec(ctx, `ALTER ROLE "`+creator+`" CREATEDB`); err != nil {
		t.Fatal(err)
	}
	ab := func(dsn string, more ...string) []string {
		return append([]string{"ab", "--dsn", dsn, "--workload", "smoke", "--duration", "1s", "--rounds", "1"}, more...)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{ab(dsn, "--variant", "s=settings:"+conf, "--cold"), "drop --cold"},
		{ab("host=192.0.2.1 port=5432 user=x dbname=postgres connect_timeout=2", "--variant", "t=tmpfs-temp-tablespace"), "t: tmpfs-temp-tablespace: the --dsn server (host 192.0.2.1) is not on this host"},
		{ab(plainDSN, "--variant", "p=rewrite-proxy"), "has no CREATEDB"},
		{ab(creatorDSN, "--variant", "s=settings:"+conf), "may not ALTER SYSTEM SET work_mem"},
		{ab(dsn, "--variant", "s=settings:"+restart), "shared_buffers needs a server restart"},
		{ab("host=192.0.2.1 port=5432 user=x dbname=postgres connect_timeout=2", "--allow-restart", "--variant", "s=settings:"+restart), "is not on this host"},
		{ab("host=192.0.2.1 port=5432 user=x dbname=postgres connect_timeout=2", "--allow-restart", "--cold", "--variant", "p=rewrite-proxy"), "is not on this host"},
		{ab(plainDSN, "--allow-restart", "--variant", "s=settings:"+restart), "SHOW data_directory"},
		{ab(dsn, "--variant", "s=settings:"+auto), "log_min_duration_statement already set by ALTER SYSTEM"},
		{ab(dsn, "--variant", "p=rewrite-proxy", "--template-db", "no_such_database"), "no such database"},
		{[]string{"ab", "--workload", "smoke", "--variant", "p=rewrite-proxy", "--template-db", "postgres"}, "give --dsn"},
	} {
		cmd := erplab(t, dir, c.args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		msg := strings.TrimSpace(stderr.String())
		if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || strings.Contains(msg, "\n") || !strings.Contains(msg, c.want) {
			t.Errorf("%v: exit %v, want %d and one line with %q; stderr %q", c.args, err, exitUsage, c.want, msg)
		}
	}
	if dbs, _, _ := abDSNState(t, pool); len(dbs) != 0 {
		t.Fatalf("a refused ab made databases: %v", dbs)
	}
}

// kill -9 of ab --dsn while a settings variant runs (its setting in
// postgresql.auto.conf, its copy on the server): the next erplab command
// drops the copy and the template and resets the setting.
func TestABDSNKilled(t *testing.T) {
	pgtest.SkipShort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "p.conf")
	if err := os.WriteFile(conf, []byte(abDSNSetting), 0o644); err != nil {
		t.Fatal(err)
	}
	pool := srv.Pool(t, srv.DSN(t, "postgres"))
	_, _, before := abDSNState(t, pool)
	state := filepath.Join(dir, "state")
	cmd := withState(erplab(t, dir, "ab", "--dsn", srv.DSN(t, "postgres"), "--workload", "smoke", "--users", "2", "--duration", "8s",
		"--think", "20ms", "--progress", "0", "--observe=false", "--rounds", "1",
		"--variant", "s=settings:"+conf, "--out-dir", "res"), state)
	var dbs []string
	killWhen(t, cmd, "the settings variant running", 3*time.Minute, 100*time.Millisecond, func() bool {
		var set bool
		dbs, set, _ = abDSNState(t, pool)
		return set && len(dbs) == 2
	})
	if got, set, _ := abDSNState(t, pool); len(got) != 2 || !set {
		t.Fatalf("after kill -9: databases %v, setting set %v: nothing left to clean?", got, set)
	}
	out, err := withState(erplab(t, dir, "version"), state).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	waitClean(t, pool, before, string(out))
	for _, d := range dbs {
		if !strings.Contains(string(out), d) {
			t.Errorf("the sweep's line does not name %s:\n%s", d, out)
		}
	}
}

// The sweep of ab --dsn's entries when it cannot log in (a server gone,
// a password it does not have): each names what to run by hand
// (leftover.ErrByHand); an entry that is not ab's database is refused.
func TestABDSNSweepByHand(t *testing.T) {
	gone := "host=/nonexistent-erplab-test port=1 user=x dbname=postgres connect_timeout=2"
	db, _ := json.Marshal(abDatabaseData{DSN: gone, DB: experiment.ExternalPrefix + "0123abcd_run_s_1"})
	_, err := undoABDatabase(context.Background(), leftover.Entry{Kind: kindABDatabase, Data: db})
	if !errors.Is(err, leftover.ErrByHand) || !strings.Contains(err.Error(), `DROP DATABASE "erplab_ab_0123abcd_run_s_1" WITH (FORCE)`) {
		t.Fatalf("database: %v", err)
	}
	st, _ := json.Marshal(abSettingsData{DSN: gone, Names: []string{"work_mem"}, Values: []string{"7777kB"}})
	_, err = undoABSettings(context.Background(), leftover.Entry{Kind: kindABSettings, Data: st})
	if !errors.Is(err, leftover.ErrByHand) || !strings.Contains(err.Error(), `ALTER SYSTEM RESET "work_mem"; SELECT pg_reload_conf()`) {
		t.Fatalf("settings: %v", err)
	}
	notOurs, _ := json.Marshal(abDatabaseData{DSN: gone, DB: "shop"})
	if _, err := undoABDatabase(context.Background(), leftover.Entry{Kind: kindABDatabase, Data: notOurs}); !errors.Is(err, leftover.ErrNotOurs) {
		t.Fatalf("a database not named erplab_ab_...: %v", err)
	}
}

// ab --dsn as a role with CREATEDB and nothing more, through the proxy
// with that role's credentials: the runs go on without the statistics
// extensions it may not create (one note each), and nothing stays.
func TestABDSNNotSuperuser(t *testing.T) {
	pgtest.SkipShort(t)
	dir := t.TempDir()
	dsn := srv.DSN(t, "postgres")
	pool := srv.Pool(t, dsn)
	role, roleDSN := srv.NewRole(t, dsn)
	if _, err := pool.Exec(context.Background(), `ALTER ROLE "`+role+`" CREATEDB`); err != nil {
		t.Fatal(err)
	}
	_, _, before := abDSNState(t, pool)
	out, err := withState(erplab(t, dir, "ab", "--dsn", roleDSN, "--workload", "smoke", "--users", "2", "--duration", "1s",
		"--think", "20ms", "--progress", "0", "--observe=false", "--graceful-stop", "1s", "--rounds", "1",
		"--variant", "p=rewrite-proxy", "--out-dir", "res"), filepath.Join(dir, "state")).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := results.Read(filepath.Join(dir, "res", "p-1.json")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	waitClean(t, pool, before, string(out))
}

// A refusal the flags alone decide writes nothing: no plan, no
// ./erplab-results: --template-db without --dsn, --cold with --dsn(-file)
// without --allow-restart, tmpfs or --allow-restart with a --dsn host not
// on this host, --allow-restart without --dsn, an --out-dir that is a
// regular file.
func TestABRefusalsWriteNothing(t *testing.T) {
	files := t.TempDir()
	dsnFile := filepath.Join(files, "dsn")
	remote := filepath.Join(files, "remote")
	conf := filepath.Join(files, "s.conf")
	notDir := filepath.Join(files, "results")
	for p, text := range map[string]string{dsnFile: "host=/nonexistent dbname=erp\n", remote: "host=192.0.2.1 dbname=erp\n", conf: "work_mem = '8MB'\n", notDir: "x"} {
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"ab", "--workload", "smoke", "--variant", "x=rewrite-proxy", "--template-db", "mydb"},
		{"ab", "--dsn-file", remote, "--variant", "t=tmpfs-temp-tablespace"},
		{"ab", "--dsn-file", remote, "--allow-restart", "--variant", "s=settings:" + conf},
		{"ab", "--allow-restart", "--variant", "s=settings:" + conf},
		{"ab", "--dsn-file", dsnFile, "--cold", "--variant", "s=settings:" + conf},
		{"ab", "--workload", "smoke", "--variant", "x=rewrite-proxy", "--out-dir", notDir},
	} {
		dir := t.TempDir()
		cmd := erplab(t, dir, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || len(out) != 0 || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
			t.Errorf("%v: exit %v, stdout %q, stderr %q; want exit %d, one line", args, err, out, stderr.String(), exitUsage)
		}
		if ents, err := os.ReadDir(dir); err != nil || len(ents) > 0 {
			t.Errorf("%v: refused but left %v (%v)", args, ents, err)
		}
	}
}
