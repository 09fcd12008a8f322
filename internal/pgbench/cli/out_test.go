package cli

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPlaceOf(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "r.json")
	if err := os.WriteFile(file, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		v    string
		want resultsPlace
	}{
		{"", resultsPlace{}},
		{"none", resultsPlace{Off: true}},
		{os.DevNull, resultsPlace{Off: true}},
		{dir, resultsPlace{Dir: dir}},
		{filepath.Join(dir, "new") + "/", resultsPlace{Dir: filepath.Join(dir, "new") + "/"}},
		{filepath.Join(dir, "new"), resultsPlace{File: filepath.Join(dir, "new")}},
		{file, resultsPlace{File: file}},
	} {
		if got := placeOf(c.v); got != c.want {
			t.Errorf("placeOf(%q) = %+v, want %+v", c.v, got, c.want)
		}
	}
}
