//! The engine's view of cluster objects: [`PodInfo`], [`NodeInfo`], [`PodGroupInfo`].
//!
//! Each wraps the real Kubernetes object (`Arc<Pod>`, `Arc<Node>`, `Arc<PodGroup>`) and
//! adds what the algorithms read on hot paths, computed once when the object arrives.

use std::fmt;
use std::sync::Arc;

use placer_api::k8s::api::core::v1::{Node, Pod};
use placer_api::k8s::api::scheduling::v1alpha2::PodGroup;

use crate::resources::{ResourceError, Resources};

/// `namespace/name` of a namespaced object. The strings are shared: keys are cloned into
/// every index the engine keeps (queue, snapshot, assumptions, decisions), and a clone is
/// two reference-count increments rather than two allocations.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl ObjectKey {
    pub fn new(namespace: impl Into<Arc<str>>, name: impl Into<Arc<str>>) -> Self {
        ObjectKey { namespace: namespace.into(), name: name.into() }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

pub type PodKey = ObjectKey;
pub type GroupKey = ObjectKey;

/// Index of a node in the [`crate::snapshot::Snapshot`]; stable while the node exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// A pod as the engine sees it.
#[derive(Debug, Clone)]
pub struct PodInfo {
    pub pod: Arc<Pod>,
    pub key: PodKey,
    pub uid: String,
    /// Effective requests as Kubernetes computes them: max(sum of containers (plus
    /// restartable init containers), each init container) plus overhead. Never includes
    /// `pods`.
    pub requests: Resources,
    /// Pod priority (`spec.priority`, 0 when unset).
    pub priority: i32,
    /// `spec.preemptionPolicy == Never`.
    pub preemption_never: bool,
    /// `spec.schedulingGroup.podGroupName`.
    pub group: Option<String>,
    /// `spec.nodeName`: bound (or, inside a cycle, assumed) node.
    pub node_name: Option<String>,
    /// `status.nominatedNodeName`.
    pub nominated_node_name: Option<String>,
    /// `spec.schedulerName` ("default-scheduler" when unset).
    pub scheduler_name: String,
    /// Has at least one scheduling gate.
    pub gated: bool,
    /// Phase Succeeded or Failed: uses no capacity.
    pub terminal: bool,
    /// Has a deletion timestamp.
    pub deleting: bool,
}

/// Why a pod could not be read into the engine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("pod {pod}: {field}: {source}")]
    PodResources { pod: String, field: String, source: ResourceError },
    #[error("node {node}: status.allocatable: {source}")]
    NodeResources { node: String, source: ResourceError },
    #[error("{kind} without metadata.name")]
    MissingName { kind: &'static str },
}

impl PodInfo {
    /// Reads a pod. Fails only on unreadable quantities.
    pub fn from_pod(pod: Arc<Pod>) -> Result<PodInfo, ModelError> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_else(|| "default".to_string());
        let name = pod.metadata.name.clone().ok_or(ModelError::MissingName { kind: "Pod" })?;
        let key = ObjectKey::new(namespace, name);
        let spec = pod.spec.as_ref();
        let requests = match spec {
            Some(spec) => pod_requests(spec).map_err(|(field, source)| ModelError::PodResources {
                pod: key.to_string(),
                field,
                source,
            })?,
            None => Resources::default(),
        };
        let status = pod.status.as_ref();
        let phase = status.and_then(|s| s.phase.as_deref());
        Ok(PodInfo {
            key,
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            requests,
            priority: spec.and_then(|s| s.priority).unwrap_or(0),
            preemption_never: spec.and_then(|s| s.preemption_policy.as_deref()) == Some("Never"),
            group: spec.and_then(|s| s.scheduling_group.as_ref()).and_then(|g| g.pod_group_name.clone()),
            node_name: spec.and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty()),
            nominated_node_name: status.and_then(|s| s.nominated_node_name.clone()).filter(|n| !n.is_empty()),
            scheduler_name: spec
                .and_then(|s| s.scheduler_name.clone())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "default-scheduler".to_string()),
            gated: spec.and_then(|s| s.scheduling_gates.as_ref()).is_some_and(|g| !g.is_empty()),
            terminal: matches!(phase, Some("Succeeded") | Some("Failed")),
            deleting: pod.metadata.deletion_timestamp.is_some(),
            pod,
        })
    }

    pub fn labels(&self) -> Option<&std::collections::BTreeMap<String, String>> {
        self.pod.metadata.labels.as_ref()
    }

    /// Has pod affinity or anti-affinity terms (required or preferred).
    pub fn has_pod_affinity(&self) -> bool {
        let Some(a) = self.pod.spec.as_ref().and_then(|s| s.affinity.as_ref()) else { return false };
        let aff = a.pod_affinity.as_ref().is_some_and(|p| {
            p.required_during_scheduling_ignored_during_execution.as_ref().is_some_and(|v| !v.is_empty())
                || p.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
                    .is_some_and(|v| !v.is_empty())
        });
        let anti = a.pod_anti_affinity.as_ref().is_some_and(|p| {
            p.required_during_scheduling_ignored_during_execution.as_ref().is_some_and(|v| !v.is_empty())
                || p.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
                    .is_some_and(|v| !v.is_empty())
        });
        aff || anti
    }

    /// Has required pod anti-affinity terms.
    pub fn has_required_pod_anti_affinity(&self) -> bool {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .and_then(|p| p.required_during_scheduling_ignored_during_execution.as_ref())
            .is_some_and(|t| !t.is_empty())
    }
}

