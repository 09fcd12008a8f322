package doctor

import (
	"strings"
	"testing"
)

// Markdown escapes with backslashes, never HTML entities: "->" stays
// readable in plain-text viewers and renders as "->".
func TestMarkdownEscapes(t *testing.T) {
	rep := &Report{Format: ReportFormat, Worst: Warning, Findings: []Finding{{
		ID: "catalog-size", Title: "Catalog size", Severity: Warning, Summary: "pg_class 256 kB -> 9 MB <fast> & growing",
		Evidence: []Evidence{{Text: "n_tup_upd > 0, *all* of [them]", From: "pg_stat_sys_tables"}},
		Fix:      []string{"echo madvise > /sys/kernel/mm/transparent_hugepage/enabled"},
	}}}
	md := Markdown(rep)
	for _, want := range []string{`pg\_class 256 kB -\> 9 MB \<fast\> \& growing`, `n\_tup\_upd \> 0, \*all\* of \[them\]`, "```\necho madvise > /sys"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "&gt;") || strings.Contains(md, "&lt;") {
		t.Errorf("markdown has HTML entities:\n%s", md)
	}
}
