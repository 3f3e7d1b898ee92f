//! The PodGroup scheduling cycle (seed 004, SEMANTICS §2-§4): the members of one group
//! are tried one after another inside one node set, each placed pod assumed on the snapshot
//! before the next is tried, and the group is judged as a whole.
//!
//! * Order: pod priority (higher first), then first arrival in the queue (earlier first).
//! * Gang policy: feasible iff members already bound (or assumed) plus pods placed now reach
//!   `minCount`, and at least one pod was placed now. Basic policy: at least one pod placed.
//! * Early rejection (KEP-5732 beta, `PlacementFeasible`): the loop stops as soon as the
//!   pods not yet tried plus the scheduled ones can no longer reach `minCount`.
//! * A pod that fits nowhere may be rescued by per-pod preemption ([`PodPreemption`]); the
//!   pods after it see it placed and its victims gone, and a feasible group that needed any
//!   preemption waits for the victims to go instead of binding (SEMANTICS §4).
//!
//! This module evaluates one node set ([`run_group_in_nodes`]); [`crate::placement`]
//! generates the node sets (placements), runs this in each, scores and selects.
//! The shared [`GroupIndex`] is what the engine knows about every PodGroup.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;

pub use crate::framework::group::*;
pub use crate::framework::preemption::*;
use crate::framework::{Code, PlacementFeasible, PlacementProgress, Status};
use crate::model::{GroupKey, NodeId, PodGroupInfo, PodInfo, PodKey};
use crate::snapshot::Snapshot;

// ---------------------------------------------------------------------------------------
// What the engine knows about PodGroups.
// ---------------------------------------------------------------------------------------

/// The `PodGroupScheduled` condition as last written (or observed in the store).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupCondition {
    pub status: bool,
    pub reason: String,
    pub message: String,
}

/// One PodGroup: its object (if it exists) and its known member pods.
#[derive(Debug, Clone, Default)]
pub struct GroupEntry {
    /// `None` while member pods exist but the PodGroup object does not.
    pub info: Option<Arc<PodGroupInfo>>,
    /// Member pods that exist, are not terminal and are not being deleted (bound or not).
    /// Hashed: a gang joins one member at a time and each join is one insertion, while
    /// the few readers that need an order ask for [`GroupEntry::sorted_members`].
    pub members: FxHashSet<PodKey>,
    /// Last known `PodGroupScheduled` condition.
    pub condition: Option<GroupCondition>,
}

impl GroupEntry {
    /// The members in key order.
    pub fn sorted_members(&self) -> Vec<&PodKey> {
        let mut members: Vec<&PodKey> = self.members.iter().collect();
        members.sort_unstable();
        members
    }
}

/// Every PodGroup the engine knows, by key. Looked up on every member event (PreEnqueue
/// asks for the group's object and member count), so it is hashed; [`GroupIndex::iter`]
/// sorts, for a deterministic order.
#[derive(Debug, Clone, Default)]
pub struct GroupIndex {
    groups: FxHashMap<GroupKey, GroupEntry>,
}

impl GroupIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// The entry of a group, if anything is known about it.
    pub fn get(&self, key: &GroupKey) -> Option<&GroupEntry> {
        self.groups.get(key)
    }

    /// The PodGroup object of a group, if it exists.
    pub fn info(&self, key: &GroupKey) -> Option<&Arc<PodGroupInfo>> {
        self.groups.get(key).and_then(|e| e.info.as_ref())
    }

    /// The entry of a group, created empty if unknown (the key copied only then).
    pub fn entry_mut(&mut self, key: &GroupKey) -> &mut GroupEntry {
        crate::model::value_or_default(&mut self.groups, key)
    }

    /// Forgets a group entry once nothing refers to it.
    pub fn prune(&mut self, key: &GroupKey) {
        if self.groups.get(key).is_some_and(|e| e.info.is_none() && e.members.is_empty()) {
            self.groups.remove(key);
        }
    }

    /// Number of known member pods of a group (bound or not).
    pub fn member_count(&self, key: &GroupKey) -> usize {
        self.groups.get(key).map_or(0, |e| e.members.len())
    }

    /// Every group, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&GroupKey, &GroupEntry)> {
        let mut all: Vec<_> = self.groups.iter().collect();
        all.sort_unstable_by(|a, b| a.0.cmp(b.0));
        all.into_iter()
    }

    /// Whether some group satisfies `f` (any order).
    pub fn any(&self, f: impl FnMut((&GroupKey, &GroupEntry)) -> bool) -> bool {
        self.groups.iter().any(f)
    }
}

