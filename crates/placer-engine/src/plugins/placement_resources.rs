//! `NodeResourcesFit` as a placement score plugin (SEMANTICS §7): bin packing over the
//! whole placement. For every resource of the strategy: requested = requests of the pods
//! already on the placement's nodes + requests of the pods placed there in this cycle
//! (cpu / memory with kube's non-zero defaults), allocatable = sum over the nodes. A
//! resource with zero allocatable contributes nothing (neither score nor weight).
//!
//! * MostAllocated (default): `min(requested, allocatable) * 100 / allocatable`;
//! * LeastAllocated: `(allocatable - requested) * 100 / allocatable`, 0 when over;
//! * RequestedToCapacityRatio: the shape (utilization -> score 0..10, scaled to 0..100)
//!   applied to `requested * 100 / allocatable`, rounded weighted average.
//!
//! Per-resource scores are averaged with the strategy's weights (integer division, as kube).
//! Examples (upstream tas_test.go): 3 pods x 1 cpu on two 2-cpu nodes -> 75; on three
//! 2-cpu nodes already holding 2 cpu -> 83.

use crate::framework::GroupCycle;
use crate::framework::ScoringStrategy;
use crate::framework::Snapshot;
use crate::framework::{requested_after, PlacementCandidate, PlacementScore};
use crate::framework::{scaled, Resources};
use crate::framework::{Status, MAX_NODE_SCORE};

/// Plugin name (shared with the pod-level plugin, and so is its weight).
pub const NAME: &str = "NodeResourcesFit";

/// Placement-level NodeResourcesFit scoring.
#[derive(Debug, Clone)]
pub struct NodeResourcesFitPlacement {
    strategy: ScoringStrategy,
}

impl NodeResourcesFitPlacement {
    /// With the placement scoring strategy (`placementScoringStrategy`).
    pub fn new(strategy: &ScoringStrategy) -> Self {
        NodeResourcesFitPlacement { strategy: strategy.clone() }
    }
}

impl PlacementScore for NodeResourcesFitPlacement {
    fn name(&self) -> &'static str {
        NAME
    }

    fn score(
        &self,
        _snap: &Snapshot,
        cycle: &GroupCycle,
        candidate: &PlacementCandidate<'_>,
    ) -> Result<i64, Status> {
        let requested = requested_after(cycle, candidate);
        Ok(strategy_score(&self.strategy, &requested, &candidate.aggregate.allocatable))
    }
}

/// Score of `requested` against `allocatable` under `strategy` (0..=100).
pub fn strategy_score(strategy: &ScoringStrategy, requested: &Resources, allocatable: &Resources) -> i64 {
    let (resources, shape) = match strategy {
        ScoringStrategy::MostAllocated { resources } | ScoringStrategy::LeastAllocated { resources } => {
            (resources, None)
        }
        ScoringStrategy::RequestedToCapacityRatio { resources, shape } => (resources, Some(shape)),
    };
    let mut points: Vec<(i64, i64)> = Vec::new();
    if let Some(shape) = shape {
        points = shape.iter().map(|&(u, s)| (u, s * 10)).collect();
        points.sort_by_key(|&(u, _)| u);
    }
    let mut total = 0i64;
    let mut weights = 0i64;
    for (name, weight) in resources {
        let alloc = allocatable.get(name);
        if alloc <= 0 {
            continue;
        }
        let req = requested.get(name);
        let score = match strategy {
            ScoringStrategy::MostAllocated { .. } => scaled(req.clamp(0, alloc), MAX_NODE_SCORE, alloc),
            ScoringStrategy::LeastAllocated { .. } => {
                if req > alloc {
                    0
                } else {
                    scaled(alloc - req.max(0), MAX_NODE_SCORE, alloc)
                }
            }
            ScoringStrategy::RequestedToCapacityRatio { .. } => {
                let utilization = if req > alloc { 100 } else { scaled(req.max(0), 100, alloc) };
                broken_linear(&points, utilization)
            }
        };
        total = total.saturating_add(score.saturating_mul(*weight));
        weights = weights.saturating_add(*weight);
    }
    if weights <= 0 {
        return 0;
    }
    match strategy {
        ScoringStrategy::RequestedToCapacityRatio { .. } => (2 * total + weights) / (2 * weights),
        _ => total / weights,
    }
}

/// kube's broken linear function over (utilization, score) points sorted by utilization.
fn broken_linear(points: &[(i64, i64)], x: i64) -> i64 {
    for (i, &(u, s)) in points.iter().enumerate() {
        if x <= u {
            if i == 0 {
                return s;
            }
            let (pu, ps) = points[i - 1];
            if u == pu {
                return s;
            }
            return ps + (s - ps) * (x - pu) / (u - pu);
        }
    }
    points.last().map_or(0, |&(_, s)| s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(milli: i64) -> Resources {
        Resources { cpu: milli, ..Resources::default() }
    }

    #[test]
    fn amounts_near_i64_max_score_without_wrapping() {
        let half = i64::MAX / 2;
        assert_eq!(strategy_score(&ScoringStrategy::most_allocated(), &cpu(half), &cpu(i64::MAX)), 49);
        assert_eq!(strategy_score(&ScoringStrategy::least_allocated(), &cpu(half), &cpu(i64::MAX)), 50);
    }

    #[test]
    fn most_allocated_examples_from_upstream() {
        let most = ScoringStrategy::most_allocated();
        assert_eq!(strategy_score(&most, &cpu(3000), &cpu(4000)), 75, "3 x 1 cpu on two 2-cpu nodes");
        assert_eq!(
            strategy_score(&most, &cpu(5000), &cpu(6000)),
            83,
            "2 cpu existing + 3 x 1 cpu on three nodes"
        );
        assert_eq!(strategy_score(&most, &cpu(3000), &cpu(6000)), 50);
    }

    #[test]
    fn resources_without_allocatable_carry_no_weight() {
        let most = ScoringStrategy::most_allocated();
        let mut req = cpu(3000);
        req.memory = 600 << 20;
        assert_eq!(strategy_score(&most, &req, &cpu(4000)), 75, "memory allocatable 0: cpu alone decides");
        assert_eq!(strategy_score(&most, &req, &Resources::default()), 0);
    }

    #[test]
    fn least_allocated_is_the_mirror_image() {
        let least = ScoringStrategy::least_allocated();
        assert_eq!(strategy_score(&least, &cpu(3000), &cpu(4000)), 25);
        assert_eq!(strategy_score(&least, &cpu(5000), &cpu(4000)), 0);
    }

    #[test]
    fn weighted_average_over_cpu_and_memory() {
        let most = ScoringStrategy::most_allocated();
        let req = Resources { cpu: 1000, memory: 3 << 30, ..Resources::default() };
        let alloc = Resources { cpu: 4000, memory: 4 << 30, ..Resources::default() };
        assert_eq!(strategy_score(&most, &req, &alloc), (25 + 75) / 2);
    }

    #[test]
    fn requested_to_capacity_ratio_follows_the_shape() {
        let rtcr = ScoringStrategy::RequestedToCapacityRatio {
            resources: vec![("cpu".into(), 1)],
            shape: vec![(0, 0), (100, 10)],
        };
        assert_eq!(strategy_score(&rtcr, &cpu(3000), &cpu(4000)), 75);
    }
}
