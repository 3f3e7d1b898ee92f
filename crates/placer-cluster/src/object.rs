//! Typed objects the store holds.

use std::fmt;
use std::sync::Arc;

use placer_api::k8s::api::batch::v1::{CronJob, Job};
use placer_api::k8s::api::coordination::v1::Lease;
use placer_api::k8s::api::core::v1::{Event, Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use placer_api::k8s::api::policy::v1::PodDisruptionBudget;
use placer_api::k8s::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use placer_api::k8s::api::scheduling::v1::PriorityClass;
use placer_api::k8s::api::scheduling::v1alpha2::{PodGroup, Workload};
use placer_api::k8s::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The kinds Placer reads and writes. Namespaces, Events and Leases are held for the
/// embedded API server (`placer cluster`); the controllers do not read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Node,
    Pod,
    PodGroup,
    Workload,
    Job,
    CronJob,
    PriorityClass,
    PodDisruptionBudget,
    Namespace,
    Event,
    Lease,
    DeviceClass,
    ResourceSlice,
    ResourceClaim,
    ResourceClaimTemplate,
    PersistentVolumeClaim,
    PersistentVolume,
    StorageClass,
    CSINode,
    CSIDriver,
    CSIStorageCapacity,
    VolumeAttachment,
}

impl Kind {
    pub const ALL: [Kind; 22] = [
        Kind::Node,
        Kind::Pod,
        Kind::PodGroup,
        Kind::Workload,
        Kind::Job,
        Kind::CronJob,
        Kind::PriorityClass,
        Kind::PodDisruptionBudget,
        Kind::Namespace,
        Kind::Event,
        Kind::Lease,
        Kind::DeviceClass,
        Kind::ResourceSlice,
        Kind::ResourceClaim,
        Kind::ResourceClaimTemplate,
        Kind::PersistentVolumeClaim,
        Kind::PersistentVolume,
        Kind::StorageClass,
        Kind::CSINode,
        Kind::CSIDriver,
        Kind::CSIStorageCapacity,
        Kind::VolumeAttachment,
    ];

    pub fn api_version(self) -> &'static str {
        match self {
            Kind::Node
            | Kind::Pod
            | Kind::Namespace
            | Kind::Event
            | Kind::PersistentVolumeClaim
            | Kind::PersistentVolume => "v1",
            Kind::StorageClass
            | Kind::CSINode
            | Kind::CSIDriver
            | Kind::CSIStorageCapacity
            | Kind::VolumeAttachment => "storage.k8s.io/v1",
            Kind::PodGroup | Kind::Workload => "scheduling.k8s.io/v1alpha2",
            Kind::Job | Kind::CronJob => "batch/v1",
            Kind::PriorityClass => "scheduling.k8s.io/v1",
            Kind::PodDisruptionBudget => "policy/v1",
            Kind::Lease => "coordination.k8s.io/v1",
            Kind::DeviceClass | Kind::ResourceSlice | Kind::ResourceClaim | Kind::ResourceClaimTemplate => {
                "resource.k8s.io/v1"
            }
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Node => "Node",
            Kind::Pod => "Pod",
            Kind::PodGroup => "PodGroup",
            Kind::Workload => "Workload",
            Kind::Job => "Job",
            Kind::CronJob => "CronJob",
            Kind::PriorityClass => "PriorityClass",
            Kind::PodDisruptionBudget => "PodDisruptionBudget",
            Kind::Namespace => "Namespace",
            Kind::Event => "Event",
            Kind::Lease => "Lease",
            Kind::DeviceClass => "DeviceClass",
            Kind::ResourceSlice => "ResourceSlice",
            Kind::ResourceClaim => "ResourceClaim",
            Kind::ResourceClaimTemplate => "ResourceClaimTemplate",
            Kind::PersistentVolumeClaim => "PersistentVolumeClaim",
            Kind::PersistentVolume => "PersistentVolume",
            Kind::StorageClass => "StorageClass",
            Kind::CSINode => "CSINode",
            Kind::CSIDriver => "CSIDriver",
            Kind::CSIStorageCapacity => "CSIStorageCapacity",
            Kind::VolumeAttachment => "VolumeAttachment",
        }
    }

    pub fn namespaced(self) -> bool {
        !matches!(
            self,
            Kind::Node
                | Kind::PriorityClass
                | Kind::Namespace
                | Kind::DeviceClass
                | Kind::ResourceSlice
                | Kind::PersistentVolume
                | Kind::StorageClass
                | Kind::CSINode
                | Kind::CSIDriver
                | Kind::VolumeAttachment
        )
    }

    /// The kind for an `apiVersion` / `kind` pair, if Placer knows it.
    pub fn from_type(api_version: &str, kind: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.api_version() == api_version && k.name() == kind)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Kind, namespace (empty for cluster-scoped kinds) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

