package report_test

import (
	"bytes"
	"context"
	"flag"
	"image/png"
	"io"
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

// rerecord makes twoRuns run the load tests again on a test PostgreSQL
// server and rewrite testdata/{three,one}.json: go test -run . -record.
var rerecord = flag.Bool("record", false, "re-record testdata/{three,one}.json with real runs on a test PostgreSQL server")

// TestMain starts a server only to re-record: the reports are made from
// recorded runs.
func TestMain(m *testing.M) { os.Exit(pgtest.RunIf(m, &srv, rerecord)) }

// runPaths are the two recorded smoke runs (3 and 1 pooled connections,
// with observations).
var runPaths = []string{"testdata/three.json", "testdata/one.json"}

var (
	once sync.Once
	err0 error
)

// twoRuns returns the recorded runs' results files, re-recording them
// first under -record: two real smoke runs at the same time (3 and 1
// pooled connections) with observations.
func twoRuns(t *testing.T) []string {
	t.Helper()
	if !*rerecord {
		return runPaths
	}
	once.Do(func() {
		dsns := []string{srv.NewDatabase(t), srv.NewDatabase(t)}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i, conns := range []int{3, 1} {
			p := runPaths[i]
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := loadtest.Run(context.Background(), loadtest.Options{
					DSN: dsns[i], Workload: smoke.New(), Scale: 0.1, Seed: 7,
					Stages:      []engine.Stage{{Duration: 0, Target: 6}, {Duration: 6 * time.Second, Target: 6}},
					Think:       engine.ThinkTime{Kind: "uniform", Min: 10 * time.Millisecond, Max: 30 * time.Millisecond},
					Connections: conns, Interval: time.Second, Observe: true, Out: p, Version: "test",
				}, io.Discard)
				if err == nil { // the stream the run wrote before its document
					err = os.Remove(strings.TrimSuffix(p, ".json") + ".jsonl")
				}
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
	return runPaths
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

// markdownOf loads the results files at paths and renders their Markdown
// report.
func markdownOf(t *testing.T, paths []string) ([]report.Run, string) {
	t.Helper()
	runs, err := report.Load(paths)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := report.WriteMarkdown(&buf, runs); err != nil {
		t.Fatal(err)
	}
	return runs, buf.String()
}

func TestMarkdown(t *testing.T) {
	runs, md := markdownOf(t, twoRuns(t))
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

// chromium finds Debian's chromium, or skips t: headless rendering is
// not checked then.
func chromium(t *testing.T) string {
	return pgtest.NeedProgram(t, "chromium", "chromium-browser")
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

// testdata/erp.json is a real erp run recorded with the command line
//
//	erplab run --workload erp --scale 0.02 --users 10 --duration 20s --out erp.json
//
// (embedded server, default observations). Its report shows the
// recorded figures as the CLI prints them (two decimals, '*' under 100
// samples): the integral APDEX, temp_table_storm's APDEX and
// percentiles, and "NS" for the operations that ran no sample.
func TestERPRecordedRun(t *testing.T) {
	runs, md := markdownOf(t, []string{"testdata/erp.json"})
	for _, row := range []string{
		"| erp | erp | completed | 2026-12-01T09:38:18Z | 20s | 10 | 10 | 0.96 (excellent) | 9.2 | 184 | 0 | 0 |",
		"| temp_table_storm | 200ms | 2 | 0.62* (poor) | 212ms / 324ms / 324ms | 8 (0) |",
		"| post_sales_invoice | 2.00s | 1 | 1.00* (excellent) | 128ms / 194ms / 200ms | 20 (0) |",
		"| repost_day | 5m0s | 4 | NS | - / - / - | 0 (0) |",
		"| erp | CPU 100 % | 58.8 % | 36.7 % | 0.3 % | 1.0 % | 1.8 MiB → 3.0 MiB (1.2 MiB) | 0.00 /s |",
		"- erp: `erplab run --workload erp --scale 0.02 --users 10 --duration 20s --out erp.json`",
	} {
		if !strings.Contains(md, row) {
			t.Errorf("markdown lacks %q:\n%s", row, md)
		}
	}
	var buf bytes.Buffer
	if err := report.WriteHTML(&buf, runs); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Count(buf.String(), "<svg"), expectedCharts(runs); got != want {
		t.Errorf("%d <svg> elements, want %d", got, want)
	}
}
