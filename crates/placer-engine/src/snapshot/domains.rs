//! The domains of one topology level (one label key) over the live nodes, with aggregated
//! capacity per domain: what KEP-5732's TopologyPlacementGenerator and the aggregate
//! pre-filter would otherwise recompute from every node's labels and resources on every
//! PodGroup cycle.
//!
//! The index is built on demand ([`super::Snapshot::refresh_topology_domains`]) and cached
//! in the snapshot. Its structure (which nodes form which domain) is valid while the
//! snapshot's `node_generation` is unchanged; a node's pods changing (binding, assume,
//! rollback, removal) only marks that node's domain dirty, and the next refresh re-sums the
//! dirty domains. A cycle therefore pays for the domains that changed since the last one,
//! not for the whole cluster.

use std::sync::Arc;

use super::NodeState;
use crate::model::NodeId;
use crate::resources::Resources;

/// How many label keys keep an index at once (the least recently refreshed one goes).
pub(super) const MAX_INDEXED_KEYS: usize = 8;

/// No domain: the node has no value for the key, or the id is not a live node.
const NO_DOMAIN: u32 = u32::MAX;

/// Sums over the nodes of a domain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DomainAggregate {
    /// Sum of allocatable.
    pub allocatable: Resources,
    /// Sum of requests (`pods` is the number of pods).
    pub requested: Resources,
    /// Sum of requests with kube's non-zero cpu / memory defaults (scoring view).
    pub requested_non_zero: Resources,
    /// Sum over nodes of `max(0, allocatable - requested)`, per resource (`pods` included):
    /// an upper bound of what the domain can still take.
    pub free: Resources,
}

impl DomainAggregate {
    /// Adds one node's numbers.
    pub fn add_node(&mut self, node: &NodeState) {
        self.allocatable.add(&node.allocatable);
        self.requested.add(&node.requested);
        self.requested_non_zero.add(&node.non_zero_requested);
        let mut free = node.allocatable.clone();
        free.sub(&node.requested);
        free.clamp_non_negative();
        self.free.add(&free);
    }

    /// An upper bound of how many copies of a pod requesting `requests` the domain can
    /// take: for each requested resource (and the pod count) the domain's total free
    /// amount divided by the request. Never below the exact per-node count, because
    /// `sum(floor(f_i / r)) <= floor(sum(f_i) / r)` (a saturated sum is skipped).
    pub fn copies_upper_bound(&self, requests: &Resources) -> u64 {
        let mut bound = self.free.pods.max(0);
        let mut limit = |free: i64, req: i64| {
            // A sum that saturated at `i64::MAX` stands for more than it says: dividing it
            // could undercut the exact count, so it bounds nothing.
            if req > 0 && free < i64::MAX {
                bound = bound.min((free / req).max(0));
            }
        };
        limit(self.free.cpu, requests.cpu);
        limit(self.free.memory, requests.memory);
        limit(self.free.ephemeral_storage, requests.ephemeral_storage);
        for (name, req) in &requests.scalar {
            limit(self.free.get_scalar(name), *req);
        }
        u64::try_from(bound).unwrap_or(0)
    }
}

/// One domain: a value of the key and the nodes carrying it.
#[derive(Debug, Clone)]
pub struct TopologyDomain {
    /// The label value.
    pub value: Arc<str>,
    /// The domain's nodes, in snapshot (name) order.
    pub nodes: Arc<[NodeId]>,
    aggregate: DomainAggregate,
    /// A node's pods or allocatable changed since `aggregate` was summed.
    dirty: bool,
}

impl TopologyDomain {
    /// The domain's sums, unless a node changed since they were computed (call
    /// [`super::Snapshot::refresh_topology_domains`] first).
    pub fn aggregate(&self) -> Option<&DomainAggregate> {
        (!self.dirty).then_some(&self.aggregate)
    }
}

/// The domains of one key, sorted by value.
#[derive(Debug, Clone)]
pub struct TopologyDomains {
    key: String,
    /// The snapshot's `node_generation` the structure was built at.
    node_generation: u64,
    domains: Vec<TopologyDomain>,
    /// Domain of every node id ([`NO_DOMAIN`] when none).
    domain_of: Vec<u32>,
}

