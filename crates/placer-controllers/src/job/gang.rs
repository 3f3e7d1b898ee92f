//! KEP-5547 (seed 001) in its v1.36 shape: which Jobs get a Workload and a PodGroup, how
//! the controller finds existing ones, and what it creates. Everything here is pure; the
//! controller ([`super::JobController`]) performs the store calls in the order Workload,
//! PodGroup, pods.
//!
//! Rules (SEMANTICS §14):
//! * Eligible Job ([`is_gang_candidate`]): `parallelism` set and > 1, `completions` set and
//!   equal to it, `completionMode: Indexed`, and a pod template without `schedulingGroup`
//!   (a preset `schedulingGroup` is the opt-out used by parent controllers such as JobSet).
//! * Objects are created only for a Job that never started ([`is_new_job`]); a started Job
//!   only reuses objects it can discover.
//! * Discovery is by reference, never by name: Workloads whose `spec.controllerRef` is
//!   `{apiGroup: batch, kind: Job, name: <job>}` ([`workload_refers_to_job`]), PodGroups
//!   whose `spec.podGroupTemplateRef.workload.workloadName` is that Workload
//!   ([`pod_group_workload_name`]). Exactly one match controlled by the Job (controller
//!   ownerReference with the Job's UID) is used; anything else falls back to pod-by-pod
//!   scheduling ([`Fallback`]).

use std::collections::BTreeMap;
use std::fmt;

use placer_api::annotations;
use placer_api::gates::{FeatureGates, Gate};
use placer_api::k8s::api::batch::v1::Job;
use placer_api::k8s::api::scheduling::v1alpha2::{
    GangSchedulingPolicy, PodGroup, PodGroupSchedulingConstraints, PodGroupSchedulingPolicy, PodGroupSpec,
    PodGroupTemplate, PodGroupTemplateReference, TopologyConstraint, TypedLocalObjectReference, Workload,
    WorkloadPodGroupTemplateReference, WorkloadSpec,
};
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::naming;

/// API group of Jobs, as written in a Workload's `spec.controllerRef.apiGroup`.
pub const JOB_API_GROUP: &str = "batch";
/// `apiVersion` of Jobs in ownerReferences.
pub const JOB_API_VERSION: &str = "batch/v1";
/// `apiVersion` of Workloads in ownerReferences.
pub const WORKLOAD_API_VERSION: &str = "scheduling.k8s.io/v1alpha2";
/// `spec.completionMode` value of Indexed Jobs (unset means NonIndexed).
pub const INDEXED: &str = "Indexed";

/// Kueue annotations copied from a Job's pod template onto its PodGroup (their meaning is
/// seed 002's; the v1alpha2 PodGroup has no field for them). The required topology is not
/// in this list: it becomes `spec.schedulingConstraints.topology[0].key`.
pub const COPIED_TOPOLOGY_ANNOTATIONS: [&str; 7] = [
    annotations::PODSET_PREFERRED_TOPOLOGY,
    annotations::PODSET_UNCONSTRAINED_TOPOLOGY,
    annotations::PODSET_SLICE_REQUIRED_TOPOLOGY,
    annotations::PODSET_SLICE_SIZE,
    annotations::PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS,
    annotations::PODSET_GROUP_NAME,
    annotations::POD_INDEX_OFFSET,
];

/// Whether the Workload/PodGroup integration is on: gates `WorkloadWithJob` and
/// `GenericWorkload` (the Workload API itself) both enabled.
pub fn integration_enabled(gates: &FeatureGates) -> bool {
    gates.enabled(Gate::WorkloadWithJob) && gates.enabled(Gate::GenericWorkload)
}

/// The v1.36 gang shape (upstream `IsGangSchedulingCandidate`): parallelism > 1, completions
/// == parallelism, Indexed, and no `schedulingGroup` in the pod template.
pub fn is_gang_candidate(job: &Job) -> bool {
    let Some(spec) = job.spec.as_ref() else { return false };
    let Some(parallelism) = spec.parallelism else { return false };
    parallelism > 1
        && spec.completions == Some(parallelism)
        && spec.completion_mode.as_deref() == Some(INDEXED)
        && spec.template.spec.as_ref().is_none_or(|s| s.scheduling_group.is_none())
}

/// Whether the controller manages a Workload and PodGroup for this Job: integration on and
/// the Job has the gang shape.
pub fn should_manage_workload(gates: &FeatureGates, job: &Job) -> bool {
    integration_enabled(gates) && is_gang_candidate(job)
}

