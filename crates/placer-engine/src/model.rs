//! The engine's view of cluster objects: [`PodInfo`], [`NodeInfo`], [`PodGroupInfo`].
//!
//! Each wraps the real Kubernetes object (`Arc<Pod>`, `Arc<Node>`, `Arc<PodGroup>`) and
//! adds what the algorithms read on hot paths, computed once when the object arrives.

use std::fmt;
use std::sync::Arc;

use placer_api::k8s::api::core::v1::{Node, Pod};
use placer_api::k8s::api::scheduling::v1alpha2::PodGroup;

use crate::resources::{ResourceError, Resources};

/// `namespace/name` of a namespaced object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
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
}

/// Effective pod requests: max(sum(containers) + sum(restartable init containers),
/// max over init containers i of (request_i + restartable init containers before i)),
/// plus `spec.overhead`. Errors carry the field path.
pub fn pod_requests(
    spec: &placer_api::k8s::api::core::v1::PodSpec,
) -> Result<Resources, (String, ResourceError)> {
    let container_req = |c: &placer_api::k8s::api::core::v1::Container, path: String| {
        match c.resources.as_ref().and_then(|r| r.requests.as_ref()) {
            Some(list) => Resources::from_list(list).map_err(|e| (format!("{path}.resources.requests"), e)),
            None => Ok(Resources::default()),
        }
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
                restartable_sum.add(&r);
                let mut peak = restartable_sum.clone();
                peak.max_with(&Resources::default());
                init_max.max_with(&peak);
            } else {
                let mut peak = r;
                peak.add(&restartable_sum);
                init_max.max_with(&peak);
            }
        }
    }
    sum.add(&restartable_sum);
    sum.max_with(&init_max);
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
