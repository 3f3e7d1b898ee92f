//! Engine behaviour as the scenarios describe it: events in, decisions out.

use super::*;
use crate::observer::NoopObserver;
use crate::queue::QueueState;
use proptest::prelude::*;
use serde_json::json;

fn node(name: &str, cpu: &str, labels: serde_json::Value) -> ClusterEvent {
    let n: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": cpu, "pods": "32"}}
    }))
    .unwrap();
    ClusterEvent::NodeUpserted(Arc::new(n))
}

fn pod_json(name: &str, cpu: &str, group: Option<&str>) -> serde_json::Value {
    let mut spec =
        json!({"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]});
    if let Some(g) = group {
        spec["schedulingGroup"] = json!({"podGroupName": g});
    }
    json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")}, "spec": spec})
}

fn pod(name: &str, cpu: &str, group: Option<&str>) -> ClusterEvent {
    ClusterEvent::PodUpserted(Arc::new(serde_json::from_value(pod_json(name, cpu, group)).unwrap()))
}

fn bound(name: &str, cpu: &str, group: Option<&str>, node: &str) -> ClusterEvent {
    let mut v = pod_json(name, cpu, group);
    v["spec"]["nodeName"] = json!(node);
    ClusterEvent::PodUpserted(Arc::new(serde_json::from_value(v).unwrap()))
}

fn pod_group(name: &str, min: Option<i32>, key: Option<&str>) -> ClusterEvent {
    let mut spec = match min {
        Some(m) => json!({"schedulingPolicy": {"gang": {"minCount": m}}}),
        None => json!({"schedulingPolicy": {"basic": {}}}),
    };
    if let Some(k) = key {
        spec["schedulingConstraints"] = json!({"topology": [{"key": k}]});
    }
    let pg: PodGroup =
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec}))
            .unwrap();
    ClusterEvent::PodGroupUpserted(Arc::new(pg))
}

fn key(name: &str) -> PodKey {
    PodKey::new("default", name)
}

/// Every binding of a large gang adds up to three decisions: the rare large payloads
/// (claim writes, volume writes, node-failure evictions) are boxed so that they do not set
/// the size of all of them (it was 232 bytes).
#[test]
fn a_decision_is_no_larger_than_a_pod_key_and_two_strings_and_a_flag() {
    let (key, string) = (std::mem::size_of::<PodKey>(), std::mem::size_of::<String>());
    assert!(std::mem::size_of::<Decision>() <= key + 2 * string + 16, "{}", std::mem::size_of::<Decision>());
}

fn engine() -> Engine {
    Engine::new(SchedulerConfig {
        pod_initial_backoff_ms: 0,
        pod_max_backoff_ms: 0,
        ..SchedulerConfig::default()
    })
}

fn apply_all(e: &mut Engine, events: Vec<ClusterEvent>) {
    for ev in events {
        e.apply(ev, 0);
    }
}

/// The pods `decisions` bind, in order.
pub(super) fn bound_keys(decisions: &[Decision]) -> Vec<&PodKey> {
    decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Bind { pod, .. } => Some(pod),
            _ => None,
        })
        .collect()
}

/// Binds as a store would: every `Bind` comes back as a bound pod.
pub(super) fn confirm(e: &mut Engine, decisions: &[Decision]) {
    for d in decisions {
        if let Decision::Bind { pod, node, .. } = d {
            let mut p = (**e.pod_object(pod).unwrap()).clone();
            if let Some(spec) = p.spec.as_mut() {
                spec.node_name = Some(node.clone());
            }
            e.apply(ClusterEvent::PodUpserted(Arc::new(p)), 0);
        }
    }
}

fn binds(decisions: &[Decision]) -> Vec<(String, String)> {
    decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Bind { pod, node, .. } => Some((pod.name.to_string(), node.clone())),
            _ => None,
        })
        .collect()
}

fn conditions(decisions: &[Decision]) -> Vec<(bool, String)> {
    decisions
        .iter()
        .filter_map(|d| match d {
            Decision::PodGroupCondition { status, reason, .. } => Some((*status, reason.clone())),
            _ => None,
        })
        .collect()
}

fn run(e: &mut Engine) -> Vec<Decision> {
    let d = e.schedule(0, &mut NoopObserver);
    confirm(e, &d);
    d
}

#[test]
fn single_pod_binds_and_holds_capacity_until_confirmed() {
    let mut e = engine();
    apply_all(&mut e, vec![node("n1", "2", json!({})), pod("a", "2", None), pod("b", "1", None)]);
    let d = e.schedule(0, &mut NoopObserver);
    assert_eq!(binds(&d), [("a".to_string(), "n1".to_string())]);
    assert!(e.is_assumed(&key("a")));
    assert!(d.iter().any(|x| matches!(x, Decision::PodUnschedulable { pod, message, .. }
        if &*pod.name == "b" && message == "0/1 nodes are available: 1 Insufficient cpu. \
            preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")));
    confirm(&mut e, &d);
    assert!(!e.is_assumed(&key("a")));
    assert_eq!(e.snapshot().node(e.snapshot().node_id("n1").unwrap()).requested.cpu, 2000);
}

