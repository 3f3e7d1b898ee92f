//! The reuse of failed PodGroup cycles ([`super::group_failures`]) against the plain path:
//! the same decisions and the same metric counts, pass after pass, under both strategies,
//! on random clusters and PodGroups (a few shapes repeated under other names, shapes that
//! differ in labels, priorities, creation times, policies and topology requests;
//! lower-priority pods placed, so that preemption nominates and evicts).

use std::collections::BTreeMap;

use super::*;
use crate::config::WithinClusterQueue;
use crate::observer::NoopObserver;
use crate::tas::HOSTNAME_LEVEL;
use proptest::prelude::*;
use serde_json::json;

/// Sums every counter by name and labels (durations vary run to run; their counts do not).
#[derive(Default)]
struct Counts(BTreeMap<String, u64>);

impl Observer for Counts {
    fn count(&mut self, name: &'static str, labels: &[(&'static str, &str)], value: u64) {
        *self.0.entry(format!("{name}{labels:?}")).or_default() += value;
    }
    fn observe(&mut self, name: &'static str, labels: &[(&'static str, &str)], _: f64) {
        *self.0.entry(format!("{name}{labels:?} observations")).or_default() += 1;
    }
}

fn node(i: u8, cpu: u8) -> ClusterEvent {
    let name = format!("n{i}");
    let rack = format!("r{}", i % 2);
    let n: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"rack": rack, HOSTNAME_LEVEL: name}},
        "status": {"allocatable": {"cpu": cpu.to_string(), "pods": "8"}}
    }))
    .unwrap();
    ClusterEvent::NodeUpserted(Arc::new(n))
}

/// A pod of `cpu + 1` cores, with `priority x 10`, in PodGroup `group` or bound to `node`.
fn pod(
    name: &str,
    cpu: u8,
    priority: u8,
    app: &str,
    group: Option<&str>,
    node: Option<String>,
) -> ClusterEvent {
    let mut spec = json!({
        "priority": i32::from(priority) * 10,
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": (cpu + 1).to_string()}}}]
    });
    if let Some(g) = group {
        spec["schedulingGroup"] = json!({"podGroupName": g});
    }
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "labels": {"app": app}},
        "spec": spec
    }))
    .unwrap();
    ClusterEvent::PodUpserted(Arc::new(p))
}

/// A PodGroup's shape: (pods, cpu, priority, gang, rack required, created, app label).
type Shape = (u8, u8, u8, bool, bool, u8, u8);

fn shape() -> impl proptest::strategy::Strategy<Value = Shape> {
    (1u8..4, 0u8..3, 0u8..2, proptest::bool::weighted(0.8), proptest::bool::ANY, 0u8..2, 0u8..3)
}

/// The PodGroup and pods of `shape`, named after `name`.
fn group(name: &str, s: Shape) -> Vec<ClusterEvent> {
    let (pods, cpu, priority, gang, rack, created, app) = s;
    let mut spec = if gang {
        json!({"schedulingPolicy": {"gang": {"minCount": pods}}})
    } else {
        json!({"schedulingPolicy": {"basic": {}}})
    };
    spec["priority"] = json!(i32::from(priority) * 10);
    if rack {
        spec["schedulingConstraints"] = json!({"topology": [{"key": "rack"}]});
    }
    let pg: PodGroup = serde_json::from_value(json!({
        "metadata": {
            "name": name, "namespace": "default",
            "creationTimestamp": format!("2026-01-01T00:00:0{created}Z")
        },
        "spec": spec
    }))
    .unwrap();
    let app = match app {
        0 => "x".to_string(),
        1 => "y".to_string(),
        _ => format!("only-{name}"),
    };
    let mut out = vec![ClusterEvent::PodGroupUpserted(Arc::new(pg))];
    out.extend((0..pods).map(|j| pod(&format!("{name}-{j}"), cpu, priority, &app, Some(name), None)));
    out
}

fn engine(hierarchy: bool, newer: bool, reuse: bool) -> Engine {
    let mut e = Engine::new(SchedulerConfig {
        topology_levels: if hierarchy { vec!["rack".into(), HOSTNAME_LEVEL.into()] } else { Vec::new() },
        within_cluster_queue: if newer {
            WithinClusterQueue::LowerOrNewerEqualPriority
        } else {
            WithinClusterQueue::LowerPriority
        },
        pod_initial_backoff_ms: 0,
        pod_max_backoff_ms: 0,
        ..SchedulerConfig::default()
    });
    e.group_failures.off = !reuse;
    e
}

