//! What kube-apiserver does to an object before the store sees it, beyond the store's own
//! admission (which every write goes through: the Job parallelism check and whatever the
//! store validates): namespace lifecycle, clearing status on create, the defaults of
//! Pods and PriorityClasses that schedulers and `kubectl describe` read, the Priority
//! and DefaultTolerationSeconds admission plugins, and the node information a simulated
//! kubelet reports.

use placer_api::k8s::api::core::v1::{NamespaceSpec, NamespaceStatus, Node, NodeSystemInfo, Pod};
use placer_cluster::embedded::EmbeddedCluster;
use placer_cluster::{ClusterStore, Kind, Object, ObjectRef};

use crate::errors::{ApiError, ApiResult};
use crate::resources;

/// Namespaces every cluster has.
pub const SYSTEM_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// NamespaceLifecycle: a namespaced object needs its namespace to exist and not be
/// terminating.
pub fn check_namespace(store: &EmbeddedCluster, kind: Kind, namespace: &str) -> ApiResult<()> {
    if !kind.namespaced() {
        return Ok(());
    }
    match store.get(&ObjectRef::new(Kind::Namespace, "", namespace)) {
        None => Err(ApiError::not_found(resources::for_kind(Kind::Namespace), namespace)),
        Some(Object::Namespace(ns)) if ns.metadata.deletion_timestamp.is_some() => Err(ApiError::forbidden(
            resources::for_kind(kind),
            "",
            &format!("unable to create new content in namespace {namespace} because it is being terminated"),
        )),
        Some(_) => Ok(()),
    }
}

/// Create-time preparation: status cleared (nodes keep theirs: a simulated node reports
/// its capacity when it registers), namespaces `Active`, pod defaults and admission.
pub fn prepare_create(store: &EmbeddedCluster, obj: &mut Object) -> ApiResult<()> {
    match obj {
        Object::Pod(p) => {
            let p = std::sync::Arc::make_mut(p);
            p.status = None;
            default_pod(p);
            admit_priority(store, p)?;
        }
        Object::Job(j) => j.status = None,
        Object::CronJob(c) => c.status = None,
        Object::PodGroup(g) => g.status = None,
        Object::PodDisruptionBudget(p) => p.status = None,
        Object::Namespace(ns) => {
            ns.status = Some(NamespaceStatus { phase: Some("Active".into()), ..NamespaceStatus::default() });
            let spec = ns.spec.get_or_insert_with(NamespaceSpec::default);
            spec.finalizers.get_or_insert_with(|| vec!["kubernetes".into()]);
        }
        Object::Node(n) => simulated_node_info(std::sync::Arc::make_mut(n)),
        Object::PriorityClass(pc) => {
            pc.preemption_policy.get_or_insert_with(|| "PreemptLowerPriority".into());
        }
        _ => {}
    }
    Ok(())
}

/// What a simulated kubelet reports about its node when it registers (kubectl's VERSION
/// column, `describe node`'s System Info), where the node does not say.
pub fn simulated_node_info(n: &mut Node) {
    let info =
        n.status.get_or_insert_with(Default::default).node_info.get_or_insert_with(NodeSystemInfo::default);
    for (field, value) in [
        (&mut info.kubelet_version, "v1.36.0-placer"),
        (&mut info.operating_system, "linux"),
        (&mut info.architecture, "amd64"),
        (&mut info.os_image, "Placer simulated node"),
        (&mut info.container_runtime_version, "placer-sim://1"),
    ] {
        if field.is_empty() {
            *field = value.to_string();
        }
    }
}

/// Update-time defaulting (what decoding a Pod defaults is defaulted again).
pub fn prepare_update(obj: &mut Object) {
    match obj {
        Object::Pod(p) => default_pod(std::sync::Arc::make_mut(p)),
        Object::PriorityClass(pc) => {
            pc.preemption_policy.get_or_insert_with(|| "PreemptLowerPriority".into());
        }
        _ => {}
    }
}

/// `SetDefaults_Pod` and friends, for the fields the scheduler and kubectl read.
pub fn default_pod(p: &mut Pod) {
    let Some(spec) = p.spec.as_mut() else { return };
    spec.scheduler_name.get_or_insert_with(|| "default-scheduler".into());
    spec.restart_policy.get_or_insert_with(|| "Always".into());
    spec.dns_policy.get_or_insert_with(|| "ClusterFirst".into());
    // No default terminationGracePeriodSeconds (kube-apiserver's is 30): the store gives
    // pods with one a graceful deletion that only a kubelet's final delete ends, and
    // simulated pods have no containers to stop; without it they go at once, as the
    // containers of a real pod that exit on SIGTERM would let them.
    spec.enable_service_links.get_or_insert(true);
    spec.security_context.get_or_insert_with(Default::default);
    for c in spec.containers.iter_mut().chain(spec.init_containers.iter_mut().flatten()) {
        c.termination_message_path.get_or_insert_with(|| "/dev/termination-log".into());
        c.termination_message_policy.get_or_insert_with(|| "File".into());
        if c.image_pull_policy.is_none() {
            let image = c.image.as_deref().unwrap_or("");
            let tag = image.rsplit('/').next().and_then(|last| last.split_once(':')).map(|(_, t)| t);
            let latest = !image.contains('@') && tag.is_none_or(|t| t == "latest");
            c.image_pull_policy = Some(if latest { "Always" } else { "IfNotPresent" }.into());
        }
    }
    placer_sim::lifecycle::add_default_toleration_seconds(spec);
}