impl TopologyDomains {
    /// Groups `nodes` (live, in name order) by their value of `key`.
    pub(super) fn build<'a>(
        key: &str,
        node_generation: u64,
        id_bound: usize,
        nodes: impl Iterator<Item = (NodeId, &'a NodeState)>,
    ) -> TopologyDomains {
        let mut by_value: std::collections::BTreeMap<&'a str, Vec<NodeId>> = Default::default();
        for (id, node) in nodes {
            if let Some(value) = node.info.label(key) {
                by_value.entry(value).or_default().push(id);
            }
        }
        let mut domain_of = vec![NO_DOMAIN; id_bound];
        let domains: Vec<TopologyDomain> = by_value
            .into_iter()
            .enumerate()
            .map(|(i, (value, nodes))| {
                for id in &nodes {
                    domain_of[id.0 as usize] = i as u32;
                }
                TopologyDomain {
                    value: value.into(),
                    nodes: nodes.into(),
                    aggregate: DomainAggregate::default(),
                    dirty: true,
                }
            })
            .collect();
        TopologyDomains { key: key.to_string(), node_generation, domains, domain_of }
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The snapshot's `node_generation` this index describes.
    pub fn node_generation(&self) -> u64 {
        self.node_generation
    }

    /// Every domain, sorted by value.
    pub fn domains(&self) -> &[TopologyDomain] {
        &self.domains
    }

    /// The domain with this value.
    pub fn find(&self, value: &str) -> Option<&TopologyDomain> {
        self.domains.binary_search_by(|d| (*d.value).cmp(value)).ok().map(|i| &self.domains[i])
    }

    /// Marks the domain of `node` dirty (its pods or allocatable changed).
    pub(super) fn mark_dirty(&mut self, node: NodeId) {
        if let Some(&d) = self.domain_of.get(node.0 as usize) {
            if d != NO_DOMAIN {
                self.domains[d as usize].dirty = true;
            }
        }
    }

    /// Re-sums the dirty domains, reading nodes through `node`.
    pub(super) fn resum_dirty<'a>(&mut self, node: impl Fn(NodeId) -> &'a NodeState) {
        for d in self.domains.iter_mut().filter(|d| d.dirty) {
            let mut agg = DomainAggregate::default();
            for &id in d.nodes.iter() {
                agg.add_node(node(id));
            }
            d.aggregate = agg;
            d.dirty = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use crate::plugins::testing::{node, pod};
    use crate::snapshot::{DomainAggregate, Snapshot};

    fn sums(snap: &Snapshot, key: &str, value: &str) -> DomainAggregate {
        let mut agg = DomainAggregate::default();
        for n in snap.nodes().filter(|n| n.info.label(key) == Some(value)) {
            agg.add_node(n);
        }
        agg
    }

    fn cluster() -> Snapshot {
        let mut s = Snapshot::new();
        for (name, rack) in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("c1", "")] {
            s.upsert_node(node(name).cpu("4").gpus(8).label("rack", rack).build());
        }
        s.upsert_node(node("x").cpu("4").build());
        s
    }

    #[test]
    fn domains_group_labelled_nodes_by_value_in_name_order() {
        let mut s = cluster();
        let index = s.refresh_topology_domains("rack");
        let got: Vec<(&str, usize)> = index.domains().iter().map(|d| (&*d.value, d.nodes.len())).collect();
        assert_eq!(got, [("", 1), ("a", 2), ("b", 1)], "unlabelled node x is in no domain");
        assert_eq!(index.find("a").and_then(|d| d.aggregate()).map(|a| a.allocatable.cpu), Some(8000));
        assert!(index.find("zz").is_none());
    }

    #[test]
    fn pod_changes_mark_only_their_domain_and_a_refresh_resums_it() {
        let mut s = cluster();
        s.refresh_topology_domains("rack");
        let mark = s.checkpoint();
        let a1 = s.node_id("a1").expect("a1");
        s.assume(Arc::new(pod("p").cpu("1").gpu(2).build()), a1);
        let index = s.topology_domains("rack").expect("current");
        assert!(index.find("a").and_then(|d| d.aggregate()).is_none(), "rack a is dirty");
        assert!(index.find("b").and_then(|d| d.aggregate()).is_some(), "rack b is not");
        let a = s.refresh_topology_domains("rack").find("a").and_then(|d| d.aggregate()).cloned();
        assert_eq!(a, Some(sums(&s, "rack", "a")));
        assert_eq!(a.map(|a| (a.requested.cpu, a.free.get("nvidia.com/gpu"))), Some((1000, 14)));
        s.rollback(mark);
        let a = s.refresh_topology_domains("rack").find("a").and_then(|d| d.aggregate()).cloned();
        assert_eq!(a.map(|a| a.requested.cpu), Some(0));
    }

    #[test]
    fn relabelled_or_new_nodes_rebuild_the_index() {
        let mut s = cluster();
        s.refresh_topology_domains("rack");
        s.upsert_node(node("b1").cpu("4").gpus(8).label("rack", "a").build());
        assert!(s.topology_domains("rack").is_none(), "stale after a label change");
        let index = s.refresh_topology_domains("rack");
        assert_eq!(index.find("a").map(|d| d.nodes.len()), Some(3));
        assert!(index.find("b").is_none());
        s.upsert_node(node("b1").cpu("8").gpus(8).label("rack", "a").build());
        let a = s.refresh_topology_domains("rack").find("a").and_then(|d| d.aggregate()).cloned();
        assert_eq!(a.map(|a| a.allocatable.cpu), Some(16000), "allocatable change re-summed");
    }

    #[test]
    fn copies_upper_bound_never_undercounts() {
        let mut s = cluster();
        let a1 = s.node_id("a1").expect("a1");
        s.assume(Arc::new(pod("p").cpu("3").build()), a1);
        let index = s.refresh_topology_domains("rack");
        let a = index.find("a").and_then(|d| d.aggregate()).expect("fresh");
        let req = pod("q").cpu("2").build().requests;
        // Exact: a1 has 1 cpu free (0 copies), a2 has 4 (2 copies); the bound sees 5 cpu.
        assert_eq!(a.copies_upper_bound(&req), 2);
        let gpu = pod("g").gpu(3).build().requests;
        assert_eq!(a.copies_upper_bound(&gpu), 5, "16 gpus / 3");
    }

    #[test]
    fn a_saturated_sum_bounds_nothing() {
        // Two nodes of 7Ei memory: the rack's free memory saturates at i64::MAX, and dividing
        // that by a 4Ei request would say 1 copy where 2 fit (one per node).
        let mut s = Snapshot::new();
        for name in ["m1", "m2"] {
            s.upsert_node(node(name).cpu("4").mem("7Ei").label("rack", "m").build());
        }
        let agg = sums(&s, "rack", "m");
        assert_eq!(agg.free.memory, i64::MAX);
        let req = pod("q").mem("4Ei").build().requests;
        assert!(agg.copies_upper_bound(&req) >= 2, "{}", agg.copies_upper_bound(&req));
    }

    proptest! {
        /// After any sequence of binds, assumes, rollbacks, removals and node updates, a
        /// refreshed index holds exactly the sums recomputed from the nodes.
        #[test]
        fn refreshed_sums_equal_recomputed_sums(
            ops in prop::collection::vec((0u8..6, 0usize..6, 1u32..4), 1..40),
        ) {
            let mut s = Snapshot::new();
            let racks = ["a", "a", "b", "b", "c", "c"];
            for (i, r) in racks.iter().enumerate() {
                s.upsert_node(node(&format!("n{i}")).cpu("8").gpus(4).label("rack", r).build());
            }
            let mut marks = Vec::new();
            for (step, &(op, n, amount)) in ops.iter().enumerate() {
                let name = format!("n{n}");
                match op {
                    0 => s.upsert_pod(Arc::new(pod(&format!("b{step}")).cpu(&amount.to_string()).on(&name).build())),
                    1 => {
                        marks.push(s.checkpoint());
                        if let Some(id) = s.node_id(&name) {
                            s.assume(Arc::new(pod(&format!("s{step}")).gpu(amount).build()), id);
                        }
                    }
                    2 => {
                        if let Some(m) = marks.pop() {
                            s.rollback(m);
                        }
                    }
                    3 => {
                        s.upsert_node(node(&name).cpu(&(4 * amount).to_string()).gpus(4).label("rack", racks[n]).build());
                    }
                    4 => {
                        let _ = s.refresh_topology_domains("rack");
                    }
                    _ => {
                        if marks.is_empty() {
                            s.remove_node(&name);
                        }
                    }
                }
            }
            let index = s.refresh_topology_domains("rack").clone();
            for d in index.domains() {
                prop_assert_eq!(d.aggregate().cloned(), Some(sums(&s, "rack", &d.value)));
            }
            let values: Vec<&str> = index.domains().iter().map(|d| &*d.value).collect();
            let mut expected: Vec<&str> = s.nodes().filter_map(|n| n.info.label("rack")).collect();
            expected.sort_unstable();
            expected.dedup();
            prop_assert_eq!(values, expected);
        }
    }
}
