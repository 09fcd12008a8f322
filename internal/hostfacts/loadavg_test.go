package hostfacts

import "testing"

func TestLoadAverage(t *testing.T) {
	f, err := New("testdata/golden/proc", "testdata/golden/sys")
	if err != nil {
		t.Fatal(err)
	}
	l, err := f.LoadAverage()
	if err != nil || l != 3.25 {
		t.Fatalf("LoadAverage = %v, %v; want 3.25", l, err)
	}
	f, err = New("testdata/malformed/proc", "testdata/malformed/sys")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.LoadAverage(); err == nil {
		t.Fatal("LoadAverage of a tree without loadavg: no error")
	}
}
