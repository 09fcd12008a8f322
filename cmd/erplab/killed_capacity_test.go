package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/capacity"
)

// A capacity search killed with SIGKILL leaves its document at status
// "running" with the writer's pid and host: erplab report (HTML and
// Markdown) and capacity.Document.StatusText read it as incomplete,
// naming the pid, not as running.
func TestKilledCapacityReadsIncomplete(t *testing.T) {
	dsn := srv.NewDatabase(t) // skips under -short
	dir := t.TempDir()
	out := filepath.Join(dir, "cap.json")
	cmd := erplab(t, dir, "capacity", "--dsn", dsn, "--workload", "smoke", "--start", "1", "--step", "x2", "--max-users", "64",
		"--hold", "3s", "--ramp", "0s", "--think", "200ms", "--out", out)
	cmd.Env = append(cmd.Env, "ERPLAB_STATE_DIR="+filepath.Join(dir, "state"))
	killWhen(t, cmd, "first step in "+out, 2*time.Minute, 200*time.Millisecond, func() bool {
		d, err := capacity.Read(out)
		return err == nil && len(d.Steps) >= 1
	})
	pid := cmd.Process.Pid

	doc, err := capacity.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if doc.Status != "running" || doc.PID != pid || doc.Host != host {
		t.Fatalf("document: status %q pid %d host %q, want running, pid %d, host %q", doc.Status, doc.PID, doc.Host, pid, host)
	}
	want := fmt.Sprintf("incomplete (the writing process, pid %d, is gone)", pid)
	if got := doc.StatusText(); got != want {
		t.Errorf("StatusText %q, want %q", got, want)
	}
	md, err := erplab(t, dir, "report", "--format", "markdown", out).CombinedOutput()
	if err != nil || !strings.Contains(string(md), "Status: "+want+".") {
		t.Errorf("report --format markdown: %v\n%s", err, md)
	}
	html := filepath.Join(dir, "cap.html")
	if b, err := erplab(t, dir, "report", out, "-o", html).CombinedOutput(); err != nil {
		t.Fatalf("report: %v\n%s", err, b)
	}
	if b, err := os.ReadFile(html); err != nil || !strings.Contains(string(b), "<p>Status: "+want+".") || strings.Contains(string(b), "Status: running") {
		t.Errorf("report %s does not say %q (%v)", html, want, err)
	}
}
