//! The domain tree: every domain (value path on a prefix of the levels) of a set of nodes,
//! with its parent and children, and the nodes under each leaf.
//!
//! The tree holds structure only, never capacity, so it stays valid while pods come and
//! go: rebuild it when nodes join, leave or change their level labels. Capacity is read
//! from the [`TasNode`]s on every query.
//!
//! Layout: domains are numbered level by level (coarsest first) and, within a level, in
//! lexicographic order of their value paths (compared value by value). So the children of
//! a domain are one contiguous, name-ordered range, and comparing two domains of one level
//! by name is comparing their [`DomainId`]s, which is how every tie in the algorithms
//! breaks (SEMANTICS §6.1: "by name compares the full value path").

use std::cmp::Ordering;
use std::ops::Range;

use crate::resources::Resources;

use super::request::TasError;
use super::TasNode;

/// Most topology levels (Kueue's Topology allows 8; domains store the level in a byte).
pub const MAX_LEVELS: usize = 16;

/// The lowest level that makes every leaf a single node.
pub const HOSTNAME_LEVEL: &str = "kubernetes.io/hostname";

/// Index of a domain in its [`DomainTree`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DomainId(pub u32);

impl DomainId {
    pub(crate) fn idx(self) -> usize {
        self.0 as usize
    }
}

#[derive(Debug, Clone)]
struct DomainNode {
    value: Box<str>,
    level: u8,
    parent: Option<DomainId>,
    children: Range<u32>,
    /// For leaves: the range in `leaf_nodes`.
    nodes: Range<u32>,
}

/// The topology's domains over a set of nodes (see the module docs).
#[derive(Debug, Clone)]
pub struct DomainTree {
    levels: Vec<String>,
    domains: Vec<DomainNode>,
    /// `level_start[l]..level_start[l + 1]` are the domains of level `l`.
    level_start: Vec<u32>,
    /// Node indexes (into the slice the tree was built from), grouped by leaf, in node
    /// name order within a leaf.
    leaf_nodes: Vec<u32>,
    node_count: usize,
}

impl DomainTree {
    /// Builds the tree of `nodes` for `levels` (coarsest first). Every node must carry one
    /// value per level. Nodes sharing the full value path form one leaf (with a hostname
    /// lowest level that only happens for duplicate hostname labels).
    pub fn new(levels: &[String], nodes: &[TasNode]) -> Result<DomainTree, TasError> {
        if levels.is_empty() {
            return Err(TasError::NoLevels);
        }
        let depth = levels.len();
        if depth > MAX_LEVELS {
            return Err(TasError::TooManyLevels { count: depth, max: MAX_LEVELS });
        }
        for node in nodes {
            if node.values.len() != depth {
                return Err(TasError::NodeLevels {
                    node: node.name.to_string(),
                    values: node.values.len(),
                    levels: depth,
                });
            }
        }
        let mut order: Vec<u32> = (0..nodes.len() as u32).collect();
        order.sort_by(|&a, &b| {
            let (na, nb) = (&nodes[a as usize], &nodes[b as usize]);
            compare_paths(&na.values, &nb.values).then_with(|| na.name.cmp(&nb.name))
        });

        // Per level, the domains in sweep order; parent and children as per-level indexes.
        let mut per_level: Vec<Vec<DomainNode>> = vec![Vec::new(); depth];
        let mut prev: Option<&[String]> = None;
        for (pos, &n) in order.iter().enumerate() {
            let values = &nodes[n as usize].values;
            let first_new = match prev {
                None => 0,
                Some(p) => p.iter().zip(values.iter()).position(|(a, b)| a != b).unwrap_or(depth),
            };
            for (level, value) in values.iter().enumerate().skip(first_new) {
                let parent = level.checked_sub(1).map(|l| DomainId(per_level[l].len() as u32 - 1));
                if let Some(p) = parent {
                    per_level[level - 1][p.idx()].children.end += 1;
                }
                let child_start = per_level.get(level + 1).map_or(0, |v| v.len() as u32);
                per_level[level].push(DomainNode {
                    value: value.as_str().into(),
                    level: level as u8,
                    parent,
                    children: child_start..child_start,
                    nodes: pos as u32..pos as u32,
                });
            }
            if let Some(leaf) = per_level[depth - 1].last_mut() {
                leaf.nodes.end = pos as u32 + 1;
            }
            prev = Some(values);
        }

        // Concatenate the levels; shift per-level indexes to global ids.
        let mut level_start = Vec::with_capacity(depth + 1);
        let mut total = 0u32;
        for l in &per_level {
            level_start.push(total);
            total += l.len() as u32;
        }
        level_start.push(total);
        let mut domains = Vec::with_capacity(total as usize);
        for (level, list) in per_level.into_iter().enumerate() {
            let parent_shift = if level > 0 { level_start[level - 1] } else { 0 };
            let child_shift = level_start.get(level + 1).copied().unwrap_or(0);
            for mut d in list {
                d.parent = d.parent.map(|p| DomainId(p.0 + parent_shift));
                if level + 1 < depth {
                    d.children = d.children.start + child_shift..d.children.end + child_shift;
                } else {
                    d.children = 0..0;
                }
                domains.push(d);
            }
        }
        Ok(DomainTree {
            levels: levels.to_vec(),
            domains,
            level_start,
            leaf_nodes: order,
            node_count: nodes.len(),
        })
    }

