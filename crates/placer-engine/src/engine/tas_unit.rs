//! PodGroup cycles in `topologyLevels` mode (seed 002, hierarchical TAS).
//!
//! Every PodGroup goes through the hierarchical strategy ([`crate::strategy`]). PodGroups
//! sharing a `kueue.x-k8s.io/podset-group-name` (in one namespace) form a *unit*, the
//! leader and the workers of a Kueue PodSet group: their members wait (PreEnqueue) until
//! every PodGroup of the unit exists and has reached its `minCount` quorum, then the queued
//! pods of all of them are gathered into one cycle and bound together or not at all.
//! Without the annotation a unit is the PodGroup alone.

use std::collections::{BTreeMap, BTreeSet};

use placer_api::annotations::PODSET_GROUP_NAME;

use super::*;

/// `(namespace, PodSet group name)`.
type PodSetKey = (String, String);

/// The engine's seed 002 state: the PodSet groups.
#[derive(Debug, Default)]
pub(super) struct TasState {
    /// PodGroups (that exist) by PodSet group.
    podsets: BTreeMap<PodSetKey, BTreeSet<GroupKey>>,
    /// The PodSet group of each indexed PodGroup.
    member_of: BTreeMap<GroupKey, PodSetKey>,
}

impl TasState {
    /// Records (or updates) the PodSet group of a PodGroup that was added or changed.
    pub(super) fn index(&mut self, info: &PodGroupInfo) {
        self.unindex(&info.key);
        if let Some(name) = info.annotation(PODSET_GROUP_NAME).filter(|n| !n.is_empty()) {
            let ps = (info.key.namespace.to_string(), name.to_string());
            self.podsets.entry(ps.clone()).or_default().insert(info.key.clone());
            self.member_of.insert(info.key.clone(), ps);
        }
    }

    /// Forgets a deleted PodGroup.
    pub(super) fn unindex(&mut self, key: &GroupKey) {
        if let Some(ps) = self.member_of.remove(key) {
            if let Some(set) = self.podsets.get_mut(&ps) {
                set.remove(key);
                if set.is_empty() {
                    self.podsets.remove(&ps);
                }
            }
        }
    }

    /// The PodGroups decided together with `key`, in key order (`[key]` outside a PodSet
    /// group), and the PodSet group's name.
    pub(super) fn unit_of(&self, key: &GroupKey) -> (Vec<GroupKey>, Option<&str>) {
        match self.member_of.get(key) {
            Some(ps) => (
                self.podsets
                    .get(ps)
                    .map(|s| s.iter().cloned().collect())
                    .unwrap_or_else(|| vec![key.clone()]),
                Some(ps.1.as_str()),
            ),
            None => (vec![key.clone()], None),
        }
    }
}

impl Engine {
    fn tas_mode(&self) -> bool {
        self.strategy.is_hierarchical()
    }

    /// The other PodGroups of `group`'s PodSet group (`topologyLevels` mode only).
    pub(super) fn tas_siblings(&self, group: &GroupKey) -> Vec<GroupKey> {
        if !self.tas_mode() {
            return Vec::new();
        }
        let (unit, _) = self.tas.unit_of(group);
        unit.into_iter().filter(|g| g != group).collect()
    }

    /// PreEnqueue for a member of `group` in `topologyLevels` mode: it waits until every
    /// PodGroup of its PodSet group exists and has reached its `minCount` quorum (a basic
    /// PodGroup: one pod).
    pub(super) fn tas_unit_wait_reason(&self, group: &GroupKey) -> Option<String> {
        if !self.tas_mode() {
            return None;
        }
        let (unit, name) = self.tas.unit_of(group);
        let name = name?;
        if unit.len() < 2 {
            return Some(format!(
                "waiting for the other PodGroup of PodSet group {name:?} (leader and workers) to appear"
            ));
        }
        for g in unit.iter().filter(|g| *g != group) {
            let Some(info) = self.groups.info(g) else {
                return Some(format!("waiting for PodGroup {g} of PodSet group {name:?} to appear"));
            };
            // A gang waits for its quorum, a basic group for its first pod.
            let needed = match info.policy {
                GroupPolicy::Gang { min_count } if self.gate(Gate::GangScheduling) => min_count.max(1),
                _ => 1,
            };
            let members = self.groups.member_count(g);
            if members < needed as usize {
                return Some(format!(
                    "waiting for PodGroup {g} of PodSet group {name:?} to reach {needed} pod(s): {members} so far"
                ));
            }
        }
        None
    }

