package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/capture"
)

// readCapture reads the capture at path: its events and whether it
// ended torn.
func readCapture(t *testing.T, path string) ([]capture.Event, bool) {
	t.Helper()
	r, err := capture.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var evs []capture.Event
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return evs, r.Truncated()
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
}

// 'erplab proxy --capture FILE': a session's events in the file, the
// summary line at exit; a second proxy refuses the existing file in one
// line (exit 2) and leaves it as it was.
func TestProxyCapture(t *testing.T) {
	dsn := srv.NewDatabase(t)
	path := filepath.Join(t.TempDir(), "w.erpcap.gz")
	p := startProxyProcess(t, dsn, "--capture", path)
	c := connectVia(t, p.dsn)
	if v, err := sql(c, "SELECT 41 + 1"); err != nil || v != "42" {
		t.Fatalf("through the proxy: %q, %v", v, err)
	}
	if err := c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.exit(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "capture " + path + ": 1 session(s), 3 event(s), " + strconv.FormatInt(fi.Size(), 10) + " bytes"
	if out := p.stdout.String(); !strings.Contains(out, want+"\n") {
		t.Errorf("summary:\n%s\nwant the line %q", out, want)
	}
	evs, torn := readCapture(t, path)
	if torn || len(evs) != 3 || evs[1].SQL != "SELECT 41 + 1" || evs[1].Tag != "SELECT 1" || fi.Mode().Perm() != 0o600 {
		t.Errorf("torn %v, mode %v, events %+v", torn, fi.Mode(), evs)
	}

	cmd := erplab(t, t.TempDir(), "proxy", "--listen", "127.0.0.1:0", "--upstream", dsn, "--capture", path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	msg := strings.TrimSpace(stderr.String())
	if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || strings.Contains(msg, "\n") || !strings.Contains(msg, "--capture") || !strings.Contains(msg, "file exists") {
		t.Errorf("over an existing capture: %v, %q", err, msg)
	}
	if after, err := os.Stat(path); err != nil || after.Size() != fi.Size() || !after.ModTime().Equal(fi.ModTime()) {
		t.Errorf("the existing capture changed: %v", err)
	}
}

// A proxy killed with SIGKILL leaves a capture that reads up to its last
// flush (within a second of each event) and says it is truncated.
func TestProxyCaptureKilled(t *testing.T) {
	dsn := srv.NewDatabase(t)
	path := filepath.Join(t.TempDir(), "k.erpcap.gz")
	p := startProxyProcess(t, dsn, "--capture", path)
	c := connectVia(t, p.dsn)
	if _, err := sql(c, "SELECT 'before the kill'"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		evs, _ := readCapture(t, path)
		if len(evs) == 2 && evs[1].SQL == "SELECT 'before the kill'" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the statement is not in the capture: %+v", evs)
		}
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.exit(t)
	evs, torn := readCapture(t, path)
	if !torn || len(evs) != 2 || evs[0].Kind != capture.KindConnect || evs[1].Tag != "SELECT 1" {
		t.Errorf("after SIGKILL: truncated %v, events %+v", torn, evs)
	}
}

func TestProxyCaptureFlags(t *testing.T) {
	checkUsageError(t, []string{"proxy", "--upstream", "host=/tmp", "--capture", "x.gz", "--capture-memory", "1K"})
	out, err := erplab(t, t.TempDir(), "proxy", "--help").Output()
	if err != nil || !strings.Contains(string(out), "--capture string") || !strings.Contains(string(out), "--capture-memory") {
		t.Errorf("proxy --help: %v\n%s", err, out)
	}
}

// A Bind of 200 KiB (over the size from which the proxy relays a message
// as it arrives) is captured whole: its execute event holds the value.
func TestProxyCaptureLargeBind(t *testing.T) {
	dsn := srv.NewDatabase(t)
	path := filepath.Join(t.TempDir(), "big.erpcap.gz")
	p := startProxyProcess(t, dsn, "--capture", path)
	conn, err := pgx.Connect(t.Context(), p.dsn)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 200<<10)
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT length($1::text)", big).Scan(&n); err != nil || n != len(big) {
		t.Fatalf("through the proxy: %d, %v", n, err)
	}
	_ = conn.Close(t.Context())
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.exit(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	evs, _ := readCapture(t, path)
	found := false
	for _, e := range evs {
		if e.Kind == capture.KindExecute && len(e.Values) == 1 {
			found = true
			if string(e.Values[0]) != big || strings.Contains(e.Note, capture.NoteDataCut) {
				t.Errorf("the bound value: %d bytes, note %q; want %d bytes", len(e.Values[0]), e.Note, len(big))
			}
		}
	}
	if !found {
		t.Errorf("no execute with the 200 KiB value in the capture: %d events", len(evs))
	}
}
