package main

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
)

// statementsLineRE matches run's summary line of the statements' attribution.
var statementsLineRE = regexp.MustCompile(`(?m)^statements: \d+ calls, \d+\.\d % of the workload's attributed to key operations; not attributed: observer \d+, other \d+$`)

// Every statement the erp workload sends is attributed to the key
// operation that sent it: at least 99 % of the calls that are not the
// observer's own, the observer's named apart, no pg_stat_statements entry
// evicted in a short run (issue 33 item 5).
func TestRunERPStatementsAttributed(t *testing.T) {
	pgtest.SkipShort(t) // builds the binary and starts an embedded server
	dir := t.TempDir()
	out, err := erplab(t, dir, "run", "--workload", "erp", "--scale", "0.01", "--users", "8", "--connections", "4",
		"--think", "0", "--duration", "6s", "--out", "erp.json", "--progress", "0").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	doc, err := results.Read(filepath.Join(dir, "erp.json"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := sampler.ReadObservations(doc.Extra["observations"])
	if err != nil {
		t.Fatal(err)
	}
	st := o.Statements
	if st == nil || st.Total.Calls < 100 {
		t.Fatalf("statements %+v, want a run's worth\n%s", st, out)
	}
	if p := st.AttributedPct(); p < 99 {
		t.Errorf("%.1f %% of the workload's calls attributed, want >= 99 (%d attributed, %d other, %d observer)\n%s",
			p, st.AttributedCalls, st.OtherCalls, st.ObserverCalls, out)
	}
	if st.ObserverCalls == 0 || st.AttributedCalls+st.ObserverCalls+st.OtherCalls != st.Total.Calls {
		t.Errorf("calls %d = attributed %d + observer %d + other %d? want the observer's named", st.Total.Calls, st.AttributedCalls, st.ObserverCalls, st.OtherCalls)
	}
	if st.Evicted != 0 {
		t.Errorf("pg_stat_statements evicted %d entries in a short run", st.Evicted)
	}
	if !statementsLineRE.Match(out) {
		t.Errorf("no statements line in the summary:\n%s", out)
	}
}
