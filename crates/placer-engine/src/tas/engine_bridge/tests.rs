//! The bridge on real snapshots with the default pod-level framework: seed 002's worked
//! examples end to end, leader + workers, index order, the fidelity loop and the cache.

use std::collections::BTreeMap;
use std::sync::Arc;

use placer_api::annotations::JOB_COMPLETION_INDEX;
use placer_api::k8s::api::core::v1::{Node, Pod};
use placer_api::k8s::api::scheduling::v1alpha2::PodGroup;
use serde_json::{json, Value};

use super::*;
use crate::model::{NodeStatic, PodGroupInfo};
use crate::snapshot::Snapshot;
use crate::tas::tree::HOSTNAME_LEVEL;

const RACK: &str = "rack";
const HOST: &str = HOSTNAME_LEVEL;

fn node(name: &str, rack: &str, cpu: i64) -> NodeStatic {
    let n: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {RACK: rack, HOST: name}},
        "status": {"allocatable": {"cpu": cpu.to_string(), "pods": "110"}}
    }))
    .unwrap();
    NodeStatic::from_node(Arc::new(n)).unwrap()
}

fn pod_value(name: &str, group: &str, cpu: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {
            "schedulingGroup": {"podGroupName": group},
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]
        }
    })
}

fn pod_of(v: Value) -> Arc<PodInfo> {
    let p: Pod = serde_json::from_value(v).unwrap();
    Arc::new(PodInfo::from_pod(Arc::new(p)).unwrap())
}

fn group_of(
    name: &str,
    min: Option<i32>,
    annotations: &[(&str, &str)],
    key: Option<&str>,
) -> Arc<PodGroupInfo> {
    let mut spec = match min {
        Some(m) => json!({"schedulingPolicy": {"gang": {"minCount": m}}}),
        None => json!({"schedulingPolicy": {"basic": {}}}),
    };
    if let Some(k) = key {
        spec["schedulingConstraints"] = json!({"topology": [{"key": k}]});
    }
    let ann: BTreeMap<&str, &str> = annotations.iter().copied().collect();
    let pg: PodGroup = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "annotations": ann},
        "spec": spec
    }))
    .unwrap();
    Arc::new(PodGroupInfo::from_pod_group(Arc::new(pg)).unwrap())
}

fn cycle_of(group: Arc<PodGroupInfo>, pods: Vec<Arc<PodInfo>>) -> GroupCycle {
    GroupCycle::new(group, true, pods.into_iter().enumerate().map(|(i, p)| (i as u64, p)).collect(), vec![])
}

fn pods(group: &str, n: usize, cpu: &str) -> Vec<Arc<PodInfo>> {
    (0..n).map(|i| pod_of(pod_value(&format!("{group}-{i}"), group, cpu))).collect()
}

fn config(levels: &[&str], gates: &[(&str, bool)]) -> SchedulerConfig {
    let mut c = SchedulerConfig {
        topology_levels: levels.iter().map(|l| l.to_string()).collect(),
        ..Default::default()
    };
    for (g, on) in gates {
        c.gates.set(g, *on).unwrap();
    }
    c
}

/// A rack of nodes `x1..` with room for these many one-cpu pods.
fn rack(capacities: &[i64]) -> Snapshot {
    let mut s = Snapshot::new();
    for (i, c) in capacities.iter().enumerate() {
        s.upsert_node(node(&format!("x{}", i + 1), "r1", *c));
    }
    s
}

/// Pods per node name of one member's placement.
fn per_node(snap: &Snapshot, m: &MemberPlacement) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    for (_, n) in &m.assignments {
        *out.entry(snap.node(*n).name().to_string()).or_insert(0) += 1;
    }
    out
}

fn counts(pairs: &[(&str, u32)]) -> BTreeMap<String, u32> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn solve(
    snap: &mut Snapshot,
    config: &SchedulerConfig,
    cycles: &[&GroupCycle],
) -> Result<Vec<Option<MemberPlacement>>, UnitFailure> {
    let fw = crate::plugins::pod_framework(config);
    let mut cache = TasCache::new(config);
    place_unit(&fw, config, snap, &mut cache, cycles)
}

