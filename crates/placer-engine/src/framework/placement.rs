//! KEP-5732's placement extension points (seed 000): [`PlacementGenerate`],
//! [`PlacementFeasible`] (early rejection) and [`PlacementScore`] (+ normalize), the
//! configured [`PlacementFramework`], and the pieces of selection every placement search
//! shares: generation with intersection of several generators, the number of placements to
//! score, the weighted total and the winner.

use std::sync::Arc;

use placer_api::gates::Gate;

use super::group::GroupCycle;
use super::status::{Code, Status};
use crate::config::SchedulerConfig;
use crate::model::NodeId;
use crate::resources::Resources;
use crate::snapshot::{
    non_zero, DomainAggregate, Snapshot, DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST,
};

// ---------------------------------------------------------------------------------------
// Extension points.
// ---------------------------------------------------------------------------------------

/// A candidate set of nodes for a PodGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Unique among the candidates of one cycle; for topology placements the domain value.
    pub name: Arc<str>,
    /// Nodes of the placement, in snapshot (name) order. Shared: topology placements come
    /// from the snapshot's domain index without copying.
    pub nodes: Arc<[NodeId]>,
}

/// What a generator produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GeneratedPlacements {
    pub placements: Vec<Placement>,
    /// Why no placement was produced, for the group's message.
    pub note: Option<String>,
}

/// PlacementGenerate: candidate placements for a group inside a parent placement.
pub trait PlacementGenerate: Send + Sync {
    /// Plugin name.
    fn name(&self) -> &'static str;
    /// Whether the plugin restricts this group at all (false: it would return the parent).
    fn applies(&self, cycle: &GroupCycle) -> bool;
    /// Placements inside `parent`. An `Err` (status Error) fails the group's cycle.
    fn generate(
        &self,
        snap: &Snapshot,
        cycle: &GroupCycle,
        parent: &Placement,
    ) -> Result<GeneratedPlacements, Status>;
}

/// Progress of a group inside one placement, as PlacementFeasible sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlacementProgress {
    /// Members not yet tried.
    pub remaining: u32,
    /// Members already bound or assumed plus those placed so far in this placement.
    pub scheduled: u32,
    /// Pods placed so far in this placement.
    pub placed: u32,
}

/// PlacementFeasible (KEP-5732 beta "early rejection"): called before the first pod and
/// after every pod. `Unschedulable` stops the evaluation, `Wait` means "not yet", and a
/// final `Wait` counts as unschedulable.
pub trait PlacementFeasible: Send + Sync {
    /// Plugin name.
    fn name(&self) -> &'static str;
    /// The verdict for the progress so far.
    fn feasible(&self, cycle: &GroupCycle, progress: PlacementProgress) -> Status;
    /// The code of [`Self::feasible`]'s verdict, without its message: what the group
    /// algorithm asks before each pod, where a `Wait` is dropped. A plugin that formats a
    /// message for `Wait` overrides it to answer without formatting; it must agree with
    /// `feasible(..).code` for every progress.
    fn code(&self, cycle: &GroupCycle, progress: PlacementProgress) -> Code {
        self.feasible(cycle, progress).code
    }
}

/// Sums over a placement's nodes before the cycle's pods are assumed (the numbers the
/// snapshot keeps per topology domain): allocatable, requested, requested with kube's
/// non-zero defaults (scoring view) and clamped free capacity.
pub type PlacementAggregate = DomainAggregate;

/// A feasible placement handed to PlacementScore: which pods fit there (not on which
/// nodes: placements may be evaluated by counting) and the placement's aggregates.
#[derive(Debug, Clone, Copy)]
pub struct PlacementCandidate<'a> {
    pub placement: &'a Placement,
    /// Indexes (into [`GroupCycle::pods`]) of the pods that fit in the placement.
    pub placed_pods: &'a [usize],
    /// Members already scheduled plus `placed_pods`.
    pub scheduled_total: u32,
    pub aggregate: &'a PlacementAggregate,
}

/// PlacementScore (+ NormalizePlacementScore).
pub trait PlacementScore: Send + Sync {
    /// Plugin name (also the key of its weight in [`SchedulerConfig::plugin_weights`]).
    fn name(&self) -> &'static str;
    /// Raw score of one feasible placement.
    fn score(
        &self,
        snap: &Snapshot,
        cycle: &GroupCycle,
        candidate: &PlacementCandidate<'_>,
    ) -> Result<i64, Status>;
    /// Rewrites the raw scores of all candidates (same order).
    fn normalize(&self, _cycle: &GroupCycle, _scores: &mut [i64]) -> Result<(), Status> {
        Ok(())
    }
}

