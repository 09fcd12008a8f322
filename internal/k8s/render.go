package k8s

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/erplab/erplab/internal/conninfo"
)

// Fixed names and paths of the rendered manifests.
const (
	ResultsDir     = "/results"               // mount point of the results volume
	MergedFile     = ResultsDir + "/run.json" // the merge Job's output
	AgentContainer = "agent"                  // the agents' container name (podFailurePolicy names it)
	IndexEnv       = "JOB_COMPLETION_INDEX"   // declared in the agents' env
	IndexFieldPath = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
	RunIDEnv       = "ERPLAB_RUN_ID"   // from the ConfigMap key run-id
	StartAtEnv     = "ERPLAB_START_AT" // from the ConfigMap key start-at
	DSNEnv         = "ERPLAB_DSN"      // from the ConfigMap key dsn
	PasswordKey    = "password"        // the key read from Spec.PasswordSecret
	User           = 65532             // the pods' numeric user and group (distroless nonroot)
	RunIDAnnot     = "erplab/run-id"   // annotation on every object
)

// Resources are the containers' resource requests and limits as Kubernetes
// quantities ("500m", "1", "512Mi"); "" leaves one out.
type Resources struct {
	CPU, Memory           string // requests
	CPULimit, MemoryLimit string // limits
}

// Setup asks for the set-up Job: `erplab init` of Workload at Scale (the
// scale as the run flags give it, e.g. "0.1"). Force adds --force.
type Setup struct {
	Workload, Scale string
	Force           bool
}

// Spec is one distributed run to render. Name, Image, Agents, RunID,
// StartAt, DSN and one of ResultsClaim/ResultsSize are required.
type Spec struct {
	Name      string // prefix of every object's name (a DNS-1123 label)
	Namespace string // "" = the namespace kubectl applies to
	Image     string // erplab's image
	Agents    int    // N: agents = segments = the Indexed Job's completions

	RunID   string    // the run id every segment carries
	StartAt time.Time // the start barrier (rendered in UTC, whole seconds)

	// DSN is the server (never with a password: Render refuses one);
	// PasswordSecret, if not "", names a Secret whose key "password" the
	// containers get as PGPASSWORD.
	DSN, PasswordSecret string

	// RunArgs are the agents' run flags, already validated by the caller,
	// without the flags Render sets itself (--segment, --run-id,
	// --start-at, --out, --dsn) and without --apdex-min (ApdexMin).
	RunArgs []string
	// ApdexMin, if not "", is passed to the merge as --apdex-min.
	ApdexMin string
	// MergeWait is the merge's --wait: how long it waits for the segments.
	MergeWait time.Duration

	// ResultsClaim names an existing PersistentVolumeClaim (ReadWriteMany)
	// for /results; else a claim NAME-results of ResultsSize is rendered,
	// of StorageClass if not "".
	ResultsClaim, ResultsSize, StorageClass string

	Resources Resources
	Setup     *Setup // nil: no set-up Job
}

// Render writes the manifests of s as one multi-document YAML (see the
// package doc for what it holds). Errors name the bad field in one line
// and never contain a password.
func Render(s Spec) ([]byte, error) {
	objs, err := Objects(s)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# erplab k8s render: run %s, %d agents, start at %s\n", s.RunID, s.Agents, startAt(s))
	for _, o := range objs {
		doc, err := marshal(o)
		if err != nil {
			return nil, err
		}
		buf.WriteString("---\n")
		buf.Write(doc)
	}
	return buf.Bytes(), nil
}

// marshal is o in YAML without its (empty) status.
func marshal(o any) ([]byte, error) {
	j, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	delete(m, "status")
	out, err := yaml.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	return out, nil
}

