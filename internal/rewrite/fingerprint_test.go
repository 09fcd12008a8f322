package rewrite

import (
	"errors"
	"testing"
)

func TestFingerprintBounded(t *testing.T) {
	a, err := Fingerprint("SELECT abalance FROM pgbench_accounts WHERE aid = 17")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Fingerprint("select abalance\n  from pgbench_accounts where aid = $1")
	if err != nil {
		t.Fatal(err)
	}
	if a != b || len(a) != 16 {
		t.Errorf("fingerprints %q and %q: want one 16-digit hash for both", a, b)
	}
	c, _ := Fingerprint("SELECT bbalance FROM pgbench_branches WHERE bid = 1")
	if c == a {
		t.Errorf("another statement has the same fingerprint %q", c)
	}
	if _, err := Fingerprint(deepShapes["plus"](50000)); !errors.Is(err, ErrLimit) {
		t.Errorf("deep statement: %v, want ErrLimit", err)
	}
	var se *SyntaxError
	if _, err := Fingerprint("SELEC 1"); !errors.As(err, &se) {
		t.Errorf("syntax error: %v, want *SyntaxError", err)
	}
}

func TestNormalizeBounded(t *testing.T) {
	got, err := Normalize("UPDATE pgbench_accounts SET abalance = abalance + 5 WHERE aid = 3")
	if err != nil {
		t.Fatal(err)
	}
	if want := "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2"; got != want {
		t.Errorf("Normalize = %q, want %q", got, want)
	}
	if _, err := Normalize(deepShapes["parens"](50000)); !errors.Is(err, ErrLimit) {
		t.Errorf("deep statement: %v, want ErrLimit", err)
	}
}
