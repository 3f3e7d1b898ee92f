//! The Kubernetes objects of an arrival. Every configuration gets the very same objects:
//! only the scheduler's configuration differs between runs.
//!
//! * required level: `spec.schedulingConstraints.topology: [{key}]` on the PodGroup (for a
//!   Job, `kueue.x-k8s.io/podset-required-topology` on the pod template, which the Job
//!   controller turns into that field). Both semantics honour it.
//! * preferred level and slices: Kueue's annotations (`podset-preferred-topology`,
//!   `podset-slice-required-topology`, `podset-slice-size`). The hierarchical semantics
//!   honour them; KEP-5732 has no preferred level (its "prioritized placement" is future
//!   work) nor slices, so under it such a group is a plain gang.
//! * `placer.dev/run-time` on every pod: the simulated kubelet ends it `Succeeded` after
//!   the arrival's run time.

use std::collections::BTreeMap;

use placer_api::annotations::{
    PODSET_PREFERRED_TOPOLOGY, PODSET_REQUIRED_TOPOLOGY, PODSET_SLICE_REQUIRED_TOPOLOGY, PODSET_SLICE_SIZE,
    SIM_RUN_TIME,
};
use placer_api::k8s::api::batch::v1::{Job, JobSpec};
use placer_api::k8s::api::core::v1::{
    Container, Node, NodeCondition, Pod, PodSchedulingGroup, PodSpec, PodTemplateSpec, ResourceRequirements,
};
use placer_api::k8s::api::scheduling::v1alpha2::{
    GangSchedulingPolicy, PodGroup, PodGroupSchedulingConstraints, PodGroupSchedulingPolicy, PodGroupSpec,
    TopologyConstraint,
};
use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use placer_cluster::Object;
use placer_sim::generate::generated_nodes;

use crate::trace::{Arrival, ArrivalKind, Cluster};

/// Namespace of every object the lab creates.
pub const NAMESPACE: &str = "lab";
/// Label on every pod (and Job template): the arrival it belongs to.
pub const WORKLOAD_LABEL: &str = "lab.placer.dev/workload";

/// The cluster's nodes, Ready.
pub fn nodes(cluster: &Cluster) -> Vec<Node> {
    let mut nodes = generated_nodes(&cluster.spec);
    for n in &mut nodes {
        n.status.get_or_insert_with(Default::default).conditions = Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: Some("KubeletReady".into()),
            ..Default::default()
        }]);
    }
    nodes
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(NAMESPACE.to_string()),
        ..ObjectMeta::default()
    }
}

/// Kueue annotations for the preferred level and slices.
fn kueue_annotations(a: &Arrival, cluster: &Cluster, with_required: bool) -> BTreeMap<String, String> {
    let level = |l: usize| cluster.levels()[l].clone();
    let mut ann = BTreeMap::new();
    if with_required {
        if let Some(l) = a.topology.required {
            ann.insert(PODSET_REQUIRED_TOPOLOGY.to_string(), level(l));
        }
    }
    if let Some(l) = a.topology.preferred {
        ann.insert(PODSET_PREFERRED_TOPOLOGY.to_string(), level(l));
    }
    if let Some((l, size)) = a.topology.slice {
        ann.insert(PODSET_SLICE_REQUIRED_TOPOLOGY.to_string(), level(l));
        ann.insert(PODSET_SLICE_SIZE.to_string(), size.to_string());
    }
    ann
}

