//! End to end: `placer cluster --scheduler none` and `placer serve` as processes on
//! loopback ports, driven with the real kubectl (kube-rs when kubectl is absent). See
//! `bed/mod.rs` for the bed, and docs/serve.md for the same steps by hand.

mod bed;
#[path = "../../placer-kube/tests/support/rbac.rs"]
mod rbac;

use std::time::{Duration, Instant};

use bed::{domains, rack_gang, scenario, Bed, BedOptions, Driver};

const RACK: &str = "topology.example.com/rack";

fn two_racks(cluster_args: &[&str]) -> Bed {
    Bed::start(BedOptions {
        scenario: Some(scenario("two-racks.yaml")),
        cluster_args: cluster_args.iter().map(|s| s.to_string()).collect(),
        ..BedOptions::default()
    })
}

fn condition(obj: &serde_json::Value, type_: &str) -> Option<String> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .and_then(|c| c["status"].as_str())
        .map(str::to_string)
}

fn wait_leader(bed: &mut Bed, name: &str) {
    let prefix = format!("{name}_");
    bed.wait_for(Duration::from_secs(60), &format!("{name} to lead"), |b| {
        b.lease_holder("kube-system", "placer").is_some_and(|h| h.starts_with(&prefix))
    });
}

fn assert_gang_scheduled(bed: &mut Bed, namespace: &str, group: &str, n: usize) {
    let pods = bed.pods(namespace);
    assert_eq!(pods.bound(), n, "{:?}", pods.nodes());
    let labels = bed.node_labels();
    let racks = domains(&pods, &labels, RACK);
    assert_eq!(racks.len(), 1, "the gang spans racks {racks:?}");
    let pg =
        bed.get_json(&format!("/apis/scheduling.k8s.io/v1alpha2/namespaces/{namespace}/podgroups/{group}"));
    assert_eq!(condition(&pg, "PodGroupScheduled").as_deref(), Some("True"), "{pg}");
}

/// What `curl /metrics` must show after one 4-pod rack gang was bound: kube-scheduler
/// v1.36's families for these features (seed 000's monitoring section and the scheduler's
/// standard ones) with their upstream labels.
const UPSTREAM_METRICS: &[&str] = &[
    "# HELP scheduler_podgroup_schedule_attempts ",
    "scheduler_podgroup_schedule_attempts_total{result=\"scheduled\",profile=\"placer\"} 1",
    "scheduler_podgroup_scheduling_attempt_duration_seconds_count{result=\"scheduled\",profile=\"placer\"} 1",
    "scheduler_podgroup_scheduling_algorithm_duration_seconds_count 1",
    "scheduler_podgroup_scheduling_duration_seconds_count",
    "scheduler_schedule_attempts_total{result=\"scheduled\",profile=\"placer\"} 4",
    "scheduler_scheduling_attempt_duration_seconds_count{result=\"scheduled\",profile=\"placer\"} 4",
    "# TYPE scheduler_scheduling_algorithm_duration_seconds histogram",
    "scheduler_pod_scheduling_sli_duration_seconds_count{attempts=",
    "scheduler_pod_scheduling_duration_seconds_count{attempts=",
    "scheduler_pod_scheduling_attempts_count 4",
    "scheduler_pending_pods{queue=\"active\"} 0",
    "scheduler_pending_pods{queue=\"gated\"}",
    "scheduler_pending_entities{queue=\"gated\",type=\"podgroup\"}",
    "scheduler_pending_entities{queue=\"active\",type=\"pod\"}",
    "scheduler_queued_entities{queue=\"unschedulable\",type=\"podgroup\"}",
    "scheduler_placement_total{profile=\"placer\"}",
    "scheduler_placement_evaluations_total{result=\"feasible\",profile=\"placer\"}",
    "scheduler_placement_evaluation_duration_seconds_count{result=\"feasible\",profile=\"placer\"}",
    "scheduler_plugin_execution_duration_seconds_count{plugin=\"TopologyPlacementGenerator\",extension_point=\"PlacementGenerate\",status=\"Success\"}",
    "# TYPE scheduler_preemption_attempts counter",
    "# TYPE scheduler_preemption_victims histogram",
    "scheduler_goroutines{operation=\"binding\"}",
    "placer_binding_duration_seconds_count{result=\"ok\"} 4",
    "placer_api_requests_total{verb=\"bind\",kind=\"Pod\",code=\"2xx\"} 4",
    "placer_leader 1",
    "# EOF",
];