/// What makes a pod's filter results equal to another's when only pods are added to the
/// snapshot. `None` for pods whose feasibility can improve as pods are added (inter-pod
/// affinity, topology spread), which are always tried.
#[derive(Debug, PartialEq)]
struct FitSignature<'a> {
    requests: &'a crate::resources::Resources,
    priority: i32,
    nominated: Option<&'a str>,
    node_selector: &'a BTreeMap<String, String>,
    node_affinity: Option<&'a placer_api::k8s::api::core::v1::NodeAffinity>,
    anti_affinity: Option<&'a placer_api::k8s::api::core::v1::PodAntiAffinity>,
    tolerations: &'a [placer_api::k8s::api::core::v1::Toleration],
    /// Ports with a hostPort, of containers and sidecars.
    host_ports: &'a [placer_api::k8s::api::core::v1::ContainerPort],
    labels: &'a BTreeMap<String, String>,
}

/// The signature of `pod`. Every field of [`PodInfo`] and of its
/// [`crate::model::PodSchedulingView`] is destructured here without `..`: a new field
/// does not compile until it is classified as part of the signature or as irrelevant to
/// filtering (a device claim, say, must make its pods differ or return `None`).
/// A pod with ResourceClaims has none unless `claims_checked`: the caller has checked
/// that the claims of the pods it compares are alike ([`crate::snapshot::dra::DraState::copy_claims`]).
fn fit_signature(pod: &PodInfo, claims_checked: bool) -> Option<FitSignature<'_>> {
    let PodInfo {
        view,
        key: _,              // identity, not a constraint
        uid: _,              // identity
        requests,            // NodeResourcesFit
        priority,            // which nominated pods count as placed
        preemption_never: _, // preemption only; skipping is off when it may run
        group: _,            // every pod of a cycle shares it
        node_name,           // NodeName
        nominated_node_name, // tried first
        scheduler_name: _,   // every pod of a cycle shares it
        gated: _,            // gated pods never reach a cycle
        terminal: _,         // terminal pods never reach a cycle
        deleting: _,         // deleting pods never reach a cycle
    } = pod;
    let crate::model::PodSchedulingView {
        labels,                      // existing pods' anti-affinity selects on them
        node_selector,               // NodeAffinity
        affinity,                    // NodeAffinity, InterPodAffinity
        tolerations,                 // TaintToleration
        topology_spread_constraints, // PodTopologySpread
        host_ports,                  // NodePorts
        scheduling_gates: _,         // gated pods never reach a cycle
        spec_priority: _,            // folded into `priority`
        priority_class_name: _,      // folded into `priority`
        pod_index: _,                // placing order of the hierarchical strategy only
        pod_index_offset: _,         // placing order of the hierarchical strategy only
        start_time: _,               // victim ordering only
        reports_not_ready: _,        // victim ordering only
        resource_claims,             // DynamicResources: devices are held per claim
        images: _,                   // ImageLocality scores only
        volumes,                     // volume plugins: volumes are bound per claim, disks conflict
    } = &**view;
    if !topology_spread_constraints.is_empty()
        || node_name.is_some()
        || (!resource_claims.is_empty() && !claims_checked)
        || !volumes.is_empty()
    {
        return None;
    }
    let (node_affinity, anti_affinity) = match affinity.as_deref() {
        None => (None, None),
        Some(placer_api::k8s::api::core::v1::Affinity { node_affinity, pod_affinity, pod_anti_affinity }) => {
            // Pod affinity can become satisfied as pods are added: always tried.
            if pod_affinity.is_some() {
                return None;
            }
            (node_affinity.as_ref(), pod_anti_affinity.as_ref())
        }
    };
    Some(FitSignature {
        requests,
        priority: *priority,
        nominated: nominated_node_name.as_deref(),
        node_selector,
        node_affinity,
        anti_affinity,
        tolerations,
        host_ports,
        labels,
    })
}

