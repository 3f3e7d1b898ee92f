//! Preemption as the SEMANTICS describe it, on small clusters with the real pod filters.

use std::collections::BTreeMap;
use std::sync::Arc;

use placer_api::k8s::api::core::v1::{Node, Pod};
use placer_api::k8s::api::policy::v1::PodDisruptionBudget;
use placer_api::k8s::api::scheduling::v1alpha2::PodGroup;
use rustc_hash::FxHashMap;
use serde_json::{json, Value};

use super::*;
use crate::framework::{FitError, Framework};
use crate::model::{GroupKey, NodeStatic, PodGroupInfo, PodInfo, PodKey};
use crate::placement::{Placement, PlacementFeasible};
use crate::plugins::placement_gang::GangScheduling;
use crate::podgroup::{GroupCycle, GroupIndex, GroupPreemption, PodScheduler};
use crate::snapshot::Snapshot;
use crate::SchedulerConfig;

use super::victims::{by_importance, VictimUnit};

// ---- fixtures -------------------------------------------------------------------------

fn node(name: &str, cpu: &str, labels: Value) -> NodeStatic {
    let n: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": cpu, "pods": "32"}}
    }))
    .expect("node");
    NodeStatic::from_node(Arc::new(n)).expect("node")
}

/// A pod with a cpu request and a priority; `extra` is merged into its spec.
fn pod_with(name: &str, cpu: &str, priority: i32, extra: Value) -> Arc<PodInfo> {
    let mut spec = json!({
        "priority": priority,
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": spec
    }))
    .expect("pod");
    Arc::new(PodInfo::from_pod(Arc::new(p)).expect("pod"))
}

fn bound(name: &str, cpu: &str, priority: i32, node: &str) -> Arc<PodInfo> {
    pod_with(name, cpu, priority, json!({"nodeName": node}))
}

fn member(name: &str, cpu: &str, priority: i32, group: &str, node: Option<&str>) -> Arc<PodInfo> {
    let mut extra = json!({"schedulingGroup": {"podGroupName": group}});
    if let Some(n) = node {
        extra["nodeName"] = json!(n);
    }
    pod_with(name, cpu, priority, extra)
}

fn group(
    name: &str,
    min_count: Option<i32>,
    priority: i32,
    together: bool,
    key: Option<&str>,
) -> Arc<PodGroupInfo> {
    let mut spec = json!({"priority": priority});
    spec["schedulingPolicy"] = match min_count {
        Some(m) => json!({"gang": {"minCount": m}}),
        None => json!({"basic": {}}),
    };
    if together {
        spec["disruptionMode"] = json!("PodGroup");
    }
    if let Some(k) = key {
        spec["schedulingConstraints"] = json!({"topology": [{"key": k}]});
    }
    let pg: PodGroup =
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec}))
            .expect("pod group");
    Arc::new(PodGroupInfo::from_pod_group(Arc::new(pg)).expect("pod group"))
}

/// A cluster: snapshot, PodGroups, PDBs and pods, as the engine would hold them.
struct World {
    snap: Snapshot,
    groups: GroupIndex,
    pdbs: BTreeMap<PodKey, Arc<PodDisruptionBudget>>,
    pods: FxHashMap<PodKey, Arc<PodInfo>>,
    evicting: BTreeMap<PodKey, std::sync::Arc<str>>,
    fw: Framework,
    feasible: Vec<Box<dyn PlacementFeasible>>,
}

impl World {
    fn new(nodes: Vec<NodeStatic>) -> World {
        let mut snap = Snapshot::new();
        for n in nodes {
            snap.upsert_node(n);
        }
        World {
            snap,
            groups: GroupIndex::new(),
            pdbs: BTreeMap::new(),
            pods: FxHashMap::default(),
            evicting: BTreeMap::new(),
            fw: crate::plugins::pod_framework(&SchedulerConfig::default()),
            feasible: vec![Box::new(GangScheduling)],
        }
    }

    fn add(&mut self, pod: Arc<PodInfo>) -> &mut Self {
        if let Some(g) = &pod.group {
            self.groups.entry_mut(g).members.insert(pod.key.clone());
        }
        self.snap.upsert_pod(pod.clone());
        self.pods.insert(pod.key.clone(), pod);
        self
    }

