//! Recognising a binding confirmation without reading the pod again.
//!
//! After the engine assumed a pod on a node, the store's next version of that pod is
//! normally the binding itself: `spec.nodeName` set, a `PodScheduled` condition, a new
//! `resourceVersion` (and `managedFields` on a real API server). When that is all that
//! changed, everything [`super::PodInfo::from_pod`] reads is unchanged but the node, so the
//! engine confirms its assumption in place instead of building the pod's view again.
//!
//! The comparison is exact and whole: every field of `ObjectMeta`, `PodSpec` and
//! `PodStatus` is compared except those four, and the structs are destructured without
//! `..`, so a field added to the API types does not compile until it is classified here.

use placer_api::k8s::api::core::v1::{Pod, PodCondition, PodSpec, PodStatus};
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// `a` and `b` agree on every listed field; the destructuring of `a` lists the skipped
/// ones too, so it is exhaustive.
macro_rules! same_fields {
    ($a:expr, $b:expr, $ty:ident { $($f:ident),* $(,)? } skip { $($skip:ident),* $(,)? }) => {{
        let $ty { $($f: _,)* $($skip: _,)* } = $a;
        true $(&& $a.$f == $b.$f)*
    }};
}

/// The condition a binding adds or rewrites.
const POD_SCHEDULED: &str = "PodScheduled";

/// Whether `new` is `old` with at most what a binding writes changed: `spec.nodeName`,
/// the `PodScheduled` condition, `metadata.resourceVersion` and `metadata.managedFields`.
pub(crate) fn differs_only_by_binding(old: &Pod, new: &Pod) -> bool {
    same_meta(&old.metadata, &new.metadata)
        && match (&old.spec, &new.spec) {
            (Some(a), Some(b)) => same_spec(a, b),
            (None, None) => true,
            _ => false,
        }
        && match (&old.status, &new.status) {
            (Some(a), Some(b)) => same_status(a, b),
            (None, None) => true,
            // No status reads as an empty one (every status field is optional).
            (Some(s), None) | (None, Some(s)) => same_status(s, &PodStatus::default()),
        }
}

fn same_meta(a: &ObjectMeta, b: &ObjectMeta) -> bool {
    same_fields!(a, b, ObjectMeta {
        annotations, creation_timestamp, deletion_grace_period_seconds, deletion_timestamp,
        finalizers, generate_name, generation, labels, name, namespace, owner_references,
        self_link, uid,
    } skip { managed_fields, resource_version })
}

fn same_spec(a: &PodSpec, b: &PodSpec) -> bool {
    same_fields!(a, b, PodSpec {
        active_deadline_seconds, affinity, automount_service_account_token, containers,
        dns_config, dns_policy, enable_service_links, ephemeral_containers, host_aliases,
        host_ipc, host_network, host_pid, host_users, hostname, hostname_override,
        image_pull_secrets, init_containers, node_selector, os, overhead, preemption_policy,
        priority, priority_class_name, readiness_gates, resource_claims, resources,
        restart_policy, runtime_class_name, scheduler_name, scheduling_gates, scheduling_group,
        security_context, service_account, service_account_name, set_hostname_as_fqdn,
        share_process_namespace, subdomain, termination_grace_period_seconds, tolerations,
        topology_spread_constraints, volumes,
    } skip { node_name })
}

fn same_status(a: &PodStatus, b: &PodStatus) -> bool {
    same_fields!(a, b, PodStatus {
        allocated_resources, container_statuses, ephemeral_container_statuses,
        extended_resource_claim_status, host_ip, host_ips, init_container_statuses, message,
        node_allocatable_resource_claim_statuses, nominated_node_name, observed_generation,
        phase, pod_ip, pod_ips, qos_class, reason, resize, resource_claim_statuses, resources,
        start_time,
    } skip { conditions })
        && same_conditions_but_scheduled(a.conditions.as_deref(), b.conditions.as_deref())
}

