// Package k8s renders the Kubernetes manifests of a distributed erplab run
// (`erplab k8s render`): the agents are the pods of one Indexed Job, each
// running its segment of the run (`erplab run --segment auto/N`), and a
// merge Job makes the one result document of the run from their segment
// documents on a shared volume.
//
// # What is rendered
//
// Render writes one multi-document YAML, in this order (NAME is Spec.Name):
//
//   - ConfigMap NAME-spec: the run specification. Keys run-id, start-at
//     (RFC 3339, UTC, whole seconds), agents, dsn (never with a password)
//     and run-flags (the agents' run flags as one shell-quoted line). The
//     containers read run-id, start-at and dsn from it (configMapKeyRef),
//     so the ConfigMap is the one source of those three; run-flags is the
//     record of what the agents' args hold (a $(VAR) reference can only
//     fill one argument, so the run flags are also the agents' args).
//
//   - PersistentVolumeClaim NAME-results (ReadWriteMany, Spec.ResultsSize)
//     unless Spec.ResultsClaim names an existing claim. Mounted at /results
//     in the agents and the merge pod.
//
//   - Job NAME-setup (only with Spec.Setup): `erplab init --dsn $(ERPLAB_DSN)
//     --workload W --scale S`. Kubernetes has no ordering between Jobs: the
//     set-up must be done before the start time (the start barrier), so the
//     start delay must cover it.
//
//   - Job NAME-agents: completionMode Indexed, completions = parallelism =
//     Spec.Agents, backoffLimitPerIndex 0, maxFailedIndexes = Spec.Agents
//     (a failed agent never stops the others; the Job still ends Failed),
//     and a podFailurePolicy whose rules fail the index (FailIndex) on a
//     non-zero exit of the agent container and on a disruption (preemption,
//     eviction): a failed agent is reported in the Job's failedIndexes and is
//     never restarted into a late start. Each pod runs
//
//     erplab run --segment auto/N --run-id $(ERPLAB_RUN_ID)
//     --start-at $(ERPLAB_START_AT)
//     --out /results/ --dsn $(ERPLAB_DSN) RUN FLAGS...
//
//     where auto/N is segment JOB_COMPLETION_INDEX+1 of N, written to
//     /results/<run id>-<I>of<N>.json (a results claim reused across runs
//     keeps each run's files apart). JOB_COMPLETION_INDEX
//     is declared in the container's env from the pod annotation
//     batch.kubernetes.io/job-completion-index, so that the kubelet's $(VAR)
//     expansion of the args is guaranteed to resolve it (it expands only
//     variables declared in env). Every '$' in the run flags is doubled
//     ("$$"), so a run flag is passed as given and never expanded.
//
//   - Job NAME-merge: `erplab merge --wait D --dir /results -o
//     /results/run.json [--apdex-min X]`. It starts at once and waits for the
//     segment documents; --apdex-min is evaluated there, on the merged run,
//     never by one agent on its segment. Its pod requests 100m CPU and
//     256Mi (limit 1Gi), whatever the agents request: it waits most of its
//     life and must not hold CPU the agents are to be scheduled on.
//
// The password never appears in the YAML: with Spec.PasswordSecret every
// container that connects has PGPASSWORD from that Secret's key "password"
// (secretKeyRef); Render refuses a DSN that holds a password.
//
// Every pod runs as a non-root numeric user (65532, the distroless
// "nonroot" user; fsGroup 65532 so the results volume is writable), with a
// read-only root filesystem, no privilege escalation, every capability
// dropped, the RuntimeDefault seccomp profile and no service-account token;
// an emptyDir at /tmp holds erplab's state directory (ERPLAB_STATE_DIR) and
// HOME.
//
// Decode reads such a YAML back strictly into the official API types
// (unknown fields fail); Expand applies the kubelet's $(VAR) expansion.
// The tests use both; no cluster is needed.
package k8s
