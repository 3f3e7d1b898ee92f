//! What the single-pod search reads of every node it walks, kept densely.
//!
//! A [`NodeState`] takes 320 bytes (three [`crate::resources::Resources`] with their
//! extended resources, the pods, the node object), five cache lines, of which the
//! sampled search reads four on every node of its window: the quick filter test (flags,
//! pod slots, cpu, memory) and kube's default scores (LeastAllocated and
//! BalancedAllocation over cpu and memory, TaintToleration's PreferNoSchedule check). On
//! 5,000 nodes that is 1.6 MB, more than a core's L2 cache holds, so every node costs
//! misses. [`NodeHot`] holds those values, and nothing else, in 80 bytes: 400 KB for
//! 5,000 nodes, one array in `NodeId` order that the search walks in step.
//!
//! Invariant: for every live node, `Snapshot::hot(id) == NodeHot::of(snapshot.node(id),
//! hot_scalar)`. The snapshot refreshes a node's record after every change of its state
//! (`with_node`, `upsert_node`), and again for every node when the hot extended resource
//! is chosen; debug builds check the invariant on every read. A pod whose requests the
//! record cannot answer (ephemeral storage, an extended resource other than the hot one)
//! reads the node's state as before ([`HotRequest::of`] is `None`).

use std::sync::Arc;

use super::{NodeFlags, NodeState};
use crate::resources::Resources;

/// The values of one node that the quick filter test and the default scores read (see
/// the module documentation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeHot {
    pub allocatable_cpu: i64,
    pub allocatable_memory: i64,
    pub requested_cpu: i64,
    pub requested_memory: i64,
    /// `non_zero_requested` (zero requests counted as kube's scoring defaults).
    pub non_zero_cpu: i64,
    pub non_zero_memory: i64,
    /// `allocatable.pods - requested.pods`, saturated: positive exactly when
    /// `requested.pods < allocatable.pods`.
    pub free_pods: i64,
    /// Allocatable minus requested of the snapshot's hot extended resource (0 without
    /// one), computed as `fits` computes it.
    pub free_scalar: i64,
    /// [`NodeState::stamp`].
    pub stamp: u64,
    /// [`NodeState::flags`].
    pub flags: NodeFlags,
}

// The size the module documentation and the L2 arithmetic count on.
const _: () = assert!(std::mem::size_of::<NodeHot>() == 80);

impl NodeHot {
    /// The record of `node`, with `scalar` the snapshot's hot extended resource.
    pub fn of(node: &NodeState, scalar: Option<&Arc<str>>) -> NodeHot {
        let (a, r, nz) = (&node.allocatable, &node.requested, &node.non_zero_requested);
        NodeHot {
            allocatable_cpu: a.cpu,
            allocatable_memory: a.memory,
            requested_cpu: r.cpu,
            requested_memory: r.memory,
            non_zero_cpu: nz.cpu,
            non_zero_memory: nz.memory,
            free_pods: a.pods.saturating_sub(r.pods),
            free_scalar: scalar.map_or(0, |name| a.get_scalar(name).wrapping_sub(r.get_scalar(name))),
            stamp: node.stamp(),
            flags: node.flags,
        }
    }

    /// [`crate::plugins::node_resources::fits`] for requests [`HotRequest::of`] accepted:
    /// the same comparisons on the same values.
    #[inline]
    pub fn fits(&self, r: &HotRequest) -> bool {
        self.free_pods > 0
            && (r.cpu <= 0 || r.cpu <= self.allocatable_cpu.wrapping_sub(self.requested_cpu))
            && (r.memory <= 0 || r.memory <= self.allocatable_memory.wrapping_sub(self.requested_memory))
            && (r.scalar <= 0 || r.scalar <= self.free_scalar)
    }
}

/// A pod's requests as [`NodeHot::fits`] reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HotRequest {
    pub cpu: i64,
    pub memory: i64,
    /// The request of the hot extended resource (0 when none).
    pub scalar: i64,
}