/// Requests as the API server stores them: a resource with a limit but no request is
/// requested at its limit (API defaulting), so pods read from manifests and from a live
/// cluster agree.
fn requests_with_defaults(
    r: Option<&placer_api::k8s::api::core::v1::ResourceRequirements>,
    path: &str,
) -> Result<Resources, (String, ResourceError)> {
    let Some(r) = r else { return Ok(Resources::default()) };
    let mut out = match &r.requests {
        Some(list) => Resources::from_list(list).map_err(|e| (format!("{path}.requests"), e))?,
        None => Resources::default(),
    };
    if let Some(limits) = &r.limits {
        for (name, q) in limits {
            if r.requests.as_ref().is_some_and(|req| req.contains_key(name)) {
                continue;
            }
            let mut one = std::collections::BTreeMap::new();
            one.insert(name.clone(), q.clone());
            let value = Resources::from_list(&one).map_err(|e| (format!("{path}.limits"), e))?;
            out.add(&value);
        }
    }
    Ok(out)
}

/// Whether a resource may be set at pod level (`spec.resources`): cpu, memory, hugepages.
fn is_pod_level_resource(name: &str) -> bool {
    name == crate::resources::CPU || name == crate::resources::MEMORY || name.starts_with("hugepages-")
}

/// Effective pod requests, as Kubernetes' `resourcehelper.PodRequests` computes them:
/// max(sum(containers) + sum(restartable init containers), max over init containers i of
/// (request_i + restartable init containers before i)); then pod-level requests
/// (`spec.resources`, cpu / memory / hugepages) replace the aggregate for those resources;
/// then `spec.overhead` is added. Limits stand in for missing requests (API defaulting).
/// Errors carry the field path.
pub fn pod_requests(
    spec: &placer_api::k8s::api::core::v1::PodSpec,
) -> Result<Resources, (String, ResourceError)> {
    let container_req = |c: &placer_api::k8s::api::core::v1::Container, path: String| {
        requests_with_defaults(c.resources.as_ref(), &format!("{path}.resources"))
    };
    let mut sum = Resources::default();
    for (i, c) in spec.containers.iter().enumerate() {
        sum.add(&container_req(c, format!("spec.containers[{i}]"))?);
    }
    let mut restartable_sum = Resources::default();
    let mut init_max = Resources::default();
    if let Some(inits) = &spec.init_containers {
        for (i, c) in inits.iter().enumerate() {
            let r = container_req(c, format!("spec.initContainers[{i}]"))?;
            if c.restart_policy.as_deref() == Some("Always") {
                // A sidecar runs alongside everything started after it.
                restartable_sum.add(&r);
                init_max.max_with(&restartable_sum);
            } else {
                let mut peak = r;
                peak.add(&restartable_sum);
                init_max.max_with(&peak);
            }
        }
    }
    sum.add(&restartable_sum);
    sum.max_with(&init_max);
    let pod_level = requests_with_defaults(spec.resources.as_ref(), "spec.resources")?;
    for (name, value) in pod_level.iter_nonzero().filter(|(n, _)| is_pod_level_resource(n)) {
        sum.set(name, value);
    }
    if let Some(overhead) = &spec.overhead {
        sum.add(&Resources::from_list(overhead).map_err(|e| ("spec.overhead".to_string(), e))?);
    }
    sum.pods = 0;
    Ok(sum)
}

