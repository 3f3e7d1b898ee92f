//! Victims and their order of importance.
//!
//! A **victim unit** is what preemption evicts as a whole. For workload-aware preemption
//! (SEMANTICS §12) a pod of a PodGroup with `disruptionMode: PodGroup` is merged with all
//! its bound group-mates into one unit carrying the PodGroup's priority; any other pod is a
//! unit of its own with its own priority (v1.36). Per-pod preemption uses only single-pod
//! units.
//!
//! Units are ordered by importance (most important first), as upstream's
//! `moreImportantVictim`: higher priority; at equal priority a unit of PodGroup members
//! (a whole `disruptionMode: PodGroup` group, or one member of another PodGroup) before a
//! standalone pod; two standalone pods: earlier start time first; two PodGroup units: more
//! pods first, then the earlier earliest start. Remaining ties go to the smaller key, so the order is
//! total and deterministic.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use placer_api::k8s::apimachinery::pkg::apis::meta::v1::Time;

use crate::model::{GroupKey, NodeId, PodInfo, PodKey};
use crate::podgroup::GroupIndex;
use crate::snapshot::Snapshot;

/// A pod's `status.startTime`; a pod that has not started counts as starting now, i.e.
/// after every pod that has (upstream's `GetPodStartTime`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartTime(pub Option<Time>);

impl StartTime {
    /// The start time of a pod.
    pub fn of(pod: &PodInfo) -> StartTime {
        StartTime(pod.view.start_time.clone())
    }
}

impl Ord for StartTime {
    fn cmp(&self, other: &Self) -> Ordering {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => a.cmp(b),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        }
    }
}

impl PartialOrd for StartTime {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Pods that are evicted together.
#[derive(Debug, Clone)]
pub struct VictimUnit {
    /// The PodGroup whose `disruptionMode: PodGroup` binds these pods together; `None` for
    /// a single pod.
    pub group: Option<GroupKey>,
    /// The unit's priority: the PodGroup's for a group unit, the pod's otherwise.
    pub priority: i32,
    /// The pods, by key.
    pub pods: Vec<Arc<PodInfo>>,
    /// The node each pod of `pods` runs on (same order).
    pub nodes: Vec<NodeId>,
    /// The earliest start time among the pods.
    pub earliest_start: StartTime,
}

impl VictimUnit {
    /// A single-pod unit.
    pub fn single(pod: Arc<PodInfo>, node: NodeId) -> VictimUnit {
        VictimUnit {
            group: None,
            priority: pod.priority,
            earliest_start: StartTime::of(&pod),
            pods: vec![pod],
            nodes: vec![node],
        }
    }

    /// The key ties are broken by: the group's key, or the single pod's key.
    pub fn key(&self) -> &PodKey {
        match &self.group {
            Some(g) => g,
            None => &self.pods[0].key,
        }
    }

    /// Whether this unit counts as a PodGroup for importance: its pods belong to one
    /// (`spec.schedulingGroup`), whether evicted whole or one by one (upstream's
    /// `victim.IsPodGroup`).
    pub fn is_pod_group(&self) -> bool {
        self.pods.first().is_some_and(|p| p.group.is_some())
    }

