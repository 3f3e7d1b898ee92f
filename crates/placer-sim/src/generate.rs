//! `cluster.generate`: a regular hierarchy of identical nodes.
//!
//! Each level gets a short prefix (the first letter of the label key's last word, e.g.
//! `b` for `topology.example.com/block`, or the whole word when two levels share a first
//! letter). A node is named by its path, `b0-r3-h12`, and labelled at every level with
//! the path down to that level (`block=b0`, `rack=b0-r3`, `hostname=b0-r3-h12`), so
//! values are unique cluster-wide. `kubernetes.io/hostname` is always the node name.

use std::collections::BTreeMap;

use placer_api::k8s::api::core::v1::{Node, NodeSpec, NodeStatus};
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::scenario::GenerateSpec;

/// The hostname label kubelet sets.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// The short name of each level (see the module documentation).
fn prefixes(levels: &[String]) -> Vec<String> {
    let words: Vec<String> = levels
        .iter()
        .map(|l| {
            let last = l.rsplit(['/', '.']).next().unwrap_or(l);
            if last.is_empty() {
                "l".to_string()
            } else {
                last.to_ascii_lowercase()
            }
        })
        .collect();
    let first = |w: &str| w.chars().next().map(String::from).unwrap_or_default();
    words
        .iter()
        .map(|w| {
            let clash = words.iter().filter(|o| first(o) == first(w)).count() > 1;
            if clash {
                w.clone()
            } else {
                first(w)
            }
        })
        .collect()
}

/// For every generated node: its name and the label value at each level.
fn paths(spec: &GenerateSpec) -> Vec<Vec<String>> {
    let prefixes = prefixes(&spec.levels);
    let mut out: Vec<Vec<String>> = vec![Vec::new()];
    for (prefix, fanout) in prefixes.iter().zip(&spec.fanout) {
        let mut next = Vec::with_capacity(out.len().saturating_mul(*fanout as usize));
        for parent in &out {
            for i in 0..*fanout {
                let value = match parent.last() {
                    Some(p) => format!("{p}-{prefix}{i}"),
                    None => format!("{prefix}{i}"),
                };
                let mut path = parent.clone();
                path.push(value);
                next.push(path);
            }
        }
        out = next;
    }
    out
}

/// Names of the generated nodes, in generation order.
pub fn generated_node_names(spec: &GenerateSpec) -> Vec<String> {
    paths(spec).into_iter().filter_map(|p| p.last().cloned()).collect()
}

/// The generated nodes (Ready: no conditions, which the format reads as Ready).
pub fn generated_nodes(spec: &GenerateSpec) -> Vec<Node> {
    generated_nodes_iter(spec).collect()
}

/// The nodes of [`generated_nodes`], made one at a time (a caller that stores them one by
/// one holds no second copy of the whole cluster), with how many there are.
pub fn generated_nodes_iter(spec: &GenerateSpec) -> impl ExactSizeIterator<Item = Node> + '_ {
    // Every path has one value per level: without levels there is no node.
    let mut paths = paths(spec);
    paths.retain(|p| !p.is_empty());
    paths.into_iter().map(move |path| {
        let name = path.last().cloned().unwrap_or_default();
        let mut labels: BTreeMap<String, String> = spec.labels.clone();
        for (level, value) in spec.levels.iter().zip(&path) {
            labels.insert(level.clone(), value.clone());
        }
        labels.insert(HOSTNAME_LABEL.to_string(), name.clone());
        Node {
            metadata: ObjectMeta { name: Some(name), labels: Some(labels), ..Default::default() },
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus {
                allocatable: Some(spec.allocatable.clone()),
                capacity: Some(spec.allocatable.clone()),
                ..Default::default()
            }),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;

    fn spec(levels: &[&str], fanout: &[u32]) -> GenerateSpec {
        GenerateSpec {
            levels: levels.iter().map(|s| s.to_string()).collect(),
            fanout: fanout.to_vec(),
            allocatable: [("cpu".to_string(), Quantity("4".into()))].into(),
            labels: [("pool".to_string(), "gpu".to_string())].into(),
        }
    }

    #[test]
    fn nodes_are_made_one_at_a_time_as_the_list_makes_them_and_none_without_levels() {
        let s = spec(&["topology.example.com/rack", HOSTNAME_LABEL], &[2, 3]);
        let one_by_one = generated_nodes_iter(&s);
        assert_eq!(one_by_one.len(), 6);
        assert_eq!(one_by_one.collect::<Vec<_>>(), generated_nodes(&s));
        let none = spec(&[], &[]);
        assert_eq!(generated_nodes_iter(&none).len(), 0);
        assert!(generated_node_names(&none).is_empty());
    }

    #[test]
    fn names_follow_the_path_through_the_hierarchy() {
        let s =
            spec(&["topology.example.com/block", "topology.example.com/rack", HOSTNAME_LABEL], &[2, 2, 3]);
        let names = generated_node_names(&s);
        assert_eq!(names.len(), 12);
        assert_eq!(names[0], "b0-r0-h0");
        assert_eq!(names[11], "b1-r1-h2");
    }

    #[test]
    fn labels_carry_unique_values_per_level_and_the_hostname() {
        let s =
            spec(&["topology.example.com/block", "topology.example.com/rack", HOSTNAME_LABEL], &[2, 4, 16]);
        let nodes = generated_nodes(&s);
        let n = nodes.iter().find(|n| n.metadata.name.as_deref() == Some("b0-r3-h12")).unwrap();
        let labels = n.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["topology.example.com/block"], "b0");
        assert_eq!(labels["topology.example.com/rack"], "b0-r3");
        assert_eq!(labels[HOSTNAME_LABEL], "b0-r3-h12");
        assert_eq!(labels["pool"], "gpu");
        assert_eq!(n.status.as_ref().unwrap().allocatable.as_ref().unwrap()["cpu"].0, "4");
    }

    #[test]
    fn hostname_label_is_the_node_name_even_without_a_host_level() {
        let nodes = generated_nodes(&spec(&["zone", "rack"], &[1, 2]));
        let labels = nodes[1].metadata.labels.as_ref().unwrap();
        assert_eq!(nodes[1].metadata.name.as_deref(), Some("z0-r1"));
        assert_eq!(labels[HOSTNAME_LABEL], "z0-r1");
    }

    #[test]
    fn levels_sharing_a_first_letter_use_the_whole_word() {
        let names = generated_node_names(&spec(&["region", "rack"], &[1, 1]));
        assert_eq!(names, ["region0-rack0"]);
    }
}