    fn add_group(&mut self, info: Arc<PodGroupInfo>) -> &mut Self {
        let key = info.key.clone();
        self.groups.entry_mut(&key).info = Some(info);
        self
    }

    fn add_pdb(&mut self, name: &str, spec: Value) -> &mut Self {
        let pdb: PodDisruptionBudget =
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec}))
                .expect("pdb");
        self.pdbs.insert(PodKey::new("default", name), Arc::new(pdb));
        self
    }

    fn env(&self) -> PreemptionEnv<'_> {
        PreemptionEnv {
            algo: &self.fw,
            groups: &self.groups,
            pdbs: &self.pdbs,
            pods: &self.pods,
            evicting: &self.evicting,
        }
    }

    fn id(&self, name: &str) -> NodeId {
        self.snap.node_id(name).expect("node exists")
    }

    /// Per-pod preemption for `pod` over every node; victims by name, and the node.
    fn preempt_pod(&mut self, pod: &Arc<PodInfo>) -> Result<(String, Vec<String>), String> {
        self.preempt_pod_with(pod, crate::config::args::PreemptionCandidates::default())
    }

    /// The same with `DefaultPreemptionArgs`' candidate numbers.
    fn preempt_pod_with(
        &mut self,
        pod: &Arc<PodInfo>,
        candidates: crate::config::args::PreemptionCandidates,
    ) -> Result<(String, Vec<String>), String> {
        let nodes = self.snap.node_ids().to_vec();
        let fit: FitError = match self.fw.find_node(&self.snap, pod, &nodes) {
            Ok(_) => panic!("{} fits without preemption", pod.key),
            Err(fit) => fit,
        };
        let generation_before = requested_cpu(&self.snap);
        let mut snap = std::mem::take(&mut self.snap);
        let result = PodPreemptor::new(self.env())
            .with_candidates(candidates)
            .preempt_pod(&mut snap, pod, &nodes, &fit);
        self.snap = snap;
        assert_eq!(requested_cpu(&self.snap), generation_before, "the snapshot is left as found");
        result.map(|plan| (self.snap.node(plan.node).name().to_string(), names(&plan.victims)))
    }

    /// Workload-aware preemption for `group` with `pods` over every node.
    fn preempt_group(
        &mut self,
        group: Arc<PodGroupInfo>,
        pods: Vec<Arc<PodInfo>>,
    ) -> Result<(Vec<String>, Nominations), String> {
        let cycle = cycle(group, pods);
        let nodes = self.snap.node_ids().to_vec();
        let before = requested_cpu(&self.snap);
        let mut snap = std::mem::take(&mut self.snap);
        let result = {
            let mut wap = WorkloadPreemptor::new(self.env(), &self.feasible);
            wap.preempt(&mut snap, &cycle, &nodes)
        };
        self.snap = snap;
        assert_eq!(requested_cpu(&self.snap), before, "the snapshot is left as found");
        result.map(|plan| {
            let nominations = plan
                .nominations
                .iter()
                .map(|(i, n)| (cycle.pods[*i].key.name.to_string(), self.snap.node(*n).name().to_string()))
                .collect();
            (names(&plan.victims), nominations)
        })
    }
}

/// (member, node) pairs, by name.
type Nominations = Vec<(String, String)>;

fn cycle(group: Arc<PodGroupInfo>, pods: Vec<Arc<PodInfo>>) -> GroupCycle {
    GroupCycle::new(group, true, pods.into_iter().enumerate().map(|(i, p)| (i as u64, p)).collect(), vec![])
}

fn requested_cpu(snap: &Snapshot) -> Vec<(String, i64, usize)> {
    snap.nodes().map(|n| (n.name().to_string(), n.requested.cpu, n.pods.len())).collect()
}

