package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/exitcode"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/top"
)

const topRecord = "../../internal/top/testdata/top.rec"

// replayStatus is the header's replay part, which live screens lack.
var replayStatus = regexp.MustCompile(`, replay \+[0-9hms]+, sample \d+/\d+`)

// TestTopPlayCommand: `top --play` of the recording in internal/top's
// testdata prints the golden screen at --at; a torn copy plays its whole
// samples after a one-line note; a run's results play their overview;
// bad combinations are one-line usage errors.
func TestTopPlayCommand(t *testing.T) {
	golden, err := os.ReadFile("../../internal/top/testdata/top-play.golden")
	if err != nil {
		t.Fatal(err)
	}
	out, err := runRoot(t, "top", "--play", topRecord, "--at", "5s")
	if err != nil || !strings.HasPrefix(string(golden), out) || !strings.HasPrefix(string(golden)[len(out):], "\nerplab top - ") {
		t.Errorf("--at 5s: %v\n%s\nwant the first screen of top-play.golden", err, out)
	}
	out, err = runRoot(t, "top", "--play", topRecord, "--from", "2s", "--to", "4s", "--view", "blocking")
	if n := strings.Count(out, "blocking: 1 root blockers, 2 blocked sessions"); err != nil || n != 3 {
		t.Errorf("--from 2s --to 4s: %d screens, %v\n%s", n, err, out)
	}

	b, err := os.ReadFile(topRecord)
	if err != nil {
		t.Fatal(err)
	}
	torn := filepath.Join(t.TempDir(), "torn.rec")
	if err := os.WriteFile(torn, b[:len(b)-40], 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = runRoot(t, "top", "--play", torn, "--count", "100")
	first, _, _ := strings.Cut(out, "\n")
	if err != nil || !strings.HasPrefix(first, "note: "+torn+": the record after sample 7 is cut short or damaged") ||
		strings.Count(out, "\nSESSIONS BY STATE") != 7 || !strings.Contains(out, "sample 7/7") {
		t.Errorf("torn file: %v\n%s", err, out)
	}

	out, err = runRoot(t, "top", "--play", "../../internal/report/testdata/erp.json", "--at", "20s")
	if err != nil || !strings.Contains(out, "replay +20s") || !strings.Contains(out, "\n(not kept in a run's results)\n") ||
		!strings.Contains(out, "note: ../../internal/report/testdata/erp.json: a run's results keep") {
		t.Errorf("a run's results: %v\n%s", err, out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--play", topRecord, "--dsn", "host=/x"}, "--dsn is for watching a server, not with --play"},
		{[]string{"--play", topRecord, "--at", "1s", "--from", "2s"}, "--at excludes --from and --to"},
		{[]string{"--play", topRecord, "--at", "1h"}, `--at: "1h" is after the last sample: the recording runs from `},
		{[]string{"--play", topRecord, "--at", "soon"}, `--at: "soon": want a time since the recording's start`},
		{[]string{"--play", topRecord, "--from", "5s", "--to", "2s"}, "--from is after --to"},
		{[]string{"--play", "../../internal/report/testdata/erp.json", "--view", "sessions"}, "--view sessions: ../../internal/report/testdata/erp.json holds no session list"},
		{[]string{"--dsn", "host=/x", "--at", "5s"}, "--at is for --play"},
	} {
		_, err := runRoot(t, append([]string{"top"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		} else if int(exitcode.Of(err)) != exitUsage {
			t.Errorf("%v: exit %d, want %d", c.args, exitcode.Of(err), exitUsage)
		}
	}
	if _, err := runRoot(t, "top", "--play", "top.go"); err == nil || !strings.Contains(err.Error(), "not an erplab top record") || strings.Contains(err.Error(), "\n") {
		t.Errorf("--play of a Go file: %v", err)
	}
}

// TestTopRecordCommand: `top --record` against a real server writes a
// new file that --play reads back, and refuses a name that exists.
func TestTopRecordCommand(t *testing.T) {
	dsn := srv.NewDatabase(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "top.rec")
	// --probes=false: the probes' line depends on perf's batches, and
	// their one-line notice (another erplab holds them, not root) goes to
	// the same output; TestRecordPlayMatchesLive covers the line
	out, err := runRoot(t, "top", "--dsn", dsn, "--count", "3", "--interval", "200ms", "--catalog-databases", "none", "--probes=false", "--record", path)
	if err != nil || !strings.Contains(out, "recorded 4 samples to "+path+", ") || strings.Count(out, "\nSESSIONS BY STATE") != 3 {
		t.Fatalf("--record: %v\n%s", err, out)
	}
	live, _, _ := strings.Cut(out, "recorded 4 samples")
	played, err := runRoot(t, "top", "--play", path, "--count", "4")
	_, played, _ = strings.Cut(played, "\n\nerplab top - ") // the first sample's screen, which top --count does not print
	played = "erplab top - " + played
	if err != nil || replayStatus.ReplaceAllString(played, "") != live {
		t.Errorf("played:\n%s\nlive:\n%s", played, live)
	}
	if err := os.WriteFile(filepath.Join(dir, "taken"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = runRoot(t, "top", "--dsn", dsn, "--count", "1", "--interval", "200ms", "--record", filepath.Join(dir, "taken"))
	if err == nil || !strings.Contains(err.Error(), "exists: erplab does not write over or through it") {
		t.Errorf("--record over a file: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "taken")); string(b) != "x" {
		t.Errorf("the existing file was changed: %q", b)
	}
}

// TestTopRecordKilled: `top --record` without a terminal records until
// stopped. Killed with SIGKILL, its file plays every whole sample after
// a note; stopped with SIGTERM, it closes the file and says so.
func TestTopRecordKilled(t *testing.T) {
	pgtest.SkipShort(t) // runs the test binary as erplab
	dsn := srv.NewDatabase(t)
	dir := t.TempDir()
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		path := filepath.Join(dir, sig.String()+".rec")
		cmd := erplab(t, dir, "top", "--dsn", dsn, "--interval", "100ms", "--catalog-databases", "none", "--probes=false", "--record", path) // killed: its probes would outlive a test state dir
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var n int
		for deadline := time.Now().Add(60 * time.Second); n < 5; time.Sleep(50 * time.Millisecond) {
			if r, err := top.Open(path); err == nil {
				n = r.Len()
				r.Close()
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("%v: %d samples recorded in 60 s; stderr %q", sig, n, stderr.String())
			}
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		r, oerr := top.Open(path)
		if oerr != nil {
			t.Fatalf("%v: %v", sig, oerr)
		}
		switch {
		case r.Len() < n:
			t.Errorf("%v: %d samples, %d were whole before", sig, r.Len(), n)
		case sig == syscall.SIGKILL && !strings.Contains(r.Note, "was not closed") && !strings.Contains(r.Note, "is cut short"):
			t.Errorf("killed: note %q", r.Note)
		case sig == syscall.SIGTERM && (err != nil || r.Note != "" || !strings.Contains(stderr.String(), fmt.Sprintf("recorded %d samples to %s", r.Len(), path))):
			t.Errorf("stopped: exit %v, note %q, stderr %q", err, r.Note, stderr.String())
		}
		r.Close()
	}
}