impl HotRequest {
    /// `Some` when the record answers `fits` for `requests`: no ephemeral storage asked,
    /// and no extended resource other than `scalar` (at most one entry of it).
    pub fn of(requests: &Resources, scalar: Option<&Arc<str>>) -> Option<HotRequest> {
        if requests.ephemeral_storage > 0 {
            return None;
        }
        let mut amount = None;
        for (name, r) in &requests.scalar {
            if *r <= 0 {
                continue;
            }
            match scalar {
                Some(hot) if hot == name && amount.is_none() => amount = Some(*r),
                _ => return None,
            }
        }
        Some(HotRequest { cpu: requests.cpu, memory: requests.memory, scalar: amount.unwrap_or(0) })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::model::PodKey;
    use crate::plugins::testing::{node, pod};
    use crate::snapshot::Snapshot;

    impl Snapshot {
        /// Every live node's dense record against the one read from its state now.
        fn check_hot_records(&self) -> Result<(), TestCaseError> {
            for &id in self.node_ids() {
                prop_assert_eq!(
                    self.hot[id.0 as usize],
                    NodeHot::of(self.node(id), self.hot_scalar.as_ref()),
                    "node {}",
                    self.node(id).name()
                );
            }
            Ok(())
        }
    }

    /// One change of the snapshot in [`hot_records_follow_every_change`].
    #[derive(Debug, Clone)]
    enum Op {
        /// Add or replace node i: cpu, GPUs (0: none), taint kind (0 none, 1 NoSchedule,
        /// 2 PreferNoSchedule, 3 unschedulable, 4 not ready).
        Node(usize, u32, u32, u8),
        RemoveNode(usize),
        /// Bind pod j (cpu, GPUs) to node i.
        Bind(usize, usize, u32, u32),
        RemovePod(usize),
        /// Checkpoint, then assume pod j on node i.
        Assume(usize, usize, u32),
        RemoveForSimulation(usize),
        Rollback,
    }

    fn arb_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0usize..4, 1u32..8, 0u32..3, 0u8..5).prop_map(|(i, c, g, t)| Op::Node(i, c, g, t)),
            1 => (0usize..4).prop_map(Op::RemoveNode),
            4 => (0usize..4, 0usize..8, 0u32..3, 0u32..2).prop_map(|(i, j, c, g)| Op::Bind(i, j, c, g)),
            2 => (0usize..8).prop_map(Op::RemovePod),
            3 => (0usize..4, 0usize..8, 0u32..3).prop_map(|(i, j, c)| Op::Assume(i, j, c)),
            1 => (0usize..8).prop_map(Op::RemoveForSimulation),
            2 => Just(Op::Rollback),
        ]
    }

    /// `upsert_pod_on` (one probe of the location map; `upsert_pod` files every pod whose
    /// node is known through it) against the plain sequence, `remove_pod` then
    /// `location.insert`, from the same state: a new pod, a pod moved from another node,
    /// the same node again, an orphan whose node then appears under another name, and a
    /// terminal pod.
    #[test]
    fn filing_a_pod_with_one_probe_is_remove_then_insert() {
        let plain = |s: &mut Snapshot, pod: Arc<crate::model::PodInfo>, id| {
            s.remove_pod(&pod.key);
            if pod.terminal {
                return;
            }
            s.durable_change();
            s.location.insert(pod.key.clone(), id);
            s.with_node(id, |n| n.add_pod(pod)).expect("live node");
        };
        let build = || {
            let mut s = Snapshot::new();
            for n in ["n1", "n2"] {
                s.upsert_node(node(n).cpu("4").mem("8Gi").build());
            }
            s.upsert_pod(Arc::new(pod("moved").cpu("1").on("n1").build()));
            s.upsert_pod(Arc::new(pod("orphan").cpu("1").on("gone").build()));
            s
        };
        let view = |s: &Snapshot| {
            let names = ["new", "moved", "orphan"];
            let located: Vec<_> = names.iter().map(|p| s.pod_node(&PodKey::new("default", *p))).collect();
            let pods: Vec<Vec<String>> = ["n1", "n2"]
                .iter()
                .map(|n| s.node(s.node_id(n).unwrap()).pods.iter().map(|p| p.key.name.to_string()).collect())
                .collect();
            let hot: Vec<NodeHot> = ["n1", "n2"].iter().map(|n| *s.hot(s.node_id(n).unwrap())).collect();
            (located, pods, hot)
        };
        let cases = [
            ("new", "n2", false),
            ("moved", "n2", false),
            ("moved", "n1", false),
            ("orphan", "n2", false),
            ("moved", "n2", true),
        ];
        for (name, to, terminal) in cases {
            let (mut a, mut b) = (build(), build());
            let mut p = pod(name).cpu("1").on(to).build();
            p.terminal = terminal;
            let p = Arc::new(p);
            let id = a.node_id(to).unwrap();
            plain(&mut a, p.clone(), id);
            b.upsert_pod(p);
            assert_eq!(view(&a), view(&b), "{name} to {to}");
            assert_eq!(a.durable_generation, b.durable_generation, "{name} to {to}");
            a.upsert_node(node("gone").cpu("4").mem("8Gi").build());
            b.upsert_node(node("gone").cpu("4").mem("8Gi").build());
            let orphans = |s: &Snapshot| s.node(s.node_id("gone").unwrap()).pods.len();
            assert_eq!(orphans(&a), orphans(&b), "{name} to {to}: orphans left");
        }
    }

    proptest! {
        /// The dense records equal what each node's state reads as, through node upserts
        /// (the hot extended resource chosen when the first node offers one, after nodes
        /// without), removals and returns, bindings, deletions, assumptions, simulated
        /// removals and rollbacks. A record left stale by any of them fails this.
        #[test]
        fn hot_records_follow_every_change(ops in prop::collection::vec(arb_op(), 1..40)) {
            let mut s = Snapshot::new();
            let mut marks = Vec::new();
            for op in ops {
                match op {
                    Op::Node(i, cpu, gpus, kind) => {
                        let mut b = node(&format!("n{i}")).cpu(&cpu.to_string()).mem("8Gi");
                        if gpus > 0 {
                            b = b.gpus(gpus);
                        }
                        b = match kind {
                            1 => b.taint("k", "v", "NoSchedule"),
                            2 => b.taint("k", "v", "PreferNoSchedule"),
                            3 => b.unschedulable(),
                            4 => b.not_ready(),
                            _ => b,
                        };
                        s.upsert_node(b.build());
                    }
                    Op::RemoveNode(i) => {
                        if marks.is_empty() {
                            s.remove_node(&format!("n{i}"));
                        }
                    }
                    Op::Bind(i, j, cpu, gpus) => {
                        if marks.is_empty() {
                            let mut b = pod(&format!("p{j}")).cpu(&format!("{}m", cpu * 500)).on(&format!("n{i}"));
                            if gpus > 0 {
                                b = b.gpu(gpus);
                            }
                            s.upsert_pod(Arc::new(b.build()));
                        }
                    }
                    Op::RemovePod(j) => {
                        if marks.is_empty() {
                            s.remove_pod(&PodKey::new("default", format!("p{j}")));
                        }
                    }
                    Op::Assume(i, j, cpu) => {
                        let key = PodKey::new("default", format!("a{j}"));
                        if let (Some(id), None) = (s.node_id(&format!("n{i}")), s.pod_node(&key)) {
                            marks.push(s.checkpoint());
                            s.assume(Arc::new(pod(&format!("a{j}")).cpu(&format!("{}m", cpu * 500)).gpu(1).build()), id);
                        }
                    }
                    Op::RemoveForSimulation(j) => {
                        marks.push(s.checkpoint());
                        s.remove_for_simulation(&PodKey::new("default", format!("p{j}")));
                    }
                    Op::Rollback => {
                        if let Some(mark) = marks.pop() {
                            s.rollback(mark);
                        }
                    }
                }
                s.check_hot_records()?;
            }
        }

        /// [`NodeHot::fits`] answers as `fits` on the node's state for every request
        /// [`HotRequest::of`] accepts; requests of ephemeral storage or of another extended
        /// resource are refused.
        #[test]
        fn hot_fits_is_fits(
            nodes in prop::collection::vec((0u32..6, 0u32..4, 0u32..3, 0u32..3), 1..6),
            used in prop::collection::vec((0u32..6, 0u32..3), 0..8),
            req in (0u32..4, 0u32..5, 0u32..3, 0u8..3),
        ) {
            let mut s = Snapshot::new();
            for (i, &(cpu, mem, gpus, slots)) in nodes.iter().enumerate() {
                let mut b = node(&format!("n{i}")).cpu(&cpu.to_string()).mem(&format!("{mem}Gi")).pods(slots);
                if gpus > 0 {
                    b = b.gpus(gpus);
                }
                s.upsert_node(b.build());
            }
            for (j, &(cpu, gpus)) in used.iter().enumerate() {
                let b = pod(&format!("u{j}")).cpu(&format!("{}m", cpu * 500)).gpu(gpus).on(&format!("n{}", j % nodes.len()));
                s.upsert_pod(Arc::new(b.build()));
            }
            let mut p = pod("p").cpu(&format!("{}m", req.0 * 700)).mem(&format!("{}Gi", req.1)).gpu(req.2).build();
            match req.3 {
                1 => p.requests.ephemeral_storage = 1,
                2 => p.requests.set("example.com/fpga", 1),
                _ => {}
            }
            let hot = s.hot_request(&p.requests);
            prop_assert_eq!(hot.is_some(), req.3 == 0 && (req.2 == 0 || s.hot_scalar.is_some()));
            if let Some(hot) = hot {
                for &id in s.node_ids() {
                    prop_assert_eq!(
                        s.hot(id).fits(&hot),
                        crate::plugins::node_resources::fits(s.node(id), &p.requests),
                        "node {}",
                        s.node(id).name()
                    );
                }
            }
        }
    }
}
