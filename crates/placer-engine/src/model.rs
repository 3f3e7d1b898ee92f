//! The engine's view of cluster objects: [`PodInfo`], [`NodeInfo`], [`PodGroupInfo`].
//!
//! Nodes and PodGroups wrap the real Kubernetes object (`Arc<Node>`, `Arc<PodGroup>`) and
//! add what the algorithms read on hot paths, computed once when the object arrives. Pods,
//! by far the most numerous, keep only what the engine reads ([`PodSchedulingView`]).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use placer_api::annotations::{JOB_COMPLETION_INDEX, POD_GROUP_POD_INDEX, POD_GROUP_POD_INDEX_LABEL};
use placer_api::k8s::api::core::v1::{
    Affinity, ContainerPort, Node, Pod, Toleration, TopologySpreadConstraint, Volume,
};
use placer_api::k8s::api::scheduling::v1alpha2::PodGroup;
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::Time;

use crate::resources::{ResourceError, Resources};

mod binding;
pub(crate) use binding::differs_only_by_binding;

/// `namespace/name` of a namespaced object. Keys are cloned into every index the engine
/// keeps (queue, snapshot, assumptions, group members, decisions), so a key is one shared
/// allocation ([`KeyNames`], read through `Deref`: `key.name`, `key.namespace`) and its
/// hash: 16 bytes in a map's bucket, and a clone or a drop is one reference-count update
/// (an atomic operation, which waits for the stores before it; two per clone when the key
/// held both strings).
///
/// The key's hash is computed once, when it is made, and kept beside the pointer: the
/// engine's maps (pods, queue, snapshot locations, assumptions) hash a key several times
/// per event, and hashing (a map growing rehashes every key) reads one number without
/// following the pointer. Equality compares that number first, then the pointer, then the
/// names. The names are read-only: [`ObjectKey::new`] and [`KeyRef`] are the only
/// constructors. Order is by namespace, then name.
#[derive(Clone)]
pub struct ObjectKey {
    names: Arc<KeyNames>,
    hash: u64,
}

/// The names of an [`ObjectKey`]. The strings are shared too: most keys of a run share a
/// few namespaces, and a PodGroup's key shares its namespace with its pods'.
pub struct KeyNames {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl std::ops::Deref for ObjectKey {
    type Target = KeyNames;

    fn deref(&self) -> &KeyNames {
        &self.names
    }
}

impl ObjectKey {
    pub fn new(namespace: impl Into<Arc<str>>, name: impl Into<Arc<str>>) -> Self {
        let (namespace, name) = (namespace.into(), name.into());
        let hash = Self::hash_of(&namespace, &name);
        ObjectKey { names: Arc::new(KeyNames { namespace, name }), hash }
    }

    /// The hash of the key `namespace/name` (what [`ObjectKey::content_hash`] returns).
    fn hash_of(namespace: &str, name: &str) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        namespace.hash(&mut h);
        name.hash(&mut h);
        h.finish()
    }

    /// `FxHasher` over the namespace, then the name, as a `str` hashes (computed once, when
    /// the key was made). Stable for a given key: decisions may depend on it (the start of
    /// a sampled node search).
    pub fn content_hash(&self) -> u64 {
        self.hash
    }
}

impl PartialEq for ObjectKey {
    fn eq(&self, other: &Self) -> bool {
        // Keys cloned from one another share their names: pointers first, bytes after.
        self.hash == other.hash
            && (Arc::ptr_eq(&self.names, &other.names)
                || (same_str(&self.name, &other.name) && same_str(&self.namespace, &other.namespace)))
    }
}

/// Equal strings, by pointer first.
fn same_str(a: &Arc<str>, b: &Arc<str>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

impl Eq for ObjectKey {}

impl std::hash::Hash for ObjectKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl Ord for ObjectKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // Keys cloned from one another share their names: equal without reading them.
        if Arc::ptr_eq(&self.names, &other.names) {
            return std::cmp::Ordering::Equal;
        }
        (&self.namespace, &self.name).cmp(&(&other.namespace, &other.name))
    }
}

impl PartialOrd for ObjectKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectKey").field("namespace", &self.namespace).field("name", &self.name).finish()
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The value of `key` in `map`, made empty when missing. The key is copied only then:
/// `entry(key.clone())` copies it on every call, and a copy is an atomic update (a
/// PodGroup's entries are looked up this way on every member that joins or is queued).
pub(crate) fn value_or_default<'a, V: Default>(
    map: &'a mut rustc_hash::FxHashMap<ObjectKey, V>,
    key: &ObjectKey,
) -> &'a mut V {
    if !map.contains_key(key) {
        map.insert(key.clone(), V::default());
    }
    map.get_mut(key).expect("inserted above")
}

/// `namespace/name` borrowed from an object: finds an [`ObjectKey`] in a map without
/// making one (two string allocations, and their release, per lookup). A map keyed by
/// `ObjectKey` is searched with `map.get(key_ref.as_dyn())`: `ObjectKey` borrows as
/// `dyn KeyParts`, which hashes and compares as the key does.
pub struct KeyRef<'a> {
    namespace: &'a str,
    name: &'a str,
    hash: u64,
}

