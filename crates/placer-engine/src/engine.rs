//! The engine facade: cluster events in, decisions out.
//!
//! [`Engine::apply`] keeps the snapshot (nodes and the pods holding capacity), the PodGroup
//! index, PriorityClasses and the scheduling queue up to date, incrementally.
//! [`Engine::schedule`] pops pods until none is ready and runs, for each, either the
//! single-pod cycle or the PodGroup cycle ([`crate::placement::schedule_pod_group`]),
//! returning the [`Decision`]s the caller must carry out in order.
//!
//! A pod the engine decides to bind is *assumed*: it holds capacity in the snapshot from the
//! moment the [`Decision::Bind`] is returned until the store confirms the binding (a
//! [`ClusterEvent::PodUpserted`] with `spec.nodeName`), or the caller reports
//! [`Engine::binding_failed`].

use std::collections::BTreeMap;
use std::sync::Arc;

use placer_api::gates::Gate;
use placer_api::k8s::api::core::v1::{Namespace, Node, Pod};
use placer_api::k8s::api::policy::v1::PodDisruptionBudget;
use placer_api::k8s::api::resource::v1::{
    AllocationResult, DeviceClass, ResourceClaim, ResourceClaimConsumerReference, ResourceSlice,
};
use placer_api::k8s::api::scheduling::v1::PriorityClass;
use placer_api::k8s::api::scheduling::v1alpha2::PodGroup;
use rustc_hash::FxHashMap;

use crate::config::SchedulerConfig;
use crate::framework::group::GroupOutcome;
use crate::framework::preemption::GroupHooks;
use crate::framework::{BindWrites, Framework};
use crate::metrics::*;
use crate::model::{
    GroupKey, GroupPolicy, KeyParts, KeyRef, NodeId, NodeStatic, ObjectKey, PodGroupInfo, PodInfo, PodKey,
};
use crate::observer::Observer;
use crate::placement::{schedule_pod_group, GroupContext, PlacementFramework};
use crate::podgroup::{
    waiting_for_group_message, GroupCondition, GroupCycle, GroupIndex, MSG_WAITING_FOR_QUORUM,
    MSG_WAITING_ON_PREEMPTION,
};
use crate::queue::{Admission, QueuedPod, SchedulingQueue};
pub use crate::snapshot::volumes::VolumeWrite;
use crate::snapshot::Snapshot;
use crate::strategy::Strategy;
/// The PodGroup condition type (v1.36).
pub const CONDITION_POD_GROUP_SCHEDULED: &str = "PodGroupScheduled";
/// Condition / pod reasons.
pub const REASON_SCHEDULED: &str = "Scheduled";
pub const REASON_UNSCHEDULABLE: &str = "Unschedulable";
pub const REASON_SCHEDULER_ERROR: &str = "SchedulerError";

/// A change in the cluster, fed to [`Engine::apply`] in the order it happened.
#[derive(Debug, Clone)]
pub enum ClusterEvent {
    NodeUpserted(Arc<Node>),
    NodeDeleted(String),
    PodUpserted(Arc<Pod>),
    PodDeleted(PodKey),
    PodGroupUpserted(Arc<PodGroup>),
    PodGroupDeleted(GroupKey),
    PriorityClassUpserted(Arc<PriorityClass>),
    PriorityClassDeleted(String),
    PodDisruptionBudgetUpserted(Arc<PodDisruptionBudget>),
    PodDisruptionBudgetDeleted(PodKey),
    DeviceClassUpserted(Arc<DeviceClass>),
    DeviceClassDeleted(String),
    ResourceSliceUpserted(Arc<ResourceSlice>),
    ResourceSliceDeleted(String),
    ResourceClaimUpserted(Arc<ResourceClaim>),
    ResourceClaimDeleted(ObjectKey),
    /// A Namespace (its labels select pods for pod affinity's `namespaceSelector`).
    NamespaceUpserted(Arc<Namespace>),
    NamespaceDeleted(String),
    /// A PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode, CSIDriver,
    /// CSIStorageCapacity or VolumeAttachment.
    Storage(StorageEvent),
}

pub use storage::StorageEvent;

/// A pod's namespace as the engine keys it (`default` when unset).
fn pod_namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

