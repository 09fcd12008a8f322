package rewrite

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// update rewrites the golden files of testdata/cases from what Rewrite
// does now: go test ./internal/rewrite -run TestGoldenCases -update.
var update = flag.Bool("update", false, "rewrite testdata/cases/*/{expected.sql,rules.txt,explain.txt,unchanged.txt} from the current rules")

// The golden rewrite cases: every directory of testdata/cases holds
// input.sql (one or more statements) and either expected.sql, the exact
// rewritten text, with rules.txt, the rule of each firing (one line per
// firing, in order) and, if present, explain.txt, the exact Result.Explain
// (positions as line and column, each arm's operator as written), or
// unchanged.txt, why the text stays as it is: a part of
// Result.Explain (a veto's reason, or "no rule matched"). One trailing
// newline of each file is not part of its content. Rewrite runs without a
// catalog; cases that need catalog facts are in TestCatalogPreconditions.
func TestGoldenCases(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "cases", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no golden cases (%v)", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			in := readCase(t, dir, "input.sql")
			r, err := Rewrite(context.Background(), in, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var rules []string
			for _, f := range r.Fired {
				rules = append(rules, f.Rule)
			}
			if *update {
				updateCase(t, dir, r, rules)
			}
			want, hasWant := optionalCase(t, dir, "expected.sql")
			reason, hasReason := optionalCase(t, dir, "unchanged.txt")
			switch {
			case hasWant == hasReason:
				t.Fatalf("%s: want exactly one of expected.sql and unchanged.txt", dir)
			case hasWant:
				if !r.Changed || r.SQL != want {
					t.Fatalf("got %q (%s), want %q", r.SQL, r.Explain(), want)
				}
				if wantRules := strings.Fields(readCase(t, dir, "rules.txt")); !slices.Equal(rules, wantRules) {
					t.Errorf("fired %v, want %v (rules.txt)", rules, wantRules)
				}
				if explain, ok := optionalCase(t, dir, "explain.txt"); ok && r.Explain() != explain {
					t.Errorf("explain %q, want %q (explain.txt)", r.Explain(), explain)
				}
				checkRewritten(t, in, r.SQL)
			default:
				if r.Changed || r.SQL != in {
					t.Fatalf("changed to %q (%s), want it unchanged: %s", r.SQL, r.Explain(), reason)
				}
				if !strings.Contains(r.Explain(), reason) {
					t.Fatalf("explain %q, want it to mention %q (unchanged.txt)", r.Explain(), reason)
				}
				if !strings.Contains(reason, "no rule matched") && len(r.Vetoes) == 0 {
					t.Fatalf("no veto, want one: %s", reason)
				}
			}
		})
	}
}

// updateCase writes the outcome r of a case: expected.sql and rules.txt
// when it changed, else unchanged.txt with its explanation, removing the
// other kind's files. An unchanged.txt whose reason still holds is kept.
func updateCase(t *testing.T, dir string, r Result, rules []string) {
	t.Helper()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(names ...string) {
		for _, n := range names {
			if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
		}
	}
	if r.Changed {
		write("expected.sql", r.SQL)
		write("rules.txt", strings.Join(rules, "\n"))
		write("explain.txt", r.Explain())
		remove("unchanged.txt")
		return
	}
	remove("expected.sql", "rules.txt", "explain.txt")
	if old, ok := optionalCase(t, dir, "unchanged.txt"); ok && strings.Contains(r.Explain(), old) {
		return
	}
	write("unchanged.txt", r.Explain())
}

// readCase reads dir/name without its one trailing newline.
func readCase(t *testing.T, dir, name string) string {
	t.Helper()
	s, ok := optionalCase(t, dir, name)
	if !ok {
		t.Fatalf("%s: no %s", dir, name)
	}
	return s
}

func optionalCase(t *testing.T, dir, name string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(string(b), "\n"), true
}
