//! Pod-level extension points (kube-scheduler's framework): PreFilter / Filter, PreScore /
//! Score / NormalizeScore, Reserve / Unreserve, Permit and PreBind, the per-pod
//! [`CycleState`] with its typed per-plugin data ([`CycleData`]), and the configured
//! [`Framework`].
//!
//! Filter and score run while a PodGroup's members are evaluated (many times, on simulated
//! snapshots). Reserve, Permit and PreBind run once, on the decided assignment, in
//! [`crate::engine`]'s commit step: every member is reserved in order, a failure unreserves
//! all of them (the gang is all or nothing), Permit is asked once all are reserved, and
//! PreBind runs only when the whole group is permitted.

use std::any::Any;
use std::fmt;

use super::parsed::ParsedPod;
use super::status::{FilterResult, PreResult, Rejection, Status};
use crate::model::{NodeId, PodInfo};
use crate::snapshot::dra::ClaimWrite;
use crate::snapshot::volumes::VolumeWrite;
use crate::snapshot::{NodeState, Snapshot};

/// What a filter's verdict on a node depends on, declared per pod. The placement search's
/// shortcuts (the aggregate-capacity pre-filter, copy counting, one-pass placement of
/// identical members) are exact only when every active filter is [`Dependence::NodeLocal`]
/// or [`Dependence::PlainResources`]; any other answer makes them fall back to simulating
/// the members one by one. Required (no default): a new plugin must decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Dependence {
    /// Only the pod and the node's own facts (name, labels, taints, conditions): placing
    /// more pods never changes the verdict.
    NodeLocal,
    /// The pod's plain resources (cpu, memory, ephemeral-storage, extended resources, the
    /// pod slot) against the node's allocatable minus requested: exactly what the
    /// aggregate bound and copy counting count. Placing a copy changes only this.
    PlainResources,
    /// Pods on the same node other than through plain resources (e.g. host ports).
    SameNodePods,
    /// Pods on other nodes (inter-pod affinity, topology spread).
    OtherPods,
    /// The devices of the pod's ResourceClaims: copy counting counts them where
    /// `DraState::copy_claims` and `DraState::node_copies` say it is exact (claims of the
    /// pod's own from identical templates, node-local devices) and falls back to simulating
    /// the members otherwise ([`CopyCounting::WithDevices`]).
    Devices,
    /// Capacity beyond plain resources (devices, volumes): neither the aggregate bound nor
    /// copy counting knows it.
    ExtraCapacity,
}

/// Whether copies of a pod can be counted per node (and placed in one pass), and what
/// caps them besides plain resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyCounting {
    /// Not exact: the members are simulated one by one.
    Off,
    /// Plain resources alone cap the copies a node takes.
    Resources,
    /// Plain resources and the devices of the pods' claims: a consumer must also cap each
    /// node with `DraState::node_copies` for the group's `DraState::copy_claims`, and
    /// simulate where either answers `None`.
    WithDevices,
}

/// A test on a node's own flags and free resources that settles a filter's verdict without
/// running it: when the test holds, the plugin's filter passes the node for the pod. A
/// plugin declares one per pod ([`FilterPlugin::quick_pass`]); the pod's test is the
/// conjunction over its active filters, checked inline before the filters run. It may
/// fail where the filters pass: the filters then run as before, so a failed test never
/// changes a verdict or its reasons.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuickPass {
    /// Holds only on a node without `spec.unschedulable`.
    pub schedulable: bool,
    /// Holds only on a node without NoSchedule / NoExecute taints ([`crate::snapshot::NodeFlags`]).
    pub no_hard_taints: bool,
    /// Holds only where the pod's requests fit ([`crate::plugins::node_resources::fits`]).
    pub fits: bool,
}

impl QuickPass {
    /// Both tests at once.
    pub fn and(self, other: QuickPass) -> QuickPass {
        QuickPass {
            schedulable: self.schedulable || other.schedulable,
            no_hard_taints: self.no_hard_taints || other.no_hard_taints,
            fits: self.fits || other.fits,
        }
    }

    /// Whether the test holds for `pod` on `node`.
    #[inline]
    pub fn holds(&self, pod: &PodInfo, node: &NodeState) -> bool {
        self.flags_allow(&node.flags)
            && (!self.fits || crate::plugins::node_resources::fits(node, &pod.requests))
    }

