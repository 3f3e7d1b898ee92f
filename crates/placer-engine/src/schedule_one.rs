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
use crate::framework::{Code, CopyCounting, CycleState, FitError, Framework, PreResult, Rejection, Status};
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
    state.quick = quick_pass(fw, &state);
    state.hot = state.quick.and_then(|_| snap.hot_request(&pod.requests));
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

/// The conjunction of the active filters' [`crate::framework::QuickPass`] tests, when each
/// has one and no PreFilter narrowed the nodes (a restriction is checked before any
/// filter, and no test knows it).
fn quick_pass(fw: &Framework, state: &CycleState<'_>) -> Option<crate::framework::QuickPass> {
    if state.restriction.is_some() {
        return None;
    }
    let mut quick = crate::framework::QuickPass::default();
    for (i, p) in fw.filters.iter().enumerate() {
        if state.skip_filters & (1 << i) == 0 {
            quick = quick.and(p.quick_pass(state)?);
        }
    }
    Some(quick)
}

/// Runs the filters of a prepared pod on one node, in order, stopping at the first
/// rejection. Nodes left out by a PreFilter restriction are rejected as
/// `node(s) didn't satisfy plugin(s) [..]` (unresolvable).
#[inline]
pub fn filter_prepared(
    fw: &Framework,
    state: &CycleState<'_>,
    snap: &Snapshot,
    node: NodeId,
) -> Result<(), Rejection> {
    // The quick test on the node's dense record where the pod's requests allow (the same
    // test on the same values, without reading the node's state); the filters where it
    // fails.
    if let (Some(quick), Some(requests)) = (state.quick, state.hot.as_ref()) {
        if quick.holds_hot(requests, snap.hot(node)) {
            return Ok(());
        }
        return run_filters(fw, state, snap, snap.node(node));
    }
    filter_prepared_on(fw, state, snap, snap.node(node))
}

/// [`filter_prepared`] on a given node state (which may differ from the snapshot's: copies
/// of a pod placed on it by [`place_copies`]).
#[inline]
fn filter_prepared_on(
    fw: &Framework,
    state: &CycleState<'_>,
    snap: &Snapshot,
    n: &NodeState,
) -> Result<(), Rejection> {
    // Most nodes are settled by one inlined test of their flags and free resources; the
    // filters run where it fails (and decide the verdict and its reasons there).
    if state.quick.is_some_and(|q| q.holds(state.pod, n)) {
        return Ok(());
    }
    run_filters(fw, state, snap, n)
}

