package tmpfs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The table: the package documentation's steps in order, every step
// with a record of its own has an undo, and the journal knows each
// record by its step's name.
func TestProcedureTable(t *testing.T) {
	var names []string
	for _, s := range procedure() {
		names = append(names, s.name)
		full := &State{Directory: &DirRecord{}, Tablespace: &TablespaceRecord{}, Grant: &GrantRecord{}, Mount: &MountRecord{}, Setting: &SettingRecord{}}
		if full.journaled(s.name) != (s.undo != nil) {
			t.Errorf("step %s: journaled %v, undo %v", s.name, full.journaled(s.name), s.undo != nil)
		}
		full.forget(s.name)
		if full.journaled(s.name) {
			t.Errorf("step %s: still journaled after forget", s.name)
		}
	}
	want := []string{"directory", "tablespace", "grant", "probe", "mount", "setting", "verify"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("steps %q, want %q", names, want)
	}
	st := &State{Directory: &DirRecord{}, Mount: &MountRecord{}}
	for _, n := range names {
		st.forget(n)
	}
	if !st.empty() {
		t.Errorf("journal not empty after forgetting every step: %+v", st)
	}
}

// oldStates are state files written by erplab before the steps became a
// table (Apply stopped as a crash would, before the named step; with
// --grant-to PUBLIC), and the steps each journals, in order.
var oldStates = []struct {
	file, stopBefore string
	journaled        []string
}{
	{"v1-crash-before-tablespace.json", "tablespace", []string{"directory", "tablespace"}},
	{"v1-crash-before-setting.json", "setting", []string{"directory", "tablespace", "grant", "mount", "setting"}},
}

// State files left by an older erplab load as the same journal: the
// same summary line as that erplab printed (recorded beside them), the
// journaled steps in the table's order, and written back in the same
// format (an older erplab reads what this one writes).
func TestOldStateFiles(t *testing.T) {
	for _, tc := range oldStates {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", tc.file)
			st, err := LoadState(path)
			if err != nil {
				t.Fatal(err)
			}
			summary, err := os.ReadFile(strings.TrimSuffix(path, ".json") + ".summary")
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Summary() + "\n"; got != string(summary) {
				t.Errorf("summary\n%s want\n%s", got, summary)
			}
			var journaled []string
			for _, s := range procedure() {
				if st.journaled(s.name) {
					journaled = append(journaled, s.name)
				}
			}
			if !reflect.DeepEqual(journaled, tc.journaled) {
				t.Errorf("journaled %q, want %q", journaled, tc.journaled)
			}
			out := filepath.Join(t.TempDir(), "state", "tmpfs", "s.json")
			if err := st.save(out); err != nil {
				t.Fatal(err)
			}
			if a, b := jsonFields(t, path), jsonFields(t, out); !reflect.DeepEqual(a, b) {
				t.Errorf("written back:\n%v\nrecorded:\n%v", b, a)
			}
		})
	}
}

// jsonFields is the JSON object in file without its "updated" time.
func jsonFields(t *testing.T, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "updated")
	return m
}

// A state file left by an older erplab killed during apply is undone:
// the same crash is made here (Apply stopped before the same step), its
// state file replaced by the recorded one with this server's values (its
// identifier, paths, OIDs and mount) put in, and Undo runs the undos of
// the steps it journals, newest first, leaving nothing.
func TestUndoOldStateFile(t *testing.T) {
	needRoot(t)
	safetyNet(t)
	ctx := context.Background()
	for _, tc := range oldStates {
		t.Run(tc.file, func(t *testing.T) {
			c := crashedApply(t, tc.stopBefore)
			if err := os.WriteFile(c.path, oldStateFor(t, tc.file, c.st), 0o600); err != nil {
				t.Fatal(err)
			}
			var log strings.Builder
			if err := Undo(ctx, c.dsn, c.opts, &log); err != nil {
				t.Fatalf("undo of the old state file: %v\n%s", err, log.String())
			}
			t.Log(log.String())
			assertNothingLeft(t, c.conn, c.tg, c.path)
			assertInOrder(t, log.String(), "umount ", "DROP TABLESPACE", "rmdir "+c.tg.Location, "undone: ")
		})
	}
}

