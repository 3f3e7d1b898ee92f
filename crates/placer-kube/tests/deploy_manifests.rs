//! The manifests in `deploy/` agree with the code: the sample configuration is valid and
//! the RBAC rules allow every request `placer serve` makes, and nothing more.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use placer_api::k8s::api::core::v1::ConfigMap;
use placer_api::k8s::api::rbac::v1::PolicyRule;
use serde::Deserialize;

fn deploy(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy").join(file)
}

fn read(file: &str) -> String {
    std::fs::read_to_string(deploy(file)).unwrap_or_else(|e| panic!("deploy/{file}: {e}"))
}

#[test]
fn the_sample_configuration_is_valid() {
    let cm: ConfigMap = serde_saphyr::from_str(&read("config.yaml")).expect("a ConfigMap");
    let text = cm.data.as_ref().and_then(|d| d.get("config.yaml")).expect("data.config.yaml");
    let settings =
        placer_kube::config::parse(text, Path::new("deploy/config.yaml")).expect("a valid configuration");
    assert_eq!(settings.scheduler_name, "placer");
    assert!(settings.warnings.is_empty(), "{:?}", settings.warnings);
    let le = settings.leader_election.expect("leader election on");
    assert_eq!(le.namespace.as_deref(), Some("placer-system"));
}

#[derive(Deserialize)]
struct Doc {
    kind: String,
    #[serde(default)]
    rules: Vec<PolicyRule>,
}

/// (API group, resource, verb) allowed by the documents of kind `kind`.
fn allowed(kind: &str) -> BTreeSet<(String, String, String)> {
    let docs: Vec<Doc> = serde_saphyr::from_multiple(&read("rbac.yaml")).expect("RBAC documents");
    let mut out = BTreeSet::new();
    for doc in docs.into_iter().filter(|d| d.kind == kind) {
        for rule in doc.rules {
            for group in rule.api_groups.unwrap_or_default() {
                for resource in rule.resources.clone().unwrap_or_default() {
                    for verb in &rule.verbs {
                        out.insert((group.clone(), resource.clone(), verb.clone()));
                    }
                }
            }
        }
    }
    out
}

fn set(entries: &[(&str, &str, &[&str])]) -> BTreeSet<(String, String, String)> {
    entries
        .iter()
        .flat_map(|(g, r, verbs)| verbs.iter().map(move |v| (g.to_string(), r.to_string(), v.to_string())))
        .collect()
}

#[test]
fn rbac_allows_exactly_the_requests_placer_makes() {
    // Watchers: list + watch per kind. Scheduler: bind, pod and PodGroup status (PUT, GET
    // on conflict), PodGroup annotation (merge patch), evictions (delete). Job
    // controller: pods, Workloads and PodGroups created, pods deleted, Job status, finished
    // Jobs deleted, blockOwnerDeletion on Job-owned objects (jobs/finalizers). Events:
    // create, and patch for series.
    let expected = set(&[
        ("", "nodes", &["list", "watch"]),
        ("", "pods", &["get", "list", "watch", "create", "delete"]),
        ("", "pods/binding", &["create"]),
        ("", "pods/status", &["update"]),
        ("scheduling.k8s.io", "podgroups", &["get", "list", "watch", "create", "patch"]),
        ("scheduling.k8s.io", "podgroups/status", &["update"]),
        ("scheduling.k8s.io", "workloads", &["list", "watch", "create"]),
        ("scheduling.k8s.io", "priorityclasses", &["list", "watch"]),
        ("policy", "poddisruptionbudgets", &["list", "watch"]),
        ("batch", "jobs", &["get", "list", "watch", "delete"]),
        ("batch", "jobs/status", &["update"]),
        ("batch", "jobs/finalizers", &["update"]),
        ("events.k8s.io", "events", &["create", "patch"]),
    ]);
    assert_eq!(allowed("ClusterRole"), expected);
    // kube-lease-manager: read, create when missing, take/renew with patches; namespaced.
    assert_eq!(allowed("Role"), set(&[("coordination.k8s.io", "leases", &["get", "create", "patch"])]));
}

#[test]
fn the_deployment_probes_the_endpoints_and_passes_the_pod_identity() {
    let text = read("deployment.yaml");
    for needle in [
        "path: /healthz",
        "path: /readyz",
        "fieldPath: metadata.name",
        "fieldPath: metadata.namespace",
        "--config, /etc/placer/config.yaml",
        "serviceAccountName: placer",
    ] {
        assert!(text.contains(needle), "deploy/deployment.yaml lacks {needle:?}");
    }
}