#[test]
fn seed_rack_example_best_fit_and_least_free_capacity() {
    // Seed 002 "Computing the assignment": hosts holding 3, 3, 2, 1 pods; 7 pods.
    let preferred = [(placer_api::annotations::PODSET_PREFERRED_TOPOLOGY, RACK)];
    let c = cycle_of(group_of("pg", Some(7), &preferred, None), pods("pg", 7, "1"));
    let mut snap = rack(&[3, 3, 2, 1]);
    let cfg = config(&[RACK, HOST], &[]);
    let out = solve(&mut snap, &cfg, &[&c]).unwrap();
    let m = out[0].as_ref().unwrap();
    assert_eq!(per_node(&snap, m), counts(&[("x1", 3), ("x2", 3), ("x4", 1)]));
    assert_eq!(snap.node(snap.node_id("x1").unwrap()).requested.cpu, 0, "snapshot left as found");

    let unconstrained = [(placer_api::annotations::PODSET_UNCONSTRAINED_TOPOLOGY, "true")];
    let c = cycle_of(group_of("pg", Some(7), &unconstrained, None), pods("pg", 7, "1"));
    let out = solve(&mut snap, &cfg, &[&c]).unwrap();
    let m = out[0].as_ref().unwrap();
    assert_eq!(per_node(&snap, m), counts(&[("x1", 3), ("x2", 1), ("x3", 2), ("x4", 1)]));
}

#[test]
fn a_full_gang_that_does_not_fit_fails_with_a_kueue_like_message() {
    let c = cycle_of(group_of("pg", Some(4), &[], Some(RACK)), pods("pg", 4, "1"));
    let mut snap = rack(&[1, 1, 1]);
    let err = solve(&mut snap, &config(&[RACK, HOST], &[]), &[&c]).unwrap_err();
    assert_eq!(err.message, "topology \"default\" allows to fit only 3 out of 4 pod(s)");
    assert!(!err.internal);
}

#[test]
fn a_smaller_min_count_places_what_the_topology_holds() {
    let c = cycle_of(group_of("pg", Some(2), &[], Some(RACK)), pods("pg", 4, "1"));
    let mut snap = rack(&[1, 1, 1]);
    let out = solve(&mut snap, &config(&[RACK, HOST], &[]), &[&c]).unwrap();
    let m = out[0].as_ref().unwrap();
    assert_eq!(m.assignments.len(), 3);
    assert_eq!(m.left_out.len(), 1);
    assert!(m.left_out[0].1.contains("3 out of 4"), "{}", m.left_out[0].1);
}

#[test]
fn leader_and_workers_are_decided_together() {
    // Rack r2 holds the leader and the three workers.
    let mut snap = Snapshot::new();
    for (n, r, c) in [("a1", "r1", 3), ("b1", "r2", 3), ("b2", "r2", 1)] {
        snap.upsert_node(node(n, r, c));
    }
    let ann = [(PODSET_GROUP_NAME, "lws")];
    let leader = cycle_of(group_of("leader", Some(1), &ann, Some(RACK)), pods("leader", 1, "1"));
    let workers = cycle_of(group_of("workers", Some(3), &ann, Some(RACK)), pods("workers", 3, "1"));
    let out = solve(&mut snap, &config(&[RACK, HOST], &[]), &[&leader, &workers]).unwrap();
    let (l, w) = (out[0].as_ref().unwrap(), out[1].as_ref().unwrap());
    assert_eq!(l.assignments.len(), 1);
    assert_eq!(w.assignments.len(), 3);
    let racks: Vec<&str> = l
        .assignments
        .iter()
        .chain(&w.assignments)
        .map(|(_, n)| snap.node(*n).info.label(RACK).unwrap())
        .collect();
    assert!(racks.iter().all(|r| *r == "r2"), "{racks:?}");
    let decoded = l.topology_assignment.decode().unwrap();
    assert_eq!(decoded.iter().map(|d| d.count).sum::<u32>(), 1);

    // Four workers do not fit with the leader anywhere: both fail.
    let workers = cycle_of(group_of("workers", Some(4), &ann, Some(RACK)), pods("workers", 4, "1"));
    let err = solve(&mut snap, &config(&[RACK, HOST], &[]), &[&leader, &workers]).unwrap_err();
    assert!(err.message.contains("topology \"default\""), "{}", err.message);
}

