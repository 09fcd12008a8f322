package k8s

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml")

// testSpec is the golden rendering's spec: fixed run id and start time.
func testSpec() Spec {
	return Spec{
		Name: "erp-load", Namespace: "bench", Image: "registry.example/erplab:0.1.0", Agents: 4,
		RunID:   "erp-load-20261201T160000Z-1a2b",
		StartAt: time.Date(2026, 12, 1, 16, 0, 0, 0, time.UTC),
		DSN:     "host=db.bench.svc dbname=erp user=bench sslmode=require", PasswordSecret: "erp-db",
		RunArgs:     []string{"--workload", "erp", "--users", "30000", "--duration", "10m", "--think", "exp:3s", "--mix", "price=$5"},
		ApdexMin:    "0.85",
		MergeWait:   30 * time.Minute,
		ResultsSize: "1Gi",
		Resources:   Resources{CPU: "2", Memory: "512Mi", MemoryLimit: "1Gi"},
		Setup:       &Setup{Workload: "erp", Scale: "0.1"},
	}
}

func TestRenderGolden(t *testing.T) {
	out, err := Render(testSpec())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "render.golden.yaml")
	if *update {
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(want) {
		t.Errorf("rendering differs from %s (go test ./internal/k8s -run Golden -update rewrites it):\n%s", path, out)
	}
}

func TestRenderDecodesStrictlyWithInvariants(t *testing.T) {
	s := testSpec()
	out, err := Render(s)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.ConfigMaps) != 1 || len(m.Claims) != 1 || len(m.Jobs) != 3 {
		t.Fatalf("got %d ConfigMaps, %d claims, %d Jobs; want 1, 1, 3", len(m.ConfigMaps), len(m.Claims), len(m.Jobs))
	}
	cm := m.ConfigMaps[0]
	if cm.Data["run-id"] != s.RunID || cm.Data["start-at"] != "2026-12-01T16:00:00Z" || cm.Data["agents"] != "4" || cm.Data["dsn"] != s.DSN {
		t.Errorf("ConfigMap data = %v", cm.Data)
	}
	if got, want := cm.Data["run-flags"], "--workload erp --users 30000 --duration 10m --think exp:3s --mix 'price=$5'"; got != want {
		t.Errorf("run-flags = %q, want %q", got, want)
	}
	if c := m.Claims[0]; !slices.Equal(c.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}) ||
		c.Spec.Resources.Requests.Storage().String() != "1Gi" {
		t.Errorf("claim spec = %+v", c.Spec)
	}

	agents := m.Job("erp-load-agents")
	if agents == nil {
		t.Fatal("no Job erp-load-agents")
	}
	if err := m.Check(s.Agents); err != nil {
		t.Errorf("invariants: %v", err)
	}
	c := agents.Spec.Template.Spec.Containers[0]
	args, unresolved := Expand(c, map[string]string{IndexEnv: "2", RunIDEnv: s.RunID, StartAtEnv: "2026-12-01T16:00:00Z", DSNEnv: s.DSN})
	if len(unresolved) > 0 {
		t.Errorf("args reference undeclared env vars %v", unresolved)
	}
	want := []string{"run", "--segment", "auto/4", "--run-id", s.RunID, "--start-at", "2026-12-01T16:00:00Z",
		"--out", "/results/", "--dsn", s.DSN}
	want = append(want, s.RunArgs...) // "price=$5" comes back unexpanded
	if !slices.Equal(args, want) {
		t.Errorf("expanded agent args =\n %q\nwant\n %q", args, want)
	}
	if v := claimOf(agents); v != "erp-load-results" {
		t.Errorf("agents mount claim %q", v)
	}

	merge := m.Job("erp-load-merge")
	if merge == nil {
		t.Fatal("no Job erp-load-merge")
	}
	wantMerge := []string{"merge", "--wait", "30m", "--dir", "/results", "--run-id", "$(ERPLAB_RUN_ID)", "-o", "/results/run.json", "--apdex-min", "0.85"}
	if got := merge.Spec.Template.Spec.Containers[0].Args; !slices.Equal(got, wantMerge) {
		t.Errorf("merge args = %q, want %q", got, wantMerge)
	}
	if v := claimOf(merge); v != "erp-load-results" {
		t.Errorf("merge mounts claim %q", v)
	}
	setup := m.Job("erp-load-setup")
	if setup == nil {
		t.Fatal("no Job erp-load-setup")
	}
	got, unresolved := Expand(setup.Spec.Template.Spec.Containers[0], map[string]string{DSNEnv: s.DSN})
	if wantSetup := []string{"init", "--dsn", s.DSN, "--workload", "erp", "--scale", "0.1"}; !slices.Equal(got, wantSetup) || len(unresolved) > 0 {
		t.Errorf("setup args = %q (unresolved %v), want %q", got, unresolved, wantSetup)
	}
	for _, j := range []*batchv1.Job{agents, setup} {
		if !hasSecretPassword(j, s.PasswordSecret) {
			t.Errorf("%s has no PGPASSWORD from Secret %s key password", j.Name, s.PasswordSecret)
		}
	}
	if strings.Contains(string(out), "PGPASSWORD\n    value") || strings.Contains(string(out), "password=") {
		t.Errorf("the rendering holds a password value")
	}
}

