package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/capacity"
	"github.com/erplab/erplab/internal/exitcode"
)

// runCapacity runs `erplab capacity args...` and returns its output and error.
func runCapacity(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newCapacityCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// TestCapacityVariantWithEnvironment: --variant with a PG* environment
// names the environment, not a --dsn the user did not give.
func TestCapacityVariantWithEnvironment(t *testing.T) {
	t.Setenv("PGHOST", "/nowhere")
	_, err := runCapacity(t, "--variant", "x=rewrite-proxy")
	if err == nil || exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "drop the PG* environment (PGHOST, PGPORT ...)") {
		t.Fatalf("err %v (code %d)", err, exitcode.Of(err))
	}
}

func TestCapacityUsageErrors(t *testing.T) {
	dsnFile := filepath.Join(t.TempDir(), "dsn")
	if err := os.WriteFile(dsnFile, []byte("host=/nowhere\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(t.TempDir(), "ab.json")
	if err := os.WriteFile(existing, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--apdex", "0"}, "--apdex must be in (0, 1]"},
		{[]string{"--apdex", "1.5"}, "--apdex must be in (0, 1]"},
		{[]string{"--start", "200", "--max-users", "100"}, "--start 200 is above --max-users 100"},
		{[]string{"--step", "x1"}, "must grow"},
		{[]string{"--step", "+0"}, "must grow"},
		{[]string{"--step", "2"}, "want xF"},
		{[]string{"--error-rate", "lots"}, "--error-rate"},
		{[]string{"--resolution", "0%"}, "--resolution"},
		{[]string{"--p95", "nosuchop=1s"}, "has no operation"},
		{[]string{"--p95", "item_lookup"}, "OP=DURATION"},
		{[]string{"--p95", "item_lookup=1s", "--p95", "item_lookup=2s"}, "already has the limit 1s"},
		{[]string{"--user-ops-per-hour", "0"}, "--user-ops-per-hour must be > 0"},
		{[]string{"--user-ops-per-hour", "60", "--think", "1s"}, "drop --think"},
		{[]string{"--start", "2.5"}, "whole numbers"},
		{[]string{"--hold", "10s", "--warmup", "10s"}, "covers the whole --hold"},
		{[]string{"--workers", "3"}, "--rate"},
		{[]string{"--bogus"}, "unknown flag"},
		{[]string{"--start", "2", "--max-users", "4", "--require", "10"}, "--require must be > 0 and at most --max-users 4"},
		{[]string{"--require", "-1"}, "--require must be > 0"},
		// A/B of capacity (--variant)
		{[]string{"--variant", "tuned"}, "want NAME=remedy"},
		{[]string{"--variant", "baseline=rewrite-proxy"}, "taken by the baseline"},
		{[]string{"--variant", "x=nosuch"}, "nosuch"},
		{[]string{"--variant", "x=rewrite-proxy", "--variant", "x=rewrite-proxy"}, "given twice"},
		{[]string{"--variant", "x=rewrite-proxy", "--rounds", "0"}, "--rounds must be >= 1"},
		{[]string{"--variant", "x=rewrite-proxy", "--order", "random"}, "--order must be"},
		{[]string{"--variant", "x=rewrite-proxy", "--alpha", "1"}, "--alpha must be in (0, 1)"},
		{[]string{"--variant", "x=rewrite-proxy", "--dsn", "host=/nowhere"}, "--variant needs the embedded server"},
		{[]string{"--variant", "x=rewrite-proxy", "--max-users", "20", "--require", "10"}, "--require applies to a single search"},
		{[]string{"--workload", "smoke", "--variant", "x=temp-style:lsfusion"}, "which --workload smoke does not have"},
		{[]string{"--rounds", "3"}, "--rounds applies to an A/B of capacity (--variant) only"},
		{[]string{"--tmpfs-size", "1G"}, "--tmpfs-size applies to an A/B"},
		// messages that say what the flag takes
		{[]string{"--connections", "-5"}, "--connections must be -1 (min(max VUs, 100)), 0 (one per VU) or a count > 0, got -5"},
		{[]string{"--resolution", "150%"}, "--resolution must be in (0 %, 100 %), got 150 %"},
		{[]string{"--step", "x"}, "xF needs a factor F > 1, e.g. x2"},
		{[]string{"--rate", "--user-ops-per-hour", "60"}, "open model (--rate: arrivals per second) has none of"},
		{[]string{"--variant", "x=rewrite-proxy", "--dsn-file", dsnFile}, "drop --dsn-file"},
		// remedies the runs could not take, refused before the server starts
		{[]string{"--variant", "t=tmpfs-temp-tablespace", "--tmpfs-size", "banana"}, `--variant t: --tmpfs-size "banana" (remedy tmpfs-temp-tablespace)`},
		{[]string{"--variant", "x=rewrite-proxy", "--out", existing}, "capacity A/B file " + existing + " exists"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, err := runCapacity(t, c.args...)
			if err == nil || exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err %v (code %d), want a one-line usage error with %q", err, exitcode.Of(err), c.want)
			}
		})
	}
}

