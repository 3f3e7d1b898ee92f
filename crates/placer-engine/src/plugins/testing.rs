//! Builders for plugin tests: nodes, pods and snapshots in a few words.

use std::collections::BTreeMap;
use std::sync::Arc;

use placer_api::k8s::api::core::v1::{
    Affinity, Container, ContainerPort, Node, NodeAffinity, NodeCondition, NodeSelector,
    NodeSelectorRequirement, NodeSelectorTerm, NodeSpec, NodeStatus, Pod, PodAffinity, PodAffinityTerm,
    PodAntiAffinity, PodSpec, PreferredSchedulingTerm, ResourceRequirements, Taint, Toleration,
    TopologySpreadConstraint, WeightedPodAffinityTerm,
};
use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};

use crate::model::{NodeStatic, PodInfo};
use crate::snapshot::Snapshot;

/// A node under construction.
pub struct NodeBuilder {
    node: Node,
}

/// Starts a node with 110 pod slots and nothing else.
pub fn node(name: &str) -> NodeBuilder {
    let mut alloc = BTreeMap::new();
    alloc.insert("pods".to_string(), Quantity("110".into()));
    NodeBuilder {
        node: Node {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus { allocatable: Some(alloc), ..Default::default() }),
        },
    }
}

impl NodeBuilder {
    fn alloc(mut self, name: &str, q: &str) -> Self {
        if let Some(a) = self.node.status.as_mut().and_then(|s| s.allocatable.as_mut()) {
            a.insert(name.to_string(), Quantity(q.into()));
        }
        self
    }
    pub fn cpu(self, q: &str) -> Self {
        self.alloc("cpu", q)
    }
    pub fn mem(self, q: &str) -> Self {
        self.alloc("memory", q)
    }
    pub fn pods(self, n: u32) -> Self {
        self.alloc("pods", &n.to_string())
    }
    pub fn gpus(self, n: u32) -> Self {
        self.alloc("nvidia.com/gpu", &n.to_string())
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.node.metadata.labels.get_or_insert_with(BTreeMap::new).insert(k.into(), v.into());
        self
    }
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        let spec = self.node.spec.get_or_insert_with(NodeSpec::default);
        spec.taints.get_or_insert_with(Vec::new).push(Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.into()),
            effect: effect.into(),
            time_added: None::<Time>,
        });
        self
    }
    /// `status.images` gains an image with these names and size.
    pub fn image(mut self, names: &[&str], size_bytes: i64) -> Self {
        if let Some(s) = self.node.status.as_mut() {
            s.images.get_or_insert_with(Vec::new).push(placer_api::k8s::api::core::v1::ContainerImage {
                names: Some(names.iter().map(|n| n.to_string()).collect()),
                size_bytes: Some(size_bytes),
            });
        }
        self
    }
    pub fn unschedulable(mut self) -> Self {
        self.node.spec.get_or_insert_with(NodeSpec::default).unschedulable = Some(true);
        self
    }
    pub fn not_ready(mut self) -> Self {
        if let Some(s) = self.node.status.as_mut() {
            s.conditions = Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "False".into(),
                ..Default::default()
            }]);
        }
        self
    }
    pub fn build(self) -> NodeStatic {
        NodeStatic::from_node(Arc::new(self.node)).expect("test node")
    }
}

/// A label selector `{matchLabels: {k: v}}`.
pub fn match_labels(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        match_expressions: None,
    }
}

/// A node selector requirement.
pub fn node_req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: op.into(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
    }
}

/// A pod affinity term over `topology_key` selecting `selector` in the pod's namespace.
pub fn affinity_term(topology_key: &str, selector: LabelSelector) -> PodAffinityTerm {
    PodAffinityTerm {
        topology_key: topology_key.into(),
        label_selector: Some(selector),
        ..Default::default()
    }
}

/// A pod under construction.
pub struct PodBuilder {
    pod: Pod,
    requests: BTreeMap<String, Quantity>,
    ports: Vec<ContainerPort>,
    images: Vec<String>,
}

/// Starts a pod in namespace `default` with one container and no requests.
pub fn pod(name: &str) -> PodBuilder {
    PodBuilder {
        pod: Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec: Some(PodSpec::default()),
            status: None,
        },
        requests: BTreeMap::new(),
        ports: Vec::new(),
        images: Vec::new(),
    }
}

