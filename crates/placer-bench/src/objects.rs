//! Kubernetes objects built directly as k8s-openapi structs (no YAML, no JSON): nodes with
//! topology labels, pods with resource requests and a `spec.schedulingGroup`, and PodGroups
//! with a gang policy and a topology request.

use std::collections::BTreeMap;

use placer_api::annotations::{
    PODSET_PREFERRED_TOPOLOGY, PODSET_REQUIRED_TOPOLOGY, PODSET_SLICE_REQUIRED_TOPOLOGY, PODSET_SLICE_SIZE,
};
use placer_api::k8s::api::core::v1::{
    Container, Node, NodeSpec, NodeStatus, Pod, PodResourceClaim, PodResourceClaimStatus, PodSchedulingGroup,
    PodSpec, PodStatus, ResourceClaim as ContainerClaim, ResourceRequirements,
};
use placer_api::k8s::api::resource::v1::{
    CELDeviceSelector, Device, DeviceClaim, DeviceClass, DeviceClassSpec, DeviceRequest, DeviceSelector,
    ExactDeviceRequest, ResourceClaim, ResourceClaimSpec, ResourcePool, ResourceSlice, ResourceSliceSpec,
};
use placer_api::k8s::api::scheduling::v1alpha2::{
    GangSchedulingPolicy, PodGroup, PodGroupSchedulingConstraints, PodGroupSchedulingPolicy, PodGroupSpec,
    TopologyConstraint,
};
use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde::Serialize;

/// The hostname label kubelet sets (the lowest topology level).
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// Block label of the generated topologies.
pub const BLOCK_LABEL: &str = "topology.example.com/block";
/// Rack label of the generated topologies.
pub const RACK_LABEL: &str = "topology.example.com/rack";
/// Namespace of every generated pod and PodGroup.
pub const NAMESPACE: &str = "bench";
/// `spec.schedulerName` of every generated pod (one the default configuration schedules).
pub const SCHEDULER_NAME: &str = "placer";
/// The GPU extended resource.
pub const GPU: &str = "nvidia.com/gpu";

/// Allocatable of a generated node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NodeShape {
    pub cpu_cores: u32,
    pub memory_gib: u32,
    pub pods: u32,
    pub gpus: u32,
}

impl NodeShape {
    /// A typical GPU server: 64 cores, 512 GiB, 110 pods, 8 GPUs.
    pub const GPU_SERVER: NodeShape = NodeShape { cpu_cores: 64, memory_gib: 512, pods: 110, gpus: 8 };
}

/// Requests of a generated pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PodShape {
    pub cpu_milli: u32,
    pub memory_mib: u32,
    pub gpus: u32,
}

impl PodShape {
    /// One GPU with 4 cores and 32 GiB: eight fill half of a [`NodeShape::GPU_SERVER`]'s cpu.
    pub const GPU_WORKER: PodShape = PodShape { cpu_milli: 4_000, memory_mib: 32 * 1024, gpus: 1 };
    /// One GPU with 8 cores and 64 GiB: eight fill a [`NodeShape::GPU_SERVER`] exactly.
    pub const GPU_WORKER_LARGE: PodShape = PodShape { cpu_milli: 8_000, memory_mib: 64 * 1024, gpus: 1 };
    /// A CPU-only worker: 2 cores, 8 GiB.
    pub const CPU_WORKER: PodShape = PodShape { cpu_milli: 2_000, memory_mib: 8 * 1024, gpus: 0 };
}

/// A slice request: every `size` consecutive pods share one domain of `key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Slice {
    pub key: &'static str,
    pub size: u32,
}

/// The topology request of a PodGroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TopologyAsk {
    /// No constraint.
    None,
    /// KEP-5732: `spec.schedulingConstraints.topology: [{key}]` (every pod in one domain).
    Required { key: &'static str },
    /// Kueue: `kueue.x-k8s.io/podset-required-topology` (hierarchical, one domain).
    RequiredAnnotation { key: &'static str },
    /// Kueue: `kueue.x-k8s.io/podset-preferred-topology`, optionally with slices.
    Preferred { key: &'static str, slice: Option<Slice> },
}

fn quantities(pairs: &[(&str, String)]) -> BTreeMap<String, Quantity> {
    pairs.iter().map(|(k, v)| (k.to_string(), Quantity(v.clone()))).collect()
}

/// A Ready node named `name` (also its hostname label) with `labels` and `shape` as both
/// capacity and allocatable.
pub fn node(name: &str, labels: &[(&str, &str)], shape: NodeShape) -> Node {
    let mut map: BTreeMap<String, String> =
        labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    map.insert(HOSTNAME_LABEL.to_string(), name.to_string());
    let resources = quantities(&[
        ("cpu", shape.cpu_cores.to_string()),
        ("memory", format!("{}Gi", shape.memory_gib)),
        ("pods", shape.pods.to_string()),
        (GPU, shape.gpus.to_string()),
    ]);
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            uid: Some(format!("uid-node-{name}")),
            labels: Some(map),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            capacity: Some(resources.clone()),
            allocatable: Some(resources),
            ..NodeStatus::default()
        }),
    }
}