    /// The pods of the unit.
    pub fn pods(&self) -> &[Arc<PodInfo>] {
        &self.pods
    }
}

/// Importance order: `Less` when `a` is more important than `b` (sorting ascending puts the
/// most important unit first).
pub fn by_importance(a: &VictimUnit, b: &VictimUnit) -> Ordering {
    b.priority
        .cmp(&a.priority)
        .then_with(|| b.is_pod_group().cmp(&a.is_pod_group()))
        .then_with(|| match (a.is_pod_group(), b.is_pod_group()) {
            (true, true) => {
                b.pods.len().cmp(&a.pods.len()).then_with(|| a.earliest_start.cmp(&b.earliest_start))
            }
            _ => a.earliest_start.cmp(&b.earliest_start),
        })
        .then_with(|| a.key().cmp(b.key()))
}

/// Whether a pod in the snapshot can be a victim at all: it is bound (pods assumed for the
/// current cycle and nominated pods counted for filtering have no `spec.nodeName` in the
/// engine's view) and not already on its way out.
pub fn is_running(pod: &PodInfo) -> bool {
    pod.node_name.is_some() && !pod.terminal
}

/// The victim units of workload-aware preemption with a pod on one of `nodes`, most
/// important first. `skip_group` (the preemptor's own PodGroup) contributes no victims.
/// Group units include every bound member, also those outside `nodes`. (The plain path
/// [`workload_units_up_to`] is checked against.)
#[cfg(test)]
pub fn workload_units(
    snap: &Snapshot,
    groups: &GroupIndex,
    nodes: &[NodeId],
    skip_group: Option<&GroupKey>,
) -> Vec<VictimUnit> {
    workload_units_up_to(snap, groups, nodes, skip_group, i32::MAX)
}

/// [`workload_units`] with a priority at most `max_priority` only: the same units in the
/// same order as filtering its result by priority, without building (and sorting) the
/// units no preemptor of that priority may evict, which on a cluster where nothing is
/// evictable is every running pod at every failed attempt.
pub fn workload_units_up_to(
    snap: &Snapshot,
    groups: &GroupIndex,
    nodes: &[NodeId],
    skip_group: Option<&GroupKey>,
    max_priority: i32,
) -> Vec<VictimUnit> {
    let mut singles: Vec<VictimUnit> = Vec::new();
    let mut grouped: BTreeMap<GroupKey, VictimUnit> = BTreeMap::new();
    // A pod above the bound can only be a candidate through a group evicted whole whose
    // priority is within it: without such a group, it is passed over without looking its
    // group up (on a cluster where nothing is evictable, that is every running pod).
    let whole_group_within = groups.any(|(_, e)| {
        e.info.as_ref().is_some_and(|i| i.disrupt_together && i.priority.unwrap_or(0) <= max_priority)
    });
    for &id in nodes {
        // The same skip for a whole node, without reading its pods.
        if !whole_group_within && snap.node(id).lowest_priority() > max_priority {
            continue;
        }
        for pod in snap.node(id).pods.iter().filter(|p| is_running(p)) {
            if !whole_group_within && pod.priority > max_priority {
                continue;
            }
            let group_key = pod.group_key();
            if group_key.is_some() && group_key.as_ref() == skip_group {
                continue;
            }
            let together =
                group_key.as_ref().and_then(|k| groups.info(k)).filter(|info| info.disrupt_together);
            match (group_key, together) {
                (Some(key), Some(info)) => {
                    let priority = info.priority.unwrap_or(0);
                    if priority > max_priority {
                        continue;
                    }
                    if let std::collections::btree_map::Entry::Vacant(slot) = grouped.entry(key) {
                        let unit = group_unit(snap, groups, slot.key(), priority);
                        slot.insert(unit);
                    }
                }
                _ if pod.priority > max_priority => {}
                _ => singles.push(VictimUnit::single(pod.clone(), id)),
            }
        }
    }
    let mut units: Vec<VictimUnit> = singles.into_iter().chain(grouped.into_values()).collect();
    units.sort_by(by_importance);
    units
}

/// Every bound member of a PodGroup as one unit with the group's priority.
fn group_unit(snap: &Snapshot, groups: &GroupIndex, key: &GroupKey, priority: i32) -> VictimUnit {
    let mut pods: Vec<Arc<PodInfo>> = Vec::new();
    let mut nodes: Vec<NodeId> = Vec::new();
    for member in groups.get(key).map(|e| e.sorted_members()).into_iter().flatten() {
        let Some(id) = snap.pod_node(member) else { continue };
        if let Some(p) = snap.node(id).pods.iter().find(|p| &p.key == member && is_running(p)) {
            pods.push(p.clone());
            nodes.push(id);
        }
    }
    let earliest_start = pods.iter().map(|p| StartTime::of(p)).min().unwrap_or(StartTime(None));
    VictimUnit { group: Some(key.clone()), priority, pods, nodes, earliest_start }
}

/// Removes every pod of `unit` from the snapshot for the rest of the simulation.
pub fn remove_unit(snap: &mut Snapshot, unit: &VictimUnit) {
    for pod in &unit.pods {
        snap.remove_for_simulation(&pod.key);
    }
}

/// Puts every pod of a removed `unit` back on its node for the rest of the simulation.
pub fn restore_unit(snap: &mut Snapshot, unit: &VictimUnit) {
    for (pod, node) in unit.pods.iter().zip(&unit.nodes) {
        snap.assume(pod.clone(), *node);
    }
}