/// A Job that never started: it has no pods, no `status.startTime`, `succeeded == failed ==
/// 0` and no `Suspended` condition of any status. Only such a Job gets new objects (a Job
/// created suspended therefore never does, as upstream v1.36).
pub fn is_new_job(job: &Job, has_pods: bool) -> bool {
    if has_pods {
        return false;
    }
    let Some(status) = job.status.as_ref() else { return true };
    status.start_time.is_none()
        && status.succeeded.unwrap_or(0) == 0
        && status.failed.unwrap_or(0) == 0
        && !status.conditions.iter().flatten().any(|c| c.type_ == "Suspended")
}

/// Whether `meta`'s controller ownerReference (the first one with `controller: true`) has
/// this UID, as apimachinery's `IsControlledBy`.
pub fn is_controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    controller_of(meta).is_some_and(|r| r.uid == uid)
}

/// The controller ownerReference of an object, if any.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references.iter().flatten().find(|r| r.controller == Some(true))
}

/// Whether a Workload's `spec.controllerRef` points at the Job `job_name` (same namespace
/// is checked by the caller).
pub fn workload_refers_to_job(workload: &Workload, job_name: &str) -> bool {
    workload_job_name(workload) == Some(job_name)
}

/// The Job name a Workload's `spec.controllerRef` points at (apiGroup `batch`, kind `Job`,
/// non-empty name), if any.
pub fn workload_job_name(workload: &Workload) -> Option<&str> {
    let r = workload.spec.controller_ref.as_ref()?;
    (r.api_group.as_deref() == Some(JOB_API_GROUP) && r.kind == "Job" && !r.name.is_empty())
        .then_some(r.name.as_str())
}

/// The Workload name of a PodGroup's `spec.podGroupTemplateRef.workload`, if set.
pub fn pod_group_workload_name(pod_group: &PodGroup) -> Option<&str> {
    let name = pod_group.spec.pod_group_template_ref.as_ref()?.workload.as_ref()?.workload_name.as_str();
    (!name.is_empty()).then_some(name)
}

/// Why a gang-shaped Job runs pod by pod after all (recorded as a Warning event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fallback {
    /// The one Workload naming the Job is not controlled by it.
    WorkloadNotControlled { workload: String },
    /// Several Workloads name the Job.
    AmbiguousWorkloads { workloads: Vec<String> },
    /// The Workload has a number of templates other than one.
    UnsupportedTemplates { workload: String, count: usize },
    /// The one PodGroup of the Workload is not controlled by the Job.
    PodGroupNotControlled { pod_group: String },
    /// Several PodGroups reference the Workload.
    AmbiguousPodGroups { workload: String, pod_groups: Vec<String> },
    /// No Workload exists and the Job has already started (pods, startTime, counts or a
    /// Suspended condition): v1.36 creates objects only for Jobs that never started.
    AlreadyStarted,
}

impl Fallback {
    /// A stable key for de-duplicating the event.
    pub fn key(&self) -> String {
        format!("fallback:{self}")
    }
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fallback::WorkloadNotControlled { workload } => write!(
                f,
                "Workload {workload} references this Job in spec.controllerRef but is not controlled by it; \
                 pods are scheduled one by one"
            ),
            Fallback::AmbiguousWorkloads { workloads } => write!(
                f,
                "{} Workloads reference this Job ({}); pods are scheduled one by one",
                workloads.len(),
                workloads.join(", ")
            ),
            Fallback::UnsupportedTemplates { workload, count } => write!(
                f,
                "Workload {workload} has {count} podGroupTemplates, only 1 is supported; pods are scheduled one by one"
            ),
            Fallback::PodGroupNotControlled { pod_group } => write!(
                f,
                "PodGroup {pod_group} references this Job's Workload but is not controlled by the Job; \
                 pods are scheduled one by one"
            ),
            Fallback::AmbiguousPodGroups { workload, pod_groups } => write!(
                f,
                "{} PodGroups reference Workload {workload} ({}); pods are scheduled one by one",
                pod_groups.len(),
                pod_groups.join(", ")
            ),
            Fallback::AlreadyStarted => f.write_str(
                "the Job has already started (pods, startTime, finished pods or a Suspended condition) and has no \
                 Workload; Workload and PodGroup are created only for Jobs that never started, so pods are \
                 scheduled one by one",
            ),
        }
    }
}

