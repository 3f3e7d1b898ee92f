//! Nodes with the pods on them and their requested resources, updated incrementally from
//! cluster events, plus an undo log so a cycle can assume pods, try a placement and roll
//! back without copying the cluster.

mod domains;
pub mod dra;
mod hot;
pub mod volumes;

use std::sync::Arc;

use rustc_hash::FxHashMap;

pub use domains::{DomainAggregate, TopologyDomains};
pub use hot::{HotRequest, NodeHot};

use crate::model::{NodeId, NodeStatic, PodInfo, PodKey};
use crate::resources::Resources;

/// kube-scheduler's defaults for scoring pods that request no cpu / memory.
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// One node and what is placed on it.
#[derive(Debug, Clone)]
pub struct NodeState {
    pub info: Arc<NodeStatic>,
    /// Sum of the requests of the pods on the node; `pods` is their count.
    pub requested: Resources,
    /// Like `requested`, with zero cpu / memory requests counted as the scoring defaults.
    pub non_zero_requested: Resources,
    pub pods: Vec<Arc<PodInfo>>,
    /// How many of `pods` have pod affinity or anti-affinity (required or preferred).
    pub pods_with_affinity: u32,
    /// How many of `pods` have required pod anti-affinity.
    pub pods_with_required_anti_affinity: u32,
    /// The lowest `priority` of `pods` (running or not; `i32::MAX` without pods): a
    /// preemptor of priority at most this finds no victim here without reading the pods.
    lowest_priority: i32,
    /// Copy of `info.allocatable`, kept beside `requested` so per-node loops read one
    /// contiguous struct.
    pub allocatable: Resources,
    /// Facts about the node object the filters check on every attempt.
    pub flags: NodeFlags,
    /// Changes whenever anything in this state changes (pods, allocatable, the node
    /// object), and is never reused by the snapshot: a cache of per-node results (the
    /// single-pod search's reuse across identical pods) is exact while the stamp it
    /// recorded is the node's current one.
    stamp: u64,
}

/// Per-node facts read by the filters on every attempt, derived once from the node object.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeFlags {
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// The node carries a NoSchedule or NoExecute taint, or is not ready (and so carries
    /// `node.kubernetes.io/not-ready:NoExecute`).
    pub has_hard_taints: bool,
    /// The node carries a PreferNoSchedule taint.
    pub has_prefer_no_schedule_taints: bool,
}

impl NodeFlags {
    /// The flags of a node.
    pub fn of(info: &NodeStatic) -> NodeFlags {
        let taints = info.node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or(&[]);
        NodeFlags {
            unschedulable: info.unschedulable,
            has_hard_taints: !info.ready
                || taints.iter().any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute"),
            has_prefer_no_schedule_taints: taints.iter().any(|t| t.effect == "PreferNoSchedule"),
        }
    }
}

impl NodeState {
    fn new(info: Arc<NodeStatic>) -> Self {
        NodeState {
            allocatable: info.allocatable.clone(),
            flags: NodeFlags::of(&info),
            info,
            requested: Resources::default(),
            non_zero_requested: Resources::default(),
            pods: Vec::new(),
            pods_with_affinity: 0,
            pods_with_required_anti_affinity: 0,
            lowest_priority: i32::MAX,
            stamp: 0,
        }
    }

    /// See [`NodeState::stamp`]'s field documentation: equal stamps of the same node id
    /// mean an unchanged state.
    pub fn stamp(&self) -> u64 {
        self.stamp
    }

    /// The lowest priority of the node's pods, running or not (`i32::MAX` without pods):
    /// no pod here can be a victim of a preemptor whose priority is at most this.
    pub fn lowest_priority(&self) -> i32 {
        self.lowest_priority
    }

    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// The name, shared: bound pods' records hold it without a copy.
    pub fn shared_name(&self) -> &Arc<str> {
        &self.info.name
    }

    /// Allocatable minus requested, per resource (may be negative when overcommitted).
    pub fn free(&self) -> Resources {
        let mut f = self.info.allocatable.clone();
        f.sub(&self.requested);
        f
    }

    /// Counts `pod` on the node (its requests, its affinity counters).
    pub(crate) fn add_pod(&mut self, pod: Arc<PodInfo>) {
        self.requested.add(&pod.requests);
        self.requested.pods += 1;
        self.non_zero_requested.add(&non_zero(&pod.requests));
        self.non_zero_requested.pods += 1;
        self.pods_with_affinity += u32::from(pod.has_pod_affinity());
        self.pods_with_required_anti_affinity += u32::from(pod.has_required_pod_anti_affinity());
        self.lowest_priority = self.lowest_priority.min(pod.priority);
        self.pods.push(pod);
    }

