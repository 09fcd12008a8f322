package pgcluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/leftover"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// childOrphan starts three clusters without StopWithParent (the third
// with System V dynamic shared memory), prints "READY <dir1> <pid1> <dir2>
// <pid2> <dir3> <pid3>" and waits to be killed, as an erplab run killed
// with -9 would leave them.
func childOrphan() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	line := "READY"
	for i := range 3 {
		opts := startOpts()
		if i == 2 {
			opts.Settings = map[string]string{"dynamic_shared_memory_type": "sysv"}
		}
		c, err := Start(ctx, opts)
		if err != nil {
			fmt.Println("ERROR", err)
			return 1
		}
		line += fmt.Sprintf(" %s %d", c.Dir(), c.PID())
	}
	fmt.Println(line)
	time.Sleep(10 * time.Minute)
	return 0
}

// entryFor returns the record entry of dir and its reapInfo.
func entryFor(t *testing.T, dir string) (leftover.Entry, reapInfo) {
	t.Helper()
	rec, err := leftover.Open()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := rec.Entries()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Path == dir {
			var info reapInfo
			if err := json.Unmarshal(e.Data, &info); err != nil {
				t.Fatal(err)
			}
			return e, info
		}
	}
	t.Fatalf("no record entry for %s", dir)
	return leftover.Entry{}, reapInfo{}
}

// mainSegment returns whether the recorded main shared memory segment
// exists and the dynamic shared memory control handle in its header.
func mainSegment(t *testing.T, info reapInfo) (bool, uint32) {
	t.Helper()
	id, err := unix.SysvShmGet(int(int32(info.ShmKey)), 0, 0)
	if err != nil || id != info.ShmID {
		return false, 0
	}
	mem, err := unix.SysvShmAttach(id, 0, unix.SHM_RDONLY)
	if err != nil {
		t.Fatalf("attach %d: %v", id, err)
	}
	defer unix.SysvShmDetach(mem)
	if binary.NativeEndian.Uint32(mem) != pgShmemMagic {
		t.Fatalf("segment %d is not PostgreSQL's", id)
	}
	return true, binary.NativeEndian.Uint32(mem[24:])
}

// reapOrphans runs ReapOrphans and returns its report and line.
func reapOrphans(t *testing.T) (leftover.Report, string) {
	t.Helper()
	var out bytes.Buffer
	rep, err := ReapOrphans(context.Background(), &out)
	if err != nil {
		t.Fatal(err)
	}
	if out.Len() > 0 {
		t.Log(out.String())
	}
	return rep, out.String()
}

func exists(path string) bool { _, err := os.Lstat(path); return err == nil }

// dsmExists reports whether dynamic shared memory segment h of the
// cluster exists.
func dsmExists(info reapInfo, h uint32) bool {
	if info.DSM == "sysv" {
		_, err := unix.SysvShmGet(sysvDSMKey(h), 0, 0)
		return err == nil
	}
	return exists(posixDSMPath(h))
}