fn names(pods: &[Arc<PodInfo>]) -> Vec<String> {
    let mut v: Vec<String> = pods.iter().map(|p| p.key.name.to_string()).collect();
    v.sort();
    v
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

// ---- per-pod preemption ---------------------------------------------------------------

#[test]
fn per_pod_evicts_only_the_lowest_priority_pods_it_needs() {
    // Scenario 057: priorities 30, 20, 10 on a full 3-CPU node; a 1-CPU pod of 100 evicts 10.
    let mut w = World::new(vec![node("n1", "3", json!({}))]);
    w.add(bound("p30", "1", 30, "n1")).add(bound("p20", "1", 20, "n1")).add(bound("p10", "1", 10, "n1"));
    let got = w.preempt_pod(&pod_with("high", "1", 100, json!({})));
    assert_eq!(got, Ok(("n1".to_string(), strings(&["p10"]))));
}

#[test]
fn equal_priority_is_never_a_victim() {
    let mut w = World::new(vec![node("n1", "1", json!({}))]);
    w.add(bound("same", "1", 100, "n1"));
    let err = w.preempt_pod(&pod_with("p", "1", 100, json!({}))).unwrap_err();
    assert_eq!(err, "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod");
}

#[test]
fn the_node_whose_most_important_victim_is_least_important_wins() {
    let mut w = World::new(vec![node("n1", "1", json!({})), node("n2", "1", json!({}))]);
    w.add(bound("mid", "1", 50, "n1")).add(bound("low", "1", 10, "n2"));
    assert_eq!(w.preempt_pod(&pod_with("p", "1", 100, json!({}))), Ok(("n2".into(), strings(&["low"]))));
}

#[test]
fn at_equal_top_priority_the_smaller_priority_sum_wins_then_fewer_victims() {
    // n1 needs both 1-CPU pods of priority 10 gone; n2 one 2-CPU pod of priority 10.
    let mut w = World::new(vec![node("n1", "2", json!({})), node("n2", "2", json!({}))]);
    w.add(bound("a", "1", 10, "n1")).add(bound("b", "1", 10, "n1")).add(bound("c", "2", 10, "n2"));
    assert_eq!(w.preempt_pod(&pod_with("p", "2", 100, json!({}))), Ok(("n2".into(), strings(&["c"]))));
}

#[test]
fn fewer_pdb_violations_beat_lower_priority_victims() {
    // n2's pod has the lower priority, but its budget allows no disruption.
    let mut w = World::new(vec![node("n1", "1", json!({})), node("n2", "1", json!({}))]);
    let guarded = {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "guarded", "namespace": "default", "labels": {"app": "db"}},
            "spec": {"priority": 5, "nodeName": "n2",
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
        }))
        .expect("pod");
        Arc::new(PodInfo::from_pod(Arc::new(p)).expect("pod"))
    };
    w.add(guarded).add(bound("free", "1", 20, "n1"));
    w.add_pdb("db", json!({"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}));
    assert_eq!(w.preempt_pod(&pod_with("p", "1", 100, json!({}))), Ok(("n1".into(), strings(&["free"]))));
}

/// kube's `TestDryRunPreemption` "preemption looks past numCandidates until a non-PDB
/// violating node is found" (offset 0): with 40% / at least 2 of 5 nodes, n1 and n2 only
/// violate the budget, n3 is the first that does not, and the search stops there, so n4's
/// cheaper victim is never seen; with the defaults every node is a candidate.
#[test]
fn the_candidate_search_stops_at_enough_candidates_with_one_not_violating() {
    use crate::config::args::PreemptionCandidates;
    let nodes = ["n1", "n2", "n3", "n4", "n5"].map(|n| node(n, "1", json!({}))).to_vec();
    let mut w = World::new(nodes);
    for (name, on, priority, guarded) in [
        ("p1", "n1", 50, true),
        ("p2", "n2", 50, true),
        ("p3", "n3", 50, false),
        ("p4", "n4", 10, false),
        ("p5", "n5", 50, true),
    ] {
        let labels = if guarded { json!({"app": "foo"}) } else { json!({}) };
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"priority": priority, "nodeName": on,
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
        }))
        .expect("pod");
        w.add(Arc::new(PodInfo::from_pod(Arc::new(p)).expect("pod")));
    }
    w.add_pdb("foo", json!({"maxUnavailable": 0, "selector": {"matchLabels": {"app": "foo"}}}));
    let preemptor = pod_with("p", "1", 100, json!({}));
    let few = PreemptionCandidates { min_percentage: 40, min_absolute: 2 };
    assert_eq!(w.preempt_pod_with(&preemptor, few), Ok(("n3".into(), strings(&["p3"]))));
    assert_eq!(w.preempt_pod(&preemptor), Ok(("n4".into(), strings(&["p4"]))));
    // One candidate that violates no budget is enough: n1, n2 violate, n3 ends it.
    let one = PreemptionCandidates { min_percentage: 0, min_absolute: 1 };
    assert_eq!(w.preempt_pod_with(&preemptor, one), Ok(("n3".into(), strings(&["p3"]))));
}

