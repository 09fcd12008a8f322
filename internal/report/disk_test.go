package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
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

// The page of a recorded comparison with macro results (a disk and
// /dev/shm, WAL on the paths): one bar chart per operation with its
// median printed, the macro table with ranks, the WAL note and the rule.
func TestWriteDiskHTMLRecordedMacro(t *testing.T) {
	b, err := os.ReadFile("../disk/testdata/shm-disk-walonpath-order1.json")
	if err != nil {
		t.Fatal(err)
	}
	var rec disk.Comparison
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	c, err := disk.NewComparison(rec.Micro, rec.Macro, rec.Repeats, rec.Rule, rec.WALOnPath)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteDiskHTML(&out, c); err != nil {
		t.Fatal(err)
	}
	page := out.String()
	if n, want := strings.Count(page, "<svg"), len(disk.Patterns())+2+len(disk.MacroOps()); n != want {
		t.Errorf("%d charts, want %d", n, want)
	}
	for _, m := range c.Macro {
		for _, o := range m.Ops {
			if lbl := fmt.Sprintf(">%.1f<", o.Ms.Median); !strings.Contains(page, lbl) {
				t.Errorf("%s %s: median %s not on its bar", m.Path, o.Op, lbl)
			}
		}
	}
	// repost_day on /dev/shm: median 614.7 ms of 401.6-647.1, rank 1 alone
	for _, want := range []string{"614.7 [401.6-647.1] (1)", "WAL on each path", "only complete separation"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