// oldStateFor is the recorded state file with the values of the state
// now (same steps journaled) in place of the recorded server's.
func oldStateFor(t *testing.T, file string, now *State) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	old, err := LoadState(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	pairs := []string{q(old.SystemIdentifier), q(now.SystemIdentifier), q(old.DataDir), q(now.DataDir),
		q(old.Database), q(now.Database), fmt.Sprintf(`"database_oid": %d`, old.DBOID), fmt.Sprintf(`"database_oid": %d`, now.DBOID),
		q(old.Directory.Path), q(now.Directory.Path)}
	if old.Tablespace.OID != 0 {
		pairs = append(pairs, fmt.Sprintf(`"oid": %d`, old.Tablespace.OID), fmt.Sprintf(`"oid": %d`, now.Tablespace.OID))
	}
	if m := old.Mount; m != nil {
		pairs = append(pairs, q(m.Point), q(now.Mount.Point), fmt.Sprintf(`"mount_id": %d`, m.MountID), fmt.Sprintf(`"mount_id": %d`, now.Mount.MountID),
			q(m.Device), q(now.Mount.Device), q(m.Options), q(now.Mount.Options))
	}
	out := strings.NewReplacer(pairs...).Replace(string(raw))
	back := &State{}
	if err := json.Unmarshal([]byte(out), back); err != nil {
		t.Fatal(err)
	}
	back.Created, back.Updated, back.Complete = now.Created, now.Updated, now.Complete
	if !reflect.DeepEqual(back, now) {
		t.Fatalf("the recorded state with this server's values\n%+v\nis not the state of the same crash here\n%+v", back, now)
	}
	return []byte(out)
}

// assertInOrder checks that each of wants that occurs in log does so
// after the one before it; the last must occur.
func assertInOrder(t *testing.T, log string, wants ...string) {
	t.Helper()
	at := -1
	for _, w := range wants {
		i := strings.Index(log, w)
		if i < 0 {
			continue
		}
		if i < at {
			t.Errorf("%q comes before the line before it in the log:\n%s", w, log)
		}
		at = i
	}
	if !strings.Contains(log, wants[len(wants)-1]) {
		t.Errorf("log lacks %q:\n%s", wants[len(wants)-1], log)
	}
}

// cancelAfter is a log that cancels its context (Ctrl-C) once a line
// starts with prefix.
type cancelAfter struct {
	prefix string
	cancel context.CancelFunc
	log    strings.Builder
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	if strings.HasPrefix(string(p), c.prefix) {
		c.cancel()
	}
	return c.log.Write(p)
}

// Ctrl-C after each step of Apply: the next step fails on the cancelled
// context and Apply runs the undos of the journaled steps newest first
// ("rollback: " lines), leaving no setting, mount, tablespace, directory
// or state file, and returns the cancellation.
func TestApplyInterruptedAfterEachStep(t *testing.T) {
	needRoot(t)
	safetyNet(t)
	for _, after := range []string{"1.", "2.", "3.", "4.", "5."} {
		t.Run("after "+after, func(t *testing.T) {
			dsn := srv.NewDatabase(t)
			conn := dial(t, dsn)
			opts := stateOpts(t, Options{Size: "16M", GrantTo: []string{"PUBLIC"}})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			log := &cancelAfter{prefix: after, cancel: cancel}
			// (Verify's connection error is one line, not wrapped: "connection attempt ... cancelled".)
			if _, err := Apply(ctx, dsn, opts, log); err == nil || !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "cancelled") {
				t.Fatalf("apply interrupted after %s: %v\n%s", after, err, log.log.String())
			}
			t.Log(log.log.String())
			tg, err := Inspect(context.Background(), conn, opts)
			if err != nil {
				t.Fatal(err)
			}
			path, err := StatePath(opts, tg.SystemIdentifier, tg.DataDir, DefaultTablespace)
			if err != nil {
				t.Fatal(err)
			}
			assertNothingLeft(t, conn, tg, path)
			assertInOrder(t, log.log.String(), "rollback: ALTER SYSTEM RESET", "rollback: umount ", "rollback: DROP TABLESPACE",
				"rollback: rmdir "+tg.Location, "rollback: undone: ")
		})
	}
}