/// Whether both pods have a fit signature and it is the same: equal filter inputs, and
/// no inter-pod affinity, topology spread, claims, volumes or `nodeName` (the single-pod
/// search's reuse across identical pods, `schedule_one::SingleReuse`).
pub fn same_fit_signature(a: &PodInfo, b: &PodInfo) -> bool {
    if a.same_but_identity(b) {
        return fit_signature(a, false).is_some();
    }
    fit_signature(a, false).is_some_and(|sa| fit_signature(b, false).is_some_and(|sb| sa == sb))
}

/// [`same_fit_signature`] with the labels compared only when `labels` is true or the pods
/// carry pod anti-affinity: a pod's labels reach the filters only through the required
/// anti-affinity of pods already placed (and its own anti-affinity's `matchLabelKeys`), so
/// with no such pod in the snapshot two pods that differ only in their labels pass and
/// fail the same nodes for the same reasons.
pub fn same_fit_signature_but_labels(a: &PodInfo, b: &PodInfo, labels: bool) -> bool {
    /// What both signatures' labels are set to when labels do not count (not one pod's
    /// labels compared with themselves: that walks the map).
    static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();
    if a.same_but_identity(b) {
        return fit_signature(a, false).is_some();
    }
    let (Some(mut sa), Some(mut sb)) = (fit_signature(a, false), fit_signature(b, false)) else {
        return false;
    };
    if !labels && sa.anti_affinity.is_none() {
        sa.labels = &NO_LABELS;
        sb.labels = &NO_LABELS;
    }
    sa == sb
}

/// Whether two pods read the same inputs as members of a PodGroup cycle, their PodGroups
/// aside (the caller compares those): [`same_fit_signature_but_labels`], and the same
/// namespace, scheduler, `preemptionPolicy`, placing index (the hierarchical strategy's
/// index order) and images (ImageLocality scores the placements). The reuse of failed
/// PodGroup cycles (`engine/group_failures.rs`) compares members pairwise with it.
pub fn same_member_inputs(a: &PodInfo, b: &PodInfo, labels: bool) -> bool {
    a.key.namespace == b.key.namespace
        && a.scheduler_name == b.scheduler_name
        && a.preemption_never == b.preemption_never
        && a.view.pod_index == b.view.pod_index
        && a.view.pod_index_offset == b.view.pod_index_offset
        && a.view.images == b.view.images
        && same_fit_signature_but_labels(a, b, labels)
}

/// Whether `pod` has a fit signature (see [`same_fit_signature`]).
pub fn has_fit_signature(pod: &PodInfo) -> bool {
    fit_signature(pod, false).is_some()
}

/// Whether every pod of the cycle has the same node-local filter inputs: equal
/// [`FitSignature`]s without inter-pod (anti-)affinity, topology spread or host ports, and
/// either no ResourceClaims or claims of their own that copy counting can count alike
/// ([`crate::snapshot::dra::DraState::copy_claims`]). For such a group, how many pods fit
/// on a node depends only on that node's free resources (and free devices), so placements
/// can be evaluated by counting copies.
pub fn is_uniform_node_local(cycle: &GroupCycle, snap: &Snapshot) -> bool {
    let claims = cycle.pods.iter().any(|p| !p.view.resource_claims.is_empty());
    if claims && snap.dra().copy_claims(&cycle.pods).is_none() {
        return false;
    }
    let Some(first_pod) = cycle.pods.first() else { return false };
    let Some(first) = fit_signature(first_pod, claims) else { return false };
    if first.anti_affinity.is_some() || !first.host_ports.is_empty() {
        return false;
    }
    cycle.pods[1..]
        .iter()
        .all(|p| first_pod.same_but_identity(p) || fit_signature(p, claims).is_some_and(|s| s == first))
}