    /// The levels, coarsest first.
    pub fn levels(&self) -> &[String] {
        &self.levels
    }

    /// Number of levels.
    pub fn depth(&self) -> usize {
        self.levels.len()
    }

    /// The lowest level is `kubernetes.io/hostname`: every leaf is one node.
    pub fn hostname_leaves(&self) -> bool {
        self.levels.last().is_some_and(|l| l == HOSTNAME_LEVEL)
    }

    /// Number of domains over all levels.
    pub fn len(&self) -> usize {
        self.domains.len()
    }

    /// The tree has no domain (it was built from no node).
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty()
    }

    /// Number of nodes the tree was built from.
    pub fn node_count(&self) -> usize {
        self.node_count
    }

    /// The domains of one level, in name order.
    pub fn level_domains(&self, level: usize) -> impl ExactSizeIterator<Item = DomainId> + Clone {
        let r = match (self.level_start.get(level), self.level_start.get(level + 1)) {
            (Some(&a), Some(&b)) => a..b,
            _ => 0..0,
        };
        r.map(DomainId)
    }

    /// The leaves (lowest-level domains), in name order.
    pub fn leaves(&self) -> impl ExactSizeIterator<Item = DomainId> + Clone {
        self.level_domains(self.depth() - 1)
    }

    /// The level index of a domain.
    pub fn level(&self, d: DomainId) -> usize {
        self.domains[d.idx()].level as usize
    }

    /// The label value of a domain at its own level.
    pub fn value(&self, d: DomainId) -> &str {
        &self.domains[d.idx()].value
    }

    /// The parent domain (`None` at the highest level).
    pub fn parent(&self, d: DomainId) -> Option<DomainId> {
        self.domains[d.idx()].parent
    }

    /// The children, in name order (empty for leaves).
    pub fn children(&self, d: DomainId) -> impl ExactSizeIterator<Item = DomainId> + Clone {
        self.domains[d.idx()].children.clone().map(DomainId)
    }

    pub(crate) fn children_range(&self, d: DomainId) -> Range<u32> {
        self.domains[d.idx()].children.clone()
    }

    /// Indexes (into the node slice the tree was built from) of the nodes under a leaf, in
    /// name order. Empty for a domain that is not a leaf.
    pub fn leaf_nodes(&self, d: DomainId) -> &[u32] {
        let r = &self.domains[d.idx()].nodes;
        &self.leaf_nodes[r.start as usize..r.end as usize]
    }

    /// The value path of a domain: one value per level from the highest down to its own.
    pub fn path(&self, d: DomainId) -> Vec<String> {
        let mut path = Vec::with_capacity(self.level(d) + 1);
        let mut cur = Some(d);
        while let Some(c) = cur {
            path.push(self.value(c).to_string());
            cur = self.parent(c);
        }
        path.reverse();
        path
    }

    /// The domain with this value path (one value per level from the highest down).
    pub fn find(&self, path: &[&str]) -> Option<DomainId> {
        let mut range = 0..*self.level_start.get(1)?;
        let mut found = None;
        for value in path {
            let slice = &self.domains[range.start as usize..range.end as usize];
            let i = slice.binary_search_by(|d| (*d.value).cmp(value)).ok()?;
            let id = DomainId(range.start + i as u32);
            found = Some(id);
            range = self.domains[id.idx()].children.clone();
        }
        found
    }

    /// KEP-5732 pre-filter: for every domain, how many pods with these `requests` fit in it,
    /// summed over its nodes that pass the pods' filters (`worker_ok`), each node counted
    /// on its own (SEMANTICS §2). Indexed by [`DomainId`]. `nodes` must be the slice the
    /// tree was built from.
    pub fn pod_capacity(&self, nodes: &[TasNode], requests: &Resources) -> Vec<i64> {
        let req = with_one_pod(requests);
        let mut counts = vec![0i64; self.domains.len()];
        for leaf in self.leaves() {
            counts[leaf.idx()] = self
                .leaf_nodes(leaf)
                .iter()
                .filter_map(|&n| nodes.get(n as usize))
                .filter(|n| n.worker_ok)
                .map(|n| fit_count(&req, &n.free))
                .fold(0i64, i64::saturating_add);
        }
        for level in (0..self.depth().saturating_sub(1)).rev() {
            for d in self.level_domains(level) {
                let sum = self.children_range(d).map(|c| counts[c as usize]).fold(0i64, i64::saturating_add);
                counts[d.idx()] = sum;
            }
        }
        counts
    }
}

