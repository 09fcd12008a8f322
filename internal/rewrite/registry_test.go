package rewrite

import (
	"context"
	"slices"
	"testing"
)

// namedRule is a rule that only has a name, for TestRegisterRejects.
type namedRule string

func (r namedRule) name() string { return string(r) }
func (namedRule) apply(context.Context, *statement) ([]edit, []Firing, []Veto, error) {
	return nil, nil, nil, nil
}

// TestRegisterRejects: every rule registers once from its file's init (the
// list is what Rules says); a rule without a name, or a name registered
// twice, panics at init as workload.Register does and leaves the rules
// unchanged.
func TestRegisterRejects(t *testing.T) {
	if got := Rules(); !slices.Equal(got, []string{RuleORAnyArray}) {
		t.Fatalf("rules %q, want [%s]", got, RuleORAnyArray)
	}
	for _, r := range []rule{namedRule(""), namedRule(RuleORAnyArray), orAnyArray{}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("register(%q) did not panic", r.name())
				}
			}()
			register(r)
		}()
	}
	if got := Rules(); !slices.Equal(got, []string{RuleORAnyArray}) {
		t.Errorf("rules after rejected registrations %q", got)
	}
}
