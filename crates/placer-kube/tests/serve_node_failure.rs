//! `placer serve` when a node fails, end to end against the fake API server over HTTP
//! (`support/fake_apiserver`): a rack-constrained Job gang, placed by serve with
//! `topologyLevels`, loses a node. The test plays kube-controller-manager (the node goes
//! NotReady with its taint, the taint manager evicts the pod there); serve's Job controller
//! recreates the pod and serve's scheduler does what the simulator does and Kueue's TAS
//! does on a node failure (seed 002 "Node failures"): repair the gang inside its rack when
//! the rack has room, otherwise evict the whole gang (`TASFailedNodeReplacementFailFast`)
//! and place it again in another rack. Never left split and Pending.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

#[path = "support/fake_apiserver.rs"]
mod fake;

use fake::FakeApi;

const RACK: &str = "topology.example.com/rack";
const HOST: &str = "kubernetes.io/hostname";

/// The wall clock, RFC 3339 in whole seconds (a condition's `lastTransitionTime`).
fn now() -> String {
    use placer_api::k8s::jiff::Timestamp;
    Timestamp::from_second(Timestamp::now().as_second()).map(|t| t.to_string()).unwrap_or_default()
}

fn node(name: &str, rack: &str, ready: bool) -> Value {
    let mut n = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {RACK: rack, HOST: name}},
        "spec": {},
        "status": {"allocatable": {"cpu": "1", "memory": "8Gi", "pods": "110"},
                   "capacity": {"cpu": "1", "memory": "8Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" },
                                   "reason": if ready { "KubeletReady" } else { "KubeletNotReady" },
                                   "lastTransitionTime": now()}]}});
    if !ready {
        // What the node lifecycle controller adds to a not-ready node.
        n["spec"]["taints"] = json!([
            {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": now()}
        ]);
    }
    n
}

/// An Indexed gang Job of `n` pods of 1 cpu, all in one rack.
fn rack_job(n: usize) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "demo", "uid": "uid-job"},
        "spec": {"managedBy": "placer.dev/job-controller", "completionMode": "Indexed",
                 "parallelism": n, "completions": n,
                 "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "uid-job"}},
                 "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "uid-job"},
                                           "annotations": {"kueue.x-k8s.io/podset-required-topology": RACK}},
                              "spec": {"schedulerName": "placer", "restartPolicy": "Never",
                                       "containers": [{"name": "c", "image": "trainer",
                                                       "resources": {"requests": {"cpu": "1"}}}]}}},
        "status": {}})
}

/// Pod name → node of the bound pods that are not being deleted.
fn bound(api: &FakeApi) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = api
        .list("Pod")
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|p| {
            let node = p["spec"]["nodeName"].as_str()?;
            Some((p["metadata"]["name"].as_str()?.to_string(), node.to_string()))
        })
        .collect();
    out.sort();
    out
}

fn racks(api: &FakeApi, pods: &[(String, String)]) -> BTreeSet<String> {
    pods.iter()
        .filter_map(|(_, n)| {
            api.object("Node", "", n)?["metadata"]["labels"][RACK].as_str().map(str::to_string)
        })
        .collect()
}

/// The nodes (last level) of the PodGroup's `placer.dev/topology-assignment` annotation
/// (Kueue's compact v1beta2 encoding: per slice a universal value or prefix + roots + suffix).
fn assigned_nodes(pg: &Value) -> BTreeSet<String> {
    let text = pg["metadata"]["annotations"]["placer.dev/topology-assignment"].as_str().unwrap_or("{}");
    let ta: Value = serde_json::from_str(text).unwrap_or_default();
    let mut nodes = BTreeSet::new();
    for slice in ta["slices"].as_array().cloned().unwrap_or_default() {
        let Some(last) = slice["valuesPerLevel"].as_array().and_then(|l| l.last().cloned()) else { continue };
        if let Some(u) = last["universal"].as_str() {
            nodes.insert(u.to_string());
        }
        let ind = &last["individual"];
        let (prefix, suffix) = (ind["prefix"].as_str().unwrap_or(""), ind["suffix"].as_str().unwrap_or(""));
        for root in ind["roots"].as_array().cloned().unwrap_or_default() {
            nodes.insert(format!("{prefix}{}{suffix}", root.as_str().unwrap_or("")));
        }
    }
    nodes
}

fn pod_group(api: &FakeApi) -> Value {
    api.list("PodGroup").into_iter().next().expect("the Job's PodGroup")
}