// A cluster whose erplab process was killed with -9 is reaped by the next
// ReapOrphans: a postmaster still running is stopped, one killed -9 too
// leaves shared memory that is removed (posix and System V dynamic shared
// memory); a live process's cluster, with its segments, is left alone.
func TestReapOrphans(t *testing.T) {
	skipShort(t)
	if dsmType() != "posix" {
		t.Skip("this test follows /dev/shm files (dynamic_shared_memory_type posix)")
	}
	live := start(t, startOpts())
	_, liveInfo := entryFor(t, live.Dir())

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(exe)
	child.Env = append(os.Environ(), envChild+"=orphan")
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	sc := bufio.NewScanner(stdout)
	var f []string
	for sc.Scan() {
		if f = strings.Fields(sc.Text()); len(f) > 0 && (f[0] == "READY" || f[0] == "ERROR") {
			break
		}
	}
	if len(f) != 7 || f[0] != "READY" {
		t.Fatalf("child: %v", f)
	}
	runningDir, killedDirs := f[1], []string{f[3], f[5]}
	runningPID, _ := strconv.Atoi(f[2])
	var killedPIDs []int
	for _, s := range []string{f[4], f[6]} {
		pid, _ := strconv.Atoi(s)
		killedPIDs = append(killedPIDs, pid)
	}
	t.Cleanup(func() { // if the reaper fails
		for _, p := range append([]int{runningPID}, killedPIDs...) {
			_ = syscall.Kill(p, syscall.SIGQUIT)
		}
	})
	type shm struct {
		info    reapInfo
		control uint32
	}
	var killed []shm
	for _, dir := range killedDirs {
		_, info := entryFor(t, dir)
		ok, control := mainSegment(t, info)
		if !ok || control == 0 || !dsmExists(info, control) {
			t.Fatalf("orphan %s: main segment (key %d id %d) exists %v, dsm control %d (%s) exists %v", dir, info.ShmKey, info.ShmID, ok, control, info.DSM, dsmExists(info, control))
		}
		killed = append(killed, shm{info, control})
	}
	if killed[0].info.DSM != "posix" || killed[1].info.DSM != "sysv" {
		t.Fatalf("dynamic shared memory types %s, %s; want posix, sysv", killed[0].info.DSM, killed[1].info.DSM)
	}

	// kill -9 of erplab, then of two postmasters (their backends then
	// exit by themselves without removing shared memory).
	_ = child.Process.Kill()
	_ = child.Wait()
	for i, pid := range killedPIDs {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if !waitGone(pid, 10*time.Second) {
			t.Fatal("killed postmaster still there")
		}
		if ok, _ := mainSegment(t, killed[i].info); !ok || !dsmExists(killed[i].info, killed[i].control) {
			t.Fatal("kill -9 of the postmaster removed its shared memory: nothing to test")
		}
	}

	rep, line := reapOrphans(t)
	for _, dir := range append([]string{runningDir}, killedDirs...) {
		if exists(dir) {
			t.Errorf("orphan %s not removed", dir)
		}
		if !strings.Contains(line, "pgcluster "+dir+" (") {
			t.Errorf("line does not name %s: %s", dir, line)
		}
	}
	if !strings.Contains(line, fmt.Sprintf("postmaster %d stopped", runningPID)) {
		t.Errorf("line does not say postmaster %d was stopped: %s", runningPID, line)
	}
	for _, pid := range append([]int{runningPID}, killedPIDs...) {
		if alive(pid) {
			t.Errorf("postmaster %d still alive", pid)
		}
	}
	for _, k := range killed {
		if want := (serverShm{info: k.info}).removedLine(); !strings.Contains(line, want) {
			t.Errorf("line does not say %q: %s", want, line)
		}
		if !segmentGone(k.info.ShmID) {
			t.Errorf("segment id %d of a killed postmaster still exists", k.info.ShmID)
		}
		if ok, _ := mainSegment(t, k.info); ok {
			t.Errorf("main segment key %d id %d of a killed postmaster still there", k.info.ShmKey, k.info.ShmID)
		}
		if dsmExists(k.info, k.control) {
			t.Errorf("%s dsm control segment %d of a killed postmaster still there", k.info.DSM, k.control)
		}
	}
	if len(rep.Cleaned) != 3 || len(rep.Failed) != 0 {
		t.Errorf("report %+v", rep)
	}
	// The live cluster and its shared memory are untouched.
	ok, liveControl := mainSegment(t, liveInfo)
	if !ok || !exists(posixDSMPath(liveControl)) || !exists(live.Dir()) {
		t.Fatalf("live cluster's segment/control/dir: %v %v %v", ok, exists(posixDSMPath(liveControl)), exists(live.Dir()))
	}
	conn, err := pgx.Connect(context.Background(), live.DSN("postgres"))
	if err != nil {
		t.Fatalf("live cluster after the sweep: %v", err)
	}
	conn.Close(context.Background())
	// A second sweep has nothing left to do.
	if rep, line := reapOrphans(t); len(rep.Cleaned) != 0 {
		t.Errorf("second sweep: %s", line)
	}
}

// lookupUnprivileged returns the uid and gid of "nobody".
func lookupUnprivileged(t *testing.T) (uint32, uint32) {
	t.Helper()
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no nobody user")
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return uint32(uid), uint32(gid)
}

