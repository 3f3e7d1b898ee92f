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
//!   pods and are gone, not Ready for Kueue's `NodeFailureDelay` (30 s from the `Ready`
//!   condition's `lastTransitionTime`; the engine retries waiting groups then), unschedulable, or carry a `NoExecute` (with
//!   `TASReplaceNodeOnNodeTaints`, also `NoSchedule`) taint the group's pods do not
//!   tolerate. When the replacements do not fit and a node failed, the strategy evicts the
//!   whole group (`TASFailedNodeReplacementFailFast`).

use std::collections::BTreeMap;

use placer_api::annotations::TOPOLOGY_ASSIGNMENT;
use placer_api::gates::{FeatureGates, Gate};
use placer_api::k8s::api::core::v1::Toleration;

use crate::framework::helper::{node_taints, tolerations_tolerate};
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
    let mut on_node: BTreeMap<&str, u32> = BTreeMap::new();
    for (key, node) in &cycle.scheduled {
        if let Some(id) = node.or_else(|| snap.pod_node(key)) {
            *on_node.entry(snap.node(id).name()).or_insert(0) += 1;
        }
    }
    // A toleration with `tolerationSeconds` only delays the eviction: the node lost pods,
    // so it ran out.
    let tolerations = lasting_tolerations(cycle);
    let mut failed: Vec<String> = domains
        .iter()
        .filter_map(|d| d.values.last().map(|n| (n.as_str(), d.count)))
        .filter(|(name, count)| on_node.get(name).copied().unwrap_or(0) < *count)
        .filter(|(name, _)| node_failed(snap, name, &tolerations, gates))
        .map(|(name, _)| name.to_string())
        .collect();
    failed.sort();
    failed.dedup();
    failed
}

/// The tolerations that keep a group's pods on a tainted node for good (those with
/// `tolerationSeconds` only delay the eviction).
pub fn lasting_tolerations(cycle: &GroupCycle) -> Vec<Toleration> {
    cycle
        .pods
        .first()
        .map(|p| p.view.tolerations.iter().filter(|t| t.toleration_seconds.is_none()).cloned().collect())
        .unwrap_or_default()
}

/// Whether node `name` is failed for pods with `tolerations` (see the module docs): gone,
/// not ready for `NodeFailureDelay`, or ready with an untolerated `NoExecute` (with
/// `TASReplaceNodeOnNodeTaints`, also `NoSchedule` or unschedulable).
pub fn node_failed(snap: &Snapshot, name: &str, tolerations: &[Toleration], gates: &FeatureGates) -> bool {
    let taints = gates.enabled(Gate::TASReplaceNodeOnNodeTaints);
    match snap.node_id(name) {
        None => true,
        Some(id) => {
            let info = &snap.node(id).info;
            if let Some(since) = info.not_ready_since_unix_ms {
                // Kueue's node failure controller: not ready for `NodeFailureDelay`
                // (taints are only weighed on ready nodes). Without a wall clock the
                // engine cannot age the condition and counts the node failed.
                return snap
                    .now_unix_ms()
                    .is_none_or(|now| now >= since.saturating_add(NODE_FAILURE_DELAY_MS));
            }
            (taints && info.unschedulable)
                || node_taints(info).any(|t| {
                    (t.effect == "NoExecute" || (taints && t.effect == "NoSchedule"))
                        && !tolerations_tolerate(tolerations, t)
                })
        }
    }
}