async fn wait(api: &FakeApi, what: &str, secs: u64, check: impl Fn(&FakeApi) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !check(api) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {secs}s: {what}\npods: {:?}\npodgroup: {}",
            bound(api),
            api.list("PodGroup").first().cloned().unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs `placer serve` (topologyLevels rack > hostname, Job integration on) against `api`
/// until `stop` is sent.
async fn start_serve(
    api: &FakeApi,
) -> (tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>, tokio::task::JoinHandle<()>) {
    let (addr, server) = api.serve(0).await;
    let config = format!(
        "schedulerName: placer\nleaderElection: {{enabled: false}}\nmetricsAddr: 127.0.0.1:0\n\
         jobController: {{enabled: true}}\nclientConnection: {{qps: -1}}\n\
         topologyLevels: [{RACK}, {HOST}]\n"
    );
    let settings =
        placer_kube::config::parse(&config, Path::new("test.yaml")).expect("a valid configuration");
    let kube_config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    let (client, url) = placer_kube::serve::client_for(kube_config, settings.rate_limit).unwrap();
    let options = placer_kube::StoreOptions { server: url, ..placer_kube::StoreOptions::default() };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let serve = tokio::spawn(async move {
        placer_kube::serve::run(client, settings, options, async {
            let _ = stop_rx.await;
        })
        .await
        .expect("serve stops cleanly");
    });
    (stop_tx, serve, server)
}

/// Node `name` goes NotReady (condition and taints, as the node lifecycle controller sets
/// them) and the taint manager evicts the pods there (they do not tolerate the taint).
fn fail_node(api: &FakeApi, name: &str, rack: &str) {
    api.update(node(name, rack, false));
    for p in api.list("Pod") {
        if p["spec"]["nodeName"] == name {
            let ns = p["metadata"]["namespace"].as_str().map(str::to_string);
            let pod = p["metadata"]["name"].as_str().unwrap_or_default().to_string();
            api.remove("Pod", ns.as_deref(), &pod);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_whose_rack_has_no_room_for_the_replacement_is_evicted_and_placed_in_another_rack() {
    let api = FakeApi::new(Duration::ZERO);
    for (name, rack) in [("r1-a", "r1"), ("r1-b", "r1"), ("r2-a", "r2"), ("r2-b", "r2"), ("r2-c", "r2")] {
        api.add(node(name, rack, true));
    }
    api.add(rack_job(2));
    let (stop, serve, server) = start_serve(&api).await;

    // BestFit: the tightest rack that holds the gang, r1.
    wait(&api, "the gang bound in r1", 60, |api| bound(api).len() == 2).await;
    let before = bound(&api);
    assert_eq!(racks(&api, &before), BTreeSet::from(["r1".to_string()]), "{before:?}");

    fail_node(&api, "r1-a", "r1");
    // The Job controller recreates the lost pod; r1 has no room for it (r1-a down, r1-b
    // full) and no pod of the gang runs on r1-a any more: it failed, the whole gang is
    // evicted, recreated and placed again in r2.
    wait(&api, "the gang bound again in r2", 60, |api| {
        let now = bound(api);
        now.len() == 2 && racks(api, &now) == BTreeSet::from(["r2".to_string()])
    })
    .await;
    let after = bound(&api);
    assert!(
        after.iter().all(|(p, _)| !before.iter().any(|(q, _)| p == q)),
        "every pod was replaced: {after:?}"
    );

    // What the simulator reports too: an event on the PodGroup naming the failed node, and
    // an assignment describing the new placement only; no unhealthy node left published.
    let events = api.list("Event");
    let evicted: Vec<&Value> = events
        .iter()
        .filter(|e| e["regarding"]["kind"] == "PodGroup" && e["reason"] == "EvictedDueToNodeFailures")
        .collect();
    assert!(
        evicted.iter().any(|e| e["note"].as_str().is_some_and(|n| n.contains("r1-a"))),
        "no EvictedDueToNodeFailures event naming r1-a: {evicted:?}"
    );
    let nodes: BTreeSet<String> = after.iter().map(|(_, n)| n.clone()).collect();
    wait(&api, "the assignment to name the new nodes only", 10, |api| {
        assigned_nodes(&pod_group(api)) == nodes
    })
    .await;
    let pg = pod_group(&api);
    assert!(pg["metadata"]["annotations"]["placer.dev/unhealthy-nodes"].is_null(), "{pg}");

    let _ = stop.send(());
    serve.await.expect("serve task");
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_whose_rack_has_room_is_repaired_in_place_and_keeps_its_survivor() {
    let api = FakeApi::new(Duration::ZERO);
    for (name, rack) in
        [("r1-a", "r1"), ("r1-b", "r1"), ("r1-c", "r1"), ("r2-a", "r2"), ("r2-b", "r2"), ("r2-c", "r2")]
    {
        api.add(node(name, rack, true));
    }
    api.add(rack_job(2));
    let (stop, serve, server) = start_serve(&api).await;
    wait(&api, "the gang bound", 60, |api| bound(api).len() == 2).await;
    let before = bound(&api);
    let rack = racks(&api, &before).into_iter().next().expect("a rack");
    let (lost_pod, lost_node) = before[0].clone();
    let survivor = before[1].clone();

    fail_node(&api, &lost_node, &rack);
    wait(&api, "the replacement bound", 60, |api| {
        let now = bound(api);
        now.len() == 2 && !now.iter().any(|(p, _)| *p == lost_pod)
    })
    .await;
    let after = bound(&api);
    assert!(after.contains(&survivor), "the survivor kept its node: {after:?}");
    assert_eq!(racks(&api, &after), BTreeSet::from([rack.clone()]), "repaired inside its rack: {after:?}");
    assert!(!after.iter().any(|(_, n)| *n == lost_node), "{after:?}");
    assert!(
        !api.list("Event").iter().any(|e| e["reason"] == "EvictedDueToNodeFailures"),
        "repaired, not evicted"
    );
    // The assignment describes the whole gang: the survivor and the replacement.
    let nodes: BTreeSet<String> = after.iter().map(|(_, n)| n.clone()).collect();
    wait(&api, "the assignment to describe both pods", 10, |api| assigned_nodes(&pod_group(api)) == nodes)
        .await;

    let _ = stop.send(());
    serve.await.expect("serve task");
    server.abort();
}