impl<'a> KeyRef<'a> {
    pub fn new(namespace: &'a str, name: &'a str) -> Self {
        KeyRef { namespace, name, hash: ObjectKey::hash_of(namespace, name) }
    }

    /// The form map lookups take.
    pub fn as_dyn(&self) -> &(dyn KeyParts + 'a) {
        self
    }

    /// The owned key (allocates both strings and the names they are held in).
    pub fn to_key(&self) -> ObjectKey {
        let names = KeyNames { namespace: self.namespace.into(), name: self.name.into() };
        ObjectKey { names: Arc::new(names), hash: self.hash }
    }

    /// The owned key, sharing `namespace` when it is this key's (most pods of a run share
    /// a few namespaces): allocates the name and the names it is held in.
    pub fn to_key_sharing(&self, namespace: &Arc<str>) -> ObjectKey {
        let namespace =
            if **namespace == *self.namespace { namespace.clone() } else { self.namespace.into() };
        ObjectKey { names: Arc::new(KeyNames { namespace, name: self.name.into() }), hash: self.hash }
    }
}

/// What a key is made of, owned ([`ObjectKey`]) or borrowed ([`KeyRef`]). Hash and
/// equality of `dyn KeyParts` are [`ObjectKey`]'s: the precomputed hash, then the names.
pub trait KeyParts {
    fn parts(&self) -> (u64, &str, &str);
}

impl KeyParts for ObjectKey {
    fn parts(&self) -> (u64, &str, &str) {
        (self.hash, &self.namespace, &self.name)
    }
}

impl KeyParts for KeyRef<'_> {
    fn parts(&self) -> (u64, &str, &str) {
        (self.hash, self.namespace, self.name)
    }
}

impl<'a> std::borrow::Borrow<dyn KeyParts + 'a> for ObjectKey {
    fn borrow(&self) -> &(dyn KeyParts + 'a) {
        self
    }
}

impl std::hash::Hash for dyn KeyParts + '_ {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.parts().0);
    }
}

impl PartialEq for dyn KeyParts + '_ {
    fn eq(&self, other: &Self) -> bool {
        let ((h1, ns1, n1), (h2, ns2, n2)) = (self.parts(), other.parts());
        h1 == h2 && n1 == n2 && ns1 == ns2
    }
}

impl Eq for dyn KeyParts + '_ {}

pub type PodKey = ObjectKey;
pub type GroupKey = ObjectKey;

/// Index of a node in the [`crate::snapshot::Snapshot`]; stable while the node exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// A pod as the engine sees it.
///
/// The engine does not keep the Pod object: a Pod with its containers takes several KiB,
/// nearly all of it fields scheduling never reads (images, commands, env, volumes,
/// probes). [`PodInfo::from_pod`] copies out what the engine reads: the scalar facts
/// below and the constraints in [`PodSchedulingView`].
#[derive(Debug, Clone, PartialEq)]
pub struct PodInfo {
    /// The constraints and status facts of the pod object the algorithms read; shared
    /// between the clones of this info (e.g. the assumed copy made at binding).
    pub view: Arc<PodSchedulingView>,
    pub key: PodKey,
    /// `metadata.uid` (shared: every copy of the record, e.g. the bound one, holds it).
    pub uid: Arc<str>,
    /// Effective requests as Kubernetes computes them: max(sum of containers (plus
    /// restartable init containers), each init container) plus overhead. Never includes
    /// `pods`.
    pub requests: Resources,
    /// Pod priority, resolved by the engine (`spec.priority`, else its PriorityClass; 0
    /// when unset). The raw fields are [`PodSchedulingView::spec_priority`] and
    /// [`PodSchedulingView::priority_class_name`].
    pub priority: i32,
    /// `spec.preemptionPolicy == Never`.
    pub preemption_never: bool,
    /// The PodGroup named by `spec.schedulingGroup.podGroupName`, in the pod's namespace
    /// (its key made once, so that [`PodInfo::group_key`] neither copies a string nor
    /// hashes one).
    pub group: Option<GroupKey>,
    /// `spec.nodeName`: bound (or, inside a cycle, assumed) node.
    pub node_name: Option<Arc<str>>,
    /// `status.nominatedNodeName`.
    pub nominated_node_name: Option<String>,
    /// `spec.schedulerName` ("default-scheduler" when unset), shared with the records read
    /// before it that name the same scheduler.
    pub scheduler_name: Arc<str>,
    /// Has at least one scheduling gate.
    pub gated: bool,
    /// Phase Succeeded or Failed: uses no capacity.
    pub terminal: bool,
    /// Has a deletion timestamp.
    pub deleting: bool,
}

