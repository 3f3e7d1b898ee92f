//! `ImageLocality` (score), as kube-scheduler's `imagelocality` plugin: a node scores by
//! the sizes of the pod's container images it already holds (node `status.images`).
//!
//! * Images are the init and app containers' (ephemeral containers are not scheduled),
//!   normalized with `:latest` when untagged; a node holds an image when one of the
//!   `names` of an entry of its `status.images` is that name.
//! * Each image held counts its size scaled by its spread: `size * nodesWithIt / nodes`
//!   (all nodes of the cluster), which keeps pods from piling up on the few nodes that
//!   happen to have a big image.
//! * The sum is clamped to `[23 MiB, 1000 MiB * containers]` and mapped linearly to
//!   `0..=100`; no normalization.

use std::collections::BTreeMap;

use crate::framework::{CycleState, PreResult, ScorePlugin, MAX_NODE_SCORE};
use crate::framework::{NodeId, NodeState, Snapshot};

/// Plugin name.
pub const NAME: &str = "ImageLocality";

const MB: i64 = 1024 * 1024;
/// Below this sum a node scores 0.
const MIN_THRESHOLD: i64 = 23 * MB;
/// Per container: at this sum (times the number of containers) a node scores 100.
const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

/// The score plugin.
pub struct ImageLocality;

/// PreScore's result: for each of the pod's images, how many nodes hold it.
struct Spread {
    nodes_with: BTreeMap<String, usize>,
    total_nodes: usize,
}

/// The size of `image` on `node`, if the node holds it.
fn image_size(node: &NodeState, image: &str) -> Option<i64> {
    let images = node.info.node.status.as_ref()?.images.as_deref()?;
    images
        .iter()
        .find(|i| i.names.as_deref().unwrap_or(&[]).iter().any(|n| n == image))
        .map(|i| i.size_bytes.unwrap_or(0))
}

/// kube's `calculatePriority`.
fn priority(sum: i64, containers: usize) -> i64 {
    let max = MAX_CONTAINER_THRESHOLD.saturating_mul(i64::try_from(containers.max(1)).unwrap_or(i64::MAX));
    let sum = sum.clamp(MIN_THRESHOLD, max.max(MIN_THRESHOLD));
    if max <= MIN_THRESHOLD {
        return 0;
    }
    MAX_NODE_SCORE * (sum - MIN_THRESHOLD) / (max - MIN_THRESHOLD)
}

