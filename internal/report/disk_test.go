package report

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/disk"
)

// The disk page from real (tiny) measurements of two directories, 3
// repeats each, is self-contained, has a chart per pattern and the churn
// lines, draws no log scale and prints every median on its bar.
func TestWriteDiskHTML(t *testing.T) {
	opts := disk.Options{FileBytes: 1 << 20, Duration: 100 * time.Millisecond, QueueDepth: 2, ChurnFiles: 200, Seed: 1, Repeats: 3}
	micro, err := disk.MeasureAll(context.Background(), []string{t.TempDir(), "/dev/shm"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := disk.NewComparison(micro, nil, 3, disk.DefaultRule(), false)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteDiskHTML(&b, c); err != nil {
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
	if strings.Contains(page, "log10") {
		t.Error("page still draws a log10 axis")
	}
	for _, m := range micro {
		for _, r := range m.Results {
			if lbl := fmt.Sprintf(">%.0f<", r.OpsPerS.Median); !strings.Contains(page, lbl) {
				t.Errorf("%s %s: median %s not printed", m.Path, r.Pattern, lbl)
			}
		}
	}
}