/// The parts of a Pod object the scheduling algorithms read, copied out of it once when
/// the pod arrives, with the API's own types so the plugins keep kube-scheduler's logic.
///
/// Lists most pods leave empty are boxed slices (no allocation when empty) and the
/// affinity is boxed, so an ordinary pod pays for little more than its labels.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSchedulingView {
    /// `metadata.labels` (empty when unset).
    pub labels: BTreeMap<String, String>,
    /// `spec.nodeSelector` (empty when unset).
    pub node_selector: BTreeMap<String, String>,
    /// `spec.affinity`, as written.
    pub affinity: Option<Box<Affinity>>,
    /// `spec.tolerations`.
    pub tolerations: Box<[Toleration]>,
    /// `spec.topologySpreadConstraints`.
    pub topology_spread_constraints: Box<[TopologySpreadConstraint]>,
    /// The ports with a `hostPort` (> 0) of the app containers and of the restartable init
    /// containers (sidecars), which run alongside them; other init containers have exited
    /// before the pod runs.
    pub host_ports: Box<[ContainerPort]>,
    /// Names of `spec.schedulingGates`.
    pub scheduling_gates: Box<[String]>,
    /// `spec.priority` as written ([`PodInfo::priority`] is the resolved value).
    pub spec_priority: Option<i32>,
    /// `spec.priorityClassName`.
    pub priority_class_name: Option<String>,
    /// The pod's index in its group, for rank-ordered placement ([`pod_index`]).
    pub pod_index: Option<u64>,
    /// The pod's `kueue.x-k8s.io/pod-index-offset` annotation as written (Kueue's ungater
    /// reads it from the pods of a PodSet; [`crate::tas::pod_index_offset`] parses it).
    /// Rare, so behind one thin pointer (8 bytes inline, where a `Box<str>` takes 16).
    pub pod_index_offset: Option<Box<String>>,
    /// `status.startTime`.
    pub start_time: Option<Time>,
    /// `status.conditions` has `Ready=False`.
    pub reports_not_ready: bool,
    /// `spec.resourceClaims` with the claims generated for them (DRA).
    pub resource_claims: Box<[PodClaim]>,
    /// The images of the init and app containers, in that order, normalized as
    /// kube-scheduler's ImageLocality does (`:latest` added when there is no tag).
    pub images: Box<[String]>,
    /// The volumes the volume plugins read: PersistentVolumeClaims (named or generic
    /// ephemeral) and the inline sources VolumeRestrictions checks.
    pub volumes: Box<[PodVolume]>,
}

/// One `spec.volumes` entry a volume plugin reads.
#[derive(Debug, Clone, PartialEq)]
pub enum PodVolume {
    /// A PersistentVolumeClaim: `persistentVolumeClaim.claimName`, or for a generic
    /// ephemeral volume `<pod>-<volume>` (the claim must then be owned by the pod).
    Claim { claim: String, ephemeral: bool },
    /// An inline GCE PD, AWS EBS, RBD or iSCSI volume (VolumeRestrictions' disk conflicts),
    /// or Azure Disk, Cinder or Portworx volume (NodeVolumeLimits counts those a CSI driver
    /// migrated).
    Inline(Box<Volume>),
}

impl PodVolume {
    /// The volumes of a pod that the volume plugins read, in `spec.volumes` order.
    pub fn of(pod: &Pod) -> Box<[PodVolume]> {
        let pod_name = pod.metadata.name.as_deref().unwrap_or("");
        pod.spec
            .as_ref()
            .and_then(|s| s.volumes.as_deref())
            .unwrap_or(&[])
            .iter()
            .filter_map(|v| {
                if let Some(c) = &v.persistent_volume_claim {
                    Some(PodVolume::Claim { claim: c.claim_name.clone(), ephemeral: false })
                } else if v.ephemeral.is_some() {
                    Some(PodVolume::Claim { claim: format!("{pod_name}-{}", v.name), ephemeral: true })
                } else if v.gce_persistent_disk.is_some()
                    || v.aws_elastic_block_store.is_some()
                    || v.rbd.is_some()
                    || v.iscsi.is_some()
                    || v.azure_disk.is_some()
                    || v.cinder.is_some()
                    || v.portworx_volume.is_some()
                {
                    Some(PodVolume::Inline(Box::new(v.clone())))
                } else {
                    None
                }
            })
            .collect()
    }

    /// The claim's name, for a claim volume.
    pub fn claim(&self) -> Option<&str> {
        match self {
            PodVolume::Claim { claim, .. } => Some(claim),
            PodVolume::Inline(_) => None,
        }
    }
}

/// One `spec.resourceClaims` entry of a pod, with the name of the claim the control plane
/// generated for it when it names a template (`status.resourceClaimStatuses`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodClaim {
    pub name: String,
    pub resource_claim_name: Option<String>,
    pub resource_claim_template_name: Option<String>,
    /// The status entry: `None` while there is none; `Some(None)` when no claim is needed.
    pub generated: Option<Option<String>>,
}

impl PodClaim {
    /// The entries of a pod.
    pub fn of(pod: &Pod) -> Box<[PodClaim]> {
        let statuses = pod.status.as_ref().and_then(|s| s.resource_claim_statuses.as_deref()).unwrap_or(&[]);
        pod.spec
            .as_ref()
            .and_then(|s| s.resource_claims.as_deref())
            .unwrap_or(&[])
            .iter()
            .map(|c| PodClaim {
                name: c.name.clone(),
                resource_claim_name: c.resource_claim_name.clone(),
                resource_claim_template_name: c.resource_claim_template_name.clone(),
                generated: statuses.iter().find(|s| s.name == c.name).map(|s| s.resource_claim_name.clone()),
            })
            .collect()
    }
}

