//! Nodes with the pods on them and their requested resources, updated incrementally from
//! cluster events, plus an undo log so a cycle can assume pods, try a placement and roll
//! back without copying the cluster.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::model::{NodeId, NodeStatic, PodInfo, PodKey};
use crate::resources::Resources;

/// kube-scheduler's defaults for scoring pods that request no cpu / memory.
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// One node and what is placed on it.
#[derive(Debug, Clone)]
pub struct NodeState {
    pub info: Arc<NodeStatic>,
    /// Sum of the requests of the pods on the node; `pods` is their count.
    pub requested: Resources,
    /// Like `requested`, with zero cpu / memory requests counted as the scoring defaults.
    pub non_zero_requested: Resources,
    pub pods: Vec<Arc<PodInfo>>,
}

impl NodeState {
    fn new(info: Arc<NodeStatic>) -> Self {
        NodeState { info, requested: Resources::default(), non_zero_requested: Resources::default(), pods: Vec::new() }
    }

    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// Allocatable minus requested, per resource (may be negative when overcommitted).
    pub fn free(&self) -> Resources {
        let mut f = self.info.allocatable.clone();
        f.sub(&self.requested);
        f
    }

    fn add_pod(&mut self, pod: Arc<PodInfo>) {
        self.requested.add(&pod.requests);
        self.requested.pods += 1;
        self.non_zero_requested.add(&non_zero(&pod.requests));
        self.non_zero_requested.pods += 1;
        self.pods.push(pod);
    }

    fn remove_pod(&mut self, key: &PodKey) -> Option<Arc<PodInfo>> {
        let i = self.pods.iter().position(|p| &p.key == key)?;
        let pod = self.pods.swap_remove(i);
        self.requested.sub(&pod.requests);
        self.requested.pods -= 1;
        self.non_zero_requested.sub(&non_zero(&pod.requests));
        self.non_zero_requested.pods -= 1;
        Some(pod)
    }
}

/// Requests with zero cpu / memory replaced by the scoring defaults.
pub fn non_zero(r: &Resources) -> Resources {
    let mut n = r.clone();
    if n.cpu == 0 {
        n.cpu = DEFAULT_MILLI_CPU_REQUEST;
    }
    if n.memory == 0 {
        n.memory = DEFAULT_MEMORY_REQUEST;
    }
    n
}

#[derive(Debug, Clone)]
enum Undo {
    /// A pod was added to this node; rollback removes it.
    Added(NodeId, PodKey),
    /// A pod was removed from this node; rollback puts it back.
    Removed(NodeId, Arc<PodInfo>),
}

/// A position in the undo log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark(usize);

/// The cluster as the scheduler sees it.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    nodes: Vec<Option<NodeState>>,
    by_name: FxHashMap<String, NodeId>,
    /// Live nodes sorted by name: the deterministic iteration order.
    order: Vec<NodeId>,
    free_ids: Vec<NodeId>,
    /// Where each counted pod is.
    location: FxHashMap<PodKey, NodeId>,
    /// Bound pods whose node is not (yet) known, by node name.
    orphans: FxHashMap<String, Vec<Arc<PodInfo>>>,
    undo: Vec<Undo>,
    /// Bumped on every change (node or pod), for caches.
    generation: u64,
}

impl Snapshot {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Adds or replaces a node, keeping the pods already on it.
    pub fn upsert_node(&mut self, info: NodeStatic) -> NodeId {
        self.generation += 1;
        let info = Arc::new(info);
        if let Some(&id) = self.by_name.get(&info.name) {
            if let Some(n) = self.nodes[id.0 as usize].as_mut() {
                n.info = info;
            }
            return id;
        }
        let name = info.name.clone();
        let mut state = NodeState::new(info);
        for pod in self.orphans.remove(&name).unwrap_or_default() {
            state.add_pod(pod);
        }
        let id = match self.free_ids.pop() {
            Some(id) => {
                self.nodes[id.0 as usize] = Some(state);
                id
            }
            None => {
                self.nodes.push(Some(state));
                NodeId((self.nodes.len() - 1) as u32)
            }
        };
        for p in &self.nodes[id.0 as usize].as_ref().expect("just inserted").pods {
            self.location.insert(p.key.clone(), id);
        }
        self.by_name.insert(name, id);
        self.rebuild_order();
        id
    }