impl ScorePlugin for ImageLocality {
    fn name(&self) -> &'static str {
        NAME
    }

    fn default_weight(&self) -> i64 {
        1
    }

    /// The score reads the pod, the node and the other nodes' `status.images`, never
    /// pods: placing a pod anywhere changes no node's score.
    fn node_local(&self) -> bool {
        true
    }

    fn pre_score<'a>(
        &self,
        state: &mut CycleState<'a>,
        snap: &'a Snapshot,
        _feasible: &[NodeId],
    ) -> PreResult {
        let images = &state.pod.view.images;
        // No node has any of the images (the common case): skip before building the map.
        if images.iter().all(|i| snap.nodes_with_image(i) == 0) {
            return PreResult::Skip;
        }
        // The spread of each image comes from the snapshot's per-image node counts
        // (kube's `imageStates`), not from a scan of every node per pod.
        let nodes_with: BTreeMap<String, usize> =
            images.iter().map(|i| (i.clone(), snap.nodes_with_image(i))).collect();
        let any = nodes_with.values().any(|&n| n > 0);
        if !any {
            // No node holds any of the images: every node scores 0.
            return PreResult::Skip;
        }
        state.data.write(NAME, Spread { nodes_with, total_nodes: snap.num_nodes() });
        PreResult::Run
    }

    fn score(&self, state: &CycleState<'_>, _snap: &Snapshot, _id: NodeId, node: &NodeState) -> i64 {
        let Some(spread) = state.data.read::<Spread>(NAME) else { return 0 };
        let images = &state.pod.view.images;
        let total = spread.total_nodes.max(1) as f64;
        let sum: i64 = images
            .iter()
            .filter_map(|image| {
                let size = image_size(node, image)?;
                let with = spread.nodes_with.get(image).copied().unwrap_or(0) as f64;
                // kube: int64(float64(size) * spread).
                Some((size as f64 * (with / total)) as i64)
            })
            .fold(0i64, i64::saturating_add);
        priority(sum, images.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::{node, pod, snapshot_with};

    fn mb(n: i64) -> i64 {
        n * MB
    }

    /// Upstream's fixture: node1 holds 40, 300 and 2000 MiB images, node2 250 MiB and a
    /// 10 MiB image under two names.
    fn nodes() -> Vec<crate::plugins::testing::NodeBuilder> {
        vec![
            node("node1")
                .image(&["gcr.io/40:latest"], mb(40))
                .image(&["gcr.io/300:latest"], mb(300))
                .image(&["gcr.io/2000:latest"], mb(2000)),
            node("node2")
                .image(&["gcr.io/250:latest"], mb(250))
                .image(&["gcr.io/10:latest", "gcr.io/10:v1"], mb(10)),
        ]
    }

    fn scores(images: &[&str], extra_nodes: usize) -> Vec<(String, i64)> {
        let mut ns: Vec<_> = nodes().into_iter().map(|n| n.build()).collect();
        for i in 0..extra_nodes {
            ns.push(node(&format!("empty{i}")).build());
        }
        let snap = snapshot_with(ns, vec![]);
        let p = pod("p").images(images).build();
        let mut state = CycleState::new(&p);
        let ids: Vec<NodeId> = snap.nodes().map(|n| snap.node_id(&n.info.name).unwrap()).collect();
        let plugin = ImageLocality;
        if plugin.pre_score(&mut state, &snap, &ids) == PreResult::Skip {
            return ids.iter().map(|&id| (snap.node(id).info.name.to_string(), 0)).collect();
        }
        ids.iter()
            .map(|&id| (snap.node(id).info.name.to_string(), plugin.score(&state, &snap, id, snap.node(id))))
            .collect()
    }

    fn score_of(s: &[(String, i64)], n: &str) -> i64 {
        s.iter().find(|(name, _)| name == n).map(|(_, v)| *v).unwrap()
    }

    #[test]
    fn two_images_spread_on_two_nodes_prefers_the_larger_one() {
        // node1: 40M/2 < 23M -> 0. node2: 100 * (250M/2 - 23M) / (2000M - 23M) = 5.
        let s = scores(&["gcr.io/40", "gcr.io/250"], 0);
        assert_eq!(score_of(&s, "node1"), 0);
        assert_eq!(score_of(&s, "node2"), 5);
    }

    #[test]
    fn two_images_on_one_node_prefers_it() {
        // node1: 100 * ((40M + 300M)/2 - 23M) / (2000M - 23M) = 7.
        let s = scores(&["gcr.io/40", "gcr.io/300"], 0);
        assert_eq!(score_of(&s, "node1"), 7);
        assert_eq!(score_of(&s, "node2"), 0);
    }

    #[test]
    fn thresholds_clamp_the_sum() {
        // node1: 2000M/2 = 1000M of at most 2000M: 100 * 977 / 1977 = 49; node2: 10M/2 < 23M.
        let s = scores(&["gcr.io/2000", "gcr.io/10"], 0);
        assert_eq!(score_of(&s, "node1"), 49);
        assert_eq!(score_of(&s, "node2"), 0);
        // One container: 2000M/2 = 1000M is the maximum.
        let s = scores(&["gcr.io/2000"], 0);
        assert_eq!(score_of(&s, "node1"), 100);
    }

    #[test]
    fn tagged_names_match_exactly_and_spread_lowers_the_score() {
        // gcr.io/10:v1 is a name of node2's image; untagged gcr.io/10 normalizes to :latest.
        let s = scores(&["gcr.io/250", "gcr.io/10:v1"], 0);
        // (250M + 10M)/2 = 130M: 100 * 107 / 1977 = 5.
        assert_eq!(score_of(&s, "node2"), 5);
        // With 8 more nodes holding nothing the spread is 1/10.
        let s = scores(&["gcr.io/2000"], 8);
        // 2000M / 10 = 200M: 100 * 177 / 977 = 18.
        assert_eq!(score_of(&s, "node1"), 18);
    }

    #[test]
    fn normalized_names() {
        use crate::model::normalized_image_name as n;
        assert_eq!(n("gcr.io/40"), "gcr.io/40:latest");
        assert_eq!(n("gcr.io/40:v1"), "gcr.io/40:v1");
        assert_eq!(n("localhost:5000/img"), "localhost:5000/img:latest");
        assert_eq!(n("localhost:5000/img:1"), "localhost:5000/img:1");
    }

    /// The spread ImageLocality reads is the snapshot's per-image node count, kept as nodes
    /// are added, replaced and removed (an image under two names counts under each).
    #[test]
    fn image_spread_follows_node_updates_and_removals() {
        let mut snap = snapshot_with(nodes().into_iter().map(|n| n.build()).collect(), vec![]);
        assert_eq!(snap.nodes_with_image("gcr.io/10:v1"), 1);
        assert_eq!(snap.nodes_with_image("gcr.io/40:latest"), 1);
        snap.upsert_node(node("node3").image(&["gcr.io/40:latest"], mb(40)).build());
        assert_eq!(snap.nodes_with_image("gcr.io/40:latest"), 2);
        // node1 replaced without its images.
        snap.upsert_node(node("node1").build());
        assert_eq!(snap.nodes_with_image("gcr.io/40:latest"), 1);
        assert_eq!(snap.nodes_with_image("gcr.io/2000:latest"), 0);
        snap.remove_node("node2");
        assert_eq!(snap.nodes_with_image("gcr.io/10:latest"), 0);
        assert_eq!(snap.nodes_with_image("gcr.io/10:v1"), 0);
    }
}
