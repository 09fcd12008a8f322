package report

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/disk"
)

// The disk page from real (tiny) measurements of two directories is
// self-contained and has a chart per pattern and the churn lines.
func TestWriteDiskHTML(t *testing.T) {
	opts := disk.Options{FileBytes: 1 << 20, Duration: 100 * time.Millisecond, QueueDepth: 2, ChurnFiles: 200, Seed: 1}
	var micro []disk.PathResult
	for _, dir := range []string{t.TempDir(), "/dev/shm"} {
		r, err := disk.Measure(context.Background(), dir, opts)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		micro = append(micro, r)
	}
	var b bytes.Buffer
	if err := WriteDiskHTML(&b, micro, nil); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	// one bar chart per pattern, one churn chart per churn pattern
	want := len(disk.Patterns()) + 2
	if n := strings.Count(page, "<svg"); n != want {
		t.Fatalf("%d charts, want %d", n, want)
	}
	for _, bad := range []string{`src="http`, `href="http`, "<script"} {
		if strings.Contains(page, bad) {
			t.Fatalf("page is not self-contained: has %q", bad)
		}
	}
	for _, pat := range disk.Patterns() {
		if !strings.Contains(page, pat) {
			t.Fatalf("no %s in the page", pat)
		}
	}
}