#[test]
fn gang_waits_for_quorum_then_schedules_together() {
    let mut e = engine();
    apply_all(
        &mut e,
        vec![
            node("n", "4", json!({})),
            pod_group("pg", Some(3), None),
            pod("p1", "1", Some("pg")),
            pod("p2", "1", Some("pg")),
        ],
    );
    assert!(run(&mut e).is_empty(), "two of three members: held in PreEnqueue, nothing written");
    assert_eq!(e.queue().gated().len(), 2);
    e.apply(pod("p3", "1", Some("pg")), 0);
    let d = run(&mut e);
    assert_eq!(binds(&d).len(), 3);
    assert_eq!(conditions(&d), [(true, "Scheduled".to_string())]);
}

#[test]
fn gang_members_wait_for_their_pod_group() {
    let mut e = engine();
    apply_all(
        &mut e,
        vec![node("n", "4", json!({})), pod("p1", "1", Some("pg")), pod("p2", "1", Some("pg"))],
    );
    assert!(run(&mut e).is_empty());
    assert_eq!(e.queue().gated()[0].1, "waiting for pod's pod group \"pg\" to appear in scheduling queue");
    e.apply(pod_group("pg", Some(2), None), 0);
    assert_eq!(binds(&run(&mut e)).len(), 2);
}

