package hostfacts

import (
	"os"
	"testing"
)

// Executable of this test process is os.Executable's path; a process
// that does not exist is an error.
func TestExecutable(t *testing.T) {
	if _, err := os.Stat(DefaultProcRoot + "/self/exe"); err != nil {
		t.Skipf("no %s on this host: %v", DefaultProcRoot, err)
	}
	f, err := New("", "")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.Executable(os.Getpid()); err != nil || got != want {
		t.Errorf("Executable(self) = %q, %v; want %q", got, err, want)
	}
	if _, err := f.Executable(1 << 23); err == nil {
		t.Error("Executable of a PID above PID_MAX_LIMIT: no error")
	}
}