/// A pod's index in its group, the rank Kueue's rank-ordered placement reads
/// (`pkg/controller/tas/topology_ungater.go`, `pkg/controller/jobs/pod/pod_webhook.go`):
/// * annotation `kueue.x-k8s.io/pod-group-pod-index-label: L`: the value of label `L` (Kueue's
///   pod webhook copies it into `kueue.x-k8s.io/pod-group-pod-index`, an absent `L` as "");
/// * else label `kueue.x-k8s.io/pod-group-pod-index` (plain pods in a pod group);
/// * else `batch.kubernetes.io/job-completion-index` (label, then the annotation the Job
///   controller also writes).
///
/// The first of these that is present decides; it must read as Go's `strconv.ParseUint`
/// reads (decimal digits only), else the pod has no index.
pub fn pod_index(meta: &placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<u64> {
    let label = |k: &str| meta.labels.as_ref().and_then(|l| l.get(k)).map(String::as_str);
    let annotation = |k: &str| meta.annotations.as_ref().and_then(|a| a.get(k)).map(String::as_str);
    let value = match annotation(POD_GROUP_POD_INDEX_LABEL) {
        Some(named) => Some(label(named).unwrap_or("")),
        None => label(POD_GROUP_POD_INDEX)
            .or_else(|| label(JOB_COMPLETION_INDEX))
            .or_else(|| annotation(JOB_COMPLETION_INDEX)),
    }?;
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok()
}

impl PodSchedulingView {
    /// Reads the view of a pod object.
    pub fn of(pod: &Pod) -> PodSchedulingView {
        let spec = pod.spec.as_ref();
        let status = pod.status.as_ref();
        let meta = &pod.metadata;
        let sidecars = spec
            .and_then(|s| s.init_containers.as_deref())
            .unwrap_or(&[])
            .iter()
            .filter(|c| c.restart_policy.as_deref() == Some("Always"));
        let host_ports = spec
            .map(|s| s.containers.as_slice())
            .unwrap_or(&[])
            .iter()
            .chain(sidecars)
            .flat_map(|c| c.ports.as_deref().unwrap_or(&[]))
            .filter(|p| p.host_port.is_some_and(|hp| hp > 0))
            .cloned()
            .collect();
        let pod_index = pod_index(meta);
        PodSchedulingView {
            labels: meta.labels.clone().unwrap_or_default(),
            node_selector: spec.and_then(|s| s.node_selector.clone()).unwrap_or_default(),
            affinity: spec.and_then(|s| s.affinity.clone()).map(Box::new),
            tolerations: spec.and_then(|s| s.tolerations.clone()).unwrap_or_default().into(),
            topology_spread_constraints: spec
                .and_then(|s| s.topology_spread_constraints.clone())
                .unwrap_or_default()
                .into(),
            host_ports,
            scheduling_gates: spec
                .and_then(|s| s.scheduling_gates.as_ref())
                .map(|g| g.iter().map(|g| g.name.clone()).collect())
                .unwrap_or_default(),
            spec_priority: spec.and_then(|s| s.priority),
            priority_class_name: spec.and_then(|s| s.priority_class_name.clone()),
            pod_index,
            pod_index_offset: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(placer_api::annotations::POD_INDEX_OFFSET))
                .map(|v| Box::new(v.clone())),
            start_time: status.and_then(|s| s.start_time.clone()),
            reports_not_ready: status
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "False")),
            resource_claims: PodClaim::of(pod),
            images: spec
                .map(|s| s.init_containers.as_deref().unwrap_or(&[]).iter().chain(&s.containers))
                .into_iter()
                .flatten()
                .map(|c| normalized_image_name(c.image.as_deref().unwrap_or("")))
                .collect(),
            volumes: PodVolume::of(pod),
        }
    }

    /// Whether the fields read from `spec` and the labels are equal: what decides whether
    /// an update of a pending pod can change its scheduling outcome. Status fields and the
    /// annotation-borne completion index are not compared.
    pub fn same_spec_and_labels(&self, other: &PodSchedulingView) -> bool {
        // Destructured so that a new field needs a decision here.
        let PodSchedulingView {
            labels,
            node_selector,
            affinity,
            tolerations,
            topology_spread_constraints,
            host_ports,
            scheduling_gates,
            spec_priority,
            priority_class_name,
            pod_index: _,
            pod_index_offset: _,
            start_time: _,
            reports_not_ready: _,
            resource_claims, // the generated claim names (status) decide where a pod can go
            images: _,       // ImageLocality scores only: cannot make a pending pod fit
            volumes,
        } = self;
        *labels == other.labels
            && *node_selector == other.node_selector
            && *affinity == other.affinity
            && *tolerations == other.tolerations
            && *topology_spread_constraints == other.topology_spread_constraints
            && *host_ports == other.host_ports
            && *scheduling_gates == other.scheduling_gates
            && *spec_priority == other.spec_priority
            && *priority_class_name == other.priority_class_name
            && *resource_claims == other.resource_claims
            && *volumes == other.volumes
    }
}