    /// [`QuickPass::holds`] on the node's dense record, for a pod whose requests the
    /// record answers for (`requests`: [`crate::snapshot::Snapshot::hot_request`]): the
    /// same tests on the same values.
    #[inline]
    pub fn holds_hot(&self, requests: &crate::snapshot::HotRequest, node: &crate::snapshot::NodeHot) -> bool {
        self.flags_allow(&node.flags) && (!self.fits || node.fits(requests))
    }

    /// The tests on the node's flags: schedulable, without NoSchedule / NoExecute taints.
    #[inline]
    fn flags_allow(&self, flags: &crate::snapshot::NodeFlags) -> bool {
        if self.schedulable && flags.unschedulable {
            return false;
        }
        !(self.no_hard_taints && flags.has_hard_taints)
    }
}

/// A Filter plugin (with its PreFilter).
pub trait FilterPlugin: Send + Sync {
    /// The plugin name as in kube-scheduler (e.g. `NodeResourcesFit`).
    fn name(&self) -> &'static str;
    /// What this plugin's verdict for `pod` depends on (see [`Dependence`]). A function of
    /// the pod's scheduling inputs, not of its identity: two records that differ only in
    /// name and uid ([`PodInfo::same_but_identity`]) get the same answer, which the
    /// placement search computes once for a gang's alike members.
    fn dependence(&self, pod: &PodInfo) -> Dependence;
    /// Computes per-pod state from the snapshot (once per scheduling attempt), kept in
    /// [`CycleState::data`] under the plugin's name. An `Err` rejects the pod on every
    /// node. A plugin may also narrow the candidate nodes with
    /// [`CycleState::restrict_nodes`] (kube's `PreFilterResult`).
    fn pre_filter<'a>(
        &self,
        _state: &mut CycleState<'a>,
        _snap: &'a Snapshot,
    ) -> Result<PreResult, Rejection> {
        Ok(PreResult::Run)
    }
    /// Whether the pod can run on `node`.
    fn filter(&self, state: &CycleState<'_>, snap: &Snapshot, node: &NodeState) -> FilterResult;
    /// Whether, for `pod`, this plugin's PreFilter and verdict read nothing but the pod
    /// (fields its fit signature compares) and the node's own [`NodeState`]: no other
    /// node, no pod elsewhere, no cluster-wide object, no clock. Lets the single-pod
    /// search reuse a node's verdict for the next pod of the same signature while the
    /// node's [`NodeState::stamp`] is unchanged (`schedule_one::SingleReuse`). Default
    /// `false`: a plugin that does not opt in turns the reuse off while it is active.
    fn reads_only_pod_and_node(&self, _pod: &PodInfo) -> bool {
        false
    }
    /// A test that, when it holds on a node, means [`FilterPlugin::filter`] passes that
    /// node for the pod of `state` (after this plugin's PreFilter ran). `None` (the
    /// default): no such test, and every node runs the filter. A plugin that answers must
    /// pass every node its test holds on; `quick_pass_implies_the_filters` checks each
    /// answer against the filters.
    fn quick_pass(&self, _state: &CycleState<'_>) -> Option<QuickPass> {
        None
    }
}