/// The Priority admission plugin: `spec.priority` from the PriorityClass named in
/// `spec.priorityClassName` (or the global default, else 0), and its preemption policy.
fn admit_priority(store: &EmbeddedCluster, p: &mut Pod) -> ApiResult<()> {
    let name = p.metadata.name.clone().unwrap_or_default();
    let Some(spec) = p.spec.as_mut() else { return Ok(()) };
    let classes = store.list(Kind::PriorityClass);
    let class = match spec.priority_class_name.as_deref().filter(|n| !n.is_empty()) {
        Some(wanted) => {
            let found = classes.iter().find_map(|o| match o {
                Object::PriorityClass(pc) if pc.metadata.name.as_deref() == Some(wanted) => Some(pc.clone()),
                _ => None,
            });
            match found {
                Some(pc) => Some(pc),
                None if wanted == "system-node-critical" || wanted == "system-cluster-critical" => None,
                None => {
                    return Err(ApiError::forbidden(
                        resources::for_kind(Kind::Pod),
                        &name,
                        &format!("no PriorityClass with name {wanted} was found"),
                    ))
                }
            }
        }
        None => classes.iter().find_map(|o| match o {
            Object::PriorityClass(pc) if pc.global_default == Some(true) => Some(pc.clone()),
            _ => None,
        }),
    };
    let value = class.as_ref().and_then(|c| c.value).unwrap_or(0);
    if let Some(given) = spec.priority {
        if given != value {
            return Err(ApiError::forbidden(
                resources::for_kind(Kind::Pod),
                &name,
                &format!("the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {value} from the given PriorityClass name"),
            ));
        }
    }
    spec.priority = Some(value);
    if let Some(pc) = &class {
        if spec.priority_class_name.is_none() {
            spec.priority_class_name = pc.metadata.name.clone();
        }
    }
    spec.preemption_policy =
        Some(class.and_then(|c| c.preemption_policy).unwrap_or_else(|| "PreemptLowerPriority".into()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::api::core::v1::{Container, Namespace, PodSpec};
    use placer_api::k8s::api::scheduling::v1::PriorityClass;

    fn pod(class: Option<&str>) -> Object {
        Object::pod(Pod {
            metadata: placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("p".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                priority_class_name: class.map(str::to_string),
                containers: vec![Container {
                    name: "c".into(),
                    image: Some("busybox:1.36".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    #[test]
    fn pods_get_defaults_and_priority() {
        let mut store = EmbeddedCluster::new();
        let mut pc = PriorityClass::default();
        pc.metadata.name = Some("high".into());
        pc.value = Some(1000);
        store.create(Object::PriorityClass(pc)).unwrap();
        let mut p = pod(Some("high"));
        prepare_create(&store, &mut p).unwrap();
        let spec = p.as_pod().unwrap().spec.clone().unwrap();
        assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
        assert_eq!(spec.priority, Some(1000));
        assert_eq!(spec.preemption_policy.as_deref(), Some("PreemptLowerPriority"));
        assert_eq!(spec.containers[0].image_pull_policy.as_deref(), Some("IfNotPresent"));
        assert_eq!(spec.tolerations.unwrap().len(), 2);
        let err = prepare_create(&store, &mut pod(Some("nope"))).unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (403, "pods \"p\" is forbidden: no PriorityClass with name nope was found")
        );
    }

    #[test]
    fn namespaces_must_exist() {
        let mut store = EmbeddedCluster::new();
        assert_eq!(
            check_namespace(&store, Kind::Pod, "demo").unwrap_err().message,
            "namespaces \"demo\" not found"
        );
        let mut ns = Namespace::default();
        ns.metadata.name = Some("demo".into());
        let mut ns = Object::Namespace(ns);
        prepare_create(&store, &mut ns).unwrap();
        store.create(ns).unwrap();
        assert!(check_namespace(&store, Kind::Pod, "demo").is_ok());
        assert!(check_namespace(&store, Kind::Node, "").is_ok());
    }
}
