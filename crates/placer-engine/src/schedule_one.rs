//! The pod-level algorithm over a node set, as kube-scheduler's `schedulePod`: PreFilter,
//! Filter, PreScore, Score, NormalizeScore, weighted sum, select.
//!
//! * Filters run in the framework's order and stop at the first rejection; that plugin's
//!   reasons are the node's reasons.
//! * [`find_node`] examines every node given (callers pass the nodes of a placement);
//!   [`find_node_sampled`] is kube-scheduler's `percentageOfNodesToScore` search for single
//!   pods: round-robin from a rotating start, stopping at enough feasible nodes.
//! * The best node has the highest weighted total; ties go to the first node in the order
//!   given (callers pass nodes sorted by name), so results are deterministic.
//! * State is computed from the snapshot on every call, so pods assumed earlier in the same
//!   PodGroup cycle count everywhere (resources, affinity, spreading).

use std::sync::Arc;

use crate::framework::PodScheduler;
use crate::framework::{Code, CycleState, FitError, Framework, PreResult, Rejection, Status};
use crate::model::{NodeId, PodInfo};
use crate::snapshot::{NodeState, Snapshot};

/// Runs every PreFilter for `pod` against `snap`. `Err` rejects the pod on every node (the
/// FitError then carries the PreFilter message).
pub fn prepare<'a>(
    fw: &Framework,
    snap: &'a Snapshot,
    pod: &'a PodInfo,
) -> Result<CycleState<'a>, Rejection> {
    prepare_masked(fw, snap, pod, 0)
}

/// [`prepare`] with the filters of `skip` (bits by index) left out, PreFilter included.
fn prepare_masked<'a>(
    fw: &Framework,
    snap: &'a Snapshot,
    pod: &'a PodInfo,
    skip: u64,
) -> Result<CycleState<'a>, Rejection> {
    let mut state = CycleState::new(pod);
    state.skip_filters = skip;
    for (i, p) in fw.filters.iter().enumerate() {
        if skip & (1 << i) != 0 {
            continue;
        }
        match p.pre_filter(&mut state, snap) {
            Ok(PreResult::Run) => {}
            Ok(PreResult::Skip) => state.skip_filters |= 1 << i,
            Err(mut r) => {
                if r.plugin.is_empty() {
                    r.plugin = p.name();
                }
                return Err(r);
            }
        }
    }
    if let Some(r) = &state.restriction {
        if r.names.is_empty() {
            let msg = match r.plugins.as_slice() {
                [one] => format!("node(s) didn't satisfy plugin {one}"),
                many => format!("node(s) didn't satisfy plugin(s) [{}] simultaneously", many.join(" ")),
            };
            return Err(Rejection::unschedulable(r.plugins.first().copied().unwrap_or(""), msg));
        }
    }
    Ok(state)
}

/// Runs the filters of a prepared pod on one node, in order, stopping at the first
/// rejection. Nodes left out by a PreFilter restriction are rejected as
/// `node(s) didn't satisfy plugin(s) [..]` (unresolvable).
pub fn filter_prepared(
    fw: &Framework,
    state: &CycleState<'_>,
    snap: &Snapshot,
    node: NodeId,
) -> Result<(), Rejection> {
    filter_prepared_on(fw, state, snap, snap.node(node))
}

/// [`filter_prepared`] on a given node state (which may differ from the snapshot's: copies
/// of a pod placed on it by [`place_copies`]).
fn filter_prepared_on(
    fw: &Framework,
    state: &CycleState<'_>,
    snap: &Snapshot,
    n: &NodeState,
) -> Result<(), Rejection> {
    if let Some(r) = &state.restriction {
        if !r.allows(n.name()) {
            return Err(Rejection::unresolvable(r.plugins.first().copied().unwrap_or(""), r.reason()));
        }
    }
    for (i, p) in fw.filters.iter().enumerate() {
        if state.skip_filters & (1 << i) == 0 {
            p.filter(state, snap, n)?;
        }
    }
    Ok(())
}

/// [`prepare`] for a caller that checks what `skip` filters check itself: filters whose
/// [`crate::framework::FilterPlugin::dependence`] for the pod is `skip` are left out (the
/// hierarchical strategy counts plain resources with its own algorithms).
pub fn prepare_without<'a>(
    fw: &Framework,
    snap: &'a Snapshot,
    pod: &'a PodInfo,
    skip: crate::framework::Dependence,
) -> Result<CycleState<'a>, Rejection> {
    prepare_masked(fw, snap, pod, fw.filter_mask(pod, skip))
}

