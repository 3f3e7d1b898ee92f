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

/// Entries kept per pass at most (distinct failing signatures; more are not cached).
const MAX_ENTRIES: usize = 32;

/// The failures of the current pass (see the module documentation).
#[derive(Debug, Default)]
pub(super) struct SingleFailures {
    /// The snapshot state and eviction epoch the entries hold for.
    at: Option<(u64, u64)>,
    /// A pod that failed, and why.
    entries: Vec<(Arc<PodInfo>, FitError)>,
    /// Bumped when an eviction is decided.
    pub(super) epoch: u64,
    /// Whether reuse is on (tests compare with it off).
    pub(super) off: bool,
    /// Attempts answered from an entry.
    pub(super) hits: u64,
}

impl SingleFailures {
    /// Drops every entry (a new pass: events may have changed anything).
    pub(super) fn clear(&mut self) {
        self.at = None;
        self.entries.clear();
    }
}

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
        Some((self.snapshot.state_id()?, self.single_failures.epoch))
    }

    /// The failure of an earlier pod of this pass that `pod`'s attempt would repeat.
    pub(super) fn reused_failure(&mut self, pod: &PodInfo) -> Option<FitError> {
        let state = self.failure_state(pod)?;
        let cache = &self.single_failures;
        if cache.at != Some(state) {
            return None;
        }
        let labels = self.snapshot.num_pods_with_required_anti_affinity() > 0;
        let fit = cache.entries.iter().find(|(p, _)| same_inputs(p, pod, labels)).map(|(_, f)| f.clone())?;
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
        let cache = &mut self.single_failures;
        if cache.at != Some(state) {
            cache.at = Some(state);
            cache.entries.clear();
        }
        if cache.entries.len() < MAX_ENTRIES {
            cache.entries.push((pod.clone(), fit.clone()));
        }
    }
}