func hasSecretPassword(j *batchv1.Job, secret string) bool {
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "PGPASSWORD" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil &&
			e.ValueFrom.SecretKeyRef.Name == secret && e.ValueFrom.SecretKeyRef.Key == "password" {
			return true
		}
	}
	return false
}

// TestCheckCatchesViolations: Check is what the tests rely on, so it must
// fail on each broken invariant.
func TestCheckCatchesViolations(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*batchv1.Job)
		want string
	}{
		{"completions", func(j *batchv1.Job) { *j.Spec.Completions = 3 }, "completions 3"},
		{"not indexed", func(j *batchv1.Job) { m := batchv1.NonIndexedCompletion; j.Spec.CompletionMode = &m }, "Indexed"},
		{"backoff", func(j *batchv1.Job) { *j.Spec.BackoffLimitPerIndex = 2 }, "backoffLimitPerIndex 2"},
		{"no policy", func(j *batchv1.Job) { j.Spec.PodFailurePolicy = nil }, "podFailurePolicy"},
		{"root", func(j *batchv1.Job) {
			z := int64(0)
			j.Spec.Template.Spec.Containers[0].SecurityContext.RunAsUser = &z
		}, "runAsUser"},
		{"writable root", func(j *batchv1.Job) {
			f := false
			j.Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem = &f
		}, "read-only"},
		{"index undeclared", func(j *batchv1.Job) {
			c := &j.Spec.Template.Spec.Containers[0]
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == IndexEnv })
		}, "JOB_COMPLETION_INDEX not declared in env"}, // --segment auto/N reads it
		{"run id undeclared", func(j *batchv1.Job) {
			c := &j.Spec.Template.Spec.Containers[0]
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == RunIDEnv })
		}, "undeclared env vars [ERPLAB_RUN_ID]"},
		{"password value", func(j *batchv1.Job) {
			c := &j.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "PGPASSWORD", Value: "hunter2"})
		}, "PGPASSWORD not from a secretKeyRef"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Render(testSpec())
			if err != nil {
				t.Fatal(err)
			}
			m, err := Decode(out)
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(m.Job("erp-load-agents"))
			if err := m.Check(4); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func claimOf(j *batchv1.Job) string {
	for _, v := range j.Spec.Template.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return ""
}