    /// The PodGroups decided together with `group` (in key order): its PodSet group under
    /// the hierarchical strategy, else the group alone.
    pub(super) fn unit_of(&self, group: &GroupKey) -> Vec<GroupKey> {
        if !self.tas_mode() {
            return vec![group.clone()];
        }
        self.tas.unit_of(group).0
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use placer_api::annotations::{
        PODSET_SLICE_REQUIRED_TOPOLOGY, PODSET_UNCONSTRAINED_TOPOLOGY, TOPOLOGY_ASSIGNMENT,
    };
    use serde_json::{json, Value};

    use super::*;
    use crate::observer::NoopObserver;
    use crate::queue::QueueState;
    use crate::tas::assignment::TopologyAssignment;
    use crate::tas::HOSTNAME_LEVEL;

    fn engine(levels: &[&str]) -> Engine {
        Engine::new(SchedulerConfig {
            topology_levels: levels.iter().map(|l| l.to_string()).collect(),
            pod_initial_backoff_ms: 0,
            pod_max_backoff_ms: 0,
            ..SchedulerConfig::default()
        })
    }

    fn node(name: &str, rack: &str, cpu: &str) -> ClusterEvent {
        let n: Node = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"rack": rack, HOSTNAME_LEVEL: name}},
            "status": {"allocatable": {"cpu": cpu, "pods": "32"}}
        }))
        .unwrap();
        ClusterEvent::NodeUpserted(Arc::new(n))
    }

    fn pod(name: &str, group: &str) -> ClusterEvent {
        let v = json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {
                "schedulingGroup": {"podGroupName": group},
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]
            }
        });
        ClusterEvent::PodUpserted(Arc::new(serde_json::from_value(v).unwrap()))
    }

    fn group(name: &str, min: i32, key: Option<&str>, annotations: Value) -> ClusterEvent {
        let mut spec = json!({"schedulingPolicy": {"gang": {"minCount": min}}});
        if let Some(k) = key {
            spec["schedulingConstraints"] = json!({"topology": [{"key": k}]});
        }
        let pg: PodGroup = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "annotations": annotations},
            "spec": spec
        }))
        .unwrap();
        ClusterEvent::PodGroupUpserted(Arc::new(pg))
    }

    fn apply(e: &mut Engine, events: Vec<ClusterEvent>) {
        for ev in events {
            e.apply(ev, 0);
        }
    }

    fn binds(d: &[Decision]) -> BTreeMap<String, String> {
        d.iter()
            .filter_map(|x| match x {
                Decision::Bind { pod, node, .. } => Some((pod.name.to_string(), node.clone())),
                _ => None,
            })
            .collect()
    }

    fn condition(d: &[Decision], name: &str) -> Option<(bool, String, String)> {
        d.iter().find_map(|x| match x {
            Decision::PodGroupCondition { group, status, reason, message } if &*group.name == name => {
                Some((*status, reason.clone(), message.clone()))
            }
            _ => None,
        })
    }

    fn two_racks() -> Vec<ClusterEvent> {
        vec![node("a1", "r1", "2"), node("b1", "r2", "2"), node("b2", "r2", "2")]
    }

    #[test]
    fn the_topology_assignment_annotation_decodes_to_the_bound_pods() {
        let mut e = engine(&["rack", HOSTNAME_LEVEL]);
        apply(&mut e, two_racks());
        apply(&mut e, vec![group("pg", 3, Some("rack"), json!({}))]);
        apply(&mut e, (0..3).map(|i| pod(&format!("p{i}"), "pg")).collect());
        let d = e.schedule(0, &mut NoopObserver);
        let bound = binds(&d);
        assert_eq!(bound.len(), 3);
        let value = d
            .iter()
            .find_map(|x| match x {
                Decision::PodGroupAnnotation { group, key, value }
                    if &*group.name == "pg" && key == TOPOLOGY_ASSIGNMENT =>
                {
                    value.clone()
                }
                _ => None,
            })
            .expect("a topology assignment annotation");
        let ta: TopologyAssignment = serde_json::from_str(&value).unwrap();
        assert_eq!(ta.levels, [HOSTNAME_LEVEL], "a hostname topology keeps only the hostname");
        let mut decoded: BTreeMap<String, u32> = BTreeMap::new();
        for dc in ta.decode().unwrap() {
            decoded.insert(dc.values[0].clone(), dc.count);
        }
        let mut per_node: BTreeMap<String, u32> = BTreeMap::new();
        for node in bound.values() {
            *per_node.entry(node.clone()).or_insert(0) += 1;
        }
        assert_eq!(decoded, per_node);
        assert!(per_node.keys().all(|n| n.starts_with('b')), "one rack: {per_node:?}");
        assert_eq!(condition(&d, "pg"), Some((true, REASON_SCHEDULED.to_string(), String::new())));
    }

    #[test]
    fn leader_and_workers_wait_for_each_other_and_bind_together() {
        let mut e = engine(&["rack", HOSTNAME_LEVEL]);
        apply(&mut e, two_racks());
        let ann = json!({PODSET_GROUP_NAME: "lws-0"});
        apply(&mut e, vec![group("leader", 1, Some("rack"), ann.clone()), pod("leader-0", "leader")]);
        assert!(binds(&e.schedule(0, &mut NoopObserver)).is_empty());
        match e.queue().state(&PodKey::new("default", "leader-0")) {
            Some(QueueState::Gated { reason }) => {
                assert!(reason.contains("PodSet group \"lws-0\""), "{reason}")
            }
            other => panic!("expected gated, got {other:?}"),
        }
        apply(&mut e, vec![group("workers", 3, Some("rack"), ann), pod("workers-0", "workers")]);
        apply(&mut e, vec![pod("workers-1", "workers")]);
        assert!(binds(&e.schedule(0, &mut NoopObserver)).is_empty(), "the workers lack their quorum");
        apply(&mut e, vec![pod("workers-2", "workers")]);
        let d = e.schedule(0, &mut NoopObserver);
        let bound = binds(&d);
        assert_eq!(bound.len(), 4, "{d:?}");
        assert!(bound.values().all(|n| n.starts_with('b')), "leader and workers share rack r2: {bound:?}");
        assert!(condition(&d, "leader").is_some_and(|c| c.0));
        assert!(condition(&d, "workers").is_some_and(|c| c.0));
    }

    #[test]
    fn a_unit_that_does_not_fit_fails_both_groups() {
        let mut e = engine(&["rack", HOSTNAME_LEVEL]);
        apply(&mut e, two_racks());
        let ann = json!({PODSET_GROUP_NAME: "g"});
        apply(&mut e, vec![group("leader", 1, Some("rack"), ann.clone()), pod("leader-0", "leader")]);
        apply(&mut e, vec![group("workers", 4, Some("rack"), ann)]);
        apply(&mut e, (0..4).map(|i| pod(&format!("workers-{i}"), "workers")).collect());
        let d = e.schedule(0, &mut NoopObserver);
        assert!(binds(&d).is_empty());
        for name in ["leader", "workers"] {
            let (status, reason, message) = condition(&d, name).unwrap();
            assert!(!status);
            assert_eq!(reason, REASON_UNSCHEDULABLE);
            assert!(message.starts_with("topology \"default\""), "{message}");
        }
    }

    #[test]
    fn an_invalid_request_is_unschedulable_naming_the_group_and_the_annotation() {
        let mut e = engine(&["rack", HOSTNAME_LEVEL]);
        apply(&mut e, two_racks());
        apply(&mut e, vec![group("pg", 1, None, json!({PODSET_SLICE_REQUIRED_TOPOLOGY: HOSTNAME_LEVEL}))]);
        apply(&mut e, vec![pod("p0", "pg")]);
        let d = e.schedule(0, &mut NoopObserver);
        assert!(binds(&d).is_empty());
        let (status, reason, message) = condition(&d, "pg").unwrap();
        assert!(!status);
        assert_eq!(reason, REASON_UNSCHEDULABLE);
        assert!(
            message.contains("default/pg") && message.contains(PODSET_SLICE_REQUIRED_TOPOLOGY),
            "{message}"
        );
    }

    #[test]
    fn later_groups_see_the_pods_of_earlier_ones() {
        let mut e = engine(&["rack", HOSTNAME_LEVEL]);
        apply(&mut e, two_racks());
        let unconstrained = json!({PODSET_UNCONSTRAINED_TOPOLOGY: "true"});
        apply(&mut e, vec![group("first", 2, None, unconstrained.clone())]);
        apply(&mut e, (0..2).map(|i| pod(&format!("f{i}"), "first")).collect());
        let d = e.schedule(0, &mut NoopObserver);
        // LeastFreeCapacity: all hosts hold 2; by name a1 takes both.
        assert_eq!(binds(&d).values().collect::<Vec<_>>(), ["a1", "a1"]);
        apply(&mut e, vec![group("second", 4, None, unconstrained)]);
        apply(&mut e, (0..4).map(|i| pod(&format!("s{i}"), "second")).collect());
        let d = e.schedule(0, &mut NoopObserver);
        assert!(binds(&d).values().all(|n| n != "a1"), "a1 is full: {d:?}");
    }

    #[test]
    fn without_topology_levels_podset_group_names_are_ignored() {
        let mut e = engine(&[]);
        apply(&mut e, two_racks());
        apply(
            &mut e,
            vec![group("leader", 1, None, json!({PODSET_GROUP_NAME: "g"})), pod("leader-0", "leader")],
        );
        assert_eq!(binds(&e.schedule(0, &mut NoopObserver)).len(), 1);
    }
}
