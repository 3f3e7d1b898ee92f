//! KEP-5732 placements (seed 000; SEMANTICS §5-§9): the three-phase algorithm that picks a
//! set of nodes (a placement) for a PodGroup before its pods are bound.
//!
//! 1. **Generate** candidate placements with the [`PlacementGenerate`] plugins. Each gets
//!    the parent placement (all nodes) and returns placements inside it; several
//!    generators combine by the non-empty intersections of their placements.
//! 2. **Evaluate** each placement: first a cheap aggregate pre-filter (can the placement's
//!    total free capacity hold the pods the group needs at all?), then the PodGroup cycle
//!    ([`crate::podgroup::run_group_in_nodes`]) restricted to the placement's nodes, rolled
//!    back afterwards. [`PlacementFeasible`] plugins stop an evaluation early once
//!    `minCount` is out of reach.
//! 3. **Score** the feasible placements with the [`PlacementScore`] plugins (+ their
//!    NormalizePlacementScore), total = sum of weight x normalized score; the highest total
//!    wins, ties go to the lexicographically smallest placement name. The winner's
//!    evaluated per-pod assignment is what binds.
//!
//! Beta extensions implemented: multiple generators, early rejection,
//! `percentageOfPlacementsToScore` (deterministic: placements are evaluated in name order
//! instead of shuffled), and the placement holding the most members' `nominatedNodeName`s
//! is evaluated first and taken at once if it works.
//!
//! A group without a topology constraint (or with the `TopologyAwareWorkloadScheduling`
//! gate off) gets one placement holding every node. With `topology_levels` configured, the
//! engine uses the hierarchical strategy instead ([`crate::strategy`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::config::SchedulerConfig;
use crate::framework::group::{unschedulable_all, GroupOutcome};
pub use crate::framework::placement::*;
use crate::framework::preemption::GroupHooks;
use crate::framework::{CopyCounting, Status};
use crate::metrics::*;
use crate::model::{NodeId, PodInfo};
use crate::observer::Observer;
use crate::plugins::node_resources::fit_count_on;
use crate::podgroup::{
    run_group_in_nodes, run_uniform_group_in_nodes, GroupAttempt, GroupCycle, PodScheduler, Verdict,
    MSG_GROUP_UNSCHEDULABLE,
};
use crate::resources::{Resources, PODS};
use crate::snapshot::{DomainAggregate, Snapshot, TopologyDomains};

#[cfg(test)]
mod device_copy_tests;
mod failing_plan;
#[cfg(test)]
mod failing_plan_tests;
mod messages;
mod prefilter;
#[cfg(test)]
mod soundness_tests;
#[cfg(test)]
mod tests;

use messages::*;
use prefilter::*;

// ---------------------------------------------------------------------------------------
// The placement algorithm.
// ---------------------------------------------------------------------------------------

/// Everything a group cycle needs besides the snapshot.
pub struct GroupContext<'a> {
    pub placements: &'a PlacementFramework,
    pub algo: &'a dyn PodScheduler,
    pub config: &'a SchedulerConfig,
}

/// How one placement fared.
enum Eval {
    /// Rejected by the aggregate pre-filter; the message is built on demand.
    Prefiltered(Rejection),
    /// Evaluated by the PodGroup cycle.
    Simulated(GroupAttempt),
    /// Evaluated by counting copies (uniform group with node-local filters only).
    Counted { feasible: bool, reason: String },
}

/// One evaluated (or pre-filtered) placement.
struct Evaluated {
    /// Index into the placement list.
    idx: usize,
    eval: Eval,
    /// Pods (indexes into the cycle) that fit there.
    placed_pods: PlacedPods,
    /// Scheduled members plus `placed_pods`.
    scheduled_total: u32,
}

/// Which pods (indexes into the cycle) fit in a placement.
#[derive(Debug, Clone)]
enum PlacedPods {
    /// The first `n` pods (counted placements: identical pods, taken in order).
    First(usize),
    /// These pods (simulated placements).
    Listed(Vec<usize>),
}

impl PlacedPods {
    fn len(&self) -> usize {
        match self {
            PlacedPods::First(n) => *n,
            PlacedPods::Listed(v) => v.len(),
        }
    }

