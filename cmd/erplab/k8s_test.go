package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/k8s"
)

// renderFile runs `erplab k8s render args... -o FILE` in this process and
// returns the decoded manifests, after Check.
func renderFile(t *testing.T, agents int, args ...string) (k8s.Manifests, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "run.yaml")
	full := append([]string{"k8s", "render", "-o", out}, args...)
	if code := execute(context.Background(), full); code != exitOK {
		t.Fatalf("erplab %s: exit %d", strings.Join(full, " "), code)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	m, err := k8s.Decode(data)
	if err != nil {
		t.Fatalf("strict decode: %v", err)
	}
	if err := m.Check(agents); err != nil {
		t.Fatalf("invariants: %v", err)
	}
	return m, string(data)
}

// parseWith parses args with cmd's own flag set, as the pod's erplab will.
func parseWith(t *testing.T, fs *pflag.FlagSet, args []string) *pflag.FlagSet {
	t.Helper()
	if err := fs.Parse(args); err != nil {
		t.Fatalf("%q do not parse: %v", args, err)
	}
	if fs.NArg() > 0 {
		t.Fatalf("%q leave arguments %q", args, fs.Args())
	}
	return fs
}

func TestK8sRenderAgentsRunWithRunFlags(t *testing.T) {
	// the merge starts at once: the start must lie within --merge-wait
	startAt := time.Now().Add(10 * time.Minute).UTC().Truncate(time.Second).Format(time.RFC3339)
	m, yaml := renderFile(t, 3, "--agents", "3", "--image", "erplab:test", "--name", "t1",
		"--start-at", startAt, "--run-id", "t1-run", "--password-secret", "db-pass", "--setup",
		"--", "--dsn", "host=db.svc dbname=erp user=bench", "--workload", "erp", "-s", "0.2",
		"--users", "300", "--apdex-min", "0.9", "--think", "exp:3s", "--mix", "document_form=2,stock_balance_report=1",
		"--metrics-addr", "$(HOST):9187", "--force") // a '$' reaches the agents unexpanded
	agents := m.Job("t1-agents")
	if agents == nil {
		t.Fatal("no Job t1-agents")
	}
	c := agents.Spec.Template.Spec.Containers[0]
	args, unresolved := k8s.Expand(c, map[string]string{k8s.IndexEnv: "1", k8s.RunIDEnv: "t1-run",
		k8s.StartAtEnv: startAt, k8s.DSNEnv: "host=db.svc dbname=erp user=bench"})
	if len(unresolved) > 0 || len(args) == 0 || args[0] != "run" {
		t.Fatalf("agent args %q (unresolved %v)", args, unresolved)
	}
	args = args[1:]
	run := newRunCmd().Flags()
	if run.Lookup("segment") == nil || run.Lookup("run-id") == nil || run.Lookup("start-at") == nil {
		t.Fatal("erplab run lacks --segment, --run-id or --start-at, which the agents' args use")
	}
	parseWith(t, run, args)
	for flag, want := range map[string]string{
		"out": "/results/", "dsn": "host=db.svc dbname=erp user=bench", "workload": "erp",
		"scale": "0.2", "users": "300", "think": "exp:3s", "mix": "document_form=2,stock_balance_report=1", "metrics-addr": "$(HOST):9187", "force": "true",
	} {
		if got := run.Lookup(flag).Value.String(); got != want {
			t.Errorf("agents' --%s = %q, want %q", flag, got, want)
		}
	}
	if run.Changed("apdex-min") {
		t.Error("agents got --apdex-min: it belongs to the merge")
	}
	if run.Lookup("segment") != nil {
		for flag, want := range map[string]string{"segment": "auto/3", "run-id": "t1-run", "start-at": startAt} {
			if got := run.Lookup(flag).Value.String(); got != want {
				t.Errorf("agents' --%s = %q, want %q", flag, got, want)
			}
		}
	}

	setup := m.Job("t1-setup")
	if setup == nil {
		t.Fatal("no Job t1-setup")
	}
	sargs, _ := k8s.Expand(setup.Spec.Template.Spec.Containers[0], map[string]string{k8s.DSNEnv: "host=db.svc dbname=erp user=bench"})
	if sargs[0] != "init" {
		t.Fatalf("setup args %q", sargs)
	}
	initFlags := parseWith(t, newInitCmd().Flags(), sargs[1:])
	for flag, want := range map[string]string{"workload": "erp", "scale": "0.2", "force": "true", "dsn": "host=db.svc dbname=erp user=bench"} {
		if got := initFlags.Lookup(flag).Value.String(); got != want {
			t.Errorf("setup's --%s = %q, want %q", flag, got, want)
		}
	}

	merge := m.Job("t1-merge")
	if merge == nil {
		t.Fatal("no Job t1-merge")
	}
	margs, unresolved := k8s.Expand(merge.Spec.Template.Spec.Containers[0], map[string]string{k8s.RunIDEnv: "t1-run"})
	if want := "merge --wait 30m --dir /results --run-id t1-run -o /results/run.json --apdex-min 0.9"; len(unresolved) > 0 || strings.Join(margs, " ") != want {
		t.Errorf("merge args %q (unresolved %v), want %q", margs, unresolved, want)
	}
	mc, _, err := newRoot().Find([]string{"merge"})
	if err != nil || mc.Name() != "merge" {
		t.Fatal("erplab has no merge command")
	}
	parseWith(t, mc.Flags(), margs[1:])
	if strings.Contains(yaml, "password=") {
		t.Error("the YAML holds a password")
	}
}

