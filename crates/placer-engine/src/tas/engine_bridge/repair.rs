//! Failed-node replacement (seed 002 "Node failures", Kueue's `TASFailedNodeReplacement`):
//! a placed PodGroup that lost pods gets replacements placed next to its survivors.
//!
//! Kueue's `findReplacementAssignment`, on PodGroups: the pods to place are the lost ones
//! (the cycle's pods), the group's survivors (its scheduled members) stay where they are.
//! * **Where**: with slices, when the lost pods are not a whole number of slices, the
//!   replacements are confined to the *incomplete slice's domain*: the slice-level domain
//!   of the survivors that the lost pods complete to a whole number of slices (for
//!   multi-layer constraints, the innermost layer the loss breaks); otherwise a required
//!   request keeps them in the survivors' domain at the required level; preferred and
//!   unconstrained requests are not confined.
//! * **How**: in an incomplete slice's domain the slice size is relaxed to the innermost
//!   layer whose size divides the lost pods (none: single pods).
//! * **What is published**: the TopologyAssignment of survivors and replacements together.
//! * **Failed nodes**: nodes of the published assignment (hostname lowest level) that lost
//!   pods and are failed for the group as Kueue's node controller judges it ([`node_failed`]:
//!   gone; not ready, once none of the group's pods runs there with
//!   `TASReplaceNodeOnPodTermination`, else after `NodeFailureDelay`, 30 s from the `Ready`
//!   condition's `lastTransitionTime`, the engine retrying waiting groups then; with
//!   `TASReplaceNodeOnNodeTaints`, tainted `NoExecute` / `NoSchedule` or unschedulable
//!   against the group's tolerations). When the replacements do not fit and a node failed,
//!   the strategy evicts the whole group (`TASFailedNodeReplacementFailFast`); while the
//!   group waits instead, `engine/outcome.rs` publishes them in the PodGroup's
//!   `placer.dev/unhealthy-nodes` annotation.

use std::collections::BTreeMap;

use placer_api::annotations::TOPOLOGY_ASSIGNMENT;
use placer_api::gates::{FeatureGates, Gate};
use placer_api::k8s::api::core::v1::Toleration;

use crate::framework::helper::{node_taints, tolerations_tolerate, TaintRef};
use crate::podgroup::GroupCycle;
use crate::snapshot::Snapshot;

use super::super::assignment::{DomainCount, TopologyAssignment};
use super::super::request::SliceLayer;
use super::super::tree::HOSTNAME_LEVEL;
use super::super::{TasAssignment, TopologyRequest, NODE_FAILURE_DELAY_MS};
use super::Topology;

/// A repair of a placed group: where and how its lost pods go.
pub(super) struct Repair {
    /// Survivors: pods per value path (one value per level).
    survivors: BTreeMap<Vec<String>, u32>,
    /// The topology nodes the replacements may use (`None`: decided elsewhere).
    pub(super) domain: Option<Vec<bool>>,
    /// The request the replacements are placed with.
    pub(super) request: TopologyRequest,
}

impl Repair {
    /// The repair of `cycle` (its scheduled members are the survivors), or `None` when it
    /// has none or the gate is off.
    pub(super) fn plan(
        topology: &Topology,
        snap: &Snapshot,
        cycle: &GroupCycle,
        request: &TopologyRequest,
        gates: &FeatureGates,
    ) -> Option<Repair> {
        if !gates.enabled(Gate::TASFailedNodeReplacement)
            || cycle.scheduled.is_empty()
            || cycle.pods.is_empty()
        {
            return None;
        }
        let mut survivors: BTreeMap<Vec<String>, u32> = BTreeMap::new();
        for (key, node) in &cycle.scheduled {
            let Some(id) = node.or_else(|| snap.pod_node(key)) else { continue };
            let info = &snap.node(id).info;
            let values: Option<Vec<String>> =
                topology.levels.iter().map(|l| info.label(l).map(str::to_string)).collect();
            if let Some(values) = values {
                *survivors.entry(values).or_insert(0) += 1;
            }
        }
        let missing = u32::try_from(cycle.pods.len()).unwrap_or(u32::MAX);
        let mut repair = Repair { survivors, domain: None, request: request.clone() };
        let size = request.slice_size().max(1);
        if request.slices.is_empty() || missing.is_multiple_of(size) {
            return Some(repair);
        }
        // The layer the loss breaks: the innermost one whose size does not divide it.
        let broken = if request.slices.len() > 1 {
            request.slices.iter().rev().find(|l| !missing.is_multiple_of(l.size.max(1))).copied()
        } else {
            request.slices.first().copied()
        };
        let Some(broken) = broken else { return Some(repair) };
        let Some(prefix) = repair.incomplete_slice_domain(broken, missing) else { return Some(repair) };
        repair.domain = Some(topology.base.iter().map(|n| n.values[..=broken.level] == *prefix).collect());
        let kept: Option<SliceLayer> =
            request.slices.iter().rev().find(|l| missing.is_multiple_of(l.size.max(1))).copied();
        repair.request.slices = kept.into_iter().collect();
        repair.request.multi_layer = false;
        Some(repair)
    }

    /// The slice-level domain (value prefix) of the survivors that `missing` pods complete
    /// to whole slices of `layer` (the first in value order).
    fn incomplete_slice_domain(&self, layer: SliceLayer, missing: u32) -> Option<Vec<String>> {
        let mut usage: BTreeMap<&[String], u32> = BTreeMap::new();
        for (values, count) in &self.survivors {
            *usage.entry(&values[..=layer.level.min(values.len().saturating_sub(1))]).or_insert(0) += count;
        }
        usage
            .into_iter()
            .find(|(_, count)| (count + missing).is_multiple_of(layer.size.max(1)))
            .map(|(p, _)| p.to_vec())
    }