// asNobody runs a shell script as nobody and returns its combined output.
func asNobody(t *testing.T, script string, args ...string) (string, error) {
	t.Helper()
	uid, gid := lookupUnprivileged(t)
	cmd := exec.Command("sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// stillRunning reports whether pid exists and is not a zombie (a killed
// child of ours stays a zombie until waited for).
func stillRunning(pid int) bool {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return false
	}
	st, err := p.Stat()
	return err == nil && st.State != "Z"
}

// The attack of issue 16 (finding 4): a local user forges erplab-pg-*
// directories whose postmaster.pid names a victim process. As root,
// ReapOrphans signals nothing and removes nothing, and says so.
func TestReapForgery(t *testing.T) {
	skipShort(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user (nobody)")
	}
	tmp := reachableTempDir(t)
	if err := os.Chmod(tmp, 0o1777); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	// A record of its own: entries other tests left are not its business.
	t.Setenv(leftover.EnvStateDir, filepath.Join(t.TempDir(), "state"))

	victim := exec.Command("sleep", "300")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = victim.Process.Kill(); _ = victim.Wait() })
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	vpid, dpid := strconv.Itoa(victim.Process.Pid), strconv.Itoa(dead.Process.Pid)

	// 1. The attack as found: a forged directory, a dead owner PID.
	// 2. The same directory at the path of a genuine entry of a dead
	//    erplab whose cluster is gone; its token guessed wrong.
	// 3. A genuine entry whose recorded postmaster is the victim (PID
	//    reuse), its directory gone.
	forged, replaced, vanished := filepath.Join(tmp, "erplab-pg-forged"), filepath.Join(tmp, "erplab-pg-replaced"), filepath.Join(tmp, "erplab-pg-vanished")
	script := `for d in "$1" "$2"; do mkdir -p "$d/data" && echo "$3" > "$d/erplab.owner" && echo "$4" > "$d/data/postmaster.pid" && chmod 700 "$d" || exit 1; done`
	if out, err := asNobody(t, script, forged, replaced, dpid, vpid); err != nil {
		t.Fatalf("forging as nobody: %v: %s", err, out)
	}
	bin, err := FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	pg, _ := filepath.EvalSymlinks(filepath.Join(bin, "postgres"))
	vproc, err := leftover.ProcessOf(victim.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := leftover.Open()
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{replaced, vanished} {
		e, err := rec.Add(reapKind, path, reapInfo{ServerUID: os.Geteuid(), Postgres: pg, Postmaster: vproc})
		if err != nil {
			t.Fatal(err)
		}
		e.Owner = leftover.Process{PID: dead.Process.Pid, Start: 1}
		if err := rec.Update(e, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rec.Remove(e) })
	}

	rep, line := reapOrphans(t)
	if !stillRunning(victim.Process.Pid) {
		t.Fatalf("victim %s was signalled", vpid)
	}
	for _, d := range []string{forged, replaced} {
		if !exists(filepath.Join(d, "data", "postmaster.pid")) {
			t.Errorf("forged directory %s was removed", d)
		}
		if strings.Count(line, d+" (") != 1 {
			t.Errorf("line does not name %s once as left alone: %s", d, line)
		}
	}
	if strings.Contains(line, "cleaned up") {
		t.Errorf("line says something was cleaned up: %s", line)
	}
	if !strings.Contains(line, "left alone") || strings.Count(line, "\n") != 1 {
		t.Errorf("want one line saying what was left alone, got %q", line)
	}
	if !strings.Contains(line, "owned by uid") {
		t.Errorf("line does not say why %s was refused: %s", replaced, line)
	}
	if !strings.Contains(line, "pid "+vpid+" is not this cluster's postgres: not signalled") {
		t.Errorf("line does not say the victim was not signalled: %s", line)
	}
	if len(rep.Failed) != 0 {
		t.Errorf("failures: %v", rep.Failed)
	}
}

