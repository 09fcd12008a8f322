package capacity_test

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/erplab/erplab/internal/capacity"
)

// TestDocumentStatusText: the plain capacity document reads its status
// through the same Writer as the A/B document: a "running" document
// whose writer is gone is "incomplete", one whose writer lives is
// "running (pid N)", one from another host or without a writer cannot
// tell; any other status is itself.
func TestDocumentStatusText(t *testing.T) {
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	for _, c := range []struct {
		status string
		w      capacity.Writer
		want   string
	}{
		{"running", capacity.Writer{PID: gone.Process.Pid, Host: host}, fmt.Sprintf("incomplete (the writing process, pid %d, is gone)", gone.Process.Pid)},
		{"running", capacity.Writer{PID: os.Getpid(), Host: host}, fmt.Sprintf("running (pid %d)", os.Getpid())},
		{"running", capacity.Writer{PID: os.Getpid(), Host: "elsewhere"}, fmt.Sprintf("running or killed (pid %d on host elsewhere)", os.Getpid())},
		{"running", capacity.Writer{}, "running or killed (no writing process recorded)"},
		{"completed", capacity.Writer{PID: gone.Process.Pid, Host: host}, "completed"},
		{"interrupted", capacity.Writer{}, "interrupted"},
	} {
		d := &capacity.Document{Status: c.status, Writer: c.w}
		if got := d.StatusText(); got != c.want {
			t.Errorf("%s by %+v: %q, want %q", c.status, c.w, got, c.want)
		}
		ab := &capacity.ABDocument{Status: c.status, Writer: c.w}
		if got := ab.StatusText(); got != c.want {
			t.Errorf("A/B %s by %+v: %q, want %q", c.status, c.w, got, c.want)
		}
	}
}