#[test]
fn reprieve_puts_back_the_most_important_pods_first() {
    // 4-CPU node: 2 CPU at priority 40, 1 at 30, 1 at 20. A 2-CPU pod keeps 40 and evicts 30+20.
    let mut w = World::new(vec![node("n1", "4", json!({}))]);
    w.add(bound("p40", "2", 40, "n1")).add(bound("p30", "1", 30, "n1")).add(bound("p20", "1", 20, "n1"));
    assert_eq!(
        w.preempt_pod(&pod_with("p", "2", 100, json!({}))),
        Ok(("n1".into(), strings(&["p20", "p30"])))
    );
}

#[test]
fn preemption_policy_never_is_not_eligible() {
    let mut w = World::new(vec![node("n1", "1", json!({}))]);
    w.add(bound("low", "1", 1, "n1"));
    let err = w.preempt_pod(&pod_with("p", "1", 100, json!({"preemptionPolicy": "Never"}))).unwrap_err();
    assert_eq!(err, "not eligible due to preemptionPolicy=Never");
}

#[test]
fn nodes_no_eviction_can_fix_are_not_candidates() {
    let mut w =
        World::new(vec![node("a", "1", json!({"disk": "hdd"})), node("b", "1", json!({"disk": "ssd"}))]);
    w.add(bound("low-a", "1", 1, "a")).add(bound("mid-b", "1", 50, "b"));
    let p = pod_with("p", "1", 100, json!({"nodeSelector": {"disk": "ssd"}}));
    assert_eq!(w.preempt_pod(&p), Ok(("b".into(), strings(&["mid-b"]))), "a is excluded by its labels");
    let p = pod_with("p", "1", 40, json!({"nodeSelector": {"disk": "ssd"}}));
    assert_eq!(
        w.preempt_pod(&p).unwrap_err(),
        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, \
         1 Preemption is not helpful for scheduling"
    );
}

#[test]
fn a_group_member_never_evicts_its_own_group_mates() {
    let mut w = World::new(vec![node("n1", "2", json!({}))]);
    w.add_group(group("pg", Some(2), 0, false, None));
    w.add(member("mate", "1", 1, "pg", Some("n1"))).add(bound("other", "1", 1, "n1"));
    let got = w.preempt_pod(&member("p", "2", 100, "pg", None));
    assert_eq!(got.unwrap_err(), "preemption: 0/1 nodes are available: 1 Insufficient cpu");
    let got = w.preempt_pod(&member("p", "1", 100, "pg", None));
    assert_eq!(got, Ok(("n1".into(), strings(&["other"]))));
}

// ---- victim units ---------------------------------------------------------------------

#[test]
fn importance_is_priority_then_groups_then_size_then_start() {
    let n = NodeId(0);
    let single = |name: &str, prio: i32| VictimUnit::single(bound(name, "1", prio, "n1"), n);
    let unit = |name: &str, prio: i32, size: usize| VictimUnit {
        group: Some(GroupKey::new("default", name)),
        priority: prio,
        pods: (0..size).map(|i| bound(&format!("{name}-{i}"), "1", prio, "n1")).collect(),
        nodes: vec![n; size],
        earliest_start: victims::StartTime(None),
    };
    let mut units = [
        single("s-low", 1),
        unit("g-small", 5, 1),
        single("s-b", 5),
        unit("g-big", 5, 3),
        single("s-a", 5),
        single("top", 9),
    ];
    units.sort_by(by_importance);
    let order: Vec<&str> = units.iter().map(|u| &*u.key().name).collect();
    assert_eq!(order, ["top", "g-big", "g-small", "s-a", "s-b", "s-low"]);
}

