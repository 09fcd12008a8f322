package doctor

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// TestCheckOrder: the registered checks, each from the file that implements
// it, come in the report order of the one list they replaced, with what
// each needs (its host and sample marks of that list).
func TestCheckOrder(t *testing.T) {
	want := []struct {
		id    string
		needs Needs
	}{
		{"thp-enabled", NeedsHost}, {"thp-defrag", NeedsHost}, {"thp-activity", NeedsHost | NeedsSample},
		{"huge-pages", 0}, {"overcommit", NeedsHost}, {"swap", NeedsHost},
		{"max-connections", 0}, {"connection-age", 0}, {"idle-in-transaction", 0}, {"long-queries", 0},
		{"memory-budget", NeedsHost}, {"temp-files", 0}, {"temp-buffers", 0},
		{"catalog-size", 0}, {"catalog-bloat", 0}, {"xmin-horizon", 0}, {"catalog-churn", NeedsSample}, {"temp-tablespace", WantsSample},
		{"lwlock-waits", NeedsSample}, {"invalidation-chain", NeedsSample},
		{"planning-time", 0}, {"statistics-targets", 0}, {"or-subquery", 0}, {"jit", 0},
		{"autovacuum", 0}, {"wraparound", 0},
		{"profile-lock-manager", 0}, {"profile-sinval", 0}, {"profile-catalog", 0}, {"profile-file-system", 0}, {"profile-thp", 0},
		{"window-waits", 0}, {"window-storms", 0}, {"window-catalog", 0}, {"window-horizon", 0}, {"window-invalidation", 0},
		{"window-locks", 0}, {"window-temp-full", 0}, {"window-apdex", 0},
	}
	var got, exp []string
	for _, c := range Checks() {
		got = append(got, fmt.Sprintf("%s %03b", c.ID, c.Needs))
	}
	for _, w := range want {
		exp = append(exp, fmt.Sprintf("%s %03b", w.id, w.needs))
	}
	if !slices.Equal(got, exp) {
		t.Errorf("checks in report order (id, needs):\n got %q\nwant %q", got, exp)
	}
	var prof []string
	for _, c := range profileChecks() {
		prof = append(prof, c.ID)
	}
	if want := IDs()[len(IDs())-13 : len(IDs())-8]; !slices.Equal(prof, want) || len(baseChecks()) != len(IDs())-13 {
		t.Errorf("profile checks %q, want the five before the window checks %q", prof, want)
	}
}

// TestRegisterRejects: a check registered twice (by ID or by order), or
// without an ID, title, run or an order inside a section, panics at init,
// as workload.Register does, and leaves the registry unchanged.
func TestRegisterRejects(t *testing.T) {
	run := func(ctx context.Context, e *env) result { return result{} }
	ok := Check{ID: "new-check", Title: "New", order: secMaintenance + 90, run: run}
	bad := map[string]func(c *Check){
		"duplicate id":    func(c *Check) { c.ID = "jit" },
		"duplicate order": func(c *Check) { c.order = secHost + 10 },
		"no id":           func(c *Check) { c.ID = "" },
		"no title":        func(c *Check) { c.Title = "" },
		"no run":          func(c *Check) { c.run = nil },
		"no order":        func(c *Check) { c.order = 0 },
		"section order":   func(c *Check) { c.order = secCatalog },
		"past the end":    func(c *Check) { c.order = secEnd + 10 },
	}
	before := IDs()
	for name, change := range bad {
		c := ok
		change(&c)
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: register did not panic", name)
				}
			}()
			register(c)
		}()
	}
	if after := IDs(); !slices.Equal(before, after) {
		t.Errorf("registry changed by rejected checks: %q", after)
	}
}
