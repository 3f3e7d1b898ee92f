//! `TopologyPlacementGenerator` (SEMANTICS §5): one placement per distinct value of the
//! group's topology key (`spec.schedulingConstraints.topology[0].key`).
//!
//! * Nodes without the label are in no placement; the empty value `""` is an ordinary
//!   domain; a domain without nodes in the parent placement is not emitted.
//! * Members already bound or assumed pin the domain: only their domain's placement is
//!   produced. Errors: a member on a node missing from the snapshot, a member's node without
//!   the label (`no topology domain found for pod ...`), members in two domains
//!   (`more than 1 domain found for pod group: a, b`).
//! * Placements come out in domain-name order (upstream's order is unspecified).
//! * When the parent is every node and the snapshot holds a current domain index for the
//!   key ([`Snapshot::refresh_topology_domains`], refreshed by the optimized placement
//!   search), the placements are read from it instead of every node's labels; the result
//!   is the same.

use std::collections::{BTreeMap, BTreeSet};

use crate::framework::GroupCycle;
use crate::framework::NodeId;
use crate::framework::Snapshot;
use crate::framework::Status;
use crate::framework::{GeneratedPlacements, Placement, PlacementGenerate};

/// Plugin name.
pub const NAME: &str = "TopologyPlacementGenerator";

/// Generates one placement per topology domain.
#[derive(Debug, Clone, Copy, Default)]
pub struct TopologyPlacementGenerator;

impl PlacementGenerate for TopologyPlacementGenerator {
    fn name(&self) -> &'static str {
        NAME
    }

    fn applies(&self, cycle: &GroupCycle) -> bool {
        cycle.group.topology_key.is_some()
    }

    fn generate(
        &self,
        snap: &Snapshot,
        cycle: &GroupCycle,
        parent: &Placement,
    ) -> Result<GeneratedPlacements, Status> {
        let Some(key) = cycle.group.topology_key.as_deref() else {
            return Ok(GeneratedPlacements { placements: vec![parent.clone()], note: None });
        };
        let mut pinned: BTreeSet<&str> = BTreeSet::new();
        for (pod, node) in &cycle.scheduled {
            let Some(node) = node else {
                return Err(Status::error(NAME, format!("node of pod {pod} not found in the snapshot")));
            };
            match snap.node(*node).info.label(key) {
                Some(value) => {
                    pinned.insert(value);
                }
                None => return Err(Status::error(NAME, format!("no topology domain found for pod {pod}"))),
            }
        }
        if pinned.len() > 1 {
            let list: Vec<&str> = pinned.iter().copied().collect();
            return Err(Status::error(
                NAME,
                format!("more than 1 domain found for pod group: {}", list.join(", ")),
            ));
        }
        let pin = pinned.first().copied();
        let index = snap.topology_domains(key).filter(|_| snap.is_all_nodes(&parent.nodes));
        let placements: Vec<Placement> = match index {
            Some(index) => match pin {
                Some(p) => index.find(p).into_iter().collect::<Vec<_>>(),
                None => index.domains().iter().collect(),
            }
            .into_iter()
            .map(|d| Placement { name: d.value.clone(), nodes: d.nodes.clone() })
            .collect(),
            None => domains_from_labels(snap, key, parent, pin),
        };
        let note = if !placements.is_empty() {
            None
        } else if let Some(p) = pin {
            Some(format!("the {key} domain {p:?} of the already scheduled pods has no node"))
        } else {
            Some(format!("no node has label {key:?}"))
        };
        Ok(GeneratedPlacements { placements, note })
    }
}