/// The `Scheduled` event's message, `Successfully assigned NS/NAME to NODE` (one per bound
/// pod: written out rather than through `format!`'s machinery).
fn scheduled_message(key: &PodKey, node_name: &str) -> String {
    const PREFIX: &str = "Successfully assigned ";
    let parts = [PREFIX, &key.namespace, "/", &key.name, " to ", node_name];
    let mut message = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    parts.iter().for_each(|p| message.push_str(p));
    message
}

/// Something the caller must carry out in the cluster, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Bind the pod (binding subresource). The engine already counts the pod on the node;
    /// if the binding fails, call [`Engine::binding_failed`].
    Bind { pod: PodKey, uid: String, node: String },
    /// Set (or clear) `status.nominatedNodeName`.
    Nominate { pod: PodKey, node: Option<String> },
    /// The pod could not be scheduled this time: condition PodScheduled=False with this
    /// reason (`Unschedulable` or `SchedulerError`) and message, and a `FailedScheduling`
    /// event with the message.
    PodUnschedulable { pod: PodKey, reason: String, message: String },
    /// Set the PodGroup's `PodGroupScheduled` condition (only emitted when it changes).
    PodGroupCondition { group: GroupKey, status: bool, reason: String, message: String },
    /// Set (`Some`) or remove (`None`) an annotation of the PodGroup (the topology
    /// assignment, the unhealthy nodes).
    PodGroupAnnotation { group: GroupKey, key: String, value: Option<String> },
    /// Preemption: delete this victim pod; event reason `Preempted` with the message.
    Evict { pod: PodKey, uid: String, message: String },
    /// Preemption: condition `DisruptionTarget` (reason `PreemptionByScheduler`) on a
    /// victim PodGroup.
    PodGroupDisruptionTarget { group: GroupKey, message: String },
    /// A `Scheduled` event for a bound pod ("Successfully assigned ns/pod to node").
    ScheduledEvent { pod: PodKey, message: String },
    /// Another event on a pod (`Normal` unless `warning`), e.g. the DynamicResources
    /// PreBind's `BindingConditionsPending` while it waits for device binding conditions.
    PodEvent { pod: PodKey, warning: bool, reason: &'static str, message: String },
    /// DynamicResources PreBind, before the pod's [`Decision::Bind`]: write the
    /// ResourceClaim's status: set `allocation` when given (the claim had none) and add
    /// `consumer` to `reservedFor` when missing.
    /// The allocation and the consumer are boxed, as the other large payloads: every
    /// binding of a large gang adds three decisions, and the enum is as large as its
    /// largest variant.
    ClaimStatus {
        claim: ObjectKey,
        allocation: Option<Box<AllocationResult>>,
        consumer: Box<ResourceClaimConsumerReference>,
    },
    /// DynamicResources PreBind failed waiting for device binding conditions: remove the
    /// consumer with `consumer_uid` from the claim's `reservedFor` (Unreserve) and, when
    /// `deallocate` and nothing else holds the claim, clear its `allocation` and `devices`
    /// (the next attempt's PostFilter).
    ClaimUnreserve { claim: ObjectKey, consumer_uid: String, deallocate: bool },
    /// VolumeBinding PreBind, before the pod's [`Decision::Bind`]: set a PV's `claimRef`
    /// (the PV controller completes the binding) or a claim's
    /// `volume.kubernetes.io/selected-node` (dynamic provisioning).
    Volume(Box<VolumeWrite>),
    /// Failed-node replacement gave up (seed 002, `TASFailedNodeReplacementFailFast`):
    /// evict every pod of `pods` (key, uid) of the PodGroup, each with a `DisruptionTarget`
    /// condition naming `failed_nodes`, and report it on the PodGroup; the group is then
    /// placed again whole.
    EvictForNodeFailure {
        group: GroupKey,
        pods: Box<[(PodKey, String)]>,
        failed_nodes: Box<[String]>,
        message: String,
    },
}

/// Reason of the `DisruptionTarget` condition and of the PodGroup event when a group is
/// evicted because no replacement for a failed node fits (Kueue's eviction reason).
pub const REASON_NODE_FAILURES: &str = "EvictedDueToNodeFailures";

/// A PriorityClass as the engine needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PriorityClassInfo {
    value: i32,
    global_default: bool,
}

/// A pod the engine asked to bind, until the store confirms it.
#[derive(Debug, Clone)]
struct Assumed {
    node: Arc<str>,
    queued: QueuedPod,
    /// The bound copy the snapshot counted when the pod was assumed: while the snapshot
    /// still holds this very copy, the binding's confirmation takes it as the record.
    counted: Arc<PodInfo>,
}