/// A Score plugin (with its PreScore and NormalizeScore).
pub trait ScorePlugin: Send + Sync {
    /// The plugin name as in kube-scheduler.
    fn name(&self) -> &'static str;
    /// Weight in kube-scheduler's default profile.
    fn default_weight(&self) -> i64;
    /// Computes per-pod scoring state over the feasible nodes.
    fn pre_score<'a>(
        &self,
        _state: &mut CycleState<'a>,
        _snap: &'a Snapshot,
        _feasible: &[NodeId],
    ) -> PreResult {
        PreResult::Run
    }
    /// Raw score of one feasible node (`node` is `snap.node(id)`).
    fn score(&self, state: &CycleState<'_>, snap: &Snapshot, id: NodeId, node: &NodeState) -> i64;
    /// Raw scores of every feasible node at once: `out[i]` is [`ScorePlugin::score`] of
    /// `feasible[i]` (same lengths). The default asks `score` node by node; a plugin may
    /// override it with a loop that reads the pod once instead of once per node, and must
    /// then give exactly the scores `score` gives (each override has a property test).
    fn score_all(&self, state: &CycleState<'_>, snap: &Snapshot, feasible: &[NodeId], out: &mut [i64]) {
        for (o, &id) in out.iter_mut().zip(feasible) {
            *o = self.score(state, snap, id, snap.node(id));
        }
    }
    /// Rescales the raw scores (`scores[i]` belongs to `feasible[i]`) to `0..=MAX_NODE_SCORE`.
    fn normalize(&self, _state: &CycleState<'_>, _feasible: &[NodeId], _scores: &mut [i64]) {}
    /// Whether the raw score of a node depends only on the pod and that node's state, and
    /// PreScore neither depends on the feasible set nor on pods elsewhere. Lets
    /// [`crate::schedule_one::place_copies`] rescore only the node that received a copy.
    /// Required (no default): a new plugin must decide.
    fn node_local(&self) -> bool;
    /// Whether PreScore and the raw score read nothing but the pod (fields its fit
    /// signature compares) and the node's own [`NodeState`] (stricter than
    /// [`ScorePlugin::node_local`]: not even a cluster-wide count such as an image's
    /// spread). Lets the single-pod search reuse a node's raw score for the next pod of
    /// the same signature while the node's stamp is unchanged. Default `false`.
    fn reads_only_pod_and_node(&self) -> bool {
        false
    }
}

/// Reserve / Unreserve: claims what the pod will use on its node (devices, volumes) once
/// its group's assignment is decided. Unreserve undoes it when a later member, Permit or
/// PreBind fails; it must be idempotent.
pub trait ReservePlugin: Send + Sync {
    fn name(&self) -> &'static str;
    /// Whether the plugin has anything to reserve for `pod` (e.g. it has ResourceClaims).
    /// When no Reserve or PreBind plugin applies to any member and no Permit plugin is
    /// configured, the commit step is skipped.
    fn applies(&self, _pod: &PodInfo) -> bool {
        true
    }
    /// Reserves for `pod` on `node`. An error fails the pod (and a gang with it).
    fn reserve(
        &self,
        data: &mut CycleData,
        snap: &Snapshot,
        pod: &PodInfo,
        node: NodeId,
    ) -> Result<(), Status>;
    /// Releases what [`ReservePlugin::reserve`] took.
    fn unreserve(&self, data: &mut CycleData, snap: &Snapshot, pod: &PodInfo, node: NodeId);
}

/// What Permit says about a reserved pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermitVerdict {
    Allow,
    /// Not now (the group is retried after its backoff), with the reason.
    Wait(String),
    /// Never on this node, with the reason.
    Reject(String),
}

/// Permit: the last word before binding, asked once every member of the group is reserved.
pub trait PermitPlugin: Send + Sync {
    fn name(&self) -> &'static str;
    fn permit(&self, data: &CycleData, snap: &Snapshot, pod: &PodInfo, node: NodeId) -> PermitVerdict;
}

/// PreBind: work that must be done before the binding (e.g. writing a claim's allocation);
/// called only when the whole group is permitted. An error fails the group.
pub trait PreBindPlugin: Send + Sync {
    fn name(&self) -> &'static str;
    /// Whether the plugin has anything to do for `pod` (see [`ReservePlugin::applies`]).
    fn applies(&self, _pod: &PodInfo) -> bool {
        true
    }
    fn pre_bind(
        &self,
        data: &mut CycleData,
        snap: &Snapshot,
        pod: &PodInfo,
        node: NodeId,
    ) -> Result<(), Status>;
}

/// Per-pod data of one scheduling cycle, typed and keyed by plugin (kube's CycleState
/// data): a plugin writes what its PreFilter / Filter / Reserve compute and reads it back
/// at its later extension points. Values own their data (`'static`), so they outlive the
/// snapshot borrow of one filter pass and travel with the pod to Reserve and PreBind.
#[derive(Default)]
pub struct CycleData {
    entries: Vec<(&'static str, Box<dyn Any + Send + Sync>)>,
    /// What PreBind decided to write before the binding (claim statuses); the commit step
    /// turns them into decisions.
    claim_writes: Vec<ClaimWrite>,
    /// What VolumeBinding's PreBind decided to write before the binding.
    volume_writes: Vec<VolumeWrite>,
}

/// The writes a pod's PreBind decided, carried out (claim statuses, volume bindings)
/// before its binding.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct BindWrites {
    pub claims: Vec<ClaimWrite>,
    pub volumes: Vec<VolumeWrite>,
}

impl fmt::Debug for CycleData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.entries.iter().map(|(k, _)| k)).finish()
    }
}