    /// The indexes; `first_indexes` is `0..` at least as long as any `First` count.
    fn as_slice<'a>(&'a self, first_indexes: &'a [usize]) -> &'a [usize] {
        match self {
            PlacedPods::First(n) => &first_indexes[..*n],
            PlacedPods::Listed(v) => v,
        }
    }
}

impl Evaluated {
    fn feasible(&self) -> bool {
        match &self.eval {
            Eval::Prefiltered(_) => false,
            Eval::Simulated(a) => a.is_feasible(),
            Eval::Counted { feasible, .. } => *feasible,
        }
    }
    /// Why the placement is infeasible; `rejection` turns a pre-filter rejection into a
    /// message.
    fn reason(&self, rejection: impl Fn(usize, &Rejection) -> String) -> String {
        match &self.eval {
            Eval::Prefiltered(r) => rejection(self.idx, r),
            Eval::Simulated(a) => a.main_reason(),
            Eval::Counted { reason, .. } => reason.clone(),
        }
    }
}

/// Counts how many pods of a uniform, node-local group fit in `nodes`: the nodes passing
/// the filters for one pod each take as many copies as their free resources (and, with
/// device claims, their free devices) allow. Exact for such groups because placing a copy
/// changes only the node's requested resources, which the filters check exactly as the
/// copy count does, and the devices of that node, which `DraState::node_copies` counts
/// exactly where it answers. `None` where it does not (a node with devices it cannot
/// count): the caller simulates the placement.
fn count_in_placement(
    algo: &dyn PodScheduler,
    snap: &Snapshot,
    cycle: &GroupCycle,
    nodes: &[NodeId],
    feasible: &[Box<dyn PlacementFeasible>],
    counting: &Counting,
) -> Option<Evaluated> {
    let pod = &cycle.pods[0];
    let total = cycle.pods.len() as u64;
    let (placed, reason_if_short) = match algo.feasible_nodes(snap, pod, nodes) {
        Err(fit) => (0, crate::podgroup::dominant_reason(&fit).unwrap_or_default()),
        Ok(ok) => {
            let needed = u64::from(cycle.needed());
            let limit = u32::try_from(total).unwrap_or(u32::MAX);
            let (dra, in_use) = (snap.dra(), snap.dra().in_use_set());
            // Copies by plain resources, and by resources and devices.
            let (mut by_resources, mut copies) = (0u64, 0u64);
            for &n in &ok {
                let fit = fit_count_on(snap.node(n), &pod.requests);
                by_resources += u64::from(fit);
                copies += u64::from(match &counting.devices {
                    None => fit,
                    Some(claims) => fit.min(dra.node_copies(claims, &snap.node(n).info, in_use, limit)?),
                });
                // Without devices every node answers: once all the pods fit, the rest of
                // the count changes neither the pods placed nor the reason (none).
                if counting.devices.is_none() && copies >= total {
                    break;
                }
            }
            let reason = if copies >= needed.min(total) {
                String::new()
            } else if by_resources >= needed.min(total) {
                // The devices are short: the DynamicResources filter's reason.
                crate::plugins::dynamic_resources::ERR_CANNOT_ALLOCATE.to_string()
            } else {
                limiting_uniform(snap, &ok, &pod.requests, needed)
            };
            (copies.min(total), reason)
        }
    };
    let placed_u32 = u32::try_from(placed).unwrap_or(u32::MAX);
    let scheduled_total = cycle.scheduled_count().saturating_add(placed_u32);
    let progress = PlacementProgress { remaining: 0, scheduled: scheduled_total, placed: placed_u32 };
    let verdict = feasible.iter().map(|p| p.feasible(cycle, progress)).find(|s| !s.is_success());
    let ok = verdict.is_none() && placed > 0;
    let reason = if ok {
        String::new()
    } else if !reason_if_short.is_empty() {
        reason_if_short
    } else {
        verdict.map(|s| s.reasons.join(", ")).unwrap_or_else(|| "no pod of the group fits".to_string())
    };
    Some(Evaluated {
        idx: 0,
        eval: Eval::Counted { feasible: ok, reason },
        placed_pods: PlacedPods::First(placed as usize),
        scheduled_total,
    })
}

