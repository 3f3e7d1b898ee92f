//! The reuse of failed single-pod attempts ([`super::single_failures`]) against the plain
//! path: the same decisions, pass after pass, on random clusters and pods (shapes repeated
//! with other labels, namespaces and priorities, placed pods with required anti-affinity,
//! lower-priority victims so that preemption nominates).

use super::*;
use crate::observer::NoopObserver;
use proptest::prelude::*;
use serde_json::json;

fn node(i: u8, cpu: u8) -> ClusterEvent {
    let name = format!("n{i}");
    let zone = if i.is_multiple_of(2) { "a" } else { "b" };
    let n: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"zone": zone, "kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu.to_string(), "pods": "8"}}
    }))
    .unwrap();
    ClusterEvent::NodeUpserted(Arc::new(n))
}

/// A pod of shape `(cpu, priority, namespace, app label, zone selector, anti-affinity)`.
fn pod(name: &str, shape: (u8, u8, u8, u8, u8, bool), node: Option<String>) -> ClusterEvent {
    let (cpu, priority, ns, app, zone, anti) = shape;
    let mut spec = json!({
        "priority": i32::from(priority) * 10,
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": (cpu + 1).to_string()}}}]
    });
    match zone {
        1 => spec["nodeSelector"] = json!({"zone": "a"}),
        2 => spec["nodeSelector"] = json!({"zone": "b"}),
        _ => {}
    }
    if anti {
        spec["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
        ]}});
    }
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    let app = match app {
        0 => "x".to_string(),
        1 => "y".to_string(),
        _ => format!("only-{name}"),
    };
    let namespace = if ns == 0 { "default" } else { "other" };
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"), "labels": {"app": app}},
        "spec": spec
    }))
    .unwrap();
    ClusterEvent::PodUpserted(Arc::new(p))
}

fn engine(reuse: bool) -> Engine {
    let mut e = Engine::new(SchedulerConfig {
        pod_initial_backoff_ms: 0,
        pod_max_backoff_ms: 0,
        ..SchedulerConfig::default()
    });
    e.single_failures.off = !reuse;
    e
}

/// Binds as a store would, and deletes the bound pod `delete` picks (a pod finishing).
fn settle(e: &mut Engine, decisions: &[Decision], delete: Option<usize>) {
    super::tests::confirm(e, decisions);
    let bound = super::tests::bound_keys(decisions);
    if let Some(i) = delete.filter(|_| !bound.is_empty()) {
        e.apply(ClusterEvent::PodDeleted(bound[i % bound.len()].clone()), 0);
    }
}

type Shape = (u8, u8, u8, u8, u8, bool);

fn shape() -> impl proptest::strategy::Strategy<Value = Shape> {
    (0u8..3, 0u8..2, 0u8..2, 0u8..3, 0u8..3, proptest::bool::weighted(0.15))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn reused_failures_decide_as_the_plain_path(
        nodes in proptest::collection::vec(1u8..5, 1..7),
        placed in proptest::collection::vec((shape(), 0u8..7), 0..8),
        waves in proptest::collection::vec((proptest::collection::vec(shape(), 0..14), proptest::option::of(0usize..8)), 1..4),
    ) {
        let mut plain = engine(false);
        let mut reuse = engine(true);
        let mut events: Vec<ClusterEvent> = nodes.iter().enumerate().map(|(i, &c)| node(i as u8, c)).collect();
        for (i, (s, n)) in placed.iter().enumerate() {
            let on = format!("n{}", usize::from(*n) % nodes.len());
            events.push(pod(&format!("placed-{i}"), (0, s.1, s.2, s.3, s.4, s.5), Some(on)));
        }
        for e in [&mut plain, &mut reuse] {
            for ev in events.clone() {
                e.apply(ev, 0);
            }
        }
        for (w, (pods, delete)) in waves.iter().enumerate() {
            let t = w as u64;
            for (i, s) in pods.iter().enumerate() {
                let ev = pod(&format!("w{w}-{i}"), *s, None);
                plain.apply(ev.clone(), t);
                reuse.apply(ev, t);
            }
            let a = plain.schedule(t, &mut NoopObserver);
            let b = reuse.schedule(t, &mut NoopObserver);
            prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
            settle(&mut plain, &a, *delete);
            settle(&mut reuse, &b, *delete);
        }
        prop_assert_eq!(plain.single_failures.hits, 0);
    }
}

/// Identical pending pods that fit nowhere: the first one's attempt is reused for the rest
/// of the pass, with the same message; a pod that changes what the next ones read (one
/// that binds) starts the reuse over.
#[test]
fn identical_pods_that_fit_nowhere_reuse_the_first_failure() {
    let mut e = engine(true);
    e.apply(node(0, 2), 0);
    for i in 0..5 {
        // Same shape, other labels (nothing placed has anti-affinity).
        e.apply(pod(&format!("big-{i}"), (2, 0, 0, 2, 0, false), None), 0);
    }
    let d = e.schedule(0, &mut NoopObserver);
    let messages: Vec<&String> = d
        .iter()
        .filter_map(|x| match x {
            Decision::PodUnschedulable { message, .. } => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(messages.len(), 5);
    assert!(messages.iter().all(|m| *m == messages[0]), "{messages:?}");
    assert_eq!(e.single_failures.hits, 4);
}
