package experiment

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/results"
)

// The A/A line counts tested rows as the comparison does (a p-value:
// Holm's m of both families): of the recorded single A/A runs of erp
// (internal/compare/testdata/aa-erp, round 1 of each side), 33 rows are
// tested, 1 primary and 32 exploratory; 18 more ran the bootstrap but had
// nothing that varied (no p-value) and are not counted, nor are the
// percentiles of operations with too few executions (not run).
func TestAACountsTestedRowsAsCompare(t *testing.T) {
	var docs [2][]*results.Document
	var names [2][]string
	for i, n := range []string{"baseline-1.json", "same-1.json"} {
		p := filepath.Join("..", "compare", "testdata", "aa-erp", n)
		d, err := results.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		docs[i], names[i] = []*results.Document{d}, []string{p}
	}
	cp, err := compare.CompareRounds(names[0], docs[0], names[1], docs[1], compare.Options{Primary: []compare.Key{compare.IntegralApdex}})
	if err != nil {
		t.Fatal(err)
	}
	var a AAOutcome
	a.add(cp)
	ran := 0
	for _, r := range cp.Rows {
		if r.Method != "" {
			ran++
		}
	}
	if a.TestedRows != 33 || a.TestedRows != cp.Primary.Family+cp.Primary.Exploratory || ran != 51 || len(a.Comparisons) != 1 || a.FalsePrimary != 0 {
		t.Fatalf("A/A counts %+v (primary %+v, %d rows with a method)", a, cp.Primary, ran)
	}
	if l := a.Line(); !strings.Contains(l, "of 33 tested rows") {
		t.Fatalf("A/A line %s", l)
	}
}