// Objects are the typed objects Render writes, in its order: a
// *corev1.ConfigMap, a *corev1.PersistentVolumeClaim (unless ResultsClaim),
// a *batchv1.Job for the set-up (with Setup), the agents' *batchv1.Job
// and the merge's *batchv1.Job.
func Objects(s Spec) ([]any, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	res, err := s.Resources.requirements()
	if err != nil {
		return nil, err
	}
	claim := s.ResultsClaim
	objs := []any{s.configMap()}
	if claim == "" {
		pvc, err := s.claim()
		if err != nil {
			return nil, err
		}
		objs = append(objs, pvc)
		claim = pvc.Name
	}
	if s.Setup != nil {
		objs = append(objs, s.setupJob(res))
	}
	objs = append(objs, s.agentsJob(res, claim), s.mergeJob(claim))
	return objs, nil
}

func (s Spec) validate() error {
	longest := s.Name + "-agents" // also -setup, -merge, -results, -spec: shorter or equal
	if s.Name == "" {
		return errors.New("name must not be empty")
	}
	if errs := validation.IsDNS1123Label(longest); len(errs) > 0 {
		return fmt.Errorf("name %q: %s (the Jobs are named %s and alike)", s.Name, errs[0], longest)
	}
	if s.Namespace != "" {
		if errs := validation.IsDNS1123Label(s.Namespace); len(errs) > 0 {
			return fmt.Errorf("namespace %q: %s", s.Namespace, errs[0])
		}
	}
	if s.Image == "" {
		return errors.New("image must not be empty")
	}
	if s.Agents < 1 || s.Agents > 100000 {
		return fmt.Errorf("agents must be in [1, 100000], got %d", s.Agents)
	}
	if s.RunID == "" {
		return errors.New("run id must not be empty")
	}
	if s.StartAt.IsZero() {
		return errors.New("start time must be set")
	}
	if s.DSN == "" {
		return errors.New("the agents need a server: give --dsn in the run flags")
	}
	if conninfo.HasPassword(s.DSN) {
		return errors.New("--dsn holds a password, which would be written into the manifests: drop it from the DSN and pass it in a Secret (--password-secret)")
	}
	if s.PasswordSecret != "" {
		if errs := validation.IsDNS1123Subdomain(s.PasswordSecret); len(errs) > 0 {
			return fmt.Errorf("password secret %q: %s", s.PasswordSecret, errs[0])
		}
	}
	if s.ResultsClaim != "" {
		if errs := validation.IsDNS1123Subdomain(s.ResultsClaim); len(errs) > 0 {
			return fmt.Errorf("results claim %q: %s", s.ResultsClaim, errs[0])
		}
	} else if s.ResultsSize == "" {
		return errors.New("give a results claim or a results size")
	}
	if s.MergeWait <= 0 {
		return fmt.Errorf("merge wait must be > 0, got %s", s.MergeWait)
	}
	if s.Setup != nil && (s.Setup.Workload == "" || s.Setup.Scale == "") {
		return errors.New("set-up needs a workload and a scale")
	}
	return nil
}

// requirements parses r into Kubernetes resource requirements.
func (r Resources) requirements() (corev1.ResourceRequirements, error) {
	var out corev1.ResourceRequirements
	for _, q := range []struct {
		flag, val string
		list      *corev1.ResourceList
		name      corev1.ResourceName
	}{
		{"cpu", r.CPU, &out.Requests, corev1.ResourceCPU},
		{"memory", r.Memory, &out.Requests, corev1.ResourceMemory},
		{"cpu-limit", r.CPULimit, &out.Limits, corev1.ResourceCPU},
		{"memory-limit", r.MemoryLimit, &out.Limits, corev1.ResourceMemory},
	} {
		if q.val == "" {
			continue
		}
		v, err := resource.ParseQuantity(q.val)
		if err != nil {
			return out, fmt.Errorf("--%s %q: %w", q.flag, q.val, err)
		}
		if v.Sign() <= 0 {
			return out, fmt.Errorf("--%s must be > 0, got %q", q.flag, q.val)
		}
		if *q.list == nil {
			*q.list = corev1.ResourceList{}
		}
		(*q.list)[q.name] = v
	}
	for name, lim := range out.Limits {
		if req, ok := out.Requests[name]; ok && req.Cmp(lim) > 0 {
			return out, fmt.Errorf("the %s request %s is above its limit %s", name, req.String(), lim.String())
		}
	}
	return out, nil
}

