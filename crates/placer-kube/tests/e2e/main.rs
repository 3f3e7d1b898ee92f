//! End-to-end scenarios against a real cluster.
//!
//! Every file in `tests/e2e/scenarios/` (or `$PLACER_E2E_SCENARIOS`) is parsed and
//! checked always. The cluster part runs only when `KUBECONFIG` is set; otherwise the test
//! prints a skip notice and passes. With a cluster, each scenario gets its own namespace:
//! its PodGroups and pods are created there (pods naming `schedulerName: placer` are
//! pointed at the scheduler under test), the expectations are polled until they hold or
//! `boundWithinSeconds` passes, and the namespace is deleted.
//!
//! The scheduler under test is started in this process (leader election off, a unique
//! scheduler name so it never competes with a deployed Placer) unless
//! `PLACER_E2E_SCHEDULER_NAME` names a scheduler already running in the cluster.
//!
//! The cluster needs the `scheduling.k8s.io/v1alpha2` API (see `docs/serve.md`).
//!
//! Scenario format:
//! ```yaml
//! name: gang-in-one-rack
//! description: ...
//! requires: {nodeLabel: topology.example.com/rack}   # optional: skipped if no node has it
//! podGroups: [<PodGroup>, ...]
//! pods: [<Pod>, ...]
//! expect:
//!   boundWithinSeconds: 120
//!   boundPods: 4               # default: every pod
//!   sameDomain: <label key>    # bound pods of each PodGroup share one value of it
//!   podGroupScheduled: true    # the PodGroupScheduled condition of every PodGroup
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use placer_api::k8s::api::core::v1::{Namespace, Node, Pod};
use placer_api::k8s::api::scheduling::v1alpha2::PodGroup;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Scenario {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    requires: Requires,
    #[serde(default)]
    pod_groups: Vec<PodGroup>,
    #[serde(default)]
    pods: Vec<Pod>,
    expect: Expect,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Requires {
    node_label: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Expect {
    bound_within_seconds: u64,
    bound_pods: Option<usize>,
    same_domain: Option<String>,
    pod_group_scheduled: Option<bool>,
}

fn scenario_dir() -> PathBuf {
    std::env::var_os("PLACER_E2E_SCENARIOS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/scenarios"))
}

fn load_scenarios() -> Vec<(PathBuf, Scenario)> {
    let dir = scenario_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let scenario: Scenario =
                serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            validate(&path, &scenario);
            (path, scenario)
        })
        .collect()
}

fn validate(path: &Path, s: &Scenario) {
    assert!(!s.name.is_empty(), "{}: name must not be empty", path.display());
    assert!(!s.pods.is_empty(), "{}: pods must not be empty", path.display());
    for (i, pod) in s.pods.iter().enumerate() {
        assert!(pod.metadata.name.is_some(), "{}: pods[{i}].metadata.name is required", path.display());
        assert!(pod.spec.is_some(), "{}: pods[{i}].spec is required", path.display());
    }
    for (i, pg) in s.pod_groups.iter().enumerate() {
        assert!(pg.metadata.name.is_some(), "{}: podGroups[{i}].metadata.name is required", path.display());
    }
    if let Some(n) = s.expect.bound_pods {
        assert!(n <= s.pods.len(), "{}: expect.boundPods exceeds the number of pods", path.display());
    }
}

#[test]
fn scenarios_run_against_the_cluster_in_kubeconfig() {
    let scenarios = load_scenarios();
    assert!(!scenarios.is_empty(), "no scenario in {}", scenario_dir().display());
    if std::env::var_os("KUBECONFIG").is_none_or(|v| v.is_empty()) {
        eprintln!(
            "skipping the e2e scenarios: KUBECONFIG is not set ({} scenario files parsed and validated; \
             set KUBECONFIG to a cluster serving scheduling.k8s.io/v1alpha2 to run them)",
            scenarios.len()
        );
        return;
    }
    placer_kube::serve::install_crypto_provider();
    placer_kube::serve::init_logging(false);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    let failures = runtime.block_on(run_all(scenarios));
    assert!(failures.is_empty(), "failed scenarios:\n{}", failures.join("\n"));
}

fn suffix() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    format!("{:06x}", h.finish() & 0xff_ffff)
}

async fn run_all(scenarios: Vec<(PathBuf, Scenario)>) -> Vec<String> {
    let client = Client::try_default().await.expect("a client for KUBECONFIG");
    let pod_groups: Api<PodGroup> = Api::all(client.clone());
    if let Err(e) = pod_groups.list(&ListParams::default().limit(1)).await {
        return vec![format!("the cluster does not serve scheduling.k8s.io/v1alpha2 PodGroups: {e}")];
    }

    let (scheduler_name, stop) = match std::env::var("PLACER_E2E_SCHEDULER_NAME") {
        Ok(name) if !name.is_empty() => (name, None),
        _ => {
            let name = format!("placer-e2e-{}", suffix());
            let config = format!(
                "schedulerName: {name}\nleaderElection: {{enabled: false}}\nmetricsAddr: 127.0.0.1:0\n"
            );
            let settings =
                placer_kube::config::parse(&config, Path::new("e2e.yaml")).expect("a valid configuration");
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            let task = tokio::spawn(placer_kube::serve::run(
                client.clone(),
                settings,
                placer_kube::StoreOptions::default(),
                async {
                    let _ = rx.await;
                },
            ));
            (name, Some((tx, task)))
        }
    };
    eprintln!("e2e: scheduler under test: {scheduler_name}");

    let mut failures = Vec::new();
    for (path, scenario) in &scenarios {
        match run_one(&client, &scheduler_name, scenario).await {
            Ok(Outcome::Passed) => eprintln!("e2e: {} passed", scenario.name),
            Ok(Outcome::Skipped(why)) => eprintln!("e2e: {} skipped: {why}", scenario.name),
            Err(why) => failures.push(format!("{} ({}): {why}", scenario.name, path.display())),
        }
    }
    if let Some((tx, task)) = stop {
        let _ = tx.send(());
        match task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(format!("the in-process scheduler failed: {e:#}")),
            Err(e) => failures.push(format!("the in-process scheduler panicked: {e}")),
        }
    }
    failures
}

