//! `PlacementFragmentation` (Placer; off by default, a profile enables it under
//! `plugins.placementScore.enabled`): a placement score that keeps free capacity usable
//! for the next gangs, in the spirit of Alibaba's FGD ("Beware of Fragmentation", ATC'23:
//! place where the expected fragmentation grows least).
//!
//! For one feasible placement the plugin packs the placed pods onto the placement's nodes
//! the way a bin-packing pod-level score does (the node with the least free *device* that
//! still holds a copy first: the group's largest extended resource, or cpu without one),
//! then measures, in device units, how the cluster's stranded capacity changes:
//!
//! * hosts: free devices on partly used nodes (some but not all of their devices taken)
//!   after the group, minus before. Filling a half-used host lowers it; opening an empty
//!   host and leaving part of it free raises it.
//! * domain: the same for the placement as a whole (a rack or block): a partly used domain
//!   that the group fills further lowers it by what it takes; an empty domain the group
//!   opens strands what it leaves free, so whole free domains stay whole for large gangs.
//!
//! Raw score: minus the sum of both changes; normalized linearly to 0..=100 over the
//! candidates (the least fragmenting placement gets 100; all equal: all 100). Groups that
//! pack differently than simulated (another pod-level score) are still scored consistently:
//! the plugin ranks placements, it does not choose nodes.

use super::node_resources::fit_count_on;
use crate::framework::{
    GroupCycle, NodeState, PlacementCandidate, PlacementScore, Resources, Snapshot, Status,
};
use crate::framework::{CPU, MAX_NODE_SCORE};

/// Plugin name.
pub const NAME: &str = "PlacementFragmentation";

/// Fragmentation-aware placement scoring.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlacementFragmentation;

/// The resource fragmentation is counted in: the extended resource the group's pods
/// request most of, else cpu.
fn device(cycle: &GroupCycle) -> String {
    let mut best: Option<(&str, i64)> = None;
    for p in &cycle.pods {
        for (name, v) in &p.requests.scalar {
            if *v > 0 && best.is_none_or(|(_, b)| *v > b) {
                best = Some((name, *v));
            }
        }
    }
    best.map_or_else(|| CPU.to_string(), |(n, _)| n.to_string())
}

/// A node of the placement during the simulated packing.
struct Slot<'a> {
    state: &'a NodeState,
    /// Requests placed here by the simulation.
    added: Resources,
    added_pods: i64,
}

impl Slot<'_> {
    fn free_device(&self, device: &str) -> i64 {
        self.state.allocatable.get(device) - self.state.requested.get(device) - self.added.get(device)
    }

    /// Copies of `req` that still fit, after what the simulation placed.
    fn copies(&self, req: &Resources) -> i64 {
        if self.added_pods == 0 {
            return i64::from(fit_count_on(self.state, req));
        }
        let mut used = self.state.requested.clone();
        used.add(&self.added);
        let alloc = &self.state.allocatable;
        let mut n = alloc.pods - self.state.pods.len() as i64 - self.added_pods;
        let mut limit = |free: i64, r: i64| {
            if r > 0 {
                n = n.min(free / r);
            }
        };
        limit(alloc.cpu - used.cpu, req.cpu);
        limit(alloc.memory - used.memory, req.memory);
        limit(alloc.ephemeral_storage - used.ephemeral_storage, req.ephemeral_storage);
        for (name, r) in &req.scalar {
            limit(alloc.get(name) - used.get(name), *r);
        }
        n.max(0)
    }
}

/// Stranded device capacity: free devices of a unit (node or domain) that is partly used.
fn stranded(alloc: i64, used: i64) -> i64 {
    let free = alloc - used;
    if used > 0 && free > 0 {
        free
    } else {
        0
    }
}

/// The change of stranded device capacity (hosts + domain) if the candidate's pods go to
/// its nodes, packed least-free-device first. Lower is better.
pub fn fragmentation_delta(snap: &Snapshot, cycle: &GroupCycle, c: &PlacementCandidate<'_>) -> i64 {
    let device = device(cycle);
    let mut slots: Vec<Slot<'_>> = c
        .placement
        .nodes
        .iter()
        .map(|&n| Slot { state: snap.node(n), added: Resources::default(), added_pods: 0 })
        .filter(|s| s.state.allocatable.get(&device) > 0)
        .collect();
    // Runs of identical requests are packed together (the common case: one run).
    let mut i = 0;
    let placed = c.placed_pods;
    while i < placed.len() {
        let Some(first) = cycle.pods.get(placed[i]) else { break };
        let req = &first.requests;
        let mut run = 1;
        while i + run < placed.len() && cycle.pods.get(placed[i + run]).is_some_and(|p| p.requests == *req) {
            run += 1;
        }
        let mut order: Vec<usize> = (0..slots.len()).collect();
        order.sort_by_key(|&s| (slots[s].free_device(&device), s));
        let mut left = run as i64;
        for s in order {
            if left == 0 {
                break;
            }
            let take = slots[s].copies(req).min(left);
            if take > 0 {
                for _ in 0..take {
                    slots[s].added.add(req);
                }
                slots[s].added_pods += take;
                left -= take;
            }
        }
        i += run;
    }
    let (mut hosts, mut alloc_sum, mut before_sum, mut after_sum) = (0i64, 0i64, 0i64, 0i64);
    for s in &slots {
        let alloc = s.state.allocatable.get(&device);
        let before = s.state.requested.get(&device).min(alloc);
        let after = (before + s.added.get(&device)).min(alloc);
        hosts += stranded(alloc, after) - stranded(alloc, before);
        alloc_sum += alloc;
        before_sum += before;
        after_sum += after;
    }
    let domain = stranded(alloc_sum, after_sum) - stranded(alloc_sum, before_sum);
    hosts + domain
}