    /// Removes a node; its pods become orphans until a node of that name returns.
    pub fn remove_node(&mut self, name: &str) {
        self.generation += 1;
        if let Some(id) = self.by_name.remove(name) {
            if let Some(state) = self.nodes[id.0 as usize].take() {
                for p in &state.pods {
                    self.location.remove(&p.key);
                }
                self.orphans.insert(name.to_string(), state.pods);
            }
            self.free_ids.push(id);
            self.rebuild_order();
        }
    }

    fn rebuild_order(&mut self) {
        let mut order: Vec<(String, NodeId)> = self.by_name.iter().map(|(n, id)| (n.clone(), *id)).collect();
        order.sort();
        self.order = order.into_iter().map(|(_, id)| id).collect();
    }

    /// Counts a pod that holds capacity (bound, not terminal). Replaces an earlier version
    /// of the same pod. Pods that hold no capacity are removed.
    pub fn upsert_pod(&mut self, pod: Arc<PodInfo>) {
        self.remove_pod(&pod.key);
        if pod.terminal {
            return;
        }
        let Some(node_name) = pod.node_name.clone() else { return };
        self.generation += 1;
        match self.by_name.get(&node_name) {
            Some(&id) => {
                self.location.insert(pod.key.clone(), id);
                self.nodes[id.0 as usize].as_mut().expect("live node").add_pod(pod);
            }
            None => self.orphans.entry(node_name).or_default().push(pod),
        }
    }