// ---- workload-aware preemption --------------------------------------------------------

#[test]
fn a_gang_evicts_just_enough_single_pods() {
    // Scenario 044: gang of 3 on a 4-CPU node filled by four priority-10 pods.
    let mut w = World::new(vec![node("node", "4", json!({}))]);
    for i in 1..=4 {
        w.add(bound(&format!("low-{i}"), "1", 10, "node"));
    }
    let g = group("pg1", Some(3), 100, true, None);
    let pods = (1..=3).map(|i| member(&format!("high-{i}"), "1", 100, "pg1", None)).collect();
    let (victims, nominations) = w.preempt_group(g, pods).expect("preempts");
    assert_eq!(victims, strings(&["low-2", "low-3", "low-4"]), "low-1 (first by name) is reprieved");
    assert_eq!(nominations.len(), 3);
    assert!(nominations.iter().all(|(_, n)| n == "node"));
}

#[test]
fn the_group_priority_decides_not_the_pod_priority() {
    // Scenario 055: pods of priority 100 in a priority-10 PodGroup (disruptionMode PodGroup)
    // fall to a priority-10 pod whose PodGroup has priority 100.
    let mut w = World::new(vec![node("node1", "3", json!({}))]);
    w.add_group(group("pg2", Some(3), 10, true, None));
    for i in 1..=3 {
        w.add(member(&format!("high-{i}"), "1", 100, "pg2", Some("node1")));
    }
    let got =
        w.preempt_group(group("pg1", Some(1), 100, false, None), vec![member("low-1", "1", 10, "pg1", None)]);
    assert_eq!(got.expect("preempts").0, strings(&["high-1", "high-2", "high-3"]), "the whole group goes");
    // Scenario 056: the other way round nothing is a candidate.
    let mut w = World::new(vec![node("node1", "3", json!({}))]);
    w.add_group(group("pg2", Some(3), 100, true, None));
    for i in 1..=3 {
        w.add(member(&format!("low-{i}"), "1", 10, "pg2", Some("node1")));
    }
    let got = w
        .preempt_group(group("pg1", Some(1), 10, false, None), vec![member("high-1", "1", 100, "pg1", None)]);
    assert_eq!(got.unwrap_err(), MSG_NO_VICTIMS_PREEMPTOR);
}

#[test]
fn equal_priority_units_are_not_candidates() {
    let mut w = World::new(vec![node("node1", "1", json!({}))]);
    w.add(bound("peer", "1", 50, "node1"));
    let got = w.preempt_group(group("pg", Some(1), 50, false, None), vec![member("p", "1", 50, "pg", None)]);
    assert_eq!(got.unwrap_err(), MSG_NO_VICTIMS_PREEMPTOR);
}

#[test]
fn reprieve_reruns_the_group_and_keeps_the_more_important_unit() {
    // Scenario 048: high-1 already runs on node1 next to low-1 (priority 10); very-low-1
    // (priority 5) fills node2. low-1 is reprieved first (the group still fits on node2),
    // very-low-1 cannot be.
    let mut w = World::new(vec![node("node1", "2", json!({})), node("node2", "2", json!({}))]);
    w.add_group(group("pg1", None, 100, false, None));
    w.add(bound("low-1", "1", 10, "node1")).add(bound("very-low-1", "2", 5, "node2"));
    w.add(member("high-1", "1", 100, "pg1", Some("node1")));
    let pods = vec![member("high-2", "1", 100, "pg1", None), member("high-3", "1", 100, "pg1", None)];
    let (victims, nominations) =
        w.preempt_group(group("pg1", None, 100, false, None), pods).expect("preempts");
    assert_eq!(victims, strings(&["very-low-1"]));
    assert_eq!(nominations, vec![("high-2".into(), "node2".into()), ("high-3".into(), "node2".into())]);
}