/// Runs the placement algorithm for one cycle: generation, pre-filter, evaluation, scoring
/// and selection. `snap` is left as found (every simulation is rolled back).
pub fn schedule_pod_group(
    ctx: &GroupContext<'_>,
    snap: &mut Snapshot,
    cycle: &GroupCycle,
    mut hooks: GroupHooks<'_>,
    obs: &mut dyn Observer,
) -> GroupOutcome {
    if cycle.pods.is_empty() {
        return GroupOutcome::Unschedulable {
            message: "no pod of the group to schedule".to_string(),
            pod_messages: vec![],
        };
    }
    if cycle.gang {
        if let Some(msg) = cycle.cannot_reach_min_count() {
            return unschedulable_all(cycle, msg);
        }
    }
    let pf = ctx.placements;
    let constrained = pf.constrains(cycle);

    if !constrained {
        return schedule_in_all_nodes(ctx, snap, cycle, hooks, obs);
    }

    // The optimized search keeps the key's domains and their sums in the snapshot,
    // re-summing only the domains that changed since the last cycle; the generator and
    // the pre-filter read them instead of every node. The baseline walks the nodes.
    let baseline = ctx.config.placement_search == crate::config::PlacementSearch::Baseline;
    if !baseline {
        if let Some(key) = cycle.group.topology_key.as_deref() {
            snap.refresh_topology_domains(key);
        }
    }

    // Phase 1: generate.
    let parent = Placement { name: "".into(), nodes: snap.all_nodes() };
    let timer = obs.start_timer();
    let generated = pf.generate(snap, cycle, &parent);
    let secs = obs.elapsed_seconds(timer);
    let status = if generated.is_ok() { "Success" } else { "Error" };
    obs.observe(
        METRIC_PLUGIN_EXECUTION_DURATION,
        &[
            ("plugin", crate::plugins::placement_topology::NAME),
            ("extension_point", "PlacementGenerate"),
            ("status", status),
        ],
        secs,
    );
    let generated = match generated {
        Ok(g) => g,
        Err(status) => return GroupOutcome::Error { message: status.reasons.join(", ") },
    };
    let placements = generated.placements;
    obs.count(METRIC_PLACEMENT_TOTAL, &[], placements.len() as u64);
    let key = cycle.group.topology_key.clone().unwrap_or_default();

    // What the group needs, for the aggregate pre-filter of each placement visited.
    let demand = Demand::new(cycle);
    let (order, nominated_first) = evaluation_order(snap, cycle, &placements);
    let plan = EvaluationPlan::new(ctx, snap, cycle, &placements, &demand, &key, &order, nominated_first);
    let counting = counting_is_exact(ctx, snap, cycle);
    for use_counting in [counting.as_ref(), None] {
        let evaluated = evaluate_placements(ctx, snap, cycle, &plan, use_counting, obs);
        if let Some(first) = evaluated.first() {
            if nominated_first == Some(first.idx) && first.feasible() {
                // The nominated placement works: take it without scoring.
                match confirm(ctx, snap, cycle, &placements[first.idx], first) {
                    Some(attempt) => {
                        return scheduled_outcome(cycle, Some(&key), &attempt, Some(&placements[first.idx]))
                    }
                    None => continue,
                }
            }
        }
        let feasible: Vec<&Evaluated> = evaluated.iter().filter(|e| e.feasible()).collect();
        let winner = match feasible.len() {
            0 => {
                let outcome = constrained_unschedulable(
                    snap,
                    &demand,
                    cycle,
                    &key,
                    &placements,
                    &evaluated,
                    generated.note.as_deref(),
                );
                // PREEMPTION HOOK (Placer gate TopologyAwareWorkloadPreemption): the engine
                // passes a group hook for constrained groups only with that gate on.
                return match hooks.group_preemption.as_deref_mut() {
                    None => outcome,
                    Some(wap) => match wap.preempt_in_placements(snap, cycle, &placements) {
                        Ok((_, plan)) => GroupOutcome::WaitingOnPreemption {
                            nominations: plan.nominations,
                            victims: plan.victims,
                            failures: Vec::new(),
                        },
                        Err(reason) => match outcome {
                            GroupOutcome::Unschedulable { message, .. } => {
                                unschedulable_all(cycle, format!("{message}; {reason}"))
                            }
                            other => other,
                        },
                    },
                };
            }
            1 => feasible[0],
            _ => match score_placements(snap, cycle, pf, &placements, &feasible, !baseline) {
                Ok(i) => feasible[i],
                Err(status) => {
                    return GroupOutcome::Error {
                        message: format!("placement scoring failed: {}", status.reasons.join(", ")),
                    }
                }
            },
        };
        if let Some(attempt) = confirm(ctx, snap, cycle, &placements[winner.idx], winner) {
            return scheduled_outcome(cycle, Some(&key), &attempt, Some(&placements[winner.idx]));
        }
    }
    GroupOutcome::Error {
        message: "internal error: the selected placement could not be confirmed".to_string(),
    }
}