/// A node as the engine sees it (without the pods on it; see the snapshot).
#[derive(Debug, Clone)]
pub struct NodeStatic {
    pub node: Arc<Node>,
    pub name: String,
    pub allocatable: Resources,
    pub unschedulable: bool,
    /// `Ready` condition is `True`, or absent (the scenario format's default).
    pub ready: bool,
}

impl NodeStatic {
    pub fn from_node(node: Arc<Node>) -> Result<NodeStatic, ModelError> {
        let name = node.metadata.name.clone().ok_or(ModelError::MissingName { kind: "Node" })?;
        let status = node.status.as_ref();
        let allocatable = match status.and_then(|s| s.allocatable.as_ref()) {
            Some(list) => Resources::from_list(list)
                .map_err(|source| ModelError::NodeResources { node: name.clone(), source })?,
            None => Resources::default(),
        };
        let ready = match status.and_then(|s| s.conditions.as_ref()) {
            Some(conds) => match conds.iter().find(|c| c.type_ == "Ready") {
                Some(c) => c.status == "True",
                None => true,
            },
            None => true,
        };
        Ok(NodeStatic {
            unschedulable: node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false),
            name,
            allocatable,
            ready,
            node,
        })
    }

    pub fn labels(&self) -> Option<&std::collections::BTreeMap<String, String>> {
        self.node.metadata.labels.as_ref()
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels().and_then(|l| l.get(key)).map(|s| s.as_str())
    }
}

/// Gang or basic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupPolicy {
    Gang { min_count: u32 },
    Basic,
}

/// A PodGroup as the engine sees it.
#[derive(Debug, Clone)]
pub struct PodGroupInfo {
    pub pod_group: Arc<PodGroup>,
    pub key: GroupKey,
    pub policy: GroupPolicy,
    /// `spec.schedulingConstraints.topology[0].key`.
    pub topology_key: Option<String>,
    /// Resolved group priority: `spec.priority`, else the PriorityClass named by
    /// `spec.priorityClassName`, else the global default PriorityClass, else 0.
    /// `None` until resolved by the engine.
    pub priority: Option<i32>,
    /// `spec.disruptionMode == PodGroup`.
    pub disrupt_together: bool,
}

impl PodGroupInfo {
    pub fn from_pod_group(pg: Arc<PodGroup>) -> Result<PodGroupInfo, ModelError> {
        let namespace = pg.metadata.namespace.clone().unwrap_or_else(|| "default".to_string());
        let name = pg.metadata.name.clone().ok_or(ModelError::MissingName { kind: "PodGroup" })?;
        let spec = &pg.spec;
        let policy = match &spec.scheduling_policy.gang {
            Some(g) => GroupPolicy::Gang { min_count: g.min_count.max(1) as u32 },
            None => GroupPolicy::Basic,
        };
        Ok(PodGroupInfo {
            key: ObjectKey::new(namespace, name),
            policy,
            topology_key: spec
                .scheduling_constraints
                .as_ref()
                .and_then(|c| c.topology.as_ref())
                .and_then(|t| t.first())
                .map(|t| t.key.clone()),
            priority: spec.priority,
            disrupt_together: spec.disruption_mode.as_deref() == Some("PodGroup"),
            pod_group: pg,
        })
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.pod_group.metadata.annotations.as_ref().and_then(|a| a.get(key)).map(|s| s.as_str())
    }