/// The scheduler: queue, snapshot and framework.
pub struct Engine {
    config: SchedulerConfig,
    fw: Framework,
    placements: PlacementFramework,
    snapshot: Snapshot,
    queue: SchedulingQueue,
    /// Latest version of every pod (with resolved priority).
    pods: FxHashMap<PodKey, Arc<PodInfo>>,
    /// The object each pod not bound yet was last read from (shared with the caller, not
    /// copied), so its binding confirmation can be recognised ([`confirm`]).
    sources: FxHashMap<PodKey, Arc<Pod>>,
    /// The pending pod read last: the object and the record read from it, which the next
    /// pod may share (`ingest.rs`, `read_like_last`). Held apart from `pods` and `sources`
    /// (which may have moved on since): the pair is one read, whatever happened after.
    last_read: Option<(Arc<Pod>, Arc<PodInfo>)>,
    groups: GroupIndex,
    priority_classes: BTreeMap<String, PriorityClassInfo>,
    pdbs: BTreeMap<PodKey, Arc<PodDisruptionBudget>>,
    /// Bindings decided but not yet confirmed by the store.
    assumed: FxHashMap<PodKey, Assumed>,
    /// Assumed pods whose DynamicResources PreBind waits for device binding conditions
    /// (their [`Decision::Bind`] is not emitted yet, [`binding_wait`]).
    binding_waits: BTreeMap<PodKey, binding_wait::BindingWait>,
    /// The scheduling clock of the current [`Engine::schedule`].
    now_ms: u64,
    /// Decisions produced while applying events (e.g. unreadable pods), returned by the next
    /// [`Engine::schedule`].
    pending: Vec<Decision>,
    /// Where the next single pod's sampled node search starts (kube-scheduler's
    /// `nextStartNodeIndex`), so consecutive pods spread their search over the cluster.
    next_start_node_index: usize,
    /// The last single pod's per-node filter and score results, reused for the next pod
    /// of the same signature on nodes that did not change (kube-scheduler's opportunistic
    /// batching, exact: [`crate::schedule_one::SingleReuse`]).
    single_reuse: crate::schedule_one::SingleReuse,
    /// Failed single-pod attempts of the current pass, repeated for identical pods while
    /// nothing they read changes ([`single_failures`]).
    single_failures: single_failures::SingleFailures,
    /// Failed PodGroup cycles of the current pass, repeated for PodGroups of the same shape
    /// while nothing they read changes ([`group_failures`]).
    group_failures: group_failures::GroupFailures,
    /// Buffers for the metric calls of the next recorded group cycle (see
    /// [`group_failures`]), kept from a cycle whose calls were not recorded.
    spare_calls: group_failures::Calls,
    /// Objects that could not be read (node names and messages), for the caller to log.
    ingest_errors: Vec<String>,
    /// How PodGroups are decided, chosen once from the configuration.
    strategy: Strategy,
    /// PodSet groups of the hierarchical strategy.
    tas: tas_unit::TasState,
    /// Nominations and evictions in flight ([`crate::preemption`]).
    preempt: preempt::PreemptionState,
    /// Wall clock minus the scheduling clock (`now_ms`), in milliseconds, once the owner
    /// gave a wall clock ([`Engine::set_wall_clock`]).
    wall_offset_ms: Option<i64>,
    /// Not-ready nodes and when they count as failed (Unix ms: the `Ready` condition's
    /// transition plus Kueue's `NodeFailureDelay`), so waiting groups are retried then.
    node_failure_deadlines: BTreeMap<String, i64>,
    /// The wall-clock time up to which passed deadlines have retried waiting groups.
    failure_checked_unix_ms: i64,
    /// Nodes where PodGroups lost members (deleted while bound), for the KEP-5732
    /// strategy, which has no TopologyAssignment naming its nodes.
    lost_on: FxHashMap<GroupKey, std::collections::BTreeSet<String>>,
    /// Unit tests only: the last object applied for every pod (the engine itself keeps
    /// only [`PodInfo`]), so tests can write updates as a store would.
    #[cfg(test)]
    pod_objects: FxHashMap<PodKey, Arc<Pod>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("nodes", &self.snapshot.num_nodes())
            .field("pods", &self.pods.len())
            .field("queued", &self.queue.len())
            .field("assumed", &self.assumed.len())
            .finish()
    }
}