    fn remove_pod(&mut self, key: &PodKey) -> Option<Arc<PodInfo>> {
        // From the end: a rollback removes the pod assumed last.
        let i = self.pods.iter().rposition(|p| &p.key == key)?;
        let pod = self.pods.swap_remove(i);
        self.requested.sub(&pod.requests);
        self.requested.pods -= 1;
        self.non_zero_requested.sub(&non_zero(&pod.requests));
        self.non_zero_requested.pods -= 1;
        self.pods_with_affinity -= u32::from(pod.has_pod_affinity());
        self.pods_with_required_anti_affinity -= u32::from(pod.has_required_pod_anti_affinity());
        if pod.priority == self.lowest_priority {
            self.lowest_priority = self.pods.iter().map(|p| p.priority).min().unwrap_or(i32::MAX);
        }
        Some(pod)
    }
}

/// Requests with zero cpu / memory replaced by the scoring defaults.
pub fn non_zero(r: &Resources) -> Resources {
    let mut n = r.clone();
    if n.cpu == 0 {
        n.cpu = DEFAULT_MILLI_CPU_REQUEST;
    }
    if n.memory == 0 {
        n.memory = DEFAULT_MEMORY_REQUEST;
    }
    n
}

#[derive(Debug, Clone)]
enum Undo {
    /// A pod was added to this node; rollback removes it.
    Added(NodeId, PodKey),
    /// A pod was removed from this node; rollback puts it back.
    Removed(NodeId, Arc<PodInfo>),
    /// An assumed pod allocated a claim; rollback restores the claim's earlier pending
    /// allocation (usually none).
    Claim(crate::model::ObjectKey, Option<dra::Pending>),
    /// A removed pod's claim no placed pod uses any more; rollback holds its devices again.
    Freed(crate::model::ObjectKey),
    /// A freed claim held again by a pod put back; rollback frees it again.
    Held(crate::model::ObjectKey),
    /// An assumed pod bound or provisioned a claim's volume; rollback forgets it.
    Volume(volumes::Undo),
}

/// A position in the undo log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark(usize);

/// The cluster as the scheduler sees it.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    nodes: Vec<Option<NodeState>>,
    by_name: FxHashMap<Arc<str>, NodeId>,
    /// Live nodes sorted by name: the deterministic iteration order.
    order: Vec<NodeId>,
    free_ids: Vec<NodeId>,
    /// Where each counted pod is.
    location: FxHashMap<PodKey, NodeId>,
    /// Bound pods whose node is not (yet) known, by node name.
    orphans: FxHashMap<Arc<str>, Vec<Arc<PodInfo>>>,
    undo: Vec<Undo>,
    /// Bumped on every change (node or pod), for caches.
    generation: u64,
    /// Bumped on every change except a simulation's own (assume, removal for simulation,
    /// rollback), and when a simulation's changes are kept ([`Snapshot::commit`]): with the
    /// undo log empty, it names the state ([`Snapshot::state_id`]).
    durable_generation: u64,
    /// Bumped when a node is added or removed or changes its labels, readiness or
    /// schedulability, for caches of the node set.
    node_generation: u64,
    /// Pods on live nodes with pod affinity or anti-affinity (required or preferred).
    pods_with_affinity: u64,
    /// Pods on live nodes with required pod anti-affinity.
    pods_with_required_anti_affinity: u64,
    /// Cached topology domains per label key, most recently refreshed last
    /// ([`Snapshot::refresh_topology_domains`]).
    topology_domains: Vec<TopologyDomains>,
    /// `order` as a shared slice, with the `node_generation` it was taken at.
    all_nodes: Option<(u64, Arc<[NodeId]>)>,
    /// The wall-clock time of the cycle in Unix milliseconds, when the engine's owner gave
    /// one ([`crate::Engine::set_wall_clock`]); rules that age node conditions read it.
    now_unix_ms: Option<i64>,
    /// DRA objects and the allocations in flight.
    dra: dra::DraState,
    /// Namespace labels (pod affinity's `namespaceSelector`).
    namespaces: crate::framework::helper::NamespaceIndex,
    /// The last [`NodeState::stamp`] handed out.
    last_stamp: u64,
    /// Claims, volumes, storage classes, CSI nodes and the bindings in flight.
    volumes: volumes::VolumeState,
    /// For each image name in a live node's `status.images`, how many live nodes list it
    /// (kube-scheduler's `imageStates`, kept as nodes come and go so ImageLocality reads
    /// an image's spread without scanning the cluster for every pod).
    image_nodes: FxHashMap<String, usize>,
    /// Per node slot (`NodeId.0`, as `nodes`): what the single-pod search reads of the
    /// node, kept densely (`hot.rs`; stale for slots of removed nodes).
    hot: Vec<NodeHot>,
    /// The extended resource [`NodeHot::free_scalar`] counts: the first one a node
    /// offered (chosen once; pods asking for another read the node's state).
    hot_scalar: Option<Arc<str>>,
}

/// The distinct image names a node's `status.images` lists.
fn image_names(info: &NodeStatic) -> std::collections::BTreeSet<&str> {
    let images = info.node.status.as_ref().and_then(|s| s.images.as_deref()).unwrap_or(&[]);
    images.iter().flat_map(|i| i.names.as_deref().unwrap_or(&[])).map(String::as_str).collect()
}