#[test]
fn reprieve_keeps_higher_priority_units_when_lower_ones_suffice() {
    // Scenario 052: the priority-50 pod survives, both priority-10 pods go.
    let mut w = World::new(vec![node("node1", "3", json!({}))]);
    w.add(bound("mid-1", "1", 50, "node1"))
        .add(bound("low-1", "1", 10, "node1"))
        .add(bound("low-2", "1", 10, "node1"));
    let pods = vec![member("high-1", "1", 100, "pg1", None), member("high-2", "1", 100, "pg1", None)];
    let (victims, _) = w.preempt_group(group("pg1", Some(2), 100, false, None), pods).expect("preempts");
    assert_eq!(victims, strings(&["low-1", "low-2"]));
}

#[test]
fn budget_protected_units_are_reprieved_first() {
    // Scenario 049: minAvailable 2 over low-1 and low-2; the unprotected low-3 goes.
    let labelled = |name: &str| {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "foo"}},
            "spec": {"priority": 10, "nodeName": "node1",
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
        }))
        .expect("pod");
        Arc::new(PodInfo::from_pod(Arc::new(p)).expect("pod"))
    };
    let mut w = World::new(vec![node("node1", "3", json!({}))]);
    w.add(labelled("low-1")).add(labelled("low-2")).add(bound("low-3", "1", 10, "node1"));
    w.add_pdb("foo-pdb", json!({"minAvailable": 2, "selector": {"matchLabels": {"app": "foo"}}}));
    let pods = vec![member("high-1", "500m", 100, "pg1", None), member("high-2", "500m", 100, "pg1", None)];
    let (victims, _) = w.preempt_group(group("pg1", Some(2), 100, false, None), pods).expect("preempts");
    assert_eq!(victims, strings(&["low-3"]));
}

#[test]
fn a_standalone_pod_goes_before_a_podgroup_member_of_equal_priority() {
    // SEMANTICS §12 (v1.36): the member of another PodGroup (a unit of its own, priority
    // 10) is more important than the standalone pod of priority 10, so it is reprieved
    // first: the whole group algorithm runs again and finds node1 (free while solo is
    // out). Re-checking only the node the first simulation chose (node2, the larger
    // one) would have evicted the member instead.
    let mut w = World::new(vec![node("node1", "1", json!({})), node("node2", "4", json!({}))]);
    w.add_group(group("other", None, 10, false, None));
    w.add(bound("solo", "1", 10, "node1")).add(member("gm", "4", 10, "other", Some("node2")));
    let (victims, nominations) = w
        .preempt_group(group("pg1", Some(1), 100, false, None), vec![member("high-1", "1", 100, "pg1", None)])
        .expect("preempts");
    assert_eq!(victims, strings(&["solo"]));
    assert_eq!(nominations, vec![("high-1".into(), "node1".into())]);
}

#[test]
fn a_budget_protected_victim_is_kept_when_another_node_is_free_after_the_rest() {
    // SEMANTICS §12: the protected unit is tried first; with it back the group still fits
    // on the other node, so only the unprotected pod goes, although the first simulation
    // (both removed) preferred the protected pod's larger node.
    let protected: Arc<PodInfo> = {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "guarded", "namespace": "default", "uid": "uid-guarded", "labels": {"app": "foo"}},
            "spec": {"priority": 10, "nodeName": "node2",
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "4"}}}]}
        }))
        .expect("pod");
        Arc::new(PodInfo::from_pod(Arc::new(p)).expect("pod"))
    };
    let mut w = World::new(vec![node("node1", "1", json!({})), node("node2", "4", json!({}))]);
    w.add(protected).add(bound("plain", "1", 10, "node1"));
    w.add_pdb("foo-pdb", json!({"minAvailable": 1, "selector": {"matchLabels": {"app": "foo"}}}));
    let (victims, _) = w
        .preempt_group(group("pg1", Some(1), 100, false, None), vec![member("high-1", "1", 100, "pg1", None)])
        .expect("preempts");
    assert_eq!(victims, strings(&["plain"]));
}