/// Compares value paths value by value (Kueue's `slices.Compare` on level values).
pub fn compare_paths<S: AsRef<str>>(a: &[S], b: &[S]) -> Ordering {
    a.iter().map(AsRef::as_ref).cmp(b.iter().map(AsRef::as_ref))
}

/// `requests` plus one unit of `pods`: what one pod consumes (SEMANTICS §2).
pub fn with_one_pod(requests: &Resources) -> Resources {
    let mut r = requests.clone();
    r.pods = 1;
    r
}

/// How many pods with `req` fit in `free`: the minimum over the requested resources
/// (positive amounts only) of `floor(free / request)`; a resource missing from `free`
/// counts as 0, negative free space as 0 (SEMANTICS §2). `req` should include `pods`
/// (see [`with_one_pod`]); without any positive request the answer is `i64::MAX`.
pub fn fit_count(req: &Resources, free: &Resources) -> i64 {
    // Field by field: the named resources are looked up by name, the four fixed ones are
    // not (matching a name against them compares bytes, once per node and per cycle).
    let fixed = [
        (req.cpu, free.cpu),
        (req.memory, free.memory),
        (req.ephemeral_storage, free.ephemeral_storage),
        (req.pods, free.pods),
    ];
    let scalar = req.scalar.iter().map(|(name, amount)| (*amount, free.scalar(name)));
    fixed
        .into_iter()
        .chain(scalar)
        .filter(|&(amount, _)| amount > 0)
        .map(|(amount, available)| available.max(0) / amount)
        .min()
        .unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, values: &[&str], pods: i64) -> TasNode {
        let free = Resources { pods, cpu: 1000 * pods, ..Default::default() };
        TasNode::new(name, values.iter().map(|v| v.to_string()).collect(), free)
    }

    fn levels() -> Vec<String> {
        vec!["block".into(), "rack".into(), HOSTNAME_LEVEL.into()]
    }

    #[test]
    fn domains_are_numbered_by_level_then_by_path_whatever_the_node_order() {
        let nodes = vec![
            node("n4", &["b2", "r1", "x4"], 1),
            node("n1", &["b1", "r2", "x1"], 1),
            node("n3", &["b1", "r1", "x3"], 1),
            node("n2", &["b1", "r1", "x2"], 1),
        ];
        let tree = DomainTree::new(&levels(), &nodes).unwrap();
        let names =
            |level: usize| tree.level_domains(level).map(|d| tree.path(d).join("/")).collect::<Vec<_>>();
        assert_eq!(names(0), ["b1", "b2"]);
        assert_eq!(names(1), ["b1/r1", "b1/r2", "b2/r1"]);
        assert_eq!(names(2), ["b1/r1/x2", "b1/r1/x3", "b1/r2/x1", "b2/r1/x4"]);
        let b1 = tree.find(&["b1"]).unwrap();
        assert_eq!(tree.children(b1).map(|d| tree.value(d).to_string()).collect::<Vec<_>>(), ["r1", "r2"]);
        let r1 = tree.find(&["b1", "r1"]).unwrap();
        assert_eq!(tree.parent(r1), Some(b1));
        let x3 = tree.find(&["b1", "r1", "x3"]).unwrap();
        assert_eq!(tree.leaf_nodes(x3), [2]);
        assert_eq!(tree.level(x3), 2);
        assert!(tree.find(&["b3"]).is_none());
        assert!(tree.hostname_leaves());
    }

    #[test]
    fn nodes_sharing_a_path_share_a_leaf_bucket() {
        let lv = vec!["block".to_string(), "rack".to_string()];
        let nodes =
            vec![node("a", &["b1", "r1"], 2), node("b", &["b1", "r1"], 3), node("c", &["b1", "r2"], 4)];
        let tree = DomainTree::new(&lv, &nodes).unwrap();
        assert!(!tree.hostname_leaves());
        let r1 = tree.find(&["b1", "r1"]).unwrap();
        assert_eq!(tree.leaf_nodes(r1), [0, 1]);
        let one_cpu = Resources { cpu: 1000, ..Default::default() };
        let cap = tree.pod_capacity(&nodes, &one_cpu);
        assert_eq!(cap[r1.idx()], 5);
        assert_eq!(cap[tree.find(&["b1"]).unwrap().idx()], 9);
    }

    #[test]
    fn a_node_without_a_value_per_level_is_rejected() {
        let err = DomainTree::new(&levels(), &[node("n", &["b1"], 1)]).unwrap_err();
        assert!(matches!(err, TasError::NodeLevels { values: 1, levels: 3, .. }), "{err}");
    }

    proptest::proptest! {
        /// The field-by-field count is the count over every requested resource by name.
        #[test]
        fn fit_count_is_the_minimum_over_the_requested_resources_by_name(
            req in proptest::collection::vec(-2i64..6, 6),
            free in proptest::collection::vec(-3i64..40, 6),
        ) {
            let make = |v: &[i64], gpu_first: bool| {
                let mut r = Resources { cpu: v[0], memory: v[1], ephemeral_storage: v[2], pods: v[3], ..Default::default() };
                let named = [("example.com/a", v[4]), ("nvidia.com/gpu", v[5])];
                for (name, amount) in if gpu_first { [named[1], named[0]] } else { named } {
                    if amount != 0 {
                        r.scalar.push((crate::resources::intern(name), amount));
                    }
                }
                r
            };
            let (req, free) = (make(&req, false), make(&free, true));
            let by_name = req
                .iter_nonzero()
                .filter(|(_, amount)| *amount > 0)
                .map(|(name, amount)| free.get(name).max(0) / amount)
                .min()
                .unwrap_or(i64::MAX);
            proptest::prop_assert_eq!(fit_count(&req, &free), by_name);
        }
    }

    #[test]
    fn fit_count_takes_the_scarcest_requested_resource() {
        let mut free = Resources { cpu: 3500, memory: 10, pods: 100, ..Default::default() };
        let mut req = Resources { cpu: 1000, ..Default::default() };
        assert_eq!(fit_count(&with_one_pod(&req), &free), 3);
        // Memory-only requests are limited by the pods allocatable.
        let mem = Resources { memory: 1, ..Default::default() };
        assert_eq!(fit_count(&with_one_pod(&mem), &free), 10);
        // A requested resource the node does not have fits nothing.
        req.set("nvidia.com/gpu", 1);
        assert_eq!(fit_count(&with_one_pod(&req), &free), 0);
        // Negative free space is no space.
        free.cpu = -5;
        assert_eq!(fit_count(&with_one_pod(&Resources { cpu: 1, ..Default::default() }), &free), 0);
    }
}