impl Snapshot {
    /// The wall-clock time of the cycle (Unix milliseconds), if known.
    pub fn now_unix_ms(&self) -> Option<i64> {
        self.now_unix_ms
    }

    pub fn set_now_unix_ms(&mut self, now: Option<i64>) {
        if self.now_unix_ms != now {
            self.durable_generation += 1;
        }
        self.now_unix_ms = now;
    }

    pub fn new() -> Self {
        Self::default()
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Names the state of the snapshot while no simulation is open (the undo log is
    /// empty): two equal ids mean the same nodes with the same pods (in possibly another
    /// order within a node: a rollback puts a removed pod back last), the same DRA, volume
    /// and namespace state and the same clock. `None` while assumed or removed pods are
    /// not rolled back. For caches of results that do not depend on the order of a node's
    /// pods.
    pub fn state_id(&self) -> Option<u64> {
        self.undo.is_empty().then_some(self.durable_generation)
    }

    /// A change that is not a simulation.
    fn durable_change(&mut self) {
        self.generation += 1;
        self.durable_generation += 1;
    }

    /// DRA objects and in-flight allocations.
    pub fn dra(&self) -> &dra::DraState {
        &self.dra
    }

    /// DRA state, for the engine's event handling and its durable (non-simulated) records.
    pub fn dra_mut(&mut self) -> &mut dra::DraState {
        self.durable_change();
        &mut self.dra
    }

    /// Claims, volumes and storage classes, with the bindings in flight.
    pub fn volumes(&self) -> &volumes::VolumeState {
        &self.volumes
    }

    /// Volume state, for the engine's event handling and its durable records.
    pub fn volumes_mut(&mut self) -> &mut volumes::VolumeState {
        self.durable_change();
        &mut self.volumes
    }

    /// Binds or provisions the unbound claims of `pod` on `node` for the rest of the
    /// simulation (an assumed pod holds its PVs as it holds its capacity). A pod whose
    /// claims do not fit there holds none: the filter already rejected that node.
    fn assume_volumes(&mut self, pod: &PodInfo, node: NodeId) {
        if pod.view.volumes.iter().all(|v| v.claim().is_none()) {
            return;
        }
        let Ok(Some(claims)) = self.volumes.pod_claims(pod) else { return };
        if claims.delayed.is_empty() {
            return;
        }
        let info = self.node(node).info.clone();
        let labels = crate::framework::helper::labels_or_empty(info.node.metadata.labels.as_ref());
        let Ok(Ok(found)) = self.volumes.find_pod_volumes(&claims, &info.name, labels) else { return };
        for undo in self.volumes.assume(&found, &info.name) {
            self.undo.push(Undo::Volume(undo));
        }
    }

    /// Allocates the unallocated claims of `pod` on `node` for the rest of the simulation
    /// (an assumed pod holds its devices as it holds its capacity). A pod whose claims
    /// cannot be allocated there holds none: the filter already rejected that node.
    fn assume_claims(&mut self, pod: &PodInfo, node: NodeId) {
        if pod.view.resource_claims.is_empty() {
            return;
        }
        let Ok(claims) = self.dra.pod_claims(pod) else { return };
        let todo: Vec<&dra::ClaimEntry> =
            claims.iter().filter(|c| c.allocation.is_none()).map(|c| &*c.entry).collect();
        if todo.is_empty() {
            return;
        }
        let info = self.node(node).info.clone();
        let Ok(Some(results)) = self.dra.allocate(&todo, &info, self.dra.in_use_set()) else { return };
        let keys: Vec<crate::model::ObjectKey> = todo.iter().map(|e| e.key.clone()).collect();
        for (key, allocation) in keys.into_iter().zip(results) {
            let old = self.dra.record(key.clone(), Arc::new(allocation), pod.key.clone());
            self.undo.push(Undo::Claim(key, old));
        }
    }

    /// Changes whenever a node is added or removed or changes its labels, readiness or
    /// `spec.unschedulable` (not on other node updates such as heartbeats, nor when pods
    /// move): caches of the node set and its labels (e.g. the topology domain tree) key on
    /// it.
    pub fn node_generation(&self) -> u64 {
        self.node_generation
    }

    /// How many pods on live nodes have pod affinity or anti-affinity terms (required or
    /// preferred). Zero lets inter-pod affinity skip its work.
    pub fn num_pods_with_affinity(&self) -> u64 {
        self.pods_with_affinity
    }

    /// How many pods on live nodes have required pod anti-affinity terms.
    pub fn num_pods_with_required_anti_affinity(&self) -> u64 {
        self.pods_with_required_anti_affinity
    }

    /// Runs `f` on a live node, keeping the cluster-wide affinity counters in step.
    fn with_node<R>(&mut self, id: NodeId, f: impl FnOnce(&mut NodeState) -> R) -> Option<R> {
        let n = self.nodes[id.0 as usize].as_mut()?;
        let (aff, anti) = (n.pods_with_affinity, n.pods_with_required_anti_affinity);
        self.last_stamp += 1;
        n.stamp = self.last_stamp;
        let r = f(n);
        self.hot[id.0 as usize] = NodeHot::of(n, self.hot_scalar.as_ref());
        self.pods_with_affinity = self.pods_with_affinity + u64::from(n.pods_with_affinity) - u64::from(aff);
        self.pods_with_required_anti_affinity = self.pods_with_required_anti_affinity
            + u64::from(n.pods_with_required_anti_affinity)
            - u64::from(anti);
        self.mark_domains_dirty(id);
        Some(r)
    }

    /// A node's pods or allocatable changed: its cached domains must be re-summed.
    fn mark_domains_dirty(&mut self, id: NodeId) {
        for index in &mut self.topology_domains {
            index.mark_dirty(id);
        }
    }

    /// The domains of `key` over the live nodes, with fresh aggregates: built on first use
    /// (and again after the node set or labels change), otherwise only the domains whose
    /// nodes changed since the last call are re-summed. The optimized placement search
    /// calls this once per cycle; [`Snapshot::topology_domains`] then serves readers.
    pub fn refresh_topology_domains(&mut self, key: &str) -> &TopologyDomains {
        let generation = self.node_generation;
        let cached = match self.topology_domains.iter().position(|d| d.key() == key) {
            Some(i) => Some(self.topology_domains.remove(i)),
            None => None,
        };
        let mut index = match cached.filter(|d| d.node_generation() == generation) {
            Some(index) => index,
            None => TopologyDomains::build(
                key,
                generation,
                self.nodes.len(),
                self.order.iter().map(|&id| (id, self.node(id))),
            ),
        };
        if self.topology_domains.len() >= domains::MAX_INDEXED_KEYS {
            self.topology_domains.remove(0);
        }
        let nodes = &self.nodes;
        index.resum_dirty(|id| nodes[id.0 as usize].as_ref().expect("indexed nodes are live"));
        self.topology_domains.push(index);
        self.topology_domains.last().expect("just pushed")
    }

    /// The cached domains of `key`, if an index exists for the current node set (its
    /// aggregates may be stale: [`TopologyDomain::aggregate`] says so).
    pub fn topology_domains(&self, key: &str) -> Option<&TopologyDomains> {
        self.topology_domains.iter().find(|d| d.key() == key && d.node_generation() == self.node_generation)
    }

    /// Adds or replaces a node, keeping the pods already on it.
    pub fn upsert_node(&mut self, info: NodeStatic) -> NodeId {
        self.durable_change();
        let info = Arc::new(info);
        if self.hot_scalar.is_none() {
            if let Some((name, _)) = info.allocatable.scalar.first() {
                self.choose_hot_scalar(name.clone());
            }
        }
        if let Some(&id) = self.by_name.get(&*info.name) {
            if let Some(n) = self.nodes[id.0 as usize].as_mut() {
                self.last_stamp += 1;
                n.stamp = self.last_stamp;
                if n.info.ready != info.ready
                    || n.info.unschedulable != info.unschedulable
                    || n.info.node.metadata.labels != info.node.metadata.labels
                {
                    self.node_generation += 1;
                }
                let allocatable_changed = n.allocatable != info.allocatable;
                n.allocatable = info.allocatable.clone();
                n.flags = NodeFlags::of(&info);
                let old = std::mem::replace(&mut n.info, info.clone());
                self.hot[id.0 as usize] = NodeHot::of(n, self.hot_scalar.as_ref());
                if allocatable_changed {
                    self.mark_domains_dirty(id);
                }
                self.count_images(&old, false);
                self.count_images(&info, true);
            }
            return id;
        }
        self.node_generation += 1;
        self.count_images(&info, true);
        let name = info.name.clone();
        let mut state = NodeState::new(info);
        self.last_stamp += 1;
        state.stamp = self.last_stamp;
        for pod in self.orphans.remove(&*name).unwrap_or_default() {
            state.add_pod(pod);
        }
        let hot = NodeHot::of(&state, self.hot_scalar.as_ref());
        let id = match self.free_ids.pop() {
            Some(id) => {
                self.nodes[id.0 as usize] = Some(state);
                self.hot[id.0 as usize] = hot;
                id
            }
            None => {
                self.nodes.push(Some(state));
                self.hot.push(hot);
                NodeId((self.nodes.len() - 1) as u32)
            }
        };
        let state = self.nodes[id.0 as usize].as_ref().expect("just inserted");
        self.pods_with_affinity += u64::from(state.pods_with_affinity);
        self.pods_with_required_anti_affinity += u64::from(state.pods_with_required_anti_affinity);
        for p in &state.pods {
            self.location.insert(p.key.clone(), id);
        }
        // Keep `order` sorted by name: binary insertion instead of a full re-sort, so
        // loading n nodes costs O(n log n) comparisons rather than O(n^2 log n).
        let pos = self.order.partition_point(|other| self.node(*other).name() < &*name);
        self.order.insert(pos, id);
        self.by_name.insert(name, id);
        id
    }

    /// Removes a node; its pods become orphans until a node of that name returns.
    pub fn remove_node(&mut self, name: &str) {
        self.durable_change();
        self.node_generation += 1;
        if let Some(id) = self.by_name.remove(name) {
            if let Some(state) = self.nodes[id.0 as usize].take() {
                self.count_images(&state.info, false);
                self.pods_with_affinity -= u64::from(state.pods_with_affinity);
                self.pods_with_required_anti_affinity -= u64::from(state.pods_with_required_anti_affinity);
                for p in &state.pods {
                    self.location.remove(&p.key);
                }
                self.orphans.insert(state.info.name.clone(), state.pods);
            }
            self.free_ids.push(id);
            self.order.retain(|other| *other != id);
        }
    }

    /// Counts a pod that holds capacity (bound, not terminal). Replaces an earlier version
    /// of the same pod. Pods that hold no capacity are removed.
    pub fn upsert_pod(&mut self, pod: Arc<PodInfo>) {
        if let Some(id) = pod.node_name.as_deref().and_then(|n| self.by_name.get(n).copied()) {
            return self.upsert_pod_on(pod, id);
        }
        self.remove_pod(&pod.key);
        if pod.terminal {
            return;
        }
        let Some(node_name) = pod.node_name.clone() else { return };
        self.durable_change();
        self.orphans.entry(node_name).or_default().push(pod);
    }

    /// [`Self::upsert_pod`] for a pod bound to the live node `id` (`pod.node_name` is its
    /// name): the node is not looked up by name. What `remove_pod` then `location.insert`
    /// would do, with one probe of the location map.
    pub fn upsert_pod_on(&mut self, pod: Arc<PodInfo>, id: NodeId) {
        debug_assert_eq!(
            pod.node_name.as_deref(),
            Some(self.node(id).name()),
            "the pod is bound to node {id:?}"
        );
        if pod.terminal {
            self.remove_pod(&pod.key);
            return;
        }
        let previous = match self.location.entry(pod.key.clone()) {
            std::collections::hash_map::Entry::Occupied(mut e) => Some(std::mem::replace(e.get_mut(), id)),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(id);
                None
            }
        };
        match previous {
            Some(old) => {
                self.durable_change();
                self.with_node(old, |n| n.remove_pod(&pod.key));
            }
            None => {
                self.remove_orphan(&pod.key);
            }
        }
        self.durable_change();
        self.with_node(id, |n| n.add_pod(pod)).expect("live node");
    }

    /// Forgets a pod wherever it is counted.
    pub fn remove_pod(&mut self, key: &PodKey) -> Option<Arc<PodInfo>> {
        if let Some(id) = self.location.remove(key) {
            self.durable_change();
            return self.with_node(id, |n| n.remove_pod(key)).flatten();
        }
        self.remove_orphan(key)
    }

    /// Forgets a pod counted as an orphan (bound to a node the snapshot lacks), if it is.
    fn remove_orphan(&mut self, key: &PodKey) -> Option<Arc<PodInfo>> {
        let removed = self.orphans.values_mut().find_map(|pods| {
            let i = pods.iter().position(|p| &p.key == key)?;
            Some(pods.swap_remove(i))
        });
        if removed.is_some() {
            self.durable_change();
        }
        removed
    }

    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.by_name.get(name).copied()
    }

