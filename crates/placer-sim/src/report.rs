//! Summaries of a cluster state: one row per PodGroup and a cluster-wide line.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use placer_api::annotations::{PODSET_PREFERRED_TOPOLOGY, PODSET_REQUIRED_TOPOLOGY};
use placer_api::k8s::api::core::v1::Pod;
use placer_cluster::{Kind, Object};
use placer_engine::pod_requests;
use placer_engine::{Resources, PODS};
use serde_json::Value;

use crate::expect::POD_GROUP_SCHEDULED;

/// Where a PodGroup stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GroupState {
    /// Every known pod of the group is bound.
    Scheduled,
    /// Some pods are bound, some are not.
    Partial,
    /// No pod is bound and the scheduler reported the group unschedulable.
    Unschedulable,
    /// No pod is bound (yet).
    Pending,
}

impl fmt::Display for GroupState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GroupState::Scheduled => "Scheduled",
            GroupState::Partial => "Partial",
            GroupState::Unschedulable => "Unschedulable",
            GroupState::Pending => "Pending",
        })
    }
}

/// One PodGroup and its pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRow {
    /// PodGroup namespace.
    pub namespace: String,
    /// PodGroup name.
    pub name: String,
    /// `gang(minCount)` or `basic`.
    pub policy: String,
    /// Where the group stands.
    pub state: GroupState,
    /// Pods of the group with a node.
    pub bound: usize,
    /// Pods naming the group.
    pub total: usize,
    /// For each shown topology level: the values the bound pods use, sorted.
    pub domains: Vec<(String, Vec<String>)>,
    /// `PodGroupScheduled` condition as `status/reason`, when set.
    pub condition: Option<String>,
    /// False for a group only named by pods (no PodGroup object).
    pub exists: bool,
    /// Why the group is not fully bound, in one line (`None` when it is, or before
    /// [`crate::run`] fills it in).
    pub reason: Option<String>,
}

/// Use of one resource across the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceUse {
    /// Resource name (`cpu`, `memory`, `pods`, `nvidia.com/gpu`, ...).
    pub name: String,
    /// Sum of requests of bound, non-terminal pods (pods: their number); cpu in millicores.
    pub requested: i64,
    /// Sum of node allocatable.
    pub allocatable: i64,
}

impl ResourceUse {
    /// requested / allocatable in percent (0 when nothing is allocatable); never negative
    /// (sums saturate instead of wrapping). It can exceed 100 when pods were bound by
    /// hand (`cluster.pods`) beyond a node's allocatable.
    pub fn percent(&self) -> f64 {
        if self.allocatable <= 0 {
            0.0
        } else {
            self.requested.max(0) as f64 * 100.0 / self.allocatable as f64
        }
    }
}

/// The one-line cluster summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSummary {
    /// Number of nodes.
    pub nodes: usize,
    /// Pods with a node (any phase).
    pub pods_bound: usize,
    /// All pods.
    pub pods_total: usize,
    /// Use per allocatable resource, in allocatable order.
    pub resources: Vec<ResourceUse>,
}

impl fmt::Display for ClusterSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = if self.nodes == 1 { "" } else { "s" };
        write!(f, "{} node{plural}, {}/{} pods bound", self.nodes, self.pods_bound, self.pods_total)?;
        for r in &self.resources {
            write!(f, ", {} {:.1}%", r.name, r.percent())?;
        }
        Ok(())
    }
}

fn is_terminal(p: &Pod) -> bool {
    matches!(p.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
}

fn node_of(p: &Pod) -> Option<&str> {
    p.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty())
}

/// Cluster-wide numbers over `objects`.
pub fn cluster_summary(objects: &[Object]) -> ClusterSummary {
    let mut allocatable = Resources::default();
    let mut nodes = 0;
    for o in objects {
        if let Object::Node(n) = o {
            nodes += 1;
            if let Some(a) = n.status.as_ref().and_then(|s| s.allocatable.as_ref()) {
                if let Ok(r) = Resources::from_list(a) {
                    allocatable.add(&r);
                }
            }
        }
    }
    let mut requested = Resources::default();
    let (mut pods_total, mut pods_bound, mut running) = (0, 0, 0i64);
    for o in objects {
        let Object::Pod(p) = o else { continue };
        pods_total += 1;
        if node_of(p).is_none() {
            continue;
        }
        pods_bound += 1;
        if is_terminal(p) {
            continue;
        }
        running += 1;
        if let Some(Ok(r)) = p.spec.as_ref().map(pod_requests) {
            requested.add(&r);
        }
    }
    let resources = allocatable
        .iter_nonzero()
        .map(|(name, alloc)| ResourceUse {
            name: name.to_string(),
            requested: if name == PODS { running } else { requested.get(name) },
            allocatable: alloc,
        })
        .collect();
    ClusterSummary { nodes, pods_bound, pods_total, resources }
}