/// Runs only the filters of one pod on one node (used by preemption to re-check a node).
pub fn filter_node(fw: &Framework, snap: &Snapshot, pod: &PodInfo, node: NodeId) -> Status {
    match prepare(fw, snap, pod).and_then(|state| filter_prepared(fw, &state, snap, node)) {
        Ok(()) => Status::success(),
        Err(r) => r.to_status(),
    }
}

/// Nodes that pass all filters, in the order given (for placement feasibility and
/// preemption). `Err` when none does, with the count of nodes per reason and the nodes
/// where preemption might help.
pub fn feasible_nodes(
    fw: &Framework,
    snap: &Snapshot,
    pod: &PodInfo,
    nodes: &[NodeId],
) -> Result<Vec<NodeId>, FitError> {
    let state = prepare(fw, snap, pod).map_err(|r| prefilter_fit_error(&r, nodes.len()))?;
    feasible_prepared(fw, &state, snap, nodes)
}

/// [`feasible_nodes`] for a prepared pod.
pub fn feasible_prepared(
    fw: &Framework,
    state: &CycleState<'_>,
    snap: &Snapshot,
    nodes: &[NodeId],
) -> Result<Vec<NodeId>, FitError> {
    let mut feasible = Vec::with_capacity(nodes.len());
    let mut err: Option<FitError> = None;
    for &id in nodes {
        match filter_prepared(fw, state, snap, id) {
            Ok(()) => feasible.push(id),
            Err(r) => {
                let err =
                    err.get_or_insert_with(|| FitError { num_nodes: nodes.len(), ..FitError::default() });
                for reason in &r.reasons {
                    err.add(reason);
                }
                if r.code == Code::Unschedulable {
                    err.preemptable_nodes.push(id);
                }
            }
        }
    }
    if feasible.is_empty() {
        Err(err.unwrap_or(FitError { num_nodes: nodes.len(), ..FitError::default() }))
    } else {
        Ok(feasible)
    }
}

/// kube-scheduler's `minFeasibleNodesToFind`: below this many nodes every node is examined.
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// kube-scheduler's `minFeasibleNodesPercentageToFind`: the adaptive percentage never goes
/// below this.
pub const MIN_FEASIBLE_NODES_PERCENTAGE: usize = 5;

/// How many feasible nodes a single pod's search stops at (kube-scheduler's
/// `numFeasibleNodesToFind`): every node below 100 nodes; otherwise `configured` percent, or
/// the adaptive default `50 - nodes/125` (at least 5%), and never fewer than 100 nodes.
pub fn num_feasible_nodes_to_find(configured: Option<u32>, num_nodes: usize) -> usize {
    if num_nodes < MIN_FEASIBLE_NODES_TO_FIND {
        return num_nodes;
    }
    let percentage = match configured {
        Some(p) if p >= 100 => return num_nodes,
        Some(p) if p > 0 => p as usize,
        _ => (50usize.saturating_sub(num_nodes / 125)).max(MIN_FEASIBLE_NODES_PERCENTAGE),
    };
    (num_nodes * percentage / 100).max(MIN_FEASIBLE_NODES_TO_FIND).min(num_nodes)
}

/// [`find_node`] with kube-scheduler's sampling: filters `nodes` round-robin from
/// `start`, stops once `to_find` nodes are feasible, scores only those. Returns the choice
/// and how many nodes were examined (the caller advances its start index by that, as
/// kube-scheduler's `nextStartNodeIndex`). When no node is feasible every node has been
/// examined, so the FitError (and its preemptable nodes) covers them all.
pub fn find_node_sampled(
    fw: &Framework,
    snap: &Snapshot,
    pod: &PodInfo,
    nodes: &[NodeId],
    start: usize,
    to_find: usize,
) -> (Result<NodeId, FitError>, usize) {
    let n = nodes.len();
    if n == 0 || to_find >= n {
        return (find_node(fw, snap, pod, nodes), n);
    }
    let mut state = match prepare(fw, snap, pod) {
        Ok(s) => s,
        Err(r) => return (Err(prefilter_fit_error(&r, n)), n),
    };
    let start = start % n;
    let mut feasible = Vec::with_capacity(to_find);
    let mut err: Option<FitError> = None;
    let mut examined = 0;
    for k in 0..n {
        let id = nodes[(start + k) % n];
        examined += 1;
        match filter_prepared(fw, &state, snap, id) {
            Ok(()) => {
                feasible.push(id);
                if feasible.len() >= to_find {
                    break;
                }
            }
            Err(r) => {
                let err = err.get_or_insert_with(|| FitError { num_nodes: n, ..FitError::default() });
                for reason in &r.reasons {
                    err.add(reason);
                }
                if r.code == Code::Unschedulable {
                    err.preemptable_nodes.push(id);
                }
            }
        }
    }
    if feasible.is_empty() {
        let mut err = err.unwrap_or(FitError { num_nodes: n, ..FitError::default() });
        err.preemptable_nodes.sort();
        return (Err(err), examined);
    }
    // Score in name order so ties still go to the smallest node name.
    feasible.sort();
    if let [only] = feasible.as_slice() {
        return (Ok(*only), examined);
    }
    let totals = score_prepared(fw, &mut state, snap, &feasible);
    (Ok(feasible[best_index(&totals)]), examined)
}