impl PodBuilder {
    fn spec(&mut self) -> &mut PodSpec {
        self.pod.spec.get_or_insert_with(PodSpec::default)
    }
    fn affinity(&mut self) -> &mut Affinity {
        self.spec().affinity.get_or_insert_with(Affinity::default)
    }
    pub fn cpu(mut self, q: &str) -> Self {
        self.requests.insert("cpu".into(), Quantity(q.into()));
        self
    }
    pub fn mem(mut self, q: &str) -> Self {
        self.requests.insert("memory".into(), Quantity(q.into()));
        self
    }
    pub fn gpu(mut self, n: u32) -> Self {
        self.requests.insert("nvidia.com/gpu".into(), Quantity(n.to_string()));
        self
    }
    pub fn namespace(mut self, ns: &str) -> Self {
        self.pod.metadata.namespace = Some(ns.into());
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.pod.metadata.labels.get_or_insert_with(BTreeMap::new).insert(k.into(), v.into());
        self
    }
    /// Bound to `node`.
    pub fn on(mut self, node: &str) -> Self {
        self.spec().node_name = Some(node.into());
        self
    }
    pub fn terminating(mut self) -> Self {
        self.pod.metadata.deletion_timestamp = Some(Time(Default::default()));
        self
    }
    pub fn toleration(mut self, key: &str, op: &str, value: &str, effect: &str) -> Self {
        self.spec().tolerations.get_or_insert_with(Vec::new).push(Toleration {
            key: (!key.is_empty()).then(|| key.into()),
            operator: (!op.is_empty()).then(|| op.into()),
            value: (!value.is_empty()).then(|| value.into()),
            effect: (!effect.is_empty()).then(|| effect.into()),
            toleration_seconds: None,
        });
        self
    }
    pub fn node_selector(mut self, k: &str, v: &str) -> Self {
        self.spec().node_selector.get_or_insert_with(BTreeMap::new).insert(k.into(), v.into());
        self
    }
    /// Adds a required node affinity term (terms are ORed).
    pub fn required_node_term(
        mut self,
        exprs: Vec<NodeSelectorRequirement>,
        fields: Vec<NodeSelectorRequirement>,
    ) -> Self {
        let na = self.affinity().node_affinity.get_or_insert_with(NodeAffinity::default);
        let sel =
            na.required_during_scheduling_ignored_during_execution.get_or_insert_with(NodeSelector::default);
        sel.node_selector_terms.push(NodeSelectorTerm {
            match_expressions: (!exprs.is_empty()).then_some(exprs),
            match_fields: (!fields.is_empty()).then_some(fields),
        });
        self
    }
    pub fn preferred_node_term(mut self, weight: i32, exprs: Vec<NodeSelectorRequirement>) -> Self {
        let na = self.affinity().node_affinity.get_or_insert_with(NodeAffinity::default);
        na.preferred_during_scheduling_ignored_during_execution.get_or_insert_with(Vec::new).push(
            PreferredSchedulingTerm {
                weight,
                preference: NodeSelectorTerm { match_expressions: Some(exprs), match_fields: None },
            },
        );
        self
    }
    pub fn pod_affinity(mut self, term: PodAffinityTerm) -> Self {
        let pa = self.affinity().pod_affinity.get_or_insert_with(PodAffinity::default);
        pa.required_during_scheduling_ignored_during_execution.get_or_insert_with(Vec::new).push(term);
        self
    }
    pub fn pod_anti_affinity(mut self, term: PodAffinityTerm) -> Self {
        let pa = self.affinity().pod_anti_affinity.get_or_insert_with(PodAntiAffinity::default);
        pa.required_during_scheduling_ignored_during_execution.get_or_insert_with(Vec::new).push(term);
        self
    }
    pub fn preferred_pod_affinity(mut self, weight: i32, term: PodAffinityTerm) -> Self {
        let pa = self.affinity().pod_affinity.get_or_insert_with(PodAffinity::default);
        pa.preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(WeightedPodAffinityTerm { weight, pod_affinity_term: term });
        self
    }
    pub fn preferred_pod_anti_affinity(mut self, weight: i32, term: PodAffinityTerm) -> Self {
        let pa = self.affinity().pod_anti_affinity.get_or_insert_with(PodAntiAffinity::default);
        pa.preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(WeightedPodAffinityTerm { weight, pod_affinity_term: term });
        self
    }
    pub fn spread(mut self, c: TopologySpreadConstraint) -> Self {
        self.spec().topology_spread_constraints.get_or_insert_with(Vec::new).push(c);
        self
    }
    /// Adds a port to the pod's container.
    pub fn port(mut self, p: ContainerPort) -> Self {
        self.ports.push(p);
        self
    }
    /// The pod's containers run these images (the first holds the requests and ports).
    pub fn images(mut self, images: &[&str]) -> Self {
        self.images = images.iter().map(|i| i.to_string()).collect();
        self
    }
    /// Names ResourceClaim `claim` in `spec.resourceClaims` under `entry`.
    pub fn resource_claim(mut self, entry: &str, claim: &str) -> Self {
        self.spec().resource_claims.get_or_insert_with(Vec::new).push(
            placer_api::k8s::api::core::v1::PodResourceClaim {
                name: entry.into(),
                resource_claim_name: Some(claim.into()),
                ..Default::default()
            },
        );
        self
    }
    /// Names template `template` in `spec.resourceClaims` under `entry`, with the claim
    /// generated for the pod, `generated`, recorded in `status.resourceClaimStatuses` (as
    /// the ResourceClaim controller does); the pod's uid becomes `uid-<pod name>`, the
    /// controller owner the generated claim must name.
    pub fn template_claim(mut self, entry: &str, template: &str, generated: &str) -> Self {
        use placer_api::k8s::api::core::v1::{PodResourceClaim, PodResourceClaimStatus, PodStatus};
        self.spec().resource_claims.get_or_insert_with(Vec::new).push(PodResourceClaim {
            name: entry.into(),
            resource_claim_template_name: Some(template.into()),
            ..Default::default()
        });
        let uid = format!("uid-{}", self.pod.metadata.name.as_deref().unwrap_or_default());
        self.pod.metadata.uid = Some(uid);
        self.pod
            .status
            .get_or_insert_with(PodStatus::default)
            .resource_claim_statuses
            .get_or_insert_with(Vec::new)
            .push(PodResourceClaimStatus { name: entry.into(), resource_claim_name: Some(generated.into()) });
        self
    }
    pub fn build(mut self) -> PodInfo {
        let requests = std::mem::take(&mut self.requests);
        let ports = std::mem::take(&mut self.ports);
        let images = std::mem::take(&mut self.images);
        let first = Container {
            name: "c".into(),
            ports: (!ports.is_empty()).then_some(ports),
            resources: Some(ResourceRequirements {
                requests: (!requests.is_empty()).then_some(requests),
                ..Default::default()
            }),
            image: images.first().cloned(),
            ..Default::default()
        };
        let mut containers = vec![first];
        for (i, image) in images.iter().enumerate().skip(1) {
            containers.push(Container {
                name: format!("c{i}"),
                image: Some(image.clone()),
                ..Default::default()
            });
        }
        self.spec().containers = containers;
        PodInfo::from_pod(Arc::new(self.pod)).expect("test pod")
    }
}