func startAt(s Spec) string { return s.StartAt.UTC().Truncate(time.Second).Format(time.RFC3339) }

// meta is the ObjectMeta of the object NAME-suffix of component.
func (s Spec) meta(suffix, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:        s.Name + "-" + suffix,
		Namespace:   s.Namespace,
		Labels:      s.labels(component),
		Annotations: map[string]string{RunIDAnnot: s.RunID},
	}
}

func (s Spec) labels(component string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      "erplab",
		"app.kubernetes.io/instance":  s.Name,
		"app.kubernetes.io/component": component,
	}
}

func (s Spec) configMapName() string { return s.Name + "-spec" }

func (s Spec) configMap() *corev1.ConfigMap {
	quoted := make([]string, len(s.RunArgs))
	for i, a := range s.RunArgs {
		quoted[i] = shellQuote(a)
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: s.meta("spec", "spec"),
		Data: map[string]string{
			"run-id":    s.RunID,
			"start-at":  startAt(s),
			"agents":    strconv.Itoa(s.Agents),
			"dsn":       s.DSN,
			"run-flags": strings.Join(quoted, " "),
		},
	}
}

func (s Spec) claim() (*corev1.PersistentVolumeClaim, error) {
	size, err := resource.ParseQuantity(s.ResultsSize)
	if err != nil {
		return nil, fmt.Errorf("--results-size %q: %w", s.ResultsSize, err)
	}
	if size.Sign() <= 0 {
		return nil, fmt.Errorf("--results-size must be > 0, got %q", s.ResultsSize)
	}
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: s.meta("results", "results"),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	if s.StorageClass != "" {
		pvc.Spec.StorageClassName = &s.StorageClass
	}
	return pvc, nil
}

// cmEnv is an env var read from key of the run's ConfigMap.
func (s Spec) cmEnv(name, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: s.configMapName()}, Key: key}}}
}

// baseEnv is every container's env: the state directory and HOME on the
// /tmp emptyDir, and with connect the DSN and the password reference.
func (s Spec) baseEnv(connect bool) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: "HOME", Value: "/tmp"},
		{Name: "ERPLAB_STATE_DIR", Value: "/tmp/erplab-state"},
	}
	if connect {
		env = append(env, s.cmEnv(DSNEnv, "dsn"))
		if s.PasswordSecret != "" {
			env = append(env, corev1.EnvVar{Name: conninfo.PasswordEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: s.PasswordSecret}, Key: PasswordKey}}})
		}
	}
	return env
}

// podSpec is the hardened pod of one container; claim, if not "", is
// mounted at ResultsDir.
func (s Spec) podSpec(c corev1.Container, claim string) corev1.PodSpec {
	f := false
	t := true
	uid := int64(User)
	c.SecurityContext = &corev1.SecurityContext{
		RunAsNonRoot:             &t,
		RunAsUser:                &uid,
		RunAsGroup:               &uid,
		AllowPrivilegeEscalation: &f,
		Privileged:               &f,
		ReadOnlyRootFilesystem:   &t,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "tmp", MountPath: "/tmp"})
	vols := []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	if claim != "" {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "results", MountPath: ResultsDir})
		vols = append(vols, corev1.Volume{Name: "results", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	}
	return corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyNever,
		AutomountServiceAccountToken: &f,
		EnableServiceLinks:           &f,
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   &t,
			RunAsUser:      &uid,
			RunAsGroup:     &uid,
			FSGroup:        &uid,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{c},
		Volumes:    vols,
	}
}

// job is a Job NAME-suffix running pod, its template labelled alike.
func (s Spec) job(suffix, component string, pod corev1.PodSpec) *batchv1.Job {
	meta := s.meta(suffix, component)
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: meta.Labels, Annotations: meta.Annotations},
				Spec:       pod,
			},
		},
	}
}

func i32(v int) *int32 { n := int32(v); return &n }

