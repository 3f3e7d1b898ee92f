//! Exact reuse of the single-pod search's per-node work across consecutive pods of the
//! same fit signature: kube-scheduler's opportunistic batching of identical pods (KEP-5598,
//! seed 004), made exact instead of a hint.
//!
//! Upstream keeps the sorted node list of pod N and hands pod N+1 the next node when N's
//! node no longer fits it (one pod per node). Here what is kept is each node's filter
//! verdict (passed) and raw scores for pod N's signature, stamped with the node's
//! [`crate::snapshot::NodeState::stamp`]; pod N+1 walks its own sampling window exactly as
//! [`find_node_sampled`] does and, on a node whose stamp is unchanged, takes the verdict and
//! the raw scores from the cache instead of running the filters and Score. Every other
//! node (the one pod N landed on, nodes that changed for any other reason, nodes not seen
//! yet) is computed as before. Normalization and the weighted sum still run over the
//! window's feasible nodes for every pod. So the decision, the nodes examined and the
//! failure message are those of [`find_node_sampled`].
//!
//! Valid (declared, checked per pod, otherwise the plain search runs and the cache is
//! dropped) when:
//! - the pod has a fit signature ([`crate::podgroup::same_fit_signature`]: no inter-pod
//!   affinity, topology spread, claims, volumes or `nodeName`) equal to the previous pod's,
//!   and the same filters and score plugins are active for both;
//! - every active filter and score plugin declares `reads_only_pod_and_node` (its PreFilter
//!   / PreScore and its verdict / raw score read only the pod and the node's own state:
//!   no other node, no pod elsewhere, no cluster-wide object, no clock), and no PreFilter
//!   restricted the candidate nodes;
//! - the search samples (`to_find` below the node count); a search over every node runs
//!   [`find_node`] unchanged.
//!
//! A pod whose signature differs from the previous pod's runs [`find_node_sampled`] itself
//! and caches nothing (in a mix of shapes the reuse then costs one signature comparison
//! per pod); the next pod of its signature computes and fills the cache, and the pods after
//! that reuse it. A cache kept per signature instead was measured slower on a mix of ~420
//! shapes (its entries live in DRAM; see docs/performance.md).
//!
//! A node whose stamp changed is recomputed, whatever changed it (a binding, a pod
//! deleted, a node update, nominated pods assumed for the cycle and rolled back).

use std::sync::Arc;

use super::{best_index, filter_prepared, find_node, pre_score, prefilter_fit_error, prepare};
use crate::framework::{FitError, Framework};
use crate::model::{NodeId, PodInfo};
use crate::snapshot::Snapshot;

/// The cache of the last single pod's per-node results (see the module documentation).
#[derive(Debug, Default)]
pub struct SingleReuse {
    /// The pod the entries were computed for.
    last: Option<Arc<PodInfo>>,
    /// Its filters and score plugins that PreFilter / PreScore skipped.
    skip_filters: u64,
    skip_scores: u64,
    /// Per node slot (`NodeId.0`): the stamp at which the pod passed every filter there
    /// (0: nothing cached; stamps start at 1).
    stamps: Vec<u64>,
    /// Raw scores of the active score plugins: `width` per node slot.
    raw: Vec<i64>,
    width: usize,
    /// Nodes whose verdict and raw scores came from the cache, and nodes computed.
    pub hits: u64,
    pub misses: u64,
}

impl SingleReuse {
    /// Forgets every entry.
    pub fn clear(&mut self) {
        self.last = None;
        self.stamps.clear();
        self.raw.clear();
        self.width = 0;
    }

    fn cached(&self, id: NodeId, stamp: u64) -> bool {
        self.stamps.get(id.0 as usize).is_some_and(|&s| s != 0 && s == stamp)
    }

    fn store(&mut self, id: NodeId, stamp: u64, raw: &[i64]) {
        let slot = id.0 as usize;
        if self.stamps.len() <= slot {
            self.stamps.resize(slot + 1, 0);
            self.raw.resize((slot + 1) * self.width, 0);
        }
        self.stamps[slot] = stamp;
        self.raw[slot * self.width..(slot + 1) * self.width].copy_from_slice(raw);
    }
}