/// The (group, resource, verb) of every request `placer serve` made (all but kubectl's).
fn serve_requests(bed: &Bed) -> rbac::Rules {
    bed.requests().iter().filter(|r| !r.agent.starts_with("kubectl/")).filter_map(bed::Logged::rbac).collect()
}

/// Every request serve made is allowed by `granted` or by the leader election Role.
fn assert_allowed(recorded: &rbac::Rules, granted: &rbac::Rules) {
    let mut granted = granted.clone();
    granted.extend(rbac::rules("rbac.yaml", "Role", "placer-leader-election"));
    let refused: Vec<_> = recorded.difference(&granted).collect();
    assert!(refused.is_empty(), "requests no role of deploy/ allows: {refused:?}\nrecorded: {recorded:?}");
}

#[test]
fn a_rack_gang_created_with_kubectl_is_bound_in_one_rack() {
    let mut bed = two_racks(&[]);
    let serve = bed.serve("replica-a", "jobController: {enabled: false}\n");
    wait_leader(&mut bed, "replica-a");
    let out = bed.create_manifests("train", &rack_gang("demo", "train", 4, "1"));
    assert!(out.contains("train-3 created"), "{out}");
    bed.wait_for(Duration::from_secs(60), "4 pods bound", |b| b.pods("demo").bound() == 4);
    assert_gang_scheduled(&mut bed, "demo", "train", 4);
    if let Driver::Kubectl(_) = bed.driver {
        let wide = bed.kubectl_ok(&["-n", "demo", "get", "pods", "-o", "wide"]);
        eprintln!("$ kubectl -n demo get pods -o wide\n{wide}");
        let header = wide.lines().next().unwrap_or("");
        let col = header.find(" NODE ").map(|i| i + 1).expect("a NODE column");
        let nodes = bed.pods("demo").nodes();
        for line in wide.lines().skip(1) {
            let name = line.split_whitespace().next().unwrap_or("");
            let shown = line.get(col..).and_then(|r| r.split_whitespace().next()).unwrap_or("");
            assert_eq!(Some(&shown.to_string()), nodes.get(name), "{line}");
        }
        let pg = bed.kubectl_ok(&[
            "-n",
            "demo",
            "get",
            "podgroup",
            "train",
            "-o",
            "jsonpath={.status.conditions[0].type}={.status.conditions[0].status}",
        ]);
        assert_eq!(pg, "PodGroupScheduled=True");
        let events = bed.kubectl_ok(&["-n", "demo", "get", "events", "--field-selector", "reason=Scheduled"]);
        eprintln!("$ kubectl -n demo get events --field-selector reason=Scheduled\n{events}");
        assert_eq!(events.lines().filter(|l| l.contains(" pod/train-")).count(), 4, "{events}");
        assert_eq!(events.lines().filter(|l| l.contains(" podgroup/train ")).count(), 1, "{events}");
    }

    // curl /metrics: the upstream families and labels, over the real API path.
    let mut scraped = String::new();
    bed.wait_for(Duration::from_secs(30), "every upstream metric on /metrics", |_| {
        scraped = serve.http_get("/metrics").unwrap_or_default();
        UPSTREAM_METRICS.iter().all(|m| scraped.contains(m))
    });
    let missing: Vec<_> = UPSTREAM_METRICS.iter().filter(|m| !scraped.contains(*m)).collect();
    assert!(missing.is_empty(), "{missing:?} missing from /metrics:\n{scraped}");
    assert_eq!(serve.http_get("/readyz").as_deref().map(str::trim), Some("ok: leading"));

    // RBAC: with the Job integration off, the base roles allow every request serve made,
    // and it never touched Jobs or Workloads.
    if let Driver::Kubectl(_) = bed.driver {
        let recorded = serve_requests(&bed);
        assert!(recorded.contains(&("".into(), "pods/binding".into(), "create".into())), "{recorded:?}");
        let mut granted = rbac::base();
        granted.extend(rbac::preemption());
        assert_allowed(&recorded, &granted);
        assert!(!recorded.iter().any(|(g, r, _)| g == "batch" || r == "workloads"), "{recorded:?}");
    }
}