/// What phase 2 needs besides the cycle.
struct EvaluationPlan<'a> {
    placements: &'a [Placement],
    /// The pre-filter's input; `None`: no pre-filter (the baseline search).
    prefilter: Option<&'a Demand>,
    /// The device pre-filter's input; `None`: no device pre-filter (no claims to allocate,
    /// the DynamicResources filter off, or the baseline search).
    devices: Option<crate::snapshot::dra::DeviceDemand>,
    /// The topology key (for the snapshot's domain index).
    key: &'a str,
    order: &'a [usize],
    to_find: usize,
    nominated_first: Option<usize>,
}

impl<'a> EvaluationPlan<'a> {
    /// The plan of a cycle: the pre-filter where it is sound, and how many feasible
    /// placements to find (`percentageOfPlacementsToScore`; all without score plugins).
    #[allow(clippy::too_many_arguments)]
    fn new(
        ctx: &GroupContext<'_>,
        snap: &Snapshot,
        cycle: &GroupCycle,
        placements: &'a [Placement],
        demand: &'a Demand,
        key: &'a str,
        order: &'a [usize],
        nominated_first: Option<usize>,
    ) -> EvaluationPlan<'a> {
        let pf = ctx.placements;
        let baseline = ctx.config.placement_search == crate::config::PlacementSearch::Baseline;
        let total_nodes: usize = placements.iter().map(|p| p.nodes.len()).sum();
        let to_find = if pf.scorers.is_empty() {
            usize::MAX
        } else {
            placements_to_find(pf.percentage_of_placements_to_score, total_nodes, placements.len())
        };
        let (all_devices, all_bound) = if baseline { (false, false) } else { members_shortcuts(ctx, cycle) };
        // The devices its claims take at least, for the device pre-filter: sound only if the
        // DynamicResources filter is active for every member.
        let devices =
            all_devices.then(|| snap.dra().device_demand(&cycle.pods, demand.needed() as usize)).flatten();
        EvaluationPlan {
            placements,
            // Sound only if some active filter checks plain resources for every member.
            prefilter: all_bound.then_some(demand),
            devices,
            key,
            order,
            to_find,
            nominated_first,
        }
    }
}

/// Whether the DynamicResources filter is active for every member, and whether some active
/// filter checks plain resources for every member. The members' shortcuts are asked once
/// per run of members alike but for their identity (a gang's members, mostly): a filter's
/// `dependence` does not read the pod's name or uid.
fn members_shortcuts(ctx: &GroupContext<'_>, cycle: &GroupCycle) -> (bool, bool) {
    let (mut devices, mut bound) = (true, true);
    let mut last: Option<(&PodInfo, crate::framework::Shortcuts)> = None;
    for p in &cycle.pods {
        let s = match last {
            Some((q, s)) if q.same_but_identity(p) => {
                debug_assert_eq!(s, ctx.algo.shortcuts(p), "a member alike has the same shortcuts");
                s
            }
            _ => ctx.algo.shortcuts(p),
        };
        devices &= s.devices;
        bound &= s.aggregate_bound;
        last = Some((p, s));
    }
    (devices, bound)
}

/// Evaluation order: name order, the placement with the most nominated members first
/// (returned as well).
fn evaluation_order(
    snap: &Snapshot,
    cycle: &GroupCycle,
    placements: &[Placement],
) -> (Vec<usize>, Option<usize>) {
    let mut order: Vec<usize> = (0..placements.len()).collect();
    let nominated_first = nominated_placement(snap, cycle, placements);
    if let Some(first) = nominated_first {
        order.retain(|&i| i != first);
        order.insert(0, first);
    }
    (order, nominated_first)
}

