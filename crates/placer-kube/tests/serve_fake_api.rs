//! `placer serve` end to end against a fake API server over HTTP (`support/fake_apiserver`):
//! a gang is bound through the concurrent dispatcher, `/metrics` shows the upstream
//! families with their labels, and the requests the run made are exactly what the RBAC
//! manifests allow (with the Job integration off and on).
//!
//! The end-to-end bed (`placer cluster`) will run the same checks against real API
//! traffic once it lands; this fake only answers what `placer serve` asks.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[path = "support/fake_apiserver.rs"]
mod fake;
#[path = "support/rbac.rs"]
mod rbac;

use fake::FakeApi;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

async fn http_get(addr: SocketAddr, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("the metrics endpoint");
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

struct Run {
    api: FakeApi,
    metrics: String,
}

/// Runs `placer serve` against `api` until `done` holds (or 60 s pass), scrapes
/// `/metrics`, shuts down.
async fn run_serve(api: FakeApi, job_controller: bool, done: impl Fn(&FakeApi) -> bool) -> Run {
    run_serve_with(api, &format!("jobController: {{enabled: {job_controller}}}\n"), done).await
}

/// [`run_serve`] with `extra` appended to the configuration.
async fn run_serve_with(api: FakeApi, extra: &str, done: impl Fn(&FakeApi) -> bool) -> Run {
    let (addr, server) = api.serve(0).await;
    let metrics_port = free_port();
    let config = format!(
        "schedulerName: placer\nleaderElection: {{enabled: false}}\nmetricsAddr: 127.0.0.1:{metrics_port}\n\
         clientConnection: {{qps: -1}}\n{extra}"
    );
    let settings =
        placer_kube::config::parse(&config, Path::new("test.yaml")).expect("a valid configuration");
    let kube_config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    let (client, url) = placer_kube::serve::client_for(kube_config, settings.rate_limit).unwrap();
    let options = placer_kube::StoreOptions { server: url, ..placer_kube::StoreOptions::default() };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let serve = tokio::spawn(placer_kube::serve::run(client, settings, options, async {
        let _ = stop_rx.await;
    }));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !done(&api) {
        assert!(tokio::time::Instant::now() < deadline, "not done within 60s: {:?}", api.requests().len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Let the last status writes and events land, then scrape.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let metrics = http_get(SocketAddr::from(([127, 0, 0, 1], metrics_port)), "/metrics").await;
    let _ = stop_tx.send(());
    serve.await.expect("serve task").expect("serve stops cleanly");
    server.abort();
    Run { api, metrics }
}

fn all_bound(api: &FakeApi) -> bool {
    let pods = api.list("Pod");
    !pods.is_empty() && pods.iter().all(|p| p["spec"]["nodeName"].as_str().is_some())
}

fn group_scheduled(api: &FakeApi, name: &str) -> bool {
    api.object("PodGroup", "demo", name).is_some_and(|pg| {
        pg["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "PodGroupScheduled" && c["status"] == "True"))
    })
}

/// The (group, resource, verb) triples of the recorded requests.
fn recorded(api: &FakeApi) -> rbac::Rules {
    api.requests().iter().filter_map(fake::rbac_verb).collect()
}

/// Rules a short run does not exercise, each for a stated reason; everything else a role
/// grants must show up in the traffic.
fn not_exercised(rules: &rbac::Rules) -> rbac::Rules {
    let reasons: &[(&str, &str, &str, &str)] = &[
        (
            "",
            "pods/status",
            "update",
            "PodScheduled=False: only for pods that do not fit (the base run has one)",
        ),
        ("", "pods", "get", "re-read on a status update conflict (tests/mock_api.rs)"),
        ("scheduling.k8s.io", "podgroups", "get", "re-read on a status update conflict (tests/mock_api.rs)"),
        (
            "scheduling.k8s.io",
            "podgroups",
            "patch",
            "topology assignment annotation, topologyLevels mode only",
        ),
        ("events.k8s.io", "events", "patch", "a repeated event becomes a series"),
        (
            "",
            "persistentvolumes",
            "patch",
            "VolumeBinding PreBind: static binding of a WaitForFirstConsumer claim",
        ),
        (
            "",
            "persistentvolumeclaims",
            "patch",
            "VolumeBinding PreBind: the selected node of a claim to provision",
        ),
        ("", "pods", "delete", "preemption victims (tests/mock_api.rs); Job pods when a Job shrinks or ends"),
        ("batch", "jobs", "get", "re-read on a status update conflict"),
        (
            "resource.k8s.io",
            "resourceclaims/status",
            "update",
            "DynamicResources PreBind: only for pods with claims (the DRA run has them)",
        ),
        ("resource.k8s.io", "resourceclaims", "get", "re-read on a status update conflict"),
        ("resource.k8s.io", "resourceclaims", "delete", "claims generated for pods that are done"),
        ("", "pods/finalizers", "update", "implied by blockOwnerDeletion on generated claims, never called"),
        (
            "scheduling.k8s.io",
            "podgroups/finalizers",
            "update",
            "implied by blockOwnerDeletion on PodGroup claims, never called",
        ),
        ("batch", "jobs", "delete", "finished Jobs after ttlSecondsAfterFinished"),
        (
            "batch",
            "jobs/finalizers",
            "update",
            "implied by blockOwnerDeletion on created objects, never called",
        ),
    ];
    rules
        .iter()
        .filter(|(g, r, v)| reasons.iter().any(|(rg, rr, rv, _)| g == rg && r == rr && v == rv))
        .cloned()
        .collect()
}

fn check_rbac(recorded: &rbac::Rules, granted: &rbac::Rules) {
    let missing: Vec<_> = recorded.difference(granted).collect();
    assert!(missing.is_empty(), "requests no role allows: {missing:?}");
    let unused: BTreeSet<_> = granted.difference(recorded).cloned().collect();
    let explained = not_exercised(granted);
    let unexplained: Vec<_> = unused.difference(&explained).collect();
    assert!(unexplained.is_empty(), "rules no request used: {unexplained:?}\nrecorded: {recorded:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_binds_a_gang_exposes_upstream_metrics_and_needs_exactly_the_base_roles() {
    let api = FakeApi::new(Duration::ZERO);
    fake::add_nodes(&api, 4, 8);
    fake::add_gang(&api, "demo", "train", 16, "placer", Some("rack"));
    // A pod that fits nowhere: PodScheduled=False, FailedScheduling.
    api.add(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "too-big", "namespace": "demo"},
        "spec": {"schedulerName": "placer",
                 "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100"}}}]}}));
    let run = run_serve(api, false, |api| {
        let train_bound = api
            .list("Pod")
            .iter()
            .filter(|p| p["metadata"]["name"] != "too-big")
            .all(|p| p["spec"]["nodeName"].as_str().is_some());
        let refused = api
            .object("Pod", "demo", "too-big")
            .is_some_and(|p| p["status"]["conditions"].as_array().is_some_and(|c| !c.is_empty()));
        train_bound && refused && group_scheduled(api, "train")
    })
    .await;

    // Bound through the binding subresource, each once, all in one rack.
    assert_eq!(run.api.bindings().len(), 16);
    assert!(run.api.object("Pod", "demo", "too-big").is_some_and(|p| p["spec"]["nodeName"].is_null()));

    // /metrics: the upstream families with their labels.
    let m = &run.metrics;
    assert!(m.contains("200 OK") && m.contains("application/openmetrics-text"), "{m}");
    for needle in [
        "# HELP scheduler_podgroup_schedule_attempts ",
        "scheduler_podgroup_schedule_attempts_total{result=\"scheduled\",profile=\"placer\"} 1",
        "scheduler_podgroup_scheduling_attempt_duration_seconds_count{result=\"scheduled\",profile=\"placer\"} 1",
        "scheduler_podgroup_scheduling_algorithm_duration_seconds_count 1",
        "scheduler_schedule_attempts_total{result=\"scheduled\",profile=\"placer\"} 16",
        "scheduler_scheduling_attempt_duration_seconds_count{result=\"scheduled\",profile=\"placer\"} 16",
        "scheduler_pod_scheduling_sli_duration_seconds_count{attempts=\"1\"} 16",
        "scheduler_pod_scheduling_duration_seconds_count{attempts=\"1\"} 16",
        "scheduler_pod_scheduling_attempts_count 16",
        "scheduler_schedule_attempts_total{result=\"unschedulable\",profile=\"placer\"}",
        "scheduler_pending_pods{queue=\"unschedulable\"} 1",
        "scheduler_pending_entities{queue=\"unschedulable\",type=\"pod\"} 1",
        "scheduler_queued_entities{queue=\"unschedulable\",type=\"pod\"} 1",
        "scheduler_placement_total{profile=\"placer\"}",
        "scheduler_placement_evaluations_total{result=\"feasible\",profile=\"placer\"}",
        "scheduler_placement_evaluation_duration_seconds_count{result=\"feasible\",profile=\"placer\"}",
        "scheduler_plugin_execution_duration_seconds_count{plugin=\"TopologyPlacementGenerator\",extension_point=\"PlacementGenerate\",status=\"Success\"} 1",
        "scheduler_pending_entities{queue=\"gated\",type=\"podgroup\"} 0",
        "scheduler_goroutines{operation=\"binding\"}",
        "# TYPE scheduler_plugin_execution_duration_seconds histogram",
        "# TYPE scheduler_preemption_attempts counter",
        "placer_binding_duration_seconds_count{result=\"ok\"} 16",
        "placer_api_requests_total{verb=\"bind\",kind=\"Pod\",code=\"2xx\"} 16",
        "# EOF",
    ] {
        assert!(m.contains(needle), "{needle:?} missing from /metrics:\n{m}");
    }

    // Events: the pods' Scheduled and the PodGroup's own.
    let events = run.api.list("Event");
    let for_group: Vec<_> = events.iter().filter(|e| e["regarding"]["kind"] == "PodGroup").collect();
    assert!(for_group.iter().any(|e| e["reason"] == "Scheduled" && e["type"] == "Normal"), "{for_group:?}");
    assert_eq!(
        events.iter().filter(|e| e["reason"] == "Scheduled" && e["regarding"]["kind"] == "Pod").count(),
        16
    );

    // RBAC: the Job integration off, so the base roles must cover every request, and
    // every rule they grant is used or explained.
    let mut granted = rbac::base();
    granted.extend(rbac::preemption());
    check_rbac(&recorded(&run.api), &granted);
    assert!(!recorded(&run.api).iter().any(|(g, _, _)| g == "batch"), "no Job watch without the integration");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_job_integration_exactly_its_role_is_added() {
    let api = FakeApi::new(Duration::ZERO);
    fake::add_nodes(&api, 2, 8);
    api.add(json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "allreduce", "namespace": "demo"},
        "spec": {"managedBy": "placer.dev/job-controller", "completionMode": "Indexed",
                 "parallelism": 4, "completions": 4,
                 "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "uid-job"}},
                 "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "uid-job"}},
                              "spec": {"schedulerName": "placer", "restartPolicy": "Never",
                                       "containers": [{"name": "c", "image": "busybox",
                                                       "resources": {"requests": {"cpu": "100m"}}}]}}},
        "status": {}}));
    let run = run_serve(api, true, |api| api.list("Pod").len() == 4 && all_bound(api)).await;
    assert_eq!(run.api.list("Workload").len(), 1);
    assert_eq!(run.api.list("PodGroup").len(), 1);

    let recorded = recorded(&run.api);
    let mut granted = rbac::base();
    granted.extend(rbac::preemption());
    granted.extend(rbac::job_controller());
    check_rbac(&recorded, &granted);
    // The Job role is needed: without it some request would have been refused.
    let base_only: rbac::Rules = rbac::base().union(&rbac::preemption()).cloned().collect();
    assert!(recorded.difference(&base_only).count() > 0);
}