#[test]
fn a_group_with_a_mismatched_request_is_rejected_naming_it() {
    let mut snap = rack(&[4]);
    let leader = cycle_of(
        group_of("leader", Some(1), &[(PODSET_GROUP_NAME, "g")], Some(RACK)),
        pods("leader", 1, "1"),
    );
    let workers =
        cycle_of(group_of("workers", Some(2), &[(PODSET_GROUP_NAME, "g")], None), pods("workers", 2, "1"));
    let err = solve(&mut snap, &config(&[RACK, HOST], &[]), &[&leader, &workers]).unwrap_err();
    assert!(err.message.contains("PodSet group \"g\""), "{}", err.message);
}

#[test]
fn consecutive_indexes_share_a_domain() {
    // Two racks of 2; four indexed pods arriving in a scrambled order: 0 and 1 share the
    // first rack of the assignment, 2 and 3 the second.
    let mut snap = Snapshot::new();
    for (n, r) in [("a1", "r1"), ("a2", "r1"), ("b1", "r2"), ("b2", "r2")] {
        snap.upsert_node(node(n, r, 1));
    }
    let order = [2, 0, 3, 1];
    let list: Vec<Arc<PodInfo>> = order.iter().map(|&i| pod_of(indexed_pod(i))).collect();
    let unconstrained = [(placer_api::annotations::PODSET_UNCONSTRAINED_TOPOLOGY, "true")];
    let c = cycle_of(group_of("pg", Some(4), &unconstrained, None), list);
    let cfg = config(&[RACK, HOST], &[]);
    let out = solve(&mut snap, &cfg, &[&c]).unwrap();
    let m = out[0].as_ref().unwrap();
    let rack_of = |name: &str| {
        let (i, n) = m.assignments.iter().find(|(i, _)| &*c.pods[*i].key.name == name).unwrap();
        let _ = i;
        snap.node(*n).info.label(RACK).unwrap().to_string()
    };
    assert_eq!(rack_of("p0"), rack_of("p1"));
    assert_eq!(rack_of("p2"), rack_of("p3"));
    assert_ne!(rack_of("p0"), rack_of("p2"));
    assert_eq!(placing_order(&c.pods, 0, 4), vec![1, 3, 0, 2]);
    // An unusable index (below the offset, or a rank past the group's size) falls back to
    // the given order.
    assert_eq!(placing_order(&c.pods, 1, 4), vec![0, 1, 2, 3]);
    assert_eq!(placing_order(&c.pods, 0, 3), vec![0, 1, 2, 3]);
}

/// Pod `p{index}` of PodGroup `pg` (1 cpu) with Job completion index `index`.
fn indexed_pod(index: u64) -> serde_json::Value {
    let mut v = pod_value(&format!("p{index}"), "pg", "1");
    v["metadata"]["labels"] = json!({JOB_COMPLETION_INDEX: index.to_string()});
    v
}

/// Four pods (completion indexes `first..first+4`, arriving scrambled) carrying
/// `kueue.x-k8s.io/pod-index-offset: offset` (when given), placed unconstrained over two
/// racks of 2: which pods share a rack.
fn racks_with_offset(first: u64, offset: Option<&str>) -> Result<Vec<(String, String)>, UnitFailure> {
    let mut snap = Snapshot::new();
    for (n, r) in [("a1", "r1"), ("a2", "r1"), ("b1", "r2"), ("b2", "r2")] {
        snap.upsert_node(node(n, r, 1));
    }
    let list: Vec<Arc<PodInfo>> = [2, 0, 3, 1]
        .iter()
        .map(|i| {
            let mut v = indexed_pod(first + i);
            if let Some(o) = offset {
                v["metadata"]["annotations"] = json!({placer_api::annotations::POD_INDEX_OFFSET: o});
            }
            pod_of(v)
        })
        .collect();
    let unconstrained = [(placer_api::annotations::PODSET_UNCONSTRAINED_TOPOLOGY, "true")];
    let c = cycle_of(group_of("pg", Some(4), &unconstrained, None), list);
    let cfg = config(&[RACK, HOST], &[]);
    let out = solve(&mut snap, &cfg, &[&c])?;
    let m = out[0].as_ref().unwrap();
    let mut racks: Vec<(String, String)> = m
        .assignments
        .iter()
        .map(|(i, n)| (c.pods[*i].key.name.to_string(), snap.node(*n).info.label(RACK).unwrap().to_string()))
        .collect();
    racks.sort();
    Ok(racks)
}