enum Outcome {
    Passed,
    Skipped(String),
}

async fn run_one(client: &Client, scheduler_name: &str, s: &Scenario) -> Result<Outcome, String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node_list = nodes.list(&ListParams::default()).await.map_err(|e| format!("listing nodes: {e}"))?;
    if let Some(label) = &s.requires.node_label {
        let labelled = node_list
            .items
            .iter()
            .filter(|n| n.metadata.labels.as_ref().is_some_and(|l| l.contains_key(label)));
        if labelled.count() == 0 {
            return Ok(Outcome::Skipped(format!("no node has the label {label}")));
        }
    }
    let node_labels: BTreeMap<String, BTreeMap<String, String>> = node_list
        .items
        .iter()
        .map(|n| (n.metadata.name.clone().unwrap_or_default(), n.metadata.labels.clone().unwrap_or_default()))
        .collect();

    let namespace = format!("placer-e2e-{}-{}", s.name, suffix());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(namespace.clone());
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .map_err(|e| format!("creating namespace {namespace}: {e}"))?;
    eprintln!("e2e: {} in namespace {namespace}: {}", s.name, s.description);

    let result = exercise(client, &namespace, scheduler_name, s, &node_labels).await;
    if let Err(e) = namespaces.delete(&namespace, &DeleteParams::background()).await {
        eprintln!("e2e: could not delete namespace {namespace}: {e}");
    }
    result.map(|()| Outcome::Passed)
}

async fn exercise(
    client: &Client,
    namespace: &str,
    scheduler_name: &str,
    s: &Scenario,
    node_labels: &BTreeMap<String, BTreeMap<String, String>>,
) -> Result<(), String> {
    let pod_groups: Api<PodGroup> = Api::namespaced(client.clone(), namespace);
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    for pg in &s.pod_groups {
        let mut pg = pg.clone();
        pg.metadata.namespace = Some(namespace.to_string());
        pod_groups
            .create(&PostParams::default(), &pg)
            .await
            .map_err(|e| format!("creating a PodGroup: {e}"))?;
    }
    for pod in &s.pods {
        let mut pod = pod.clone();
        pod.metadata.namespace = Some(namespace.to_string());
        if let Some(spec) = pod.spec.as_mut() {
            if spec.scheduler_name.as_deref() == Some("placer") {
                spec.scheduler_name = Some(scheduler_name.to_string());
            }
        }
        pods.create(&PostParams::default(), &pod).await.map_err(|e| format!("creating a pod: {e}"))?;
    }

    let want_bound = s.expect.bound_pods.unwrap_or(s.pods.len());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(s.expect.bound_within_seconds);
    loop {
        let verdict = check(&pods, &pod_groups, s, want_bound, node_labels).await;
        let timed_out = tokio::time::Instant::now() >= deadline;
        match verdict {
            // Expecting nothing bound: it must still hold at the deadline.
            Ok(()) if want_bound == 0 && !timed_out => {}
            Ok(()) => return Ok(()),
            Err(why) if timed_out => return Err(why),
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn check(
    pods: &Api<Pod>,
    pod_groups: &Api<PodGroup>,
    s: &Scenario,
    want_bound: usize,
    node_labels: &BTreeMap<String, BTreeMap<String, String>>,
) -> Result<(), String> {
    let list = pods.list(&ListParams::default()).await.map_err(|e| format!("listing pods: {e}"))?;
    let bound: Vec<&Pod> =
        list.items.iter().filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some())).collect();
    if bound.len() != want_bound {
        return Err(format!("{} of {} pods bound, expected {want_bound}", bound.len(), list.items.len()));
    }
    if let Some(key) = &s.expect.same_domain {
        let mut domains: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
        for pod in &bound {
            let spec = pod.spec.as_ref().ok_or("a pod without spec")?;
            let group =
                spec.scheduling_group.as_ref().and_then(|g| g.pod_group_name.clone()).unwrap_or_default();
            let node = spec.node_name.clone().unwrap_or_default();
            let value =
                node_labels.get(&node).and_then(|l| l.get(key)).cloned().unwrap_or_else(|| "<none>".into());
            domains.entry(group).or_default().insert(value);
        }
        for (group, values) in domains {
            if values.len() != 1 {
                return Err(format!("PodGroup {group:?} spans several {key} domains: {values:?}"));
            }
        }
    }
    if let Some(want) = s.expect.pod_group_scheduled {
        for pg in
            pod_groups.list(&ListParams::default()).await.map_err(|e| format!("listing PodGroups: {e}"))?
        {
            let scheduled = pg
                .status
                .as_ref()
                .and_then(|st| st.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "PodGroupScheduled"))
                .is_some_and(|c| c.status == "True");
            if scheduled != want {
                return Err(format!(
                    "PodGroup {} has PodGroupScheduled={scheduled}, expected {want}",
                    pg.metadata.name.unwrap_or_default()
                ));
            }
        }
    }
    Ok(())
}