/// One row per PodGroup (sorted by namespace and name). Domains are shown for
/// `levels` when given (the configured topology levels), else for the group's own
/// topology key, if any.
pub fn group_rows(objects: &[Object], levels: &[String]) -> Vec<GroupRow> {
    let mut node_labels: BTreeMap<&str, &BTreeMap<String, String>> = BTreeMap::new();
    let mut pods_by_group: BTreeMap<(String, String), Vec<&Pod>> = BTreeMap::new();
    for o in objects {
        match o {
            Object::Node(n) => {
                if let (Some(name), Some(labels)) = (n.metadata.name.as_deref(), n.metadata.labels.as_ref()) {
                    node_labels.insert(name, labels);
                }
            }
            Object::Pod(p) => {
                let group = p
                    .spec
                    .as_ref()
                    .and_then(|s| s.scheduling_group.as_ref())
                    .and_then(|g| g.pod_group_name.clone());
                if let Some(g) = group {
                    pods_by_group.entry((o.object_ref().namespace, g)).or_default().push(p);
                }
            }
            _ => {}
        }
    }
    let mut rows = Vec::new();
    for o in objects {
        let Object::PodGroup(pg) = o else { continue };
        let r = o.object_ref();
        let pods = pods_by_group.get(&(r.namespace.clone(), r.name.clone())).cloned().unwrap_or_default();
        let bound_nodes: Vec<&str> = pods.iter().filter_map(|p| node_of(p)).collect();
        let policy = match &pg.spec.scheduling_policy.gang {
            Some(g) => format!("gang({})", g.min_count),
            None => "basic".to_string(),
        };
        let own_key = pg
            .spec
            .scheduling_constraints
            .as_ref()
            .and_then(|c| c.topology.as_ref())
            .and_then(|t| t.first())
            .map(|t| t.key.clone())
            .or_else(|| {
                let a = pg.metadata.annotations.as_ref()?;
                a.get(PODSET_REQUIRED_TOPOLOGY).or_else(|| a.get(PODSET_PREFERRED_TOPOLOGY)).cloned()
            });
        let shown: Vec<String> =
            if levels.is_empty() { own_key.into_iter().collect() } else { levels.to_vec() };
        let domains = shown
            .into_iter()
            .map(|key| {
                let values: BTreeSet<String> = bound_nodes
                    .iter()
                    .map(|n| {
                        node_labels.get(n).and_then(|l| l.get(&key)).cloned().unwrap_or_else(|| "-".into())
                    })
                    .collect();
                (key, values.into_iter().collect())
            })
            .collect();
        let condition = o
            .to_json()
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| {
                cs.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(POD_GROUP_SCHEDULED))
            })
            .map(|c| {
                let f = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                format!("{}/{}", f("status"), f("reason"))
            });
        let (bound, total) = (bound_nodes.len(), pods.len());
        let state = if total > 0 && bound == total {
            GroupState::Scheduled
        } else if bound > 0 {
            GroupState::Partial
        } else if condition.as_deref().is_some_and(|c| c.starts_with("False/Unschedulable")) {
            GroupState::Unschedulable
        } else {
            GroupState::Pending
        };
        rows.push(GroupRow {
            namespace: r.namespace,
            name: r.name,
            policy,
            state,
            bound,
            total,
            domains,
            condition,
            exists: true,
            reason: None,
        });
    }
    // Groups only named by pods: the PodGroup does not exist.
    let existing: BTreeSet<(String, String)> =
        rows.iter().map(|r| (r.namespace.clone(), r.name.clone())).collect();
    for ((namespace, name), pods) in &pods_by_group {
        if existing.contains(&(namespace.clone(), name.clone())) {
            continue;
        }
        let bound = pods.iter().filter(|p| node_of(p).is_some()).count();
        rows.push(GroupRow {
            namespace: namespace.clone(),
            name: name.clone(),
            policy: "-".into(),
            state: if bound == pods.len() {
                GroupState::Scheduled
            } else if bound > 0 {
                GroupState::Partial
            } else {
                GroupState::Pending
            },
            bound,
            total: pods.len(),
            domains: Vec::new(),
            condition: None,
            exists: false,
            reason: None,
        });
    }
    rows.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    rows
}