/// The configured placement plugins.
pub struct PlacementFramework {
    pub generators: Vec<Box<dyn PlacementGenerate>>,
    pub feasible: Vec<Box<dyn PlacementFeasible>>,
    /// Score plugins with their weights (weight 0 leaves a plugin out).
    pub scorers: Vec<(Box<dyn PlacementScore>, i64)>,
    /// `TopologyAwareWorkloadScheduling` gate.
    pub tas_enabled: bool,
    /// `percentageOfPlacementsToScore` (`None`: adaptive).
    pub percentage_of_placements_to_score: Option<u32>,
}

impl std::fmt::Debug for PlacementFramework {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlacementFramework")
            .field("generators", &self.generators.iter().map(|g| g.name()).collect::<Vec<_>>())
            .field("feasible", &self.feasible.iter().map(|g| g.name()).collect::<Vec<_>>())
            .field("scorers", &self.scorers.iter().map(|(s, w)| (s.name(), *w)).collect::<Vec<_>>())
            .field("tas_enabled", &self.tas_enabled)
            .finish()
    }
}

impl PlacementFramework {
    /// A placement framework without plugins, with the settings of `config`
    /// ([`super::Registry::placement_framework`] adds the profile's plugins).
    pub fn empty(config: &SchedulerConfig) -> PlacementFramework {
        PlacementFramework {
            generators: Vec::new(),
            feasible: Vec::new(),
            scorers: Vec::new(),
            tas_enabled: config.gates.enabled(Gate::TopologyAwareWorkloadScheduling),
            percentage_of_placements_to_score: config.percentage_of_placements_to_score,
        }
    }

    /// Whether the group goes through placement generation (gate on and some generator
    /// restricts it).
    pub fn constrains(&self, cycle: &GroupCycle) -> bool {
        self.tas_enabled && self.generators.iter().any(|g| g.applies(cycle))
    }