#[test]
fn gang_is_all_or_nothing_and_retries_when_capacity_frees() {
    let mut e = engine();
    apply_all(
        &mut e,
        vec![node("n", "4", json!({})), bound("blocker", "2", None, "n"), pod_group("pg", Some(3), None)],
    );
    for i in 1..=3 {
        e.apply(pod(&format!("p{i}"), "1", Some("pg")), 0);
    }
    let d = run(&mut e);
    assert!(binds(&d).is_empty(), "2 of 3 fit: nothing binds");
    assert_eq!(conditions(&d), [(false, "Unschedulable".to_string())]);
    let msg = d
        .iter()
        .find_map(|x| match x {
            Decision::PodGroupCondition { message, .. } => Some(message.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(msg, "2/3 pods fit: 0/1 nodes are available: 1 Insufficient cpu.");
    e.apply(ClusterEvent::PodDeleted(key("blocker")), 0);
    let d = run(&mut e);
    assert_eq!(binds(&d).len(), 3);
    assert_eq!(conditions(&d), [(true, "Scheduled".to_string())]);
}

#[test]
fn unchanged_condition_is_not_written_twice() {
    let mut e = engine();
    apply_all(&mut e, vec![node("n", "1", json!({})), pod_group("pg", Some(2), None)]);
    apply_all(&mut e, vec![pod("p1", "1", Some("pg")), pod("p2", "1", Some("pg"))]);
    assert_eq!(conditions(&run(&mut e)).len(), 1);
    e.apply(node("n", "1", json!({"new": "label"})), 0);
    let d = run(&mut e);
    assert_eq!(d.iter().filter(|x| matches!(x, Decision::PodUnschedulable { .. })).count(), 2, "retried");
    assert!(conditions(&d).is_empty(), "same condition: no write");
}

#[test]
fn bound_members_count_and_scheduled_condition_never_regresses() {
    // Scenario 033: minCount 3 of 4; the fourth follows when capacity frees.
    let mut e = engine();
    apply_all(
        &mut e,
        vec![node("n", "4", json!({})), bound("small", "1", None, "n"), pod_group("pg", Some(3), None)],
    );
    for i in 1..=4 {
        e.apply(pod(&format!("p{i}"), "1", Some("pg")), 0);
    }
    let d = run(&mut e);
    assert_eq!(binds(&d).len(), 3);
    assert_eq!(conditions(&d), [(true, "Scheduled".to_string())]);
    // The fourth pod fails again on an unrelated node change: the group stays Scheduled.
    e.apply(node("other", "0", json!({})), 0);
    let d = run(&mut e);
    assert!(binds(&d).is_empty());
    assert!(conditions(&d).is_empty(), "True is never set back to False");
    e.apply(ClusterEvent::PodDeleted(key("small")), 0);
    assert_eq!(binds(&run(&mut e)), [("p4".to_string(), "n".to_string())]);
}

#[test]
fn basic_group_binds_what_fits() {
    let mut e = engine();
    apply_all(
        &mut e,
        vec![node("n", "4", json!({})), bound("blocker", "2", None, "n"), pod_group("pg", None, None)],
    );
    for i in 1..=3 {
        e.apply(pod(&format!("p{i}"), "1", Some("pg")), 0);
    }
    let d = run(&mut e);
    assert_eq!(binds(&d).len(), 2);
    assert!(d.iter().any(|x| matches!(x, Decision::PodUnschedulable { pod, .. } if &*pod.name == "p3")));
}

#[test]
fn competing_gangs_do_not_deadlock() {
    // Scenario 034: the gang whose member arrived first wins whole.
    let mut e = engine();
    apply_all(
        &mut e,
        vec![node("n", "4", json!({})), pod_group("pg1", Some(3), None), pod_group("pg2", Some(3), None)],
    );
    for (name, g) in
        [("o3", "pg2"), ("p3", "pg1"), ("o2", "pg2"), ("p2", "pg1"), ("o1", "pg2"), ("p1", "pg1")]
    {
        e.apply(pod(name, "1", Some(g)), 0);
    }
    let d = run(&mut e);
    let mut names: Vec<String> = binds(&d).into_iter().map(|(p, _)| p).collect();
    names.sort();
    assert_eq!(names, ["o1", "o2", "o3"]);
}

#[test]
fn topology_gang_lands_in_one_rack_and_later_members_join_it() {
    // Scenario 011.
    let mut e = engine();
    apply_all(
        &mut e,
        vec![
            node("n1", "2", json!({"rack": "rack-1"})),
            node("n2", "2", json!({"rack": "rack-1"})),
            node("n3", "2", json!({"rack": "rack-1"})),
            node("n4", "2", json!({"rack": "rack-2"})),
            node("n5", "2", json!({"rack": "rack-2"})),
            node("n6", "2", json!({"rack": "rack-3"})),
            pod_group("pg", Some(3), Some("rack")),
        ],
    );
    for i in 1..=3 {
        e.apply(pod(&format!("p{i}"), "1", Some("pg")), 0);
    }
    let d = run(&mut e);
    let b = binds(&d);
    assert_eq!(b.len(), 3);
    assert!(b.iter().all(|(_, n)| n == "n4" || n == "n5"), "{b:?}");
    assert_eq!(
        d.iter().filter(|x| matches!(x, Decision::Nominate { node: Some(_), .. })).count(),
        3,
        "placement pods are prebound via nominatedNodeName"
    );
    e.apply(pod("p4", "1", Some("pg")), 0);
    let b = binds(&run(&mut e));
    assert_eq!(b.len(), 1);
    assert!(b[0].1 == "n4" || b[0].1 == "n5");
    e.apply(pod("p5", "1", Some("pg")), 0);
    let d = run(&mut e);
    assert!(binds(&d).is_empty(), "rack-2 is full; other racks are not allowed");
}

#[test]
fn members_in_two_domains_fail_with_a_scheduler_error() {
    // Scenario 029.
    let mut e = engine();
    apply_all(
        &mut e,
        vec![
            node("n1", "4", json!({"rack": "r1"})),
            node("n2", "4", json!({"rack": "r2"})),
            bound("a1", "1", Some("pg"), "n1"),
            bound("a2", "1", Some("pg"), "n2"),
            pod_group("pg", None, Some("rack")),
            pod("p3", "1", Some("pg")),
        ],
    );
    let d = run(&mut e);
    assert!(binds(&d).is_empty());
    assert!(d.iter().any(|x| matches!(x, Decision::PodUnschedulable { reason, message, .. }
        if reason == "SchedulerError" && message == "more than 1 domain found for pod group: r1, r2")));
}

#[test]
fn pods_of_other_schedulers_use_capacity_but_are_never_queued() {
    let mut e = engine();
    let mut other = pod_json("other", "1", None);
    other["spec"]["schedulerName"] = json!("someone-else");
    apply_all(
        &mut e,
        vec![
            node("n", "1", json!({})),
            ClusterEvent::PodUpserted(Arc::new(serde_json::from_value(other.clone()).unwrap())),
        ],
    );
    assert!(e.queue().is_empty());
    other["spec"]["nodeName"] = json!("n");
    e.apply(ClusterEvent::PodUpserted(Arc::new(serde_json::from_value(other).unwrap())), 0);
    e.apply(pod("mine", "1", None), 0);
    assert!(binds(&run(&mut e)).is_empty());
}

#[test]
fn failed_binding_forgets_the_assumption_and_retries() {
    let mut e = engine();
    apply_all(&mut e, vec![node("n", "1", json!({})), pod("a", "1", None)]);
    let d = e.schedule(0, &mut NoopObserver);
    assert_eq!(binds(&d).len(), 1);
    e.binding_failed(&key("a"), 0);
    assert!(!e.is_assumed(&key("a")));
    assert_eq!(e.snapshot().node(e.snapshot().node_id("n").unwrap()).requested.cpu, 0);
    assert_eq!(binds(&e.schedule(0, &mut NoopObserver)).len(), 1);
}

#[test]
fn status_update_before_the_binding_keeps_the_assumption() {
    let mut e = engine();
    apply_all(&mut e, vec![node("n", "1", json!({})), pod("a", "1", None), pod("b", "1", None)]);
    let d = e.schedule(0, &mut NoopObserver);
    assert_eq!(binds(&d).len(), 1);
    // The store echoes an older unbound version of `a` (e.g. a status write).
    e.apply(pod("a", "1", None), 0);
    assert!(e.is_assumed(&key("a")));
    assert!(!e.queue().contains(&key("a")));
}

#[test]
fn higher_priority_pods_go_first_with_priority_classes() {
    let mut e = engine();
    let pc: PriorityClass =
        serde_json::from_value(json!({"metadata": {"name": "high"}, "value": 1000})).unwrap();
    let dflt: PriorityClass =
        serde_json::from_value(json!({"metadata": {"name": "dflt"}, "value": 5, "globalDefault": true}))
            .unwrap();
    e.apply(ClusterEvent::PriorityClassUpserted(Arc::new(pc)), 0);
    e.apply(ClusterEvent::PriorityClassUpserted(Arc::new(dflt)), 0);
    let mut high = pod_json("high", "1", None);
    high["spec"]["priorityClassName"] = json!("high");
    apply_all(
        &mut e,
        vec![
            node("n", "1", json!({})),
            pod("low", "1", None),
            ClusterEvent::PodUpserted(Arc::new(serde_json::from_value(high).unwrap())),
        ],
    );
    assert_eq!(e.pod(&key("low")).unwrap().priority, 5, "global default");
    assert_eq!(binds(&run(&mut e)), [("high".to_string(), "n".to_string())]);
}

#[test]
fn backoff_delays_a_retry_after_an_event() {
    let mut e = Engine::new(SchedulerConfig {
        pod_initial_backoff_ms: 1000,
        pod_max_backoff_ms: 4000,
        ..Default::default()
    });
    apply_all(&mut e, vec![node("n", "1", json!({})), bound("x", "1", None, "n"), pod("a", "1", None)]);
    assert!(binds(&e.schedule(0, &mut NoopObserver)).is_empty());
    assert_eq!(e.next_wakeup_ms(), None, "waits for an event");
    e.apply(ClusterEvent::PodDeleted(key("x")), 10);
    assert_eq!(e.next_wakeup_ms(), Some(1000));
    assert!(e.schedule(999, &mut NoopObserver).is_empty());
    assert_eq!(binds(&e.schedule(1000, &mut NoopObserver)).len(), 1);
}

#[test]
fn scheduling_gates_hold_a_pod_until_removed() {
    let mut e = engine();
    let mut gated = pod_json("g", "1", None);
    gated["spec"]["schedulingGates"] = json!([{"name": "wait"}]);
    apply_all(
        &mut e,
        vec![
            node("n", "1", json!({})),
            ClusterEvent::PodUpserted(Arc::new(serde_json::from_value(gated).unwrap())),
        ],
    );
    assert!(run(&mut e).is_empty());
    assert_eq!(e.queue().gated()[0].1, "waiting for scheduling gates: [wait]");
    e.apply(pod("g", "1", None), 0);
    assert_eq!(binds(&run(&mut e)).len(), 1);
}

fn scenario_events(nodes: &[(u8, u8)], pods: &[(u8, u8, u8)], gangs: &[(u8, bool)]) -> Vec<ClusterEvent> {
    let mut ev = Vec::new();
    for (i, (cpu, rack)) in nodes.iter().enumerate() {
        ev.push(node(&format!("n{i}"), &format!("{}", cpu % 5), json!({"rack": format!("r{}", rack % 3)})));
    }
    for (g, (min, constrained)) in gangs.iter().enumerate() {
        ev.push(pod_group(
            &format!("g{g}"),
            Some(i32::from(min % 4) + 1),
            if *constrained { Some("rack") } else { None },
        ));
    }
    for (i, (cpu, g, _)) in pods.iter().enumerate() {
        let group = if gangs.is_empty() || g % 3 == 0 {
            None
        } else {
            Some(format!("g{}", usize::from(*g) % gangs.len()))
        };
        ev.push(pod(&format!("p{i}"), &format!("{}", cpu % 3 + 1), group.as_deref()));
    }
    ev
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Identical inputs give identical decisions; no node is overcommitted; a gang binds at
    /// least minCount members (counting bound ones) or none; members of a constrained group
    /// share one rack.
    #[test]
    fn engine_decisions_are_deterministic_and_safe(
        nodes in proptest::collection::vec((0u8..5, 0u8..3), 1..6),
        pods in proptest::collection::vec((0u8..3, 0u8..6, 0u8..1), 0..10),
        gangs in proptest::collection::vec((0u8..4, any::<bool>()), 0..3),
    ) {
        let events = scenario_events(&nodes, &pods, &gangs);
        let mut a = engine();
        let mut b = engine();
        apply_all(&mut a, events.clone());
        apply_all(&mut b, events.clone());
        let da = run(&mut a);
        let db = run(&mut b);
        prop_assert_eq!(&da, &db);
        for n in a.snapshot().nodes() {
            prop_assert!(n.requested.cpu <= n.info.allocatable.cpu);
        }
        for (g, (min, constrained)) in gangs.iter().enumerate() {
            let gname = format!("g{g}");
            let members: Vec<&PodInfo> = a.pods.values().filter(|p| p.group_name() == Some(gname.as_str())).map(|p| p.as_ref()).collect();
            let bound: Vec<&PodInfo> = members.iter().copied().filter(|p| p.node_name.is_some()).collect();
            let min = usize::from(min % 4) + 1;
            prop_assert!(bound.is_empty() || bound.len() >= min, "gang {} bound {} < min {}", gname, bound.len(), min);
            if *constrained {
                let mut racks: Vec<String> = bound.iter().map(|p| {
                    let n = a.snapshot().node(a.snapshot().node_id(p.node_name.as_deref().unwrap_or("")).unwrap());
                    n.info.label("rack").unwrap_or("").to_string()
                }).collect();
                racks.sort();
                racks.dedup();
                prop_assert!(racks.len() <= 1);
            }
        }
    }
}

/// Timing probe for the benchmark target (one 256-pod gang with a rack constraint on 5,000
/// nodes in 250 racks). Run with `cargo test --release -p placer-engine -- --ignored probe`.
#[test]
#[ignore]
fn probe_large_gang_timing() {
    let mut e = engine();
    for r in 0..250 {
        for h in 0..20 {
            let ev = node(&format!("n-{r:03}-{h:02}"), "64", json!({"rack": format!("r{r:03}")}));
            e.apply(ev, 0);
        }
    }
    e.apply(pod_group("big", Some(256), Some("rack")), 0);
    for i in 0..256 {
        e.apply(pod(&format!("w{i:03}"), "4", Some("big")), 0);
    }
    let start = std::time::Instant::now();
    let d = e.schedule(0, &mut NoopObserver);
    let took = start.elapsed();
    assert_eq!(binds(&d).len(), 256);
    eprintln!("256-pod gang on 5000 nodes / 250 racks: {took:?}");
}

/// A restarted engine, KEP-5732 placements (no topology assignment to find them in):
/// where a gang lost pods it learns from the PodGroup's `placer.dev/unhealthy-nodes`
/// annotation, so `evictGangOnFailedNode` still evicts a gang whose replacement does not
/// fit next to its survivor. Without the annotation it cannot know and the replacement
/// waits.
#[test]
fn a_restarted_engine_reads_the_unhealthy_nodes_published_on_the_group() {
    for published in [true, false] {
        let mut e = Engine::new(SchedulerConfig {
            pod_initial_backoff_ms: 0,
            pod_max_backoff_ms: 0,
            evict_gang_on_failed_node: Some(true),
            ..SchedulerConfig::default()
        });
        // r1-a, where w0 ran, is gone; the survivor w1 fills r1-b.
        for (name, rack) in [("r1-b", "r1"), ("r2-a", "r2"), ("r2-b", "r2")] {
            e.apply(node(name, "1", json!({"rack": rack})), 0);
        }
        let mut pg = json!({"metadata": {"name": "pg", "namespace": "default"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                     "schedulingConstraints": {"topology": [{"key": "rack"}]}}});
        if published {
            pg["metadata"]["annotations"] =
                json!({placer_api::annotations::UNHEALTHY_NODES: "[{\"name\":\"r1-a\"}]"});
        }
        e.apply(ClusterEvent::PodGroupUpserted(Arc::new(serde_json::from_value(pg).unwrap())), 0);
        apply_all(&mut e, vec![bound("w1", "1", Some("pg"), "r1-b"), pod("w0", "1", Some("pg"))]);
        let d = run(&mut e);
        let evicted = d.iter().find_map(|d| match d {
            Decision::EvictForNodeFailure { pods, failed_nodes, .. } => {
                Some((pods.clone(), failed_nodes.clone()))
            }
            _ => None,
        });
        if published {
            let (pods, failed) = evicted.expect("the gang is evicted");
            assert_eq!(*pods, [(key("w1"), "uid-w1".to_string())]);
            assert_eq!(*failed, ["r1-a".to_string()]);
            // Evicted: the annotation is removed (Kueue resets unhealthyNodes on eviction).
            assert!(d.iter().any(|d| matches!(d,
                Decision::PodGroupAnnotation { key, value: None, .. } if key == placer_api::annotations::UNHEALTHY_NODES)));
        } else {
            assert_eq!(evicted, None, "{d:?}");
            assert!(binds(&d).is_empty());
        }
    }
}

#[test]
fn explain_group_reports_domains_free_capacity_fit_and_shortfall() {
    let mut e = engine();
    apply_all(
        &mut e,
        vec![
            node("a1", "4", json!({"rack": "a"})),
            node("a2", "4", json!({"rack": "a"})),
            node("b1", "4", json!({"rack": "b"})),
            bound("busy", "3", None, "a1"),
            pod_group("pg", Some(3), Some("rack")),
            pod("p0", "2", Some("pg")),
            pod("p1", "2", Some("pg")),
            pod("p2", "2", Some("pg")),
            pod_group("q", Some(4), None),
            pod("q0", "1", Some("q")),
            pod("q1", "1", Some("q")),
            pod("q2", "1", Some("q")),
        ],
    );
    let _ = run(&mut e);
    let x = e.explain_group(&GroupKey::new("default", "pg")).expect("known group");
    assert_eq!((x.gang, x.min_count, x.members, x.scheduled, x.missing, x.needed), (true, 3, 3, 0, 0, 3));
    assert_eq!(x.level.as_deref(), Some("rack"));
    // Rack a: 1 + 4 cores free, 2 pods fit (none on a1); it lacks 1 core for 3 pods of 2.
    // Rack b: 4 free, 2 fit, lacks 2.
    let a = &x.domains[0];
    assert_eq!((a.value.as_str(), a.nodes, a.fits), ("a", 2, 2));
    assert!(a.free.contains(&("cpu".to_string(), 5_000)), "{:?}", a.free);
    assert_eq!(a.shortfall, vec![("cpu".to_string(), 1_000)]);
    let b = &x.domains[1];
    assert_eq!((b.value.as_str(), b.fits), ("b", 2));
    assert_eq!(b.shortfall, vec![("cpu".to_string(), 2_000)]);
    let f = x.filters.expect("filter summary");
    assert_eq!((f.nodes, f.feasible), (3, 2));
    assert_eq!(f.reasons, vec![("Insufficient cpu".to_string(), 1)]);

    let q = e.explain_group(&GroupKey::new("default", "q")).expect("known group");
    assert_eq!((q.missing, q.members, q.level), (1, 3, None));
    assert!(e.explain_group(&GroupKey::new("default", "nope")).is_none());
}

#[test]
fn explain_group_scores_the_placements_as_the_cycle_did_and_changes_nothing() {
    let mut e = engine();
    apply_all(
        &mut e,
        vec![
            node("a1", "4", json!({"rack": "a"})),
            node("a2", "4", json!({"rack": "a"})),
            node("b1", "4", json!({"rack": "b"})),
            node("b2", "4", json!({"rack": "b"})),
            node("b3", "4", json!({"rack": "b"})),
            pod_group("pg", Some(2), Some("rack")),
            pod("p0", "2", Some("pg")),
            pod("p1", "2", Some("pg")),
        ],
    );
    let d = run(&mut e);
    let rack_of = |n: &str| if n.starts_with('a') { "a" } else { "b" };
    let used: Vec<&str> = binds(&d).iter().map(|(_, n)| rack_of(n)).collect();
    assert_eq!(used.len(), 2, "{d:?}");
    let x = e.explain_group(&GroupKey::new("default", "pg")).expect("known group");
    assert!(x.placements_as_decided, "every member is bound: re-decided without them");
    let p = x.placements.clone().expect("a constrained group has placements");
    let names: Vec<&str> = p.plugins.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["PodGroupPodsCount", "NodeResourcesFit"]);
    let winner = p.candidates.iter().find(|c| c.winner).expect("a winner");
    assert_eq!(winner.name, used[0], "the explanation's winner is where the cycle put the group");
    for c in &p.candidates {
        assert!(c.feasible && c.pods == Some(2), "{c:?}");
        let total: i64 = c.normalized.iter().zip(&p.plugins).map(|(s, (_, w))| s * w).sum();
        assert_eq!(c.total, Some(total), "the total is the weighted sum: {c:?}");
    }
    // Read-only: asked again, the same answer; the group's pods are still bound.
    assert_eq!(e.explain_group(&GroupKey::new("default", "pg")).map(|y| y.placements), Some(Some(p)));
    assert_eq!(e.explain_group(&GroupKey::new("default", "pg")).map(|y| y.scheduled), Some(2));
}

/// The pod as the store returns it after the scheduler wrote `PodScheduled=False`.
fn with_unschedulable_condition(e: &Engine, name: &str, message: &str) -> ClusterEvent {
    let mut p = (**e.sources.get(&key(name)).expect("a pending pod's object is kept")).clone();
    p.metadata.resource_version = Some(format!("rv-{message}"));
    p.status.get_or_insert_with(Default::default).conditions =
        Some(vec![placer_api::k8s::api::core::v1::PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some("Unschedulable".into()),
            message: Some(message.into()),
            ..Default::default()
        }]);
    ClusterEvent::PodUpserted(Arc::new(p))
}

#[test]
fn a_failed_pods_condition_write_keeps_its_record_and_queue_entry() {
    let mut e = engine();
    apply_all(&mut e, vec![node("n1", "1", json!({})), pod("big", "2", None)]);
    let out = e.schedule(0, &mut NoopObserver);
    assert!(out.iter().any(|d| matches!(d, Decision::PodUnschedulable { .. })));
    let record = e.pod(&key("big")).unwrap().clone();
    let state = e.queue().state(&key("big")).cloned();
    assert_eq!(state, Some(QueueState::Unschedulable));

    // Only the condition changed: the same record, the same queue state, the new object.
    e.apply(with_unschedulable_condition(&e, "big", "0/1 nodes are available"), 0);
    assert!(Arc::ptr_eq(e.pod(&key("big")).unwrap(), &record), "the record is kept");
    assert_eq!(e.queue().state(&key("big")).cloned(), state);
    let kept = e.sources.get(&key("big")).unwrap();
    assert_eq!(kept.metadata.resource_version.as_deref(), Some("rv-0/1 nodes are available"));

    // A label change is read in full (and may move the pod).
    let mut relabelled = (**kept).clone();
    relabelled.metadata.labels = Some([("app".to_string(), "x".to_string())].into());
    e.apply(ClusterEvent::PodUpserted(Arc::new(relabelled)), 0);
    assert!(!Arc::ptr_eq(e.pod(&key("big")).unwrap(), &record), "a spec or label change is read again");
}

#[test]
fn a_condition_write_on_a_gated_member_whose_verdict_changed_is_read_in_full() {
    let mut e = engine();
    apply_all(&mut e, vec![node("n1", "4", json!({})), pod("m1", "1", Some("pg"))]);
    e.schedule(0, &mut NoopObserver);
    assert!(matches!(e.queue().state(&key("m1")), Some(QueueState::Gated { .. })), "no PodGroup yet");
    // The PodGroup appears without the engine hearing of it through a group event (as
    // if its event were still to come): the full path re-files the member with the new
    // verdict, so the shortcut must not apply.
    let ClusterEvent::PodGroupUpserted(pg) = pod_group("pg", None, None) else { unreachable!() };
    let info = crate::model::PodGroupInfo::from_pod_group(pg).unwrap();
    e.groups.entry_mut(&GroupKey::new("default", "pg")).info = Some(Arc::new(info));
    let record = e.pod(&key("m1")).unwrap().clone();
    e.apply(with_unschedulable_condition(&e, "m1", "waiting"), 0);
    assert!(!Arc::ptr_eq(e.pod(&key("m1")).unwrap(), &record));
    assert!(!matches!(e.queue().state(&key("m1")), Some(QueueState::Gated { .. })), "admitted now");
}

#[test]
fn a_condition_write_the_caller_vouches_for_is_taken_only_from_the_version_it_names() {
    let mut e = engine();
    apply_all(&mut e, vec![node("n1", "1", json!({})), pod("big", "2", None)]);
    e.schedule(0, &mut NoopObserver);
    let record = e.pod(&key("big")).unwrap().clone();
    let held = e.sources.get(&key("big")).unwrap().metadata.resource_version.clone().unwrap_or_default();

    // From the version the engine holds: taken as it is, the record kept.
    let ClusterEvent::PodUpserted(written) = with_unschedulable_condition(&e, "big", "0/1 nodes") else {
        unreachable!()
    };
    e.apply_condition_write(written.clone(), &held, 0);
    assert!(Arc::ptr_eq(e.pod(&key("big")).unwrap(), &record), "the record is kept");
    assert!(Arc::ptr_eq(e.sources.get(&key("big")).unwrap(), &written), "the new version is kept");

    // Named from a version the engine does not hold (it missed an update that relabelled
    // the pod): read in full, so the label is seen.
    let mut relabelled = (*written).clone();
    relabelled.metadata.labels = Some([("app".to_string(), "x".to_string())].into());
    relabelled.metadata.resource_version = Some("rv-after-a-missed-update".into());
    e.apply_condition_write(Arc::new(relabelled), "rv-missed", 0);
    assert!(!Arc::ptr_eq(e.pod(&key("big")).unwrap(), &record), "read again");
    assert_eq!(e.pod(&key("big")).unwrap().labels().get("app").map(String::as_str), Some("x"));
}

#[test]
fn a_released_pod_object_is_held_neither_as_the_object_read_nor_as_the_last_read() {
    let mut e = engine();
    let ClusterEvent::PodUpserted(object) = pod("big", "2", None) else { unreachable!() };
    e.apply(ClusterEvent::PodUpserted(object.clone()), 0);
    // Held by this test, the engine's object read, its last read and its test-only copy.
    assert_eq!(Arc::strong_count(&object), 4);
    e.release_pod_object(&key("big")).expect("a pending pod's object is released");
    assert_eq!(Arc::strong_count(&object), 2, "only this test and the test-only copy hold it");
    // The next pod alike is read in full (debug builds check any record read alike), and
    // reads as the first did.
    e.apply(pod("big2", "2", None), 0);
    let (big, big2) = (e.pod(&key("big")).unwrap().clone(), e.pod(&key("big2")).unwrap().clone());
    assert!(!Arc::ptr_eq(&big.view, &big2.view), "not read alike: nothing to read it from");
    assert_eq!(*big.view, *big2.view);
}

#[test]
fn a_released_pod_object_is_taken_back_only_as_the_write_over_the_version_released() {
    let mut e = engine();
    apply_all(&mut e, vec![node("n1", "1", json!({})), pod("big", "2", None)]);
    e.schedule(0, &mut NoopObserver);
    // The version the store holds, with its resourceVersion.
    e.apply(with_unschedulable_condition(&e, "big", "first"), 0);
    let record = e.pod(&key("big")).unwrap().clone();
    let held = e.sources.get(&key("big")).unwrap().metadata.resource_version.clone().expect("versioned");
    let ClusterEvent::PodUpserted(written) = with_unschedulable_condition(&e, "big", "0/1 nodes") else {
        unreachable!()
    };

    // Released: the engine holds no object for the pod until it takes the written one back.
    let released = e.release_pod_object(&key("big")).expect("a pending pod's object is released");
    assert!(!e.sources.contains_key(&key("big")));
    assert!(e.reattach_condition_write(released, &held, &written));
    assert!(Arc::ptr_eq(e.sources.get(&key("big")).unwrap(), &written), "taken back");
    assert!(Arc::ptr_eq(e.pod(&key("big")).unwrap(), &record), "the record is kept");
    assert_eq!(e.queue().state(&key("big")), Some(&QueueState::Unschedulable));

    // Written over a version the engine has not seen (an update it missed): not taken, so
    // the watch's versions are read in full.
    let released = e.release_pod_object(&key("big")).expect("released");
    assert!(!e.reattach_condition_write(released, "a-later-version", &written));
    assert!(!e.sources.contains_key(&key("big")));
    e.apply(ClusterEvent::PodUpserted(written.clone()), 0);
    assert!(Arc::ptr_eq(e.sources.get(&key("big")).unwrap(), &written), "read in full");
    assert_eq!(**e.pod(&key("big")).unwrap(), *record);
    assert_eq!(e.queue().state(&key("big")), Some(&QueueState::Unschedulable));

    // A bound pod has nothing to release.
    apply_all(&mut e, vec![node("n2", "4", json!({}))]);
    let d = e.schedule(60_000, &mut NoopObserver);
    assert_eq!(binds(&d).len(), 1);
    assert!(e.release_pod_object(&key("big")).is_none(), "assumed");
}

/// The copy of `name` the snapshot counts.
fn counted(e: &Engine, name: &str) -> Arc<PodInfo> {
    e.snapshot().counted_pod(&key(name)).cloned().expect("counted")
}

#[test]
fn a_binding_is_confirmed_from_the_copy_assumed_and_read_again_once_that_copy_was_replaced() {
    let mut e = engine();
    apply_all(&mut e, vec![node("n", "2", json!({})), pod("a", "1", None), pod("b", "1", None)]);
    let d = e.schedule(0, &mut NoopObserver);
    assert_eq!(binds(&d).len(), 2);
    let (assumed_a, assumed_b) = (counted(&e, "a"), counted(&e, "b"));
    // `b`'s counted copy is replaced by an equal one (another allocation), as any update
    // of the counted copy while the pod is assumed does.
    let replaced_b = Arc::new((*assumed_b).clone());
    e.snapshot.upsert_pod(replaced_b.clone());
    confirm(&mut e, &d);
    assert!(!e.is_assumed(&key("a")) && !e.is_assumed(&key("b")));
    // `a`: the copy made when it was assumed became its record, as it is.
    assert!(Arc::ptr_eq(e.pod(&key("a")).unwrap(), &assumed_a), "confirmed in place");
    assert!(Arc::ptr_eq(&counted(&e, "a"), &assumed_a));
    // `b`: read again from the bound object, not the replacement taken as it is.
    let b = e.pod(&key("b")).unwrap().clone();
    assert!(!Arc::ptr_eq(&b, &assumed_b) && !Arc::ptr_eq(&b, &replaced_b), "read again");
    assert_eq!(*b, *assumed_b);
    assert!(Arc::ptr_eq(&counted(&e, "b"), &b));
    assert_eq!(e.snapshot().node(e.snapshot().node_id("n").unwrap()).requested.cpu, 2000);
}

#[test]
fn every_key_of_a_known_pod_shares_the_strings_of_the_first() {
    let mut e = engine();
    apply_all(&mut e, vec![node("n1", "1", json!({})), pod("big", "2", None)]);
    let first = e.canonical_pod_key(key("big"));
    let same =
        |a: &PodKey, b: &PodKey| Arc::ptr_eq(&a.name, &b.name) && Arc::ptr_eq(&a.namespace, &b.namespace);
    assert!(same(&first, &e.pod(&key("big")).unwrap().key));
    // A later version read in full (relabelled), its key made afresh from the object:
    // still the first key's strings, in the record, the queue and the decisions.
    let ClusterEvent::PodUpserted(written) = with_unschedulable_condition(&e, "big", "again") else {
        unreachable!()
    };
    let mut relabelled = (*written).clone();
    relabelled.metadata.labels = Some([("app".to_string(), "x".to_string())].into());
    e.apply(ClusterEvent::PodUpserted(Arc::new(relabelled)), 0);
    assert_eq!(e.pod(&key("big")).unwrap().labels().get("app").map(String::as_str), Some("x"));
    assert!(same(&first, &e.canonical_pod_key(key("big"))));
    assert!(same(&first, &e.pod(&key("big")).unwrap().key));
    assert!(e.queue().keys().iter().all(|k| same(&first, k)));
    let d = e.schedule(0, &mut NoopObserver);
    let failed: Vec<&PodKey> = d
        .iter()
        .filter_map(|d| match d {
            Decision::PodUnschedulable { pod, .. } => Some(pod),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 1);
    assert!(same(&first, failed[0]));
    // A pod the engine does not know keeps its own key.
    let unknown = key("nobody");
    assert!(same(&unknown, &e.canonical_pod_key(unknown.clone())));
}

#[test]
fn a_bound_record_shares_its_node_name_uid_and_scheduler_name_instead_of_copying_them() {
    let mut e = engine();
    apply_all(&mut e, vec![node("n1", "4", json!({})), pod("a", "1", None), pod("b", "1", None)]);
    let d = e.schedule(0, &mut NoopObserver);
    let bound: Vec<(&PodKey, &str)> = d
        .iter()
        .filter_map(|d| match d {
            Decision::Bind { pod, node, .. } => Some((pod, node.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(bound.len(), 2);
    let id = e.snapshot().node_id("n1").unwrap();
    let counted = e.snapshot().counted_pod(&key("a")).unwrap().clone();
    assert_eq!(counted.node_name.as_deref(), Some("n1"));
    assert!(Arc::ptr_eq(counted.node_name.as_ref().unwrap(), e.snapshot().node(id).shared_name()));
    let other = e.snapshot().counted_pod(&key("b")).unwrap();
    assert!(Arc::ptr_eq(&counted.scheduler_name, &other.scheduler_name), "one scheduler name for both");
    let a = e.pod(&key("a")).unwrap();
    assert!(Arc::ptr_eq(&counted.uid, &a.uid) || a.uid.is_empty() && counted.uid.is_empty());
    assert_eq!(counted.group_key(), a.group_key());
    let events: Vec<&str> = d
        .iter()
        .filter_map(|d| match d {
            Decision::ScheduledEvent { message, .. } => Some(message.as_str()),
            _ => None,
        })
        .collect();
    assert!(events.contains(&"Successfully assigned default/a to n1"), "{events:?}");
}
