package experiment

import (
	"reflect"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/compare"
)

func keys(t *testing.T, ss ...string) []compare.Key {
	t.Helper()
	var out []compare.Key
	for _, s := range ss {
		k, err := compare.ParseKey(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, k)
	}
	return out
}

// The registrations declare each remedy's primary rows; a variant's are
// the union in remedy order; none declared (the A/A variant): the
// integral APDEX; --primary replaces them.
func TestPrimaries(t *testing.T) {
	for spec, want := range map[string]struct {
		rows   []string
		source string
	}{
		"t=tmpfs-temp-tablespace":                    {[]string{"integral:apdex", "temp_table_storm:p95_ms", "temp_table_storm:apdex", "cpu file system:share_pct:lower"}, "tmpfs-temp-tablespace"},
		"p=rewrite-proxy":                            {[]string{"or_subquery_report:p95_ms", "or_subquery_report:apdex"}, "rewrite-proxy"},
		"s=settings:../../examples/erp-profile.conf": {[]string{"integral:apdex"}, "settings"},
		"l=temp-style:lsfusion":                      {[]string{"integral:apdex"}, "temp-style"},
		"b=rewrite-proxy,tmpfs-temp-tablespace": {[]string{"or_subquery_report:p95_ms", "or_subquery_report:apdex", "integral:apdex",
			"temp_table_storm:p95_ms", "temp_table_storm:apdex", "cpu file system:share_pct:lower"}, "rewrite-proxy, tmpfs-temp-tablespace"},
		"c=temp-style:1c,tmpfs-temp-tablespace": {[]string{"integral:apdex", "temp_table_storm:p95_ms", "temp_table_storm:apdex", "cpu file system:share_pct:lower"}, "temp-style, tmpfs-temp-tablespace"},
	} {
		v, err := ParseVariant(spec)
		if err != nil {
			t.Fatal(err)
		}
		got, src, err := Primaries(v)
		if err != nil || !reflect.DeepEqual(got, keys(t, want.rows...)) || src != want.source {
			t.Errorf("%s: %v by %q (%v), want %v by %q", spec, got, src, err, want.rows, want.source)
		}
	}
	got, src, err := Primaries(Variant{Name: AAName})
	if err != nil || !reflect.DeepEqual(got, []compare.Key{compare.IntegralApdex}) || !strings.HasPrefix(src, "default") {
		t.Errorf("no remedies: %v by %q (%v)", got, src, err)
	}
	v, _ := ParseVariant("t=tmpfs-temp-tablespace")
	v.Primary = keys(t, "temp_table_storm:p95_ms")
	if got, src, _ := Primaries(v); !reflect.DeepEqual(got, v.Primary) || src != DeclaredBy {
		t.Errorf("override: %v by %q", got, src)
	}
}

// --primary: "ROW" for every variant (and the A/A comparisons),
// "VARIANT=ROW" for one; unknown variants and bad rows are usage errors.
func TestSetPrimary(t *testing.T) {
	a, _ := ParseVariant("a=tmpfs-temp-tablespace")
	b, _ := ParseVariant("b=rewrite-proxy")
	vs, all, err := SetPrimary([]Variant{a, b}, []string{"integral", "b=or_subquery_report:p95_ms"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(all, keys(t, "integral")) || !reflect.DeepEqual(vs[0].Primary, keys(t, "integral")) ||
		!reflect.DeepEqual(vs[1].Primary, keys(t, "integral", "or_subquery_report:p95_ms")) || a.Primary != nil {
		t.Fatalf("%+v %v", vs, all)
	}
	vs, all, err = SetPrimary([]Variant{a}, nil)
	if err != nil || vs[0].Primary != nil || all != nil {
		t.Fatalf("no --primary: %+v %v %v", vs, all, err)
	}
	for _, bad := range []string{"c=integral", "a=", "a=integral:", ":apdex"} {
		if _, _, err := SetPrimary([]Variant{a, b}, []string{bad}); err == nil || !strings.HasPrefix(err.Error(), "--primary ") {
			t.Errorf("--primary %q: %v", bad, err)
		}
	}
}