/// How phase 2 counts copies instead of simulating the members.
struct Counting {
    /// The members' claims, when their devices cap the copies too (`None`: plain
    /// resources alone).
    devices: Option<crate::snapshot::dra::CopyClaims>,
}

/// Phase 2 and 3 go first by counting where that is exact (then, if the winner's
/// simulation disagrees with its count, by simulating every placement): for identical
/// members whose every active filter is node-local, checks plain resources or checks
/// devices copy counting can count (the filters' declared `Dependence`, and the claims'
/// `DraState::copy_claims`). `None`: simulate.
fn counting_is_exact(ctx: &GroupContext<'_>, snap: &Snapshot, cycle: &GroupCycle) -> Option<Counting> {
    if ctx.config.placement_search == crate::config::PlacementSearch::Baseline {
        return None;
    }
    let devices = match ctx.algo.shortcuts(&cycle.pods[0]).copy_counting {
        CopyCounting::Off => return None,
        CopyCounting::Resources => None,
        CopyCounting::WithDevices => Some(snap.dra().copy_claims(&cycle.pods)?),
    };
    crate::podgroup::is_uniform_node_local(cycle, snap).then_some(Counting { devices })
}

/// Phase 2: evaluates placements in `plan.order` until `plan.to_find` feasible ones are
/// found (or the nominated placement, evaluated first, is feasible).
fn evaluate_placements(
    ctx: &GroupContext<'_>,
    snap: &mut Snapshot,
    cycle: &GroupCycle,
    plan: &EvaluationPlan<'_>,
    counting: Option<&Counting>,
    obs: &mut dyn Observer,
) -> Vec<Evaluated> {
    let pf = ctx.placements;
    let mut evaluated: Vec<Evaluated> = Vec::new();
    let mut found = 0usize;
    for (pos, &idx) in plan.order.iter().enumerate() {
        let timer = obs.start_timer();
        let rejected = plan.prefilter.and_then(|demand| {
            let p = &plan.placements[idx];
            match cached_sums(snap.topology_domains(plan.key), idx, p) {
                Some(sums) => prefilter_with(snap, &p.nodes, sums, demand),
                None => prefilter(snap, &p.nodes, demand),
            }
            .err()
        });
        // Devices: the placement's free devices must cover what the claims take at least.
        let rejected = rejected.or_else(|| {
            let demand = plan.devices.as_ref()?;
            let nodes = plan.placements[idx].nodes.iter().map(|&id| &*snap.node(id).info);
            (!snap.dra().devices_suffice(nodes, demand)).then(|| Rejection::Reason(DEVICES_SHORT.to_string()))
        });
        // Counted where that is exact for every node of the placement, else simulated.
        let counted = match (&rejected, counting) {
            (None, Some(counting)) => {
                count_in_placement(ctx.algo, snap, cycle, &plan.placements[idx].nodes, &pf.feasible, counting)
            }
            _ => None,
        };
        let e = if let Some(rejection) = rejected {
            Evaluated {
                idx,
                eval: Eval::Prefiltered(rejection),
                placed_pods: PlacedPods::First(0),
                scheduled_total: cycle.scheduled_count(),
            }
        } else if let Some(mut e) = counted {
            e.idx = idx;
            e
        } else {
            let mark = snap.checkpoint();
            // v1.36: groups with a topology constraint never preempt (SEMANTICS §13).
            let attempt =
                run_group_in_nodes(ctx.algo, snap, cycle, &plan.placements[idx].nodes, &pf.feasible, None);
            snap.rollback(mark);
            Evaluated {
                idx,
                placed_pods: PlacedPods::Listed(attempt.placed.iter().map(|(i, _)| *i).collect()),
                scheduled_total: attempt.scheduled_total(cycle),
                eval: Eval::Simulated(attempt),
            }
        };
        let feasible = e.feasible();
        let secs = obs.elapsed_seconds(timer);
        record_evaluation(obs, feasible, secs);
        evaluated.push(e);
        if feasible {
            found += 1;
            if pos == 0 && plan.nominated_first == Some(idx) {
                break;
            }
        }
        if found >= plan.to_find {
            break;
        }
    }
    evaluated
}