func TestRenderExistingClaimNoSetup(t *testing.T) {
	s := testSpec()
	s.ResultsClaim, s.ResultsSize, s.Setup, s.PasswordSecret, s.ApdexMin = "shared-results", "", nil, "", ""
	out, err := Render(s)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Claims) != 0 || len(m.Jobs) != 2 || m.Job("erp-load-setup") != nil {
		t.Fatalf("got %d claims, %d Jobs; want 0 claims, agents and merge only", len(m.Claims), len(m.Jobs))
	}
	for _, j := range m.Jobs {
		if v := claimOf(j); v != "shared-results" {
			t.Errorf("%s mounts claim %q, want shared-results", j.Name, v)
		}
		for _, e := range j.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "PGPASSWORD" {
				t.Errorf("%s has PGPASSWORD without --password-secret", j.Name)
			}
		}
	}
	if args := m.Job("erp-load-merge").Spec.Template.Spec.Containers[0].Args; slices.Contains(args, "--apdex-min") {
		t.Errorf("merge args %q hold --apdex-min though none was given", args)
	}
}

func TestRenderRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Spec)
		want string
	}{
		{"password in DSN", func(s *Spec) { s.DSN = "host=db user=u password=hunter2" }, "holds a password"},
		{"password in URI", func(s *Spec) { s.DSN = "postgres://u:hunter2@db/erp" }, "holds a password"},
		{"no DSN", func(s *Spec) { s.DSN = "" }, "--dsn"},
		{"zero agents", func(s *Spec) { s.Agents = 0 }, "agents must be"},
		{"bad name", func(s *Spec) { s.Name = "Erp_Load" }, "name \"Erp_Load\""},
		{"long name", func(s *Spec) { s.Name = strings.Repeat("a", 60) }, "-agents"},
		{"bad cpu", func(s *Spec) { s.Resources.CPU = "two" }, "--cpu \"two\""},
		{"request above limit", func(s *Spec) { s.Resources.Memory = "2Gi" }, "above its limit"},
		{"bad size", func(s *Spec) { s.ResultsSize = "lots" }, "--results-size"},
		{"no results", func(s *Spec) { s.ResultsSize = "" }, "results"},
		{"no image", func(s *Spec) { s.Image = "" }, "image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpec()
			tc.edit(&s)
			_, err := Render(s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Render error = %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q shows the password or is not one line", err)
			}
		})
	}
}

func TestDecodeRefusesUnknownField(t *testing.T) {
	out, err := Render(testSpec())
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(out), "completionMode: Indexed", "completionMode: Indexed\n  completionsPerIndex: 2", 1)
	if bad == string(out) {
		t.Fatal("the rendering has no 'completionMode: Indexed' line to edit")
	}
	if _, err := Decode([]byte(bad)); err == nil || !strings.Contains(err.Error(), "completionsPerIndex") {
		t.Fatalf("Decode of a Job with an unknown field: error %v, want one naming completionsPerIndex", err)
	}
	if _, err := Decode([]byte("apiVersion: apps/v1\nkind: Deployment\n")); err == nil {
		t.Fatal("Decode took a Deployment")
	}
}

func TestExpand(t *testing.T) {
	c := corev1.Container{
		Env:  []corev1.EnvVar{{Name: "A", Value: "x"}, {Name: "B", ValueFrom: &corev1.EnvVarSource{}}},
		Args: []string{"$(A)", "$$(A)", "$(B)-$(C)", "a$b", "$(", "$$$$", "end$"},
	}
	got, unresolved := Expand(c, nil)
	want := []string{"x", "$(A)", "<B>-$(C)", "a$b", "$(", "$$", "end$"}
	if !slices.Equal(got, want) || !slices.Equal(unresolved, []string{"C"}) {
		t.Errorf("Expand = %q, unresolved %v; want %q, [C]", got, unresolved, want)
	}
}

func TestShellQuote(t *testing.T) {
	for a, want := range map[string]string{"10m": "10m", "": "''", "a b": "'a b'", "it's": `'it'\''s'`, "host=db user=u": "'host=db user=u'"} {
		if got := shellQuote(a); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", a, got, want)
		}
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{30 * time.Minute: "30m", time.Hour: "1h", 90 * time.Minute: "1h30m", 45 * time.Second: "45s", 61 * time.Second: "1m1s"} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%s) = %q, want %q", d, got, want)
		}
	}
}