/// All objects of a store, in kind, namespace, name order.
pub fn all_objects(store: &dyn placer_cluster::ClusterStore) -> Vec<Object> {
    // Counted first and copied straight into one vector of that size: `Object` is a few
    // KiB inline, so a `list` per kind collected into a growing vector held the objects
    // about three times over (about 400 MB for 50,000 nodes). The same objects in the
    // same order as `list` gives.
    let mut count = 0usize;
    for k in Kind::ALL {
        store.visit(k, &mut |_| count += 1);
    }
    let mut out = Vec::with_capacity(count);
    for k in Kind::ALL {
        store.visit(k, &mut |o| out.push(o.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::api::core::v1::{
        Container, Node, NodeStatus, PodSchedulingGroup, PodSpec, PodStatus, ResourceRequirements,
    };
    use placer_api::k8s::api::scheduling::v1alpha2::{GangSchedulingPolicy, PodGroup, PodGroupSpec};
    use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;
    use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str, rack: &str) -> Object {
        Object::node(Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([("rack".to_string(), rack.to_string())].into()),
                ..Default::default()
            },
            spec: None,
            status: Some(NodeStatus {
                allocatable: Some(
                    [("cpu".to_string(), Quantity("4".into())), ("pods".to_string(), Quantity("10".into()))]
                        .into(),
                ),
                ..Default::default()
            }),
        })
    }

    fn pod(name: &str, node: Option<&str>, phase: &str) -> Object {
        Object::pod(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: node.map(String::from),
                scheduling_group: Some(PodSchedulingGroup { pod_group_name: Some("pg".into()) }),
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
            status: Some(PodStatus { phase: Some(phase.into()), ..Default::default() }),
        })
    }

    fn group() -> Object {
        let mut spec = PodGroupSpec::default();
        spec.scheduling_policy.gang = Some(GangSchedulingPolicy { min_count: 2 });
        Object::PodGroup(PodGroup {
            metadata: ObjectMeta {
                name: Some("pg".into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec,
            status: None,
        })
    }

    #[test]
    fn summary_never_prints_a_negative_percentage() {
        // Two bound pods whose cpu sums past i64 (5e15 cores each, in millicores): the sum
        // saturates; it used to wrap to a negative percentage.
        let mut huge = pod("huge", Some("n1"), "Running");
        if let Some(p) = huge.as_pod_mut() {
            let c = &mut p.spec.as_mut().unwrap().containers[0];
            c.resources.as_mut().unwrap().requests =
                Some([("cpu".to_string(), Quantity("5e15".into()))].into());
            let second = Container { name: "d".into(), ..c.clone() };
            p.spec.as_mut().unwrap().containers.push(second);
        }
        let summary = cluster_summary(&[node("n1", "r1"), huge]);
        assert!(summary.resources.iter().all(|r| r.percent() >= 0.0), "{summary}");
        assert!(!summary.to_string().contains('-'), "{summary}");
    }

    #[test]
    fn summary_counts_bound_running_pods_against_allocatable() {
        let objects = vec![
            node("n1", "r1"),
            node("n2", "r2"),
            pod("a", Some("n1"), "Running"),
            pod("b", Some("n2"), "Succeeded"),
            pod("c", None, "Pending"),
        ];
        let s = cluster_summary(&objects);
        assert_eq!((s.nodes, s.pods_bound, s.pods_total), (2, 2, 3));
        assert_eq!(s.to_string(), "2 nodes, 2/3 pods bound, cpu 12.5%, pods 5.0%");
    }

    #[test]
    fn group_rows_show_state_and_domains() {
        let objects = vec![
            node("n1", "r1"),
            node("n2", "r2"),
            group(),
            pod("a", Some("n1"), "Running"),
            pod("b", None, "Pending"),
        ];
        let rows = group_rows(&objects, &["rack".to_string()]);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!((r.policy.as_str(), r.state, r.bound, r.total), ("gang(2)", GroupState::Partial, 1, 2));
        assert_eq!(r.domains, vec![("rack".to_string(), vec!["r1".to_string()])]);
    }
}
