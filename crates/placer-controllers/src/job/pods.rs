//! Pods of a Job: construction from the pod template (upstream labels, annotations, names
//! and ownerReference) and the states the controller reads.

use std::collections::BTreeMap;

use placer_api::annotations::JOB_COMPLETION_INDEX;
use placer_api::k8s::api::batch::v1::Job;
use placer_api::k8s::api::core::v1::{
    EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodSchedulingGroup, PodSpec,
};
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::gang::{job_controller_ref, job_key, BuildError};
use super::naming;

/// Label with the Job's UID (set by the API server on the Job's template upstream).
pub const LABEL_CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";
/// Label with the Job's name.
pub const LABEL_JOB_NAME: &str = "batch.kubernetes.io/job-name";
/// Legacy label with the Job's UID.
pub const LABEL_LEGACY_CONTROLLER_UID: &str = "controller-uid";
/// Legacy label with the Job's name.
pub const LABEL_LEGACY_JOB_NAME: &str = "job-name";
/// Environment variable carrying the completion index in every container of an Indexed pod.
pub const ENV_COMPLETION_INDEX: &str = "JOB_COMPLETION_INDEX";

/// Label values are at most 63 characters; longer names are not put in labels.
const LABEL_VALUE_MAX_LEN: usize = 63;

/// A pod of `job` from its template: `generateName` `<job>-` (Indexed: `<job>-<index>-`),
/// the template's labels and annotations plus the Job labels (`batch.kubernetes.io/
/// controller-uid`, `batch.kubernetes.io/job-name`, `controller-uid`, `job-name`), for
/// Indexed pods the completion index as annotation and label, hostname `<job>-<index>` and
/// the `JOB_COMPLETION_INDEX` variable; a controller ownerReference to the Job
/// (`controller` and `blockOwnerDeletion` true) and, for a gang Job,
/// `spec.schedulingGroup.podGroupName` (v1.36 adds no ownerReference to the PodGroup).
pub fn build_pod(job: &Job, index: Option<i32>, pod_group: Option<&str>) -> Result<Pod, BuildError> {
    let (namespace, name) = job_key(job);
    let owner = job_controller_ref(job)?;
    let template = job.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    let template_meta = template.metadata.unwrap_or_default();
    let mut spec = template.spec.unwrap_or_default();

    let mut labels: BTreeMap<String, String> = template_meta.labels.unwrap_or_default();
    labels.insert(LABEL_CONTROLLER_UID.to_string(), owner.uid.clone());
    labels.insert(LABEL_LEGACY_CONTROLLER_UID.to_string(), owner.uid.clone());
    if name.len() <= LABEL_VALUE_MAX_LEN {
        labels.insert(LABEL_JOB_NAME.to_string(), name.clone());
        labels.insert(LABEL_LEGACY_JOB_NAME.to_string(), name.clone());
    }
    let mut annotations: BTreeMap<String, String> = template_meta.annotations.unwrap_or_default();

    let generate_name = match index {
        Some(i) => {
            annotations.insert(JOB_COMPLETION_INDEX.to_string(), i.to_string());
            labels.insert(JOB_COMPLETION_INDEX.to_string(), i.to_string());
            spec.hostname = Some(naming::indexed_pod_hostname(&name, i));
            add_completion_index_env(&mut spec);
            naming::indexed_pod_generate_name(&name, i)
        }
        None => naming::pod_generate_name(&name),
    };
    if let Some(pg) = pod_group {
        spec.scheduling_group = Some(PodSchedulingGroup { pod_group_name: Some(pg.to_string()) });
    }

    Ok(Pod {
        metadata: ObjectMeta {
            generate_name: Some(generate_name),
            namespace: Some(namespace),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![owner]),
            finalizers: template_meta.finalizers,
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    })
}

/// Adds `JOB_COMPLETION_INDEX` (from the pod's index annotation) to every container and
/// init container that does not define it.
fn add_completion_index_env(spec: &mut PodSpec) {
    let var = || EnvVar {
        name: ENV_COMPLETION_INDEX.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: None,
                field_path: format!("metadata.annotations['{JOB_COMPLETION_INDEX}']"),
            }),
            ..EnvVarSource::default()
        }),
    };
    let containers = spec.containers.iter_mut().chain(spec.init_containers.iter_mut().flatten());
    for c in containers {
        let env = c.env.get_or_insert_with(Vec::new);
        if !env.iter().any(|e| e.name == ENV_COMPLETION_INDEX) {
            env.push(var());
        }
    }
}

/// `status.phase` of a pod (`Pending` when unset).
pub fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Pending")
}

/// Phase Succeeded.
pub fn is_succeeded(pod: &Pod) -> bool {
    phase(pod) == "Succeeded"
}

