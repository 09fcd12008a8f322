package k8s

import (
	"errors"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/erplab/erplab/internal/conninfo"
)

// Check verifies the invariants of a rendering of agents agents and
// returns every violation joined (nil when it holds):
//
//   - one agents Job (label app.kubernetes.io/component=agent): completionMode
//     Indexed, completions = parallelism = agents, backoffLimitPerIndex 0,
//     maxFailedIndexes set, a podFailurePolicy with a FailIndex rule on a
//     non-zero exit of the agent container, and JOB_COMPLETION_INDEX declared
//     in its env from the job-completion-index annotation;
//   - every pod: restartPolicy Never, a non-root numeric user, read-only root
//     filesystem, no privilege escalation, not privileged, capabilities ALL
//     dropped; every $(VAR) in its args declared in its env; PGPASSWORD, if
//     present, from a secretKeyRef;
//   - no ConfigMap value is a DSN holding a password.
func (m Manifests) Check(agents int) error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	var agentJobs []*batchv1.Job
	for _, j := range m.Jobs {
		if j.Labels["app.kubernetes.io/component"] == "agent" {
			agentJobs = append(agentJobs, j)
		}
		errs = append(errs, checkPod(j)...)
	}
	if len(agentJobs) != 1 {
		bad("%d agents Jobs, want 1", len(agentJobs))
	} else {
		errs = append(errs, checkAgents(agentJobs[0], agents)...)
	}
	for _, cm := range m.ConfigMaps {
		for k, v := range cm.Data {
			if k == "dsn" && conninfo.HasPassword(v) {
				bad("ConfigMap %s: key %s holds a password", cm.Name, k)
			}
		}
	}
	return errors.Join(errs...)
}

func checkAgents(j *batchv1.Job, agents int) []error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("Job %s: "+format, append([]any{j.Name}, a...)...))
	}
	sp := j.Spec
	if sp.CompletionMode == nil || *sp.CompletionMode != batchv1.IndexedCompletion {
		bad("completionMode is not Indexed")
	}
	if sp.Completions == nil || int(*sp.Completions) != agents {
		bad("completions %v, want %d", deref(sp.Completions), agents)
	}
	if sp.Parallelism == nil || int(*sp.Parallelism) != agents {
		bad("parallelism %v, want %d", deref(sp.Parallelism), agents)
	}
	if sp.BackoffLimitPerIndex == nil || *sp.BackoffLimitPerIndex != 0 {
		bad("backoffLimitPerIndex %v, want 0", deref(sp.BackoffLimitPerIndex))
	}
	if sp.MaxFailedIndexes == nil {
		bad("maxFailedIndexes not set")
	}
	failIndex := false
	if sp.PodFailurePolicy != nil {
		for _, r := range sp.PodFailurePolicy.Rules {
			e := r.OnExitCodes
			if r.Action == batchv1.PodFailurePolicyActionFailIndex && e != nil && e.ContainerName != nil && *e.ContainerName == AgentContainer &&
				e.Operator == batchv1.PodFailurePolicyOnExitCodesOpNotIn && slices.Equal(e.Values, []int32{0}) {
				failIndex = true
			}
		}
	}
	if !failIndex {
		bad("no podFailurePolicy rule FailIndex on a non-zero exit of container %s", AgentContainer)
	}
	cs := j.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != AgentContainer {
		bad("want one container named %s", AgentContainer)
		return errs
	}
	declared := false
	for _, e := range cs[0].Env {
		if e.Name == IndexEnv && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == IndexFieldPath {
			declared = true
		}
	}
	if !declared {
		bad("%s not declared in env from fieldRef %s", IndexEnv, IndexFieldPath)
	}
	return errs
}

func deref(p *int32) any {
	if p == nil {
		return "unset"
	}
	return *p
}

func checkPod(j *batchv1.Job) []error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("Job %s: "+format, append([]any{j.Name}, a...)...))
	}
	ps := j.Spec.Template.Spec
	if ps.RestartPolicy != corev1.RestartPolicyNever {
		bad("restartPolicy %q, want Never", ps.RestartPolicy)
	}
	for _, c := range append(slices.Clone(ps.InitContainers), ps.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			bad("container %s has no securityContext", c.Name)
			continue
		}
		nonRoot := sc.RunAsNonRoot
		user := sc.RunAsUser
		if ps.SecurityContext != nil {
			if nonRoot == nil {
				nonRoot = ps.SecurityContext.RunAsNonRoot
			}
			if user == nil {
				user = ps.SecurityContext.RunAsUser
			}
		}
		switch {
		case nonRoot == nil || !*nonRoot:
			bad("container %s: runAsNonRoot not true", c.Name)
		case user == nil || *user == 0:
			bad("container %s: no non-zero numeric runAsUser", c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			bad("container %s: root filesystem not read-only", c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			bad("container %s: privilege escalation not disabled", c.Name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			bad("container %s: privileged", c.Name)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			bad("container %s: capabilities not all dropped", c.Name)
		}
		if _, unresolved := Expand(c, nil); len(unresolved) > 0 {
			bad("container %s: args reference undeclared env vars %v", c.Name, unresolved)
		}
		for _, e := range c.Env {
			if e.Name == conninfo.PasswordEnv && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
				bad("container %s: %s not from a secretKeyRef", c.Name, e.Name)
			}
		}
	}
	return errs
}
