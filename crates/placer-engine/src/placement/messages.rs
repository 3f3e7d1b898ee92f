//! The messages of a KEP-5732 cycle's outcome: the group's condition message and each
//! member's FailedScheduling message.

use super::*;
use crate::framework::group::{group_pod_message, unschedulable_all};

/// Group message without a topology constraint: how many pods fit of how many needed, and
/// why the first pod that did not fit failed.
pub(super) fn unconstrained_message(cycle: &GroupCycle, attempt: &GroupAttempt) -> String {
    let fit = attempt.scheduled_total(cycle);
    let detail = match attempt.failed.first() {
        Some((_, e)) => e.to_string(),
        None => match &attempt.verdict {
            Verdict::Unschedulable(m) => m.clone(),
            Verdict::Feasible => String::new(),
        },
    };
    format!("{fit}/{} pods fit: {detail}", cycle.min_count)
}

/// Unschedulable outcome from one attempt: pods that failed keep their own FitError (unless
/// `group_message_for_all`), the others get the group message.
pub(super) fn unschedulable_from_attempt(
    cycle: &GroupCycle,
    message: String,
    attempt: &GroupAttempt,
    group_message_for_all: bool,
) -> GroupOutcome {
    let pm = group_pod_message(&message);
    let mut pod_messages: Vec<(usize, String)> = (0..cycle.pods.len()).map(|i| (i, pm.clone())).collect();
    if !group_message_for_all {
        for (i, fit) in &attempt.failed {
            if let Some(slot) = pod_messages.get_mut(*i) {
                slot.1 = fit.to_string();
            }
        }
    }
    GroupOutcome::Unschedulable { message, pod_messages }
}

pub(super) fn scheduled_outcome(
    cycle: &GroupCycle,
    key: Option<&str>,
    attempt: &GroupAttempt,
    placement: Option<&Placement>,
) -> GroupOutcome {
    let suffix = match (key, placement) {
        (Some(k), Some(p)) => {
            format!(" Pods of PodGroup {} must share one {k} domain: {:?}.", cycle.group.key, p.name)
        }
        _ => String::new(),
    };
    let mut failures: Vec<(usize, String)> =
        attempt.failed.iter().map(|(i, fit)| (*i, format!("{fit}{suffix}"))).collect();
    for &i in &attempt.skipped {
        failures.push((i, format!("{MSG_GROUP_UNSCHEDULABLE}: pod was not tried")));
    }
    GroupOutcome::Scheduled {
        placement: placement.map(|p| p.name.to_string()),
        assignments: attempt.placed.clone(),
        failures,
    }
}

/// Group message when no placement is feasible, e.g.
/// `0/8 placements for rack can hold minCount=16: 6 Insufficient nvidia.com/gpu, 2 node(s)
/// didn't match Pod's node affinity/selector; best placement "r3" fits 12/16 pods`.
pub(super) fn constrained_unschedulable(
    snap: &Snapshot,
    demand: &Demand,
    cycle: &GroupCycle,
    key: &str,
    placements: &[Placement],
    evaluated: &[Evaluated],
    note: Option<&str>,
) -> GroupOutcome {
    let need =
        if cycle.gang { format!("minCount={}", cycle.min_count) } else { "any pod of the group".to_string() };
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for e in evaluated {
        let reason = e.reason(|i, r| r.message(snap, &placements[i].nodes, demand));
        *reasons.entry(reason).or_insert(0) += 1;
    }
    let detail = if placements.is_empty() {
        note.map(str::to_string).unwrap_or_else(|| format!("no node has label {key:?}"))
    } else {
        reasons.iter().map(|(r, n)| format!("{n} {r}")).collect::<Vec<_>>().join(", ")
    };
    let mut message = format!("0/{} placements for {key} can hold {need}: {detail}", placements.len());
    let best = evaluated
        .iter()
        .filter(|e| !matches!(e.eval, Eval::Prefiltered(_)))
        .map(|e| (e.idx, e.scheduled_total))
        .fold(None::<(usize, u32)>, |best, (i, n)| match best {
            Some((_, b)) if b >= n => best,
            _ => Some((i, n)),
        });
    if let Some((i, n)) = best {
        if n > 0 {
            message.push_str(&format!(
                "; best placement {:?} fits {n}/{} pods",
                placements[i].name, cycle.min_count
            ));
        }
    }
    unschedulable_all(cycle, message)
}
