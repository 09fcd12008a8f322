package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/experiment"
	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/results"
)

// abRestartSetting is the setting of context postmaster the restart
// tests apply (PostgreSQL's default is 64).
const abRestartSetting = "max_locks_per_transaction = 77\n"

// restartableServer starts a server of the test's own for ab --dsn
// --allow-restart: a pg_ctl restart would take the package's server from
// the harness (the postmaster it started exits). The cleanup stops
// whatever postmaster runs in its data directory (pg_ctl stop -m
// immediate, as its owner) before Stop removes the directory.
func restartableServer(t *testing.T) *pgcluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Options{MaxConnections: 60, SharedBuffers: "32MB", StopWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(c.DataDir(), "postmaster.pid")); err == nil {
			cmd := exec.Command(filepath.Join(c.BinDir(), "pg_ctl"), "stop", "-D", c.DataDir(), "-m", "immediate", "-w")
			cmd.Dir = "/"
			if u, err := user.Lookup(c.OSUser()); err == nil && os.Geteuid() == 0 {
				uid, _ := strconv.ParseUint(u.Uid, 10, 32)
				gid, _ := strconv.ParseUint(u.Gid, 10, 32)
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
			}
			_ = cmd.Run()
		}
		_ = c.Stop()
	})
	return c
}

// restartLogRE finds the pg_ctl log files erplab names in its output.
var restartLogRE = regexp.MustCompile(`its output in (/\S+\.log)\)`)

// removeRestartLogs removes the pg_ctl log files named in out.
func removeRestartLogs(out []byte) {
	for _, m := range restartLogRE.FindAllSubmatch(out, -1) {
		if strings.Contains(string(m[1]), "erplab-pg_ctl-") {
			_ = os.Remove(string(m[1]))
		}
	}
}

// restartState is max_locks_per_transaction as a new session sees it
// ("" when the server does not accept connections) and whether
// postgresql.auto.conf sets it.
func restartState(t *testing.T, dsn string) (value string, set bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", false
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(ctx, `SELECT current_setting('max_locks_per_transaction'), EXISTS (SELECT 1 FROM pg_file_settings WHERE name = 'max_locks_per_transaction' AND sourcefile LIKE '%/postgresql.auto.conf')`).Scan(&value, &set); err != nil {
		return "", false
	}
	return value, set
}