/// The FitError of a pod rejected by a PreFilter plugin: every node shares its message.
pub fn prefilter_fit_error(r: &Rejection, num_nodes: usize) -> FitError {
    FitError { num_nodes, pre_message: Some(r.reasons.join(", ")), ..FitError::default() }
}

/// Filters `nodes` (in the given order), scores the feasible ones, returns the best
/// (highest total score; ties -> first in `nodes` order, which callers give sorted by name).
pub fn find_node(
    fw: &Framework,
    snap: &Snapshot,
    pod: &PodInfo,
    nodes: &[NodeId],
) -> Result<NodeId, FitError> {
    let mut state = prepare(fw, snap, pod).map_err(|r| prefilter_fit_error(&r, nodes.len()))?;
    let feasible = feasible_prepared(fw, &state, snap, nodes)?;
    if let [only] = feasible.as_slice() {
        return Ok(*only);
    }
    let totals = score_prepared(fw, &mut state, snap, &feasible);
    Ok(feasible[best_index(&totals)])
}

/// The feasible nodes of `nodes` with their weighted total scores, in the order given.
#[cfg(test)]
pub fn score_nodes(
    fw: &Framework,
    snap: &Snapshot,
    pod: &PodInfo,
    nodes: &[NodeId],
) -> Result<Vec<(NodeId, i64)>, FitError> {
    let mut state = prepare(fw, snap, pod).map_err(|r| prefilter_fit_error(&r, nodes.len()))?;
    let feasible = feasible_prepared(fw, &state, snap, nodes)?;
    let totals = score_prepared(fw, &mut state, snap, &feasible);
    Ok(feasible.into_iter().zip(totals).collect())
}

/// Where consecutive copies of `pod` go when each copy is placed by [`find_node`] and
/// assumed before the next: the same nodes, computed without re-running every filter and
/// score for every copy. Valid for pods whose filters and scores on a node depend only on
/// the pod and that node (no inter-pod affinity, topology spread or host ports: the
/// caller checks that); this function additionally requires every active score plugin to
/// declare [`crate::framework::ScorePlugin::node_local`].
///
/// After a copy lands on a node only that node's filter result and raw scores change, so
/// they are recomputed for it alone; normalization still runs over all feasible nodes for
/// every copy, exactly as [`score_prepared`] does. Stops at `max` copies or at the first
/// copy that fits nowhere. `None` when the shortcut does not apply (a PreFilter rejection,
/// no feasible node, a score plugin that is not node-local): the caller simulates.
pub fn place_copies(
    fw: &Framework,
    snap: &Snapshot,
    pod: &Arc<PodInfo>,
    nodes: &[NodeId],
    max: usize,
) -> Option<Vec<NodeId>> {
    let mut state = prepare(fw, snap, pod).ok()?;
    let mut feasible = feasible_prepared(fw, &state, snap, nodes).ok()?;
    for (i, (p, _)) in fw.scores.iter().enumerate() {
        if p.pre_score(&mut state, snap, &feasible) == PreResult::Skip {
            state.skip_scores |= 1 << i;
        }
    }
    let active: smallvec::SmallVec<[usize; 8]> =
        (0..fw.scores.len()).filter(|i| state.skip_scores & (1 << i) == 0).collect();
    if active.iter().any(|&p| !fw.scores[p].0.node_local()) {
        return None;
    }
    let state: &CycleState<'_> = &state;
    // Nodes that received copies, with the copies added.
    let mut changed: rustc_hash::FxHashMap<NodeId, NodeState> = rustc_hash::FxHashMap::default();
    // raw[i][k]: raw score of feasible[i] for active plugin k.
    let raw_of = |id: NodeId, node: &NodeState| -> smallvec::SmallVec<[i64; 8]> {
        active.iter().map(|&p| fw.scores[p].0.score(state, snap, id, node)).collect()
    };
    let mut raw: Vec<smallvec::SmallVec<[i64; 8]>> =
        feasible.iter().map(|&id| raw_of(id, snap.node(id))).collect();
    let mut column: Vec<i64> = Vec::with_capacity(feasible.len());
    let mut totals: Vec<i64> = Vec::with_capacity(feasible.len());
    let mut out = Vec::with_capacity(max);
    while out.len() < max && !feasible.is_empty() {
        let best = if feasible.len() == 1 {
            0
        } else {
            totals.clear();
            totals.resize(feasible.len(), 0);
            for (k, &p) in active.iter().enumerate() {
                let (plugin, weight) = &fw.scores[p];
                column.clear();
                column.extend(raw.iter().map(|r| r[k]));
                plugin.normalize(state, &feasible, &mut column);
                for (t, s) in totals.iter_mut().zip(&column) {
                    *t += s * weight;
                }
            }
            best_index(&totals)
        };
        let id = feasible[best];
        out.push(id);
        let node = changed.entry(id).or_insert_with(|| snap.node(id).clone());
        node.add_pod(pod.clone());
        if filter_prepared_on(fw, state, snap, node).is_ok() {
            raw[best] = raw_of(id, node);
        } else {
            feasible.remove(best);
            raw.remove(best);
        }
    }
    Some(out)
}

