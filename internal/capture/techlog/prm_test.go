package techlog

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

func TestParsePrm(t *testing.T) {
	for _, c := range []struct {
		prm    string
		values []string // "<nil>" for NULL
		types  []string
	}{
		{"\np_1: 'a''b'::mvarchar\np_2: 12\np_3: NULL::bytea\np_4: null", []string{"a'b", "12", "<nil>", "<nil>"}, []string{"mvarchar", "", "bytea", ""}},
		{`p_1: '\\x00ff'::bytea`, []string{`\x00ff`}, []string{"bytea"}},
		{`p_1: E'tab\there' p_1x`, nil, nil},
		{`p_1: '\101\x42\u0416\'\q'`, []string{"ABЖ'q"}, []string{""}},
		{"p_1: 'two\nlines'::text\n\np_2: 1.5::numeric(10,2)", []string{"two\nlines", "1.5"}, []string{"text", "numeric(10,2)"}},
		{"", nil, nil},
	} {
		ps, err := parsePrm(c.prm)
		if c.values == nil && c.prm != "" {
			if err == nil {
				t.Errorf("parsePrm(%q) = %v, want an error", c.prm, ps)
			}
			continue
		}
		if err != nil {
			t.Errorf("parsePrm(%q): %v", c.prm, err)
			continue
		}
		var vs, ts []string
		for _, p := range ps {
			v := string(p.value)
			if p.value == nil {
				v = "<nil>"
			}
			vs, ts = append(vs, v), append(ts, p.typ)
		}
		if !reflect.DeepEqual(vs, c.values) || !reflect.DeepEqual(ts, c.types) {
			t.Errorf("parsePrm(%q) = %q %q, want %q %q", c.prm, vs, ts, c.values, c.types)
		}
	}
}

func TestParsePrmErrors(t *testing.T) {
	for prm, want := range map[string]string{
		"p_2: 1":             "0: p_2 out of order: p_1 expected",
		"p_1: 1\np_1: 2":     "7: p_1 out of order: p_2 expected",
		"p_1: 'open":         "5: no closing ' for this value",
		"p_1: 'a'x":          "8: ::type or the end of the line expected after the value",
		"p_1:\np_2: 1":       "4: value expected after p_<n>:",
		"x_1: 1":             "0: p_<n>: expected",
		"p_1: 'a'::\np_2: 1": "8: ::type or the end of the line expected after the value",
	} {
		_, err := parsePrm(prm)
		if err == nil {
			t.Errorf("parsePrm(%q): no error, want %q", prm, want)
			continue
		}
		if got := strconv.Itoa(err.off) + ": " + err.msg; got != want {
			t.Errorf("parsePrm(%q): %q, want %q", prm, got, want)
		}
	}
}

// A bad Prm is reported at its place in the file: the column counts
// characters (Ё, ё: one each), and a quote doubled in the file is two
// of them: the x after p_1: ”ё” is character 80 of its line.
func TestBadPrmColumn(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rphost_1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	text := "\uFEFF00:01.000001-1,DBPOSTGRS,5,t:connectID=1,Usr=Ёж,Sql='SELECT $1',Prm='p_1: ''ё''x',Result=PGRES_TUPLES_OK\n" +
		"00:02.000001-1,DBPOSTGRS,5,t:connectID=1,Sql=\"SELECT 1\",Prm=\"\np_1: 1\np_3: 2\"\n"
	if err := os.WriteFile(filepath.Join(dir, "26031509.log"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	j, err := Open(context.Background(), []string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range j.Summary().Errors {
		got = append(got, e.Error())
	}
	want := []string{
		"rphost_1/26031509.log:1:80: Prm: ::type or the end of the line expected after the value",
		"rphost_1/26031509.log:4:1: Prm: p_3 out of order: p_2 expected",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors = %q, want %q", got, want)
	}
}