impl Engine {
    /// An engine with kube-scheduler's default plugins for `config`.
    pub fn new(config: SchedulerConfig) -> Engine {
        Engine::with_registry(config, &crate::plugins::registry())
    }

    /// An engine whose profile is built from `registry` (for plugins outside the default
    /// registry, e.g. in tests).
    pub(crate) fn with_registry(config: SchedulerConfig, registry: &crate::framework::Registry) -> Engine {
        let fw = registry.pod_framework(&config);
        let placements = registry.placement_framework(&config);
        let queue = SchedulingQueue::new(config.pod_initial_backoff_ms, config.pod_max_backoff_ms);
        let mut snapshot = Snapshot::new();
        snapshot.dra_mut().workload_claims = config.gates.enabled(Gate::DRAWorkloadResourceClaims);
        snapshot.dra_mut().disabled = crate::snapshot::dra::DisabledFeatures {
            partitionable_devices: !config.gates.enabled(Gate::DRAPartitionableDevices),
            consumable_capacity: !config.gates.enabled(Gate::DRAConsumableCapacity),
            binding_conditions: !config.gates.enabled(Gate::DRADeviceBindingConditions),
        };
        Engine {
            fw,
            placements,
            snapshot,
            queue,
            pods: FxHashMap::default(),
            sources: FxHashMap::default(),
            last_read: None,
            groups: GroupIndex::new(),
            priority_classes: BTreeMap::new(),
            pdbs: BTreeMap::new(),
            assumed: FxHashMap::default(),
            binding_waits: BTreeMap::new(),
            now_ms: 0,
            pending: Vec::new(),
            next_start_node_index: 0,
            single_reuse: crate::schedule_one::SingleReuse::default(),
            single_failures: single_failures::SingleFailures::default(),
            group_failures: group_failures::GroupFailures::default(),
            spare_calls: group_failures::Calls::default(),
            ingest_errors: Vec::new(),
            strategy: Strategy::new(&config),
            tas: tas_unit::TasState::default(),
            preempt: preempt::PreemptionState::default(),
            wall_offset_ms: None,
            node_failure_deadlines: BTreeMap::new(),
            failure_checked_unix_ms: i64::MIN,
            lost_on: FxHashMap::default(),
            config,
            #[cfg(test)]
            pod_objects: FxHashMap::default(),
        }
    }

    pub fn config(&self) -> &SchedulerConfig {
        &self.config
    }

    /// The cluster as the engine sees it (assumed pods included).
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The scheduling queue.
    pub fn queue(&self) -> &SchedulingQueue {
        &self.queue
    }

    /// What the engine knows about PodGroups.
    pub fn groups(&self) -> &GroupIndex {
        &self.groups
    }

    /// The latest version of a pod.
    pub fn pod(&self, key: &PodKey) -> Option<&Arc<PodInfo>> {
        self.pods.get(key)
    }

    /// PodDisruptionBudgets, by namespace/name.
    pub fn pdbs(&self) -> &BTreeMap<PodKey, Arc<PodDisruptionBudget>> {
        &self.pdbs
    }

    /// Whether a binding the engine asked for is still unconfirmed.
    pub fn is_assumed(&self, key: &PodKey) -> bool {
        self.assumed.contains_key(key)
    }

    /// The node of an unconfirmed binding.
    pub fn assumed_node(&self, key: &PodKey) -> Option<&str> {
        self.assumed.get(key).map(|a| &*a.node)
    }

    /// Objects that could not be read since the last call (for logging).
    pub fn take_ingest_errors(&mut self) -> Vec<String> {
        std::mem::take(&mut self.ingest_errors)
    }

    fn gate(&self, name: Gate) -> bool {
        self.config.gates.enabled(name)
    }

    // ---------------------------------------------------------------------------------
    // Events.
    // ---------------------------------------------------------------------------------

    /// Unit tests only: the last object applied for a pod.
    #[cfg(test)]
    pub(crate) fn pod_object(&self, key: &PodKey) -> Option<&Arc<Pod>> {
        self.pod_objects.get(key)
    }

