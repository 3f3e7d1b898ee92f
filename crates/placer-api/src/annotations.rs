//! Annotation and label names Placer reads or writes.

/// Kueue: all pods of the group must share one domain of this level (same meaning as
/// `spec.schedulingConstraints.topology[0].key`).
pub const PODSET_REQUIRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-required-topology";
/// Kueue: prefer one domain of this level, climb to parent levels, finally spread.
pub const PODSET_PREFERRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-preferred-topology";
/// Kueue: no compactness requirement ("true").
pub const PODSET_UNCONSTRAINED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-unconstrained-topology";
/// Kueue: each slice must share one domain of this level.
pub const PODSET_SLICE_REQUIRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-slice-required-topology";
/// Kueue: number of pods per slice.
pub const PODSET_SLICE_SIZE: &str = "kueue.x-k8s.io/podset-slice-size";
/// Kueue: multi-layer slice constraints, a JSON list of `{"topology": L, "size": N}`.
pub const PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS: &str =
    "kueue.x-k8s.io/podset-slice-required-topology-constraints";
/// Kueue: PodSets (PodGroups) sharing this name are placed in one common domain.
pub const PODSET_GROUP_NAME: &str = "kueue.x-k8s.io/podset-group-name";
/// Kueue: the first pod index of this PodSet.
pub const POD_INDEX_OFFSET: &str = "kueue.x-k8s.io/pod-index-offset";

/// Kueue: the index (rank) of a pod in its pod group, read for rank-ordered placement.
pub const POD_GROUP_POD_INDEX: &str = "kueue.x-k8s.io/pod-group-pod-index";
/// Kueue (annotation on a pod): names the label that holds the pod's index; Kueue's pod
/// webhook copies that label's value into [`POD_GROUP_POD_INDEX`].
pub const POD_GROUP_POD_INDEX_LABEL: &str = "kueue.x-k8s.io/pod-group-pod-index-label";

/// Upstream Job controller: completion index of an Indexed Job's pod.
pub const JOB_COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// Placer: the chosen topology assignment of a PodGroup, in the compact encoding of seed 002
/// (Kueue v1beta2 `TopologyAssignment`), as JSON.
pub const TOPOLOGY_ASSIGNMENT: &str = "placer.dev/topology-assignment";
/// Placer: the failed nodes a placed PodGroup waits to have replaced (seed 002 "Node
/// failures"; Kueue's Workload `status.unhealthyNodes`, which a v1alpha2 PodGroup has no
/// field for), as that field's JSON: `[{"name":"node-a"}]`. Set while the group's lost pods
/// find no replacement, removed once they are placed or the group is evicted.
pub const UNHEALTHY_NODES: &str = "placer.dev/unhealthy-nodes";
/// Placer (simulator): virtual run time of a pod, after which it succeeds (e.g. "30s").
pub const SIM_RUN_TIME: &str = "placer.dev/run-time";
