//! The manifests in `deploy/` agree with the code: the sample configuration is valid, the
//! roles are split by duty (scheduling, preemption, the optional Job integration), and
//! `tests/serve_fake_api.rs` checks them against the requests a run actually makes.

use std::path::Path;

use placer_api::k8s::api::core::v1::ConfigMap;

#[path = "support/rbac.rs"]
mod rbac;

use rbac::read;

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

#[test]
fn the_base_role_schedules_and_the_job_integration_has_its_own_optional_role() {
    // What the scheduler's calls need (watches of the kinds it reads; bind; pod and
    // PodGroup status, GET on a status conflict; the PodGroup annotation patch; events
    // and their series) and nothing else: no pod create or delete.
    assert_eq!(
        rbac::base(),
        rbac::set(&[
            ("", "nodes", &["list", "watch"]),
            ("", "pods", &["get", "list", "watch"]),
            ("", "pods/binding", &["create"]),
            ("", "pods/status", &["update"]),
            ("scheduling.k8s.io", "podgroups", &["get", "list", "watch", "patch"]),
            ("scheduling.k8s.io", "podgroups/status", &["update"]),
            ("scheduling.k8s.io", "priorityclasses", &["list", "watch"]),
            ("policy", "poddisruptionbudgets", &["list", "watch"]),
            ("", "namespaces", &["list", "watch"]),
            ("resource.k8s.io", "deviceclasses", &["list", "watch"]),
            ("resource.k8s.io", "resourceslices", &["list", "watch"]),
            ("resource.k8s.io", "resourceclaims", &["get", "list", "watch"]),
            ("resource.k8s.io", "resourceclaims/status", &["update"]),
            ("", "persistentvolumeclaims", &["list", "watch", "patch"]),
            ("", "persistentvolumes", &["list", "watch", "patch"]),
            ("storage.k8s.io", "storageclasses", &["list", "watch"]),
            ("storage.k8s.io", "csinodes", &["list", "watch"]),
            ("storage.k8s.io", "csidrivers", &["list", "watch"]),
            ("storage.k8s.io", "csistoragecapacities", &["list", "watch"]),
            ("storage.k8s.io", "volumeattachments", &["list", "watch"]),
            ("events.k8s.io", "events", &["create", "patch"]),
        ])
    );
    // The scheduler never creates, changes or deletes a claim: only its status.
    assert!(!rbac::base().iter().any(|(g, r, v)| g == "resource.k8s.io"
        && r == "resourceclaims"
        && ["create", "update", "patch", "delete"].contains(&v.as_str())));
    // Placer's ResourceClaim controller, in a component of its own.
    assert_eq!(
        rbac::resourceclaim_controller(),
        rbac::set(&[
            ("resource.k8s.io", "resourceclaimtemplates", &["list", "watch"]),
            ("resource.k8s.io", "resourceclaims", &["create", "delete"]),
            ("", "pods/finalizers", &["update"]),
            ("scheduling.k8s.io", "podgroups/finalizers", &["update"]),
        ])
    );
    assert!(!rbac::base()
        .iter()
        .any(|(g, r, v)| g.is_empty() && r == "pods" && (v == "create" || v == "delete")));
    // Preemption deletes its victims, in a role of its own.
    assert_eq!(rbac::preemption(), rbac::set(&[("", "pods", &["delete"])]));
    // The Job integration: its pods, Workloads and PodGroups, its Jobs.
    assert_eq!(
        rbac::job_controller(),
        rbac::set(&[
            ("", "pods", &["create", "delete"]),
            ("batch", "jobs", &["get", "list", "watch", "delete"]),
            ("batch", "jobs/status", &["update"]),
            ("batch", "jobs/finalizers", &["update"]),
            ("scheduling.k8s.io", "workloads", &["list", "watch", "create"]),
            ("scheduling.k8s.io", "podgroups", &["create"]),
        ])
    );
    // kube-lease-manager: read, create when missing, take/renew with patches; namespaced.
    assert_eq!(
        rbac::rules("rbac.yaml", "Role", "placer-leader-election"),
        rbac::set(&[("coordination.k8s.io", "leases", &["get", "create", "patch"])])
    );
}

#[test]
fn the_job_integration_is_bound_and_enabled_only_through_its_component() {
    let base_kustomization = rbac::read("kustomization.yaml");
    assert!(!base_kustomization.contains("job-controller"), "the base does not bind the Job role");
    let component = rbac::read("components/job-controller/kustomization.yaml");
    assert!(component.contains("kind: Component") && component.contains("rbac.yaml"));
    let overlay = rbac::read("overlays/with-jobs/kustomization.yaml");
    assert!(overlay.contains("../../components/job-controller"));

    let settings = |file: &str| {
        let cm: ConfigMap = serde_saphyr::from_str(&rbac::read(file)).expect("a ConfigMap");
        let text = cm.data.as_ref().and_then(|d| d.get("config.yaml")).expect("data.config.yaml").clone();
        placer_kube::config::parse(&text, Path::new(file)).expect("a valid configuration")
    };
    let base = settings("config.yaml");
    let with_jobs = settings("components/job-controller/config.yaml");
    assert!(!base.job_controller, "the base configuration leaves Jobs to kube-controller-manager");
    assert!(with_jobs.job_controller);
    // Everything else is the same configuration.
    assert_eq!(format!("{:?}", base.scheduler), format!("{:?}", with_jobs.scheduler));
    assert_eq!(base.leader_election, with_jobs.leader_election);
    assert_eq!(
        (base.rate_limit, base.binding_concurrency),
        (with_jobs.rate_limit, with_jobs.binding_concurrency)
    );
    assert_eq!(base.metrics_addr, with_jobs.metrics_addr);
    assert!(!base.resource_claim_controller && !with_jobs.resource_claim_controller);
}

#[test]
fn the_resourceclaim_controller_is_bound_and_enabled_only_through_its_component() {
    let base_kustomization = rbac::read("kustomization.yaml");
    assert!(!base_kustomization.contains("resourceclaim"), "the base does not bind the claim role");
    let component = rbac::read("components/resourceclaim-controller/kustomization.yaml");
    assert!(component.contains("kind: Component") && component.contains("rbac.yaml"));
    let overlay = rbac::read("overlays/with-claim-controller/kustomization.yaml");
    assert!(overlay.contains("../../components/resourceclaim-controller"));
    let settings = |file: &str| {
        let cm: ConfigMap = serde_saphyr::from_str(&rbac::read(file)).expect("a ConfigMap");
        let text = cm.data.as_ref().and_then(|d| d.get("config.yaml")).expect("data.config.yaml").clone();
        placer_kube::config::parse(&text, Path::new(file)).expect("a valid configuration")
    };
    let base = settings("config.yaml");
    let with_claims = settings("components/resourceclaim-controller/config.yaml");
    assert!(!base.resource_claim_controller, "the base leaves claims to kube-controller-manager");
    assert!(with_claims.resource_claim_controller);
    assert_eq!(format!("{:?}", base.scheduler), format!("{:?}", with_claims.scheduler));
    assert_eq!(base.leader_election, with_claims.leader_election);
    assert_eq!(base.job_controller, with_claims.job_controller);
    assert_eq!(base.metrics_addr, with_claims.metrics_addr);
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