/// The per-pod assignment of a chosen placement: the simulation already done, or (for a
/// counted placement) a simulation now, which must agree with the count.
fn confirm(
    ctx: &GroupContext<'_>,
    snap: &mut Snapshot,
    cycle: &GroupCycle,
    placement: &Placement,
    chosen: &Evaluated,
) -> Option<GroupAttempt> {
    match &chosen.eval {
        Eval::Simulated(a) => Some(a.clone()),
        Eval::Prefiltered(_) => None,
        Eval::Counted { .. } => {
            let mark = snap.checkpoint();
            let attempt =
                run_uniform_group_in_nodes(ctx.algo, snap, cycle, &placement.nodes, &ctx.placements.feasible);
            snap.rollback(mark);
            (attempt.is_feasible() && attempt.placed.len() == chosen.placed_pods.len()).then_some(attempt)
        }
    }
}

fn record_evaluation(obs: &mut dyn Observer, feasible: bool, secs: f64) {
    let result = if feasible { "feasible" } else { "infeasible" };
    obs.count(METRIC_PLACEMENT_EVALUATIONS, &[("result", result)], 1);
    obs.observe(METRIC_PLACEMENT_EVALUATION_DURATION, &[("result", result)], secs);
}

/// The single-placement path: every node (no constraint, or the gate off).
fn schedule_in_all_nodes(
    ctx: &GroupContext<'_>,
    snap: &mut Snapshot,
    cycle: &GroupCycle,
    hooks: GroupHooks<'_>,
    obs: &mut dyn Observer,
) -> GroupOutcome {
    let pf = ctx.placements;
    let nodes: Vec<NodeId> = snap.node_ids().to_vec();
    if pf.tas_enabled {
        obs.count(METRIC_PLACEMENT_TOTAL, &[], 1);
    }
    let timer = obs.start_timer();
    let mark = snap.checkpoint();
    let attempt = failing_plan::run_group_counting_failures(ctx, snap, cycle, &nodes, hooks.pod_preemption);
    snap.rollback(mark);
    let secs = obs.elapsed_seconds(timer);
    if pf.tas_enabled {
        record_evaluation(obs, attempt.is_feasible(), secs);
    }
    if attempt.is_feasible() {
        if attempt.preemptions.is_empty() {
            return scheduled_outcome(cycle, None, &attempt, None);
        }
        let mut victims: Vec<Arc<PodInfo>> = Vec::new();
        for p in &attempt.preemptions {
            for v in &p.victims {
                if !victims.iter().any(|x| x.key == v.key) {
                    victims.push(v.clone());
                }
            }
        }
        let failures = attempt.failed.iter().map(|(i, fit)| (*i, fit.to_string())).collect();
        return GroupOutcome::WaitingOnPreemption { nominations: attempt.placed.clone(), victims, failures };
    }
    let mut message = unconstrained_message(cycle, &attempt);
    if let Some(wap) = hooks.group_preemption {
        match wap.preempt(snap, cycle, &nodes) {
            Ok(plan) => {
                return GroupOutcome::WaitingOnPreemption {
                    nominations: plan.nominations,
                    victims: plan.victims,
                    failures: Vec::new(),
                }
            }
            Err(reason) => message = format!("{message}; {reason}"),
        }
    }
    unschedulable_from_attempt(cycle, message, &attempt, false)
}

/// The placement holding the most members' `nominatedNodeName` (strictly more than the
/// previous best, so the first in name order on ties); `None` if no member is nominated.
fn nominated_placement(snap: &Snapshot, cycle: &GroupCycle, placements: &[Placement]) -> Option<usize> {
    let mut nominated: FxHashMap<NodeId, u32> = FxHashMap::default();
    for p in &cycle.pods {
        if let Some(id) = p.nominated_node_name.as_deref().and_then(|n| snap.node_id(n)) {
            *nominated.entry(id).or_insert(0) += 1;
        }
    }
    if nominated.is_empty() {
        return None;
    }
    let mut best: Option<(usize, u32)> = None;
    for (i, p) in placements.iter().enumerate() {
        let count: u32 = p.nodes.iter().filter_map(|n| nominated.get(n)).sum();
        if count > best.map_or(0, |(_, c)| c) {
            best = Some((i, count));
        }
    }
    best.map(|(i, _)| i)
}