// The server is locked down: private directories, scram-sha-256 in
// pg_hba.conf, no TCP unless asked, and another local user (nobody)
// cannot reach the socket.
func TestLockedDown(t *testing.T) {
	skipShort(t)
	c := start(t, startOpts())
	mode := func(p string) (os.FileMode, uint32, uint32) {
		st, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		return st.Mode().Perm(), sys.Uid, sys.Gid
	}
	serverUID := uint32(expectedUID(t))
	wantDir := os.FileMode(0o700)
	if os.Geteuid() == 0 {
		wantDir = 0o710
	}
	if m, uid, _ := mode(c.Dir()); m != wantDir || int(uid) != os.Geteuid() {
		t.Errorf("cluster dir mode %v uid %d, want %v uid %d", m, uid, wantDir, os.Geteuid())
	}
	if m, uid, _ := mode(c.SocketDir()); m != 0o700 || uid != serverUID {
		t.Errorf("socket dir mode %v uid %d, want 0700 uid %d", m, uid, serverUID)
	}
	for _, f := range []string{c.PassFile(), filepath.Join(c.Dir(), ownerFile), c.LogPath()} {
		if m, uid, _ := mode(f); m != 0o600 || int(uid) != os.Geteuid() {
			t.Errorf("%s mode %v uid %d, want 0600 uid %d", f, m, uid, os.Geteuid())
		}
	}
	if exists(filepath.Join(c.Dir(), "initdb.pw")) {
		t.Error("initdb's password file left behind")
	}
	hba, err := os.ReadFile(filepath.Join(c.DataDir(), "pg_hba.conf"))
	if err != nil {
		t.Fatal(err)
	}
	rules := 0
	for l := range strings.Lines(string(hba)) {
		f := strings.Fields(l)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		rules++
		if f[len(f)-1] != "scram-sha-256" {
			t.Errorf("pg_hba.conf rule %q is not scram-sha-256", strings.TrimSpace(l))
		}
	}
	if rules == 0 {
		t.Error("no pg_hba.conf rules")
	}
	if strings.Contains(c.DSN("x"), c.Password()) || len(c.Password()) != 32 {
		t.Errorf("DSN %q holds the password, or password has %d characters", c.DSN("x"), len(c.Password()))
	}
	conn, err := pgx.Connect(context.Background(), c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if v := show(t, conn, "listen_addresses"); v != "" {
		t.Errorf("listen_addresses = %q without Options.TCP", v)
	}
	conn.Close(context.Background())
	if conn, err := pgx.Connect(context.Background(), c.DSNAt("127.0.0.1", c.Port(), "postgres")); err == nil {
		conn.Close(context.Background())
		t.Error("TCP connection accepted without Options.TCP")
	}
	// A child (psql) authenticates through the passfile the DSN names, and
	// no process shows the password in its command line.
	psql := filepath.Join(c.BinDir(), "psql")
	if !exists(psql) {
		psql = "psql"
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PG") })
	cmd := exec.Command(psql, c.DSN("postgres"), "-Atc", "select current_user")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "postgres" {
		t.Errorf("psql with the DSN: %v: %s", err, out)
	}
	if pids := pidsWhere(func(p procfs.Proc) bool {
		args, err := p.CmdLine()
		return err == nil && strings.Contains(strings.Join(args, " "), c.Password())
	}); len(pids) > 0 {
		t.Errorf("processes %v have the password in their command line", pids)
	}

	// TrustSocket (test harnesses) trusts the private socket only: TCP
	// still asks for the password.
	opts := startOpts()
	opts.TrustSocket, opts.TCP = true, true
	tc := start(t, opts)
	hba, err = os.ReadFile(filepath.Join(tc.DataDir(), "pg_hba.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(hba)) {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "host" && f[len(f)-1] != "scram-sha-256" {
			t.Errorf("TrustSocket: TCP rule %q", strings.TrimSpace(l))
		}
	}
	if conn, err := pgx.Connect(context.Background(), fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable", tc.Port())); err == nil {
		conn.Close(context.Background())
		t.Error("TrustSocket: TCP connection without password accepted")
	}
	if conn, err := pgx.Connect(context.Background(), fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable", tc.SocketDir(), tc.Port())); err != nil {
		t.Errorf("TrustSocket: socket without password: %v", err)
	} else {
		conn.Close(context.Background())
	}
	if os.Geteuid() != 0 {
		return
	}
	// nobody knows the socket's path but cannot enter the directory.
	out, err := asNobody(t, `"$1" "host=$2 port=$3 user=postgres dbname=postgres" -c 'select 1'`, psql, c.SocketDir(), strconv.Itoa(c.Port()))
	if err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("psql as nobody: err %v, output %q; want Permission denied", err, out)
	}
	if _, err := asNobody(t, `ls "$1"`, c.Dir()); err == nil {
		t.Error("nobody can list the cluster directory")
	}
}

// Restart starts a new postmaster on the same data: data kept, PID new,
// the record follows the new postmaster.
func TestRestart(t *testing.T) {
	skipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{MaxConnections: 10, SharedBuffers: "16MB"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if err := c.CreateDatabase(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	pid := c.PID()
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if c.PID() == pid || alive(pid) {
		t.Fatalf("old postmaster %d, new %d", pid, c.PID())
	}
	if _, info := entryFor(t, c.Dir()); info.Postmaster.PID != c.PID() {
		t.Errorf("record names postmaster %d, running %d", info.Postmaster.PID, c.PID())
	}
	conn, err := pgx.Connect(ctx, c.DSN("kept"))
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	conn.Close(ctx)
	dir := c.Dir()
	c.Stop()
	if err := c.Restart(ctx); err == nil {
		t.Fatal("restart after Stop succeeded")
	}
	rec, _ := leftover.Open()
	entries, _ := rec.Entries()
	for _, e := range entries {
		if e.Path == dir {
			t.Errorf("entry of %s left in the record after Stop", dir)
		}
	}
}

// PostgreSQL's System V key of a dynamic shared memory handle: the handle
// as a 32-bit key_t, negated when below 1.
func TestSysvDSMKey(t *testing.T) {
	for h, want := range map[uint32]int{5: 5, 4272257726: 22709570, 1 << 31: -1 << 31, 0xffffffff: 1} {
		if got := sysvDSMKey(h); got != want {
			t.Errorf("sysvDSMKey(%d) = %d, want %d", h, got, want)
		}
	}
}