impl CycleData {
    /// Stores `value` for `plugin` (replacing its earlier value of the same type).
    pub fn write<T: Any + Send + Sync>(&mut self, plugin: &'static str, value: T) {
        match self.read_mut::<T>(plugin) {
            Some(slot) => *slot = value,
            None => self.entries.push((plugin, Box::new(value))),
        }
    }
    /// The value of type `T` stored for `plugin`.
    pub fn read<T: Any>(&self, plugin: &str) -> Option<&T> {
        self.entries.iter().filter(|(k, _)| *k == plugin).find_map(|(_, v)| v.downcast_ref::<T>())
    }
    /// The value of type `T` stored for `plugin`, mutably.
    pub fn read_mut<T: Any>(&mut self, plugin: &str) -> Option<&mut T> {
        self.entries.iter_mut().filter(|(k, _)| *k == plugin).find_map(|(_, v)| v.downcast_mut::<T>())
    }
    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.claim_writes.is_empty() && self.volume_writes.is_empty()
    }
    /// PreBind: a ResourceClaim status write to carry out before the pod binds.
    pub fn add_claim_write(&mut self, write: ClaimWrite) {
        self.claim_writes.push(write);
    }
    /// PreBind: a volume binding to write before the pod binds.
    pub fn add_volume_write(&mut self, write: VolumeWrite) {
        self.volume_writes.push(write);
    }
    /// The writes PreBind decided, in order.
    pub fn take_writes(&mut self) -> BindWrites {
        BindWrites {
            claims: std::mem::take(&mut self.claim_writes),
            volumes: std::mem::take(&mut self.volume_writes),
        }
    }
}

/// Candidate nodes narrowed by PreFilter plugins (kube's `PreFilterResult`).
#[derive(Debug, Clone, Default)]
pub struct NodeRestriction<'a> {
    /// Allowed node names, sorted and deduplicated.
    pub names: Vec<&'a str>,
    /// Plugins that narrowed the set, sorted.
    pub plugins: Vec<&'static str>,
}

impl NodeRestriction<'_> {
    /// Whether the node named `name` is a candidate.
    pub fn allows(&self, name: &str) -> bool {
        self.names.binary_search(&name).is_ok()
    }

    /// The reason given to nodes left out: `node(s) didn't satisfy plugin(s) [A B]`.
    pub fn reason(&self) -> String {
        format!("node(s) didn't satisfy plugin(s) [{}]", self.plugins.join(" "))
    }
}

/// Per-pod state of one scheduling attempt (kube's CycleState): the pod's parsed
/// scheduling constraints, what PreFilter / PreScore computed (in [`CycleState::data`]),
/// the PreFilter node restriction. It borrows the pod and the snapshot, so it can never
/// outlive a change of either; [`CycleState::data`] owns its values and may.
pub struct CycleState<'a> {
    /// The pod being scheduled.
    pub pod: &'a PodInfo,
    /// The pod's scheduling constraints, parsed once.
    pub parsed: ParsedPod<'a>,
    /// Typed per-plugin data.
    pub data: CycleData,
    /// Candidate nodes narrowed by PreFilter (`None`: every node is a candidate).
    pub restriction: Option<NodeRestriction<'a>>,
    /// Filter plugins (by index in the framework) whose PreFilter said Skip.
    pub(crate) skip_filters: u64,
    /// Score plugins (by index in the framework) whose PreScore said Skip.
    pub(crate) skip_scores: u64,
    /// The conjunction of the active filters' [`QuickPass`] tests, set after PreFilter
    /// when every active filter has one and no PreFilter narrowed the nodes.
    pub(crate) quick: Option<QuickPass>,
    /// The pod's requests as the nodes' dense records answer them, when `quick` is set
    /// and they can ([`crate::snapshot::Snapshot::hot_request`]): the quick test then
    /// reads the record instead of the node's state.
    pub(crate) hot: Option<crate::snapshot::HotRequest>,
}

