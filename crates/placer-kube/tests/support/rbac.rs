//! The RBAC rules of `deploy/` as (API group, resource, verb) triples.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use placer_api::k8s::api::rbac::v1::PolicyRule;
use serde::Deserialize;

pub type Rules = BTreeSet<(String, String, String)>;

pub fn deploy(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy").join(file)
}

pub fn read(file: &str) -> String {
    std::fs::read_to_string(deploy(file)).unwrap_or_else(|e| panic!("deploy/{file}: {e}"))
}

#[derive(Deserialize)]
struct Meta {
    #[serde(default)]
    name: String,
}

#[derive(Deserialize)]
struct Doc {
    kind: String,
    metadata: Meta,
    #[serde(default)]
    rules: Vec<PolicyRule>,
}

/// The rules of the role `kind`/`name` in `file`.
pub fn rules(file: &str, kind: &str, name: &str) -> Rules {
    let docs: Vec<Doc> = serde_saphyr::from_multiple(&read(file)).expect("RBAC documents");
    let mut out = BTreeSet::new();
    let mut found = false;
    for doc in docs.into_iter().filter(|d| d.kind == kind && d.metadata.name == name) {
        found = true;
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
    assert!(found, "deploy/{file} has no {kind} {name}");
    out
}

pub fn set(entries: &[(&str, &str, &[&str])]) -> Rules {
    entries
        .iter()
        .flat_map(|(g, r, verbs)| verbs.iter().map(move |v| (g.to_string(), r.to_string(), v.to_string())))
        .collect()
}

/// The scheduler's role (`placer`).
pub fn base() -> Rules {
    rules("rbac.yaml", "ClusterRole", "placer")
}

/// Preemption's role (`placer-preemption`).
pub fn preemption() -> Rules {
    rules("rbac.yaml", "ClusterRole", "placer-preemption")
}

/// The Job integration's role (`placer-job-controller`, in its component).
pub fn job_controller() -> Rules {
    rules("components/job-controller/rbac.yaml", "ClusterRole", "placer-job-controller")
}

/// Placer's ResourceClaim controller's role (`placer-resourceclaim-controller`, in its
/// component).
pub fn resourceclaim_controller() -> Rules {
    rules("components/resourceclaim-controller/rbac.yaml", "ClusterRole", "placer-resourceclaim-controller")
}