    /// The node with this id. Panics on a stale id: ids come from this snapshot.
    pub fn node(&self, id: NodeId) -> &NodeState {
        self.nodes[id.0 as usize].as_ref().expect("NodeId refers to a live node")
    }

    /// The dense record of a live node: what [`NodeState`] holds of it, as
    /// [`NodeHot::of`] reads it (checked in debug builds).
    #[inline]
    pub fn hot(&self, id: NodeId) -> &NodeHot {
        let hot = &self.hot[id.0 as usize];
        debug_assert_eq!(*hot, NodeHot::of(self.node(id), self.hot_scalar.as_ref()), "hot record of {id:?}");
        hot
    }

    /// `requests` as [`NodeHot::fits`] reads them, when the dense records answer for them.
    pub fn hot_request(&self, requests: &Resources) -> Option<HotRequest> {
        HotRequest::of(requests, self.hot_scalar.as_ref())
    }

    /// Makes `name` the extended resource the dense records count (once), and counts it
    /// on every node already there.
    fn choose_hot_scalar(&mut self, name: Arc<str>) {
        self.hot_scalar = Some(name);
        for (slot, node) in self.nodes.iter().enumerate() {
            if let Some(node) = node {
                self.hot[slot] = NodeHot::of(node, self.hot_scalar.as_ref());
            }
        }
    }

