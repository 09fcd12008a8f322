package rewrite

import (
	"errors"
	"strings"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

func TestMaxParam(t *testing.T) {
	for sql, want := range map[string]int{
		"SELECT 1":                          0,
		"SELECT $1, $3 FROM t WHERE a = $2": 3,
		"SELECT '$9', $2 -- $7\n":           2,
		"SELECT $12 /* $40 */ + $1":         12,
	} {
		if got, err := MaxParam(sql); err != nil || got != want {
			t.Errorf("MaxParam(%q) = %d, %v; want %d", sql, got, err, want)
		}
	}
	var le *LimitError
	if _, err := MaxParam("SELECT " + strings.Repeat("1", MaxBytes)); !errors.As(err, &le) || !le.TooLarge {
		t.Errorf("MaxParam of a text over MaxBytes: %v, want a *LimitError TooLarge", err)
	}
}

func TestCheckedFingerprint(t *testing.T) {
	c, err := Check("SELECT a FROM t WHERE b = 42", 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := pg_query.FingerprintToUInt64("SELECT a FROM t WHERE b = $1")
	if got != want || got == 0 {
		t.Errorf("Checked.Fingerprint = %x, want %x (constants and parameters fingerprint alike)", got, want)
	}
}
