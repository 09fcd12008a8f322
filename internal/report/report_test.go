package report_test

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/report"
	"github.com/erplab/erplab/internal/storm"
	"github.com/erplab/erplab/internal/workload/smoke"
)

var srv *pgtest.Server

// runDir holds the runs' results files for all tests; removed at exit.
var runDir string

func TestMain(m *testing.M) {
	code := pgtest.Run(m, &srv)
	if runDir != "" {
		os.RemoveAll(runDir)
	}
	os.Exit(code)
}

var (
	once  sync.Once
	paths []string
	err0  error
)

// twoRuns makes two real smoke runs at the same time (3 and 1 pooled
// connections) with observations, and returns their results files.
func twoRuns(t *testing.T) []string {
	t.Helper()
	once.Do(func() {
		dir, err := os.MkdirTemp("", "erplab-report-test")
		if err != nil {
			err0 = err
			return
		}
		runDir = dir
		dsns := []string{srv.NewDatabase(t), srv.NewDatabase(t)}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i, conns := range []int{3, 1} {
			p := filepath.Join(dir, []string{"three.json", "one.json"}[i])
			paths = append(paths, p)
			wg.Add(1)
			go func() {
				defer wg.Done()
				var out bytes.Buffer
				_, err := loadtest.Run(context.Background(), loadtest.Options{
					DSN: dsns[i], Workload: smoke.New(), Scale: 0.1, Seed: 7,
					Stages:      []engine.Stage{{Duration: 0, Target: 6}, {Duration: 6 * time.Second, Target: 6}},
					Think:       engine.ThinkTime{Kind: "uniform", Min: 10 * time.Millisecond, Max: 30 * time.Millisecond},
					Connections: conns, Interval: time.Second, Observe: true, Out: p, Version: "test",
				}, &out)
				if err != nil {
					mu.Lock()
					err0 = err
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	})
	if err0 != nil {
		t.Fatalf("load test: %v", err0)
	}
	return paths
}

// expectedCharts counts the charts the page must hold, from the runs
// themselves: APDEX bars, one latency chart per key operation, VUs,
// throughput, per run waits and host CPU, catalog and temp files.
func expectedCharts(runs []report.Run) int {
	ops := map[string]bool{}
	n := 1 + 2 + 2
	for _, r := range runs {
		for _, op := range r.Doc.Operations {
			ops[op.Name] = true
		}
		n++ // waits
		if r.Obs.Server.HostSampled {
			n++
		}
	}
	return n + len(ops)
}

// markStorm adds a storm event to a run's observations (on its own time
// axis, in the middle of the run) so that the storm markers are drawn;
// the short smoke runs do not storm by themselves.
func markStorm(r report.Run) {
	first := r.Obs.Series
	mid := first[len(first)/2].T
	end := mid + 1
	r.Obs.Storms = append(r.Obs.Storms, storm.Event{T: mid, StartT: mid - 1, EndT: &end,
		WaitEvent: "LWLock:LockManager", Message: "test storm (added by the test)"})
}

var attrRE = regexp.MustCompile(`(?i)\b(src|href|xlink:href)\s*=\s*["']?([^"' >]*)`)

func TestHTMLSelfContained(t *testing.T) {
	runs, err := report.Load(twoRuns(t))
	if err != nil {
		t.Fatal(err)
	}
	if runs[0].Obs == nil || runs[1].Obs == nil {
		t.Fatal("runs without observations")
	}
	markStorm(runs[0])

	var buf bytes.Buffer
	if err := report.WriteHTML(&buf, runs); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, m := range attrRE.FindAllStringSubmatch(page, -1) {
		v := strings.ToLower(m[2])
		if strings.HasPrefix(v, "http:") || strings.HasPrefix(v, "https:") || strings.HasPrefix(v, "//") {
			t.Errorf("external reference %s=%s", m[1], m[2])
		}
	}
	for _, bad := range []string{"<script", "url(", "@import", "<iframe", "<img"} {
		if strings.Contains(strings.ToLower(page), bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	want := expectedCharts(runs)
	if got := strings.Count(page, "<svg"); got != want {
		t.Errorf("%d <svg> elements, want %d", got, want)
	}
	charts, err := report.Charts(runs)
	if err != nil {
		t.Fatal(err)
	}
	if len(charts) != want {
		t.Fatalf("%d charts, want %d", len(charts), want)
	}
	for _, c := range charts {
		if !strings.Contains(page, `id="chart-`+c.ID+`"`) || !strings.HasPrefix(c.SVG, "<svg") {
			t.Errorf("chart %s missing or not SVG", c.ID)
		}
		switch c.ID {
		case "waits-0", "cpu-0", "vus", "throughput":
			if !strings.Contains(c.SVG, ">storm<") {
				t.Errorf("chart %s lacks the storm marker", c.ID)
			}
		case "waits-1", "cpu-1":
			if strings.Contains(c.SVG, ">storm<") {
				t.Errorf("chart %s marks the other run's storm", c.ID)
			}
		}
	}
	for _, s := range []string{"item_lookup", "integral APDEX", "test storm", "three", "one", "server.version_num", "connections"} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
}

func TestMarkdown(t *testing.T) {
	runs, err := report.Load(twoRuns(t))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := report.WriteMarkdown(&buf, runs); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	for _, op := range runs[0].Doc.Operations {
		if !strings.Contains(md, "| "+op.Name+" |") {
			t.Errorf("markdown lacks a row for %s", op.Name)
		}
	}
	if strings.Contains(md, "<svg") || !strings.Contains(md, "| three |") || !strings.Contains(md, "| one |") {
		t.Errorf("markdown:\n%s", md)
	}
}

func TestLoadErrors(t *testing.T) {
	if _, err := report.Load([]string{filepath.Join(t.TempDir(), "nope.json")}); err == nil || strings.Contains(err.Error(), "\n") {
		t.Fatalf("missing file: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"format":"other"}`), 0o644)
	if _, err := report.Load([]string{bad}); err == nil {
		t.Fatal("wrong format accepted")
	}
}

// chromium finds Debian's chromium.
func chromium(t *testing.T) string {
	for _, n := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Skip("chromium not installed (Debian package chromium): headless rendering not checked")
	return ""
}

// shoot opens file in headless Chromium, takes a screenshot and returns
// the console messages Chromium logged (":CONSOLE" lines on stderr).
func shoot(t *testing.T, bin, file, png string, height int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--enable-logging=stderr", "--v=0", "--hide-scrollbars", "--user-data-dir="+t.TempDir(),
		"--window-size=1280,"+strconv.Itoa(height), "--screenshot="+png, "file://"+file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	var console []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, ":CONSOLE") {
			console = append(console, l)
		}
	}
	return console
}

// The page renders in headless Chromium with no console messages; a
// control page that logs an error shows that the check sees them. The
// screenshot is kept as $ERPLAB_REPORT_SHOT when that is set.
func TestChromiumRenders(t *testing.T) {
	bin := chromium(t)
	runs, err := report.Load(twoRuns(t))
	if err != nil {
		t.Fatal(err)
	}
	markStorm(runs[0])
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var buf bytes.Buffer
	if err := report.WriteHTML(&buf, runs); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "report.png")
	if p := os.Getenv("ERPLAB_REPORT_SHOT"); p != "" {
		shot = p
	}
	if msgs := shoot(t, bin, page, shot, 9000); len(msgs) > 0 {
		t.Errorf("console messages:\n%s", strings.Join(msgs, "\n"))
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	// The page is not blank: count pixels that are far from white.
	b := img.Bounds()
	dark := 0
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r+g+bl < 3*0xC000 {
				dark++
			}
		}
	}
	if total := b.Dx() * b.Dy() / 4; dark < total/100 {
		t.Errorf("screenshot nearly blank: %d of %d sampled pixels not white", dark, total)
	}

	control := filepath.Join(dir, "control.html")
	os.WriteFile(control, []byte(`<!DOCTYPE html><html><head><link rel="icon" href="data:,"></head><body><script>console.error("control-error")</script></body></html>`), 0o644)
	msgs := shoot(t, bin, control, filepath.Join(dir, "control.png"), 600)
	if len(msgs) == 0 || !strings.Contains(strings.Join(msgs, "\n"), "control-error") {
		t.Errorf("console check does not see a console.error: %q", msgs)
	}
}