/// One placement per value of `key` among `parent`'s nodes (only `pin`'s when given).
fn domains_from_labels(snap: &Snapshot, key: &str, parent: &Placement, pin: Option<&str>) -> Vec<Placement> {
    let mut domains: BTreeMap<&str, Vec<NodeId>> = BTreeMap::new();
    for &id in parent.nodes.iter() {
        if let Some(value) = snap.node(id).info.label(key) {
            if pin.is_none_or(|p| p == value) {
                domains.entry(value).or_default().push(id);
            }
        }
    }
    domains.into_iter().map(|(value, nodes)| Placement { name: value.into(), nodes: nodes.into() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::model::PodKey;
    use crate::podgroup::tests::{group, node, pod};

    fn snap() -> Snapshot {
        let mut s = Snapshot::new();
        s.upsert_node(node("a1", 1000, &[("rack", "a")]));
        s.upsert_node(node("a2", 1000, &[("rack", "a")]));
        s.upsert_node(node("b1", 1000, &[("rack", "b")]));
        s.upsert_node(node("e1", 1000, &[("rack", "")]));
        s.upsert_node(node("none", 1000, &[("zone", "z")]));
        s
    }

    fn cycle(key: Option<&str>, scheduled: Vec<(&str, Option<&str>)>, s: &Snapshot) -> GroupCycle {
        GroupCycle::new(
            group("pg", Some(1), key),
            true,
            vec![(0, pod("p", 1, Some("pg"), None))],
            scheduled
                .into_iter()
                .map(|(p, n)| (PodKey::new("default", p), n.and_then(|n| s.node_id(n))))
                .collect(),
        )
    }

    fn names(s: &Snapshot, g: &GeneratedPlacements) -> Vec<(String, Vec<String>)> {
        g.placements
            .iter()
            .map(|p| (p.name.to_string(), p.nodes.iter().map(|n| s.node(*n).name().to_string()).collect()))
            .collect()
    }

    fn parent(s: &Snapshot) -> Placement {
        Placement { name: "".into(), nodes: s.node_ids().into() }
    }

    #[test]
    fn one_placement_per_value_unlabeled_nodes_in_none_empty_value_is_a_domain() {
        let s = snap();
        let g =
            TopologyPlacementGenerator.generate(&s, &cycle(Some("rack"), vec![], &s), &parent(&s)).unwrap();
        assert_eq!(
            names(&s, &g),
            vec![
                ("".to_string(), vec!["e1".to_string()]),
                ("a".to_string(), vec!["a1".to_string(), "a2".to_string()]),
                ("b".to_string(), vec!["b1".to_string()]),
            ]
        );
    }

    #[test]
    fn without_a_key_the_parent_is_the_only_placement() {
        let s = snap();
        let c = cycle(None, vec![], &s);
        assert!(!TopologyPlacementGenerator.applies(&c));
        let g = TopologyPlacementGenerator.generate(&s, &c, &parent(&s)).unwrap();
        assert_eq!(g.placements, vec![parent(&s)]);
    }

    #[test]
    fn scheduled_members_pin_their_domain() {
        let s = snap();
        let c = cycle(Some("rack"), vec![("m1", Some("a2")), ("m2", Some("a1"))], &s);
        let g = TopologyPlacementGenerator.generate(&s, &c, &parent(&s)).unwrap();
        assert_eq!(names(&s, &g), vec![("a".to_string(), vec!["a1".to_string(), "a2".to_string()])]);
    }

    #[test]
    fn members_in_two_domains_are_an_error() {
        let s = snap();
        let c = cycle(Some("rack"), vec![("m1", Some("b1")), ("m2", Some("a1"))], &s);
        let err = TopologyPlacementGenerator.generate(&s, &c, &parent(&s)).unwrap_err();
        assert_eq!(err.code, Code::Error);
        assert_eq!(err.reasons, ["more than 1 domain found for pod group: a, b"]);
    }

    #[test]
    fn member_on_an_unlabeled_or_unknown_node_is_an_error() {
        let s = snap();
        let c = cycle(Some("rack"), vec![("m1", Some("none"))], &s);
        let err = TopologyPlacementGenerator.generate(&s, &c, &parent(&s)).unwrap_err();
        assert_eq!(err.reasons, ["no topology domain found for pod default/m1"]);
        let c = cycle(Some("rack"), vec![("m1", None)], &s);
        assert_eq!(TopologyPlacementGenerator.generate(&s, &c, &parent(&s)).unwrap_err().code, Code::Error);
    }

    #[test]
    fn pinned_domain_outside_the_parent_gives_no_placement() {
        let s = snap();
        let c = cycle(Some("rack"), vec![("m1", Some("b1"))], &s);
        let only_a = Placement { name: "".into(), nodes: vec![s.node_id("a1").unwrap()].into() };
        let g = TopologyPlacementGenerator.generate(&s, &c, &only_a).unwrap();
        assert!(g.placements.is_empty());
        assert_eq!(
            g.note.as_deref(),
            Some("the rack domain \"b\" of the already scheduled pods has no node")
        );
    }

    #[test]
    fn no_labeled_node_gives_no_placement() {
        let s = snap();
        let g = TopologyPlacementGenerator
            .generate(&s, &cycle(Some("gpu-block"), vec![], &s), &parent(&s))
            .unwrap();
        assert!(g.placements.is_empty());
        assert_eq!(g.note.as_deref(), Some("no node has label \"gpu-block\""));
    }
}
