package thp

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/leftover"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/remedy"
)

var srv *pgtest.Server

// childEnv, set in a child of the test binary, makes it set the file and
// mode it names ("enabled=never") through set, with its leftover entry,
// print "applied" and wait to be killed.
const childEnv = "ERPLAB_THP_TEST_CHILD"

func TestMain(m *testing.M) {
	if w := os.Getenv(childEnv); w != "" {
		os.Exit(child(w))
	}
	os.Exit(pgtest.Run(m, &srv))
}

func child(want string) int {
	file, mode, _ := strings.Cut(want, "=")
	rec, err := leftover.Open()
	if err == nil {
		_, err = set(rec, "", [][2]string{{file, mode}}, os.Stderr)
	}
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	os.Stdout.WriteString("applied\n")
	time.Sleep(time.Hour)
	return 0
}

// guard skips t unless this process may write the live THP files, and
// puts every top-level file back to its mode at the start when t ends,
// also when it fails. It returns those modes.
func guard(t *testing.T) map[string]string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("writes the kernel's transparent_hugepage files: root only")
	}
	if err := present("", "enabled", "defrag"); err != nil {
		t.Skip(err)
	}
	orig := map[string]string{}
	for f := range hostfacts.THPChoices {
		if v := hostfacts.ReadTHP("", f); v.Known() {
			orig[f] = v.Mode
		}
	}
	// a read-only /sys (a container) cannot take even the same word back
	if err := hostfacts.SetTHP("", "enabled", orig["enabled"]); err != nil {
		t.Skipf("cannot write transparent_hugepage/enabled here: %v", err)
	}
	t.Cleanup(func() {
		for f, m := range orig {
			if hostfacts.ReadTHP("", f).Mode != m {
				if err := hostfacts.SetTHP("", f, m); err != nil {
					t.Errorf("restoring %s=%s: %v", f, m, err)
				}
			}
		}
	})
	return orig
}

// other is a mode of file (enabled or defrag) other than cur.
func other(_, cur string) string {
	if cur != "never" {
		return "never"
	}
	return "madvise"
}

func mode(t *testing.T, file string) string {
	t.Helper()
	v := hostfacts.ReadTHP("", file)
	if v.Err != nil {
		t.Fatal(v.Err)
	}
	return v.Mode
}

// entries are this state directory's thp entries.
func entries(t *testing.T, rec *leftover.Record) []leftover.Entry {
	t.Helper()
	es, err := rec.Entries()
	if err != nil {
		t.Fatal(err)
	}
	var out []leftover.Entry
	for _, e := range es {
		if e.Kind == kindTHP {
			out = append(out, e)
		}
	}
	return out
}

