package report

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// abProxyFiles are four runs of an `erplab ab` recorded on this machine:
//
//	erplab ab --workload erp --scale 0.02 --users 10 --duration 10s --warmup 2s \
//	    --think 200ms-600ms --seed 42 --progress 0 --rounds 2 --variant proxy=rewrite-proxy
//
// (interval histograms removed: jq -c 'del(.series[].ops[]?.histogram_us)').
var abProxyFiles = []string{"testdata/ab-proxy/baseline-1.json", "testdata/ab-proxy/proxy-1.json",
	"testdata/ab-proxy/baseline-2.json", "testdata/ab-proxy/proxy-2.json"}

var svgTextRE = regexp.MustCompile(`<text[^>]*>([^<]*)</text>`)

// The page of an ab experiment with the rewrite proxy and four runs: the
// proxy's counters read as words ("or_any_array fired 6"), not as JSON
// or its multi-line summary; every table sits in a container that
// scrolls; the APDEX chart's axis ends at 1.0.
func TestABPageFourRuns(t *testing.T) {
	runs, err := Load(abProxyFiles)
	if err != nil {
		t.Fatal(err)
	}
	page := htmlOf(t, runs)
	for _, want := range []string{
		"rewrite-proxy: fallbacks=0, or_any_array fired 6, listen=127.0.0.1:34581, rewrites=9, statements=2673",
		"rewrite-proxy: fallbacks=0, or_any_array fired 6, listen=127.0.0.1:35031, rewrites=9, statements=2553",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks the remedy's counters %q", want)
		}
	}
	for _, bad := range []string{"fired=", "or_any_array&#34;", "summary=", "pre-filter skipped"} {
		if strings.Contains(page, bad) {
			t.Errorf("page shows the raw counters: %q", bad)
		}
	}
	if n, wrapped := strings.Count(page, "<table"), strings.Count(page, `<div class="scroll"><table`); n == 0 || wrapped != n {
		t.Errorf("%d of %d tables in a scrolling container", wrapped, n)
	}

	p, err := apdexChart(runs, opNames(runs))
	if err != nil {
		t.Fatal(err)
	}
	if p.Y.Min != 0 || p.Y.Max != 1 {
		t.Errorf("APDEX axis from %g to %g, want 0 to 1", p.Y.Min, p.Y.Max)
	}
	i := strings.Index(page, `id="chart-apdex"`)
	if i < 0 {
		t.Fatal("no APDEX chart")
	}
	svg := page[i : i+strings.Index(page[i:], "</figure>")]
	top := -1.0
	for _, m := range svgTextRE.FindAllStringSubmatch(svg, -1) {
		if v, err := strconv.ParseFloat(m[1], 64); err == nil && v > top {
			top = v
		}
	}
	if top != 1 {
		t.Errorf("the APDEX axis' highest label is %g, want 1.0", top)
	}
}