func (s Spec) setupJob(res corev1.ResourceRequirements) *batchv1.Job {
	args := []string{"init", "--dsn", "$(" + DSNEnv + ")", "--workload", escape(s.Setup.Workload), "--scale", escape(s.Setup.Scale)}
	if s.Setup.Force {
		args = append(args, "--force")
	}
	j := s.job("setup", "setup", s.podSpec(corev1.Container{
		Name: "setup", Image: s.Image, Command: []string{"erplab"}, Args: args,
		Env: s.baseEnv(true), Resources: res,
	}, ""))
	j.Spec.BackoffLimit = i32(0)
	return j
}

// AgentArgs are the agents' args before the kubelet's $(VAR) expansion.
func (s Spec) AgentArgs() []string {
	args := []string{"run",
		"--segment", "auto/" + strconv.Itoa(s.Agents),
		"--run-id", "$(" + RunIDEnv + ")",
		"--start-at", "$(" + StartAtEnv + ")",
		"--out", ResultsDir + "/", // erplab run --segment writes <run id>-<I>of<N>.json there
		"--dsn", "$(" + DSNEnv + ")",
	}
	for _, a := range s.RunArgs {
		args = append(args, escape(a))
	}
	return args
}

func (s Spec) agentsJob(res corev1.ResourceRequirements, claim string) *batchv1.Job {
	env := append(s.baseEnv(true),
		corev1.EnvVar{Name: IndexEnv, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: IndexFieldPath}}},
		s.cmEnv(RunIDEnv, "run-id"),
		s.cmEnv(StartAtEnv, "start-at"),
	)
	j := s.job("agents", "agent", s.podSpec(corev1.Container{
		Name: AgentContainer, Image: s.Image, Command: []string{"erplab"}, Args: s.AgentArgs(),
		Env: env, Resources: res,
	}, claim))
	mode := batchv1.IndexedCompletion
	j.Spec.CompletionMode = &mode
	j.Spec.Completions = i32(s.Agents)
	j.Spec.Parallelism = i32(s.Agents)
	j.Spec.BackoffLimitPerIndex = i32(0)
	j.Spec.MaxFailedIndexes = i32(s.Agents)
	container := AgentContainer
	j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{
			// An agent that exits non-zero has failed its segment: report it.
			Action: batchv1.PodFailurePolicyActionFailIndex,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				ContainerName: &container, Operator: batchv1.PodFailurePolicyOnExitCodesOpNotIn, Values: []int32{0},
			},
		},
		{
			// A preempted or evicted agent would restart late: fail it too.
			Action:          batchv1.PodFailurePolicyActionFailIndex,
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
		},
	}}
	return j
}

// mergeResources are the merge pod's: it waits for most of its life and
// must not hold the CPU the agents are scheduled on.
var mergeResources = Resources{CPU: "100m", Memory: "256Mi", MemoryLimit: "1Gi"}

func (s Spec) mergeJob(claim string) *batchv1.Job {
	res, _ := mergeResources.requirements() // constant quantities
	// --run-id: a results claim reused by earlier runs holds their
	// segments too; the merge reads this run's only.
	args := []string{"merge", "--wait", shortDuration(s.MergeWait), "--dir", ResultsDir, "--run-id", "$(" + RunIDEnv + ")", "-o", MergedFile}
	if s.ApdexMin != "" {
		args = append(args, "--apdex-min", escape(s.ApdexMin))
	}
	j := s.job("merge", "merge", s.podSpec(corev1.Container{
		Name: "merge", Image: s.Image, Command: []string{"erplab"}, Args: args,
		Env: append(s.baseEnv(false), s.cmEnv(RunIDEnv, "run-id")), Resources: res,
	}, claim))
	j.Spec.BackoffLimit = i32(0)
	return j
}

// escape doubles every '$' so that the kubelet's $(VAR) expansion passes a
// value through unchanged.
func escape(v string) string { return strings.ReplaceAll(v, "$", "$$") }

// shortDuration is d as Go parses it, without zero trailing units: 30m, 1h30m, 45s.
func shortDuration(d time.Duration) string {
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}

// shellQuote is a as one POSIX shell word: unchanged when it holds only
// characters no shell treats specially, else in single quotes.
func shellQuote(a string) string {
	if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}