/// Runs the group algorithm inside `nodes`: members in cycle order, each placed pod
/// assumed on `snap` (the caller takes a checkpoint before and rolls back after), with
/// early rejection through `feasible` (the PlacementFeasible plugins) and optional per-pod
/// preemption.
///
/// Without PlacementFeasible plugins the group is feasible iff at least one pod was placed.
pub fn run_group_in_nodes(
    algo: &dyn PodScheduler,
    snap: &mut Snapshot,
    cycle: &GroupCycle,
    nodes: &[NodeId],
    feasible: &[Box<dyn PlacementFeasible>],
    preemption: Option<&mut dyn PodPreemption>,
) -> GroupAttempt {
    run_group_with_plan(algo, snap, cycle, nodes, feasible, preemption, None)
}

/// [`run_group_in_nodes`] for a uniform, node-local group ([`is_uniform_node_local`]):
/// where its identical members land is computed once by [`PodScheduler::place_copies`]
/// instead of one full search per member. Members the shortcut places are not assumed
/// (nothing reads them); if a member remains, they are assumed before it is searched for
/// as the simulation would. Falls back to the simulation when the shortcut does not
/// apply. Unlike [`run_group_in_nodes`], `snap` is left as found.
pub fn run_uniform_group_in_nodes(
    algo: &dyn PodScheduler,
    snap: &mut Snapshot,
    cycle: &GroupCycle,
    nodes: &[NodeId],
    feasible: &[Box<dyn PlacementFeasible>],
) -> GroupAttempt {
    let plan = match cycle.pods.first() {
        Some(first)
            if algo.shortcuts(first).copy_counting != crate::framework::CopyCounting::Off
                && is_uniform_node_local(cycle, snap) =>
        {
            algo.place_copies(snap, first, nodes, cycle.pods.len())
        }
        _ => None,
    };
    let mark = snap.checkpoint();
    let attempt = run_group_with_plan(algo, snap, cycle, nodes, feasible, None, plan);
    snap.rollback(mark);
    attempt
}