fn pod_spec(a: &Arrival, group: Option<&str>) -> PodSpec {
    let limits: BTreeMap<String, Quantity> = a
        .requests
        .iter()
        .filter(|(k, _)| k.contains('/') && !k.starts_with("kubernetes.io/"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    PodSpec {
        scheduling_group: group.map(|g| PodSchedulingGroup { pod_group_name: Some(g.to_string()) }),
        priority: Some(a.priority),
        termination_grace_period_seconds: Some(0),
        containers: vec![Container {
            name: "main".to_string(),
            image: Some("registry.example.com/lab:1".to_string()),
            resources: Some(ResourceRequirements {
                requests: Some(a.requests.clone()),
                limits: (!limits.is_empty()).then_some(limits),
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        }],
        ..PodSpec::default()
    }
}

fn pod_labels(a: &Arrival) -> BTreeMap<String, String> {
    [(WORKLOAD_LABEL.to_string(), a.name.clone())].into()
}

fn run_time(a: &Arrival) -> String {
    format!("{}ms", a.run_ms)
}

/// Name of pod `i` of attempt `attempt` (0 = the first; a preempted PodGroup is
/// resubmitted as attempt 1, 2, ...).
pub fn pod_name(a: &Arrival, attempt: u32, i: u32) -> String {
    match (a.kind, attempt) {
        (ArrivalKind::Pod, 0) => a.name.clone(),
        (ArrivalKind::Pod, n) => format!("{}-r{n}", a.name),
        (_, 0) => format!("{}-{i}", a.name),
        (_, n) => format!("{}-r{n}-{i}", a.name),
    }
}

/// The pods of a PodGroup or Pod arrival (attempt `attempt`).
pub fn pods(a: &Arrival, attempt: u32) -> Vec<Pod> {
    let group = (a.kind == ArrivalKind::PodGroup).then_some(a.name.as_str());
    (0..a.pods)
        .map(|i| Pod {
            metadata: ObjectMeta {
                labels: Some(pod_labels(a)),
                annotations: Some([(SIM_RUN_TIME.to_string(), run_time(a))].into()),
                ..meta(&pod_name(a, attempt, i))
            },
            spec: Some(pod_spec(a, group)),
            status: None,
        })
        .collect()
}

/// The PodGroup of a PodGroup arrival.
pub fn pod_group(a: &Arrival, cluster: &Cluster) -> PodGroup {
    let annotations = kueue_annotations(a, cluster, false);
    PodGroup {
        metadata: ObjectMeta {
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..meta(&a.name)
        },
        spec: PodGroupSpec {
            scheduling_policy: PodGroupSchedulingPolicy {
                gang: Some(GangSchedulingPolicy {
                    min_count: i32::try_from(a.min_count).unwrap_or(i32::MAX),
                }),
                basic: None,
            },
            scheduling_constraints: a.topology.required.map(|l| PodGroupSchedulingConstraints {
                topology: Some(vec![TopologyConstraint { key: cluster.levels()[l].clone() }]),
            }),
            priority: Some(a.priority),
            ..PodGroupSpec::default()
        },
        status: None,
    }
}

/// The Job of a Job arrival: Indexed, `parallelism = completions = pods` (gang-shaped
/// when more than one pod), deleted as soon as it finishes (`ttlSecondsAfterFinished: 0`).
pub fn job(a: &Arrival, cluster: &Cluster) -> Job {
    let n = i32::try_from(a.pods).unwrap_or(i32::MAX);
    let annotations = {
        let mut m = kueue_annotations(a, cluster, true);
        m.insert(SIM_RUN_TIME.to_string(), run_time(a));
        m
    };
    let mut spec = pod_spec(a, None);
    spec.restart_policy = Some("Never".to_string());
    Job {
        metadata: meta(&a.name),
        spec: Some(JobSpec {
            parallelism: Some(n),
            completions: Some(n),
            completion_mode: Some("Indexed".to_string()),
            backoff_limit: Some(6),
            ttl_seconds_after_finished: Some(0),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels(a)),
                    annotations: Some(annotations),
                    ..ObjectMeta::default()
                }),
                spec: Some(spec),
            },
            ..JobSpec::default()
        }),
        status: None,
    }
}