/// A gang whose pods each ask for a GPU through a ResourceClaimTemplate, on a cluster
/// without kube-controller-manager: Placer's ResourceClaim controller generates the
/// claims, the scheduler allocates a device on each pod's node and reserves the claim for
/// the pod (status subresource) before binding it, and the requests fit exactly the base
/// roles plus the claim controller's component.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_claims_get_devices_with_exactly_the_claim_controller_role() {
    let api = FakeApi::new(Duration::ZERO);
    fake::add_nodes(&api, 2, 8);
    fake::add_gpus(&api, 2, 2);
    api.add(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": "demo"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu",
            "exactly": {"deviceClassName": "gpu.example.com"}}]}}}}));
    api.add(json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "demo"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}}));
    for i in 0..3 {
        api.add(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("train-{i}"), "namespace": "demo"},
            "spec": {"schedulerName": "placer", "schedulingGroup": {"podGroupName": "train"},
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                     "containers": [{"name": "c", "image": "pause",
                                     "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]}}]},
            "status": {"phase": "Pending"}}));
    }
    let run = run_serve_with(
        api,
        "jobController: {enabled: false}\nresourceClaimController: {enabled: true}\n",
        |api| all_bound(api) && group_scheduled(api, "train"),
    )
    .await;
    let claims = run.api.list("ResourceClaim");
    assert_eq!(claims.len(), 3, "one claim per pod: {claims:?}");
    let mut devices = BTreeSet::new();
    for pod in run.api.list("Pod") {
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        let node = pod["spec"]["nodeName"].as_str().expect("bound");
        let claim_name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no generated claim in its status: {pod}"));
        let claim = run.api.object("ResourceClaim", "demo", claim_name).expect("the generated claim");
        assert_eq!(claim["metadata"]["ownerReferences"][0]["name"], name, "{claim}");
        let result = &claim["status"]["allocation"]["devices"]["results"][0];
        assert_eq!(result["pool"], node, "the device is on the pod's node: {claim}");
        assert!(devices.insert(format!("{}/{}", result["pool"], result["device"])), "a device given twice");
        let reserved = &claim["status"]["reservedFor"];
        assert_eq!(reserved.as_array().map(Vec::len), Some(1), "{claim}");
        assert_eq!(reserved[0]["name"], name, "{claim}");
        assert_eq!(reserved[0]["resource"], "pods", "{claim}");
    }
    // The claim status went through the status subresource, before each binding.
    let requests = run.api.requests();
    let status_puts =
        requests.iter().filter(|r| r.method == "PUT" && r.path.contains("/resourceclaims/")).count();
    assert!(status_puts >= 3, "{status_puts} claim status writes");
    for pod in 0..3 {
        let bind = requests
            .iter()
            .position(|r| r.path.ends_with(&format!("/pods/train-{pod}/binding")))
            .expect("a binding");
        let claim_status = format!("/resourceclaims/train-{pod}-gpu-");
        let reserved_before = requests[..bind]
            .iter()
            .any(|r| r.method == "PUT" && r.path.contains(&claim_status) && r.path.ends_with("/status"));
        assert!(reserved_before, "train-{pod} was bound before its claim was reserved");
    }

    let recorded = recorded(&run.api);
    let mut granted = rbac::base();
    granted.extend(rbac::preemption());
    granted.extend(rbac::resourceclaim_controller());
    check_rbac(&recorded, &granted);
    // The claim controller's role is needed; the scheduler alone stays within the base.
    let base_only: rbac::Rules = rbac::base().union(&rbac::preemption()).cloned().collect();
    assert!(recorded.difference(&base_only).count() > 0);
    assert!(recorded.contains(&("resource.k8s.io".into(), "resourceclaims/status".into(), "update".into())));
}