/// Phase Failed.
pub fn is_failed(pod: &Pod) -> bool {
    phase(pod) == "Failed"
}

/// Phase Succeeded or Failed.
pub fn is_terminal(pod: &Pod) -> bool {
    is_succeeded(pod) || is_failed(pod)
}

/// Not terminal and not being deleted: counts toward `status.active`.
pub fn is_active(pod: &Pod) -> bool {
    !is_terminal(pod) && pod.metadata.deletion_timestamp.is_none()
}

/// `spec.nodeName` is set.
pub fn is_bound(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty())
}

/// Condition `Ready` is `True`.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The UID of a pod (empty when unset).
pub fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::api::batch::v1::JobSpec;
    use placer_api::k8s::api::core::v1::{Container, PodStatus, PodTemplateSpec};

    fn job() -> Job {
        Job {
            metadata: ObjectMeta {
                name: Some("train".into()),
                namespace: Some("ml".into()),
                uid: Some("u-1".into()),
                ..ObjectMeta::default()
            },
            spec: Some(JobSpec {
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some([("app".to_string(), "trainer".to_string())].into()),
                        annotations: Some([("placer.dev/run-time".to_string(), "30s".to_string())].into()),
                        ..ObjectMeta::default()
                    }),
                    spec: Some(PodSpec {
                        containers: vec![Container { name: "worker".into(), ..Container::default() }],
                        ..PodSpec::default()
                    }),
                },
                ..JobSpec::default()
            }),
            status: None,
        }
    }

    #[test]
    fn a_non_indexed_pod_gets_the_job_labels_and_a_controller_reference() {
        let pod = build_pod(&job(), None, None).unwrap();
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("train-"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("ml"));
        let labels = pod.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["app"], "trainer");
        assert_eq!(labels[LABEL_CONTROLLER_UID], "u-1");
        assert_eq!(labels[LABEL_LEGACY_CONTROLLER_UID], "u-1");
        assert_eq!(labels[LABEL_JOB_NAME], "train");
        assert_eq!(labels[LABEL_LEGACY_JOB_NAME], "train");
        assert!(!labels.contains_key(JOB_COMPLETION_INDEX));
        assert_eq!(pod.metadata.annotations.as_ref().unwrap()["placer.dev/run-time"], "30s");
        let owners = pod.metadata.owner_references.as_ref().unwrap();
        assert_eq!(owners.len(), 1);
        assert_eq!(
            (owners[0].kind.as_str(), owners[0].name.as_str(), owners[0].uid.as_str()),
            ("Job", "train", "u-1")
        );
        assert_eq!((owners[0].controller, owners[0].block_owner_deletion), (Some(true), Some(true)));
        let spec = pod.spec.as_ref().unwrap();
        assert!(spec.scheduling_group.is_none());
        assert!(spec.hostname.is_none());
        assert!(spec.containers[0].env.is_none());
    }

    #[test]
    fn an_indexed_pod_carries_its_index_and_joins_the_pod_group() {
        let pod = build_pod(&job(), Some(2), Some("train-abc-train-pgt-0-xyz")).unwrap();
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("train-2-"));
        assert_eq!(pod.metadata.annotations.as_ref().unwrap()[JOB_COMPLETION_INDEX], "2");
        assert_eq!(pod.metadata.labels.as_ref().unwrap()[JOB_COMPLETION_INDEX], "2");
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("train-2"));
        assert_eq!(
            spec.scheduling_group.as_ref().and_then(|g| g.pod_group_name.as_deref()),
            Some("train-abc-train-pgt-0-xyz")
        );
        let env = spec.containers[0].env.as_ref().unwrap();
        assert_eq!(env.len(), 1);
        assert_eq!(env[0].name, ENV_COMPLETION_INDEX);
        assert_eq!(pod.metadata.owner_references.as_ref().unwrap().len(), 1, "no PodGroup ownerRef in v1.36");
    }

    #[test]
    fn pod_states_follow_phase_binding_and_conditions() {
        let mut pod = build_pod(&job(), None, None).unwrap();
        assert_eq!(phase(&pod), "Pending");
        assert!(is_active(&pod) && !is_bound(&pod) && !is_ready(&pod));
        if let Some(s) = pod.spec.as_mut() {
            s.node_name = Some("n1".into());
        }
        assert!(is_bound(&pod));
        pod.status = Some(PodStatus { phase: Some("Succeeded".into()), ..PodStatus::default() });
        assert!(is_terminal(&pod) && is_succeeded(&pod) && !is_active(&pod));
    }

    #[test]
    fn a_job_without_uid_cannot_make_pods() {
        let mut j = job();
        j.metadata.uid = None;
        assert!(build_pod(&j, None, None).is_err());
    }
}