/// A pending pod named `name` in [`NAMESPACE`], member of PodGroup `group` if given.
pub fn pod(name: &str, group: Option<&str>, shape: PodShape) -> Pod {
    let mut requests =
        vec![("cpu", format!("{}m", shape.cpu_milli)), ("memory", format!("{}Mi", shape.memory_mib))];
    let mut limits = Vec::new();
    if shape.gpus > 0 {
        requests.push((GPU, shape.gpus.to_string()));
        // Extended resources must have limits equal to requests.
        limits.push((GPU, shape.gpus.to_string()));
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(NAMESPACE.to_string()),
            uid: Some(format!("uid-{name}")),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some(SCHEDULER_NAME.to_string()),
            scheduling_group: group.map(|g| PodSchedulingGroup { pod_group_name: Some(g.to_string()) }),
            containers: vec![Container {
                name: "worker".to_string(),
                image: Some("registry.example.com/worker:1".to_string()),
                resources: Some(ResourceRequirements {
                    requests: Some(quantities(&requests)),
                    limits: (!limits.is_empty()).then(|| quantities(&limits)),
                    ..ResourceRequirements::default()
                }),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// `pod` as the store shows it once bound: `spec.nodeName` set.
pub fn bound(pod: &Pod, node: &str) -> Pod {
    let mut out = pod.clone();
    if let Some(spec) = out.spec.as_mut() {
        spec.node_name = Some(node.to_string());
    }
    out
}

/// A gang PodGroup named `name` in [`NAMESPACE`] with `minCount = min_count` and the
/// topology request `ask`.
pub fn pod_group(name: &str, min_count: u32, ask: TopologyAsk) -> PodGroup {
    let mut annotations = BTreeMap::new();
    let mut constraints = None;
    match ask {
        TopologyAsk::None => {}
        TopologyAsk::Required { key } => {
            constraints = Some(PodGroupSchedulingConstraints {
                topology: Some(vec![TopologyConstraint { key: key.to_string() }]),
            });
        }
        TopologyAsk::RequiredAnnotation { key } => {
            annotations.insert(PODSET_REQUIRED_TOPOLOGY.to_string(), key.to_string());
        }
        TopologyAsk::Preferred { key, slice } => {
            annotations.insert(PODSET_PREFERRED_TOPOLOGY.to_string(), key.to_string());
            if let Some(s) = slice {
                annotations.insert(PODSET_SLICE_REQUIRED_TOPOLOGY.to_string(), s.key.to_string());
                annotations.insert(PODSET_SLICE_SIZE.to_string(), s.size.to_string());
            }
        }
    }
    PodGroup {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(NAMESPACE.to_string()),
            uid: Some(format!("uid-pg-{name}")),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..ObjectMeta::default()
        },
        spec: PodGroupSpec {
            scheduling_policy: PodGroupSchedulingPolicy {
                gang: Some(GangSchedulingPolicy { min_count: i32::try_from(min_count).unwrap_or(i32::MAX) }),
                basic: None,
            },
            scheduling_constraints: constraints,
            ..PodGroupSpec::default()
        },
        status: None,
    }
}

/// The DRA driver and DeviceClass of the GPUs of DRA workloads.
pub const GPU_DRIVER: &str = "gpu.example.com";
/// The pod's claim entry name (and request name) of DRA workloads.
pub const GPU_CLAIM: &str = "gpu";

/// The DeviceClass selecting [`GPU_DRIVER`]'s devices.
pub fn gpu_class() -> DeviceClass {
    DeviceClass {
        metadata: ObjectMeta { name: Some(GPU_DRIVER.to_string()), ..ObjectMeta::default() },
        spec: DeviceClassSpec {
            selectors: Some(vec![DeviceSelector {
                cel: Some(CELDeviceSelector { expression: format!("device.driver == {GPU_DRIVER:?}") }),
            }]),
            ..DeviceClassSpec::default()
        },
    }
}

/// The node-local ResourceSlice of `node`'s `gpus` GPUs (one pool per node).
pub fn gpu_slice(node: &str, gpus: u32) -> ResourceSlice {
    ResourceSlice {
        metadata: ObjectMeta { name: Some(format!("{node}-gpus")), ..ObjectMeta::default() },
        spec: ResourceSliceSpec {
            driver: GPU_DRIVER.to_string(),
            node_name: Some(node.to_string()),
            pool: ResourcePool { name: node.to_string(), generation: 1, resource_slice_count: 1 },
            devices: Some(
                (0..gpus).map(|g| Device { name: format!("gpu-{g}"), ..Device::default() }).collect(),
            ),
            ..ResourceSliceSpec::default()
        },
    }
}

/// `pod` asking for its GPUs through a claim generated for it from a template (as the
/// ResourceClaim controller would have made it): the pod without the extended resource,
/// with the claim entry and its status, and the claim (owned by the pod).
pub fn with_gpu_claim(pod: &Pod, gpus: u32) -> (Pod, ResourceClaim) {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let claim_name = format!("{name}-{GPU_CLAIM}-bench");
    let mut out = pod.clone();
    if let Some(spec) = out.spec.as_mut() {
        spec.resource_claims = Some(vec![PodResourceClaim {
            name: GPU_CLAIM.to_string(),
            resource_claim_template_name: Some("one-gpu".to_string()),
            ..PodResourceClaim::default()
        }]);
        for c in &mut spec.containers {
            if let Some(r) = c.resources.as_mut() {
                for list in [&mut r.requests, &mut r.limits].into_iter().flatten() {
                    list.remove(GPU);
                }
                r.limits = r.limits.take().filter(|l| !l.is_empty());
                r.claims = Some(vec![ContainerClaim { name: GPU_CLAIM.to_string(), request: None }]);
            }
        }
    }
    out.status = Some(PodStatus {
        resource_claim_statuses: Some(vec![PodResourceClaimStatus {
            name: GPU_CLAIM.to_string(),
            resource_claim_name: Some(claim_name.clone()),
        }]),
        ..PodStatus::default()
    });
    let claim = ResourceClaim {
        metadata: ObjectMeta {
            name: Some(claim_name),
            namespace: Some(NAMESPACE.to_string()),
            uid: Some(format!("uid-claim-{name}")),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".to_string(),
                kind: "Pod".to_string(),
                name,
                uid: pod.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(vec![DeviceRequest {
                    name: GPU_CLAIM.to_string(),
                    exactly: Some(ExactDeviceRequest {
                        device_class_name: GPU_DRIVER.to_string(),
                        count: Some(i64::from(gpus)),
                        ..ExactDeviceRequest::default()
                    }),
                    first_available: None,
                }]),
                ..DeviceClaim::default()
            }),
        },
        status: None,
    };
    (out, claim)
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_engine::testing::{GroupPolicy, NodeStatic, PodGroupInfo, PodInfo};
    use std::sync::Arc;

    #[test]
    fn objects_read_back_as_the_engine_sees_them() {
        let n = NodeStatic::from_node(Arc::new(node("h1", &[(RACK_LABEL, "r1")], NodeShape::GPU_SERVER)))
            .expect("node reads");
        assert_eq!(n.allocatable.cpu, 64_000);
        assert_eq!(n.allocatable.memory, 512 << 30);
        assert_eq!(n.allocatable.pods, 110);
        assert_eq!(n.allocatable.get(GPU), 8);
        assert_eq!(n.label(RACK_LABEL), Some("r1"));
        assert_eq!(n.label(HOSTNAME_LABEL), Some("h1"));

        let raw = pod("g1-0", Some("g1"), PodShape::GPU_WORKER);
        let p = PodInfo::from_pod(Arc::new(raw.clone())).expect("pod reads");
        assert_eq!(&*p.key.namespace, NAMESPACE);
        assert_eq!(p.group_name(), Some("g1"));
        assert_eq!((p.requests.cpu, p.requests.memory, p.requests.get(GPU)), (4_000, 32 << 30, 1));
        assert_eq!(&*p.scheduler_name, SCHEDULER_NAME);
        let b = bound(&raw, "h1");
        assert_eq!(b.spec.and_then(|s| s.node_name).as_deref(), Some("h1"));

        let cpu_only = PodInfo::from_pod(Arc::new(pod("x", None, PodShape::CPU_WORKER))).expect("pod reads");
        assert_eq!(cpu_only.requests.get(GPU), 0);
        assert!(cpu_only.group.is_none());
    }

    #[test]
    fn pod_groups_carry_gang_and_topology() {
        let g = PodGroupInfo::from_pod_group(Arc::new(pod_group(
            "g",
            10,
            TopologyAsk::Required { key: RACK_LABEL },
        )))
        .expect("group reads");
        assert_eq!(g.policy, GroupPolicy::Gang { min_count: 10 });
        assert_eq!(g.topology_key.as_deref(), Some(RACK_LABEL));

        let ask =
            TopologyAsk::Preferred { key: RACK_LABEL, slice: Some(Slice { key: RACK_LABEL, size: 64 }) };
        let g = PodGroupInfo::from_pod_group(Arc::new(pod_group("h", 256, ask))).expect("group reads");
        assert_eq!(g.topology_key, None);
        assert_eq!(g.annotation(PODSET_PREFERRED_TOPOLOGY), Some(RACK_LABEL));
        assert_eq!(g.annotation(PODSET_SLICE_REQUIRED_TOPOLOGY), Some(RACK_LABEL));
        assert_eq!(g.annotation(PODSET_SLICE_SIZE), Some("64"));
    }
}
