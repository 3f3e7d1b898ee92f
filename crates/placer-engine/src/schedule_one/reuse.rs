//! Exact reuse of the single-pod search's per-node work across pods of the same fit
//! signature: kube-scheduler's opportunistic batching of identical pods (KEP-5598, seed
//! 004), made exact instead of a hint, and kept per signature rather than for the last pod
//! only.
//!
//! Upstream keeps the sorted node list of pod N and hands pod N+1 the next node when N's
//! node no longer fits it (one pod per node), and only when N+1 directly follows N. Here
//! what is kept, per fit signature seen recently, is each node's filter verdict (passed)
//! and raw scores, stamped with the node's [`crate::snapshot::NodeState::stamp`]; a later
//! pod of that signature (the very next one, or one after pods of other shapes) walks its
//! own sampling window exactly as [`find_node_sampled`] does and, on a node whose stamp is
//! unchanged, takes the verdict and the raw scores from the cache instead of running the
//! filters and Score. Every other node (the nodes pods landed on since, nodes that changed
//! for any other reason, nodes not seen yet for that signature) is computed as before.
//! Normalization and the weighted sum still run over the window's feasible nodes for every
//! pod. So the decision, the nodes examined and the failure message are those of
//! [`find_node_sampled`].
//!
//! Valid (declared, checked per pod, otherwise the plain search runs without the cache)
//! when:
//! - the pod has a fit signature ([`crate::podgroup::same_fit_signature`]: no inter-pod
//!   affinity, topology spread, claims, volumes or `nodeName`) equal to the entry's, and
//!   the same filters (and, for the raw scores, score plugins) are active for both;
//! - every active filter and score plugin declares `reads_only_pod_and_node` (its PreFilter
//!   / PreScore and its verdict / raw score read only the pod and the node's own state:
//!   no other node, no pod elsewhere, no cluster-wide object, no clock), and no PreFilter
//!   restricted the candidate nodes;
//! - the search samples (`to_find` below the node count); a search over every node runs
//!   [`find_node`] unchanged.
//!
//! A node whose stamp changed is recomputed, whatever changed it (a binding, a pod
//! deleted, a node update, nominated pods assumed for the cycle and rolled back). Memory
//! is bounded: at most `MAX_SLOTS` node slots over all signatures, the least recently
//! used signature dropped first.

use std::sync::Arc;

use super::{best_index, filter_prepared, find_node, pre_score, prefilter_fit_error, prepare};
use crate::framework::{Code, FitError, Framework};
use crate::model::{NodeId, PodInfo};
use crate::snapshot::Snapshot;

/// Most per-node slots (entries x node slots) the cache keeps: 4 Mi slots, 32 bytes each
/// with three score plugins (128 MiB). Past this the least recently used signature is
/// dropped.
const MAX_SLOTS: usize = 1 << 22;

/// The per-node results of one fit signature (see the module documentation).
#[derive(Debug)]
struct Entry {
    /// [`crate::podgroup::fit_signature_key`] of `last`.
    key: u64,
    /// The last pod of this signature the entries were computed for.
    last: Arc<PodInfo>,
    /// Its filters and score plugins that PreFilter / PreScore skipped (`skip_scores`
    /// only once `scored`).
    skip_filters: u64,
    skip_scores: u64,
    scored: bool,
    /// Per node slot (`NodeId.0`): the stamp at which the pod passed every filter there
    /// (0: nothing cached; stamps start at 1).
    stamps: Vec<u64>,
    /// Raw scores of the active score plugins: `width` per node slot.
    raw: Vec<i64>,
    width: usize,
    /// When it was last used (for eviction).
    used: u64,
}

impl Entry {
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

/// The cache of single pods' per-node results, one entry per fit signature seen recently
/// (see the module documentation).
#[derive(Debug)]
pub struct SingleReuse {
    entries: Vec<Entry>,
    tick: u64,
    /// At most this many node slots over all entries (`MAX_SLOTS` by default).
    max_slots: usize,
    /// Nodes whose verdict and raw scores came from the cache, and nodes computed.
    pub hits: u64,
    pub misses: u64,
}

impl Default for SingleReuse {
    fn default() -> Self {
        Self::with_max_slots(MAX_SLOTS)
    }
}

impl SingleReuse {
    /// A cache holding at most `max_slots` node slots over all signatures (at least one
    /// signature is always kept).
    pub fn with_max_slots(max_slots: usize) -> Self {
        Self { entries: Vec::new(), tick: 0, max_slots, hits: 0, misses: 0 }
    }

    /// How many signatures have entries.
    pub fn signatures(&self) -> usize {
        self.entries.len()
    }