/// Binds as a store would, carries out evictions, and deletes the bound pod `delete`
/// picks (a pod finishing).
fn settle(e: &mut Engine, decisions: &[Decision], delete: Option<usize>) {
    super::tests::confirm(e, decisions);
    let mut gone: Vec<PodKey> = decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Evict { pod, .. } => Some(pod.clone()),
            _ => None,
        })
        .collect();
    let bound = super::tests::bound_keys(decisions);
    if let Some(i) = delete.filter(|_| !bound.is_empty()) {
        gone.push(bound[i % bound.len()].clone());
    }
    for key in gone {
        e.apply(ClusterEvent::PodDeleted(key), 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn reused_group_failures_decide_and_count_as_the_plain_path(
        hierarchy in proptest::bool::ANY,
        newer in proptest::bool::ANY,
        nodes in proptest::collection::vec(1u8..6, 1..6),
        placed in proptest::collection::vec((0u8..3, 0u8..6), 0..6),
        pool in proptest::collection::vec(shape(), 1..4),
        waves in proptest::collection::vec((proptest::collection::vec((0usize..4, 0u8..2, 0u8..3), 0..10), proptest::option::of(0usize..8)), 1..4),
    ) {
        let mut plain = engine(hierarchy, newer, false);
        let mut reuse = engine(hierarchy, newer, true);
        let mut events: Vec<ClusterEvent> = nodes.iter().enumerate().map(|(i, &c)| node(i as u8, c)).collect();
        for (i, (cpu, n)) in placed.iter().enumerate() {
            let on = format!("n{}", usize::from(*n) % nodes.len());
            // Priority 0: a victim for the groups of priority 10.
            events.push(pod(&format!("placed-{i}"), *cpu, 0, "x", None, Some(on)));
        }
        for e in [&mut plain, &mut reuse] {
            for ev in events.clone() {
                e.apply(ev, 0);
            }
        }
        let (mut counts_plain, mut counts_reuse) = (Counts::default(), Counts::default());
        for (w, (groups, delete)) in waves.iter().enumerate() {
            let t = w as u64;
            for (i, (s, created, app)) in groups.iter().enumerate() {
                // Shapes drawn from a small pool, so that many repeat, some with another
                // creation time or label.
                let (pods, cpu, priority, gang, rack, _, _) = pool[s % pool.len()];
                for ev in group(&format!("w{w}-g{i}"), (pods, cpu, priority, gang, rack, *created, *app)) {
                    plain.apply(ev.clone(), t);
                    reuse.apply(ev, t);
                }
            }
            let a = plain.schedule(t, &mut counts_plain);
            let b = reuse.schedule(t, &mut counts_reuse);
            prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
            settle(&mut plain, &a, *delete);
            settle(&mut reuse, &b, *delete);
        }
        prop_assert_eq!(&counts_plain.0, &counts_reuse.0);
        prop_assert_eq!(plain.group_failures.hits, 0);
    }
}

/// Identical gangs that fit nowhere, under either strategy: the first one's cycle is reused
/// for the rest of the pass, with the same messages and metrics; a gang that fits (and
/// changes what the next ones read) starts the reuse over.
#[test]
fn identical_gangs_that_fit_nowhere_reuse_the_first_failure() {
    for hierarchy in [false, true] {
        let mut e = engine(hierarchy, false, true);
        for i in 0..2 {
            e.apply(node(i, 2), 0);
        }
        // One node of 2 cores per rack: the three gangs of 3 pods x 2 cores that require
        // a rack fit nowhere; the gang of 2 pods x 1 core (another shape) fits.
        for i in 0..3 {
            for ev in group(&format!("big-{i}"), (3, 1, 0, true, true, i, 2)) {
                e.apply(ev, 0);
            }
        }
        for ev in group("small", (2, 0, 0, true, true, 0, 0)) {
            e.apply(ev, 0);
        }
        let mut counts = Counts::default();
        let d = e.schedule(0, &mut counts);
        let failed: Vec<&String> = d
            .iter()
            .filter_map(|x| match x {
                Decision::PodUnschedulable { message, .. } => Some(message),
                _ => None,
            })
            .collect();
        assert_eq!(failed.len(), 9, "hierarchy {hierarchy}: {d:?}");
        assert!(failed.iter().all(|m| *m == failed[0]), "{failed:?}");
        assert_eq!(d.iter().filter(|x| matches!(x, Decision::Bind { .. })).count(), 2, "{d:?}");
        assert_eq!(e.group_failures.hits, 2, "hierarchy {hierarchy}");
        let _ = NoopObserver;
    }
}