impl<'a> CycleState<'a> {
    /// A fresh state for `pod`.
    pub fn new(pod: &'a PodInfo) -> CycleState<'a> {
        CycleState {
            pod,
            parsed: ParsedPod::new(pod),
            data: CycleData::default(),
            restriction: None,
            skip_filters: 0,
            skip_scores: 0,
            quick: None,
            hot: None,
        }
    }

    /// Narrows the candidate nodes to `names` (intersected with earlier restrictions).
    pub fn restrict_nodes(&mut self, plugin: &'static str, mut names: Vec<&'a str>) {
        names.sort_unstable();
        names.dedup();
        match self.restriction.as_mut() {
            None => self.restriction = Some(NodeRestriction { names, plugins: vec![plugin] }),
            Some(r) => {
                r.names.retain(|n| names.binary_search(n).is_ok());
                r.plugins.push(plugin);
                r.plugins.sort_unstable();
                r.plugins.dedup();
            }
        }
    }
}

/// Which speed-ups of the placement search are exact for a pod under a framework.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shortcuts {
    /// The aggregate-capacity pre-filter may reject a placement: some active filter checks
    /// plain resources, so "the placement's free plain resources cannot hold the pods" is a
    /// necessary condition of feasibility.
    pub aggregate_bound: bool,
    /// Copies of the pod can be counted per node (and placed in one pass): every active
    /// filter is node-local, checks plain resources or (capped per node) devices, and at
    /// least one checks plain resources.
    pub copy_counting: CopyCounting,
    /// The device pre-filter may reject a placement: the `DynamicResources` filter is
    /// active, so "the placement's free devices cannot cover the pods' claims" is a
    /// necessary condition of feasibility.
    pub devices: bool,
}

/// The configured pod-level plugins: filters in kube-scheduler's order, score plugins with
/// their weights, and the Reserve, Permit and PreBind plugins.
pub struct Framework {
    pub(crate) filters: Vec<Box<dyn FilterPlugin>>,
    pub(crate) scores: Vec<(Box<dyn ScorePlugin>, i64)>,
    pub(crate) reserve: Vec<Box<dyn ReservePlugin>>,
    pub(crate) permit: Vec<Box<dyn PermitPlugin>>,
    pub(crate) pre_bind: Vec<Box<dyn PreBindPlugin>>,
    /// `percentageOfNodesToScore` for the pods of a PodGroup cycle searching a large node
    /// set (see [`crate::schedule_one::num_feasible_nodes_to_find`]).
    pub(crate) percentage_of_nodes_to_score: Option<u32>,
}

impl fmt::Debug for Framework {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Framework")
            .field("filters", &self.filter_names())
            .field("scores", &self.score_weights())
            .field("reserve", &self.reserve.iter().map(|p| p.name()).collect::<Vec<_>>())
            .field("permit", &self.permit.iter().map(|p| p.name()).collect::<Vec<_>>())
            .field("pre_bind", &self.pre_bind.iter().map(|p| p.name()).collect::<Vec<_>>())
            .finish()
    }
}

impl Framework {
    /// A framework without plugins (every node fits, every score is 0).
    pub fn empty() -> Framework {
        Framework {
            filters: Vec::new(),
            scores: Vec::new(),
            reserve: Vec::new(),
            permit: Vec::new(),
            pre_bind: Vec::new(),
            percentage_of_nodes_to_score: None,
        }
    }

    /// The filters of `fw` alone (no score, Reserve, Permit or PreBind plugin): what the
    /// hierarchical strategy evaluates per node before its own counting.
    pub fn filters_only(fw: Framework) -> Framework {
        Framework { filters: fw.filters, ..Framework::empty() }
    }

    /// Bits of the filters whose [`FilterPlugin::dependence`] for `pod` is `dependence`.
    pub fn filter_mask(&self, pod: &PodInfo, dependence: Dependence) -> u64 {
        self.filters
            .iter()
            .enumerate()
            .filter(|(_, f)| f.dependence(pod) == dependence)
            .fold(0, |m, (i, _)| m | 1 << i)
    }

    /// Appends a filter plugin (filters run in registration order; at most 64).
    pub fn add_filter(&mut self, plugin: Box<dyn FilterPlugin>) {
        assert!(self.filters.len() < 64, "at most 64 filter plugins");
        self.filters.push(plugin);
    }

    /// Appends a score plugin with its weight; weight 0 leaves it out.
    pub fn add_score(&mut self, plugin: Box<dyn ScorePlugin>, weight: i64) {
        assert!(self.scores.len() < 64, "at most 64 score plugins");
        if weight != 0 {
            self.scores.push((plugin, weight));
        }
    }