    /// `key` as the engine holds it when it knows the pod: the same strings, shared. The
    /// engine's maps, its queue and the decisions it emits all hold clones of that one key,
    /// so a lookup with it compares pointers instead of reading both names (a key made
    /// afresh from each watch event otherwise compares its bytes at every lookup). Returns
    /// `key` itself for a pod the engine does not know.
    pub fn canonical_pod_key(&self, key: PodKey) -> PodKey {
        self.known_pod_key(&key).cloned().unwrap_or(key)
    }

    /// The key the engine holds for a pod, owned or borrowed in the lookup.
    fn known_pod_key(&self, key: &dyn KeyParts) -> Option<&PodKey> {
        self.pods.get_key_value(key).map(|(known, _)| known)
    }

    /// The key of a pod object (none without a name), shared with the engine's when it
    /// knows the pod ([`Self::canonical_pod_key`]), and whether it does (has a record of
    /// it: a new pod has none, nor an object read or an assumption).
    fn key_of(&self, pod: &Pod) -> Option<(PodKey, bool)> {
        let name = pod.metadata.name.as_deref()?;
        let key = KeyRef::new(pod_namespace(pod), name);
        if let Some(known) = self.known_pod_key(key.as_dyn()) {
            return Some((known.clone(), true));
        }
        // A new pod, most often in the namespace of the pod read before it.
        let key = match &self.last_read {
            Some((_, last)) => key.to_key_sharing(&last.key.namespace),
            None => key.to_key(),
        };
        Some((key, false))
    }

    /// Applies a pod update its caller made itself: `pod` is the version whose
    /// resourceVersion was `previous` with only its `PodScheduled` condition changed (the
    /// store declares that its status writes change nothing else). The same as
    /// `apply(PodUpserted(pod))`, without comparing the two versions field by field when
    /// the engine's copy of the pod is that version (debug builds still compare).
    pub fn apply_condition_write(&mut self, pod: Arc<Pod>, previous: &str, now_ms: u64) {
        let key = self.key_of(&pod);
        if key.is_some_and(|(key, known)| known && self.refresh_in_place(&key, &pod, Some(previous))) {
            #[cfg(test)]
            if let Some(name) = pod.metadata.name.clone() {
                let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".to_string());
                self.pod_objects.insert(PodKey::new(ns, name), pod);
            }
            return;
        }
        self.apply(ClusterEvent::PodUpserted(pod), now_ms);
    }

    /// Applies one cluster change (incremental: snapshot and queue are updated, not rebuilt).
    pub fn apply(&mut self, event: ClusterEvent, now_ms: u64) {
        #[cfg(test)]
        match &event {
            ClusterEvent::PodUpserted(pod) => {
                if let Some(name) = pod.metadata.name.clone() {
                    let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".to_string());
                    self.pod_objects.insert(PodKey::new(ns, name), pod.clone());
                }
            }
            ClusterEvent::PodDeleted(key) => {
                self.pod_objects.remove(key);
            }
            _ => {}
        }
        match event {
            ClusterEvent::NodeUpserted(node) => self.apply_node(node, now_ms),
            ClusterEvent::NodeDeleted(name) => {
                self.node_failure_deadlines.remove(&name);
                self.snapshot.remove_node(&name);
            }
            ClusterEvent::PodUpserted(pod) => self.apply_pod(pod, now_ms),
            ClusterEvent::PodDeleted(key) => {
                let key = self.canonical_pod_key(key);
                self.delete_pod(&key, now_ms)
            }
            ClusterEvent::PodGroupUpserted(pg) => self.apply_pod_group(pg, now_ms),
            ClusterEvent::PodGroupDeleted(key) => {
                self.lost_on.remove(&key);
                self.snapshot.dra_mut().remove_group(&key);
                self.tas.unindex(&key);
                self.groups.entry_mut(&key).info = None;
                self.groups.entry_mut(&key).condition = None;
                self.groups.prune(&key);
            }
            ClusterEvent::PriorityClassUpserted(pc) => {
                if let Some(name) = pc.metadata.name.clone() {
                    let info = PriorityClassInfo {
                        value: pc.value.unwrap_or(0),
                        global_default: pc.global_default.unwrap_or(false),
                    };
                    self.priority_classes.insert(name, info);
                    self.refresh_priorities(now_ms);
                }
            }
            ClusterEvent::PriorityClassDeleted(name) => {
                self.priority_classes.remove(&name);
                self.refresh_priorities(now_ms);
            }
            ClusterEvent::PodDisruptionBudgetUpserted(pdb) => {
                let ns = pdb.metadata.namespace.clone().unwrap_or_else(|| "default".to_string());
                if let Some(name) = pdb.metadata.name.clone() {
                    self.pdbs.insert(PodKey::new(ns, name), pdb);
                }
            }
            ClusterEvent::PodDisruptionBudgetDeleted(key) => {
                self.pdbs.remove(&key);
            }
            ClusterEvent::NamespaceUpserted(ns) => {
                if let Some(name) = ns.metadata.name.as_deref() {
                    let labels = ns.metadata.labels.clone().unwrap_or_default();
                    if self.snapshot.namespaces().get(name) != Some(&labels) {
                        self.snapshot.set_namespace(name, Some(labels));
                        self.queue.move_all_unschedulable(now_ms, |_| true);
                    }
                }
            }
            ClusterEvent::NamespaceDeleted(name) => {
                if self.snapshot.namespaces().contains_key(&name) {
                    self.snapshot.set_namespace(&name, None);
                    self.queue.move_all_unschedulable(now_ms, |_| true);
                }
            }
            ClusterEvent::DeviceClassUpserted(_)
            | ClusterEvent::DeviceClassDeleted(_)
            | ClusterEvent::ResourceSliceUpserted(_)
            | ClusterEvent::ResourceSliceDeleted(_)
            | ClusterEvent::ResourceClaimUpserted(_)
            | ClusterEvent::ResourceClaimDeleted(_) => self.apply_dra(event, now_ms),
            ClusterEvent::Storage(event) => self.apply_storage(event, now_ms),
        }
    }