impl PlacementScore for PlacementFragmentation {
    fn name(&self) -> &'static str {
        NAME
    }

    fn score(&self, snap: &Snapshot, cycle: &GroupCycle, c: &PlacementCandidate<'_>) -> Result<i64, Status> {
        Ok(-fragmentation_delta(snap, cycle, c))
    }

    fn normalize(&self, _cycle: &GroupCycle, scores: &mut [i64]) -> Result<(), Status> {
        let (Some(&min), Some(&max)) = (scores.iter().min(), scores.iter().max()) else { return Ok(()) };
        for s in scores.iter_mut() {
            *s = if max == min { MAX_NODE_SCORE } else { (*s - min) * MAX_NODE_SCORE / (max - min) };
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{ExtensionPoint, SchedulerConfig};
    use crate::framework::preemption::GroupHooks;
    use crate::framework::GroupOutcome;
    use crate::model::PodInfo;
    use crate::observer::NoopObserver;
    use crate::placement::{schedule_pod_group, GroupContext};
    use crate::podgroup::tests::{group, node, pod};
    use crate::podgroup::GroupCycle;
    use crate::snapshot::Snapshot;
    use std::sync::Arc;

    const GPU: &str = "nvidia.com/gpu";

    fn with_gpus(p: Arc<PodInfo>, gpus: i64) -> Arc<PodInfo> {
        let mut p: PodInfo = (*p).clone();
        p.requests.set(GPU, gpus);
        Arc::new(p)
    }

    /// Racks a (nodes a1, a2) and b (b1, b2) of 8-GPU nodes with `used[i]` GPUs taken on
    /// node i. Returns the rack a gang of `pods` x `per_pod` GPUs is placed in.
    fn chosen(used: [i64; 4], pods: usize, per_pod: i64, fragmentation: bool) -> String {
        let mut snap = Snapshot::new();
        for (i, n) in ["a1", "a2", "b1", "b2"].iter().enumerate() {
            let mut info = node(n, 64_000, &[("rack", &n[..1])]);
            info.allocatable.set(GPU, 8);
            snap.upsert_node(info);
            if used[i] > 0 {
                snap.upsert_pod(with_gpus(pod(&format!("busy-{n}"), 100, None, Some(n)), used[i]));
            }
        }
        let members = (0..pods)
            .map(|i| (i as u64, with_gpus(pod(&format!("p{i}"), 1000, Some("pg"), None), per_pod)))
            .collect();
        let cycle = GroupCycle::new(group("pg", Some(pods as i32), Some("rack")), true, members, vec![]);
        let mut config = SchedulerConfig::default();
        if fragmentation {
            config.plugins.enable(ExtensionPoint::PlacementScore, super::NAME, Some(5));
        }
        let (fw, pf) = (crate::plugins::pod_framework(&config), crate::plugins::placement_framework(&config));
        let ctx = GroupContext { placements: &pf, algo: &fw, config: &config };
        match schedule_pod_group(&ctx, &mut snap, &cycle, GroupHooks::default(), &mut NoopObserver) {
            GroupOutcome::Scheduled { placement, .. } => placement.unwrap_or_default(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn off_by_default_and_enabled_by_name() {
        let names = |c: &SchedulerConfig| {
            let pf = crate::plugins::placement_framework(c);
            pf.scorers.iter().map(|(s, _)| s.name()).collect::<Vec<_>>()
        };
        let mut config = SchedulerConfig::default();
        assert!(!names(&config).contains(&super::NAME));
        config.plugins.enable(ExtensionPoint::PlacementScore, super::NAME, Some(5));
        assert!(names(&config).contains(&super::NAME));
        crate::check_profile(&config).expect("registered by name");
    }

    #[test]
    fn fills_stranded_gpus_rather_than_cutting_into_whole_hosts() {
        // Rack a: 5 + 0 GPUs used (3 stranded on a1, a2 empty). Rack b: 3 + 3 used (5 + 5
        // stranded). A gang of 2 x 4 GPUs: in a, a2 is cut in half (hosts +4, rack 11 -> 3
        // free: -8, total -4); in b both hosts drop to 1 free (hosts -8, rack -8: -16).
        // The default scores (MostAllocated over cpu and memory, pods count) see both
        // racks alike and the smaller name wins.
        assert_eq!(chosen([5, 0, 3, 3], 2, 4, false), "a");
        assert_eq!(chosen([5, 0, 3, 3], 2, 4, true), "b");
    }

    #[test]
    fn keeps_an_empty_rack_whole_for_larger_gangs() {
        // Rack a: empty. Rack b: 6 + 6 used (2 + 2 stranded). A gang of 2 x 2 GPUs takes
        // the stranded GPUs of b (-4 hosts, -4 rack) rather than opening a (+6 hosts, +12
        // rack).
        assert_eq!(chosen([0, 0, 6, 6], 2, 2, false), "a");
        assert_eq!(chosen([0, 0, 6, 6], 2, 2, true), "b");
    }
}