    /// Live nodes, sorted by name.
    pub fn node_ids(&self) -> &[NodeId] {
        &self.order
    }

    /// [`Snapshot::node_ids`] as a shared slice, copied once per node set rather than once
    /// per caller.
    pub fn all_nodes(&mut self) -> Arc<[NodeId]> {
        match &self.all_nodes {
            Some((generation, nodes)) if *generation == self.node_generation => nodes.clone(),
            _ => {
                let nodes: Arc<[NodeId]> = self.order.as_slice().into();
                self.all_nodes = Some((self.node_generation, nodes.clone()));
                nodes
            }
        }
    }

    /// Whether `nodes` is every live node in snapshot order.
    pub fn is_all_nodes(&self, nodes: &[NodeId]) -> bool {
        let shared = self.all_nodes.as_ref().filter(|(g, _)| *g == self.node_generation);
        if shared
            .is_some_and(|(_, all)| std::ptr::eq(all.as_ptr(), nodes.as_ptr()) && all.len() == nodes.len())
        {
            return true;
        }
        nodes == self.order.as_slice()
    }

    /// The labels of the Namespace objects seen so far.
    pub fn namespaces(&self) -> &crate::framework::helper::NamespaceIndex {
        &self.namespaces
    }

    /// Records a Namespace's labels (`None`: the namespace is gone).
    pub fn set_namespace(&mut self, name: &str, labels: Option<crate::framework::helper::Labels>) {
        match labels {
            Some(l) => {
                self.namespaces.insert(name.to_string(), l);
            }
            None => {
                self.namespaces.remove(name);
            }
        }
        self.durable_change();
    }