/// Index of the highest total (the first one on ties).
fn best_index(totals: &[i64]) -> usize {
    let mut best = 0;
    for (i, t) in totals.iter().enumerate() {
        if *t > totals[best] {
            best = i;
        }
    }
    best
}

/// Weighted, normalized total score of each node of `feasible` (same order): PreScore,
/// Score, NormalizeScore per plugin, then `sum(score * weight)`. Raw scores are computed
/// node by node (every plugin on a node while it is in cache), then normalized plugin by
/// plugin.
pub fn score_prepared<'a>(
    fw: &Framework,
    state: &mut CycleState<'a>,
    snap: &'a Snapshot,
    feasible: &[NodeId],
) -> Vec<i64> {
    let n = feasible.len();
    let mut totals = vec![0i64; n];
    for (i, (p, _)) in fw.scores.iter().enumerate() {
        if p.pre_score(state, snap, feasible) == PreResult::Skip {
            state.skip_scores |= 1 << i;
        }
    }
    let active: smallvec::SmallVec<[usize; 8]> =
        (0..fw.scores.len()).filter(|i| state.skip_scores & (1 << i) == 0).collect();
    if active.is_empty() || n == 0 {
        return totals;
    }
    let state: &CycleState<'a> = state;
    let mut raw = vec![0i64; active.len() * n];
    for (i, &id) in feasible.iter().enumerate() {
        let node = snap.node(id);
        for (k, &p) in active.iter().enumerate() {
            raw[k * n + i] = fw.scores[p].0.score(state, snap, id, node);
        }
    }
    for (k, &p) in active.iter().enumerate() {
        let (plugin, weight) = &fw.scores[p];
        let column = &mut raw[k * n..(k + 1) * n];
        plugin.normalize(state, feasible, column);
        for (t, s) in totals.iter_mut().zip(column.iter()) {
            *t += s * weight;
        }
    }
    totals
}

impl PodScheduler for Framework {
    /// Below 100 nodes every node is examined; on larger node sets (a group without a
    /// topology constraint searches the whole cluster) kube-scheduler's
    /// `percentageOfNodesToScore` applies, each pod starting its search at a node derived
    /// from its name so the members of a group spread their searches deterministically.
    fn find_node(&self, snap: &Snapshot, pod: &PodInfo, nodes: &[NodeId]) -> Result<NodeId, FitError> {
        let to_find =
            crate::schedule_one::num_feasible_nodes_to_find(self.percentage_of_nodes_to_score, nodes.len());
        if to_find >= nodes.len() {
            return crate::schedule_one::find_node(self, snap, pod, nodes);
        }
        let start = {
            use std::hash::{Hash, Hasher};
            let mut h = rustc_hash::FxHasher::default();
            pod.key.hash(&mut h);
            (h.finish() % nodes.len() as u64) as usize
        };
        crate::schedule_one::find_node_sampled(self, snap, pod, nodes, start, to_find).0
    }

    fn filter_node(&self, snap: &Snapshot, pod: &PodInfo, node: NodeId) -> Status {
        crate::schedule_one::filter_node(self, snap, pod, node)
    }

    fn shortcuts(&self, pod: &PodInfo) -> crate::framework::Shortcuts {
        Framework::shortcuts(self, pod)
    }

    fn feasible_nodes(
        &self,
        snap: &Snapshot,
        pod: &PodInfo,
        nodes: &[NodeId],
    ) -> Result<Vec<NodeId>, FitError> {
        crate::schedule_one::feasible_nodes(self, snap, pod, nodes)
    }