func startTime(ctx context.Context, t *testing.T) time.Time {
	t.Helper()
	conn, err := pgx.Connect(ctx, srv.DSN(t, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var at time.Time
	if err := conn.QueryRow(ctx, "SELECT pg_postmaster_start_time()").Scan(&at); err != nil {
		t.Fatal(err)
	}
	return at
}

// TestApplyUndoRoundTrip: on the live host, the remedy sets enabled (and
// defrag, from its parameter), records each previous mode in the
// crash-safe record before writing, restarts the server under them, and
// Undo puts back exactly the previous modes and removes the records.
func TestApplyUndoRoundTrip(t *testing.T) {
	orig := guard(t)
	t.Setenv(leftover.EnvStateDir, filepath.Join(t.TempDir(), "state"))
	ctx := context.Background()
	want, wantDefrag := other("enabled", orig["enabled"]), other("defrag", orig["defrag"])
	var log bytes.Buffer
	target := &remedy.Target{Cluster: srv.Cluster(t), Database: "postgres", Flags: map[string]string{},
		Params: map[string]string{DefragParam: wantDefrag}, Log: &log}
	before := startTime(ctx, t)
	a, err := remedy.Apply(ctx, target, remedy.Remedy{Kind: Name, Arg: want})
	if err != nil {
		t.Fatal(err)
	}
	if got := mode(t, "enabled"); got != want {
		t.Errorf("enabled = %s during the run, want %s", got, want)
	}
	if got := mode(t, "defrag"); got != wantDefrag {
		t.Errorf("defrag = %s during the run, want %s", got, wantDefrag)
	}
	rec, err := leftover.Open()
	if err != nil {
		t.Fatal(err)
	}
	if es := entries(t, rec); len(es) != 2 || !strings.Contains(string(es[0].Data), `"previous":"`+orig["enabled"]+`"`) {
		t.Errorf("leftover entries during the run: %+v", es)
	}
	if after := startTime(ctx, t); !after.After(before) {
		t.Errorf("server not restarted under the mode: started %s, before %s", after, before)
	}
	if err := a.Undo(ctx); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"enabled", "defrag"} {
		if got := mode(t, f); got != orig[f] {
			t.Errorf("%s = %s after undo, want %s (before the run)", f, got, orig[f])
		}
	}
	if es := entries(t, rec); len(es) != 0 {
		t.Errorf("leftover entries after undo: %+v", es)
	}
	ch := a.Record().Changed
	if e, _ := ch["enabled"].(map[string]string); e["previous"] != orig["enabled"] || e["set"] != want || ch["undone"] != true {
		t.Errorf("record: %v", ch)
	}
	t.Logf("log:\n%s", log.String())
}

// TestRefusals: one line each, nothing written: no file (a kernel
// without THP), no way to restart the server, a mode the file does not
// take, no cold runs.
func TestRefusals(t *testing.T) {
	if err := present(t.TempDir(), "enabled"); err == nil || !strings.Contains(err.Error(), "transparent_hugepage/enabled is absent") {
		t.Errorf("no THP directory: %v", err)
	}
	if _, err := remedy.Parse("thp:madvice"); err == nil || !strings.Contains(err.Error(), "always, madvise, never") {
		t.Errorf("thp:madvice: %v", err)
	}
	rs := []remedy.Remedy{{Kind: Name, Arg: "never"}}
	if err := remedy.CheckCold(rs, false); err == nil || !strings.Contains(err.Error(), "cold runs") {
		t.Errorf("CheckCold without cold: %v", err)
	}
	if err := remedy.CheckCold(rs, true); err != nil {
		t.Errorf("CheckCold with cold: %v", err)
	}
	if err := remedy.CheckRunnable("ab", rs, map[string]string{DefragParam: "sometimes"}, true); err == nil || !strings.Contains(err.Error(), "--thp-defrag") {
		t.Errorf("--thp-defrag sometimes: %v", err)
	}
	orig := guard(t)
	t.Setenv(leftover.EnvStateDir, filepath.Join(t.TempDir(), "state"))
	_, err := remedy.Apply(context.Background(), &remedy.Target{Flags: map[string]string{}, Log: &bytes.Buffer{}}, remedy.Remedy{Kind: Name, Arg: other("enabled", orig["enabled"])})
	if err == nil || !strings.Contains(err.Error(), "--allow-restart") {
		t.Errorf("no server to restart: %v", err)
	}
	if got := mode(t, "enabled"); got != orig["enabled"] {
		t.Errorf("refused apply changed enabled to %s", got)
	}
}

// TestKilledSweep: a process that set enabled and was killed (kill -9)
// leaves its leftover entry; the sweep of a later command (a fresh
// Record on the same state directory) sets the previous mode back, and
// leaves a file someone changed since.
func TestKilledSweep(t *testing.T) {
	orig := guard(t)
	for _, changedSince := range []bool{false, true} {
		state := filepath.Join(t.TempDir(), "state")
		want := other("enabled", orig["enabled"])
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=enabled="+want, leftover.EnvStateDir+"="+state)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		if line != "applied\n" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("child: %q, %s", line, stderr.String())
		}
		if got := mode(t, "enabled"); got != want {
			t.Errorf("child set enabled to %s, want %s", got, want)
		}
		if err := cmd.Process.Kill(); err != nil { // SIGKILL: no undo runs
			t.Fatal(err)
		}
		_ = cmd.Wait()
		third := orig["enabled"]
		if changedSince {
			for _, m := range hostfacts.THPChoices["enabled"] {
				if m != want && m != orig["enabled"] {
					third = m
				}
			}
			if err := hostfacts.SetTHP("", "enabled", third); err != nil {
				t.Fatal(err)
			}
		}
		rec, err := leftover.OpenDir(filepath.Join(state, "leftover"))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(entries(t, rec)); n != 1 {
			t.Fatalf("killed child left %d thp entries, want 1", n)
		}
		rep := rec.Sweep(context.Background())
		line = rep.Line()
		if got := mode(t, "enabled"); got != third {
			t.Errorf("changed since %v: enabled = %s after the sweep, want %s; %s", changedSince, got, third, line)
		}
		wantSaid := "set back from " + want + " to " + orig["enabled"]
		if changedSince {
			wantSaid = "left at " + third
		}
		if !strings.Contains(line, "thp ") || !strings.Contains(line, wantSaid) {
			t.Errorf("sweep said %q, want %q", line, wantSaid)
		}
		if n := len(entries(t, rec)); n != 0 {
			t.Errorf("%d thp entries after the sweep", n)
		}
		t.Log(line)
	}
}