/// The restriction, then the active filters in order, stopping at the first rejection.
#[inline(never)]
fn run_filters(
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
    // The filters PreFilter did not skip, in order: set bits walked lowest first, so a pod
    // with three active filters of thirteen pays for three (this runs for every node).
    let all = if fw.filters.len() >= 64 { u64::MAX } else { (1u64 << fw.filters.len()) - 1 };
    let mut active = all & !state.skip_filters;
    while active != 0 {
        let i = active.trailing_zeros() as usize;
        active &= active - 1;
        fw.filters[i].filter(state, snap, n)?;
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
    let (found, examined) = walk_sampled(nodes, start, to_find, |id| filter_prepared(fw, &state, snap, id));
    let mut feasible = match found {
        Ok(feasible) => feasible,
        Err(err) => return (Err(err), examined),
    };
    // Score in name order so ties still go to the smallest node name.
    sort_walked(&mut feasible);
    if let [only] = feasible.as_slice() {
        return (Ok(*only), examined);
    }
    let totals = score_prepared(fw, &mut state, snap, &feasible);
    (Ok(feasible[best_index(&totals)]), examined)
}

/// Sorts the nodes a round-robin walk found. Over nodes in order, the walk gives one
/// ascending run from its start, then (when it wrapped around) one ascending run from the
/// first node, all below the start: one rotation sorts that, in place, where a sort would
/// find the runs, allocate and merge. Anything else is sorted as usual.
fn sort_walked(ids: &mut [NodeId]) {
    let Some(wrap) = ids.windows(2).position(|w| w[1] < w[0]).map(|i| i + 1) else { return };
    let (first, second) = ids.split_at(wrap);
    let two_runs = second.windows(2).all(|w| w[0] < w[1])
        && matches!((first.first(), second.last()), (Some(lo), Some(hi)) if hi < lo);
    if two_runs {
        ids.rotate_left(wrap);
    } else {
        ids.sort();
    }
}

/// The sampled walk of [`find_node_sampled`]: `filter` runs on `nodes` round-robin from
/// `start` (`nodes[(start + k) % n]` for k in 0..n, without a division per node) until
/// `to_find` nodes pass. Returns the nodes that passed, or, when none did (every node was
/// then examined), the FitError of all the rejections with the preemptable nodes sorted;
/// and how many nodes were examined.
pub(crate) fn walk_sampled(
    nodes: &[NodeId],
    start: usize,
    to_find: usize,
    mut filter: impl FnMut(NodeId) -> Result<(), Rejection>,
) -> (Result<Vec<NodeId>, FitError>, usize) {
    let n = nodes.len();
    let start = if n == 0 { 0 } else { start % n };
    let mut feasible = Vec::with_capacity(to_find);
    let mut err: Option<FitError> = None;
    let mut examined = 0;
    for &id in nodes[start..].iter().chain(&nodes[..start]) {
        examined += 1;
        match filter(id) {
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
    (Ok(feasible), examined)
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
/// no feasible node, a score plugin that is not node-local, copy counting off for the pod,
/// devices that cannot be counted): the caller simulates.
///
/// With [`CopyCounting::WithDevices`] the filters see the snapshot's devices, which the
/// copies added here do not take: a node then also stops taking copies once it holds as
/// many as its free devices serve (`DraState::node_copies`, exact for such pods). As the
/// filters' verdict only gets stricter as devices are taken, "the filters pass on the
/// snapshot's devices and the count is below the node's" is the verdict on the devices
/// the copies left.
pub fn place_copies(
    fw: &Framework,
    snap: &Snapshot,
    pod: &Arc<PodInfo>,
    nodes: &[NodeId],
    max: usize,
) -> Option<Vec<NodeId>> {
    let devices = match fw.shortcuts(pod).copy_counting {
        CopyCounting::Off => return None,
        CopyCounting::Resources => None,
        CopyCounting::WithDevices => Some(snap.dra().copy_claims(std::slice::from_ref(pod))?),
    };
    let mut state = prepare(fw, snap, pod).ok()?;
    let mut feasible = feasible_prepared(fw, &state, snap, nodes).ok()?;
    // Per feasible node (same order): how many copies its devices serve.
    let limit = u32::try_from(max).unwrap_or(u32::MAX);
    let mut device_caps: Vec<u32> = match &devices {
        None => Vec::new(),
        Some(claims) => {
            let dra = snap.dra();
            let in_use = dra.in_use_set();
            feasible
                .iter()
                .map(|&id| dra.node_copies(claims, &snap.node(id).info, in_use, limit))
                .collect::<Option<_>>()?
        }
    };
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
        let devices_left = match device_caps.get_mut(best) {
            Some(cap) => {
                *cap = cap.saturating_sub(1);
                *cap > 0
            }
            None => true,
        };
        if devices_left && filter_prepared_on(fw, state, snap, node).is_ok() {
            raw[best] = raw_of(id, node);
        } else {
            feasible.remove(best);
            raw.remove(best);
            if !device_caps.is_empty() {
                device_caps.remove(best);
            }
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
/// plugin by plugin over all nodes ([`crate::framework::ScorePlugin::score_all`]: one
/// call per plugin, not one per node and plugin), then normalized plugin by plugin.
pub fn score_prepared<'a>(
    fw: &Framework,
    state: &mut CycleState<'a>,
    snap: &'a Snapshot,
    feasible: &[NodeId],
) -> Vec<i64> {
    let active = pre_score(fw, state, snap, feasible);
    score_active(fw, state, snap, feasible, &active)
}

/// PreScore of every score plugin; the indexes of those that did not skip, in order.
fn pre_score<'a>(
    fw: &Framework,
    state: &mut CycleState<'a>,
    snap: &'a Snapshot,
    feasible: &[NodeId],
) -> smallvec::SmallVec<[usize; 8]> {
    for (i, (p, _)) in fw.scores.iter().enumerate() {
        if p.pre_score(state, snap, feasible) == PreResult::Skip {
            state.skip_scores |= 1 << i;
        }
    }
    (0..fw.scores.len()).filter(|i| state.skip_scores & (1 << i) == 0).collect()
}

/// [`score_prepared`] after PreScore: Score, NormalizeScore and the weighted sum of the
/// `active` plugins.
fn score_active(
    fw: &Framework,
    state: &CycleState<'_>,
    snap: &Snapshot,
    feasible: &[NodeId],
    active: &[usize],
) -> Vec<i64> {
    let n = feasible.len();
    let mut totals = vec![0i64; n];
    if active.is_empty() || n == 0 {
        return totals;
    }
    let mut column = vec![0i64; n];
    for &p in active {
        let (plugin, weight) = &fw.scores[p];
        plugin.score_all(state, snap, feasible, &mut column);
        plugin.normalize(state, feasible, &mut column);
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
        let start = (pod.key.content_hash() % nodes.len() as u64) as usize;
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

mod reuse;
pub use reuse::{find_node_sampled_reusing, SingleReuse};

#[cfg(test)]
mod tests;