/// An image name as the node reports it: `:latest` is added when the name has no tag (no
/// `:` after the last `/`), as kube-scheduler's ImageLocality normalizes container images.
pub fn normalized_image_name(name: &str) -> String {
    let colon = name.rfind(':').map_or(-1, |i| i as i64);
    let slash = name.rfind('/').map_or(-1, |i| i as i64);
    if colon <= slash {
        format!("{name}:latest")
    } else {
        name.to_string()
    }
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

/// The record's `spec.schedulerName` ("default-scheduler" for an unset or empty field).
/// Nearly every pod names the same scheduler: the last name read is kept per thread and
/// shared by the next record that names it, instead of a new string per pod.
fn scheduler_name(name: Option<&str>) -> Arc<str> {
    thread_local! {
        static LAST: std::cell::RefCell<Arc<str>> = std::cell::RefCell::new(Arc::from("default-scheduler"));
    }
    let name = name.filter(|n| !n.is_empty()).unwrap_or("default-scheduler");
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if &**last != name {
            *last = Arc::from(name);
        }
        last.clone()
    })
}

impl PodInfo {
    /// Reads a pod; the object is dropped once its fields are copied out. Fails only on
    /// unreadable quantities.
    pub fn from_pod(pod: Arc<Pod>) -> Result<PodInfo, ModelError> {
        let name = pod.metadata.name.as_deref().ok_or(ModelError::MissingName { kind: "Pod" })?;
        let key = ObjectKey::new(pod.metadata.namespace.as_deref().unwrap_or("default"), name);
        Self::from_pod_keyed(pod, key)
    }