/// The group algorithm; `plan[k]` (when given) is the node of the k-th member placed,
/// used instead of a search while it lasts. Members placed from the plan are assumed only
/// once a search needs the snapshot to include them.
pub(crate) fn run_group_with_plan(
    algo: &dyn PodScheduler,
    snap: &mut Snapshot,
    cycle: &GroupCycle,
    nodes: &[NodeId],
    feasible: &[Box<dyn PlacementFeasible>],
    mut preemption: Option<&mut dyn PodPreemption>,
    plan: Option<Vec<NodeId>>,
) -> GroupAttempt {
    let plan = plan.unwrap_or_default();
    let mut deferred: Vec<(Arc<PodInfo>, NodeId)> = Vec::new();
    let total = cycle.pods.len();
    let mut attempt = GroupAttempt {
        placed: Vec::with_capacity(total),
        failed: Vec::new(),
        skipped: Vec::new(),
        preemptions: Vec::new(),
        verdict: Verdict::Feasible,
    };
    let progress = |attempt: &GroupAttempt, tried: usize| PlacementProgress {
        remaining: u32::try_from(total - tried).unwrap_or(u32::MAX),
        scheduled: attempt.scheduled_total(cycle),
        placed: u32::try_from(attempt.placed.len()).unwrap_or(u32::MAX),
    };
    let check = |p: PlacementProgress| -> Status {
        for plugin in feasible {
            let status = plugin.feasible(cycle, p);
            if !status.is_success() {
                return status;
            }
        }
        Status::success()
    };
    // Before each pod only a rejection matters: the first plugin that does not answer
    // Success decides, and its message is built only when it rejects (a gang answers
    // Wait before every member until minCount is placed).
    let rejection = |p: PlacementProgress| -> Option<Status> {
        let (plugin, code) = feasible
            .iter()
            .map(|plugin| (plugin, plugin.code(cycle, p)))
            .find(|(_, c)| *c != Code::Success)?;
        is_rejecting(code).then(|| plugin.feasible(cycle, p))
    };

    // Signatures of pods that failed, to skip identical pods (failure is monotone while only
    // pods are added). Disabled when preemption may remove pods.
    let mut failed_signatures: Vec<(FitSignature<'_>, usize)> = Vec::new();
    for (i, pod) in cycle.pods.iter().enumerate() {
        if let Some(status) = rejection(progress(&attempt, i)) {
            attempt.skipped.extend(i..total);
            attempt.verdict = Verdict::Unschedulable(status.reasons.join(", "));
            return attempt;
        }
        if !failed_signatures.is_empty() && preemption.is_none() {
            if let Some(sig) = fit_signature(pod, false) {
                if let Some((_, j)) = failed_signatures.iter().find(|(s, _)| *s == sig) {
                    let fit = attempt.failed[*j].1.clone();
                    attempt.failed.push((i, fit));
                    continue;
                }
            }
        }
        let planned = plan.get(attempt.placed.len()).copied();
        let found = match planned {
            Some(node) => Ok(node),
            None => {
                for (p, n) in deferred.drain(..) {
                    snap.assume(p, n);
                }
                algo.find_node(snap, pod, nodes)
            }
        };
        match found {
            Ok(node) if planned.is_some() => {
                deferred.push((pod.clone(), node));
                attempt.placed.push((i, node));
            }
            Ok(node) => {
                snap.assume(pod.clone(), node);
                attempt.placed.push((i, node));
            }
            Err(fit) => {
                let plan = preemption.as_deref_mut().and_then(|p| p.preempt(snap, pod, nodes, &fit));
                match plan {
                    Some(plan) => {
                        for v in &plan.victims {
                            snap.remove_for_simulation(&v.key);
                        }
                        snap.assume(pod.clone(), plan.node);
                        attempt.placed.push((i, plan.node));
                        attempt.preemptions.push(PodPreemptionRecord {
                            pod: i,
                            node: plan.node,
                            victims: plan.victims,
                        });
                    }
                    None => {
                        if preemption.is_none() {
                            if let Some(sig) = fit_signature(pod, false) {
                                failed_signatures.push((sig, attempt.failed.len()));
                            }
                        }
                        attempt.failed.push((i, fit));
                    }
                }
            }
        }
    }
    let final_progress = progress(&attempt, total);
    let status = check(final_progress);
    attempt.verdict = if !status.is_success() {
        Verdict::Unschedulable(status.reasons.join(", "))
    } else if final_progress.placed == 0 {
        Verdict::Unschedulable("no pod of the group fits".to_string())
    } else {
        Verdict::Feasible
    };
    attempt
}

fn is_rejecting(code: Code) -> bool {
    matches!(code, Code::Unschedulable | Code::UnschedulableAndUnresolvable | Code::Error)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::framework::FitError;
    use crate::model::NodeStatic;
    use crate::plugins::placement_gang::GangScheduling;
    use placer_api::k8s::api::core::v1::{
        Container, Node, NodeStatus, Pod, PodSchedulingGroup, PodSpec, ResourceRequirements,
    };
    use placer_api::k8s::api::scheduling::v1alpha2::{
        GangSchedulingPolicy, PodGroup, PodGroupSchedulingConstraints, PodGroupSchedulingPolicy,
        PodGroupSpec, TopologyConstraint,
    };
    use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;
    use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use proptest::prelude::*;

    /// Resource-only pod algorithm: the first node (in the order given) where the pod fits.
    pub(crate) struct FirstFit;

    impl PodScheduler for FirstFit {
        /// Resources only: every shortcut is exact.
        fn shortcuts(&self, _pod: &PodInfo) -> crate::framework::Shortcuts {
            crate::framework::Shortcuts {
                aggregate_bound: true,
                copy_counting: crate::framework::CopyCounting::Resources,
                devices: false,
            }
        }
        fn find_node(&self, snap: &Snapshot, pod: &PodInfo, nodes: &[NodeId]) -> Result<NodeId, FitError> {
            let mut err = FitError { num_nodes: nodes.len(), ..FitError::default() };
            for &n in nodes {
                if crate::plugins::node_resources::fit_count(snap, pod, n) > 0 {
                    return Ok(n);
                }
                err.add("Insufficient cpu");
            }
            Err(err)
        }
        fn filter_node(&self, snap: &Snapshot, pod: &PodInfo, node: NodeId) -> Status {
            if crate::plugins::node_resources::fit_count(snap, pod, node) > 0 {
                Status::success()
            } else {
                Status::unschedulable("NodeResourcesFit", "Insufficient cpu")
            }
        }
        fn feasible_nodes(
            &self,
            snap: &Snapshot,
            pod: &PodInfo,
            nodes: &[NodeId],
        ) -> Result<Vec<NodeId>, FitError> {
            let ok: Vec<NodeId> = nodes
                .iter()
                .copied()
                .filter(|&n| crate::plugins::node_resources::fit_count(snap, pod, n) > 0)
                .collect();
            if ok.is_empty() {
                let mut err = FitError { num_nodes: nodes.len(), ..FitError::default() };
                for _ in nodes {
                    err.add("Insufficient cpu");
                }
                return Err(err);
            }
            Ok(ok)
        }
    }

    pub(crate) fn node(name: &str, cpu: i64, labels: &[(&str, &str)]) -> NodeStatic {
        let mut alloc = BTreeMap::new();
        alloc.insert("cpu".to_string(), Quantity(format!("{cpu}m")));
        alloc.insert("pods".to_string(), Quantity("32".into()));
        NodeStatic::from_node(Arc::new(Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
                ..Default::default()
            },
            status: Some(NodeStatus { allocatable: Some(alloc), ..Default::default() }),
            ..Default::default()
        }))
        .unwrap()
    }

    pub(crate) fn pod(name: &str, cpu_milli: i64, group: Option<&str>, node: Option<&str>) -> Arc<PodInfo> {
        let mut req = BTreeMap::new();
        req.insert("cpu".to_string(), Quantity(format!("{cpu_milli}m")));
        Arc::new(
            PodInfo::from_pod(Arc::new(Pod {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    namespace: Some("default".into()),
                    ..Default::default()
                },
                spec: Some(PodSpec {
                    node_name: node.map(Into::into),
                    scheduling_group: group.map(|g| PodSchedulingGroup { pod_group_name: Some(g.into()) }),
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

    pub(crate) fn group(name: &str, min_count: Option<i32>, key: Option<&str>) -> Arc<PodGroupInfo> {
        let pg = PodGroup {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec: PodGroupSpec {
                scheduling_policy: PodGroupSchedulingPolicy {
                    gang: min_count.map(|m| GangSchedulingPolicy { min_count: m }),
                    basic: if min_count.is_none() { Some(Default::default()) } else { None },
                },
                scheduling_constraints: key.map(|k| PodGroupSchedulingConstraints {
                    topology: Some(vec![TopologyConstraint { key: k.into() }]),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        Arc::new(PodGroupInfo::from_pod_group(Arc::new(pg)).unwrap())
    }

    fn cycle(
        g: Arc<PodGroupInfo>,
        pods: Vec<Arc<PodInfo>>,
        scheduled: Vec<(PodKey, Option<NodeId>)>,
    ) -> GroupCycle {
        GroupCycle::new(
            g,
            true,
            pods.into_iter().enumerate().map(|(i, p)| (i as u64, p)).collect(),
            scheduled,
        )
    }

    fn gang_plugins() -> Vec<Box<dyn PlacementFeasible>> {
        vec![Box::new(GangScheduling)]
    }

    fn snapshot(cpus: &[i64]) -> Snapshot {
        let mut s = Snapshot::new();
        for (i, c) in cpus.iter().enumerate() {
            s.upsert_node(node(&format!("n{i}"), *c, &[]));
        }
        s
    }

    #[test]
    fn cycle_order_is_priority_then_arrival() {
        let mut hi = (*pod("hi", 100, Some("pg"), None)).clone();
        hi.priority = 10;
        let c = GroupCycle::new(
            group("pg", Some(1), None),
            true,
            vec![
                (5, pod("late", 100, Some("pg"), None)),
                (9, Arc::new(hi)),
                (1, pod("early", 100, Some("pg"), None)),
            ],
            vec![],
        );
        let names: Vec<&str> = c.pods.iter().map(|p| &*p.key.name).collect();
        assert_eq!(names, ["hi", "early", "late"]);
    }

    #[test]
    fn gang_is_feasible_only_when_min_count_pods_fit() {
        let mut snap = snapshot(&[2000]);
        let pods: Vec<_> = (0..3).map(|i| pod(&format!("p{i}"), 1000, Some("pg"), None)).collect();
        let c = cycle(group("pg", Some(3), None), pods, vec![]);
        let nodes = snap.node_ids().to_vec();
        let mark = snap.checkpoint();
        let a = run_group_in_nodes(&FirstFit, &mut snap, &c, &nodes, &gang_plugins(), None);
        assert!(!a.is_feasible());
        assert_eq!(a.placed.len(), 2);
        assert_eq!(a.failed.len(), 1);
        snap.rollback(mark);
        assert_eq!(snap.node(nodes[0]).requested.cpu, 0, "rollback leaves nothing assumed");
    }

    #[test]
    fn gang_with_min_count_below_size_places_what_fits() {
        let mut snap = snapshot(&[3000]);
        let pods: Vec<_> = (0..4).map(|i| pod(&format!("p{i}"), 1000, Some("pg"), None)).collect();
        let c = cycle(group("pg", Some(3), None), pods, vec![]);
        let nodes = snap.node_ids().to_vec();
        let a = run_group_in_nodes(&FirstFit, &mut snap, &c, &nodes, &gang_plugins(), None);
        assert!(a.is_feasible());
        assert_eq!(a.placed.len(), 3);
        assert_eq!(a.failed.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [3]);
    }

    #[test]
    fn bound_members_count_toward_min_count() {
        let mut snap = snapshot(&[1000]);
        let c = cycle(
            group("pg", Some(3), None),
            vec![pod("p4", 1000, Some("pg"), None)],
            vec![
                (PodKey::new("default", "p1"), None),
                (PodKey::new("default", "p2"), None),
                (PodKey::new("default", "p3"), None),
            ],
        );
        let nodes = snap.node_ids().to_vec();
        let a = run_group_in_nodes(&FirstFit, &mut snap, &c, &nodes, &gang_plugins(), None);
        assert!(a.is_feasible(), "3 bound + 1 placed >= minCount 3");
        assert_eq!(c.needed(), 1);
    }

    #[test]
    fn basic_group_is_feasible_with_one_pod() {
        let mut snap = snapshot(&[1000]);
        let pods = vec![pod("big", 3000, Some("pg"), None), pod("small", 1000, Some("pg"), None)];
        let c = cycle(group("pg", None, None), pods, vec![]);
        let nodes = snap.node_ids().to_vec();
        let a = run_group_in_nodes(&FirstFit, &mut snap, &c, &nodes, &gang_plugins(), None);
        assert!(a.is_feasible());
        assert_eq!(a.placed, vec![(1, nodes[0])]);
    }

    #[test]
    fn nothing_placed_is_never_feasible() {
        let mut snap = snapshot(&[500]);
        let c = cycle(group("pg", None, None), vec![pod("p", 1000, Some("pg"), None)], vec![]);
        let nodes = snap.node_ids().to_vec();
        let a = run_group_in_nodes(&FirstFit, &mut snap, &c, &nodes, &[], None);
        assert!(!a.is_feasible());
    }

    #[test]
    fn early_rejection_stops_once_min_count_is_out_of_reach() {
        let mut snap = snapshot(&[1000]);
        let pods: Vec<_> = (0..5).map(|i| pod(&format!("p{i}"), 1000, Some("pg"), None)).collect();
        let c = cycle(group("pg", Some(5), None), pods, vec![]);
        let nodes = snap.node_ids().to_vec();
        let a = run_group_in_nodes(&FirstFit, &mut snap, &c, &nodes, &gang_plugins(), None);
        assert!(!a.is_feasible());
        assert_eq!(a.placed.len(), 1);
        assert_eq!(a.failed.len(), 1, "p1 fails; then 1 scheduled + 3 remaining < 5");
        assert_eq!(a.skipped, vec![2, 3, 4]);
        assert_eq!(
            a.verdict,
            Verdict::Unschedulable("minCount (5) cannot be satisfied: 1 scheduled, 3 remaining".into())
        );
    }

    #[test]
    fn identical_pods_after_a_failure_reuse_its_fit_error() {
        struct Counting<'a>(&'a std::cell::Cell<u32>);
        impl PodScheduler for Counting<'_> {
            fn find_node(
                &self,
                snap: &Snapshot,
                pod: &PodInfo,
                nodes: &[NodeId],
            ) -> Result<NodeId, FitError> {
                self.0.set(self.0.get() + 1);
                FirstFit.find_node(snap, pod, nodes)
            }
            fn filter_node(&self, snap: &Snapshot, pod: &PodInfo, node: NodeId) -> Status {
                FirstFit.filter_node(snap, pod, node)
            }
            fn feasible_nodes(
                &self,
                snap: &Snapshot,
                pod: &PodInfo,
                nodes: &[NodeId],
            ) -> Result<Vec<NodeId>, FitError> {
                FirstFit.feasible_nodes(snap, pod, nodes)
            }
            fn shortcuts(&self, pod: &PodInfo) -> crate::framework::Shortcuts {
                FirstFit.shortcuts(pod)
            }
        }
        let calls = std::cell::Cell::new(0);
        let mut snap = snapshot(&[1000]);
        let pods: Vec<_> = (0..6).map(|i| pod(&format!("p{i}"), 1000, Some("pg"), None)).collect();
        let c = cycle(group("pg", None, None), pods, vec![]);
        let nodes = snap.node_ids().to_vec();
        let a = run_group_in_nodes(&Counting(&calls), &mut snap, &c, &nodes, &gang_plugins(), None);
        assert!(a.is_feasible());
        assert_eq!(a.failed.len(), 5);
        assert_eq!(calls.get(), 2, "p0 placed, p1 failed, p2..p5 skipped by signature");
    }

    #[test]
    fn cannot_reach_min_count_names_the_numbers() {
        let c = cycle(
            group("pg", Some(4), None),
            vec![pod("p", 1, Some("pg"), None)],
            vec![(PodKey::new("default", "b"), None)],
        );
        assert_eq!(
            c.cannot_reach_min_count().unwrap(),
            "minCount (4) cannot be satisfied: 1 scheduled, 1 remaining"
        );
    }

    #[test]
    fn gang_scheduling_gate_off_treats_gang_as_basic() {
        let c = GroupCycle::new(
            group("pg", Some(3), None),
            false,
            vec![(0, pod("p", 1, Some("pg"), None))],
            vec![],
        );
        assert!(!c.gang);
        assert_eq!(c.min_count, 1);
    }

    #[test]
    fn dominant_reason_prefers_count_then_text() {
        let mut fit = FitError { num_nodes: 5, ..Default::default() };
        fit.add("b");
        fit.add("b");
        fit.add("a");
        fit.add("a");
        fit.add("c");
        assert_eq!(dominant_reason(&fit).as_deref(), Some("a"));
        assert_eq!(Status::error("x", "y").code, Code::Error);
    }

    proptest! {
        /// A gang is all or nothing: either at least minCount pods are placed and the verdict
        /// is feasible, or the verdict is not feasible.
        #[test]
        fn gang_is_all_or_nothing(
            cpus in proptest::collection::vec(0i64..4000, 1..6),
            reqs in proptest::collection::vec(1i64..3000, 1..8),
            min in 1i32..8,
        ) {
            let mut snap = snapshot(&cpus);
            let pods: Vec<_> = reqs.iter().enumerate().map(|(i, r)| pod(&format!("p{i}"), *r, Some("pg"), None)).collect();
            let c = cycle(group("pg", Some(min), None), pods, vec![]);
            let nodes = snap.node_ids().to_vec();
            let a = run_group_in_nodes(&FirstFit, &mut snap, &c, &nodes, &gang_plugins(), None);
            prop_assert_eq!(a.is_feasible(), a.placed.len() as i32 >= min);
            // No node is over its allocatable.
            for n in snap.nodes() {
                prop_assert!(n.requested.cpu <= n.info.allocatable.cpu);
            }
        }
    }
}