impl ObjectRef {
    pub fn new(kind: Kind, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ObjectRef { kind, namespace: namespace.into(), name: name.into() }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind, self.name)
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// A typed object of one of the [`Kind`]s.
///
/// Nodes and pods, the kinds a cluster has by the ten thousand, are shared (`Arc`): the
/// store, its watch log, every watcher and the engine hold the same allocation, so a
/// clone of an `Object` (a list, a watch event) copies no node or pod. A write makes a
/// new version (`Arc::make_mut` copies only when the old one is still shared).
// An `Object` is as large as its largest variant, and the store's map, its watch log, every
// list and watch answer hold `Object`s inline: so the kinds several KiB large inline
// (`Job`, `CronJob`, `PersistentVolume`: 2.6-3.5 KiB) are boxed, which took an `Object`
// from 3,472 to about 1 KiB (a 50,000-node store held ~3.5 KiB per node in the map alone).
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Object {
    Node(Arc<Node>),
    Pod(Arc<Pod>),
    PodGroup(PodGroup),
    Workload(Workload),
    Job(Box<Job>),
    CronJob(Box<CronJob>),
    PriorityClass(PriorityClass),
    PodDisruptionBudget(PodDisruptionBudget),
    Namespace(Namespace),
    Event(Event),
    Lease(Lease),
    DeviceClass(DeviceClass),
    ResourceSlice(ResourceSlice),
    ResourceClaim(ResourceClaim),
    ResourceClaimTemplate(ResourceClaimTemplate),
    PersistentVolumeClaim(PersistentVolumeClaim),
    PersistentVolume(Box<PersistentVolume>),
    StorageClass(StorageClass),
    CSINode(CSINode),
    CSIDriver(CSIDriver),
    CSIStorageCapacity(CSIStorageCapacity),
    VolumeAttachment(Box<VolumeAttachment>),
}

macro_rules! each {
    ($self:expr, $o:ident => $e:expr) => {
        match $self {
            Object::Node($o) => {
                let $o = &**$o;
                $e
            }
            Object::Pod($o) => {
                let $o = &**$o;
                $e
            }
            Object::PodGroup($o) => $e,
            Object::Workload($o) => $e,
            Object::Job($o) => $e,
            Object::CronJob($o) => $e,
            Object::PriorityClass($o) => $e,
            Object::PodDisruptionBudget($o) => $e,
            Object::Namespace($o) => $e,
            Object::Event($o) => $e,
            Object::Lease($o) => $e,
            Object::DeviceClass($o) => $e,
            Object::ResourceSlice($o) => $e,
            Object::ResourceClaim($o) => $e,
            Object::ResourceClaimTemplate($o) => $e,
            Object::PersistentVolumeClaim($o) => $e,
            Object::PersistentVolume($o) => $e,
            Object::StorageClass($o) => $e,
            Object::CSINode($o) => $e,
            Object::CSIDriver($o) => $e,
            Object::CSIStorageCapacity($o) => $e,
            Object::VolumeAttachment($o) => $e,
        }
    };
}

impl Object {
    pub fn kind(&self) -> Kind {
        match self {
            Object::Node(_) => Kind::Node,
            Object::Pod(_) => Kind::Pod,
            Object::PodGroup(_) => Kind::PodGroup,
            Object::Workload(_) => Kind::Workload,
            Object::Job(_) => Kind::Job,
            Object::CronJob(_) => Kind::CronJob,
            Object::PriorityClass(_) => Kind::PriorityClass,
            Object::PodDisruptionBudget(_) => Kind::PodDisruptionBudget,
            Object::Namespace(_) => Kind::Namespace,
            Object::Event(_) => Kind::Event,
            Object::Lease(_) => Kind::Lease,
            Object::DeviceClass(_) => Kind::DeviceClass,
            Object::ResourceSlice(_) => Kind::ResourceSlice,
            Object::ResourceClaim(_) => Kind::ResourceClaim,
            Object::ResourceClaimTemplate(_) => Kind::ResourceClaimTemplate,
            Object::PersistentVolumeClaim(_) => Kind::PersistentVolumeClaim,
            Object::PersistentVolume(_) => Kind::PersistentVolume,
            Object::StorageClass(_) => Kind::StorageClass,
            Object::CSINode(_) => Kind::CSINode,
            Object::CSIDriver(_) => Kind::CSIDriver,
            Object::CSIStorageCapacity(_) => Kind::CSIStorageCapacity,
            Object::VolumeAttachment(_) => Kind::VolumeAttachment,
        }
    }

    pub fn metadata(&self) -> &ObjectMeta {
        each!(self, o => &o.metadata)
    }