/// [`find_node_sampled`] (which it runs when the previous pod's signature differs) with the
/// per-node results of the previous pod of the same signature reused where the node did not change since (see the module documentation):
/// the same result and the same number of nodes examined.
pub fn find_node_sampled_reusing(
    fw: &Framework,
    snap: &Snapshot,
    pod: &Arc<PodInfo>,
    nodes: &[NodeId],
    start: usize,
    to_find: usize,
    reuse: &mut SingleReuse,
) -> (Result<NodeId, FitError>, usize) {
    let n = nodes.len();
    if n == 0 || to_find >= n {
        reuse.clear();
        return (find_node(fw, snap, pod, nodes), n);
    }
    if !reuse.last.as_ref().is_some_and(|last| crate::podgroup::same_fit_signature(last, pod)) {
        // Another signature than the previous pod's (or none): the plain search, nothing
        // cached (a pod of a mix of shapes pays only this comparison). The next pod of
        // this signature fills the cache, the ones after it reuse.
        reuse.clear();
        if crate::podgroup::has_fit_signature(pod) {
            reuse.last = Some(pod.clone());
        }
        return super::find_node_sampled(fw, snap, pod, nodes, start, to_find);
    }
    let mut state = match prepare(fw, snap, pod) {
        Ok(s) => s,
        Err(r) => {
            reuse.clear();
            return (Err(prefilter_fit_error(&r, n)), n);
        }
    };
    let all = if fw.filters.len() >= 64 { u64::MAX } else { (1u64 << fw.filters.len()) - 1 };
    let active_filters = all & !state.skip_filters;
    // A PreFilter restriction of the candidate nodes (`metadata.name` terms) turns the
    // reuse off: rare, and whether it comes from the pod alone is the plugin's business.
    let filters_ok = state.restriction.is_none()
        && (0..fw.filters.len())
            .filter(|i| active_filters & (1 << i) != 0)
            .all(|i| fw.filters[i].reads_only_pod_and_node(pod));
    // The previous pod's signature is this pod's (checked above).
    let same = filters_ok && reuse.skip_filters == state.skip_filters;
    if !same {
        reuse.clear();
    }

    let (found, examined) = super::walk_sampled(nodes, start, to_find, |id| {
        if same && reuse.cached(id, snap.hot(id).stamp) {
            Ok(())
        } else {
            filter_prepared(fw, &state, snap, id)
        }
    });
    let mut feasible = match found {
        Ok(feasible) => feasible,
        Err(err) => return (Err(err), examined),
    };
    // Score in name order so ties still go to the smallest node name (as the plain search).
    feasible.sort();
    if let [only] = feasible.as_slice() {
        // No scores were needed; the cached ones (if any) stay valid by their stamps.
        if filters_ok && !same {
            reuse.last = Some(pod.clone());
            reuse.skip_filters = state.skip_filters;
        }
        return (Ok(*only), examined);
    }
    let active = pre_score(fw, &mut state, snap, &feasible);
    let scores_ok = filters_ok && active.iter().all(|&p| fw.scores[p].0.reads_only_pod_and_node());
    if !scores_ok {
        reuse.clear();
        let totals = super::score_active(fw, &state, snap, &feasible, &active);
        return (Ok(feasible[best_index(&totals)]), examined);
    }
    let reuse_raw = same && reuse.skip_scores == state.skip_scores && reuse.width == active.len();
    if !reuse_raw {
        // Verdicts were reused (same filters) but the scores were for other plugins: start
        // the entries again (each feasible node below is stored afresh).
        reuse.stamps.clear();
        reuse.raw.clear();
        reuse.width = active.len();
    }
    reuse.last = Some(pod.clone());
    reuse.skip_filters = state.skip_filters;
    reuse.skip_scores = state.skip_scores;

    // raw[i * width + k]: raw score of feasible[i] for active plugin k.
    let width = active.len();
    let mut raw = vec![0i64; feasible.len() * width];
    // Nodes not in the cache (indexes into `feasible`) are scored a column per plugin
    // (`ScorePlugin::score_all`, as the plain search does), then stored.
    let mut missed: Vec<usize> = Vec::new();
    for (i, &id) in feasible.iter().enumerate() {
        if reuse_raw && reuse.cached(id, snap.hot(id).stamp) {
            let slot = id.0 as usize;
            raw[i * width..(i + 1) * width].copy_from_slice(&reuse.raw[slot * width..(slot + 1) * width]);
            reuse.hits += 1;
        } else {
            missed.push(i);
        }
    }
    reuse.misses += missed.len() as u64;
    if width > 0 && !missed.is_empty() {
        let ids: Vec<NodeId> = missed.iter().map(|&i| feasible[i]).collect();
        let mut column = vec![0i64; ids.len()];
        for (k, &p) in active.iter().enumerate() {
            fw.scores[p].0.score_all(&state, snap, &ids, &mut column);
            for (&i, &c) in missed.iter().zip(&column) {
                raw[i * width + k] = c;
            }
        }
    }
    for &i in &missed {
        let id = feasible[i];
        reuse.store(id, snap.hot(id).stamp, &raw[i * width..(i + 1) * width]);
    }
    let mut totals = vec![0i64; feasible.len()];
    if width == 0 {
        return (Ok(feasible[best_index(&totals)]), examined);
    }
    let mut column = vec![0i64; feasible.len()];
    for (k, &p) in active.iter().enumerate() {
        let (plugin, weight) = &fw.scores[p];
        for (c, r) in column.iter_mut().zip(raw.chunks_exact(width)) {
            *c = r[k];
        }
        plugin.normalize(&state, &feasible, &mut column);
        for (t, s) in totals.iter_mut().zip(&column) {
            *t += s * weight;
        }
    }
    (Ok(feasible[best_index(&totals)]), examined)
}