/// The sums of placement `i` kept by the domain index, when the placement is the index's
/// domain of that name (same nodes) and its sums are fresh.
fn cached_sums<'a>(
    index: Option<&'a TopologyDomains>,
    i: usize,
    p: &Placement,
) -> Option<&'a DomainAggregate> {
    let index = index?;
    // Placements generated from the index come in its order: try position `i` first.
    let d = match index.domains().get(i) {
        Some(d) if Arc::ptr_eq(&d.value, &p.name) || d.value == p.name => d,
        _ => index.find(&p.name)?,
    };
    if Arc::ptr_eq(&d.nodes, &p.nodes) || d.nodes == p.nodes {
        d.aggregate()
    } else {
        None
    }
}

/// Scores feasible placements; returns the index (into `feasible`) of the winner. The
/// placements' sums come from the domain index when `use_index` and it holds them fresh.
fn score_placements(
    snap: &Snapshot,
    cycle: &GroupCycle,
    pf: &PlacementFramework,
    placements: &[Placement],
    feasible: &[&Evaluated],
    use_index: bool,
) -> Result<usize, Status> {
    with_candidates(snap, cycle, placements, feasible, use_index, |candidates| {
        let totals = total_scores(snap, cycle, pf, candidates)?;
        Ok(select_best(candidates, &totals))
    })
}

/// Calls `f` with the PlacementScore view of the `feasible` placements (same order).
fn with_candidates<R>(
    snap: &Snapshot,
    cycle: &GroupCycle,
    placements: &[Placement],
    feasible: &[&Evaluated],
    use_index: bool,
    f: impl FnOnce(&[PlacementCandidate<'_>]) -> R,
) -> R {
    let index =
        cycle.group.topology_key.as_deref().filter(|_| use_index).and_then(|k| snap.topology_domains(k));
    let aggregates: Vec<std::borrow::Cow<'_, PlacementAggregate>> = feasible
        .iter()
        .map(|e| {
            let p = &placements[e.idx];
            match cached_sums(index, e.idx, p) {
                Some(sums) => std::borrow::Cow::Borrowed(sums),
                None => std::borrow::Cow::Owned(sum_nodes(snap, &p.nodes)),
            }
        })
        .collect();
    let first_indexes: Vec<usize> = (0..cycle.pods.len()).collect();
    let candidates: Vec<PlacementCandidate<'_>> = feasible
        .iter()
        .zip(&aggregates)
        .map(|(e, aggregate)| PlacementCandidate {
            placement: &placements[e.idx],
            placed_pods: e.placed_pods.as_slice(&first_indexes),
            scheduled_total: e.scheduled_total,
            aggregate,
        })
        .collect();
    f(&candidates)
}

// ---------------------------------------------------------------------------------------
// Explanation (read-only): the same phases, every number kept.
// ---------------------------------------------------------------------------------------

/// How the placement search decided a constrained group: every candidate placement, how
/// it fared, each PlacementScore plugin's scores and the total, and the winner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementScores {
    /// The PlacementScore plugins (name, weight), in the order they are configured.
    pub plugins: Vec<(String, i64)>,
    /// Every generated placement, in evaluation order.
    pub candidates: Vec<ScoredPlacement>,
    /// How many feasible placements the search looks for before it scores
    /// (`percentageOfPlacementsToScore`; `usize::MAX`: all).
    pub to_find: usize,
    /// Why the winner won (`None`: no placement is feasible).
    pub decided_by: Option<String>,
    /// Why no placement was generated, if none was.
    pub note: Option<String>,
}

/// One candidate placement in [`PlacementScores`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScoredPlacement {
    /// The placement's name (the domain value; `a/b` for intersections).
    pub name: String,
    pub nodes: usize,
    /// Evaluated (false: the search stopped once it had found enough feasible ones).
    pub evaluated: bool,
    pub feasible: bool,
    /// Pods of the cycle that fit there (`None`: not evaluated, or rejected by the
    /// aggregate pre-filter before any pod was tried).
    pub pods: Option<u32>,
    /// Why it is infeasible (empty when feasible or not evaluated).
    pub reason: String,
    /// Per plugin of [`PlacementScores::plugins`]: the raw score and the normalized one
    /// (empty when the placement was not scored).
    pub raw: Vec<i64>,
    pub normalized: Vec<i64>,
    /// Sum of weight x normalized score.
    pub total: Option<i64>,
    pub winner: bool,
}

