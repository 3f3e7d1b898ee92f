//! The Job controller against the embedded cluster: each test is one behaviour of seed 001
//! / SEMANTICS §14 or of the Job lifecycle.

use placer_api::annotations;
use placer_api::gates::FeatureGates;
use placer_api::k8s::api::batch::v1::{Job, JobSpec, JobStatus};
use placer_api::k8s::api::core::v1::{
    Container, Node, Pod, PodSchedulingGroup, PodSpec, PodStatus, PodTemplateSpec,
};
use placer_api::k8s::api::scheduling::v1alpha2::{
    BasicSchedulingPolicy, GangSchedulingPolicy, PodGroup, PodGroupSchedulingPolicy, PodGroupSpec,
    PodGroupTemplate, TypedLocalObjectReference, Workload, WorkloadSpec,
};
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use placer_cluster::embedded::EmbeddedCluster;
use placer_cluster::{ClusterStore, Kind, Object, ObjectRef, StoreError};
use serde_json::json;

use super::*;

// ---------------------------------------------------------------------------------------
// Harness

fn gates(overrides: &[(&str, bool)]) -> FeatureGates {
    FeatureGates::with_overrides(overrides.iter().copied()).unwrap()
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta { name: Some(name.into()), namespace: Some("default".into()), ..ObjectMeta::default() }
}

struct Sim {
    store: EmbeddedCluster,
    jobs: JobController,
    /// Bind every unbound pod to node `n1` after each controller pass (a stand-in for the
    /// scheduler).
    bind: bool,
}

impl Sim {
    fn new(g: FeatureGates) -> Sim {
        let mut store = EmbeddedCluster::new();
        store.add_admission(Box::new(JobValidation::new(g.clone())));
        store
            .create(Object::node(Node {
                metadata: ObjectMeta { name: Some("n1".into()), ..ObjectMeta::default() },
                ..Node::default()
            }))
            .unwrap();
        Sim { store, jobs: JobController::new(g), bind: false }
    }

    fn binding(mut self) -> Sim {
        self.bind = true;
        self
    }

    /// Runs the controller (and the stand-in scheduler) until nothing changes.
    fn settle(&mut self) {
        for _ in 0..100 {
            let wrote = self.jobs.reconcile(&mut self.store).unwrap();
            let bound = self.bind && self.bind_all();
            if !wrote && !bound {
                return;
            }
        }
        panic!("the controller did not settle");
    }

    fn bind_all(&mut self) -> bool {
        let mut bound = false;
        for pod in self.pods() {
            if !pods::is_bound(&pod) && pods::is_active(&pod) {
                let (ns, name, uid) =
                    (pod.metadata.namespace.unwrap(), pod.metadata.name.unwrap(), pod.metadata.uid.unwrap());
                self.store.bind(&ns, &name, &uid, "n1").unwrap();
                bound = true;
            }
        }
        bound
    }

    /// Advances the virtual clock to the controller's next wake-up (at most `limit_ms`
    /// ahead) and settles.
    fn advance(&mut self, ms: u64) {
        let target = self.store.now_ms() + ms;
        while let Some(at) = self.jobs.next_wakeup_ms().filter(|at| *at <= target) {
            self.store.set_now_ms(at.max(self.store.now_ms()));
            self.settle();
        }
        self.store.set_now_ms(target);
        self.settle();
    }

    fn submit(&mut self, obj: Object) -> Object {
        self.store.create(obj).unwrap()
    }

    fn job(&self, name: &str) -> Job {
        match self.store.get(&ObjectRef::new(Kind::Job, "default", name)) {
            Some(Object::Job(j)) => *j,
            other => panic!("no Job {name}: {other:?}"),
        }
    }

    fn status(&self, name: &str) -> JobStatus {
        self.job(name).status.unwrap_or_default()
    }

    fn pods(&self) -> Vec<Pod> {
        self.store.list(Kind::Pod).into_iter().filter_map(|o| o.as_pod().cloned()).collect()
    }

    fn active_pods(&self) -> Vec<Pod> {
        self.pods().into_iter().filter(pods::is_active).collect()
    }

    fn workloads(&self) -> Vec<Workload> {
        self.store
            .list(Kind::Workload)
            .into_iter()
            .filter_map(|o| if let Object::Workload(w) = o { Some(w) } else { None })
            .collect()
    }

    fn pod_groups(&self) -> Vec<PodGroup> {
        self.store
            .list(Kind::PodGroup)
            .into_iter()
            .filter_map(|o| if let Object::PodGroup(p) = o { Some(p) } else { None })
            .collect()
    }

    fn events(&self, reason: &str) -> Vec<String> {
        self.store.events().into_iter().filter(|e| e.reason == reason).map(|e| e.note).collect()
    }

    fn set_pod_phase(&mut self, pod: &Pod, phase: &str) {
        let mut p = pod.clone();
        p.status = Some(PodStatus { phase: Some(phase.into()), ..p.status.clone().unwrap_or_default() });
        self.store.update_status(Object::Pod(p.into())).unwrap();
    }