    /// The entry for `pod`'s signature, created (empty) if there is none, or emptied if
    /// its filters' skip bits differ from `skip_filters`. At most `max_slots / node_slots`
    /// entries are kept: the least recently used one makes room.
    fn entry_for(&mut self, key: u64, pod: &Arc<PodInfo>, skip_filters: u64, node_slots: usize) -> usize {
        self.tick += 1;
        let found = self
            .entries
            .iter()
            .position(|e| e.key == key && crate::podgroup::same_fit_signature(&e.last, pod));
        let i = match found {
            Some(i) => {
                if self.entries[i].skip_filters != skip_filters {
                    let e = &mut self.entries[i];
                    e.stamps.clear();
                    e.raw.clear();
                    e.scored = false;
                    e.skip_filters = skip_filters;
                }
                i
            }
            None => {
                let max = (self.max_slots / node_slots.max(1)).max(1);
                if self.entries.len() >= max {
                    if let Some(lru) = (0..self.entries.len()).min_by_key(|&i| self.entries[i].used) {
                        self.entries.swap_remove(lru);
                    }
                }
                self.entries.push(Entry {
                    key,
                    last: pod.clone(),
                    skip_filters,
                    skip_scores: 0,
                    scored: false,
                    stamps: Vec::new(),
                    raw: Vec::new(),
                    width: 0,
                    used: 0,
                });
                self.entries.len() - 1
            }
        };
        let e = &mut self.entries[i];
        e.used = self.tick;
        e.last = pod.clone();
        i
    }
}

/// [`find_node_sampled`] with the per-node results of the previous pod of the same
/// signature reused where the node did not change since (see the module documentation):
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
        return (find_node(fw, snap, pod, nodes), n);
    }
    let mut state = match prepare(fw, snap, pod) {
        Ok(s) => s,
        Err(r) => return (Err(prefilter_fit_error(&r, n)), n),
    };
    let all = if fw.filters.len() >= 64 { u64::MAX } else { (1u64 << fw.filters.len()) - 1 };
    let active_filters = all & !state.skip_filters;
    // A PreFilter restriction of the candidate nodes (`metadata.name` terms) turns the
    // reuse off: rare, and whether it comes from the pod alone is the plugin's business.
    let filters_ok = state.restriction.is_none()
        && (0..fw.filters.len())
            .filter(|i| active_filters & (1 << i) != 0)
            .all(|i| fw.filters[i].reads_only_pod_and_node(pod));
    // The entry of this pod's signature (its verdicts hold for these filters), if any.
    let slots = snap.node_slots();
    let mut entry = if filters_ok {
        crate::podgroup::fit_signature_key(pod)
            .map(|key| reuse.entry_for(key, pod, state.skip_filters, slots))
    } else {
        None
    };

    let start = start % n;
    let mut feasible: Vec<NodeId> = Vec::with_capacity(to_find);
    let mut err: Option<FitError> = None;
    let mut examined = 0;
    for &id in nodes[start..].iter().chain(&nodes[..start]) {
        examined += 1;
        if entry.is_some_and(|e| reuse.entries[e].cached(id, snap.node(id).stamp())) {
            feasible.push(id);
            if feasible.len() >= to_find {
                break;
            }
            continue;
        }
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
    // Score in name order so ties still go to the smallest node name (as the plain search).
    feasible.sort();
    if let [only] = feasible.as_slice() {
        // No scores were needed; the cached ones (if any) stay valid by their stamps.
        return (Ok(*only), examined);
    }
    let active = pre_score(fw, &mut state, snap, &feasible);
    let scores_ok = active.iter().all(|&p| fw.scores[p].0.reads_only_pod_and_node());
    if !scores_ok {
        if let Some(e) = entry.take() {
            reuse.entries.swap_remove(e);
        }
    }
    let Some(e) = entry else {
        let totals = super::score_active(fw, &state, snap, &feasible, &active);
        return (Ok(feasible[best_index(&totals)]), examined);
    };
    let width = active.len();
    let SingleReuse { entries, hits, misses, .. } = reuse;
    let entry = &mut entries[e];
    let reuse_raw = entry.scored && entry.skip_scores == state.skip_scores && entry.width == width;
    if !reuse_raw {
        // Verdicts were reused (same filters) but the scores were for other plugins: start
        // the entries again (each feasible node below is stored afresh).
        entry.stamps.clear();
        entry.raw.clear();
        entry.width = width;
        entry.skip_scores = state.skip_scores;
        entry.scored = true;
    }

    // raw[i * width + k]: raw score of feasible[i] for active plugin k.
    let mut raw = vec![0i64; feasible.len() * width];
    let mut fresh: smallvec::SmallVec<[i64; 8]> = smallvec::SmallVec::new();
    for (i, &id) in feasible.iter().enumerate() {
        let node = snap.node(id);
        let out = &mut raw[i * width..(i + 1) * width];
        if entry.cached(id, node.stamp()) {
            let slot = id.0 as usize;
            out.copy_from_slice(&entry.raw[slot * width..(slot + 1) * width]);
            *hits += 1;
            continue;
        }
        *misses += 1;
        fresh.clear();
        fresh.extend(active.iter().map(|&p| fw.scores[p].0.score(&state, snap, id, node)));
        out.copy_from_slice(&fresh);
        entry.store(id, node.stamp(), &fresh);
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