#[test]
fn the_pod_index_offset_on_the_pods_shifts_ranks() {
    // After Kueue's topology_ungater_test "ranks: support rank-based ordering for kubeflow
    // with valid offset annotation - for all Pods", without the launcher PodSet: the
    // workers' indexes start at 1 and their pods carry offset "1"; ranks 0..3.
    let racks = racks_with_offset(1, Some("1")).unwrap();
    let rack = |p: &str| racks.iter().find(|(n, _)| n == p).unwrap().1.clone();
    assert_eq!(rack("p1"), rack("p2"));
    assert_eq!(rack("p3"), rack("p4"));
    assert_ne!(rack("p1"), rack("p3"));
    // A negative offset (Go's Atoi accepts it): indexes 0..3 become ranks 1..4, rank 4 is
    // past the size, so the whole group falls back to arrival order (2, 0, 3, 1): 2 and 0
    // share the first rack.
    let racks = racks_with_offset(0, Some("-1")).unwrap();
    let rack = |p: &str| racks.iter().find(|(n, _)| n == p).unwrap().1.clone();
    assert_eq!(rack("p2"), rack("p0"));
    assert_eq!(rack("p3"), rack("p1"));
    // Without the offset, indexes 1..4 give rank 4 past the size: arrival order (3, 1, 4, 2).
    let racks = racks_with_offset(1, None).unwrap();
    let rack = |p: &str| racks.iter().find(|(n, _)| n == p).unwrap().1.clone();
    assert_eq!(rack("p3"), rack("p1"));
    assert_eq!(rack("p4"), rack("p2"));
}

#[test]
fn an_offset_that_does_not_parse_places_nothing() {
    // Kueue's topology_ungater_test "ranks: support rank-based ordering for kubeflow with
    // invalid offset annotation - for all Pods": the ungater fails and no pod is ungated.
    let err = racks_with_offset(0, Some("invalid")).unwrap_err();
    assert!(err.message.contains("failed to parse offset annotation"), "{}", err.message);
    assert!(err.message.contains("kueue.x-k8s.io/pod-index-offset"), "{}", err.message);
    assert!(err.message.contains("\"invalid\""), "{}", err.message);
}

#[test]
fn placing_order_with_a_negative_offset() {
    let list: Vec<Arc<PodInfo>> = [1, 0].iter().map(|&i| pod_of(indexed_pod(i))).collect();
    assert_eq!(placing_order(&list, -1, 3), vec![1, 0]);
    assert_eq!(placing_order(&list, -1, 2), vec![0, 1], "index 1 is rank 2, past the size");
    assert_eq!(placing_order(&list, i64::MIN, 2), vec![0, 1]);
}

/// Four pods arriving in the order 2, 0, 3, 1 whose index is read from `labels(i)` (and
/// `annotations(i)`): the placing order when every index reads.
fn order_by(labels: impl Fn(usize) -> Value, annotations: impl Fn(usize) -> Value) -> Vec<usize> {
    let list: Vec<Arc<PodInfo>> = [2, 0, 3, 1]
        .iter()
        .map(|&i| {
            let mut v = pod_value(&format!("p{i}"), "pg", "1");
            v["metadata"]["labels"] = labels(i);
            v["metadata"]["annotations"] = annotations(i);
            pod_of(v)
        })
        .collect();
    placing_order(&list, 0, 4)
}