/// A spread constraint with the defaults of the API.
pub fn spread(
    max_skew: i32,
    topology_key: &str,
    when: &str,
    selector: LabelSelector,
) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew,
        topology_key: topology_key.into(),
        when_unsatisfiable: when.into(),
        label_selector: Some(selector),
        ..Default::default()
    }
}

/// A snapshot with these nodes and bound pods.
pub fn snapshot_with(nodes: Vec<NodeStatic>, pods: Vec<PodInfo>) -> Snapshot {
    let mut s = Snapshot::new();
    for n in nodes {
        s.upsert_node(n);
    }
    for p in pods {
        s.upsert_pod(Arc::new(p));
    }
    s
}

/// DeviceClass `name` selecting every device of `driver` (`device.driver == "<driver>"`).
pub fn device_class(name: &str, driver: &str) -> Arc<placer_api::k8s::api::resource::v1::DeviceClass> {
    use placer_api::k8s::api::resource::v1::{
        CELDeviceSelector, DeviceClass, DeviceClassSpec, DeviceSelector,
    };
    Arc::new(DeviceClass {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: DeviceClassSpec {
            selectors: Some(vec![DeviceSelector {
                cel: Some(CELDeviceSelector { expression: format!("device.driver == {driver:?}") }),
            }]),
            ..Default::default()
        },
    })
}