    pub fn num_nodes(&self) -> usize {
        self.order.len()
    }

    /// How many live nodes list `image` among their `status.images` names.
    pub fn nodes_with_image(&self, image: &str) -> usize {
        self.image_nodes.get(image).copied().unwrap_or(0)
    }

    /// Adds (`+1`) or removes (`-1`) a live node's images from [`Self::image_nodes`].
    fn count_images(&mut self, info: &NodeStatic, add: bool) {
        for name in image_names(info) {
            if add {
                *self.image_nodes.entry(name.to_string()).or_insert(0) += 1;
            } else if let Some(n) = self.image_nodes.get_mut(name) {
                *n -= 1;
                if *n == 0 {
                    self.image_nodes.remove(name);
                }
            }
        }
    }

    pub fn nodes(&self) -> impl Iterator<Item = &NodeState> {
        self.order.iter().map(|id| self.node(*id))
    }

    /// The node a pod is counted on.
    pub fn pod_node(&self, key: &PodKey) -> Option<NodeId> {
        self.location.get(key).copied()
    }

    /// The copy of a pod counted on its node (bound or assumed), if any.
    pub fn counted_pod(&self, key: &PodKey) -> Option<&Arc<PodInfo>> {
        let id = self.pod_node(key)?;
        self.node(id).pods.iter().find(|p| p.key == *key)
    }

    /// Whether `copy` is the copy of pod `key` counted on its node: the same as asking
    /// [`Self::counted_pod`] and comparing pointers (a node counts a pod once), without
    /// reading the other pods of the node, only their pointers.
    pub fn counts(&self, key: &PodKey, copy: &Arc<PodInfo>) -> bool {
        let counts =
            self.pod_node(key).is_some_and(|id| self.node(id).pods.iter().any(|p| Arc::ptr_eq(p, copy)));
        debug_assert_eq!(counts, self.counted_pod(key).is_some_and(|c| Arc::ptr_eq(c, copy)));
        counts
    }

    // ---- simulation ----

    /// The current position of the undo log.
    pub fn checkpoint(&self) -> Mark {
        Mark(self.undo.len())
    }

    /// Places `pod` on `node` for the rest of the simulation (until rollback).
    pub fn assume(&mut self, pod: Arc<PodInfo>, node: NodeId) {
        self.generation += 1;
        let key = pod.key.clone();
        self.location.insert(key.clone(), node);
        if !pod.view.resource_claims.is_empty() {
            // A removed pod put back (preemption's reprieve) holds its claims again.
            for claim in self.dra.hold_claims_of(&pod) {
                self.undo.push(Undo::Held(claim));
            }
        }
        self.assume_claims(&pod, node);
        self.assume_volumes(&pod, node);
        self.with_node(node, |n| n.add_pod(pod)).expect("live node");
        self.undo.push(Undo::Added(node, key));
    }

    /// Removes a placed pod for the rest of the simulation (until rollback), e.g. a
    /// preemption victim.
    pub fn remove_for_simulation(&mut self, key: &PodKey) -> Option<Arc<PodInfo>> {
        let id = self.location.remove(key)?;
        self.generation += 1;
        let pod = self.with_node(id, |n| n.remove_pod(key)).flatten()?;
        self.undo.push(Undo::Removed(id, pod.clone()));
        if !pod.view.resource_claims.is_empty() {
            // The devices a victim frees count for the preemptor (upstream's preemption
            // runs the DynamicResources filter with the victims' claims released).
            let location = &self.location;
            for claim in self.dra.free_claims_of(&pod, |p| !location.contains_key(p)) {
                self.undo.push(Undo::Freed(claim));
            }
        }
        Some(pod)
    }

