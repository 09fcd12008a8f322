package pgbench_test

import (
	"testing"

	"github.com/erplab/erplab/internal/pgbench"
	"github.com/erplab/erplab/internal/pgbench/script"
)

// A script's key operation name: the built-in's name, the file's base
// name without its extension, "stdin" for -f - (not "-").
func TestOperationName(t *testing.T) {
	sel, err := script.Builtin("select-only")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s    *script.Script
		want string
	}{
		{sel, "select-only"},
		{parsed(t, "/tmp/dir/my.sql"), "my"},
		{parsed(t, "-"), "stdin"},
	} {
		if got, _ := pgbench.OperationName(c.s); got != c.want {
			t.Errorf("script %q: operation %q, want %q", c.s.Name, got, c.want)
		}
	}
}

func parsed(t *testing.T, name string) *script.Script {
	t.Helper()
	s, err := script.Parse(name, "SELECT 1;\n")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
