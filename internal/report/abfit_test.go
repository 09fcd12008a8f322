package report_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/report"
)

var scrollWidthRE = regexp.MustCompile(`data-fit="(\d+)/(\d+)"`)

// The page of four ab runs (testdata/ab-proxy) fits a 1400 px window in
// headless Chromium: the document is no wider than the window (wide
// tables scroll inside their container, charts take the container's
// width). A copy of the page with a script that records the widths is
// rendered with --dump-dom.
func TestABPageFits1400px(t *testing.T) {
	bin := chromium(t)
	files := []string{"testdata/ab-proxy/baseline-1.json", "testdata/ab-proxy/proxy-1.json",
		"testdata/ab-proxy/baseline-2.json", "testdata/ab-proxy/proxy-2.json"}
	runs, err := report.Load(files)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := report.WriteHTML(&buf, runs); err != nil {
		t.Fatal(err)
	}
	measure := `<script>document.body.setAttribute("data-fit", document.documentElement.scrollWidth + "/" + document.documentElement.clientWidth)</script></body>`
	dir := t.TempDir()
	page := filepath.Join(dir, "ab.html")
	if err := os.WriteFile(page, []byte(strings.Replace(buf.String(), "</body>", measure, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--user-data-dir="+t.TempDir(), "--window-size=1400,900", "--dump-dom", "file://"+page)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	m := scrollWidthRE.FindSubmatch(dom)
	if m == nil {
		t.Fatalf("no measurement in the rendered page\n%s", stderr.String())
	}
	scroll, _ := strconv.Atoi(string(m[1]))
	client, _ := strconv.Atoi(string(m[2]))
	if client == 0 || scroll > client {
		t.Errorf("the page is %d px wide in a %d px window: it overflows", scroll, client)
	}
}
