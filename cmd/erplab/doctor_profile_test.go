package main

import (
	"strings"
	"testing"
)

// doctor --profile: a negative duration is a usage error; on the idle
// test server the profile is taken (or "cannot profile: REASON" said in
// one line) and the profile check reports what it needs instead of
// judging an idle server.
func TestDoctorProfileFlag(t *testing.T) {
	dsn := srv.NewDatabase(t)
	if code, out := exitCode(t, erplab(t, t.TempDir(), "doctor", "--dsn", dsn, "--profile", "-1s")); code != exitUsage || !strings.Contains(out, "--profile must be >= 0") {
		t.Errorf("--profile -1s: exit %d\n%s", code, out)
	}
	code, out := exitCode(t, erplab(t, t.TempDir(), "doctor", "--dsn", dsn, "--only", "profile-file-system", "--sample", "0", "--profile", "1s"))
	if code != 0 {
		t.Errorf("exit %d, want 0\n%s", code, out)
	}
	took := strings.Contains(out, "profiling the server's processes")
	var cannot string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "cannot profile: ") {
			cannot = l
		}
	}
	switch {
	case took == (cannot != ""):
		t.Errorf("want either the profiling line or one 'cannot profile' line:\n%s", out)
	case took && !strings.Contains(out, "needs a profile with >= 100 server samples"):
		t.Errorf("idle server: profile-file-system should say it needs more samples:\n%s", out)
	case cannot != "" && !strings.Contains(out, "needs a CPU profile, which could not be taken: "+strings.TrimPrefix(cannot, "cannot profile: ")):
		t.Errorf("the finding does not repeat the reason %q:\n%s", cannot, out)
	}
}