    /// The metadata, for writing (a shared node or pod is copied first).
    pub fn metadata_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Object::Node(o) => &mut Arc::make_mut(o).metadata,
            Object::Pod(o) => &mut Arc::make_mut(o).metadata,
            Object::PodGroup(o) => &mut o.metadata,
            Object::Workload(o) => &mut o.metadata,
            Object::Job(o) => &mut o.metadata,
            Object::CronJob(o) => &mut o.metadata,
            Object::PriorityClass(o) => &mut o.metadata,
            Object::PodDisruptionBudget(o) => &mut o.metadata,
            Object::Namespace(o) => &mut o.metadata,
            Object::Event(o) => &mut o.metadata,
            Object::Lease(o) => &mut o.metadata,
            Object::DeviceClass(o) => &mut o.metadata,
            Object::ResourceSlice(o) => &mut o.metadata,
            Object::ResourceClaim(o) => &mut o.metadata,
            Object::ResourceClaimTemplate(o) => &mut o.metadata,
            Object::PersistentVolumeClaim(o) => &mut o.metadata,
            Object::PersistentVolume(o) => &mut o.metadata,
            Object::StorageClass(o) => &mut o.metadata,
            Object::CSINode(o) => &mut o.metadata,
            Object::CSIDriver(o) => &mut o.metadata,
            Object::CSIStorageCapacity(o) => &mut o.metadata,
            Object::VolumeAttachment(o) => &mut o.metadata,
        }
    }

    pub fn object_ref(&self) -> ObjectRef {
        let m = self.metadata();
        let namespace = if self.kind().namespaced() {
            m.namespace.clone().unwrap_or_else(|| "default".to_string())
        } else {
            String::new()
        };
        ObjectRef::new(self.kind(), namespace, m.name.clone().unwrap_or_default())
    }

    /// The object as JSON, with `apiVersion` and `kind`.
    pub fn to_json(&self) -> serde_json::Value {
        let v = each!(self, o => serde_json::to_value(o));
        v.unwrap_or(serde_json::Value::Null)
    }

    /// Reads an object of `kind` from JSON (apiVersion/kind are checked by k8s-openapi).
    pub fn from_json(kind: Kind, value: serde_json::Value) -> Result<Object, serde_json::Error> {
        Ok(match kind {
            Kind::Node => Object::Node(Arc::new(serde_json::from_value(value)?)),
            Kind::Pod => Object::Pod(Arc::new(serde_json::from_value(value)?)),
            Kind::PodGroup => Object::PodGroup(serde_json::from_value(value)?),
            Kind::Workload => Object::Workload(serde_json::from_value(value)?),
            Kind::Job => Object::Job(serde_json::from_value(value)?),
            Kind::CronJob => Object::CronJob(serde_json::from_value(value)?),
            Kind::PriorityClass => Object::PriorityClass(serde_json::from_value(value)?),
            Kind::PodDisruptionBudget => Object::PodDisruptionBudget(serde_json::from_value(value)?),
            Kind::Namespace => Object::Namespace(serde_json::from_value(value)?),
            Kind::Event => Object::Event(serde_json::from_value(value)?),
            Kind::Lease => Object::Lease(serde_json::from_value(value)?),
            Kind::DeviceClass => Object::DeviceClass(serde_json::from_value(value)?),
            Kind::ResourceSlice => Object::ResourceSlice(serde_json::from_value(value)?),
            Kind::ResourceClaim => Object::ResourceClaim(serde_json::from_value(value)?),
            Kind::ResourceClaimTemplate => Object::ResourceClaimTemplate(serde_json::from_value(value)?),
            Kind::PersistentVolumeClaim => Object::PersistentVolumeClaim(serde_json::from_value(value)?),
            Kind::PersistentVolume => Object::PersistentVolume(serde_json::from_value(value)?),
            Kind::StorageClass => Object::StorageClass(serde_json::from_value(value)?),
            Kind::CSINode => Object::CSINode(serde_json::from_value(value)?),
            Kind::CSIDriver => Object::CSIDriver(serde_json::from_value(value)?),
            Kind::CSIStorageCapacity => Object::CSIStorageCapacity(serde_json::from_value(value)?),
            Kind::VolumeAttachment => Object::VolumeAttachment(serde_json::from_value(value)?),
        })
    }

    pub fn as_pod(&self) -> Option<&Pod> {
        match self {
            Object::Pod(p) => Some(p),
            _ => None,
        }
    }

    /// A node object (shared from now on).
    pub fn node(node: Node) -> Object {
        Object::Node(Arc::new(node))
    }

    /// A pod object (shared from now on).
    pub fn pod(pod: Pod) -> Object {
        Object::Pod(Arc::new(pod))
    }

    /// The pod for writing (copied first when shared), if this is one.
    pub fn as_pod_mut(&mut self) -> Option<&mut Pod> {
        match self {
            Object::Pod(p) => Some(Arc::make_mut(p)),
            _ => None,
        }
    }

    /// The node for writing (copied first when shared), if this is one.
    pub fn as_node_mut(&mut self) -> Option<&mut Node> {
        match self {
            Object::Node(n) => Some(Arc::make_mut(n)),
            _ => None,
        }
    }
}
