package hostfacts

import (
	"errors"
	"io/fs"
	"os"
	"testing"
)

func TestLiveProcStat(t *testing.T) {
	if _, err := os.Stat(DefaultProcRoot + "/self/stat"); err != nil {
		t.Skipf("no %s on this host: %v", DefaultProcRoot, err)
	}
	st, err := LiveProcStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.PID != os.Getpid() || st.Starttime == 0 {
		t.Errorf("LiveProcStat(self) = pid %d, start %d; want pid %d, a start time", st.PID, st.Starttime, os.Getpid())
	}
	// PID_MAX_LIMIT is 2^22: no process has a larger PID.
	if _, err := LiveProcStat(1 << 23); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LiveProcStat of a PID above PID_MAX_LIMIT: %v, want fs.ErrNotExist", err)
	}
}