    /// Only when `find_node` would examine every node (no `percentageOfNodesToScore`
    /// sampling, whose start node differs per pod).
    fn place_copies(
        &self,
        snap: &Snapshot,
        pod: &Arc<PodInfo>,
        nodes: &[NodeId],
        max: usize,
    ) -> Option<Vec<NodeId>> {
        let to_find =
            crate::schedule_one::num_feasible_nodes_to_find(self.percentage_of_nodes_to_score, nodes.len());
        if to_find < nodes.len() {
            return None;
        }
        crate::schedule_one::place_copies(self, snap, pod, nodes, max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::node_resources::fit_count;
    use crate::plugins::testing::{node, pod, snapshot_with};
    use crate::SchedulerConfig;
    use proptest::prelude::*;
    use std::sync::Arc;

    fn fw() -> Framework {
        crate::plugins::pod_framework(&SchedulerConfig::default())
    }

    #[test]
    fn fit_error_counts_the_first_failing_filter_per_node_like_kube() {
        let mut nodes = Vec::new();
        for i in 0..4 {
            nodes.push(node(&format!("t{i}")).cpu("8").taint("key", "value", "NoSchedule").build());
        }
        for i in 0..8 {
            nodes.push(node(&format!("s{i}")).cpu("1").build());
        }
        let snap = snapshot_with(nodes, vec![]);
        let err = find_node(&fw(), &snap, &pod("p").cpu("2").build(), snap.node_ids()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "0/12 nodes are available: 4 node(s) had untolerated taint {key: value}, 8 Insufficient cpu."
        );
        assert_eq!(err.preemptable_nodes.len(), 8, "only resource rejections are preemptable");
        let names: Vec<&str> = err.preemptable_nodes.iter().map(|&id| snap.node(id).name()).collect();
        assert!(names.iter().all(|n| n.starts_with('s')));
    }

    #[test]
    fn fit_error_parts_sort_as_strings() {
        let mut e = FitError { num_nodes: 12, ..FitError::default() };
        e.add_n("node(s) had untolerated taint {a: b}", 2);
        e.add_n("Insufficient cpu", 10);
        assert_eq!(
            e.to_string(),
            "0/12 nodes are available: 10 Insufficient cpu, 2 node(s) had untolerated taint {a: b}."
        );
        e.post_message = Some(
            "preemption: 0/12 nodes are available: 12 No preemption victims found for incoming pod".into(),
        );
        assert_eq!(
            e.to_string(),
            "0/12 nodes are available: 10 Insufficient cpu, 2 node(s) had untolerated taint {a: b}. \
             preemption: 0/12 nodes are available: 12 No preemption victims found for incoming pod."
        );
    }

    #[test]
    fn a_node_can_contribute_several_reasons() {
        let snap = snapshot_with(vec![node("a").cpu("1").mem("1Gi").build()], vec![]);
        let err =
            find_node(&fw(), &snap, &pod("p").cpu("2").mem("2Gi").build(), snap.node_ids()).unwrap_err();
        assert_eq!(err.to_string(), "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.");
    }

    #[test]
    fn ties_go_to_the_first_node_in_the_given_order() {
        let snap = snapshot_with(vec![node("a").cpu("4").build(), node("b").cpu("4").build()], vec![]);
        let p = pod("p").cpu("1").build();
        let ids = snap.node_ids().to_vec();
        assert_eq!(find_node(&fw(), &snap, &p, &ids), Ok(ids[0]));
        let reversed: Vec<NodeId> = ids.iter().rev().copied().collect();
        assert_eq!(find_node(&fw(), &snap, &p, &reversed), Ok(ids[1]));
    }

    #[test]
    fn least_allocated_default_spreads_pods() {
        let snap = snapshot_with(
            vec![node("a").cpu("4").mem("4Gi").build(), node("b").cpu("4").mem("4Gi").build()],
            vec![pod("old").cpu("2").mem("2Gi").on("a").build()],
        );
        assert_eq!(
            find_node(&fw(), &snap, &pod("p").cpu("1").mem("1Gi").build(), snap.node_ids()),
            snap.node_id("b").ok_or_else(FitError::default)
        );
    }

    #[test]
    fn most_allocated_packs_pods() {
        let config = SchedulerConfig {
            node_resources_fit_strategy: crate::config::ScoringStrategy::most_allocated(),
            ..SchedulerConfig::default()
        };
        let fw = crate::plugins::pod_framework(&config);
        let snap = snapshot_with(
            vec![node("a").cpu("4").mem("4Gi").build(), node("b").cpu("4").mem("4Gi").build()],
            vec![pod("old").cpu("2").mem("2Gi").on("b").build()],
        );
        assert_eq!(
            find_node(&fw, &snap, &pod("p").cpu("1").mem("1Gi").build(), snap.node_ids()),
            Ok(snap.node_id("b").unwrap())
        );
    }

    #[test]
    fn assumed_pods_use_capacity() {
        let mut snap = snapshot_with(vec![node("a").cpu("2").build()], vec![]);
        let a = snap.node_ids()[0];
        snap.assume(Arc::new(pod("g0").cpu("2").build()), a);
        let err = find_node(&fw(), &snap, &pod("g1").cpu("1").build(), &[a]).unwrap_err();
        assert_eq!(err.to_string(), "0/1 nodes are available: 1 Insufficient cpu.");
        assert_eq!(err.preemptable_nodes, vec![a]);
    }

    #[test]
    fn too_many_pods() {
        let snap = snapshot_with(vec![node("a").pods(1).build()], vec![pod("old").on("a").build()]);
        let st = filter_node(&fw(), &snap, &pod("p").build(), snap.node_ids()[0]);
        assert_eq!((st.code, st.reasons), (Code::Unschedulable, vec!["Too many pods".to_string()]));
    }

    #[test]
    fn feasible_nodes_to_find_follows_kube_scheduler() {
        assert_eq!(num_feasible_nodes_to_find(None, 50), 50);
        assert_eq!(num_feasible_nodes_to_find(None, 1000), 420);
        assert_eq!(num_feasible_nodes_to_find(None, 5000), 500);
        assert_eq!(num_feasible_nodes_to_find(None, 50_000), 2500);
        assert_eq!(num_feasible_nodes_to_find(Some(100), 5000), 5000);
        assert_eq!(num_feasible_nodes_to_find(Some(1), 5000), 100);
    }

    #[test]
    fn sampled_search_stops_early_and_reports_what_it_examined() {
        let nodes: Vec<_> = (0..10).map(|i| node(&format!("n{i}")).cpu("4").mem("8Gi").build()).collect();
        let snap = snapshot_with(nodes, vec![]);
        let p = pod("p").cpu("1").mem("1Gi").build();
        let ids = snap.node_ids().to_vec();
        let (chosen, examined) = find_node_sampled(&fw(), &snap, &p, &ids, 7, 2);
        assert_eq!(examined, 2);
        assert!(chosen.is_ok());
        let (all, examined) = find_node_sampled(&fw(), &snap, &pod("big").cpu("9").build(), &ids, 3, 2);
        assert_eq!(examined, 10, "an unschedulable pod is checked against every node");
        assert_eq!(all.unwrap_err().num_nodes, 10);
    }

    #[test]
    fn no_nodes_given() {
        let snap = snapshot_with(vec![], vec![]);
        let err = find_node(&fw(), &snap, &pod("p").build(), &[]).unwrap_err();
        assert_eq!(err.num_nodes, 0);
    }

    #[test]
    fn score_nodes_reports_totals_in_order() {
        let snap = snapshot_with(
            vec![node("a").cpu("4").mem("4Gi").build(), node("b").cpu("4").mem("4Gi").build()],
            vec![pod("old").cpu("2").mem("2Gi").on("a").build()],
        );
        let scored =
            score_nodes(&fw(), &snap, &pod("p").cpu("1").mem("1Gi").build(), snap.node_ids()).unwrap();
        assert_eq!(scored.len(), 2);
        assert!(scored[1].1 > scored[0].1);
    }

    /// Nodes (cpu cores, memory GiB, pod slots), bound pods (node index, cpu and memory in
    /// half units), and the incoming pod's (cpu, memory) in half units.
    type Cluster = (Vec<(u32, u32, u32)>, Vec<(usize, u32, u32)>, (u32, u32));

    fn arb_cluster() -> impl Strategy<Value = Cluster> {
        let nodes = prop::collection::vec((1u32..16, 1u32..16, 1u32..6), 1..8);
        nodes.prop_flat_map(|nodes| {
            let n = nodes.len();
            let pods = prop::collection::vec((0..n, 0u32..8, 0u32..8), 0..12);
            (Just(nodes), pods, (0u32..10, 0u32..10))
        })
    }

    fn build(nodes: &[(u32, u32, u32)], pods: &[(usize, u32, u32)]) -> Snapshot {
        let ns = nodes
            .iter()
            .enumerate()
            .map(|(i, &(cpu, mem, slots))| {
                node(&format!("n{i}")).cpu(&cpu.to_string()).mem(&format!("{mem}Gi")).pods(slots).build()
            })
            .collect();
        let ps = pods
            .iter()
            .enumerate()
            .map(|(i, &(n, cpu, mem))| {
                pod(&format!("e{i}"))
                    .cpu(&format!("{}m", cpu * 500))
                    .mem(&format!("{}Mi", mem * 512))
                    .on(&format!("n{n}"))
                    .build()
            })
            .collect();
        snapshot_with(ns, ps)
    }

    /// Nodes in zones with optional taints, pods with app labels, and an incoming pod with a
    /// spread constraint, anti-affinity and a toleration chosen at random.
    #[derive(Debug, Clone)]
    struct Constrained {
        nodes: Vec<(u32, u8, bool)>,
        pods: Vec<(usize, u8)>,
        incoming: (u8, u8, bool),
    }

    fn arb_constrained() -> impl Strategy<Value = Constrained> {
        prop::collection::vec((1u32..6, 0u8..3, any::<bool>()), 1..8).prop_flat_map(|nodes| {
            let n = nodes.len();
            (Just(nodes), prop::collection::vec((0..n, 0u8..3), 0..12), (0u8..3, 0u8..4, any::<bool>()))
                .prop_map(|(nodes, pods, incoming)| Constrained { nodes, pods, incoming })
        })
    }

    fn build_constrained(c: &Constrained) -> (Snapshot, PodInfo) {
        use crate::plugins::testing::{affinity_term, match_labels, spread};
        let ns = c
            .nodes
            .iter()
            .enumerate()
            .map(|(i, &(cpu, zone, tainted))| {
                let b = node(&format!("n{i}"))
                    .cpu(&cpu.to_string())
                    .label("kubernetes.io/hostname", &format!("n{i}"))
                    .label("zone", &format!("z{zone}"));
                if tainted {
                    b.taint("dedicated", "x", "NoSchedule").build()
                } else {
                    b.build()
                }
            })
            .collect();
        let ps = c
            .pods
            .iter()
            .enumerate()
            .map(|(i, &(n, app))| {
                pod(&format!("e{i}")).cpu("1").label("app", &format!("a{app}")).on(&format!("n{n}")).build()
            })
            .collect();
        let (app, kind, tolerate) = c.incoming;
        let app_label = format!("a{app}");
        let mut p = pod("p").cpu("1").label("app", &app_label);
        let sel = || match_labels(&[("app", app_label.as_str())]);
        p = match kind {
            0 => p.spread(spread(1, "zone", "DoNotSchedule", sel())),
            1 => p.pod_anti_affinity(affinity_term("kubernetes.io/hostname", sel())),
            2 => p.pod_affinity(affinity_term("zone", sel())),
            _ => p.spread(spread(1, "zone", "ScheduleAnyway", sel())),
        };
        if tolerate {
            p = p.toleration("dedicated", "Exists", "", "NoSchedule");
        }
        (snapshot_with(ns, ps), p.build())
    }

    proptest! {
        #[test]
        fn the_chosen_node_passes_every_filter(c in arb_constrained()) {
            let (snap, p) = build_constrained(&c);
            let fw = fw();
            let feasible = feasible_nodes(&fw, &snap, &p, snap.node_ids());
            match find_node(&fw, &snap, &p, snap.node_ids()) {
                Ok(id) => {
                    prop_assert!(filter_node(&fw, &snap, &p, id).is_success());
                    prop_assert!(feasible.unwrap_or_default().contains(&id));
                    prop_assert!(fit_count(&snap, &p, id) >= 1);
                }
                Err(e) => {
                    prop_assert!(feasible.is_err());
                    prop_assert_eq!(e.reasons.values().sum::<usize>() >= snap.num_nodes(), true);
                    for &id in snap.node_ids() {
                        prop_assert!(!filter_node(&fw, &snap, &p, id).is_success());
                    }
                }
            }
        }

        #[test]
        fn constrained_decisions_are_deterministic(c in arb_constrained()) {
            let (a, pa) = build_constrained(&c);
            let (b, pb) = build_constrained(&c);
            let ra = find_node(&fw(), &a, &pa, a.node_ids()).map(|id| a.node(id).name().to_string()).map_err(|e| e.to_string());
            let rb = find_node(&fw(), &b, &pb, b.node_ids()).map(|id| b.node(id).name().to_string()).map_err(|e| e.to_string());
            prop_assert_eq!(ra, rb);
        }

        #[test]
        fn the_chosen_node_never_exceeds_its_resources((nodes, pods, (cpu, mem)) in arb_cluster()) {
            let snap = build(&nodes, &pods);
            let p = pod("p").cpu(&format!("{}m", cpu * 500)).mem(&format!("{}Mi", mem * 512)).build();
            if let Ok(id) = find_node(&fw(), &snap, &p, snap.node_ids()) {
                let n = snap.node(id);
                let alloc = &n.info.allocatable;
                prop_assert!(n.requested.cpu + p.requests.cpu <= alloc.cpu || p.requests.cpu == 0);
                prop_assert!(n.requested.memory + p.requests.memory <= alloc.memory || p.requests.memory == 0);
                prop_assert!(n.requested.pods < alloc.pods);
                prop_assert!(fit_count(&snap, &p, id) >= 1);
            } else {
                for &id in snap.node_ids() {
                    prop_assert_eq!(fit_count(&snap, &p, id), 0);
                }
            }
        }

        #[test]
        fn identical_inputs_give_identical_results((nodes, pods, (cpu, mem)) in arb_cluster()) {
            let p = pod("p").cpu(&format!("{}m", cpu * 500)).mem(&format!("{}Mi", mem * 512)).build();
            let a = build(&nodes, &pods);
            let b = build(&nodes, &pods);
            let ra = find_node(&fw(), &a, &p, a.node_ids()).map(|id| a.node(id).name().to_string()).map_err(|e| e.to_string());
            let rb = find_node(&fw(), &b, &p, b.node_ids()).map(|id| b.node(id).name().to_string()).map_err(|e| e.to_string());
            prop_assert_eq!(ra, rb);
        }

        /// The shortcut for identical copies lands every copy where a full search per copy
        /// (each assumed before the next) would, including with normalized scores
        /// (PreferNoSchedule taints, preferred node affinity) and under several strategies.
        #[test]
        fn place_copies_matches_one_search_per_copy(
            (nodes, pods, (cpu, mem)) in arb_cluster(),
            tainted in prop::collection::vec(any::<bool>(), 8),
            zones in prop::collection::vec(0u8..3, 8),
            prefer_zone in prop::option::of(0u8..3),
            tolerate in any::<bool>(),
            most_allocated in any::<bool>(),
            copies in 1usize..24,
        ) {
            use crate::plugins::testing::node_req;
            let ns = nodes
                .iter()
                .enumerate()
                .map(|(i, &(c, m, slots))| {
                    let b = node(&format!("n{i}"))
                        .cpu(&c.to_string())
                        .mem(&format!("{m}Gi"))
                        .pods(slots)
                        .label("zone", &format!("z{}", zones[i]));
                    if tainted[i] { b.taint("spot", "x", "PreferNoSchedule").build() } else { b.build() }
                })
                .collect();
            let ps = pods
                .iter()
                .enumerate()
                .map(|(i, &(n, c, m))| {
                    pod(&format!("e{i}")).cpu(&format!("{}m", c * 500)).mem(&format!("{}Mi", m * 512)).on(&format!("n{n}")).build()
                })
                .collect();
            let mut snap = snapshot_with(ns, ps);
            let mut b = pod("p").cpu(&format!("{}m", cpu * 500)).mem(&format!("{}Mi", mem * 512));
            if let Some(z) = prefer_zone {
                b = b.preferred_node_term(3, vec![node_req("zone", "In", &[&format!("z{z}")])]);
            }
            if tolerate {
                b = b.toleration("spot", "Exists", "", "PreferNoSchedule");
            }
            let p = Arc::new(b.build());
            let mut config = SchedulerConfig::default();
            if most_allocated {
                config.node_resources_fit_strategy = crate::config::ScoringStrategy::most_allocated();
            }
            let fw = crate::plugins::pod_framework(&config);
            let nodes_all = snap.node_ids().to_vec();
            let Some(plan) = place_copies(&fw, &snap, &p, &nodes_all, copies) else {
                // Only when not even one copy fits.
                prop_assert!(find_node(&fw, &snap, &p, &nodes_all).is_err());
                return Ok(());
            };
            let mark = snap.checkpoint();
            let mut searched = Vec::new();
            for _ in 0..copies {
                match find_node(&fw, &snap, &p, &nodes_all) {
                    Ok(id) => {
                        snap.assume(p.clone(), id);
                        searched.push(id);
                    }
                    Err(_) => break,
                }
            }
            snap.rollback(mark);
            prop_assert_eq!(plan, searched);
        }

        #[test]
        fn feasible_nodes_agree_with_fit_count((nodes, pods, (cpu, mem)) in arb_cluster()) {
            let snap = build(&nodes, &pods);
            let p = pod("p").cpu(&format!("{}m", cpu * 500)).mem(&format!("{}Mi", mem * 512)).build();
            let feasible = feasible_nodes(&fw(), &snap, &p, snap.node_ids()).unwrap_or_default();
            for &id in snap.node_ids() {
                prop_assert_eq!(feasible.contains(&id), fit_count(&snap, &p, id) >= 1);
            }
        }
    }
}
