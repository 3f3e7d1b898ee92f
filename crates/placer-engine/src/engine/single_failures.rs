//! Failed single-pod attempts reused within one [`Engine::schedule`] pass: a standalone pod
//! that fit no node, and for which preemption found nothing, fails the same way for the
//! next pod of the same fit signature as long as nothing it reads changed (kube-scheduler's
//! opportunistic batching of identical pods, seed 004, applied to failures, and exact).
//!
//! An attempt's result is a function of the pod's filter inputs (its fit signature:
//! requests, priority, node selector and affinity, tolerations, host ports, anti-affinity;
//! its labels only while some placed pod has required anti-affinity), its namespace,
//! PodGroup, scheduler name and `preemptionPolicy`, and of the engine's state: the snapshot,
//! the nominated pods counted for it, the victims being evicted, PDBs, PodGroups and pods.
//! Entries are kept only while all of that is unchanged:
//! - the snapshot's [`crate::snapshot::Snapshot::state_id`] is the one the entry was
//!   computed at (every binding, pod or node change moves it; no simulation is open);
//! - no pod is nominated anywhere (so no nominated pod is counted as placed, and the pod
//!   has no nominated node to try first) and no eviction was decided since (an epoch
//!   bumped by [`Engine::actuate_preemption`]);
//! - PDBs, PodGroups and the pods the engine knows change only when events are applied,
//!   which happens between passes: the entries are dropped at the start of every pass.
//!
//! A failed attempt examines every node, so the sampled search's start index only wraps
//! around (kept as the plain path keeps it). A reused failure is reported as the plain
//! attempt reports it (the same FitError, the same preemption attempt count); the pod goes
//! back to the queue the same way. `single_failure_tests` compare passes with and without
//! the reuse on random pods and clusters.

use super::*;
use crate::framework::FitError;

/// Entries kept per pass at most (distinct failing shapes; more are not cached).
const MAX_ENTRIES: usize = 32;

/// Failures of the current pass, each kept for the state it was computed in (the snapshot's
/// `state_id` and the eviction epoch): the store of both reuses, single pods (entries are a
/// pod and its FitError) and whole PodGroups (`group_failures.rs`).
#[derive(Debug)]
pub(super) struct PassFailures<E> {
    /// The state the entries hold for.
    at: Option<(u64, u64)>,
    entries: Vec<E>,
    /// Whether reuse is on (tests compare with it off).
    pub(super) off: bool,
    /// Attempts answered from an entry.
    pub(super) hits: u64,
}

impl<E> Default for PassFailures<E> {
    fn default() -> Self {
        PassFailures { at: None, entries: Vec::new(), off: false, hits: 0 }
    }
}

impl<E> PassFailures<E> {
    /// Drops every entry (a new pass: events may have changed anything).
    pub(super) fn clear(&mut self) {
        self.at = None;
        self.entries.clear();
    }

    /// The entries that hold in `state` (none when they were computed in another).
    pub(super) fn entries_at(&self, state: (u64, u64)) -> &[E] {
        if self.at == Some(state) {
            &self.entries
        } else {
            &[]
        }
    }

    /// Keeps `entry`, computed in `state` (entries of another state are dropped first).
    pub(super) fn record(&mut self, state: (u64, u64), entry: E) {
        if self.at != Some(state) {
            self.at = Some(state);
            self.entries.clear();
        }
        if self.entries.len() < MAX_ENTRIES {
            self.entries.push(entry);
        }
    }
}

/// The single-pod failures of the current pass: a pod that failed, and why.
pub(super) type SingleFailures = PassFailures<(Arc<PodInfo>, FitError)>;

/// Whether two pods' single attempts read the same pod inputs.
fn same_inputs(a: &PodInfo, b: &PodInfo, labels: bool) -> bool {
    a.key.namespace == b.key.namespace
        && a.group == b.group
        && a.scheduler_name == b.scheduler_name
        && a.preemption_never == b.preemption_never
        && crate::podgroup::same_fit_signature_but_labels(a, b, labels)
}

impl Engine {
    /// The state a failure of `pod` can be reused in, if it can: no nomination anywhere, no
    /// simulation open, and the pod itself without a nominated node.
    pub(super) fn failure_state(&self, pod: &PodInfo) -> Option<(u64, u64)> {
        if self.single_failures.off
            || !self.preempt.nominations.is_empty()
            || pod.nominated_node_name.is_some()
            || !crate::podgroup::has_fit_signature(pod)
        {
            return None;
        }
        Some((self.snapshot.state_id()?, self.preempt.eviction_epoch))
    }

    /// The failure of an earlier pod of this pass that `pod`'s attempt would repeat.
    pub(super) fn reused_failure(&mut self, pod: &PodInfo) -> Option<FitError> {
        let state = self.failure_state(pod)?;
        let labels = self.snapshot.num_pods_with_required_anti_affinity() > 0;
        let fit = self
            .single_failures
            .entries_at(state)
            .iter()
            .find(|(p, _)| same_inputs(p, pod, labels))
            .map(|(_, f)| f.clone())?;
        self.single_failures.hits += 1;
        // The plain attempt examined every node: its start index only wrapped around.
        let n = self.snapshot.node_ids().len();
        if n > 0 {
            self.next_start_node_index = (self.next_start_node_index + n) % n;
        }
        Some(fit)
    }

    /// Records that `pod` failed with `fit` (computed in the state [`Engine::failure_state`]
    /// names before the attempt, `state`).
    pub(super) fn record_failure(&mut self, state: Option<(u64, u64)>, pod: &Arc<PodInfo>, fit: &FitError) {
        let Some(state) = state else { return };
        // The attempt must have left the state as it found it.
        if self.failure_state(pod) != Some(state) {
            return;
        }
        self.single_failures.record(state, (pod.clone(), fit.clone()));
    }
}