// TestCapacityRequireAndReport runs a one-step search on the test server
// with --require above what it can find (exit 99) and renders the
// document with erplab report.
func TestCapacityRequireAndReport(t *testing.T) {
	dsn := srv.NewDatabase(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "cap.json")
	// A p95 limit no execution can meet makes every step bad: capacity 0,
	// below --require 2 (a --require above --max-users is a usage error:
	// such a search could only say "at least --max-users").
	text, err := runCapacity(t, "--dsn", dsn, "--workload", "smoke", "--start", "2", "--max-users", "2", "--hold", "4s", "--ramp", "0s",
		"--think", "200ms", "--apdex", "0.1", "--p95", "item_lookup=1us", "--require", "2", "--out", out)
	if exitcode.Of(err) != exitcode.Threshold || !strings.Contains(err.Error(), "capacity below 1 user is below --require 2") {
		t.Fatalf("err %v (code %d), want exit 99; output:\n%s", err, exitcode.Of(err), text)
	}
	if !strings.Contains(text, "capacity below 1 user; at 1 user p95 item_lookup") || !strings.Contains(text, "limited by the --p95 target (missed even at 1 user)") {
		t.Fatalf("no verdict line:\n%s", text)
	}
	doc, rerr := capacity.Read(out)
	if rerr != nil || len(doc.Steps) != 2 || doc.Result.Capacity != 0 {
		t.Fatalf("document: %v %+v", rerr, doc)
	}
	html := filepath.Join(dir, "cap.html")
	rep := newReportCmd()
	rep.SetArgs([]string{out, "-o", html})
	rep.SetErr(&bytes.Buffer{})
	if err := rep.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"capacity below 1 user", `id="chart-capacity-apdex"`, `id="chart-capacity-waits"`, "<svg"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestCapacityUnreachableLeavesNothing: a search whose server cannot be
// reached fails with the connection's error and leaves neither its
// document nor its steps directory behind.
func TestCapacityUnreachableLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "cap.json")
	_, err := runCapacity(t, "--workload", "smoke", "--dsn", "host="+filepath.Join(dir, "nosocket")+" port=1 connect_timeout=2", "--start", "1", "--max-users", "2", "--hold", "2s", "--out", out)
	if err == nil {
		t.Fatal("no error")
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 0 {
		names := []string{}
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Fatalf("left behind: %v (error %v)", names, err)
	}
}

// TestABPointsToCapacity: a user looking for an A/B of capacity in ab
// finds erplab capacity --variant in its help and in the one-line error
// of a search flag.
func TestABPointsToCapacity(t *testing.T) {
	out, err := runRoot(t, "ab", "--help")
	if err != nil || !strings.Contains(out, "A/B of capacity") || !strings.Contains(out, "erplab capacity --variant") {
		t.Fatalf("ab --help (%v):\n%s", err, out)
	}
	_, err = runRoot(t, "ab", "--max-users", "16")
	if err == nil || exitcode.Of(err) != exitcode.Usage || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), "unknown flag: --max-users; --max-users is a flag of erplab capacity: an A/B of capacity is erplab capacity --variant") {
		t.Fatalf("err %v (code %d)", err, exitcode.Of(err))
	}
}