/// What to do about the Workload of an eligible Job.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadDecision<'a> {
    /// Use this Workload (controlled by the Job, one template).
    Use(&'a Workload),
    /// None exists and the Job never started: create one.
    Create,
    /// Schedule pod by pod.
    Fallback(Fallback),
}

/// Decides from the Workloads whose `controllerRef` names the Job (same namespace).
pub fn decide_workload<'a>(
    matches: &[&'a Workload],
    job_uid: &str,
    job_is_new: bool,
) -> WorkloadDecision<'a> {
    match matches {
        [] if job_is_new => WorkloadDecision::Create,
        [] => WorkloadDecision::Fallback(Fallback::AlreadyStarted),
        [wl] => {
            let name = wl.metadata.name.clone().unwrap_or_default();
            if !is_controlled_by(&wl.metadata, job_uid) {
                WorkloadDecision::Fallback(Fallback::WorkloadNotControlled { workload: name })
            } else if wl.spec.pod_group_templates.len() != 1 {
                WorkloadDecision::Fallback(Fallback::UnsupportedTemplates {
                    workload: name,
                    count: wl.spec.pod_group_templates.len(),
                })
            } else {
                WorkloadDecision::Use(wl)
            }
        }
        several => WorkloadDecision::Fallback(Fallback::AmbiguousWorkloads {
            workloads: several.iter().map(|w| w.metadata.name.clone().unwrap_or_default()).collect(),
        }),
    }
}

/// What to do about the PodGroup of the Job's Workload.
#[derive(Debug, Clone, PartialEq)]
pub enum PodGroupDecision<'a> {
    Use(&'a PodGroup),
    /// None references the Workload: create one (v1.36 does so whenever the Workload is
    /// found, not only for a new Job).
    Create,
    Fallback(Fallback),
}

/// Decides from the PodGroups whose template reference names the Workload (same namespace).
pub fn decide_pod_group<'a>(matches: &[&'a PodGroup], workload: &str, job_uid: &str) -> PodGroupDecision<'a> {
    match matches {
        [] => PodGroupDecision::Create,
        [pg] if is_controlled_by(&pg.metadata, job_uid) => PodGroupDecision::Use(pg),
        [pg] => PodGroupDecision::Fallback(Fallback::PodGroupNotControlled {
            pod_group: pg.metadata.name.clone().unwrap_or_default(),
        }),
        several => PodGroupDecision::Fallback(Fallback::AmbiguousPodGroups {
            workload: workload.to_string(),
            pod_groups: several.iter().map(|p| p.metadata.name.clone().unwrap_or_default()).collect(),
        }),
    }
}

/// Why an object cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error("Job {namespace}/{name} has no uid yet (not created through the store?)")]
    MissingUid { namespace: String, name: String },
    #[error("Job {namespace}/{name} has no spec.parallelism")]
    MissingParallelism { namespace: String, name: String },
    #[error("Workload {namespace}/{name} has no podGroupTemplates")]
    NoTemplates { namespace: String, name: String },
}

/// Namespace and name of a Job (namespace `default` when unset).
pub fn job_key(job: &Job) -> (String, String) {
    (
        job.metadata.namespace.clone().unwrap_or_else(|| "default".to_string()),
        job.metadata.name.clone().unwrap_or_default(),
    )
}

/// The controller ownerReference to a Job (`controller` and `blockOwnerDeletion` true), as
/// apimachinery's `NewControllerRef`.
pub fn job_controller_ref(job: &Job) -> Result<OwnerReference, BuildError> {
    let (namespace, name) = job_key(job);
    let uid = job
        .metadata
        .uid
        .clone()
        .filter(|u| !u.is_empty())
        .ok_or(BuildError::MissingUid { namespace, name: name.clone() })?;
    Ok(OwnerReference {
        api_version: JOB_API_VERSION.to_string(),
        kind: "Job".to_string(),
        name,
        uid,
        controller: Some(true),
        block_owner_deletion: Some(true),
    })
}

/// The Kueue topology annotations of a Job's pod template, split into the required level
/// (a PodGroup field) and the rest (copied as PodGroup annotations).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemplateTopology {
    /// `kueue.x-k8s.io/podset-required-topology`.
    pub required: Option<String>,
    /// The [`COPIED_TOPOLOGY_ANNOTATIONS`] present on the template.
    pub annotations: BTreeMap<String, String>,
}