#[test]
fn a_job_becomes_a_gang() {
    let mut bed = two_racks(&[]);
    let _serve = bed.serve("replica-a", "");
    wait_leader(&mut bed, "replica-a");
    let job = "apiVersion: v1\nkind: Namespace\nmetadata: {name: jobs}\n---\n\
               apiVersion: batch/v1\nkind: Job\nmetadata: {name: allreduce, namespace: jobs}\n\
               spec:\n  managedBy: placer.dev/job-controller\n  completionMode: Indexed\n  parallelism: 4\n  completions: 4\n\
               \x20 template:\n    spec:\n      schedulerName: placer\n      restartPolicy: Never\n\
               \x20     containers:\n        - name: main\n          image: busybox:1.36\n          resources: {requests: {cpu: \"2\"}}\n";
    bed.create_manifests("job", job);
    bed.wait_for(Duration::from_secs(60), "the Job's 4 pods bound", |b| b.pods("jobs").bound() == 4);
    let groups = bed.get_json("/apis/scheduling.k8s.io/v1alpha2/namespaces/jobs/podgroups");
    let groups = groups["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(groups.len(), 1, "one PodGroup for the Job");
    assert_eq!(groups[0]["spec"]["schedulingPolicy"]["gang"]["minCount"], 4, "{}", groups[0]);
    assert_eq!(condition(&groups[0], "PodGroupScheduled").as_deref(), Some("True"), "{}", groups[0]);
    let workloads = bed.get_json("/apis/scheduling.k8s.io/v1alpha2/namespaces/jobs/workloads");
    assert_eq!(workloads["items"].as_array().map(Vec::len), Some(1), "one Workload for the Job");
    let pods = bed.pods("jobs");
    assert!(pods.0.iter().all(|p| p["metadata"]["ownerReferences"][0]["name"] == "allreduce"));
    bed.wait_for(Duration::from_secs(30), "the Job's pods running", |b| {
        b.pods("jobs").0.iter().all(|p| p["status"]["phase"] == "Running")
    });
    // RBAC: the Job integration needs exactly its own role on top of the base ones.
    if let Driver::Kubectl(_) = bed.driver {
        let recorded = serve_requests(&bed);
        let mut base = rbac::base();
        base.extend(rbac::preemption());
        let mut granted = base.clone();
        granted.extend(rbac::job_controller());
        assert_allowed(&recorded, &granted);
        let beyond_base: Vec<_> = recorded.difference(&base).collect();
        assert!(!beyond_base.is_empty(), "the Job role was not needed: {recorded:?}");
    }
}

#[test]
fn killing_the_leader_mid_gang_loses_nothing_and_binds_each_pod_once() {
    const N: usize = 256;
    // Every API request takes 10 ms and the replicas keep kube-scheduler's client limits
    // (50 requests a second after a burst of 100), so binding 256 pods takes seconds even
    // with concurrent bindings: the kill lands mid-gang.
    let mut bed = two_racks(&["--latency", "10ms"]);
    let limits = "clientConnection: {qps: 50, burst: 100}\n";
    let mut a = bed.serve("replica-a", limits);
    wait_leader(&mut bed, "replica-a");
    let b = bed.serve("replica-b", limits);
    bed.create_manifests("big", &rack_gang("big", "gang", N, "1"));
    // Kill the leader as soon as it has bound part of the gang.
    let deadline = Instant::now() + Duration::from_secs(120);
    let at_kill = loop {
        let bound = bed.pods("big").bound();
        if bound > 0 {
            a.kill();
            break bound;
        }
        assert!(Instant::now() < deadline, "the leader bound nothing");
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!("e2e: killed replica-a with {at_kill} of {N} pods bound");
    assert!(at_kill < N, "the kill came after the whole gang was bound; nothing was tested");
    wait_leader(&mut bed, "replica-b");
    bed.wait_for(Duration::from_secs(180), "the whole gang bound", |bd| bd.pods("big").bound() == N);
    assert_gang_scheduled(&mut bed, "big", "gang", N);
    let bindings = bed.bindings();
    let gang: Vec<(&String, &usize)> = bindings.iter().filter(|(p, _)| p.starts_with("big/")).collect();
    assert_eq!(gang.len(), N, "every pod bound");
    assert!(gang.iter().all(|(_, n)| **n == 1), "a pod bound twice: {gang:?}");
    drop(b);
}

#[test]
fn the_api_server_killed_and_restarted_from_its_state_file_recovers() {
    let mut bed = two_racks(&[]);
    let serve = bed.serve("replica-a", "");
    wait_leader(&mut bed, "replica-a");
    bed.create_manifests("first", &rack_gang("first", "train", 4, "1"));
    bed.wait_for(Duration::from_secs(60), "the first gang bound", |b| b.pods("first").bound() == 4);
    let before = bed.pods("first").nodes();

    bed.kill_api();
    // A watch history of one change: serve's watches, back after the restart, are most
    // likely too old and must relist (410 Gone).
    bed.restart_api(&["--watch-cache-size", "1"]);
    assert_eq!(bed.pods("first").nodes(), before, "the restart kept every pod where it was");
    bed.create_manifests("second", &rack_gang("second", "train", 4, "1"));
    bed.wait_for(Duration::from_secs(90), "the second gang bound", |b| b.pods("second").bound() == 4);
    assert_gang_scheduled(&mut bed, "second", "train", 4);
    let log = serve.log_text();
    eprintln!(
        "e2e: serve relisted after the restart: {}",
        log.lines().filter(|l| l.contains("relisted")).count()
    );
}

#[test]
fn kubectl_creates_gets_describes_deletes_and_applies_the_examples() {
    let Driver::Kubectl(bin) = bed::driver() else {
        eprintln!("skipping: kubectl is not installed (set PLACER_E2E_KUBECTL or install kubernetes-client)");
        return;
    };
    eprintln!(
        "e2e: kubectl {}",
        String::from_utf8_lossy(
            &std::process::Command::new(&bin)
                .args(["version", "--client"])
                .output()
                .map(|o| o.stdout)
                .unwrap_or_default()
        )
        .trim()
    );
    let mut examples: Vec<_> = std::fs::read_dir(bed::workspace().join("examples"))
        .expect("examples/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    examples.sort();
    assert!(!examples.is_empty());
    for example in examples {
        eprintln!("e2e: example {}", example.display());
        let mut bed = Bed::start(BedOptions {
            scenario: Some(example.clone()),
            embedded_scheduler: true,
            ..BedOptions::default()
        });
        let manifests = std::process::Command::new(env!("CARGO_BIN_EXE_placer"))
            .args(["cluster", "--manifests"])
            .arg(&example)
            .output()
            .expect("placer cluster --manifests");
        assert!(manifests.status.success(), "{}", String::from_utf8_lossy(&manifests.stderr));
        let file = bed.file("submit.yaml", &String::from_utf8_lossy(&manifests.stdout));
        let file = file.to_str().unwrap_or_default().to_string();
        let created = bed.kubectl_ok(&["create", "-f", &file]);
        assert!(created.contains(" created"), "{created}");
        // The embedded scheduler places what fits.
        std::thread::sleep(Duration::from_secs(2));
        let wide = bed.kubectl_ok(&["get", "pods", "-A", "-o", "wide"]);
        eprintln!("$ kubectl get pods -A -o wide\n{wide}");
        assert!(
            wide.lines().next().is_some_and(|h| h.contains("NODE") && h.contains("NOMINATED NODE")),
            "{wide}"
        );
        let all = bed.get_json("/api/v1/pods");
        let nodes = bed::Pods(all["items"].as_array().cloned().unwrap_or_default()).nodes();
        assert!(nodes.values().all(|n| wide.contains(n.as_str())), "{wide}");
        let described = bed.kubectl_ok(&["describe", "pods", "-A"]);
        assert!(described.contains("Events:"), "{described}");
        bed.kubectl_ok(&["describe", "podgroups", "-A"]);
        bed.kubectl_ok(&["get", "podgroups,workloads,jobs,events", "-A", "-o", "wide"]);
        let deleted = bed.kubectl_ok(&["delete", "-f", &file]);
        assert!(deleted.contains(" deleted"), "{deleted}");
        let applied = bed.kubectl_ok(&["apply", "--server-side", "-f", &file]);
        assert!(applied.contains("serverside-applied"), "{applied}");
        let again = bed.kubectl_ok(&["apply", "--server-side", "-f", &file]);
        assert!(again.contains("serverside-applied"), "{again}");
        bed.kubectl_ok(&["delete", "-f", &file]);
    }
}

/// A pod asking for a GPU through a ResourceClaimTemplate: `placer cluster` runs the
/// ResourceClaim controller (kube-controller-manager's, in a real cluster), which
/// generates the pod's claim; `placer serve` (its own claim controller off) allocates a
/// device of the pod's node, writes `status.allocation` and `status.reservedFor` through
/// `resourceclaims/status`, then binds the pod, within deploy/'s base roles.
#[test]
fn a_pod_with_a_template_claim_gets_a_device_and_is_bound() {
    let mut bed = two_racks(&[]);
    let _serve = bed.serve("replica-a", "jobController: {enabled: false}\n");
    wait_leader(&mut bed, "replica-a");
    // Two GPUs on one node only: the pod must go there.
    let gpu_node = bed.node_labels().keys().last().cloned().expect("nodes");
    let manifests = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: dra}}\n---\n\
         apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: gpu.example.com}}\n\
         spec:\n  selectors: [{{cel: {{expression: 'device.driver == \"gpu.example.com\"'}}}}]\n---\n\
         apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: {gpu_node}-gpus}}\n\
         spec:\n  driver: gpu.example.com\n  nodeName: {gpu_node}\n\
         \x20 pool: {{name: {gpu_node}, generation: 1, resourceSliceCount: 1}}\n\
         \x20 devices: [{{name: gpu-0}}, {{name: gpu-1}}]\n---\n\
         apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {{name: one-gpu, namespace: dra}}\n\
         spec:\n  spec:\n    devices:\n      requests: [{{name: gpu, exactly: {{deviceClassName: gpu.example.com}}}}]\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {{name: trainer, namespace: dra}}\n\
         spec:\n  schedulerName: placer\n  resourceClaims: [{{name: gpu, resourceClaimTemplateName: one-gpu}}]\n\
         \x20 containers:\n  - name: main\n    image: registry.k8s.io/pause:3.10\n\
         \x20   resources: {{requests: {{cpu: 100m}}, claims: [{{name: gpu}}]}}\n"
    );
    let out = bed.create_manifests("dra", &manifests);
    assert!(out.contains("trainer created"), "{out}");
    bed.wait_for(Duration::from_secs(60), "the pod bound", |b| b.pods("dra").bound() == 1);
    let pods = bed.pods("dra");
    assert_eq!(pods.nodes().get("trainer"), Some(&gpu_node), "the pod went where the GPUs are");
    let claims = bed.get_json("/apis/resource.k8s.io/v1/namespaces/dra/resourceclaims");
    let claims = claims["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(claims.len(), 1, "{claims:?}");
    let claim = &claims[0];
    assert!(claim["metadata"]["name"].as_str().is_some_and(|n| n.starts_with("trainer-gpu-")), "{claim}");
    let result = &claim["status"]["allocation"]["devices"]["results"][0];
    assert_eq!(result["pool"], gpu_node.as_str(), "{claim}");
    assert_eq!(result["request"], "gpu", "{claim}");
    assert_eq!(claim["status"]["reservedFor"][0]["name"], "trainer", "{claim}");
    assert_eq!(claim["status"]["reservedFor"][0]["resource"], "pods", "{claim}");
    if let Driver::Kubectl(_) = bed.driver {
        let recorded = serve_requests(&bed);
        assert!(
            recorded.contains(&("resource.k8s.io".into(), "resourceclaims/status".into(), "update".into())),
            "{recorded:?}"
        );
        let mut granted = rbac::base();
        granted.extend(rbac::preemption());
        assert_allowed(&recorded, &granted);
    }
}
