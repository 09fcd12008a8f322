package runenv

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/hostfacts"
)

// ReadHost is hostfacts' Host of the same roots (its tests are there).
func TestReadHostIsHostfacts(t *testing.T) {
	proc, sys := "../hostfacts/testdata/golden/proc", "../hostfacts/testdata/golden/sys"
	got, err := ReadHost(proc, sys)
	if err != nil {
		t.Fatal(err)
	}
	f, err := hostfacts.New(proc, sys)
	if err != nil {
		t.Fatal(err)
	}
	want, err := f.Host()
	if err != nil || got != want || got.MemTotalBytes != 16318600*1024 {
		t.Fatalf("ReadHost = %+v, hostfacts = %+v (%v)", got, want, err)
	}
	if _, err := ReadHost(filepath.Join(t.TempDir(), "absent"), "/sys"); err == nil || !strings.HasPrefix(err.Error(), "read host: proc tree") {
		t.Errorf("absent proc root: err = %v", err)
	}
}
