//! The aggregate-capacity pre-filter of the optimized placement search: can a placement's
//! free plain resources hold the pods the group needs at all? Sound only where
//! [`crate::framework::Framework::shortcuts`] says so (some active filter checks plain
//! resources); the search skips it otherwise.

use super::*;

// ---------------------------------------------------------------------------------------
// Aggregate pre-filter.
// ---------------------------------------------------------------------------------------

/// What the pods to place need, computed once per cycle.
#[derive(Debug, Clone)]
pub(super) enum Demand {
    /// All pods request the same: count copies per node.
    Uniform { requests: Resources, needed: u32 },
    /// Mixed requests: per resource, the sum of the `needed` smallest requests.
    Mixed { sum: Resources, needed: u32 },
}

impl Demand {
    pub(super) fn new(cycle: &GroupCycle) -> Demand {
        let needed = cycle.needed().min(u32::try_from(cycle.pods.len()).unwrap_or(u32::MAX)).max(1);
        let first = cycle.pods.first().map(|p| &p.requests);
        if let Some(first) = first {
            if cycle.pods.iter().all(|p| &p.requests == first) {
                return Demand::Uniform { requests: first.clone(), needed };
            }
        }
        let mut names: Vec<&str> = Vec::new();
        for p in &cycle.pods {
            for (name, _) in p.requests.iter_nonzero() {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        let mut sum = Resources::default();
        let mut values: Vec<i64> = Vec::with_capacity(cycle.pods.len());
        for name in names {
            values.clear();
            values.extend(cycle.pods.iter().map(|p| p.requests.get(name)));
            values.sort_unstable();
            let s: i64 = values.iter().take(needed as usize).fold(0, |a, &b| a.saturating_add(b));
            sum.set(name, s);
        }
        Demand::Mixed { sum, needed }
    }

    /// How many of the pods must fit.
    pub(super) fn needed(&self) -> u32 {
        match self {
            Demand::Uniform { needed, .. } | Demand::Mixed { needed, .. } => *needed,
        }
    }
}

/// The device pre-filter's reason (the DynamicResources filter's own).
pub(super) const DEVICES_SHORT: &str = crate::plugins::dynamic_resources::ERR_CANNOT_ALLOCATE;

/// Why the pre-filter rejected a placement. The limiting resource of a uniform group is
/// looked up only when a message is built (most rejected placements never need one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Rejection {
    /// The named limiting resource (`Insufficient cpu`, `Too many pods`).
    Reason(String),
    /// Fewer copies of the uniform pod fit than the group needs.
    UniformShort,
}

impl Rejection {
    /// The message naming the limiting resource.
    pub(super) fn message(&self, snap: &Snapshot, nodes: &[NodeId], demand: &Demand) -> String {
        match (self, demand) {
            (Rejection::Reason(r), _) => r.clone(),
            (Rejection::UniformShort, Demand::Uniform { requests, needed }) => {
                limiting_uniform(snap, nodes, requests, u64::from(*needed))
            }
            (Rejection::UniformShort, Demand::Mixed { .. }) => "Insufficient resources".to_string(),
        }
    }
}

/// Aggregates a placement and checks whether its free capacity can hold the pods the group
/// needs. Sound: a placement it rejects cannot be feasible.
pub(super) fn prefilter(snap: &Snapshot, nodes: &[NodeId], demand: &Demand) -> Result<(), Rejection> {
    prefilter_with(snap, nodes, &sum_nodes(snap, nodes), demand)
}

/// The sums of `nodes`.
pub(super) fn sum_nodes(snap: &Snapshot, nodes: &[NodeId]) -> PlacementAggregate {
    let mut agg = PlacementAggregate::default();
    for &id in nodes {
        agg.add_node(snap.node(id));
    }
    agg
}

/// [`prefilter`] with the placement's sums already known (the snapshot's domain index).
/// A uniform group is first checked against the aggregate bound (no node visited), then,
/// if the bound allows it, by exact copies per node.
pub(super) fn prefilter_with(
    snap: &Snapshot,
    nodes: &[NodeId],
    agg: &DomainAggregate,
    demand: &Demand,
) -> Result<(), Rejection> {
    match demand {
        Demand::Uniform { requests, needed } => {
            let needed = u64::from(*needed);
            if agg.copies_upper_bound(requests) < needed {
                return Err(Rejection::UniformShort);
            }
            // Counted until enough copies fit: only whether they do is asked.
            let mut copies = 0u64;
            let mut counts = nodes.iter().map(|&id| u64::from(fit_count_on(snap.node(id), requests)));
            while copies < needed {
                match counts.next() {
                    Some(c) => copies += c,
                    None => return Err(Rejection::UniformShort),
                }
            }
            Ok(())
        }
        Demand::Mixed { sum, needed } => {
            if agg.free.pods < i64::from(*needed) {
                return Err(Rejection::Reason("Too many pods".to_string()));
            }
            for (name, want) in sum.iter_nonzero() {
                if agg.free.get(name) < want {
                    return Err(Rejection::Reason(format!("Insufficient {name}")));
                }
            }
            Ok(())
        }
    }
}

/// The resource that limits copies of `requests` in `nodes` below `needed` (failure path
/// only): the first (pods, cpu, memory, ephemeral-storage, extended by name) whose own copy
/// count is short, else the one with the fewest copies.
pub(super) fn limiting_uniform(
    snap: &Snapshot,
    nodes: &[NodeId],
    requests: &Resources,
    needed: u64,
) -> String {
    let mut dims: Vec<(&str, i64)> = vec![(PODS, 1)];
    dims.extend(requests.iter_nonzero());
    let mut fewest: Option<(u64, &str)> = None;
    for (name, req) in dims {
        if req <= 0 {
            continue;
        }
        let copies: u64 = nodes
            .iter()
            .map(|&id| {
                let n = snap.node(id);
                let free = n.info.allocatable.get(name).saturating_sub(n.requested.get(name));
                u64::try_from((free / req).max(0)).unwrap_or(0)
            })
            .fold(0u64, u64::saturating_add);
        if copies < needed {
            return reason_for(name);
        }
        if fewest.is_none_or(|(c, _)| copies < c) {
            fewest = Some((copies, name));
        }
    }
    fewest.map(|(_, n)| reason_for(n)).unwrap_or_else(|| "Insufficient resources".to_string())
}

pub(super) fn reason_for(resource: &str) -> String {
    if resource == PODS {
        "Too many pods".to_string()
    } else {
        format!("Insufficient {resource}")
    }
}