    /// Runs every applicable generator inside `parent` and intersects their results.
    pub fn generate(
        &self,
        snap: &Snapshot,
        cycle: &GroupCycle,
        parent: &Placement,
    ) -> Result<GeneratedPlacements, Status> {
        let mut combined: Option<GeneratedPlacements> = None;
        for g in self.generators.iter().filter(|g| g.applies(cycle)) {
            let next = g.generate(snap, cycle, parent)?;
            combined = Some(match combined {
                None => next,
                Some(prev) => GeneratedPlacements {
                    placements: intersect_placements(&prev.placements, &next.placements),
                    note: prev.note.or(next.note),
                },
            });
        }
        let mut out =
            combined.unwrap_or_else(|| GeneratedPlacements { placements: vec![parent.clone()], note: None });
        out.placements.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

/// Non-empty pairwise intersections of two placement lists, named `a/b`.
pub fn intersect_placements(a: &[Placement], b: &[Placement]) -> Vec<Placement> {
    let mut out = Vec::new();
    for pb in b {
        let set: rustc_hash::FxHashSet<NodeId> = pb.nodes.iter().copied().collect();
        for pa in a {
            let nodes: Vec<NodeId> = pa.nodes.iter().copied().filter(|n| set.contains(n)).collect();
            if !nodes.is_empty() {
                out.push(Placement { name: format!("{}/{}", pa.name, pb.name).into(), nodes: nodes.into() });
            }
        }
    }
    out.sort_by(|x, y| x.name.cmp(&y.name));
    out
}

// ---------------------------------------------------------------------------------------
// Percentage of placements to score (SEMANTICS §8).
// ---------------------------------------------------------------------------------------

/// How many feasible placements to find before scoring: with `n` = nodes summed over all
/// placements and `p` placements, `percent` = the configured value if > 0, else
/// `max(5, 100 - n * 9 / 500)`; result `max(1, p * percent / 100)`.
pub fn placements_to_find(configured: Option<u32>, total_nodes: usize, placements: usize) -> usize {
    let percent = match configured {
        Some(p) if p > 0 => u64::from(p.min(100)),
        _ => {
            let n = total_nodes as u64;
            100u64.saturating_sub(n.saturating_mul(9) / 500).max(5)
        }
    };
    let found = (placements as u64).saturating_mul(percent) / 100;
    usize::try_from(found.max(1)).unwrap_or(usize::MAX)
}

/// One PlacementScore plugin's scores of every candidate (same order): the raw
/// `score`s, then the `normalize`d ones, and the plugin's weight in the total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginScores {
    pub plugin: &'static str,
    pub weight: i64,
    pub raw: Vec<i64>,
    pub normalized: Vec<i64>,
}

/// Every PlacementScore plugin's raw and normalized scores of every candidate, in the
/// order the plugins are configured (the numbers [`total_scores`] combines).
pub fn score_breakdown(
    snap: &Snapshot,
    cycle: &GroupCycle,
    pf: &PlacementFramework,
    candidates: &[PlacementCandidate<'_>],
) -> Result<Vec<PluginScores>, Status> {
    let mut out = Vec::with_capacity(pf.scorers.len());
    for (plugin, weight) in &pf.scorers {
        let raw = candidates.iter().map(|c| plugin.score(snap, cycle, c)).collect::<Result<Vec<i64>, _>>()?;
        let mut normalized = raw.clone();
        plugin.normalize(cycle, &mut normalized)?;
        out.push(PluginScores { plugin: plugin.name(), weight: *weight, raw, normalized });
    }
    Ok(out)
}

/// Weighted sum of normalized scores of every candidate (same order).
pub fn total_scores(
    snap: &Snapshot,
    cycle: &GroupCycle,
    pf: &PlacementFramework,
    candidates: &[PlacementCandidate<'_>],
) -> Result<Vec<i64>, Status> {
    Ok(totals_of(&score_breakdown(snap, cycle, pf, candidates)?, candidates.len()))
}

/// The total of each of `n` candidates: the sum over plugins of weight x normalized score
/// (saturating).
pub fn totals_of(breakdown: &[PluginScores], n: usize) -> Vec<i64> {
    let mut totals = vec![0i64; n];
    for p in breakdown {
        for (t, s) in totals.iter_mut().zip(&p.normalized) {
            *t = t.saturating_add(s.saturating_mul(p.weight));
        }
    }
    totals
}

/// Highest total wins; equal totals go to the lexicographically smallest name.
pub fn select_best(candidates: &[PlacementCandidate<'_>], totals: &[i64]) -> usize {
    let mut best = 0;
    for i in 1..candidates.len() {
        let better = totals[i] > totals[best]
            || (totals[i] == totals[best] && candidates[i].placement.name < candidates[best].placement.name);
        if better {
            best = i;
        }
    }
    best
}

/// Requested resources of a placement after the attempt's pods (non-zero view).
pub fn requested_after(cycle: &GroupCycle, candidate: &PlacementCandidate<'_>) -> Resources {
    let mut r = candidate.aggregate.requested_non_zero.clone();
    let placed = candidate.placed_pods.iter().filter_map(|&i| cycle.pods.get(i));
    if cycle.uniform_requests() {
        // Every pod adds the same amounts: one addition of them, times the pods placed.
        let times = u32::try_from(placed.count()).unwrap_or(u32::MAX);
        if let Some(p) = cycle.pods.first() {
            r.add_times(&non_zero(&p.requests), times);
        }
        return r;
    }
    for p in placed {
        // `r += non_zero(p.requests)` without building the copy.
        r.add(&p.requests);
        if p.requests.cpu == 0 {
            r.cpu = r.cpu.saturating_add(DEFAULT_MILLI_CPU_REQUEST);
        }
        if p.requests.memory == 0 {
            r.memory = r.memory.saturating_add(DEFAULT_MEMORY_REQUEST);
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podgroup::tests::{group, pod};

    /// The requests of `placed` summed one pod at a time, as kube's scoring sums them.
    fn one_by_one(cycle: &GroupCycle, start: &Resources, placed: &[usize]) -> Resources {
        let mut r = start.clone();
        for p in placed.iter().filter_map(|&i| cycle.pods.get(i)) {
            r.add(&non_zero(&p.requests));
        }
        r
    }

    #[test]
    fn requests_after_a_placement_sum_each_placed_pod_alike_or_not() {
        let mut start = Resources { cpu: 500, memory: 1 << 20, pods: 3, ..Resources::default() };
        start.set("nvidia.com/gpu", 2);
        let aggregate = DomainAggregate { requested_non_zero: start.clone(), ..DomainAggregate::default() };
        let placement = Placement { name: "r1".into(), nodes: Arc::from(Vec::new()) };
        let alike: Vec<_> = (0..5u64).map(|i| (i, pod(&format!("a{i}"), 250, Some("pg"), None))).collect();
        let mixed: Vec<_> =
            (0..5u64).map(|i| (i, pod(&format!("m{i}"), 100 * i as i64, Some("pg"), None))).collect();
        for (pods, uniform) in [(alike, true), (mixed, false)] {
            let cycle = GroupCycle::new(group("pg", Some(2), Some("rack")), true, pods, vec![]);
            assert_eq!(cycle.uniform_requests(), uniform);
            for placed in [vec![], vec![0], vec![0, 1, 2], vec![4, 2, 0, 1, 3], vec![1, 7]] {
                let candidate = PlacementCandidate {
                    placement: &placement,
                    placed_pods: &placed,
                    scheduled_total: 0,
                    aggregate: &aggregate,
                };
                assert_eq!(
                    requested_after(&cycle, &candidate),
                    one_by_one(&cycle, &start, &placed),
                    "uniform {uniform}, placed {placed:?}"
                );
            }
        }
    }
}