#[test]
fn a_disruption_mode_podgroup_victim_goes_whole_even_if_one_pod_would_do() {
    // Scenario 053, with one member on another node: it goes too.
    let mut w = World::new(vec![node("node1", "3", json!({})), node("node2", "1", json!({}))]);
    w.add_group(group("pg2", Some(3), 10, true, None));
    w.add(member("low-1", "1", 10, "pg2", Some("node1")))
        .add(member("low-2", "1", 10, "pg2", Some("node1")))
        .add(member("low-3", "1", 10, "pg2", Some("node1")))
        .add(member("low-4", "1", 10, "pg2", Some("node2")));
    let got = w.preempt_group(
        group("pg1", Some(1), 100, false, None),
        vec![member("high-1", "2", 100, "pg1", None)],
    );
    assert_eq!(got.expect("preempts").0, strings(&["low-1", "low-2", "low-3", "low-4"]));
}

#[test]
fn nothing_is_evicted_when_even_all_candidates_are_not_enough() {
    // Scenario 051: a priority-500 pod keeps one of three CPUs; a gang of 3 cannot fit.
    let mut w = World::new(vec![node("node1", "3", json!({}))]);
    w.add(bound("mid-1", "1", 500, "node1"))
        .add(bound("low-1", "1", 10, "node1"))
        .add(bound("low-2", "1", 10, "node1"));
    let pods = (1..=3).map(|i| member(&format!("high-{i}"), "1", 100, "pg1", None)).collect();
    let err = w.preempt_group(group("pg1", Some(3), 100, false, None), pods).unwrap_err();
    assert!(
        err.starts_with("preemption: the pod group does not fit even without its 2 lower-priority victim(s)"),
        "{err}"
    );
}

#[test]
fn one_member_with_preemption_policy_never_keeps_the_group_from_preempting() {
    let mut w = World::new(vec![node("node1", "1", json!({}))]);
    w.add(bound("low", "1", 1, "node1"));
    let pods = vec![member("a", "1", 100, "pg", None), {
        let mut extra = json!({"schedulingGroup": {"podGroupName": "pg"}});
        extra["preemptionPolicy"] = json!("Never");
        pod_with("b", "1", 100, extra)
    }];
    let err = w.preempt_group(group("pg", None, 100, false, None), pods).unwrap_err();
    assert_eq!(err, MSG_NOT_ELIGIBLE_NEVER);
}

#[test]
fn topology_aware_preemption_picks_the_cheapest_domain() {
    // Two racks of two 2-CPU nodes. r1 holds a priority-10 gang (disruptionMode PodGroup)
    // of two 2-CPU pods; r2 a priority-50 pod and a priority-10 pod. A rack-constrained
    // gang of four 1-CPU pods at priority 1000 takes r1: its most important victim is 10.
    let rack = |r: &str| json!({"rack": r});
    let mut w = World::new(vec![
        node("a1", "2", rack("r1")),
        node("a2", "2", rack("r1")),
        node("b1", "2", rack("r2")),
        node("b2", "2", rack("r2")),
    ]);
    w.add_group(group("victim", Some(2), 10, true, None));
    w.add(member("v-1", "2", 10, "victim", Some("a1"))).add(member("v-2", "2", 10, "victim", Some("a2")));
    w.add(bound("mid", "2", 50, "b1")).add(bound("low", "2", 10, "b2"));
    let g = group("big", Some(4), 1000, false, Some("rack"));
    let c = cycle(g, (1..=4).map(|i| member(&format!("big-{i}"), "1", 1000, "big", None)).collect());
    let placements: Vec<Placement> = [("r1", ["a1", "a2"]), ("r2", ["b1", "b2"])]
        .iter()
        .map(|(name, nodes)| Placement {
            name: (*name).into(),
            nodes: nodes.iter().map(|n| w.id(n)).collect(),
        })
        .collect();
    let mut snap = std::mem::take(&mut w.snap);
    let result = {
        let mut wap = WorkloadPreemptor::new(w.env(), &w.feasible);
        wap.preempt_in_placements(&mut snap, &c, &placements)
    };
    let (i, plan) = result.expect("preempts");
    assert_eq!(&*placements[i].name, "r1");
    assert_eq!(names(&plan.victims), strings(&["v-1", "v-2"]));
    assert!(plan.nominations.iter().all(|(_, n)| placements[0].nodes.contains(n)), "all members in r1");
}

// ---- nominated pods -------------------------------------------------------------------