    /// Minimum number of pods that must be placed: `minCount` for gang, 1 for basic.
    pub fn min_count(&self) -> u32 {
        match self.policy {
            GroupPolicy::Gang { min_count } => min_count,
            GroupPolicy::Basic => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::api::core::v1::{Container, PodSpec, ResourceRequirements};
    use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;
    use std::collections::BTreeMap;

    fn list(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
        Some(pairs.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect())
    }

    fn container(requests: &[(&str, &str)]) -> Container {
        Container {
            name: "c".into(),
            resources: Some(ResourceRequirements { requests: list(requests), ..Default::default() }),
            ..Default::default()
        }
    }

    fn sidecar(requests: &[(&str, &str)]) -> Container {
        Container { restart_policy: Some("Always".into()), ..container(requests) }
    }

    #[test]
    fn containers_are_summed() {
        let spec = PodSpec {
            containers: vec![container(&[("cpu", "1"), ("memory", "1Gi")]), container(&[("cpu", "500m")])],
            ..Default::default()
        };
        let r = pod_requests(&spec).unwrap();
        assert_eq!((r.cpu, r.memory, r.pods), (1500, 1 << 30, 0));
    }

    #[test]
    fn init_containers_count_at_their_peak() {
        let spec = PodSpec {
            containers: vec![container(&[("cpu", "1")])],
            init_containers: Some(vec![container(&[("cpu", "3")]), container(&[("memory", "2Gi")])]),
            ..Default::default()
        };
        let r = pod_requests(&spec).unwrap();
        assert_eq!((r.cpu, r.memory), (3000, 2 << 30), "max(sum containers, each init container)");
    }

    #[test]
    fn sidecars_add_to_containers_and_to_later_init_containers() {
        // sidecar 1 cpu, then init 2 cpu (peak 1 + 2 = 3), containers 1 cpu (1 + 1 = 2).
        let spec = PodSpec {
            containers: vec![container(&[("cpu", "1")])],
            init_containers: Some(vec![sidecar(&[("cpu", "1")]), container(&[("cpu", "2")])]),
            ..Default::default()
        };
        assert_eq!(pod_requests(&spec).unwrap().cpu, 3000);
        // An init container before the sidecar does not see it.
        let spec = PodSpec {
            containers: vec![container(&[("cpu", "2")])],
            init_containers: Some(vec![container(&[("cpu", "2500m")]), sidecar(&[("cpu", "1")])]),
            ..Default::default()
        };
        assert_eq!(pod_requests(&spec).unwrap().cpu, 3000, "max(2.5, 2 + 1)");
    }

    #[test]
    fn overhead_is_added_last() {
        let spec = PodSpec {
            containers: vec![container(&[("cpu", "1")])],
            init_containers: Some(vec![container(&[("cpu", "2")])]),
            overhead: list(&[("cpu", "250m")]),
            ..Default::default()
        };
        assert_eq!(pod_requests(&spec).unwrap().cpu, 2250);
    }

    #[test]
    fn limits_stand_in_for_missing_requests() {
        let spec = PodSpec {
            containers: vec![Container {
                name: "c".into(),
                resources: Some(ResourceRequirements {
                    requests: list(&[("cpu", "1")]),
                    limits: list(&[("cpu", "4"), ("memory", "1Gi"), ("nvidia.com/gpu", "2")]),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let r = pod_requests(&spec).unwrap();
        assert_eq!((r.cpu, r.memory, r.get("nvidia.com/gpu")), (1000, 1 << 30, 2));
    }

    #[test]
    fn pod_level_requests_replace_the_container_aggregate() {
        let spec = PodSpec {
            containers: vec![container(&[("cpu", "1"), ("memory", "1Gi"), ("nvidia.com/gpu", "1")])],
            resources: Some(ResourceRequirements { requests: list(&[("cpu", "3")]), ..Default::default() }),
            overhead: list(&[("cpu", "100m")]),
            ..Default::default()
        };
        let r = pod_requests(&spec).unwrap();
        assert_eq!((r.cpu, r.memory, r.get("nvidia.com/gpu")), (3100, 1 << 30, 1));
    }

    #[test]
    fn unreadable_quantities_name_the_field() {
        let spec = PodSpec { containers: vec![container(&[("cpu", "lots")])], ..Default::default() };
        let (field, err) = pod_requests(&spec).unwrap_err();
        assert_eq!(field, "spec.containers[0].resources.requests");
        assert_eq!(err.resource, "cpu");
    }
}