#[test]
fn the_pod_group_pod_index_label_orders_plain_pods() {
    use placer_api::annotations::{POD_GROUP_POD_INDEX, POD_GROUP_POD_INDEX_LABEL};
    let none = |_| json!({});
    assert_eq!(order_by(|i| json!({POD_GROUP_POD_INDEX: i.to_string()}), none), vec![1, 3, 0, 2]);
    // It comes before the completion index.
    assert_eq!(
        order_by(
            |i| json!({POD_GROUP_POD_INDEX: i.to_string(), JOB_COMPLETION_INDEX: (3 - i).to_string()}),
            none
        ),
        vec![1, 3, 0, 2]
    );
    // The annotation names a custom label; it wins over the pod-group-pod-index label.
    assert_eq!(
        order_by(
            |i| json!({"example.com/rank": i.to_string(), POD_GROUP_POD_INDEX: (3 - i).to_string()}),
            |_| json!({POD_GROUP_POD_INDEX_LABEL: "example.com/rank"})
        ),
        vec![1, 3, 0, 2]
    );
    // A named label that is missing leaves the pod without an index (Kueue copies ""):
    // arrival order.
    assert_eq!(
        order_by(
            |i| json!({POD_GROUP_POD_INDEX: i.to_string()}),
            |_| json!({POD_GROUP_POD_INDEX_LABEL: "x/y"})
        ),
        vec![0, 1, 2, 3]
    );
    // Values read as Go's ParseUint: no sign, no spaces.
    assert_eq!(order_by(|i| json!({POD_GROUP_POD_INDEX: format!("+{i}")}), none), vec![0, 1, 2, 3]);
    assert_eq!(order_by(|i| json!({POD_GROUP_POD_INDEX: format!(" {i}")}), none), vec![0, 1, 2, 3]);
    assert_eq!(order_by(|i| json!({POD_GROUP_POD_INDEX: format!("00{i}")}), none), vec![1, 3, 0, 2]);
}

#[test]
fn a_plan_broken_by_anti_affinity_is_replaced_not_bound() {
    // One host of 4 and two hosts of 1 in a rack; pods refuse to share a host. The counted
    // plan (BestFit: all three on the big host) fails the inter-pod anti-affinity filter;
    // the host is capped at the one pod it took and the next plan puts one pod per host.
    let mut snap = rack(&[4, 1, 1]);
    let list: Vec<Arc<PodInfo>> = (0..3)
        .map(|i| {
            let mut v = pod_value(&format!("p{i}"), "pg", "1");
            v["metadata"]["labels"] = json!({"app": "x"});
            v["spec"]["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": HOST, "labelSelector": {"matchLabels": {"app": "x"}}}
            ]}});
            pod_of(v)
        })
        .collect();
    let c = cycle_of(group_of("pg", Some(3), &[], Some(RACK)), list);
    let out = solve(&mut snap, &config(&[RACK, HOST], &[]), &[&c]).unwrap();
    let m = out[0].as_ref().unwrap();
    assert_eq!(per_node(&snap, m), counts(&[("x1", 1), ("x2", 1), ("x3", 1)]));

    // Four such pods cannot be placed: a clear failure after the bounded retries.
    let list: Vec<Arc<PodInfo>> = (0..4)
        .map(|i| {
            let mut v = pod_value(&format!("q{i}"), "pg", "1");
            v["metadata"]["labels"] = json!({"app": "x"});
            v["spec"]["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": HOST, "labelSelector": {"matchLabels": {"app": "x"}}}
            ]}});
            pod_of(v)
        })
        .collect();
    let c = cycle_of(group_of("pg", Some(4), &[], Some(RACK)), list);
    let err = solve(&mut snap, &config(&[RACK, HOST], &[]), &[&c]).unwrap_err();
    assert!(err.message.starts_with("topology \"default\" allows to fit only 3 out of 4"), "{}", err.message);
    assert!(err.message.contains("earlier plans failed the pod-level filters"), "{}", err.message);
}