// waitRestored polls until the server accepts connections with
// max_locks_per_transaction at before, not set by ALTER SYSTEM, and
// without ab's databases.
func waitRestored(t *testing.T, dsn, before, out string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		v, set := restartState(t, dsn)
		var dbs int
		if conn, err := pgx.Connect(context.Background(), dsn); err == nil {
			_ = conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_database WHERE datname LIKE $1`, experiment.ExternalPrefix+"%").Scan(&dbs)
			conn.Close(context.Background())
		}
		if v == before && !set && dbs == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not back: max_locks_per_transaction %q (was %s), set by ALTER SYSTEM %v, ab databases %d\n%s", v, before, set, dbs, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// ab --dsn --allow-restart --cold on a local server erplab did not
// start: a setting of context postmaster is applied with a restart (the
// run sees it) and reset with another, every run starts after a restart,
// and the server is back at its own value, nothing of ab's left.
func TestABDSNAllowRestart(t *testing.T) {
	pgtest.SkipShort(t)
	c := restartableServer(t)
	dsn := c.DSN("postgres")
	dir := t.TempDir()
	conf := filepath.Join(dir, "p.conf")
	if err := os.WriteFile(conf, []byte(abRestartSetting), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := restartState(t, dsn)
	if before == "" || before == "77" {
		t.Fatalf("max_locks_per_transaction before: %q", before)
	}
	state := filepath.Join(dir, "state")
	out, err := withState(erplab(t, dir, "ab", "--dsn", dsn, "--allow-restart", "--cold", "--workload", "smoke", "--users", "2", "--duration", "2s",
		"--think", "20ms", "--interval", "500ms", "--progress", "0", "--observe=false", "--graceful-stop", "1s", "--rounds", "1",
		"--variant", "s=settings:"+conf, "--out-dir", "res"), state).CombinedOutput()
	removeRestartLogs(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// baseline: cold; s: cold, the setting, its reset.
	if n := strings.Count(string(out), "restarted the server of "+c.DataDir()); n != 4 {
		t.Errorf("%d restarts, want 4\n%s", n, out)
	}
	waitRestored(t, dsn, before, string(out))
	if left, _ := filepath.Glob(filepath.Join(state, "leftover", "*.json")); len(left) != 0 {
		t.Fatalf("leftover entries after a clean run: %v\n%s", left, out)
	}
	doc, err := results.Read(filepath.Join(dir, "res", "s-1.json"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	recs, err := experiment.Remedies(doc)
	b, _ := json.Marshal(recs)
	if err != nil || !strings.Contains(string(b), `"during":"77"`) || !strings.Contains(string(b), `"after_reset":"`+before+`"`) {
		t.Fatalf("remedies %s (%v)\n%s", b, err, out)
	}
}

// kill -9 of ab --dsn --allow-restart while its setting of context
// postmaster is in effect: the next erplab command resets it, restarts
// the server (the record says --allow-restart was given) and drops ab's
// databases; the server accepts connections at its own value.
func TestABDSNAllowRestartKilled(t *testing.T) {
	pgtest.SkipShort(t)
	c := restartableServer(t)
	dsn := c.DSN("postgres")
	dir := t.TempDir()
	conf := filepath.Join(dir, "p.conf")
	if err := os.WriteFile(conf, []byte(abRestartSetting), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := restartState(t, dsn)
	state := filepath.Join(dir, "state")
	cmd := withState(erplab(t, dir, "ab", "--dsn", dsn, "--allow-restart", "--workload", "smoke", "--users", "2", "--duration", "30s",
		"--think", "20ms", "--progress", "0", "--observe=false", "--rounds", "1",
		"--variant", "s=settings:"+conf, "--out-dir", "res"), state)
	killWhen(t, cmd, "the restart setting in effect", 4*time.Minute, 300*time.Millisecond, func() bool {
		v, set := restartState(t, dsn)
		return v == "77" && set
	})
	out, err := withState(erplab(t, dir, "version"), state).CombinedOutput()
	removeRestartLogs(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "restarted the server") {
		t.Errorf("the sweep does not say it restarted the server:\n%s", out)
	}
	waitRestored(t, dsn, before, string(out))
}

// localHost: what --allow-restart takes for this host.
func TestLocalHost(t *testing.T) {
	for host, want := range map[string]bool{
		"/var/run/postgresql": true, "localhost": true, "127.0.0.1": true, "127.1.2.3": true, "::1": true,
		"10.0.0.5": false, "192.0.2.1": false, "db.example.com": false, "": false,
	} {
		if got := localHost(host); got != want {
			t.Errorf("localHost(%q) = %v, want %v", host, got, want)
		}
	}
}

// ab --dsn with tmpfs-temp-tablespace on a local server as root: the run
// has its temp tablespace on a tmpfs beside the server's data directory,
// and afterwards the mount is gone, the tablespace dropped and nothing
// of ab's left.
func TestABDSNTmpfs(t *testing.T) {
	pgtest.SkipShort(t)
	if os.Geteuid() != 0 {
		t.Skip("the tmpfs remedy mounts: root only")
	}
	dir := t.TempDir()
	dsn := srv.DSN(t, "postgres")
	pool := srv.Pool(t, dsn)
	state := filepath.Join(dir, "state")
	out, err := withState(erplab(t, dir, "ab", "--dsn", dsn, "--workload", "smoke", "--users", "2", "--duration", "2s",
		"--think", "20ms", "--interval", "500ms", "--progress", "0", "--observe=false", "--graceful-stop", "1s", "--rounds", "1",
		"--variant", "t=tmpfs-temp-tablespace", "--tmpfs-size", "64m", "--out-dir", "res"), state).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	doc, err := results.Read(filepath.Join(dir, "res", "t-1.json"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	recs, err := experiment.Remedies(doc)
	if err != nil || len(recs) != 1 {
		t.Fatalf("remedies %+v (%v)\n%s", recs, err, out)
	}
	b, _ := json.Marshal(recs[0])
	var rec struct {
		Changed struct {
			Tablespace string `json:"tablespace"`
			FSType     string `json:"fs_type"`
			MountPoint string `json:"mount_point"`
			Scope      string `json:"scope"`
			Undone     bool   `json:"undone"`
		} `json:"changed"`
	}
	if err := json.Unmarshal(b, &rec); err != nil || rec.Changed.FSType != "tmpfs" || rec.Changed.MountPoint == "" || !rec.Changed.Undone ||
		rec.Changed.Scope != "database" || !strings.HasPrefix(rec.Changed.Tablespace, experiment.ExternalPrefix) {
		t.Fatalf("remedy record %s (%v)\n%s", b, err, out)
	}
	var ts int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_tablespace WHERE spcname = $1`, rec.Changed.Tablespace).Scan(&ts); err != nil || ts != 0 {
		t.Errorf("tablespace %s still there (%d, %v)\n%s", rec.Changed.Tablespace, ts, err, out)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), " "+rec.Changed.MountPoint+" ") {
		t.Errorf("%s still mounted\n%s", rec.Changed.MountPoint, out)
	}
	if dbs, _, _ := abDSNState(t, pool); len(dbs) != 0 {
		t.Errorf("ab databases left: %v", dbs)
	}
	if left, _ := filepath.Glob(filepath.Join(state, "leftover", "*.json")); len(left) != 0 {
		t.Fatalf("leftover entries after a clean run: %v\n%s", left, out)
	}
}