    /// The assignment of survivors and replacements together.
    pub(super) fn merged(&self, a: &TasAssignment) -> TopologyAssignment {
        let mut all = self.survivors.clone();
        for leaf in &a.worker {
            *all.entry(leaf.values.clone()).or_insert(0) += leaf.count;
        }
        let domains: Vec<DomainCount> =
            all.into_iter().map(|(values, count)| DomainCount { values, count }).collect();
        TopologyAssignment::encode(&a.levels, &domains)
            .unwrap_or_else(|_| TopologyAssignment { levels: a.levels.clone(), slices: Vec::new() })
    }
}

/// The failed nodes of a placed group (see the module docs), sorted by name.
pub fn failed_nodes(snap: &Snapshot, cycle: &GroupCycle, gates: &FeatureGates) -> Vec<String> {
    let Some(text) = cycle.group.annotation(TOPOLOGY_ASSIGNMENT) else { return Vec::new() };
    let Ok(assignment) = serde_json::from_str::<TopologyAssignment>(text) else { return Vec::new() };
    if assignment.levels.last().map(String::as_str) != Some(HOSTNAME_LEVEL) {
        return Vec::new();
    }
    let Ok(domains) = assignment.decode() else { return Vec::new() };
    let on_node = running_on_nodes(snap, cycle);
    let tolerations = cycle_tolerations(cycle);
    let mut failed: Vec<String> = domains
        .iter()
        .filter_map(|d| d.values.last().map(|n| (n.as_str(), d.count)))
        .filter(|(name, count)| on_node.get(*name).copied().unwrap_or(0) < *count)
        .filter(|(name, _)| {
            node_failed(snap, name, tolerations, on_node.get(*name).copied().unwrap_or(0), gates)
        })
        .map(|(name, _)| name.to_string())
        .collect();
    failed.sort();
    failed.dedup();
    failed
}

/// The group's pods still running (neither terminating nor terminal) per node: its
/// scheduled members.
pub fn running_on_nodes(snap: &Snapshot, cycle: &GroupCycle) -> BTreeMap<String, u32> {
    let mut on_node: BTreeMap<String, u32> = BTreeMap::new();
    for (key, node) in &cycle.scheduled {
        if let Some(id) = node.or_else(|| snap.pod_node(key)) {
            *on_node.entry(snap.node(id).name().to_string()).or_insert(0) += 1;
        }
    }
    on_node
}

/// The tolerations of a group's pods (its first pod to place stands for all: members of
/// a PodGroup share their template).
pub fn cycle_tolerations(cycle: &GroupCycle) -> &[Toleration] {
    cycle.pods.first().map(|p| &*p.view.tolerations).unwrap_or(&[])
}

/// Whether node `name` is failed for a group whose pods have `tolerations` and still run
/// `running` pods there (Kueue's node controller, `getWorkloadStatus`):
/// * gone: failed;
/// * not ready: with `TASReplaceNodeOnPodTermination`, failed once none of the group's
///   pods runs there (or, with `TASReplaceNodeDueToNotReadyOverFixedTime`, after
///   `NodeFailureDelay`); without it, after `NodeFailureDelay` (from the `Ready`
///   condition's `lastTransitionTime`; without a wall clock the engine cannot age the
///   condition and counts the node failed);
/// * ready, with `TASReplaceNodeOnNodeTaints`: a `NoExecute` or `NoSchedule` taint
///   (`spec.unschedulable` counts as one) the pods do not tolerate makes it failed (with
///   `TASReplaceNodeOnPodTermination`: once none of the group's pods runs there); one
///   they tolerate only for `tolerationSeconds` once none runs there.
pub fn node_failed(
    snap: &Snapshot,
    name: &str,
    tolerations: &[Toleration],
    running: u32,
    gates: &FeatureGates,
) -> bool {
    let Some(id) = snap.node_id(name) else { return true };
    let on_termination = gates.enabled(Gate::TASReplaceNodeOnPodTermination);
    let info = &snap.node(id).info;
    if let Some(since) = info.not_ready_since_unix_ms {
        let expired = snap.now_unix_ms().is_none_or(|now| now >= since.saturating_add(NODE_FAILURE_DELAY_MS));
        if !on_termination {
            return expired;
        }
        return running == 0 || (gates.enabled(Gate::TASReplaceNodeDueToNotReadyOverFixedTime) && expired);
    }
    if !gates.enabled(Gate::TASReplaceNodeOnNodeTaints) {
        return false;
    }
    let lasting: Vec<Toleration> =
        tolerations.iter().filter(|t| t.toleration_seconds.is_none()).cloned().collect();
    let unschedulable = TaintRef { key: "node.kubernetes.io/unschedulable", value: "", effect: "NoSchedule" };
    let mut untolerated = false;
    let mut temporarily = false;
    let taints = node_taints(info).chain(info.unschedulable.then_some(unschedulable));
    for t in taints.filter(|t| t.effect == "NoExecute" || t.effect == "NoSchedule") {
        if !tolerations_tolerate(tolerations, t) {
            untolerated = true;
        } else if !tolerations_tolerate(&lasting, t) {
            temporarily = true;
        }
    }
    if untolerated {
        return !on_termination || running == 0;
    }
    temporarily && running == 0
}