#[test]
fn bucket_leaves_place_pods_on_the_nodes_of_the_bucket() {
    // Lowest level is the rack: r1 pools two nodes of 2.
    let mut snap = Snapshot::new();
    for (n, r, c) in [("a1", "r1", 2), ("a2", "r1", 2), ("b1", "r2", 3)] {
        snap.upsert_node(node(n, r, c));
    }
    let c = cycle_of(group_of("pg", Some(4), &[], Some(RACK)), pods("pg", 4, "1"));
    let out = solve(&mut snap, &config(&[RACK], &[]), &[&c]).unwrap();
    let m = out[0].as_ref().unwrap();
    assert_eq!(per_node(&snap, m), counts(&[("a1", 2), ("a2", 2)]));
    assert_eq!(m.topology_assignment.levels, [RACK]);
    let decoded = m.topology_assignment.decode().unwrap();
    assert_eq!(decoded.len(), 1);
    assert_eq!((decoded[0].values.clone(), decoded[0].count), (vec!["r1".to_string()], 4));
}

#[test]
fn not_ready_unschedulable_and_unlabelled_nodes_are_not_in_the_topology() {
    let mut snap = Snapshot::new();
    let mut n: Node = serde_json::from_value(json!({
        "metadata": {"name": "x1", "labels": {RACK: "r1", HOST: "x1"}},
        "spec": {"unschedulable": true},
        "status": {"allocatable": {"cpu": "8", "pods": "110"}}
    }))
    .unwrap();
    snap.upsert_node(NodeStatic::from_node(Arc::new(n.clone())).unwrap());
    n.metadata.name = Some("x2".into());
    n.spec = None;
    n.status.as_mut().unwrap().conditions =
        Some(vec![serde_json::from_value(json!({"type": "Ready", "status": "False"})).unwrap()]);
    snap.upsert_node(NodeStatic::from_node(Arc::new(n.clone())).unwrap());
    n.metadata.name = Some("x3".into());
    n.status.as_mut().unwrap().conditions = None;
    n.metadata.labels = Some([(HOST.to_string(), "x3".to_string())].into());
    snap.upsert_node(NodeStatic::from_node(Arc::new(n)).unwrap());
    let c = cycle_of(group_of("pg", Some(1), &[], Some(RACK)), pods("pg", 1, "1"));
    let err = solve(&mut snap, &config(&[RACK, HOST], &[]), &[&c]).unwrap_err();
    assert_eq!(err.message, "no topology domains at level: rack");
}

#[test]
fn the_tree_is_rebuilt_only_when_nodes_change() {
    let cfg = config(&[RACK, HOST], &[]);
    let fw = crate::plugins::pod_framework(&cfg);
    let mut cache = TasCache::new(&cfg);
    let mut snap = rack(&[2, 2]);
    let c = cycle_of(group_of("pg", Some(1), &[], Some(RACK)), pods("pg", 1, "1"));
    place_unit(&fw, &cfg, &mut snap, &mut cache, &[&c]).unwrap();
    snap.upsert_pod(pod_of({
        let mut v = pod_value("bound", "other", "1");
        v["spec"]["nodeName"] = json!("x1");
        v
    }));
    place_unit(&fw, &cfg, &mut snap, &mut cache, &[&c]).unwrap();
    assert_eq!(cache.tree_builds(), 1, "pods moving keep the tree");
    snap.upsert_node(node("x3", "r2", 1));
    place_unit(&fw, &cfg, &mut snap, &mut cache, &[&c]).unwrap();
    assert_eq!(cache.tree_builds(), 2, "a new node rebuilds it");
}

#[test]
fn scheduled_members_pin_the_required_domain() {
    let mut snap = Snapshot::new();
    for (n, r, c) in [("a1", "r1", 1), ("b1", "r2", 4)] {
        snap.upsert_node(node(n, r, c));
    }
    let mut bound = pod_value("pg-0", "pg", "1");
    bound["spec"]["nodeName"] = json!("a1");
    let bound = pod_of(bound);
    snap.upsert_pod(bound.clone());
    let pending = pods("pg", 2, "1").split_off(1);
    let c = GroupCycle::new(
        group_of("pg", Some(2), &[], Some(RACK)),
        true,
        pending.into_iter().map(|p| (0, p)).collect(),
        vec![(bound.key.clone(), snap.node_id("a1"))],
    );
    // r1 is full: the new member may not go to r2.
    let err = solve(&mut snap, &config(&[RACK, HOST], &[]), &[&c]).unwrap_err();
    assert!(err.message.contains("doesn't allow to fit any of 1 pod(s)"), "{}", err.message);
}