    fn patch_job(&mut self, name: &str, patch: serde_json::Value) -> Result<Object, StoreError> {
        self.store.merge_patch(&ObjectRef::new(Kind::Job, "default", name), &patch)
    }
}

fn job(name: &str, parallelism: Option<i32>, completions: Option<i32>, mode: Option<&str>) -> Job {
    Job {
        metadata: meta(name),
        spec: Some(JobSpec {
            parallelism,
            completions,
            completion_mode: mode.map(str::to_string),
            template: PodTemplateSpec {
                metadata: None,
                spec: Some(PodSpec {
                    restart_policy: Some("Never".into()),
                    containers: vec![Container {
                        name: "worker".into(),
                        image: Some("trainer".into()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        status: None,
    }
}

fn gang_job(name: &str, n: i32) -> Job {
    job(name, Some(n), Some(n), Some("Indexed"))
}

fn with_template_annotation(mut j: Job, key: &str, value: &str) -> Job {
    if let Some(spec) = j.spec.as_mut() {
        let m = spec.template.metadata.get_or_insert_with(ObjectMeta::default);
        m.annotations.get_or_insert_with(Default::default).insert(key.into(), value.into());
    }
    j
}

fn with_scheduling_group(mut j: Job, pg: &str) -> Job {
    if let Some(s) = j.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        s.scheduling_group = Some(PodSchedulingGroup { pod_group_name: Some(pg.into()) });
    }
    j
}

fn scheduling_group(pod: &Pod) -> Option<String> {
    pod.spec.as_ref()?.scheduling_group.as_ref()?.pod_group_name.clone()
}

fn job_uid(obj: &Object) -> String {
    obj.metadata().uid.clone().unwrap()
}

fn owner(kind: &str, name: &str, uid: &str, controller: bool) -> OwnerReference {
    OwnerReference {
        api_version: if kind == "Job" { "batch/v1".into() } else { "scheduling.k8s.io/v1alpha2".into() },
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: controller.then_some(true),
        block_owner_deletion: controller.then_some(true),
    }
}

fn user_workload(name: &str, job: &str, templates: usize, owner_ref: Option<OwnerReference>) -> Workload {
    Workload {
        metadata: ObjectMeta { owner_references: owner_ref.map(|o| vec![o]), ..meta(name) },
        spec: WorkloadSpec {
            controller_ref: Some(TypedLocalObjectReference {
                api_group: Some("batch".into()),
                kind: "Job".into(),
                name: job.into(),
            }),
            pod_group_templates: (0..templates)
                .map(|i| PodGroupTemplate {
                    name: format!("tpl-{i}"),
                    scheduling_policy: PodGroupSchedulingPolicy {
                        gang: Some(GangSchedulingPolicy { min_count: 4 }),
                        basic: None,
                    },
                    ..PodGroupTemplate::default()
                })
                .collect(),
        },
    }
}

fn standalone_pod_group(name: &str, gang: bool, owner_ref: Option<OwnerReference>) -> PodGroup {
    PodGroup {
        metadata: ObjectMeta { owner_references: owner_ref.map(|o| vec![o]), ..meta(name) },
        spec: PodGroupSpec {
            scheduling_policy: if gang {
                PodGroupSchedulingPolicy { gang: Some(GangSchedulingPolicy { min_count: 4 }), basic: None }
            } else {
                PodGroupSchedulingPolicy { gang: None, basic: Some(BasicSchedulingPolicy::default()) }
            },
            ..PodGroupSpec::default()
        },
        status: None,
    }
}

// ---------------------------------------------------------------------------------------
// Workload / PodGroup integration (SEMANTICS §14)

#[test]
fn an_eligible_indexed_job_gets_a_workload_then_a_pod_group_then_pods() {
    let mut sim = Sim::new(FeatureGates::default());
    let job_obj = sim.submit(Object::Job(Box::new(gang_job("train", 4))));
    let uid = job_uid(&job_obj);
    sim.settle();

    let [wl] = sim.workloads().try_into().unwrap();
    assert_eq!(wl.metadata.name.as_deref(), Some(naming::workload_name("train", &uid).as_str()));
    assert_eq!(wl.metadata.owner_references, Some(vec![owner("Job", "train", &uid, true)]));
    assert_eq!(wl.spec.pod_group_templates[0].name, "train-pgt-0");
    assert_eq!(wl.spec.pod_group_templates[0].scheduling_policy.gang.as_ref().map(|g| g.min_count), Some(4));

    let [pg] = sim.pod_groups().try_into().unwrap();
    let wl_name = wl.metadata.name.clone().unwrap();
    assert_eq!(pg.metadata.name, Some(naming::pod_group_name(&wl_name, "train-pgt-0")));
    let wl_uid = wl.metadata.uid.clone().unwrap();
    assert_eq!(
        pg.metadata.owner_references,
        Some(vec![owner("Job", "train", &uid, true), owner("Workload", &wl_name, &wl_uid, false)])
    );

    let pods = sim.pods();
    assert_eq!(pods.len(), 4);
    let mut indexes: Vec<String> = pods
        .iter()
        .map(|p| p.metadata.annotations.as_ref().unwrap()[annotations::JOB_COMPLETION_INDEX].clone())
        .collect();
    indexes.sort();
    assert_eq!(indexes, ["0", "1", "2", "3"]);
    for p in &pods {
        assert_eq!(scheduling_group(p), pg.metadata.name);
        assert_eq!(
            p.metadata.owner_references,
            Some(vec![owner("Job", "train", &uid, true)]),
            "no PodGroup ownerRef in v1.36"
        );
    }

    // Creation order in the watch log: Workload, PodGroup, then pods.
    let rv = |m: &ObjectMeta| m.resource_version.as_deref().unwrap().parse::<u64>().unwrap();
    let created_rv = |kind: Kind| {
        sim.store
            .watch_since(0)
            .into_iter()
            .find(|e| e.object.kind() == kind)
            .map(|e| e.resource_version)
            .unwrap()
    };
    assert!(created_rv(Kind::Workload) < created_rv(Kind::PodGroup));
    assert!(created_rv(Kind::PodGroup) < created_rv(Kind::Pod));
    assert!(rv(&wl.metadata) < rv(&pg.metadata));

    assert_eq!(sim.events("WorkloadCreated"), [format!("Created Workload {wl_name} for Job train")]);
    assert_eq!(sim.events("PodGroupCreated").len(), 1);
    assert_eq!(sim.events("SuccessfulCreate").len(), 4);
    assert_eq!(sim.status("train").active, Some(4));
}

#[test]
fn jobs_that_are_not_gang_shaped_run_pod_by_pod() {
    for (name, j) in [
        ("parallelism-one", job("parallelism-one", Some(1), Some(1), Some("Indexed"))),
        ("non-indexed", job("non-indexed", Some(4), Some(4), Some("NonIndexed"))),
        ("default-mode", job("default-mode", Some(4), Some(4), None)),
        ("completions-differ", job("completions-differ", Some(2), Some(4), Some("Indexed"))),
    ] {
        let mut sim = Sim::new(FeatureGates::default());
        sim.submit(Object::Job(Box::new(j)));
        sim.settle();
        assert!(sim.workloads().is_empty() && sim.pod_groups().is_empty(), "{name}");
        assert!(!sim.pods().is_empty(), "{name}: pods are created");
        assert!(sim.pods().iter().all(|p| scheduling_group(p).is_none()), "{name}");
    }
}

#[test]
fn with_the_gate_off_a_gang_shaped_job_runs_pod_by_pod() {
    let mut sim = Sim::new(gates(&[("WorkloadWithJob", false)]));
    sim.submit(Object::Job(Box::new(gang_job("train", 4))));
    sim.settle();
    assert!(sim.workloads().is_empty() && sim.pod_groups().is_empty());
    assert_eq!(sim.pods().len(), 4);
}

#[test]
fn a_preset_scheduling_group_opts_out_and_pods_keep_it() {
    let mut sim = Sim::new(FeatureGates::default());
    sim.submit(Object::Job(Box::new(with_scheduling_group(gang_job("train", 4), "existing-pg"))));
    sim.settle();
    assert!(sim.workloads().is_empty() && sim.pod_groups().is_empty());
    assert!(sim.pods().iter().all(|p| scheduling_group(p).as_deref() == Some("existing-pg")));
}

#[test]
fn a_user_workload_not_owned_by_the_job_makes_it_fall_back_with_a_warning() {
    let mut sim = Sim::new(FeatureGates::default());
    sim.submit(Object::Workload(user_workload("user-created-workload", "train", 1, None)));
    sim.submit(Object::Job(Box::new(gang_job("train", 4))));
    sim.settle();
    assert_eq!(sim.workloads().len(), 1, "no second Workload");
    assert!(sim.pod_groups().is_empty());
    assert_eq!(sim.pods().len(), 4);
    assert!(sim.pods().iter().all(|p| scheduling_group(p).is_none()));
    let warnings = sim.events("GangSchedulingFallback");
    assert_eq!(warnings.len(), 1, "recorded once: {warnings:?}");
    assert!(warnings[0].contains("user-created-workload"));
}

#[test]
fn a_workload_controlled_by_the_job_is_found_by_reference_whatever_its_name() {
    let mut sim = Sim::new(FeatureGates::default());
    let job_obj = sim.submit(Object::Job(Box::new(gang_job("train", 4))));
    let uid = job_uid(&job_obj);
    sim.submit(Object::Workload(user_workload(
        "any-name",
        "train",
        1,
        Some(owner("Job", "train", &uid, true)),
    )));
    sim.settle();
    assert_eq!(sim.workloads().len(), 1, "no Workload created");
    let [pg] = sim.pod_groups().try_into().unwrap();
    assert_eq!(pg.metadata.name, Some(naming::pod_group_name("any-name", "tpl-0")));
    assert!(sim.pods().iter().all(|p| scheduling_group(p) == pg.metadata.name));
}

#[test]
fn a_workload_with_two_templates_or_two_workloads_make_the_job_fall_back() {
    for (case, extra) in [("two templates", false), ("two workloads", true)] {
        let mut sim = Sim::new(FeatureGates::default());
        let job_obj = sim.submit(Object::Job(Box::new(gang_job("train", 4))));
        let uid = job_uid(&job_obj);
        let templates = if extra { 1 } else { 2 };
        sim.submit(Object::Workload(user_workload(
            "a",
            "train",
            templates,
            Some(owner("Job", "train", &uid, true)),
        )));
        if extra {
            sim.submit(Object::Workload(user_workload(
                "b",
                "train",
                1,
                Some(owner("Job", "train", &uid, true)),
            )));
        }
        sim.settle();
        assert!(sim.pod_groups().is_empty(), "{case}");
        assert!(sim.pods().iter().all(|p| scheduling_group(p).is_none()), "{case}");
        assert_eq!(sim.events("GangSchedulingFallback").len(), 1, "{case}");
    }
}

#[test]
fn a_pod_group_of_the_workload_not_owned_by_the_job_makes_it_fall_back() {
    let mut sim = Sim::new(FeatureGates::default());
    let job_obj = sim.submit(Object::Job(Box::new(gang_job("train", 4))));
    let uid = job_uid(&job_obj);
    sim.submit(Object::Workload(user_workload("wl", "train", 1, Some(owner("Job", "train", &uid, true)))));
    let mut pg = standalone_pod_group("foreign", true, None);
    pg.spec.pod_group_template_ref =
        Some(placer_api::k8s::api::scheduling::v1alpha2::PodGroupTemplateReference {
            workload: Some(placer_api::k8s::api::scheduling::v1alpha2::WorkloadPodGroupTemplateReference {
                workload_name: "wl".into(),
                pod_group_template_name: "tpl-0".into(),
            }),
        });
    sim.submit(Object::PodGroup(pg));
    sim.settle();
    assert_eq!(sim.pod_groups().len(), 1);
    assert!(sim.pods().iter().all(|p| scheduling_group(p).is_none()));
    assert!(sim.events("GangSchedulingFallback")[0].contains("foreign"));
}

#[test]
fn a_job_that_already_started_gets_no_new_objects() {
    let mut sim = Sim::new(FeatureGates::default());
    let job_obj = sim.submit(Object::Job(Box::new(gang_job("train", 4))));
    let Object::Job(mut j) = job_obj else { unreachable!() };
    j.status = Some(JobStatus { succeeded: Some(1), ..JobStatus::default() });
    sim.store.update_status(Object::Job(j)).unwrap();
    sim.settle();
    assert!(sim.workloads().is_empty());
    assert!(sim.pods().iter().all(|p| scheduling_group(p).is_none()));
    assert_eq!(sim.events("GangSchedulingFallback").len(), 1);
}

#[test]
fn a_job_created_suspended_never_gets_a_workload_v136() {
    let mut sim = Sim::new(FeatureGates::default());
    let mut j = gang_job("train", 4);
    j.spec.as_mut().unwrap().suspend = Some(true);
    sim.submit(Object::Job(Box::new(j)));
    sim.settle();
    assert!(sim.pods().is_empty());
    let cond = sim.status("train").conditions.unwrap();
    assert!(cond.iter().any(|c| c.type_ == "Suspended" && c.status == "True"));
    sim.patch_job("train", json!({"spec": {"suspend": false}})).unwrap();
    sim.settle();
    assert!(sim.workloads().is_empty(), "the Suspended condition marks the Job as started");
    assert_eq!(sim.pods().len(), 4);
    assert!(sim.pods().iter().all(|p| scheduling_group(p).is_none()));
}

#[test]
fn suspending_keeps_workload_and_pod_group_and_resuming_reuses_them() {
    let mut sim = Sim::new(FeatureGates::default()).binding();
    sim.submit(Object::Job(Box::new(gang_job("train", 4))));
    sim.settle();
    let pg_name = sim.pod_groups()[0].metadata.name.clone();
    assert_eq!(sim.status("train").ready, Some(4));

    sim.patch_job("train", json!({"spec": {"suspend": true}})).unwrap();
    sim.settle();
    assert!(sim.pods().is_empty());
    assert_eq!(sim.workloads().len(), 1);
    assert_eq!(sim.pod_groups().len(), 1);
    let status = sim.status("train");
    assert_eq!(status.active, None);
    assert_eq!(status.failed, None, "pods deleted on suspension are not failures");
    assert!(status.conditions.unwrap().iter().any(|c| c.type_ == "Suspended" && c.status == "True"));

    sim.store.advance_ms(5_000);
    sim.patch_job("train", json!({"spec": {"suspend": false}})).unwrap();
    sim.settle();
    assert_eq!(sim.workloads().len(), 1);
    assert_eq!(sim.pod_groups().len(), 1);
    assert_eq!(sim.pods().len(), 4);
    assert!(sim.pods().iter().all(|p| scheduling_group(p) == pg_name));
    let status = sim.status("train");
    let suspended = status.conditions.unwrap().into_iter().find(|c| c.type_ == "Suspended").unwrap();
    assert_eq!((suspended.status.as_str(), suspended.reason.as_deref()), ("False", Some("JobResumed")));
    assert_eq!(status.start_time, Some(sim.store.now()), "startTime is reset on resume");
    assert_eq!(sim.events("WorkloadCreated").len(), 1);
}

#[test]
fn kueue_topology_annotations_reach_the_pod_group() {
    let mut sim = Sim::new(FeatureGates::default());
    let j = with_template_annotation(
        gang_job("train", 8),
        annotations::PODSET_REQUIRED_TOPOLOGY,
        "topology.example.com/rack",
    );
    let j = with_template_annotation(j, annotations::PODSET_SLICE_SIZE, "4");
    let j =
        with_template_annotation(j, annotations::PODSET_SLICE_REQUIRED_TOPOLOGY, "kubernetes.io/hostname");
    sim.submit(Object::Job(Box::new(j)));
    sim.settle();
    let pg = &sim.pod_groups()[0];
    let key =
        pg.spec.scheduling_constraints.as_ref().and_then(|c| c.topology.as_ref()).map(|t| t[0].key.clone());
    assert_eq!(key.as_deref(), Some("topology.example.com/rack"));
    let anns = pg.metadata.annotations.clone().unwrap();
    assert_eq!(anns[annotations::PODSET_SLICE_SIZE], "4");
    assert_eq!(anns[annotations::PODSET_SLICE_REQUIRED_TOPOLOGY], "kubernetes.io/hostname");
    assert!(!anns.contains_key(annotations::PODSET_REQUIRED_TOPOLOGY));
}

#[test]
fn deleting_the_job_collects_workload_pod_group_and_pods() {
    let mut sim = Sim::new(FeatureGates::default());
    sim.submit(Object::Job(Box::new(gang_job("train", 4))));
    sim.settle();
    sim.store.delete(&ObjectRef::new(Kind::Job, "default", "train")).unwrap();
    sim.settle();
    assert!(sim.workloads().is_empty() && sim.pod_groups().is_empty() && sim.pods().is_empty());
}

// ---------------------------------------------------------------------------------------
// Parallelism admission (JobValidation)

#[test]
fn parallelism_of_a_gang_job_cannot_change() {
    let mut sim = Sim::new(FeatureGates::default());
    sim.submit(Object::Job(Box::new(gang_job("train", 4))));
    sim.settle();
    let pg = sim.pod_groups()[0].metadata.name.clone().unwrap();
    let err = sim.patch_job("train", json!({"spec": {"parallelism": 2}})).unwrap_err();
    assert!(
        matches!(&err, StoreError::Forbidden { message, .. } if *message == parallelism_forbidden_message(&pg)),
        "{err}"
    );
    assert_eq!(sim.job("train").spec.unwrap().parallelism, Some(4));
    // Other changes still go through.
    sim.patch_job("train", json!({"metadata": {"labels": {"team": "ml"}}})).unwrap();
}

#[test]
fn parallelism_can_change_when_no_gang_pod_group_is_involved() {
    // NonIndexed, single-pod Indexed, gates off, only GenericWorkload.
    let cases: Vec<(&str, FeatureGates, Job)> = vec![
        ("non-indexed", FeatureGates::default(), job("j", Some(4), Some(4), Some("NonIndexed"))),
        ("single pod", FeatureGates::default(), job("j", Some(1), Some(1), Some("Indexed"))),
        ("gates off", gates(&[("WorkloadWithJob", false), ("GenericWorkload", false)]), gang_job("j", 4)),
        ("only GenericWorkload", gates(&[("WorkloadWithJob", false)]), job("j", Some(4), None, None)),
    ];
    for (case, g, j) in cases {
        let mut sim = Sim::new(g);
        sim.submit(Object::Job(Box::new(j)));
        sim.settle();
        sim.patch_job("j", json!({"spec": {"parallelism": 2}})).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(sim.job("j").spec.unwrap().parallelism, Some(2), "{case}");
    }
}

#[test]
fn a_template_naming_a_gang_pod_group_freezes_parallelism() {
    let mut sim = Sim::new(FeatureGates::default());
    sim.submit(Object::PodGroup(standalone_pod_group("gang-pg", true, None)));
    sim.submit(Object::Job(Box::new(with_scheduling_group(gang_job("train", 4), "gang-pg"))));
    let err = sim.patch_job("train", json!({"spec": {"parallelism": 2}})).unwrap_err();
    assert!(
        err.to_string()
            .contains(r#"cannot change parallelism for a Job referencing gang-scheduled PodGroup "gang-pg""#),
        "{err}"
    );
}

#[test]
fn a_basic_missing_or_foreign_pod_group_does_not_freeze_parallelism() {
    let mut sim = Sim::new(FeatureGates::default());
    sim.submit(Object::PodGroup(standalone_pod_group("basic-pg", false, None)));
    sim.submit(Object::Job(Box::new(with_scheduling_group(gang_job("basic", 4), "basic-pg"))));
    sim.submit(Object::Job(Box::new(with_scheduling_group(gang_job("missing", 4), "missing-pg"))));
    let other = sim.submit(Object::Job(Box::new(job("other", Some(1), Some(1), None))));
    sim.submit(Object::PodGroup(standalone_pod_group(
        "others",
        true,
        Some(owner("Job", "other", &job_uid(&other), true)),
    )));
    sim.submit(Object::Job(Box::new(job("plain", Some(4), Some(4), None))));
    for name in ["basic", "missing", "plain"] {
        sim.patch_job(name, json!({"spec": {"parallelism": 2}})).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn without_admission_a_parallelism_change_is_not_applied_to_the_gang() {
    // Real-cluster mode: nothing rejects the change, the controller warns and keeps the gang.
    let g = FeatureGates::default();
    let mut store = EmbeddedCluster::new();
    let mut ctrl = JobController::new(g);
    store.create(Object::Job(Box::new(gang_job("train", 4)))).unwrap();
    while ctrl.reconcile(&mut store).unwrap() {}
    store
        .merge_patch(&ObjectRef::new(Kind::Job, "default", "train"), &json!({"spec": {"parallelism": 2}}))
        .unwrap();
    while ctrl.reconcile(&mut store).unwrap() {}
    assert_eq!(store.list(Kind::Pod).len(), 4);
    let warnings: Vec<_> =
        store.events().into_iter().filter(|e| e.reason == "ParallelismChangeIgnored").collect();
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].type_, "Warning");
}

// ---------------------------------------------------------------------------------------
// Kueue's topology annotations (TopologyAnnotationValidation)

#[test]
fn a_job_with_invalid_topology_annotations_is_rejected_at_creation() {
    let g = FeatureGates::default();
    let mut store = EmbeddedCluster::new();
    let levels = vec!["rack".to_string(), "kubernetes.io/hostname".to_string()];
    store.add_admission(Box::new(TopologyAnnotationValidation::with_levels(g.clone(), levels)));
    let bad = with_template_annotation(gang_job("train", 4), annotations::PODSET_SLICE_SIZE, "0");
    let bad = with_template_annotation(bad, annotations::PODSET_SLICE_REQUIRED_TOPOLOGY, "rack");
    let err = store.create(Object::Job(Box::new(bad))).unwrap_err();
    assert!(matches!(err, StoreError::Forbidden { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "Job default/train is forbidden: admission webhook \"vjob.kb.io\" denied the request: \
         spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Invalid value: \"0\": must be \
         greater than or equal to 1"
    );
    assert!(store.list(Kind::Job).is_empty(), "nothing was created");
    // Against the topology: a level the scheduler does not have.
    let unknown =
        with_template_annotation(gang_job("train", 4), annotations::PODSET_REQUIRED_TOPOLOGY, "block");
    let err = store.create(Object::Job(Box::new(unknown))).unwrap_err().to_string();
    assert!(
        err.contains("Job default/train is forbidden")
            && err.contains("kueue.x-k8s.io/podset-required-topology names level \"block\""),
        "{err}"
    );
    // A valid request is admitted, and so is an update that keeps it valid.
    let ok = with_template_annotation(gang_job("train", 4), annotations::PODSET_REQUIRED_TOPOLOGY, "rack");
    store.create(Object::Job(Box::new(ok))).unwrap();
    let r = ObjectRef::new(Kind::Job, "default", "train");
    store.merge_patch(&r, &json!({"metadata": {"labels": {"team": "ml"}}})).unwrap();
    // An update that breaks it is refused.
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {annotations::PODSET_UNCONSTRAINED_TOPOLOGY: "maybe"}}}}});
    let err = store.merge_patch(&r, &patch).unwrap_err().to_string();
    assert!(err.contains("must not contain more than one topology annotation"), "{err}");
}

// ---------------------------------------------------------------------------------------
// Job lifecycle

#[test]
fn pods_with_a_run_time_run_then_succeed_and_the_job_completes() {
    let mut sim = Sim::new(FeatureGates::default()).binding();
    sim.submit(Object::Job(Box::new(with_template_annotation(
        gang_job("train", 4),
        annotations::SIM_RUN_TIME,
        "30s",
    ))));
    sim.settle();
    assert!(sim.pods().iter().all(|p| pods::phase(p) == "Running"));
    assert_eq!(sim.jobs.next_wakeup_ms(), Some(30_000));
    assert_eq!(sim.status("train").ready, Some(4));

    sim.advance(29_999);
    assert!(sim.pods().iter().all(|p| pods::phase(p) == "Running"));
    sim.advance(1);
    assert!(sim.pods().iter().all(|p| pods::phase(p) == "Succeeded"));
    let status = sim.status("train");
    assert_eq!(status.succeeded, Some(4));
    assert_eq!(status.active, None);
    assert_eq!(status.completed_indexes.as_deref(), Some("0-3"));
    assert_eq!(status.completion_time, Some(sim.store.now()));
    let types: Vec<_> = status.conditions.unwrap().into_iter().map(|c| (c.type_, c.status)).collect();
    assert_eq!(
        types,
        [
            ("SuccessCriteriaMet".to_string(), "True".to_string()),
            ("Complete".to_string(), "True".to_string())
        ]
    );
    assert_eq!(sim.events("Completed"), ["Job completed"]);
    assert_eq!(sim.jobs.next_wakeup_ms(), None);
}

#[test]
fn pods_without_a_run_time_run_forever() {
    let mut sim = Sim::new(FeatureGates::default()).binding();
    sim.submit(Object::Job(Box::new(job("svc", Some(2), Some(2), None))));
    sim.settle();
    sim.advance(3_600_000);
    assert!(sim.pods().iter().all(|p| pods::phase(p) == "Running"));
    assert_eq!(sim.jobs.next_wakeup_ms(), None);
}

#[test]
fn unbound_pods_stay_pending() {
    let mut sim = Sim::new(FeatureGates::default());
    sim.submit(Object::Job(Box::new(with_template_annotation(
        job("j", Some(1), Some(1), None),
        annotations::SIM_RUN_TIME,
        "1s",
    ))));
    sim.settle();
    sim.advance(10_000);
    assert_eq!(pods::phase(&sim.pods()[0]), "Pending");
    assert_eq!(sim.status("j").active, Some(1));
}

#[test]
fn a_non_indexed_job_runs_completions_in_waves_of_parallelism() {
    let mut sim = Sim::new(FeatureGates::default()).binding();
    sim.submit(Object::Job(Box::new(with_template_annotation(
        job("batch", Some(2), Some(3), None),
        annotations::SIM_RUN_TIME,
        "10s",
    ))));
    sim.settle();
    assert_eq!(sim.active_pods().len(), 2);
    sim.advance(10_000);
    assert_eq!(sim.status("batch").succeeded, Some(2));
    assert_eq!(sim.active_pods().len(), 1, "only one completion left");
    sim.advance(10_000);
    let status = sim.status("batch");
    assert_eq!(status.succeeded, Some(3));
    assert!(status.conditions.unwrap().iter().any(|c| c.type_ == "Complete"));
    assert_eq!(status.completed_indexes, None);
}

#[test]
fn a_work_queue_job_stops_creating_pods_after_the_first_success() {
    let mut sim = Sim::new(FeatureGates::default()).binding();
    sim.submit(Object::Job(Box::new(job("queue", Some(2), None, None))));
    sim.settle();
    let pods_now = sim.active_pods();
    assert_eq!(pods_now.len(), 2);
    sim.set_pod_phase(&pods_now[0], "Succeeded");
    sim.settle();
    assert_eq!(sim.active_pods().len(), 1, "no replacement after a success");
    assert!(sim.status("queue").conditions.is_none());
    let last = sim.active_pods()[0].clone();
    sim.set_pod_phase(&last, "Succeeded");
    sim.settle();
    assert!(sim.status("queue").conditions.unwrap().iter().any(|c| c.type_ == "Complete"));
}

#[test]
fn a_failed_pod_is_counted_and_replaced_after_the_backoff() {
    let mut sim = Sim::new(FeatureGates::default()).binding();
    sim.submit(Object::Job(Box::new(gang_job("train", 2))));
    sim.settle();
    let victim = sim.active_pods()[0].clone();
    let index = victim.metadata.annotations.as_ref().unwrap()[annotations::JOB_COMPLETION_INDEX].clone();
    sim.set_pod_phase(&victim, "Failed");
    sim.settle();
    assert_eq!(sim.status("train").failed, Some(1));
    assert_eq!(sim.active_pods().len(), 1, "the replacement waits for the backoff");
    assert_eq!(sim.jobs.next_wakeup_ms(), Some(BACKOFF_BASE_MS));
    sim.advance(BACKOFF_BASE_MS);
    let active = sim.active_pods();
    assert_eq!(active.len(), 2);
    let replacement = active
        .iter()
        .find(|p| p.metadata.annotations.as_ref().unwrap()[annotations::JOB_COMPLETION_INDEX] == index)
        .expect("the failed index gets a new pod");
    assert_ne!(replacement.metadata.uid, victim.metadata.uid);
    assert_eq!(scheduling_group(replacement), scheduling_group(&victim), "same PodGroup");
    assert_eq!(sim.status("train").failed, Some(1), "counted once");
}

#[test]
fn a_pod_deleted_while_running_counts_as_failed() {
    let mut sim = Sim::new(FeatureGates::default()).binding();
    sim.submit(Object::Job(Box::new(job("j", Some(1), Some(1), None))));
    sim.settle();
    let pod = sim.active_pods()[0].clone();
    sim.store.delete(&ObjectRef::new(Kind::Pod, "default", pod.metadata.name.unwrap())).unwrap();
    sim.settle();
    assert_eq!(sim.status("j").failed, Some(1));
    sim.advance(BACKOFF_BASE_MS);
    assert_eq!(sim.active_pods().len(), 1);
}

#[test]
fn exceeding_the_backoff_limit_fails_the_job_and_stops_its_pods() {
    let mut sim = Sim::new(FeatureGates::default()).binding();
    let mut j = job("j", Some(2), Some(2), None);
    j.spec.as_mut().unwrap().backoff_limit = Some(0);
    sim.submit(Object::Job(Box::new(j)));
    sim.settle();
    let victim = sim.active_pods()[0].clone();
    sim.set_pod_phase(&victim, "Failed");
    sim.settle();
    let status = sim.status("j");
    let conds: Vec<_> =
        status.conditions.unwrap().into_iter().map(|c| (c.type_, c.reason.unwrap_or_default())).collect();
    assert_eq!(
        conds,
        [
            ("FailureTarget".to_string(), "BackoffLimitExceeded".to_string()),
            ("Failed".to_string(), "BackoffLimitExceeded".to_string())
        ]
    );
    assert!(sim.active_pods().is_empty());
    assert_eq!(status.failed, Some(2), "the stopped pod counts as failed too");
    assert_eq!(status.completion_time, None);
}

#[test]
fn the_active_deadline_fails_the_job() {
    let mut sim = Sim::new(FeatureGates::default()).binding();
    let mut j = job("j", Some(1), Some(1), None);
    j.spec.as_mut().unwrap().active_deadline_seconds = Some(60);
    sim.submit(Object::Job(Box::new(j)));
    sim.settle();
    assert_eq!(sim.jobs.next_wakeup_ms(), Some(60_000));
    sim.advance(60_000);
    let conds = sim.status("j").conditions.unwrap();
    assert!(conds.iter().any(|c| c.type_ == "Failed" && c.reason.as_deref() == Some("DeadlineExceeded")));
    assert!(sim.active_pods().is_empty());
}

#[test]
fn lowering_parallelism_of_a_non_indexed_job_deletes_pending_pods_first() {
    let mut sim = Sim::new(FeatureGates::default());
    sim.submit(Object::Job(Box::new(job("j", Some(3), Some(6), None))));
    sim.settle();
    let first = sim.active_pods()[0].clone();
    sim.store.bind("default", first.metadata.name.as_deref().unwrap(), "", "n1").unwrap();
    sim.patch_job("j", json!({"spec": {"parallelism": 1}})).unwrap();
    sim.settle();
    let active = sim.active_pods();
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].metadata.name, first.metadata.name, "the bound pod stays");
    assert_eq!(sim.status("j").failed, None, "deleting excess pods is not a failure");
}

#[test]
fn a_finished_job_is_deleted_after_its_ttl() {
    let mut sim = Sim::new(FeatureGates::default()).binding();
    let mut j = with_template_annotation(job("j", Some(1), Some(1), None), annotations::SIM_RUN_TIME, "5s");
    j.spec.as_mut().unwrap().ttl_seconds_after_finished = Some(30);
    sim.submit(Object::Job(Box::new(j)));
    sim.settle();
    sim.advance(5_000);
    assert!(sim.status("j").conditions.unwrap().iter().any(|c| c.type_ == "Complete"));
    sim.advance(29_999);
    assert!(sim.store.get(&ObjectRef::new(Kind::Job, "default", "j")).is_some());
    sim.advance(1);
    assert!(sim.store.get(&ObjectRef::new(Kind::Job, "default", "j")).is_none());
    assert!(sim.pods().is_empty());
}

#[test]
fn jobs_managed_by_another_controller_are_left_alone() {
    let mut sim = Sim::new(FeatureGates::default());
    let mut j = gang_job("train", 4);
    j.spec.as_mut().unwrap().managed_by = Some("kueue.x-k8s.io/multikueue".into());
    sim.submit(Object::Job(Box::new(j)));
    sim.settle();
    assert!(sim.pods().is_empty() && sim.workloads().is_empty());
    assert!(sim.job("train").status.is_none());
}

#[test]
fn an_invalid_run_time_is_reported_and_the_pod_runs_on() {
    let mut sim = Sim::new(FeatureGates::default()).binding();
    sim.submit(Object::Job(Box::new(with_template_annotation(
        job("j", Some(1), Some(1), None),
        annotations::SIM_RUN_TIME,
        "soon",
    ))));
    sim.settle();
    assert_eq!(pods::phase(&sim.pods()[0]), "Running");
    assert_eq!(sim.events("InvalidRunTime").len(), 1);
}

#[test]
fn results_do_not_depend_on_how_often_the_controller_runs() {
    // Two runs: one reconciling after every store change, one only at the end.
    let run = |eager: bool| {
        let mut sim = Sim::new(FeatureGates::default()).binding();
        sim.submit(Object::Job(Box::new(with_template_annotation(
            gang_job("a", 3),
            annotations::SIM_RUN_TIME,
            "10s",
        ))));
        if eager {
            sim.settle();
        }
        sim.submit(Object::Job(Box::new(with_template_annotation(
            job("b", Some(2), Some(4), None),
            annotations::SIM_RUN_TIME,
            "7s",
        ))));
        sim.settle();
        sim.advance(60_000);
        let mut phases: Vec<String> = sim.pods().iter().map(|p| pods::phase(p).to_string()).collect();
        phases.sort();
        (sim.status("a"), sim.status("b").succeeded, phases)
    };
    let (a1, b1, n1) = run(true);
    let (a2, b2, n2) = run(false);
    assert_eq!(
        (a1.succeeded, a1.completed_indexes.clone(), b1, n1),
        (a2.succeeded, a2.completed_indexes.clone(), b2, n2)
    );
    assert_eq!(b1, Some(4));
}
