//! Robustness of the simulator against inputs at the limits (issue 21): sums near
//! `i64::MAX` never overcommit a node, large valid scenarios load, the input caps hold.

use std::fmt::Write as _;

use placer_cluster::Object;
use placer_engine::pod_requests;
use placer_sim::{load_str, run, RunOptions};
use proptest::prelude::*;

/// `amount` of `resource` as a quantity string (cpu in millicores).
fn quantity(resource: &str, amount: i64) -> String {
    if resource == "cpu" {
        format!("{amount}m")
    } else {
        amount.to_string()
    }
}

/// Exact (i128) sum of a resource over the containers and overhead of a pod spec, and its
/// init-container peak: what a pod asks for without any rounding or saturation.
fn exact_request(obj: &Object, resource: &str) -> i128 {
    let Some(spec) = obj.as_pod().and_then(|p| p.spec.as_ref()) else { return 0 };
    let parse = |q: &placer_api::k8s::apimachinery::pkg::api::resource::Quantity| -> i128 {
        let v = if resource == "cpu" {
            placer_api::quantity::parse_milli(&q.0)
        } else {
            placer_api::quantity::parse_units(&q.0)
        };
        i128::from(v.unwrap_or(0))
    };
    let of = |c: &placer_api::k8s::api::core::v1::Container| -> i128 {
        c.resources.as_ref().and_then(|r| r.requests.as_ref()).and_then(|r| r.get(resource)).map_or(0, parse)
    };
    let containers: i128 = spec.containers.iter().map(of).sum();
    let init: i128 = spec.init_containers.iter().flatten().map(of).max().unwrap_or(0);
    let overhead = spec.overhead.as_ref().and_then(|o| o.get(resource)).map_or(0, parse);
    containers.max(init) + overhead
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Pods whose containers, init containers and overhead ask for amounts near `i64::MAX`
    /// never end up bound beyond a node's allocatable, counted exactly.
    #[test]
    fn requests_near_i64_max_never_overcommit(
        resource in prop::sample::select(vec!["cpu", "memory", "nvidia.com/gpu"]),
        pods in prop::collection::vec(
            (
                prop::collection::vec(prop_oneof![0..=16i64, (i64::MAX / 4)..=i64::MAX], 1..4),
                prop::option::of(prop_oneof![0..=16i64, (i64::MAX / 2)..=i64::MAX]),
                prop::option::of(prop_oneof![0..=4i64, (i64::MAX / 2)..=i64::MAX]),
            ),
            1..5,
        ),
        allocatable in prop_oneof![1..=64i64, (i64::MAX / 2)..=i64::MAX],
    ) {
        let mut text = format!(
            "name: near-max\ncluster:\n  nodes:\n    - metadata: {{name: n1}}\n      status: {{allocatable: {{{resource}: '{}', pods: '110'}}}}\nsubmit:\n",
            quantity(resource, allocatable)
        );
        for (i, (containers, init, overhead)) in pods.iter().enumerate() {
            let _ = writeln!(text, "  - apiVersion: v1\n    kind: Pod\n    metadata: {{name: p{i}}}\n    spec:");
            if let Some(o) = overhead {
                let _ = writeln!(text, "      overhead: {{{resource}: '{}'}}", quantity(resource, *o));
            }
            if let Some(init) = init {
                let _ = writeln!(text, "      initContainers: [{{name: i, image: x, resources: {{requests: {{{resource}: '{}'}}}}}}]", quantity(resource, *init));
            }
            let _ = writeln!(text, "      containers:");
            for (c, amount) in containers.iter().enumerate() {
                let _ = writeln!(text, "        - {{name: c{c}, image: x, resources: {{requests: {{{resource}: '{}'}}}}}}", quantity(resource, *amount));
            }
        }
        let scenario = match load_str(&text, "near-max.yaml") {
            Ok(s) => s,
            Err(e) => panic!("{e}\n{text}"),
        };
        let report = run(&scenario, &RunOptions::default()).expect("the run completes");
        let bound: i128 = report
            .objects
            .iter()
            .filter(|o| o.as_pod().and_then(|p| p.spec.as_ref()).is_some_and(|s| s.node_name.is_some()))
            .map(|o| exact_request(o, resource))
            .sum();
        prop_assert!(bound <= i128::from(allocatable), "{bound} bound on {allocatable}\n{text}");
        // The engine's own view saturates and never goes negative.
        for o in &report.objects {
            if let Some(spec) = o.as_pod().and_then(|p| p.spec.as_ref()) {
                if let Ok(r) = pod_requests(spec) {
                    prop_assert!(r.get(resource) >= 0);
                }
            }
        }
        prop_assert!(!report.cluster.to_string().contains('-'), "{}", report.cluster);
    }
}

/// A 9,000-pod gang written out pod by pod (about 1.5 MB): more YAML nodes than
/// serde-saphyr's default budget of 250,000, well within the 16 MiB input cap.
#[test]
fn a_9000_pod_gang_written_out_loads() {
    let mut text = String::from(
        "name: big-gang\nscheduler:\n  featureGates: {GenericWorkload: true, GangScheduling: true}\ncluster:\n  generate:\n    levels: [rack, kubernetes.io/hostname]\n    fanout: [23, 50]\n    allocatable: {cpu: '64', memory: 512Gi, pods: '110'}\nsubmit:\n  - apiVersion: scheduling.k8s.io/v1alpha2\n    kind: PodGroup\n    metadata: {name: pg}\n    spec:\n      schedulingPolicy: {gang: {minCount: 9000}}\n",
    );
    for i in 0..9000 {
        let _ = writeln!(
            text,
            "  - apiVersion: v1\n    kind: Pod\n    metadata: {{name: p{i}, namespace: default, labels: {{app: train, index: '{i}'}}}}\n    spec:\n      schedulingGroup: {{podGroupName: pg}}\n      containers: [{{name: w, image: registry.example/worker, resources: {{requests: {{cpu: '1', memory: 1Gi}}}}}}]"
        );
    }
    assert!(text.len() > 1_500_000, "{} bytes", text.len());
    match load_str(&text, "big.yaml") {
        Ok(s) => assert_eq!(s.submit.len(), 9001),
        Err(e) => panic!("{e}"),
    }
}
