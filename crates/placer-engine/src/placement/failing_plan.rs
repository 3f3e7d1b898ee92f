//! A gang that fails over the whole cluster, its members placed by counting instead of
//! one search each.
//!
//! A group without a topology constraint searches the whole cluster member by member
//! (with kube's `percentageOfNodesToScore` sampling above 100 nodes, so `place_copies`
//! does not apply). When the group fails anyway, where its members would have landed is
//! read by nobody: the outcome is how many were placed and the FitErrors (and per-pod
//! preemption results) of the members that were not. For identical node-local members
//! ([`super::counting_is_exact`], plain resources) every placement takes one of the
//! copies a node has room for, and a member fails only once no node has one left;
//! whatever nodes the search picks, the members that fail see every node the members
//! pass holding exactly as many copies as fit. So when the copies cannot make the gang
//! feasible, the members that fit are placed from a plan of those copies and the search
//! runs from the first member that does not. If that run is feasible after all (per-pod
//! preemption placed the rest), its plan's nodes would bind where the search would not
//! have put them: the run is thrown away, the hook forgets its calls, and the plain run
//! decides. `failing_plan_tests.rs` compares it with the plain run.

use super::*;
use crate::framework::preemption::PodPreemption;
use crate::podgroup::run_group_with_plan;

/// The group algorithm over `nodes`, as [`run_group_in_nodes`] runs it, with the shortcut
/// above where it applies. `snap` is left as the plain run leaves it for the caller's
/// rollback.
pub(super) fn run_group_counting_failures(
    ctx: &GroupContext<'_>,
    snap: &mut Snapshot,
    cycle: &GroupCycle,
    nodes: &[NodeId],
    mut preemption: Option<&mut dyn PodPreemption>,
) -> GroupAttempt {
    if let Some(plan) = failing_plan(ctx, snap, cycle, nodes) {
        let mut counted = preemption.as_deref_mut().map(|inner| CountCalls { inner, calls: 0 });
        let mark = snap.checkpoint();
        let attempt = run_group_with_plan(
            ctx.algo,
            snap,
            cycle,
            nodes,
            &ctx.placements.feasible,
            counted.as_mut().map(|c| c as &mut dyn PodPreemption),
            Some(plan),
        );
        if !attempt.is_feasible() {
            return attempt;
        }
        snap.rollback(mark);
        let calls = counted.map_or(0, |c| c.calls);
        if let Some(p) = preemption.as_deref_mut() {
            p.uncount(calls);
        }
    }
    run_group_in_nodes(ctx.algo, snap, cycle, nodes, &ctx.placements.feasible, preemption)
}

/// The copies of the gang's identical members that fit in `nodes` (each node the members
/// pass, as often as its free resources hold one), when they are fewer than the gang
/// needs; `None` when the shortcut does not apply or could not save a search.
pub(super) fn failing_plan(
    ctx: &GroupContext<'_>,
    snap: &Snapshot,
    cycle: &GroupCycle,
    nodes: &[NodeId],
) -> Option<Vec<NodeId>> {
    if !cycle.gang || cycle.pods.len() < 2 {
        return None;
    }
    let counting = counting_is_exact(ctx, snap, cycle)?;
    if counting.devices.is_some() {
        return None;
    }
    let pod = &cycle.pods[0];
    let needed = cycle.needed() as usize;
    // No node at all: the first member's search fails at once, nothing to save.
    let ok = ctx.algo.feasible_nodes(snap, pod, nodes).ok()?;
    let mut plan = Vec::new();
    for &n in &ok {
        let copies = fit_count_on(snap.node(n), &pod.requests) as usize;
        plan.extend(std::iter::repeat_n(n, copies));
        if plan.len() >= needed {
            return None;
        }
    }
    (plan.len() >= 2).then_some(plan)
}

/// Forwards to a per-pod preemption hook, counting the calls.
struct CountCalls<'a> {
    inner: &'a mut dyn PodPreemption,
    calls: u64,
}

impl PodPreemption for CountCalls<'_> {
    fn preempt(
        &mut self,
        snap: &mut Snapshot,
        pod: &PodInfo,
        nodes: &[NodeId],
        fit: &crate::framework::FitError,
    ) -> Option<crate::podgroup::PreemptionPlan> {
        self.calls += 1;
        self.inner.preempt(snap, pod, nodes, fit)
    }

    fn uncount(&mut self, calls: u64) {
        self.inner.uncount(calls);
    }
}