    /// Names of the filter plugins, in order.
    pub fn filter_names(&self) -> Vec<&'static str> {
        self.filters.iter().map(|p| p.name()).collect()
    }

    /// Names and weights of the score plugins, in order.
    pub fn score_weights(&self) -> Vec<(&'static str, i64)> {
        self.scores.iter().map(|(p, w)| (p.name(), *w)).collect()
    }

    /// Whether any Reserve, Permit or PreBind plugin is configured (else the commit step
    /// has nothing to run).
    pub fn has_binding_cycle_plugins(&self) -> bool {
        !(self.reserve.is_empty() && self.permit.is_empty() && self.pre_bind.is_empty())
    }

    /// Whether the binding cycle has work for `pod`: a Permit plugin is configured, or a
    /// Reserve or PreBind plugin applies to it.
    pub fn binding_cycle_applies(&self, pod: &PodInfo) -> bool {
        !self.permit.is_empty()
            || self.reserve.iter().any(|p| p.applies(pod))
            || self.pre_bind.iter().any(|p| p.applies(pod))
    }

    /// Which placement-search shortcuts are exact for `pod` (see [`Dependence`]).
    pub fn shortcuts(&self, pod: &PodInfo) -> Shortcuts {
        let mut resources = false;
        let mut exact = true;
        let mut devices = false;
        let mut counted_devices = false;
        for f in &self.filters {
            devices |= f.name() == crate::plugins::dynamic_resources::NAME;
            match f.dependence(pod) {
                Dependence::NodeLocal => {}
                Dependence::PlainResources => resources = true,
                Dependence::Devices => counted_devices = true,
                Dependence::SameNodePods | Dependence::OtherPods | Dependence::ExtraCapacity => exact = false,
            }
        }
        let copy_counting = match (resources && exact, counted_devices) {
            (false, _) => CopyCounting::Off,
            (true, false) => CopyCounting::Resources,
            (true, true) => CopyCounting::WithDevices,
        };
        Shortcuts { aggregate_bound: resources, copy_counting, devices }
    }

    /// Runs Reserve for one pod; on an error the plugins reserved so far are unreserved.
    pub fn run_reserve(
        &self,
        data: &mut CycleData,
        snap: &Snapshot,
        pod: &PodInfo,
        node: NodeId,
    ) -> Result<(), Status> {
        for (i, p) in self.reserve.iter().enumerate() {
            if let Err(mut s) = p.reserve(data, snap, pod, node) {
                for q in self.reserve[..=i].iter().rev() {
                    q.unreserve(data, snap, pod, node);
                }
                if s.plugin.is_empty() {
                    s.plugin = p.name();
                }
                return Err(s);
            }
        }
        Ok(())
    }

    /// Runs Unreserve for one pod, in reverse order.
    pub fn run_unreserve(&self, data: &mut CycleData, snap: &Snapshot, pod: &PodInfo, node: NodeId) {
        for p in self.reserve.iter().rev() {
            p.unreserve(data, snap, pod, node);
        }
    }

    /// Runs Permit for one pod: the first verdict that is not Allow.
    pub fn run_permit(
        &self,
        data: &CycleData,
        snap: &Snapshot,
        pod: &PodInfo,
        node: NodeId,
    ) -> PermitVerdict {
        self.permit
            .iter()
            .map(|p| p.permit(data, snap, pod, node))
            .find(|v| *v != PermitVerdict::Allow)
            .unwrap_or(PermitVerdict::Allow)
    }

    /// Runs PreBind for one pod, stopping at the first error.
    pub fn run_pre_bind(
        &self,
        data: &mut CycleData,
        snap: &Snapshot,
        pod: &PodInfo,
        node: NodeId,
    ) -> Result<(), Status> {
        for p in &self.pre_bind {
            p.pre_bind(data, snap, pod, node).map_err(|mut s| {
                if s.plugin.is_empty() {
                    s.plugin = p.name();
                }
                s
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycle_data_is_typed_and_keyed_by_plugin() {
        let mut d = CycleData::default();
        d.write("A", 1u32);
        d.write("A", String::from("a"));
        d.write("B", 2u32);
        assert_eq!(d.read::<u32>("A"), Some(&1));
        assert_eq!(d.read::<String>("A").map(String::as_str), Some("a"));
        assert_eq!(d.read::<u32>("B"), Some(&2));
        assert_eq!(d.read::<u64>("A"), None, "another type under the same plugin");
        d.write("A", 5u32);
        *d.read_mut::<u32>("B").unwrap() += 1;
        assert_eq!((d.read::<u32>("A"), d.read::<u32>("B")), (Some(&5), Some(&3)));
    }
}