// kill -9 of ab --dsn while its tmpfs variant runs (the tablespace on
// the tmpfs beside the server's data directory): the next erplab command
// unmounts the tmpfs, drops the tablespace and ab's databases, removes
// the tablespace directory ab made beside the data directory and the
// remedy's state file: nothing is left for doctor fix --undo.
func TestABDSNTmpfsKilled(t *testing.T) {
	pgtest.SkipShort(t)
	if os.Geteuid() != 0 {
		t.Skip("the tmpfs remedy mounts: root only")
	}
	dir := t.TempDir()
	dsn := srv.DSN(t, "postgres")
	pool := srv.Pool(t, dsn)
	state := filepath.Join(dir, "state")
	tablespaces := func() (names []string) {
		rows, err := pool.Query(context.Background(), `SELECT spcname FROM pg_tablespace WHERE spcname LIKE $1`, experiment.ExternalPrefix+"%")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			names = append(names, n)
		}
		return names
	}
	mounted := func(ts string) bool {
		b, err := os.ReadFile("/proc/self/mountinfo")
		return err == nil && strings.Contains(string(b), "/"+ts+"/")
	}
	cmd := withState(erplab(t, dir, "ab", "--dsn", dsn, "--workload", "smoke", "--users", "2", "--duration", "30s",
		"--think", "20ms", "--progress", "0", "--observe=false", "--rounds", "1",
		"--variant", "t=tmpfs-temp-tablespace", "--tmpfs-size", "64m", "--out-dir", "res"), state)
	var ts string
	killWhen(t, cmd, "the tmpfs variant running", 4*time.Minute, 300*time.Millisecond, func() bool {
		names := tablespaces()
		if len(names) == 1 && mounted(names[0]) {
			ts = names[0]
			return true
		}
		return false
	})
	out, err := withState(erplab(t, dir, "version"), state).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if names := tablespaces(); len(names) != 0 || mounted(ts) {
		t.Fatalf("after the sweep: tablespaces %v, %s mounted %v\n%s", names, ts, mounted(ts), out)
	}
	if dbs, _, _ := abDSNState(t, pool); len(dbs) != 0 {
		t.Fatalf("ab databases left: %v\n%s", dbs, out)
	}
	if !strings.Contains(string(out), "tablespace "+ts) {
		t.Errorf("the sweep does not name tablespace %s:\n%s", ts, out)
	}
	tsDir := filepath.Join(filepath.Dir(srv.Cluster(t).DataDir()), ts)
	if _, err := os.Lstat(tsDir); !os.IsNotExist(err) {
		t.Errorf("tablespace directory %s left (%v)\n%s", tsDir, err, out)
	}
	if files, _ := filepath.Glob(filepath.Join(state, "tmpfs", "*.json")); len(files) != 0 {
		t.Errorf("state files left: %v\n%s", files, out)
	}
	if left, _ := filepath.Glob(filepath.Join(state, "leftover", "*.json")); len(left) != 0 {
		t.Errorf("leftover entries after the sweep: %v\n%s", left, out)
	}
	if !strings.Contains(string(out), "removed "+tsDir) {
		t.Errorf("the sweep does not say it removed %s:\n%s", tsDir, out)
	}
}