impl TemplateTopology {
    /// Reads the pod template's annotations of `job`.
    pub fn of(job: &Job) -> TemplateTopology {
        let template_annotations =
            job.spec.as_ref().and_then(|s| s.template.metadata.as_ref()).and_then(|m| m.annotations.as_ref());
        let Some(all) = template_annotations else { return TemplateTopology::default() };
        TemplateTopology {
            required: all
                .get(annotations::PODSET_REQUIRED_TOPOLOGY)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty()),
            annotations: COPIED_TOPOLOGY_ANNOTATIONS
                .iter()
                .filter_map(|k| all.get(*k).map(|v| (k.to_string(), v.clone())))
                .collect(),
        }
    }

    /// No Kueue topology annotation on the template.
    pub fn is_empty(&self) -> bool {
        self.required.is_none() && self.annotations.is_empty()
    }

    fn constraints(&self) -> Option<PodGroupSchedulingConstraints> {
        self.required.as_ref().map(|key| PodGroupSchedulingConstraints {
            topology: Some(vec![TopologyConstraint { key: key.clone() }]),
        })
    }
}

/// The Workload for an eligible Job: name [`naming::workload_name`], the Job's namespace,
/// one controller ownerReference to the Job, `spec.controllerRef {batch, Job, name}`, one
/// template `<job>-pgt-0` with `gang.minCount = parallelism` (and the required topology of
/// the pod template, if any, as its scheduling constraint). No labels or annotations.
pub fn build_workload(job: &Job) -> Result<Workload, BuildError> {
    let (namespace, name) = job_key(job);
    let owner = job_controller_ref(job)?;
    let parallelism = job
        .spec
        .as_ref()
        .and_then(|s| s.parallelism)
        .ok_or_else(|| BuildError::MissingParallelism { namespace: namespace.clone(), name: name.clone() })?;
    let topology = TemplateTopology::of(job);
    Ok(Workload {
        metadata: ObjectMeta {
            name: Some(naming::workload_name(&name, &owner.uid)),
            namespace: Some(namespace),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: WorkloadSpec {
            controller_ref: Some(TypedLocalObjectReference {
                api_group: Some(JOB_API_GROUP.to_string()),
                kind: "Job".to_string(),
                name: name.clone(),
            }),
            pod_group_templates: vec![PodGroupTemplate {
                name: naming::pod_group_template_name(&name),
                scheduling_policy: PodGroupSchedulingPolicy {
                    gang: Some(GangSchedulingPolicy { min_count: parallelism }),
                    basic: None,
                },
                scheduling_constraints: topology.constraints(),
                ..PodGroupTemplate::default()
            }],
        },
    })
}

/// The PodGroup for the Job's Workload, made from its first (only) template: name
/// [`naming::pod_group_name`], ownerReferences `[controller ref to the Job, plain ref to
/// the Workload]` (the Workload ref has neither `controller` nor `blockOwnerDeletion`, so
/// deleting the Workload is never blocked by its PodGroup), `podGroupTemplateRef`, and
/// the template's policy, constraints, disruption mode and priority. The Kueue annotations
/// of the Job's pod template other than the required level are copied as annotations.
pub fn build_pod_group(job: &Job, workload: &Workload) -> Result<PodGroup, BuildError> {
    let (namespace, _) = job_key(job);
    let owner = job_controller_ref(job)?;
    let wl_name = workload.metadata.name.clone().unwrap_or_default();
    let wl_namespace = workload.metadata.namespace.clone().unwrap_or_else(|| namespace.clone());
    let template = workload
        .spec
        .pod_group_templates
        .first()
        .ok_or_else(|| BuildError::NoTemplates { namespace: wl_namespace, name: wl_name.clone() })?;
    let topology = TemplateTopology::of(job);
    let workload_ref = OwnerReference {
        api_version: WORKLOAD_API_VERSION.to_string(),
        kind: "Workload".to_string(),
        name: wl_name.clone(),
        uid: workload.metadata.uid.clone().unwrap_or_default(),
        controller: None,
        block_owner_deletion: None,
    };
    Ok(PodGroup {
        metadata: ObjectMeta {
            name: Some(naming::pod_group_name(&wl_name, &template.name)),
            namespace: Some(namespace),
            owner_references: Some(vec![owner, workload_ref]),
            annotations: (!topology.annotations.is_empty()).then(|| topology.annotations.clone()),
            ..ObjectMeta::default()
        },
        spec: PodGroupSpec {
            pod_group_template_ref: Some(PodGroupTemplateReference {
                workload: Some(WorkloadPodGroupTemplateReference {
                    workload_name: wl_name,
                    pod_group_template_name: template.name.clone(),
                }),
            }),
            scheduling_policy: template.scheduling_policy.clone(),
            scheduling_constraints: template
                .scheduling_constraints
                .clone()
                .or_else(|| topology.constraints()),
            disruption_mode: template.disruption_mode.clone(),
            priority_class_name: template.priority_class_name.clone(),
            priority: template.priority,
            resource_claims: None,
        },
        status: None,
    })
}

/// The gang `minCount` of a PodGroup, if its policy is gang.
pub fn gang_min_count(pod_group: &PodGroup) -> Option<i32> {
    pod_group.spec.scheduling_policy.gang.as_ref().map(|g| g.min_count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::api::batch::v1::{JobCondition, JobSpec, JobStatus};
    use placer_api::k8s::api::core::v1::{PodSchedulingGroup, PodSpec, PodTemplateSpec};
    use placer_api::k8s::apimachinery::pkg::apis::meta::v1::Time;

    fn job(parallelism: Option<i32>, completions: Option<i32>, mode: Option<&str>) -> Job {
        Job {
            metadata: ObjectMeta {
                name: Some("train".into()),
                namespace: Some("ml".into()),
                uid: Some("train-uid".into()),
                ..ObjectMeta::default()
            },
            spec: Some(JobSpec {
                parallelism,
                completions,
                completion_mode: mode.map(str::to_string),
                template: PodTemplateSpec { metadata: None, spec: Some(PodSpec::default()) },
                ..JobSpec::default()
            }),
            status: None,
        }
    }

    fn gang_job() -> Job {
        job(Some(4), Some(4), Some(INDEXED))
    }

    #[test]
    fn an_indexed_job_with_parallelism_equal_to_completions_is_a_gang() {
        assert!(is_gang_candidate(&gang_job()));
    }

    #[test]
    fn other_shapes_are_not_gangs() {
        assert!(!is_gang_candidate(&job(None, Some(4), Some(INDEXED))), "parallelism nil");
        assert!(!is_gang_candidate(&job(Some(1), Some(1), Some(INDEXED))), "parallelism 1");
        assert!(!is_gang_candidate(&job(Some(4), Some(4), Some("NonIndexed"))), "NonIndexed");
        assert!(!is_gang_candidate(&job(Some(4), Some(4), None)), "completionMode unset");
        assert!(!is_gang_candidate(&job(Some(4), None, Some(INDEXED))), "completions nil");
        assert!(!is_gang_candidate(&job(Some(4), Some(8), Some(INDEXED))), "completions != parallelism");
        let mut opt_out = gang_job();
        if let Some(s) = opt_out.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
            s.scheduling_group = Some(PodSchedulingGroup { pod_group_name: Some("existing-pg".into()) });
        }
        assert!(!is_gang_candidate(&opt_out), "schedulingGroup preset");
    }

    #[test]
    fn both_gates_are_needed() {
        let on = FeatureGates::default();
        assert!(should_manage_workload(&on, &gang_job()));
        let off = FeatureGates::with_overrides([("WorkloadWithJob", false)]).unwrap();
        assert!(!should_manage_workload(&off, &gang_job()));
        let no_api = FeatureGates::with_overrides([("GenericWorkload", false)]).unwrap();
        assert!(!should_manage_workload(&no_api, &gang_job()));
    }

    #[test]
    fn a_job_is_new_until_it_has_pods_a_start_time_counts_or_a_suspended_condition() {
        let j = gang_job();
        assert!(is_new_job(&j, false));
        assert!(!is_new_job(&j, true), "has pods");
        let with = |status: JobStatus| Job { status: Some(status), ..gang_job() };
        let t = Time(placer_api::k8s::jiff::Timestamp::UNIX_EPOCH);
        assert!(!is_new_job(&with(JobStatus { start_time: Some(t), ..JobStatus::default() }), false));
        assert!(!is_new_job(&with(JobStatus { succeeded: Some(1), ..JobStatus::default() }), false));
        assert!(!is_new_job(&with(JobStatus { failed: Some(1), ..JobStatus::default() }), false));
        let suspended =
            JobCondition { type_: "Suspended".into(), status: "False".into(), ..JobCondition::default() };
        assert!(!is_new_job(
            &with(JobStatus { conditions: Some(vec![suspended]), ..JobStatus::default() }),
            false
        ));
        assert!(is_new_job(&with(JobStatus { active: Some(0), ..JobStatus::default() }), false));
    }

    #[test]
    fn the_workload_is_owned_by_the_job_and_holds_one_gang_template() {
        let wl = build_workload(&gang_job()).unwrap();
        assert_eq!(wl.metadata.name.as_deref(), Some(naming::workload_name("train", "train-uid").as_str()));
        assert_eq!(wl.metadata.namespace.as_deref(), Some("ml"));
        let owners = wl.metadata.owner_references.as_ref().unwrap();
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].kind, "Job");
        assert_eq!(owners[0].api_version, "batch/v1");
        assert_eq!(owners[0].uid, "train-uid");
        assert_eq!(owners[0].controller, Some(true));
        assert_eq!(owners[0].block_owner_deletion, Some(true));
        let r = wl.spec.controller_ref.as_ref().unwrap();
        assert_eq!(
            (r.api_group.as_deref(), r.kind.as_str(), r.name.as_str()),
            (Some("batch"), "Job", "train")
        );
        assert_eq!(wl.spec.pod_group_templates.len(), 1);
        let t = &wl.spec.pod_group_templates[0];
        assert_eq!(t.name, "train-pgt-0");
        assert_eq!(t.scheduling_policy.gang.as_ref().map(|g| g.min_count), Some(4));
        assert!(t.scheduling_constraints.is_none());
        assert!(wl.metadata.labels.is_none() && wl.metadata.annotations.is_none());
    }

    #[test]
    fn the_pod_group_is_owned_by_the_job_and_references_the_workload() {
        let j = gang_job();
        let mut wl = build_workload(&j).unwrap();
        wl.metadata.uid = Some("wl-uid".into());
        let pg = build_pod_group(&j, &wl).unwrap();
        let wl_name = wl.metadata.name.clone().unwrap();
        assert_eq!(pg.metadata.name, Some(naming::pod_group_name(&wl_name, "train-pgt-0")));
        let owners = pg.metadata.owner_references.as_ref().unwrap();
        assert_eq!(owners.len(), 2);
        assert_eq!(
            (owners[0].kind.as_str(), owners[0].controller, owners[0].block_owner_deletion),
            ("Job", Some(true), Some(true))
        );
        assert_eq!(owners[1].kind, "Workload");
        assert_eq!(owners[1].api_version, "scheduling.k8s.io/v1alpha2");
        assert_eq!(owners[1].uid, "wl-uid");
        assert_eq!((owners[1].controller, owners[1].block_owner_deletion), (None, None));
        let tref = pg.spec.pod_group_template_ref.as_ref().and_then(|r| r.workload.as_ref()).unwrap();
        assert_eq!(
            (tref.workload_name.as_str(), tref.pod_group_template_name.as_str()),
            (wl_name.as_str(), "train-pgt-0")
        );
        assert_eq!(gang_min_count(&pg), Some(4));
    }

    #[test]
    fn kueue_template_annotations_become_a_topology_constraint_and_pod_group_annotations() {
        let mut j = gang_job();
        let anns: BTreeMap<String, String> = [
            (annotations::PODSET_REQUIRED_TOPOLOGY, "topology.example.com/rack"),
            (annotations::PODSET_SLICE_SIZE, "2"),
            (annotations::PODSET_SLICE_REQUIRED_TOPOLOGY, "kubernetes.io/hostname"),
            ("unrelated", "x"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        if let Some(s) = j.spec.as_mut() {
            s.template.metadata = Some(ObjectMeta { annotations: Some(anns), ..ObjectMeta::default() });
        }
        let wl = build_workload(&j).unwrap();
        let key = |c: &Option<PodGroupSchedulingConstraints>| {
            c.as_ref().and_then(|c| c.topology.as_ref()).and_then(|t| t.first()).map(|t| t.key.clone())
        };
        assert_eq!(
            key(&wl.spec.pod_group_templates[0].scheduling_constraints).as_deref(),
            Some("topology.example.com/rack")
        );
        let pg = build_pod_group(&j, &wl).unwrap();
        assert_eq!(key(&pg.spec.scheduling_constraints).as_deref(), Some("topology.example.com/rack"));
        let pg_anns = pg.metadata.annotations.unwrap();
        assert_eq!(pg_anns.len(), 2);
        assert_eq!(pg_anns[annotations::PODSET_SLICE_SIZE], "2");
        assert_eq!(pg_anns[annotations::PODSET_SLICE_REQUIRED_TOPOLOGY], "kubernetes.io/hostname");
    }

    fn workload(name: &str, owner_uid: Option<&str>, templates: usize) -> Workload {
        Workload {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ml".into()),
                owner_references: owner_uid.map(|uid| {
                    vec![OwnerReference {
                        uid: uid.into(),
                        controller: Some(true),
                        kind: "Job".into(),
                        ..OwnerReference::default()
                    }]
                }),
                ..ObjectMeta::default()
            },
            spec: WorkloadSpec {
                controller_ref: Some(TypedLocalObjectReference {
                    api_group: Some("batch".into()),
                    kind: "Job".into(),
                    name: "train".into(),
                }),
                pod_group_templates: (0..templates)
                    .map(|i| PodGroupTemplate { name: format!("t{i}"), ..PodGroupTemplate::default() })
                    .collect(),
            },
        }
    }

    #[test]
    fn discovery_uses_exactly_one_workload_controlled_by_the_job() {
        let ours = workload("wl", Some("train-uid"), 1);
        assert_eq!(decide_workload(&[&ours], "train-uid", false), WorkloadDecision::Use(&ours));
        assert_eq!(decide_workload(&[], "train-uid", true), WorkloadDecision::Create);
        assert_eq!(
            decide_workload(&[], "train-uid", false),
            WorkloadDecision::Fallback(Fallback::AlreadyStarted)
        );
    }

    #[test]
    fn discovery_falls_back_on_foreign_ambiguous_or_multi_template_workloads() {
        let user = workload("user-created-workload", None, 1);
        assert_eq!(
            decide_workload(&[&user], "train-uid", true),
            WorkloadDecision::Fallback(Fallback::WorkloadNotControlled {
                workload: "user-created-workload".into()
            })
        );
        let other_job = workload("wl", Some("other-uid"), 1);
        assert!(matches!(decide_workload(&[&other_job], "train-uid", true), WorkloadDecision::Fallback(_)));
        let (a, b) = (workload("a", Some("train-uid"), 1), workload("b", Some("train-uid"), 1));
        assert_eq!(
            decide_workload(&[&a, &b], "train-uid", true),
            WorkloadDecision::Fallback(Fallback::AmbiguousWorkloads {
                workloads: vec!["a".into(), "b".into()]
            })
        );
        let two = workload("wl", Some("train-uid"), 2);
        assert_eq!(
            decide_workload(&[&two], "train-uid", true),
            WorkloadDecision::Fallback(Fallback::UnsupportedTemplates { workload: "wl".into(), count: 2 })
        );
    }

    #[test]
    fn workloads_are_matched_by_controller_ref_not_by_name() {
        let wl = workload("anything", None, 1);
        assert!(workload_refers_to_job(&wl, "train"));
        assert!(!workload_refers_to_job(&wl, "other"));
        let mut core_group = wl.clone();
        if let Some(r) = core_group.spec.controller_ref.as_mut() {
            r.api_group = None;
        }
        assert!(!workload_refers_to_job(&core_group, "train"), "apiGroup must be batch");
    }

    #[test]
    fn pod_group_discovery_needs_one_controlled_match() {
        let j = gang_job();
        let mut wl = build_workload(&j).unwrap();
        wl.metadata.uid = Some("wl-uid".into());
        let ours = build_pod_group(&j, &wl).unwrap();
        assert_eq!(decide_pod_group(&[&ours], "wl", "train-uid"), PodGroupDecision::Use(&ours));
        assert_eq!(decide_pod_group(&[], "wl", "train-uid"), PodGroupDecision::Create);
        let mut foreign = ours.clone();
        foreign.metadata.owner_references = None;
        assert!(matches!(decide_pod_group(&[&foreign], "wl", "train-uid"), PodGroupDecision::Fallback(_)));
        assert!(matches!(
            decide_pod_group(&[&ours, &ours], "wl", "train-uid"),
            PodGroupDecision::Fallback(_)
        ));
        assert_eq!(pod_group_workload_name(&ours), wl.metadata.name.as_deref());
    }

    #[test]
    fn building_without_a_uid_is_an_error() {
        let mut j = gang_job();
        j.metadata.uid = None;
        assert!(matches!(build_workload(&j), Err(BuildError::MissingUid { .. })));
    }
}