    // ---------------------------------------------------------------------------------
    // Scheduling.
    // ---------------------------------------------------------------------------------

    /// Runs scheduling cycles for everything ready at `now_ms` and returns the decisions.
    pub fn schedule(&mut self, now_ms: u64, observer: &mut dyn Observer) -> Vec<Decision> {
        let mut out = std::mem::take(&mut self.pending);
        self.now_ms = now_ms;
        self.single_failures.clear();
        self.group_failures.clear();
        let wall =
            self.wall_offset_ms.map(|off| i64::try_from(now_ms).unwrap_or(i64::MAX).saturating_add(off));
        self.snapshot.set_now_unix_ms(wall);
        if let Some(wall) = wall {
            // A node whose not-ready time ran past the failure delay since the last cycle
            // is now failed: groups waiting next to it may be repaired or evicted.
            let checked = self.failure_checked_unix_ms;
            if self.node_failure_deadlines.values().any(|&d| d > checked && d <= wall) {
                self.queue.move_all_unschedulable(now_ms, |_| true);
            }
            self.failure_checked_unix_ms = wall;
        }
        self.check_binding_waits(now_ms, &mut out);
        while let Some(queued) = self.queue.pop(now_ms) {
            if let Admission::Reject(reason) = self.pre_enqueue(&queued.pod) {
                self.queue.gate(queued, reason);
                continue;
            }
            if self.gate(Gate::GenericWorkload) && queued.pod.group.is_some() {
                self.schedule_group(queued, now_ms, observer, &mut out);
            } else {
                self.schedule_single(queued, now_ms, observer, &mut out);
            }
        }
        out
    }

    /// The earliest time at which a backed-off pod becomes ready again or a not-ready node
    /// becomes failed (with a wall clock, [`Engine::set_wall_clock`]).
    pub fn next_wakeup_ms(&self) -> Option<u64> {
        let failure = self.wall_offset_ms.and_then(|off| {
            let checked = self.failure_checked_unix_ms;
            let next = self.node_failure_deadlines.values().filter(|&&d| d > checked).min()?;
            u64::try_from(next.saturating_sub(off)).ok()
        });
        [self.queue.next_backoff_ms(), failure, self.next_binding_deadline_ms()].into_iter().flatten().min()
    }

    /// The earliest time a backed-off pod becomes ready again (retries only, without the
    /// node failure deadlines of [`Engine::next_wakeup_ms`]).
    pub fn next_backoff_ms(&self) -> Option<u64> {
        self.queue.next_backoff_ms()
    }