// The render reads no password from anywhere: a PGPASSWORD in its own
// environment never reaches the YAML.
func TestK8sRenderNoPasswordFromEnv(t *testing.T) {
	const secret = "s3cr3t-sentinel"
	t.Setenv("PGPASSWORD", secret)
	_, yaml := renderFile(t, 2, "--agents", "2", "--image", "erplab:test", "--results-claim", "shared",
		"--", "--dsn", "postgres://bench@db/erp")
	if strings.Contains(yaml, secret) {
		t.Fatal("the YAML holds PGPASSWORD's value")
	}
	if strings.Contains(yaml, "PGPASSWORD") {
		t.Error("PGPASSWORD rendered without --password-secret")
	}
}

func TestK8sRenderUsageErrors(t *testing.T) {
	img := []string{"k8s", "render", "--agents", "2", "--image", "erplab:test"}
	with := func(extra ...string) []string { return append(append([]string(nil), img...), extra...) }
	for _, args := range [][]string{
		{"k8s", "render", "--image", "x", "--", "--dsn", "host=db"},  // no --agents
		{"k8s", "render", "--agents", "2", "--", "--dsn", "host=db"}, // no --image
		with("--", "--users", "10"),                                  // no --dsn
		with("--", "--dsn", "host=db", "--frobnicate"),               // unknown run flag
		with("--", "--dsn", "host=db", "--users", "many"),            // bad run flag value
		with("--", "--dsn", "host=db", "--out", "x.json"),            // owned by the render
		with("--", "--dsn", "host=db", "--keep"),                     // throwaway server only
		with("--", "--dsn", "host=db", "extra"),                      // a positional argument
		with("--dsn", "host=db"),                                     // run flag before --
		with("--start-at", "tomorrow", "--", "--dsn", "host=db"),     // bad time
		with("--start-at", "2001-01-01T00:00:00Z", "--", "--dsn", "host=db"),
		with("--start-at", "2099-01-01T00:00:00Z", "--start-delay", "1m", "--", "--dsn", "host=db"),
		with("--results-claim", "c", "--results-size", "2Gi", "--", "--dsn", "host=db"),
		with("--cpu", "lots", "--", "--dsn", "host=db"),
		with("--name", "Bad_Name", "--", "--dsn", "host=db"),
		with("--", "--dsn", "host=db user=u password=hunter2"),
		with("--", "--dsn", "postgres://u:hunter2@db/erp"),
		{"k8s"},
	} {
		checkUsageError(t, args)
	}
	// the refusal of a password never shows it
	cmd := erplab(t, t.TempDir(), with("--", "--dsn", "host=db password=hunter2")...)
	out, _ := cmd.CombinedOutput()
	if strings.Contains(string(out), "hunter2") || !strings.Contains(string(out), "--password-secret") {
		t.Errorf("refusal of a password: %q", out)
	}
}