    /// [`Self::from_pod`] with the pod's key already made by the caller (`namespace/name` of
    /// `pod`, the namespace "default" when unset).
    pub(crate) fn from_pod_keyed(pod: Arc<Pod>, key: ObjectKey) -> Result<PodInfo, ModelError> {
        debug_assert!(
            pod.metadata.name.as_deref() == Some(&*key.name)
                && pod.metadata.namespace.as_deref().unwrap_or("default") == &*key.namespace,
            "the key is the pod's"
        );
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
        let view = PodSchedulingView::of(&pod);
        let group = spec
            .and_then(|s| s.scheduling_group.as_ref())
            .and_then(|g| g.pod_group_name.as_deref())
            .map(|g| GroupKey::new(key.namespace.clone(), g));
        Ok(PodInfo {
            key,
            uid: pod.metadata.uid.as_deref().unwrap_or_default().into(),
            requests,
            priority: view.spec_priority.unwrap_or(0),
            preemption_never: spec.and_then(|s| s.preemption_policy.as_deref()) == Some("Never"),
            group,
            node_name: spec.and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty()).map(Arc::from),
            nominated_node_name: status.and_then(|s| s.nominated_node_name.clone()).filter(|n| !n.is_empty()),
            scheduler_name: scheduler_name(spec.and_then(|s| s.scheduler_name.as_deref())),
            gated: !view.scheduling_gates.is_empty(),
            terminal: matches!(phase, Some("Succeeded") | Some("Failed")),
            deleting: pod.metadata.deletion_timestamp.is_some(),
            view: Arc::new(view),
        })
    }

    /// Whether `pod` (key `key`) reads exactly as `prev_pod`, whose record is `prev`, does:
    /// the members of a gang are created alike, and a record built from the previous
    /// member's ([`Self::alike`]) shares its view instead of reading the same fields again.
    ///
    /// Valid when everything [`Self::from_pod_keyed`] and [`PodSchedulingView::of`] read
    /// is equal but the pod's identity: the namespace, `spec`, `status`, the labels, the
    /// annotations and whether the pod is being deleted; and the name, when a generic
    /// ephemeral volume names its claim after the pod. When false, the caller reads the pod
    /// in full.
    pub(crate) fn reads_alike(prev: &PodInfo, prev_pod: &Pod, pod: &Pod, key: &ObjectKey) -> bool {
        let (meta, prev_meta) = (&pod.metadata, &prev_pod.metadata);
        let ephemeral = || {
            pod.spec
                .as_ref()
                .and_then(|s| s.volumes.as_deref())
                .is_some_and(|v| v.iter().any(|v| v.ephemeral.is_some()))
        };
        key.namespace == prev.key.namespace
            && pod.spec == prev_pod.spec
            && pod.status == prev_pod.status
            && meta.labels == prev_meta.labels
            && meta.annotations == prev_meta.annotations
            && meta.deletion_timestamp.is_some() == prev_meta.deletion_timestamp.is_some()
            && (meta.name == prev_meta.name || !ephemeral())
    }

    /// [`Self::reads_alike`], then [`Self::alike`].
    #[cfg(test)]
    pub(crate) fn read_like(prev: &PodInfo, prev_pod: &Pod, pod: &Pod, key: ObjectKey) -> Option<PodInfo> {
        Self::reads_alike(prev, prev_pod, pod, &key).then(|| Self::alike(prev, pod, key))
    }

    /// The record of `pod` (key `key`) once [`Self::reads_alike`] holds: `prev`'s, with the
    /// pod's identity. `priority` is what [`Self::from_pod_keyed`] gives (the spec's), to be
    /// resolved by the caller as for any read.
    pub(crate) fn alike(prev: &PodInfo, pod: &Pod, key: ObjectKey) -> PodInfo {
        let meta = &pod.metadata;
        // Field by field (no `..prev.clone()`), so that the previous pod's key and uid are
        // not copied only to be dropped; a new field needs a decision here.
        PodInfo {
            view: prev.view.clone(),
            key,
            uid: meta.uid.as_deref().unwrap_or_default().into(),
            requests: prev.requests.clone(),
            priority: prev.view.spec_priority.unwrap_or(0),
            preemption_never: prev.preemption_never,
            group: prev.group.clone(),
            node_name: prev.node_name.clone(),
            nominated_node_name: prev.nominated_node_name.clone(),
            scheduler_name: prev.scheduler_name.clone(),
            gated: prev.gated,
            terminal: prev.terminal,
            deleting: prev.deleting,
        }
    }

    /// Whether `self` and `other` are alike but for their identity (name and uid): one view
    /// (shared, as [`Self::alike`] makes it) and equal fields besides. Cheap: the view
    /// is compared by pointer, not field by field.
    pub fn same_but_identity(&self, other: &PodInfo) -> bool {
        // Destructured so that a new field needs a decision here.
        let PodInfo {
            view,
            key,
            uid: _,
            requests,
            priority,
            preemption_never,
            group,
            node_name,
            nominated_node_name,
            scheduler_name,
            gated,
            terminal,
            deleting,
        } = self;
        Arc::ptr_eq(view, &other.view)
            && key.namespace == other.key.namespace
            && *requests == other.requests
            && *priority == other.priority
            && *preemption_never == other.preemption_never
            && *group == other.group
            && *node_name == other.node_name
            && *nominated_node_name == other.nominated_node_name
            && *scheduler_name == other.scheduler_name
            && *gated == other.gated
            && *terminal == other.terminal
            && *deleting == other.deleting
    }

    /// The PodGroup the pod belongs to (`spec.schedulingGroup.podGroupName`, in the pod's
    /// namespace), by key.
    pub fn group_key(&self) -> Option<GroupKey> {
        self.group.clone()
    }

    /// `spec.schedulingGroup.podGroupName`.
    pub fn group_name(&self) -> Option<&str> {
        self.group.as_ref().map(|g| &*g.name)
    }

    /// `metadata.labels`.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.view.labels
    }

    /// Whether `self` and `other` agree on every spec field scheduling reads and on the
    /// labels (metadata other than labels, and status, are not compared): an update that
    /// keeps them cannot change where a pending pod fits.
    pub fn same_spec_and_labels(&self, other: &PodInfo) -> bool {
        // Destructured so that a new field needs a decision here.
        let PodInfo {
            view,
            key: _,
            uid: _,
            requests,
            priority: _, // resolved from `view.spec_priority` and `view.priority_class_name`
            preemption_never,
            group,
            node_name,
            nominated_node_name: _,
            scheduler_name,
            gated: _, // follows `view.scheduling_gates`
            terminal: _,
            deleting: _,
        } = self;
        view.same_spec_and_labels(&other.view)
            && *requests == other.requests
            && *preemption_never == other.preemption_never
            && *group == other.group
            && *node_name == other.node_name
            && *scheduler_name == other.scheduler_name
    }

    /// Has pod affinity or anti-affinity terms (required or preferred).
    pub fn has_pod_affinity(&self) -> bool {
        let Some(a) = self.view.affinity.as_deref() else { return false };
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
        self.view
            .affinity
            .as_deref()
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
    path: &dyn Fn() -> String,
) -> Result<Resources, (String, ResourceError)> {
    let Some(r) = r else { return Ok(Resources::default()) };
    let mut out = match &r.requests {
        Some(list) => Resources::from_list(list).map_err(|e| (format!("{}.requests", path()), e))?,
        None => Resources::default(),
    };
    if let Some(limits) = &r.limits {
        for (name, q) in limits {
            if r.requests.as_ref().is_some_and(|req| req.contains_key(name)) {
                continue;
            }
            let mut one = std::collections::BTreeMap::new();
            one.insert(name.clone(), q.clone());
            let value = Resources::from_list(&one).map_err(|e| (format!("{}.limits", path()), e))?;
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
    // The field path is only formatted for an error.
    let container_req = |c: &placer_api::k8s::api::core::v1::Container, list: &'static str, i: usize| {
        requests_with_defaults(c.resources.as_ref(), &|| format!("spec.{list}[{i}].resources"))
    };
    let mut sum = Resources::default();
    for (i, c) in spec.containers.iter().enumerate() {
        sum.add(&container_req(c, "containers", i)?);
    }
    let mut restartable_sum = Resources::default();
    let mut init_max = Resources::default();
    if let Some(inits) = &spec.init_containers {
        for (i, c) in inits.iter().enumerate() {
            let r = container_req(c, "initContainers", i)?;
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
    let pod_level = requests_with_defaults(spec.resources.as_ref(), &|| "spec.resources".to_string())?;
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
    pub name: Arc<str>,
    pub allocatable: Resources,
    pub unschedulable: bool,
    /// `Ready` condition is `True`, or absent (the scenario format's default).
    pub ready: bool,
    /// Not ready: the `Ready` condition's `lastTransitionTime` in Unix milliseconds (a
    /// condition without one counts as not ready since long ago, as Kueue's node failure
    /// controller measures it). `None` when ready.
    pub not_ready_since_unix_ms: Option<i64>,
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
        let ready_cond =
            status.and_then(|s| s.conditions.as_ref()).and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
        let ready = ready_cond.is_none_or(|c| c.status == "True");
        let not_ready_since_unix_ms = match ready_cond {
            Some(c) if !ready => {
                Some(c.last_transition_time.as_ref().map_or(i64::MIN / 2, |t| t.0.as_millisecond()))
            }
            _ => None,
        };
        Ok(NodeStatic {
            not_ready_since_unix_ms,
            unschedulable: node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false),
            name: name.into(),
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

    #[test]
    fn a_borrowed_key_finds_the_owned_key_made_from_the_same_strings_and_no_other() {
        let mut map: rustc_hash::FxHashMap<ObjectKey, u32> = Default::default();
        for (i, (ns, name)) in
            [("ns", "pod-1"), ("ns", "pod-2"), ("other", "pod-1"), ("ns-", "pod-1")].iter().enumerate()
        {
            map.insert(ObjectKey::new(*ns, *name), i as u32);
        }
        for ((ns, name), want) in [
            (("ns", "pod-1"), Some(0)),
            (("other", "pod-1"), Some(2)),
            (("ns-", "pod-1"), Some(3)),
            (("ns", "pod-3"), None),
            (("n", "spod-1"), None),
        ] {
            let borrowed = KeyRef::new(ns, name);
            assert_eq!(map.get(borrowed.as_dyn()).copied(), want, "{ns}/{name}");
            let owned = borrowed.to_key();
            assert_eq!(owned, ObjectKey::new(ns, name));
            assert_eq!(owned.content_hash(), ObjectKey::new(ns, name).content_hash());
            let (found, _) = map.get_key_value(borrowed.as_dyn()).unzip();
            assert_eq!(found.is_some(), want.is_some());
        }
    }

    #[test]
    fn a_key_made_sharing_a_namespace_shares_it_only_when_it_is_the_same() {
        let ns: Arc<str> = Arc::from("ns");
        let shared = KeyRef::new("ns", "pod-1").to_key_sharing(&ns);
        assert!(Arc::ptr_eq(&shared.namespace, &ns));
        assert_eq!(shared, ObjectKey::new("ns", "pod-1"));
        let other = KeyRef::new("other", "pod-1").to_key_sharing(&ns);
        assert_eq!(other, ObjectKey::new("other", "pod-1"));
        assert_eq!(other.content_hash(), ObjectKey::new("other", "pod-1").content_hash());
    }

    #[test]
    fn keys_made_apart_from_the_same_strings_are_one_key_and_order_by_namespace_then_name() {
        use std::hash::{BuildHasher, Hash, Hasher};
        let hasher = rustc_hash::FxBuildHasher;
        let a = ObjectKey::new("ns", String::from("pod-1"));
        let b = ObjectKey::new(Arc::<str>::from("ns"), "pod-1");
        assert!(!Arc::ptr_eq(&a.name, &b.name), "separate strings");
        assert_eq!(a, b);
        assert_eq!(hasher.hash_one(&a), hasher.hash_one(&b));
        let mut h = rustc_hash::FxHasher::default();
        "ns".hash(&mut h);
        "pod-1".hash(&mut h);
        assert_eq!(a.content_hash(), h.finish(), "the strings' hash, as the derived Hash gave");
        assert_ne!(a, ObjectKey::new("ns", "pod-2"));
        assert_ne!(
            ObjectKey::new("a", "bc"),
            ObjectKey::new("ab", "c"),
            "the boundary between the strings counts"
        );
        let mut keys = [ObjectKey::new("b", "a"), ObjectKey::new("a", "z"), ObjectKey::new("a", "b")];
        keys.sort();
        let names: Vec<String> = keys.iter().map(ToString::to_string).collect();
        assert_eq!(names, ["a/b", "a/z", "b/a"]);
        assert_eq!(format!("{a:?}"), r#"ObjectKey { namespace: "ns", name: "pod-1" }"#);
    }

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

    /// A pod that sets every field the engine reads, and many it does not.
    fn full_pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "p", "namespace": "ns", "uid": "u-1",
                "labels": {"app": "db", "batch.kubernetes.io/job-completion-index": "not a number"},
                "annotations": {"batch.kubernetes.io/job-completion-index": "7", "note": "x"}
            },
            "spec": {
                "schedulerName": "placer",
                "priority": 5, "priorityClassName": "high", "preemptionPolicy": "Never",
                "schedulingGroup": {"podGroupName": "pg"},
                "schedulingGates": [{"name": "a"}, {"name": "b"}],
                "nodeSelector": {"disk": "ssd"},
                "affinity": {
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
                    ]}},
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "db"}}}
                    ]}
                },
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "topologySpreadConstraints": [{
                    "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "db"}}
                }],
                "initContainers": [
                    {"name": "setup", "image": "i", "ports": [{"containerPort": 1, "hostPort": 1}]},
                    {"name": "sidecar", "image": "i", "restartPolicy": "Always",
                     "ports": [{"containerPort": 9000, "hostPort": 9000, "protocol": "UDP"}]}
                ],
                "containers": [{
                    "name": "c", "image": "registry.example.com/db:1", "command": ["run"],
                    "env": [{"name": "A", "value": "1"}],
                    "resources": {"requests": {"cpu": "1"}},
                    "ports": [
                        {"containerPort": 80},
                        {"containerPort": 8080, "hostPort": 8080, "hostIP": "10.0.0.1"}
                    ]
                }]
            },
            "status": {
                "startTime": "2024-01-02T03:04:05Z",
                "nominatedNodeName": "n1",
                "conditions": [{"type": "Ready", "status": "False"}]
            }
        }))
        .expect("pod")
    }

    #[test]
    fn the_view_keeps_every_field_scheduling_reads() {
        let pod = full_pod();
        let info = PodInfo::from_pod(Arc::new(pod.clone())).unwrap();
        let spec = pod.spec.as_ref().unwrap();
        let v = &*info.view;
        assert_eq!(Some(&v.labels), pod.metadata.labels.as_ref());
        assert_eq!(Some(&v.node_selector), spec.node_selector.as_ref());
        assert_eq!(v.affinity.as_deref(), spec.affinity.as_ref());
        assert_eq!(Some(&*v.tolerations), spec.tolerations.as_deref());
        assert_eq!(Some(&*v.topology_spread_constraints), spec.topology_spread_constraints.as_deref());
        let ports: Vec<(i32, Option<&str>, Option<&str>)> = v
            .host_ports
            .iter()
            .map(|p| (p.host_port.unwrap(), p.host_ip.as_deref(), p.protocol.as_deref()))
            .collect();
        assert_eq!(
            ports,
            vec![(8080, Some("10.0.0.1"), None), (9000, None, Some("UDP"))],
            "host ports of containers and sidecars, not of other init containers or of ports without one"
        );
        assert_eq!(&*v.scheduling_gates, ["a".to_string(), "b".to_string()]);
        assert_eq!((v.spec_priority, v.priority_class_name.as_deref()), (Some(5), Some("high")));
        assert_eq!(v.pod_index, None, "the label comes first, even when it does not read");
        assert_eq!(v.start_time, pod.status.as_ref().unwrap().start_time);
        assert!(v.reports_not_ready);

        assert_eq!(info.key, ObjectKey::new("ns", "p"));
        assert_eq!(&*info.uid, "u-1");
        assert_eq!(info.requests.cpu, 1000);
        assert_eq!(info.priority, 5);
        assert!(info.preemption_never && info.gated && !info.terminal && !info.deleting);
        assert_eq!(info.group_name(), Some("pg"));
        assert_eq!(info.nominated_node_name.as_deref(), Some("n1"));
        assert_eq!(&*info.scheduler_name, "placer");
        assert!(info.has_pod_affinity() && info.has_required_pod_anti_affinity());

        let mut by_annotation = pod.clone();
        by_annotation.metadata.labels.as_mut().unwrap().remove(JOB_COMPLETION_INDEX);
        let info = PodInfo::from_pod(Arc::new(by_annotation)).unwrap();
        assert_eq!(info.view.pod_index, Some(7));
    }

    #[test]
    fn spec_and_label_changes_are_seen_status_and_image_changes_are_not() {
        let base = full_pod();
        let info = |p: &Pod| PodInfo::from_pod(Arc::new(p.clone())).unwrap();
        let same = info(&base);
        let mut p = base.clone();
        p.status.as_mut().unwrap().start_time = None;
        p.status.as_mut().unwrap().nominated_node_name = None;
        p.spec.as_mut().unwrap().containers[0].image = Some("registry.example.com/db:2".into());
        p.metadata.annotations = None;
        assert!(same.same_spec_and_labels(&info(&p)));

        let changes: Vec<fn(&mut Pod)> = vec![
            |p| drop(p.metadata.labels.as_mut().unwrap().insert("tier".into(), "x".into())),
            |p| p.spec.as_mut().unwrap().node_selector = None,
            |p| p.spec.as_mut().unwrap().tolerations = None,
            |p| p.spec.as_mut().unwrap().affinity = None,
            |p| p.spec.as_mut().unwrap().topology_spread_constraints = None,
            |p| p.spec.as_mut().unwrap().scheduling_gates = None,
            |p| p.spec.as_mut().unwrap().priority = Some(6),
            |p| p.spec.as_mut().unwrap().priority_class_name = None,
            |p| p.spec.as_mut().unwrap().preemption_policy = None,
            |p| p.spec.as_mut().unwrap().scheduling_group = None,
            |p| p.spec.as_mut().unwrap().containers[0].ports = None,
            |p| p.spec.as_mut().unwrap().containers[0].resources = None,
        ];
        for (i, change) in changes.into_iter().enumerate() {
            let mut p = base.clone();
            change(&mut p);
            assert!(!same.same_spec_and_labels(&info(&p)), "change {i}");
        }
    }

    /// What the engine keeps per pod, inline, beside the heap data of its strings and of
    /// the constraints it sets. The whole Pod object (2,416 bytes inline, plus 2,144 per
    /// container) must not come back.
    #[test]
    fn a_pod_costs_little_inline() {
        let inline = std::mem::size_of::<PodInfo>() + std::mem::size_of::<PodSchedulingView>();
        assert!(inline <= 512, "PodInfo + PodSchedulingView take {inline} bytes inline");
        assert!(std::mem::size_of::<PodInfo>() < std::mem::size_of::<Pod>() / 4);
    }

    #[test]
    fn unreadable_quantities_name_the_field() {
        let spec = PodSpec { containers: vec![container(&[("cpu", "lots")])], ..Default::default() };
        let (field, err) = pod_requests(&spec).unwrap_err();
        assert_eq!(field, "spec.containers[0].resources.requests");
        assert_eq!(err.resource, "cpu");
    }
}