    /// Gives the engine the wall clock (`wall_unix_ms`, Unix milliseconds) that goes with
    /// the scheduling clock's `now_ms`, so that rules ageing node conditions (Kueue's 30 s
    /// `NodeFailureDelay` for not-ready nodes) can compare them with `lastTransitionTime`.
    /// Without it, a not-ready node counts as failed at once.
    pub fn set_wall_clock(&mut self, now_ms: u64, wall_unix_ms: i64) {
        self.wall_offset_ms = Some(wall_unix_ms.saturating_sub(i64::try_from(now_ms).unwrap_or(i64::MAX)));
    }

    /// A binding the engine asked for failed: forget the assumption and requeue the pod
    /// (after its backoff).
    pub fn binding_failed(&mut self, pod: &PodKey, now_ms: u64) {
        let Some(assumed) = self.assumed.remove(pod) else { return };
        self.snapshot.remove_pod(pod);
        self.snapshot.dra_mut().forget_pod(pod);
        if let Some(current) = self.pods.get(pod).cloned() {
            if current.node_name.is_none() && !current.terminal && !current.deleting {
                let mut queued = assumed.queued;
                queued.pod = current;
                self.queue.add_backoff(queued, now_ms);
            }
        }
        self.queue.move_all_unschedulable(now_ms, |_| true);
    }

    fn schedule_single(
        &mut self,
        queued: QueuedPod,
        now_ms: u64,
        obs: &mut dyn Observer,
        out: &mut Vec<Decision>,
    ) {
        // Nominated pods counted, the nominated node first, per-pod preemption on failure
        // (SEMANTICS §12: standalone pods preempt with their own priority).
        let timer = obs.start_timer();
        let attempt = match self.reused_failure(&queued.pod) {
            Some(fit) => {
                // What the plain attempt reports: one PostFilter call that found nothing.
                obs.count(crate::metrics::METRIC_PREEMPTION_ATTEMPTS, &[("kind", "pod")], 1);
                preempt::SingleAttempt::Unschedulable(fit)
            }
            None => {
                let state = self.failure_state(&queued.pod);
                let attempt = self.find_node_for_single(&queued.pod, obs);
                if let preempt::SingleAttempt::Unschedulable(fit) = &attempt {
                    self.record_failure(state, &queued.pod, fit);
                }
                attempt
            }
        };
        let secs = obs.elapsed_seconds(timer);
        obs.observe(METRIC_SCHEDULING_ALGORITHM_DURATION, &[], secs);
        match attempt {
            preempt::SingleAttempt::Fits(node) => match self.commit_single(&queued.pod, node) {
                Ok(writes) => self.bind(queued, node, writes, out),
                Err(why) => self.fail(queued, REASON_UNSCHEDULABLE, why, true, now_ms, out),
            },
            preempt::SingleAttempt::Preempts { fit, plan } => {
                let key = queued.pod.key.clone();
                let priority = queued.pod.priority;
                let own = [key.clone()];
                self.actuate_preemption(
                    &plan.victims,
                    preempt::Preemptor::Pod(&queued.pod),
                    priority,
                    &[plan.node],
                    &own,
                    obs,
                    out,
                );
                self.nominate(&key, plan.node, out);
                self.fail(queued, REASON_UNSCHEDULABLE, fit.to_string(), false, now_ms, out);
            }
            preempt::SingleAttempt::Unschedulable(fit) => {
                self.fail(queued, REASON_UNSCHEDULABLE, fit.to_string(), true, now_ms, out);
            }
        }
    }

    /// Marks a pod bound on `node` in the snapshot and emits the binding, after the claim
    /// status writes its binding cycle decided (the allocations they carry are held as
    /// pending until the store shows them).
    fn bind(&mut self, queued: QueuedPod, node: NodeId, writes: BindWrites, out: &mut Vec<Decision>) {
        let BindWrites { claims: writes, volumes } = writes;
        for w in volumes {
            self.snapshot.volumes_mut().record(&w);
            out.push(Decision::Volume(Box::new(w)));
        }
        for w in writes {
            if let Some(a) = &w.allocation {
                self.snapshot.dra_mut().record(w.claim.clone(), Arc::new(a.clone()), queued.pod.key.clone());
            }
            out.push(Decision::ClaimStatus {
                claim: w.claim,
                allocation: w.allocation.map(Box::new),
                consumer: Box::new(w.consumer),
            });
        }
        let node_name = self.snapshot.node(node).shared_name().clone();
        let mut bound = (*queued.pod).clone();
        bound.node_name = Some(node_name.clone());
        let counted = Arc::new(bound);
        self.snapshot.upsert_pod_on(counted.clone(), node);
        let key = queued.pod.key.clone();
        self.forget_nomination(&key);
        if let Some(deadline_ms) = self.binding_deadline(&queued.pod, self.now_ms) {
            // PreBind waits for the devices' binding conditions ([`binding_wait`]), and
            // says so on the pod as upstream's PreBind does.
            self.binding_waits.insert(key.clone(), binding_wait::BindingWait { deadline_ms });
            out.push(Decision::PodEvent {
                pod: key.clone(),
                warning: false,
                reason: binding_wait::REASON_BINDING_CONDITIONS_PENDING,
                message: format!("waiting for binding conditions for device on node {node_name}"),
            });
        } else {
            self.emit_bind(&key, &queued.pod.uid, &node_name, out);
        }
        self.assumed.insert(key, Assumed { node: node_name, queued, counted });
    }