func TestWithoutFlags(t *testing.T) {
	fs := newRunCmd().Flags()
	args := []string{"--dsn", "host=a", "-nS", "-s", "2", "--apdex-min=0.5", "--mix", "--dsn", "-P5", "--force", "--users", "3"}
	got := strings.Join(withoutFlags(fs, args, "dsn", "apdex-min"), " ")
	// "--mix --dsn": --dsn is --mix's value and stays.
	if want := "-nS -s 2 --mix --dsn -P5 --force --users 3"; got != want {
		t.Errorf("withoutFlags = %q, want %q", got, want)
	}
}

// The render refuses, in one line with exit 2, what every agent's erplab
// run, the set-up's erplab init or the merge would refuse, and a merge
// that would give up before the run ends.
func TestK8sRenderRefusesWhatThePodsWould(t *testing.T) {
	base := []string{"k8s", "render", "--agents", "3", "--image", "erplab:test"}
	for _, c := range []struct {
		want string // in the error
		args []string
	}{
		{`unknown workload "nosuch"`, []string{"--", "--dsn", "host=db", "--workload", "nosuch"}},
		{"--users", []string{"--", "--dsn", "host=db", "--users", "0"}},
		{"duration", []string{"--", "--dsn", "host=db", "--duration", "-5s"}},
		{"--think", []string{"--", "--dsn", "host=db", "--think", "bogus"}},
		{"--scale", []string{"--", "--dsn", "host=db", "--scale", "-1"}},
		{"nosuch", []string{"--", "--dsn", "host=db", "--mix", "nosuch=1"}},
		{"--temp-style", []string{"--", "--dsn", "host=db", "--temp-style", "lsfusion"}},
		{"--apdex-min must be between 0 and 1", []string{"--", "--dsn", "host=db", "--apdex-min", "2"}},
		{`--run-id "a/b c"`, []string{"--run-id", "a/b c", "--", "--dsn", "host=db"}},
		{"segment 3/3 gets none of the profile's 2 VUs", []string{"--", "--dsn", "host=db", "--users", "2"}},
		{"segment 3/3 gets none of the 2 pool connections", []string{"--", "--dsn", "host=db", "--users", "30", "--connections", "2"}},
		{`--setup: init: workload "smoke" has no separate init`, []string{"--setup", "--", "--dsn", "host=db", "--workload", "smoke"}},
		{"give --merge-wait 52m10s or more", []string{"--start-delay", "20m", "--merge-wait", "5m", "--", "--dsn", "host=db", "--duration", "30m"}},
	} {
		args := append(append([]string(nil), base...), c.args...)
		checkUsageError(t, args)
		out, err := erplab(t, t.TempDir(), args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !strings.Contains(string(out), c.want) {
			t.Errorf("%q: %v, output %q; want it to say %q", c.args, err, out, c.want)
		}
	}
	// the edges of the refusals render: 3 VUs and 3 connections over 3
	// agents, the shortest --merge-wait, init of a workload that has one
	renderFile(t, 3, append(base[2:], "--start-delay", "20m", "--merge-wait", "52m10s", "--setup",
		"--", "--dsn", "host=db", "--workload", "erp", "--users", "3", "--connections", "3", "--duration", "30m")...)
}