/// Runs the placement search's generation, evaluation and scoring for `cycle` as
/// [`schedule_pod_group`] does (same order, pre-filter, `percentageOfPlacementsToScore`,
/// nominated placement first), keeping every number instead of binding. `None` for a
/// group the search does not constrain (one placement: every node). `snap` is left as
/// found.
pub fn explain_placements(
    ctx: &GroupContext<'_>,
    snap: &mut Snapshot,
    cycle: &GroupCycle,
) -> Option<PlacementScores> {
    let pf = ctx.placements;
    if cycle.pods.is_empty() || !pf.constrains(cycle) {
        return None;
    }
    let baseline = ctx.config.placement_search == crate::config::PlacementSearch::Baseline;
    let key = cycle.group.topology_key.clone().unwrap_or_default();
    if !baseline && !key.is_empty() {
        snap.refresh_topology_domains(&key);
    }
    let parent = Placement { name: "".into(), nodes: snap.all_nodes() };
    let generated = pf.generate(snap, cycle, &parent).ok()?;
    let placements = generated.placements;
    let demand = Demand::new(cycle);
    let (order, nominated_first) = evaluation_order(snap, cycle, &placements);
    let plan = EvaluationPlan::new(ctx, snap, cycle, &placements, &demand, &key, &order, nominated_first);
    let mut obs = crate::observer::NoopObserver;
    let counting = counting_is_exact(ctx, snap, cycle);
    let evaluated = evaluate_placements(ctx, snap, cycle, &plan, counting.as_ref(), &mut obs);
    let feasible: Vec<&Evaluated> = evaluated.iter().filter(|e| e.feasible()).collect();
    let breakdown = with_candidates(snap, cycle, &placements, &feasible, !baseline, |candidates| {
        let b = score_breakdown(snap, cycle, pf, candidates).ok()?;
        let totals = totals_of(&b, candidates.len());
        let best = (!candidates.is_empty()).then(|| select_best(candidates, &totals));
        Some((b, totals, best))
    });
    let (breakdown, totals, best) = breakdown.unwrap_or_default();
    let nominated_won = evaluated.first().is_some_and(|e| nominated_first == Some(e.idx) && e.feasible());
    let winner_idx = if nominated_won {
        evaluated.first().map(|e| e.idx)
    } else {
        match feasible.len() {
            0 => None,
            1 => Some(feasible[0].idx),
            _ => best.map(|b| feasible[b].idx),
        }
    };
    let decided_by = winner_idx.map(|_| {
        if nominated_won {
            "holds the most members' nominatedNodeName: taken without scoring".to_string()
        } else if feasible.len() == 1 {
            "the only feasible placement evaluated".to_string()
        } else {
            let top = totals.iter().copied().max().unwrap_or(0);
            if totals.iter().filter(|t| **t == top).count() > 1 {
                "highest total score, tied: the smallest name wins".to_string()
            } else {
                "highest total score".to_string()
            }
        }
    });
    let mut candidates = Vec::with_capacity(placements.len());
    for &idx in &order {
        let p = &placements[idx];
        let e = evaluated.iter().find(|e| e.idx == idx);
        let scored = feasible.iter().position(|f| f.idx == idx);
        candidates.push(ScoredPlacement {
            name: p.name.to_string(),
            nodes: p.nodes.len(),
            evaluated: e.is_some(),
            feasible: e.is_some_and(Evaluated::feasible),
            pods: e
                .filter(|e| !matches!(e.eval, Eval::Prefiltered(_)))
                .map(|e| u32::try_from(e.placed_pods.len()).unwrap_or(u32::MAX)),
            reason: match e {
                Some(e) if !e.feasible() => e.reason(|i, r| r.message(snap, &placements[i].nodes, &demand)),
                _ => String::new(),
            },
            raw: scored.map(|i| breakdown.iter().map(|b| b.raw[i]).collect()).unwrap_or_default(),
            normalized: scored
                .map(|i| breakdown.iter().map(|b| b.normalized[i]).collect())
                .unwrap_or_default(),
            total: scored.and_then(|i| totals.get(i).copied()),
            winner: winner_idx == Some(idx),
        });
    }
    Some(PlacementScores {
        plugins: pf.scorers.iter().map(|(s, w)| (s.name().to_string(), *w)).collect(),
        candidates,
        to_find: plan.to_find,
        decided_by,
        note: generated.note,
    })
}