    /// The binding of an assumed pod and its `Scheduled` event.
    fn emit_bind(&self, key: &PodKey, uid: &str, node_name: &str, out: &mut Vec<Decision>) {
        out.push(Decision::Bind { pod: key.clone(), uid: uid.to_string(), node: node_name.to_string() });
        out.push(Decision::ScheduledEvent { pod: key.clone(), message: scheduled_message(key, node_name) });
    }

    /// Reports a failed pod and puts it back in the unschedulable pool. `clear_nomination`:
    /// a pod that had a nominated node loses it.
    fn fail(
        &mut self,
        queued: QueuedPod,
        reason: &str,
        message: String,
        clear_nomination: bool,
        now_ms: u64,
        out: &mut Vec<Decision>,
    ) {
        let key = queued.pod.key.clone();
        if clear_nomination {
            let held = self.forget_nomination(&key);
            if held || queued.pod.nominated_node_name.is_some() {
                out.push(Decision::Nominate { pod: key.clone(), node: None });
            }
        }
        out.push(Decision::PodUnschedulable { pod: key, reason: reason.to_string(), message });
        self.queue.add_failed(queued, now_ms);
    }

    /// Emits the PodGroup condition if it changed; never turns True back to False.
    fn set_condition(
        &mut self,
        group: &GroupKey,
        status: bool,
        reason: &str,
        message: String,
        out: &mut Vec<Decision>,
    ) {
        let entry = self.groups.entry_mut(group);
        let new = GroupCondition { status, reason: reason.to_string(), message };
        if let Some(current) = &entry.condition {
            if (current.status && !status) || *current == new {
                return;
            }
        }
        out.push(Decision::PodGroupCondition {
            group: group.clone(),
            status,
            reason: new.reason.clone(),
            message: new.message.clone(),
        });
        entry.condition = Some(new);
    }
}

/// Whether a node update could make a pending pod schedulable (or change where it goes).
fn node_changed(old: &NodeStatic, new: &NodeStatic) -> bool {
    old.allocatable != new.allocatable
        || old.unschedulable != new.unschedulable
        || old.ready != new.ready
        || old.node.metadata.labels != new.node.metadata.labels
        || old.node.spec.as_ref().and_then(|s| s.taints.as_ref())
            != new.node.spec.as_ref().and_then(|s| s.taints.as_ref())
}

/// A PodGroup update that could admit or help waiting members: the gang's minCount went
/// down, or the policy changed kind.
fn policy_relaxed(old: GroupPolicy, new: GroupPolicy) -> bool {
    match (old, new) {
        (GroupPolicy::Gang { min_count: a }, GroupPolicy::Gang { min_count: b }) => b < a,
        (GroupPolicy::Basic, GroupPolicy::Basic) => false,
        _ => true,
    }
}

#[cfg(test)]
mod binding_tests;
mod binding_wait;
mod confirm;
mod cycle;
mod explain;
#[cfg(test)]
mod group_failure_tests;
mod group_failures;
mod ingest;
pub use crate::placement::{PlacementScores, ScoredPlacement};
pub use confirm::ReleasedPodObject;
pub use explain::{DomainFit, FilterSummary, GroupExplanation};
mod outcome;
mod preempt;
#[cfg(test)]
mod single_failure_tests;
mod single_failures;
mod storage;
mod tas_preempt;
mod tas_unit;
#[cfg(test)]
mod tests;