    /// Undoes every assume / removal made after `mark`.
    pub fn rollback(&mut self, mark: Mark) {
        while self.undo.len() > mark.0 {
            self.generation += 1;
            match self.undo.pop().expect("len > mark") {
                Undo::Added(id, key) => {
                    self.location.remove(&key);
                    self.with_node(id, |n| n.remove_pod(&key));
                }
                Undo::Removed(id, pod) => {
                    self.location.insert(pod.key.clone(), id);
                    self.with_node(id, |n| n.add_pod(pod));
                }
                Undo::Claim(key, old) => self.dra.restore(key, old),
                Undo::Freed(key) => self.dra.unfree(&key),
                Undo::Held(key) => self.dra.refree(key),
                Undo::Volume(undo) => self.volumes.restore(undo),
            }
        }
    }

    /// Keeps every change made since `mark` (drops the undo entries).
    pub fn commit(&mut self, mark: Mark) {
        if self.undo.len() > mark.0 {
            self.durable_generation += 1;
        }
        self.undo.truncate(mark.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::api::core::v1::{Container, Node, NodeStatus, Pod, PodSpec, ResourceRequirements};
    use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;
    use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::collections::BTreeMap;

    fn node(name: &str, cpu: &str) -> NodeStatic {
        let mut alloc = BTreeMap::new();
        alloc.insert("cpu".to_string(), Quantity(cpu.into()));
        alloc.insert("pods".to_string(), Quantity("10".into()));
        NodeStatic::from_node(Arc::new(Node {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            status: Some(NodeStatus { allocatable: Some(alloc), ..Default::default() }),
            ..Default::default()
        }))
        .unwrap()
    }

    fn pod(name: &str, cpu: &str, node: Option<&str>) -> Arc<PodInfo> {
        let mut req = BTreeMap::new();
        req.insert("cpu".to_string(), Quantity(cpu.into()));
        Arc::new(
            PodInfo::from_pod(Arc::new(Pod {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    namespace: Some("default".into()),
                    ..Default::default()
                },
                spec: Some(PodSpec {
                    node_name: node.map(Into::into),
                    containers: vec![Container {
                        name: "c".into(),
                        resources: Some(ResourceRequirements { requests: Some(req), ..Default::default() }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                ..Default::default()
            }))
            .unwrap(),
        )
    }

    #[test]
    fn assume_and_rollback_restore_requested() {
        let mut s = Snapshot::new();
        let b = s.upsert_node(node("b", "4"));
        let a = s.upsert_node(node("a", "4"));
        assert_eq!(s.node_ids(), &[a, b], "nodes iterate in name order");
        s.upsert_pod(pod("existing", "1", Some("a")));
        let mark = s.checkpoint();
        s.assume(pod("p1", "2", None), a);
        assert_eq!(s.node(a).requested.cpu, 3000);
        assert_eq!(s.node(a).requested.pods, 2);
        let removed = s.remove_for_simulation(&PodKey::new("default", "existing")).unwrap();
        assert_eq!(&*removed.key.name, "existing");
        assert_eq!(s.node(a).requested.cpu, 2000);
        s.rollback(mark);
        assert_eq!(s.node(a).requested.cpu, 1000);
        assert_eq!(s.node(a).requested.pods, 1);
        assert_eq!(s.pod_node(&PodKey::new("default", "existing")), Some(a));
        assert_eq!(s.pod_node(&PodKey::new("default", "p1")), None);
    }

    proptest::proptest! {
        /// `lowest_priority` is the minimum of the node's pods' priorities,
        /// through upserts, removals, assumptions, simulated removals and rollbacks.
        #[test]
        fn lowest_priority_follows_the_pods(ops in proptest::collection::vec((0u8..5, 0usize..6, -2i32..3), 1..40)) {
            let mut s = Snapshot::new();
            let id = s.upsert_node(node("a", "100"));
            let mut marks = Vec::new();
            for (k, (op, i, priority)) in ops.into_iter().enumerate() {
                let name = format!("p{i}");
                let with_priority = |name: &str, bound: bool| {
                    let mut p = (*pod(name, "1", bound.then_some("a"))).clone();
                    p.priority = priority;
                    Arc::new(p)
                };
                match op {
                    0 => s.upsert_pod(with_priority(&name, true)),
                    1 => { s.remove_pod(&PodKey::new("default", name.as_str())); }
                    2 => s.assume(with_priority(&format!("x{k}"), false), id),
                    3 => { s.remove_for_simulation(&PodKey::new("default", name.as_str())); }
                    _ => if marks.is_empty() || i % 2 == 0 { marks.push(s.checkpoint()) } else if let Some(m) = marks.pop() { s.rollback(m) },
                }
                let n = s.node(id);
                proptest::prop_assert_eq!(
                    n.lowest_priority(),
                    n.pods.iter().map(|p| p.priority).min().unwrap_or(i32::MAX)
                );
            }
        }
    }

    #[test]
    fn pods_on_unknown_nodes_wait_for_the_node() {
        let mut s = Snapshot::new();
        s.upsert_pod(pod("early", "1", Some("late-node")));
        let id = s.upsert_node(node("late-node", "2"));
        assert_eq!(s.node(id).requested.cpu, 1000);
        s.remove_node("late-node");
        assert_eq!(s.num_nodes(), 0);
        let id = s.upsert_node(node("late-node", "2"));
        assert_eq!(s.node(id).requested.cpu, 1000);
    }

    #[test]
    fn node_generation_follows_the_node_set_not_pods_or_heartbeats() {
        use crate::plugins::testing::node as node_with;
        let mut s = Snapshot::new();
        let g0 = s.node_generation();
        s.upsert_node(node_with("a").cpu("2").label("rack", "r1").build());
        let g1 = s.node_generation();
        assert_ne!(g0, g1, "a new node");
        s.upsert_pod(pod("p", "1", Some("a")));
        s.upsert_node(node_with("a").cpu("4").label("rack", "r1").build());
        assert_eq!(s.node_generation(), g1, "pods and allocatable do not change the node set");
        s.upsert_node(node_with("a").cpu("4").label("rack", "r2").build());
        let g2 = s.node_generation();
        assert_ne!(g1, g2, "a label");
        s.upsert_node(node_with("a").cpu("4").label("rack", "r2").not_ready().build());
        assert_ne!(s.node_generation(), g2, "readiness");
        let g3 = s.node_generation();
        s.remove_node("a");
        assert_ne!(s.node_generation(), g3, "a removed node");
    }

    #[test]
    fn nodes_stay_sorted_by_name_as_they_come_and_go() {
        let mut s = Snapshot::new();
        for name in ["c", "a", "d", "b"] {
            s.upsert_node(node(name, "1"));
        }
        let names = |s: &Snapshot| s.nodes().map(|n| n.name().to_string()).collect::<Vec<_>>();
        assert_eq!(names(&s), ["a", "b", "c", "d"]);
        s.remove_node("b");
        s.upsert_node(node("aa", "1"));
        assert_eq!(names(&s), ["a", "aa", "c", "d"]);
    }

    #[test]
    fn affinity_counters_follow_assume_rollback_and_node_removal() {
        use crate::plugins::testing::{affinity_term, match_labels, pod as pod_with};
        let mut s = Snapshot::new();
        s.upsert_node(node("a", "4"));
        let anti = Arc::new(
            pod_with("anti")
                .pod_anti_affinity(affinity_term("zone", match_labels(&[("app", "x")])))
                .on("a")
                .build(),
        );
        let preferred = Arc::new(
            pod_with("pref")
                .preferred_pod_affinity(5, affinity_term("zone", match_labels(&[("app", "x")])))
                .build(),
        );
        s.upsert_pod(anti);
        assert_eq!((s.num_pods_with_affinity(), s.num_pods_with_required_anti_affinity()), (1, 1));
        let mark = s.checkpoint();
        let a = s.node_id("a").unwrap();
        s.assume(preferred, a);
        assert_eq!((s.num_pods_with_affinity(), s.num_pods_with_required_anti_affinity()), (2, 1));
        s.rollback(mark);
        assert_eq!((s.num_pods_with_affinity(), s.num_pods_with_required_anti_affinity()), (1, 1));
        s.remove_node("a");
        assert_eq!((s.num_pods_with_affinity(), s.num_pods_with_required_anti_affinity()), (0, 0));
        s.upsert_node(node("a", "4"));
        assert_eq!((s.num_pods_with_affinity(), s.num_pods_with_required_anti_affinity()), (1, 1));
        assert_eq!(s.node(s.node_id("a").unwrap()).pods_with_required_anti_affinity, 1);
        s.remove_pod(&PodKey::new("default", "anti"));
        assert_eq!((s.num_pods_with_affinity(), s.num_pods_with_required_anti_affinity()), (0, 0));
    }

    #[test]
    fn node_flags_and_allocatable_follow_node_updates() {
        use crate::plugins::testing::node as node_with;
        let mut s = Snapshot::new();
        let id = s.upsert_node(node_with("a").cpu("2").build());
        assert_eq!(s.node(id).flags, NodeFlags::default());
        s.upsert_node(node_with("a").cpu("4").taint("k", "v", "NoSchedule").unschedulable().build());
        let n = s.node(id);
        assert_eq!(n.allocatable.cpu, 4000);
        assert!(n.flags.unschedulable && n.flags.has_hard_taints && !n.flags.has_prefer_no_schedule_taints);
        s.upsert_node(node_with("a").not_ready().taint("k", "v", "PreferNoSchedule").build());
        let n = s.node(id);
        assert!(n.flags.has_hard_taints, "not ready counts as a NoExecute taint");
        assert!(n.flags.has_prefer_no_schedule_taints);
    }
}