    /// Forgets a pod wherever it is counted.
    pub fn remove_pod(&mut self, key: &PodKey) -> Option<Arc<PodInfo>> {
        if let Some(id) = self.location.remove(key) {
            self.generation += 1;
            return self.nodes[id.0 as usize].as_mut().and_then(|n| n.remove_pod(key));
        }
        for pods in self.orphans.values_mut() {
            if let Some(i) = pods.iter().position(|p| &p.key == key) {
                self.generation += 1;
                return Some(pods.swap_remove(i));
            }
        }
        None
    }

    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.by_name.get(name).copied()
    }

    /// The node with this id. Panics on a stale id: ids come from this snapshot.
    pub fn node(&self, id: NodeId) -> &NodeState {
        self.nodes[id.0 as usize].as_ref().expect("NodeId refers to a live node")
    }

    /// Live nodes, sorted by name.
    pub fn node_ids(&self) -> &[NodeId] {
        &self.order
    }

    pub fn num_nodes(&self) -> usize {
        self.order.len()
    }

    pub fn nodes(&self) -> impl Iterator<Item = &NodeState> {
        self.order.iter().map(|id| self.node(*id))
    }

    /// The node a pod is counted on.
    pub fn pod_node(&self, key: &PodKey) -> Option<NodeId> {
        self.location.get(key).copied()
    }

    // ---- simulation ----

    /// The current position of the undo log.
    pub fn checkpoint(&self) -> Mark {
        Mark(self.undo.len())
    }

    /// Places `pod` on `node` for the rest of the simulation (until rollback).
    pub fn assume(&mut self, pod: Arc<PodInfo>, node: NodeId) {
        self.generation += 1;
        let key = pod.key.clone();
        self.location.insert(key.clone(), node);
        self.nodes[node.0 as usize].as_mut().expect("live node").add_pod(pod);
        self.undo.push(Undo::Added(node, key));
    }

    /// Removes a placed pod for the rest of the simulation (until rollback), e.g. a
    /// preemption victim.
    pub fn remove_for_simulation(&mut self, key: &PodKey) -> Option<Arc<PodInfo>> {
        let id = self.location.remove(key)?;
        self.generation += 1;
        let pod = self.nodes[id.0 as usize].as_mut().and_then(|n| n.remove_pod(key))?;
        self.undo.push(Undo::Removed(id, pod.clone()));
        Some(pod)
    }

    /// Undoes every assume / removal made after `mark`.
    pub fn rollback(&mut self, mark: Mark) {
        while self.undo.len() > mark.0 {
            self.generation += 1;
            match self.undo.pop().expect("len > mark") {
                Undo::Added(id, key) => {
                    self.location.remove(&key);
                    if let Some(n) = self.nodes[id.0 as usize].as_mut() {
                        n.remove_pod(&key);
                    }
                }
                Undo::Removed(id, pod) => {
                    self.location.insert(pod.key.clone(), id);
                    if let Some(n) = self.nodes[id.0 as usize].as_mut() {
                        n.add_pod(pod);
                    }
                }
            }
        }
    }

    /// Keeps every change made since `mark` (drops the undo entries).
    pub fn commit(&mut self, mark: Mark) {
        self.undo.truncate(mark.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::api::core::v1::{Container, Node, NodeStatus, Pod, PodSpec, ResourceRequirements};
    use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;
    use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::collections::BTreeMap;

    fn node(name: &str, cpu: &str) -> NodeStatic {
        let mut alloc = BTreeMap::new();
        alloc.insert("cpu".to_string(), Quantity(cpu.into()));
        alloc.insert("pods".to_string(), Quantity("10".into()));
        NodeStatic::from_node(Arc::new(Node {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            status: Some(NodeStatus { allocatable: Some(alloc), ..Default::default() }),
            ..Default::default()
        }))
        .unwrap()
    }

    fn pod(name: &str, cpu: &str, node: Option<&str>) -> Arc<PodInfo> {
        let mut req = BTreeMap::new();
        req.insert("cpu".to_string(), Quantity(cpu.into()));
        Arc::new(
            PodInfo::from_pod(Arc::new(Pod {
                metadata: ObjectMeta { name: Some(name.into()), namespace: Some("default".into()), ..Default::default() },
                spec: Some(PodSpec {
                    node_name: node.map(Into::into),
                    containers: vec![Container {
                        name: "c".into(),
                        resources: Some(ResourceRequirements { requests: Some(req), ..Default::default() }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                ..Default::default()
            }))
            .unwrap(),
        )
    }

    #[test]
    fn assume_and_rollback_restore_requested() {
        let mut s = Snapshot::new();
        let b = s.upsert_node(node("b", "4"));
        let a = s.upsert_node(node("a", "4"));
        assert_eq!(s.node_ids(), &[a, b], "nodes iterate in name order");
        s.upsert_pod(pod("existing", "1", Some("a")));
        let mark = s.checkpoint();
        s.assume(pod("p1", "2", None), a);
        assert_eq!(s.node(a).requested.cpu, 3000);
        assert_eq!(s.node(a).requested.pods, 2);
        let removed = s.remove_for_simulation(&PodKey::new("default", "existing")).unwrap();
        assert_eq!(removed.key.name, "existing");
        assert_eq!(s.node(a).requested.cpu, 2000);
        s.rollback(mark);
        assert_eq!(s.node(a).requested.cpu, 1000);
        assert_eq!(s.node(a).requested.pods, 1);
        assert_eq!(s.pod_node(&PodKey::new("default", "existing")), Some(a));
        assert_eq!(s.pod_node(&PodKey::new("default", "p1")), None);
    }

    #[test]
    fn pods_on_unknown_nodes_wait_for_the_node() {
        let mut s = Snapshot::new();
        s.upsert_pod(pod("early", "1", Some("late-node")));
        let id = s.upsert_node(node("late-node", "2"));
        assert_eq!(s.node(id).requested.cpu, 1000);
        s.remove_node("late-node");
        assert_eq!(s.num_nodes(), 0);
        let id = s.upsert_node(node("late-node", "2"));
        assert_eq!(s.node(id).requested.cpu, 1000);
    }
}