#[test]
fn nominated_pods_hold_their_room_against_lower_or_equal_priority_only() {
    let mut pods: FxHashMap<PodKey, Arc<PodInfo>> = FxHashMap::default();
    for (name, prio) in [("hi", 100), ("eq", 50), ("lo", 10)] {
        let p = pod_with(name, "1", prio, json!({}));
        pods.insert(p.key.clone(), p);
    }
    let bound_pod = bound("bound", "1", 100, "n1");
    pods.insert(bound_pod.key.clone(), bound_pod);
    let nominations: BTreeMap<PodKey, String> =
        ["hi", "eq", "lo", "bound"].iter().map(|n| (PodKey::new("default", *n), "n1".to_string())).collect();
    let seen = nominated_for(&nominations, &pods, 50, |p| p.priority, |k| &*k.name == "hi");
    let names: Vec<&str> = seen.iter().map(|(p, _)| &*p.key.name).collect();
    assert_eq!(names, ["eq"], "hi is skipped, lo is lower, bound is no longer nominated");

    let mut snap = Snapshot::new();
    snap.upsert_node(node("n1", "1", json!({})));
    let mark = snap.checkpoint();
    assert_eq!(assume_nominated(&mut snap, &seen), 1);
    let fw = crate::plugins::pod_framework(&SchedulerConfig::default());
    let ids = snap.node_ids().to_vec();
    assert!(fw.find_node(&snap, &pod_with("newcomer", "1", 50, json!({})), &ids).is_err());
    snap.rollback(mark);
    assert!(fw.find_node(&snap, &pod_with("newcomer", "1", 50, json!({})), &ids).is_ok());
}

#[test]
fn disrupted_groups_count_their_victims() {
    let mut groups = GroupIndex::new();
    groups.entry_mut(&GroupKey::new("default", "pg")).info = Some(group("pg", None, 0, false, None));
    let victims = vec![
        member("a", "1", 0, "pg", Some("n")),
        member("b", "1", 0, "pg", Some("n")),
        bound("c", "1", 0, "n"),
    ];
    assert_eq!(disrupted_groups(&groups, &victims), vec![(GroupKey::new("default", "pg"), 2)]);
}

proptest::proptest! {
    /// Building only the units up to a priority gives the plain path's units filtered by
    /// that priority, in the same order: singles, groups evicted whole and members of
    /// groups evicted one by one, at priorities around the bound, with the preemptor's own
    /// group skipped or not.
    #[test]
    fn units_up_to_a_priority_are_the_plain_units_filtered(
        pods in proptest::collection::vec((0usize..4, -2i32..3, 0usize..3), 1..24),
        groups in proptest::collection::vec((-2i32..3, proptest::bool::ANY), 4),
        max in -3i32..4,
        skip in proptest::option::of(0usize..4),
    ) {
        let mut w = World::new(vec![node("n0", "64", json!({})), node("n1", "64", json!({})), node("n2", "64", json!({}))]);
        for (g, (priority, together)) in groups.iter().enumerate() {
            w.add_group(group(&format!("g{g}"), None, *priority, *together, None));
        }
        for (i, (g, priority, n)) in pods.iter().enumerate() {
            let name = format!("p{i}");
            let node_name = format!("n{n}");
            // Group index 3 stands for "no group".
            let pod = if *g < 3 {
                member(&name, "1", *priority, &format!("g{g}"), Some(&node_name))
            } else {
                bound(&name, "1", *priority, &node_name)
            };
            w.add(pod);
        }
        let skip = skip.map(|g| GroupKey::new("default", format!("g{g}")));
        let nodes = w.snap.node_ids().to_vec();
        let key = |u: &VictimUnit| (u.key().clone(), u.priority, u.pods.len());
        let plain: Vec<_> = super::victims::workload_units(&w.snap, &w.groups, &nodes, skip.as_ref())
            .iter()
            .filter(|u| u.priority <= max)
            .map(key)
            .collect();
        let fast: Vec<_> = super::victims::workload_units_up_to(&w.snap, &w.groups, &nodes, skip.as_ref(), max)
            .iter()
            .map(key)
            .collect();
        proptest::prop_assert_eq!(plain, fast);
    }
}