/// The conditions other than `PodScheduled` are the same, in the same order.
fn same_conditions_but_scheduled(a: Option<&[PodCondition]>, b: Option<&[PodCondition]>) -> bool {
    fn others(c: Option<&[PodCondition]>) -> impl Iterator<Item = &PodCondition> {
        c.unwrap_or_default().iter().filter(|c| c.type_ != POD_SCHEDULED)
    }
    others(a).eq(others(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::api::core::v1::{Container, EphemeralVolumeSource, ResourceRequirements, Volume};
    use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;
    use placer_api::k8s::apimachinery::pkg::apis::meta::v1::Time;

    fn pending() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                resource_version: Some("10".into()),
                labels: Some([("app".to_string(), "x".to_string())].into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        requests: Some([("cpu".to_string(), Quantity("1".into()))].into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus { phase: Some("Pending".into()), ..Default::default() }),
        }
    }

    fn bound(p: &Pod) -> Pod {
        let mut b = p.clone();
        b.metadata.resource_version = Some("11".into());
        b.spec.get_or_insert_with(Default::default).node_name = Some("n1".into());
        b.status.get_or_insert_with(Default::default).conditions = Some(vec![PodCondition {
            type_: POD_SCHEDULED.into(),
            status: "True".into(),
            ..Default::default()
        }]);
        b
    }

    #[test]
    fn a_binding_alone_is_recognised() {
        let p = pending();
        assert!(differs_only_by_binding(&p, &bound(&p)));
        assert!(differs_only_by_binding(&p, &p));
        // A pod created without a status reads as one with an empty status.
        let mut bare = pending();
        bare.status = None;
        let mut written = bare.clone();
        written.status = bound(&bare).status;
        assert!(differs_only_by_binding(&bare, &written), "only a PodScheduled condition was added");
        assert!(differs_only_by_binding(&written, &bare));
    }

    #[test]
    fn any_other_change_is_not_a_binding() {
        let p = pending();
        let mut b = bound(&p);
        b.metadata.labels = None;
        assert!(!differs_only_by_binding(&p, &b), "labels");
        let mut b = bound(&p);
        b.spec.get_or_insert_with(Default::default).priority = Some(5);
        assert!(!differs_only_by_binding(&p, &b), "spec");
        let mut b = bound(&p);
        b.status.get_or_insert_with(Default::default).phase = Some("Running".into());
        assert!(!differs_only_by_binding(&p, &b), "phase");
        let mut b = bound(&p);
        b.status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new)
            .push(PodCondition { type_: "Ready".into(), status: "False".into(), ..Default::default() });
        assert!(!differs_only_by_binding(&p, &b), "a Ready condition");
        let mut b = bound(&p);
        b.metadata.deletion_grace_period_seconds = Some(30);
        assert!(!differs_only_by_binding(&p, &b), "deletion");
        let mut b = bound(&p);
        b.status = None;
        assert!(!differs_only_by_binding(&p, &b), "status gone");
    }

    /// One change a store could make to a pod between two versions.
    #[derive(Debug, Clone)]
    enum Change {
        Bind(String),
        ResourceVersion(String),
        Scheduled(bool),
        Label(String),
        Annotation(String),
        Priority(i32),
        NodeSelector(String),
        Phase(String),
        NotReady,
        Requests(u32),
        Nominated(String),
        Name(String),
        Uid(String),
        Namespace(String),
        /// A generic ephemeral volume: its claim is named after the pod.
        EphemeralVolume,
        Deleting,
    }

    fn apply(p: &mut Pod, c: &Change) {
        let spec = p.spec.get_or_insert_with(Default::default);
        match c {
            Change::Bind(n) => spec.node_name = Some(n.clone()),
            Change::ResourceVersion(v) => p.metadata.resource_version = Some(v.clone()),
            Change::Scheduled(ok) => {
                let conditions =
                    p.status.get_or_insert_with(Default::default).conditions.get_or_insert_with(Vec::new);
                conditions.retain(|c| c.type_ != POD_SCHEDULED);
                conditions.push(PodCondition {
                    type_: POD_SCHEDULED.into(),
                    status: if *ok { "True" } else { "False" }.into(),
                    ..Default::default()
                });
            }
            Change::Label(v) => {
                p.metadata.labels.get_or_insert_with(Default::default).insert("k".into(), v.clone());
            }
            Change::Annotation(v) => {
                p.metadata.annotations.get_or_insert_with(Default::default).insert("a".into(), v.clone());
            }
            Change::Priority(v) => spec.priority = Some(*v),
            Change::NodeSelector(v) => {
                spec.node_selector.get_or_insert_with(Default::default).insert("zone".into(), v.clone());
            }
            Change::Phase(v) => p.status.get_or_insert_with(Default::default).phase = Some(v.clone()),
            Change::NotReady => {
                p.status.get_or_insert_with(Default::default).conditions.get_or_insert_with(Vec::new).push(
                    PodCondition { type_: "Ready".into(), status: "False".into(), ..Default::default() },
                );
            }
            Change::Requests(cpu) => {
                if let Some(c) = spec.containers.first_mut() {
                    c.resources = Some(ResourceRequirements {
                        requests: Some([("cpu".to_string(), Quantity(format!("{cpu}m")))].into()),
                        ..Default::default()
                    });
                }
            }
            Change::Nominated(n) => {
                p.status.get_or_insert_with(Default::default).nominated_node_name = Some(n.clone())
            }
            Change::Name(n) => p.metadata.name = Some(n.clone()),
            Change::Uid(u) => p.metadata.uid = Some(u.clone()),
            Change::Namespace(n) => p.metadata.namespace = Some(n.clone()),
            Change::EphemeralVolume => spec.volumes.get_or_insert_with(Vec::new).push(Volume {
                name: "scratch".into(),
                ephemeral: Some(EphemeralVolumeSource::default()),
                ..Default::default()
            }),
            Change::Deleting => p.metadata.deletion_timestamp = Some(Time(Default::default())),
        }
    }

    /// A pending pod with `before` applied, and that version with `after` applied too.
    fn two_versions(before: &[Change], after: &[Change]) -> (Pod, Pod) {
        let mut first = pending();
        for c in before {
            apply(&mut first, c);
        }
        let mut second = first.clone();
        for c in after {
            apply(&mut second, c);
        }
        (first, second)
    }

    fn change() -> impl proptest::strategy::Strategy<Value = Change> {
        use proptest::prelude::*;
        let word = || prop::sample::select(vec!["a", "b"]).prop_map(String::from);
        prop_oneof![
            word().prop_map(Change::Bind),
            word().prop_map(Change::ResourceVersion),
            any::<bool>().prop_map(Change::Scheduled),
            word().prop_map(Change::Label),
            word().prop_map(Change::Annotation),
            (0..2i32).prop_map(Change::Priority),
            word().prop_map(Change::NodeSelector),
            prop::sample::select(vec!["Pending", "Running"]).prop_map(|s| Change::Phase(s.into())),
            Just(Change::NotReady),
            (1..3u32).prop_map(|c| Change::Requests(c * 500)),
            word().prop_map(Change::Nominated),
            word().prop_map(Change::Name),
            word().prop_map(Change::Uid),
            word().prop_map(Change::Namespace),
            Just(Change::EphemeralVolume),
            Just(Change::Deleting),
        ]
    }

    proptest::proptest! {
        /// The shortcut is exact: whenever it calls two versions a binding apart, reading
        /// the new one gives what reading the old one gives with the new node (the plain
        /// path), so the engine's in-place confirmation equals a full read.
        #[test]
        fn a_recognised_binding_reads_as_the_old_pod_on_the_new_node(
            before in proptest::collection::vec(change(), 0..4),
            after in proptest::collection::vec(change(), 0..4),
        ) {
            let (old, new) = two_versions(&before, &after);
            if differs_only_by_binding(&old, &new) {
                let read_old = crate::model::PodInfo::from_pod(std::sync::Arc::new(old)).expect("reads");
                let read_new = crate::model::PodInfo::from_pod(std::sync::Arc::new(new.clone())).expect("reads");
                let mut expected = read_old;
                expected.node_name = new.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty()).map(std::sync::Arc::from);
                proptest::prop_assert_eq!(read_new, expected);
            }
        }
    }

    proptest::proptest! {
        /// The same changes drive `PodInfo::read_like` (gang members sharing a record):
        /// whenever it reads a pod from another pod's record, the result is what reading
        /// the pod in full gives, and a pod that differs only in its identity (name, uid)
        /// is always read alike.
        #[test]
        fn a_pod_read_alike_reads_as_the_pod_does(
            before in proptest::collection::vec(change(), 0..4),
            after in proptest::collection::vec(change(), 0..4),
        ) {
            use crate::model::{ObjectKey, PodInfo};
            use std::sync::Arc;
            let key = |p: &Pod| {
                ObjectKey::new(p.metadata.namespace.as_deref().unwrap_or("default"), p.metadata.name.as_deref().unwrap_or(""))
            };
            let (prev, pod) = two_versions(&before, &after);
            let prev_info = PodInfo::from_pod(Arc::new(prev.clone())).expect("reads");
            let full = PodInfo::from_pod(Arc::new(pod.clone())).expect("reads");
            if let Some(alike) = PodInfo::read_like(&prev_info, &prev, &pod, key(&pod)) {
                proptest::prop_assert!(alike.same_but_identity(&prev_info), "it shares the view");
                proptest::prop_assert!(!full.same_but_identity(&prev_info), "a full read does not");
                proptest::prop_assert_eq!(alike, full);
            }
            let identity_only = after.iter().all(|c| matches!(c, Change::Name(_) | Change::Uid(_)));
            let ephemeral = before.iter().any(|c| matches!(c, Change::EphemeralVolume));
            if identity_only && !ephemeral {
                proptest::prop_assert!(PodInfo::read_like(&prev_info, &prev, &pod, key(&pod)).is_some());
            }
        }
    }
}