/// Everything to create for an arrival's first attempt, in creation order.
pub fn objects(a: &Arrival, cluster: &Cluster) -> Vec<Object> {
    match a.kind {
        ArrivalKind::Job => vec![Object::Job(Box::new(job(a, cluster)))],
        ArrivalKind::PodGroup => {
            let mut v = vec![Object::PodGroup(pod_group(a, cluster))];
            v.extend(pods(a, 0).into_iter().map(|p| Object::Pod(p.into())));
            v
        }
        ArrivalKind::Pod => pods(a, 0).into_iter().map(|p| Object::Pod(p.into())).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Res, TopologyAsk};
    use placer_sim::scenario::GenerateSpec;

    fn cluster() -> Cluster {
        Cluster {
            spec: GenerateSpec {
                levels: vec!["topology.placer.dev/rack".into(), "kubernetes.io/hostname".into()],
                fanout: vec![2, 2],
                allocatable: [
                    ("cpu".to_string(), Quantity("8".into())),
                    ("pods".to_string(), Quantity("110".into())),
                ]
                .into(),
                labels: BTreeMap::new(),
            },
        }
    }

    fn arrival(kind: ArrivalKind, topology: TopologyAsk) -> Arrival {
        Arrival {
            name: "g".into(),
            at_ms: 0,
            kind,
            pods: 4,
            min_count: 3,
            requests: [
                ("cpu".to_string(), Quantity("1".into())),
                ("nvidia.com/gpu".to_string(), Quantity("2".into())),
            ]
            .into(),
            res: Res::default(),
            topology,
            priority: 7,
            run_ms: 1500,
            class: "c".into(),
        }
    }

    #[test]
    fn pod_group_arrival_makes_the_group_then_its_pods() {
        let c = cluster();
        let a = arrival(ArrivalKind::PodGroup, TopologyAsk { required: Some(0), ..TopologyAsk::default() });
        let objs = objects(&a, &c);
        assert_eq!(objs.len(), 5);
        let Object::PodGroup(pg) = &objs[0] else { panic!("PodGroup first") };
        assert_eq!(pg.spec.scheduling_policy.gang.as_ref().map(|g| g.min_count), Some(3));
        let key = pg
            .spec
            .scheduling_constraints
            .as_ref()
            .and_then(|c| c.topology.as_ref())
            .map(|t| t[0].key.clone());
        assert_eq!(key.as_deref(), Some("topology.placer.dev/rack"));
        assert_eq!(pg.spec.priority, Some(7));
        let Object::Pod(p) = &objs[4] else { panic!("pods after") };
        assert_eq!(p.metadata.name.as_deref(), Some("g-3"));
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.scheduling_group.as_ref().and_then(|g| g.pod_group_name.as_deref()), Some("g"));
        assert_eq!(spec.priority, Some(7));
        let limits = spec.containers[0].resources.as_ref().and_then(|r| r.limits.clone()).unwrap();
        assert_eq!(limits.keys().collect::<Vec<_>>(), ["nvidia.com/gpu"], "extended resources need limits");
        assert_eq!(p.metadata.annotations.as_ref().unwrap()[SIM_RUN_TIME], "1500ms");
        assert_eq!(p.metadata.labels.as_ref().unwrap()[WORKLOAD_LABEL], "g");
        assert_eq!(pod_name(&a, 2, 1), "g-r2-1");
    }

    #[test]
    fn preferred_and_slices_are_kueue_annotations() {
        let c = cluster();
        let t = TopologyAsk { preferred: Some(0), slice: Some((1, 2)), ..TopologyAsk::default() };
        let pg = pod_group(&arrival(ArrivalKind::PodGroup, t), &c);
        assert!(pg.spec.scheduling_constraints.is_none());
        let ann = pg.metadata.annotations.unwrap();
        assert_eq!(ann[PODSET_PREFERRED_TOPOLOGY], "topology.placer.dev/rack");
        assert_eq!(ann[PODSET_SLICE_REQUIRED_TOPOLOGY], "kubernetes.io/hostname");
        assert_eq!(ann[PODSET_SLICE_SIZE], "2");
    }

    #[test]
    fn job_arrival_is_an_indexed_gang_job_with_the_topology_on_its_template() {
        let c = cluster();
        let a = arrival(ArrivalKind::Job, TopologyAsk { required: Some(0), ..TopologyAsk::default() });
        let j = job(&a, &c);
        let spec = j.spec.unwrap();
        assert_eq!((spec.parallelism, spec.completions), (Some(4), Some(4)));
        assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
        assert_eq!(spec.ttl_seconds_after_finished, Some(0));
        let ann = spec.template.metadata.unwrap().annotations.unwrap();
        assert_eq!(ann[PODSET_REQUIRED_TOPOLOGY], "topology.placer.dev/rack");
        assert_eq!(ann[SIM_RUN_TIME], "1500ms");
    }

    #[test]
    fn generated_nodes_are_ready() {
        let n = nodes(&cluster());
        assert_eq!(n.len(), 4);
        let cond = n[0].status.as_ref().and_then(|s| s.conditions.as_ref()).unwrap();
        assert_eq!((cond[0].type_.as_str(), cond[0].status.as_str()), ("Ready", "True"));
    }
}
