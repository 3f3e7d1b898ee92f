//! The assignment algorithm of seed 002, with the exact rules of SEMANTICS §4-§9:
//! counting (phase 1), choosing the fit level and its domains (phase 2a), and the descent
//! to per-leaf counts (phase 2b), for BestFit and LeastFreeCapacity, slices, multi-layer
//! constraints and leader + workers. BalancedPlacement lives in [`super::balanced`].
//!
//! All per-domain numbers of one run live in one `Vec<DomainState>` indexed by
//! [`DomainId`]; the tree itself is never written.

use std::cmp::Ordering;

use crate::resources::Resources;

use super::tree::{fit_count, with_one_pod, DomainId, DomainTree};
use super::{FailureKind, TasFailure, TasNode, TOPOLOGY_NAME};

/// What a domain can hold (phase 1), later what it is given (phase 2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DomainState {
    /// Worker pods that fit (phase 1) / are assigned (phase 2).
    pub pods: i64,
    /// Worker pods that still fit once the leader is placed in this domain.
    pub pods_with_leader: i64,
    /// Slices that fit: at the slice level `pods / slice size`, above it the children's
    /// sum, below it 0.
    pub slices: i64,
    pub slices_with_leader: i64,
    /// 1 when the leader fits somewhere in the domain (phase 1) / is assigned here.
    pub leader: i64,
    /// Sum of the preferred node-affinity weights of the nodes below.
    pub affinity: i64,
}

/// The parameters of one run, resolved from the request and the gates.
#[derive(Debug, Clone)]
pub(crate) struct Params {
    pub count: i64,
    pub leader_count: i64,
    pub slice_size: i64,
    pub requested_level: usize,
    pub slice_level: usize,
    pub required: bool,
    pub unconstrained: bool,
    /// LeastFreeCapacity (else BestFit).
    pub lfc: bool,
    /// Gate TASRespectNodeAffinityPreferred.
    pub affinity: bool,
    /// Inner multi-layer group size per level (`None`: no inner layer at that level).
    pub inner_size: Vec<Option<i64>>,
    /// Multi-layer constraints as (level, size), for failure messages; empty otherwise.
    pub layers: Vec<(usize, i64)>,
}

/// Why nodes held no pod, for failure messages.
#[derive(Debug, Clone, Default)]
pub(crate) struct Exclusions {
    pub total_nodes: usize,
    /// Nodes that pass neither the workers' nor the leader's filters.
    pub filtered: usize,
    /// (resource, leaves) where the resource was the one that left no room for a worker.
    pub resources: Vec<(String, usize)>,
}

impl Exclusions {
    fn record_resource(&mut self, name: &str) {
        match self.resources.iter_mut().find(|(n, _)| n == name) {
            Some((_, c)) => *c += 1,
            None => self.resources.push((name.to_string(), 1)),
        }
    }

    fn suffix(&self) -> String {
        let mut reasons = Vec::new();
        if self.filtered > 0 {
            reasons.push(format!("filters: {}", self.filtered));
        }
        let mut res = self.resources.clone();
        res.sort();
        reasons.extend(res.iter().map(|(n, c)| format!("resource {n:?}: {c}")));
        if reasons.is_empty() {
            String::new()
        } else {
            format!(". Total nodes: {}; excluded: {}", self.total_nodes, reasons.join(", "))
        }
    }
}

/// One run of the algorithm over a tree.
pub(crate) struct Solver<'t> {
    pub tree: &'t DomainTree,
    pub p: Params,
    pub exclusions: Exclusions,
}

impl<'t> Solver<'t> {
    pub fn new(tree: &'t DomainTree, p: Params) -> Self {
        Solver { tree, p, exclusions: Exclusions::default() }
    }

    // ----- phase 1: counting -------------------------------------------------------------

    /// Fills every domain's capacity: leaves from the nodes, parents bottom-up.
    pub fn fill(
        &mut self,
        nodes: &[TasNode],
        worker: &Resources,
        leader: Option<&Resources>,
    ) -> Vec<DomainState> {
        let tree = self.tree;
        let worker = with_one_pod(worker);
        let leader = leader.map(with_one_pod);
        let mut st = vec![DomainState::default(); tree.len()];
        self.exclusions.total_nodes = nodes.len();
        for leaf in tree.leaves() {
            let members = tree.leaf_nodes(leaf);
            let member_nodes = || members.iter().filter_map(|&i| nodes.get(i as usize));
            self.exclusions.filtered += member_nodes().filter(|n| !n.worker_ok && !n.leader_ok).count();
            let state = if let [single] = members {
                match nodes.get(*single as usize) {
                    Some(n) => self.leaf_state(
                        &worker,
                        leader.as_ref(),
                        &n.free,
                        &n.free,
                        n.worker_ok,
                        n.leader_ok,
                        n.affinity_score,
                    ),
                    None => DomainState::default(),
                }
            } else {
                // A bucket of nodes (lowest level is not the hostname): capacity is pooled.
                let mut workers_free = Resources::default();
                let mut all_free = Resources::default();
                let (mut any_worker, mut any_leader, mut affinity) = (false, false, 0i64);
                for n in member_nodes() {
                    if n.worker_ok {
                        workers_free.add(&n.free);
                        any_worker = true;
                        affinity = affinity.saturating_add(n.affinity_score);
                    }
                    if n.worker_ok || n.leader_ok {
                        all_free.add(&n.free);
                    }
                    any_leader |= n.leader_ok;
                }
                self.leaf_state(
                    &worker,
                    leader.as_ref(),
                    &workers_free,
                    &all_free,
                    any_worker,
                    any_leader,
                    affinity,
                )
            };
            st[leaf.idx()] = state;
        }
        for root in tree.level_domains(0) {
            self.refill(&mut st, root, 0, true);
        }
        st
    }

    #[allow(clippy::too_many_arguments)]
    fn leaf_state(
        &mut self,
        worker: &Resources,
        leader: Option<&Resources>,
        workers_free: &Resources,
        all_free: &Resources,
        worker_ok: bool,
        leader_ok: bool,
        affinity: i64,
    ) -> DomainState {
        let pods = if worker_ok { fit_count(worker, workers_free) } else { 0 };
        if worker_ok && pods == 0 {
            if let Some(name) = limiting_resource(worker, workers_free) {
                self.exclusions.record_resource(name);
            }
        }
        let mut s = DomainState {
            pods,
            pods_with_leader: pods,
            affinity: if self.p.affinity { affinity } else { 0 },
            ..Default::default()
        };
        if let Some(leader) = leader {
            if leader_ok && fit_count(leader, all_free) > 0 {
                s.leader = 1;
                if worker_ok {
                    let mut rest = workers_free.clone();
                    rest.sub(leader);
                    s.pods_with_leader = fit_count(worker, &rest);
                } else {
                    s.pods_with_leader = 0;
                }
            }
        }
        s
    }

    /// Recomputes `d` (at `level`) and everything below it from the leaves (Kueue's
    /// fillInCountsHelper). `inner`: round children down to the multi-layer group size of
    /// their level.
    pub fn refill(&self, st: &mut [DomainState], d: DomainId, level: usize, inner: bool) {
        let children = self.tree.children_range(d);
        let p = &self.p;
        if children.is_empty() {
            if level == p.slice_level {
                let s = &mut st[d.idx()];
                s.slices = s.pods / p.slice_size;
                s.slices_with_leader = s.pods_with_leader / p.slice_size;
            }
            return;
        }
        let child_level = level + 1;
        let k = if inner { p.inner_size.get(child_level).copied().flatten() } else { None };
        let leader_required = p.leader_count > 0;
        let (mut pods, mut slices, mut leader, mut affinity) = (0i64, 0i64, 0i64, 0i64);
        let (mut contributor, mut min_pod_diff, mut min_slice_diff) = (false, i64::MAX, i64::MAX);
        for c in children {
            let c = DomainId(c);
            self.refill(st, c, child_level, inner);
            let cs = st[c.idx()];
            let (cp, cpw) = match k {
                Some(k) if k > 0 => (cs.pods / k * k, cs.pods_with_leader / k * k),
                _ => (cs.pods, cs.pods_with_leader),
            };
            pods = pods.saturating_add(cp);
            slices = slices.saturating_add(cs.slices);
            if !leader_required || cs.leader > 0 {
                contributor = true;
                min_pod_diff = min_pod_diff.min(cp - cpw);
                min_slice_diff = min_slice_diff.min(cs.slices - cs.slices_with_leader);
            }
            leader = leader.max(cs.leader);
            affinity = affinity.saturating_add(cs.affinity);
        }
        let s = &mut st[d.idx()];
        s.pods = pods;
        let mut slices_with_leader = 0;
        if contributor {
            s.pods_with_leader = pods - min_pod_diff;
            slices_with_leader = slices - min_slice_diff;
        } else {
            s.pods_with_leader = 0;
        }
        s.leader = leader;
        s.affinity = affinity;
        if level == p.slice_level {
            slices = s.pods / p.slice_size;
            slices_with_leader = s.pods_with_leader / p.slice_size;
        }
        s.slices = slices;
        s.slices_with_leader = slices_with_leader;
    }

    // ----- ordering ----------------------------------------------------------------------

    /// BestFit: more slices first; LeastFreeCapacity: fewer slices first; then fewer pods,
    /// then name. The affinity score (gate) comes first (SEMANTICS §6.1).
    pub fn sort(&self, st: &[DomainState], v: &mut [DomainId], lfc: bool) {
        let affinity = self.p.affinity;
        v.sort_unstable_by(|&a, &b| {
            let (x, y) = (&st[a.idx()], &st[b.idx()]);
            let by_affinity = if affinity { y.affinity.cmp(&x.affinity) } else { Ordering::Equal };
            let by_slices = if lfc { x.slices.cmp(&y.slices) } else { y.slices.cmp(&x.slices) };
            by_affinity.then(by_slices).then(x.pods.cmp(&y.pods)).then(a.cmp(&b))
        });
    }

    /// Leader-capable first, then the affinity score (gate), then slices with the leader
    /// (descending for BestFit), pods with the leader ascending, name (SEMANTICS §7).
    pub fn sort_with_leader(&self, st: &[DomainState], v: &mut [DomainId], lfc: bool) {
        let affinity = self.p.affinity;
        v.sort_unstable_by(|&a, &b| {
            let (x, y) = (&st[a.idx()], &st[b.idx()]);
            let by_affinity = if affinity { y.affinity.cmp(&x.affinity) } else { Ordering::Equal };
            let by_slices = if lfc {
                x.slices_with_leader.cmp(&y.slices_with_leader)
            } else {
                y.slices_with_leader.cmp(&x.slices_with_leader)
            };
            y.leader
                .cmp(&x.leader)
                .then(by_affinity)
                .then(by_slices)
                .then(x.pods_with_leader.cmp(&y.pods_with_leader))
                .then(a.cmp(&b))
        });
    }

    /// The leading run of domains sharing the first one's affinity score (gate only).
    fn top_affinity_tier<'v>(&self, st: &[DomainState], v: &'v [DomainId]) -> &'v [DomainId] {
        if !self.p.affinity || v.is_empty() {
            return v;
        }
        let score = st[v[0].idx()].affinity;
        let end = v.iter().position(|d| st[d.idx()].affinity != score).unwrap_or(v.len());
        &v[..end]
    }

    /// The tight fit: among `v` (top affinity tier only), the first domain with the
    /// smallest capacity that still holds `needed`, skipping domains that cannot take
    /// `leaders`; `v[0]` when none does. Capacity is slices or pods, with the leader when
    /// leaders are still needed. `v` must not be empty.
    pub fn best_fit(
        &self,
        st: &[DomainState],
        v: &[DomainId],
        needed: i64,
        leaders: i64,
        slices: bool,
    ) -> DomainId {
        let tier = self.top_affinity_tier(st, v);
        let value = |s: &DomainState| match (slices, leaders > 0) {
            (true, true) => s.slices_with_leader,
            (true, false) => s.slices,
            (false, true) => s.pods_with_leader,
            (false, false) => s.pods,
        };
        let mut best: Option<(DomainId, i64)> = None;
        for &d in tier {
            let s = &st[d.idx()];
            if s.leader < leaders {
                continue;
            }
            let c = value(s);
            if c >= needed && best.is_none_or(|(_, b)| c < b) {
                best = Some((d, c));
            }
        }
        best.map_or(tier[0], |(d, _)| d)
    }

    /// Moves to the front the first leader-capable domain whose leader cost still leaves
    /// enough total room (Kueue's prioritizeLeaderDomain).
    fn prioritize_leader(
        &self,
        st: &[DomainState],
        mut v: Vec<DomainId>,
        count: i64,
        leaders: i64,
        slice_size: i64,
        slices: bool,
    ) -> Vec<DomainId> {
        if leaders == 0 || v.len() < 2 {
            return v;
        }
        let required = if slices { count / slice_size } else { count };
        let available: i64 = v
            .iter()
            .map(|d| if slices { st[d.idx()].slices } else { st[d.idx()].pods })
            .fold(0, i64::saturating_add);
        for i in 0..v.len() {
            let s = &st[v[i].idx()];
            if s.leader < leaders {
                continue;
            }
            let penalty = if slices { s.slices - s.slices_with_leader } else { s.pods - s.pods_with_leader };
            if available - penalty < required {
                continue;
            }
            v[..=i].rotate_right(1);
            return v;
        }
        v
    }

    // ----- phase 2a: the fit level -------------------------------------------------------

    /// Finds the level and the domains that hold the whole request, starting at `search`
    /// and climbing for preferred requests (SEMANTICS §6.2).
    pub fn find_fit_level(
        &self,
        st: &[DomainState],
        mut search: usize,
    ) -> Result<(usize, Vec<DomainId>), TasFailure> {
        let p = &self.p;
        let slice_count = p.count / p.slice_size;
        loop {
            let mut sorted: Vec<DomainId> = self.tree.level_domains(search).collect();
            if sorted.is_empty() {
                return Err(TasFailure::new(
                    FailureKind::NoDomains,
                    format!("no topology domains at level: {}", self.tree.levels()[search]),
                ));
            }
            self.sort_with_leader(st, &mut sorted, p.lfc);
            let mut top = sorted[0];
            {
                let t = &st[top.idx()];
                if !p.lfc && t.slices_with_leader >= slice_count && t.leader >= p.leader_count {
                    top = self.best_fit(st, &sorted, slice_count, p.leader_count, true);
                }
            }
            if p.lfc {
                for &c in &sorted {
                    let s = &st[c.idx()];
                    let capacity = if p.leader_count > 0 {
                        if s.leader < p.leader_count {
                            continue;
                        }
                        s.slices_with_leader
                    } else {
                        s.slices
                    };
                    if capacity >= slice_count {
                        return Ok((search, vec![c]));
                    }
                }
            }
            let t = st[top.idx()];
            if t.slices_with_leader >= slice_count && t.leader >= p.leader_count {
                return Ok((search, vec![top]));
            }
            if p.required {
                if p.affinity {
                    // The best-scored domain is too small: the next one in order that fits.
                    for i in 1..sorted.len() {
                        let s = &st[sorted[i].idx()];
                        if s.slices_with_leader >= slice_count && s.leader >= p.leader_count {
                            return Ok((
                                search,
                                vec![self.best_fit(st, &sorted[i..], slice_count, p.leader_count, true)],
                            ));
                        }
                    }
                }
                return Err(self.not_fit(st, search, t.slices, slice_count));
            }
            if search > 0 && !p.unconstrained {
                search -= 1;
                continue;
            }
            return self.greedy_at_level(st, search, sorted, slice_count);
        }
    }

    /// No single domain holds the request: take domains in order until it is covered,
    /// leaders first (SEMANTICS §6.2 step 4, §7).
    fn greedy_at_level(
        &self,
        st: &[DomainState],
        level: usize,
        sorted: Vec<DomainId>,
        slice_count: i64,
    ) -> Result<(usize, Vec<DomainId>), TasFailure> {
        let p = &self.p;
        let sorted = self.prioritize_leader(st, sorted, p.count, p.leader_count, p.slice_size, true);
        let mut results = Vec::new();
        let mut remaining = slice_count;
        let mut leaders = p.leader_count;
        let mut idx = 0;
        while leaders > 0 && idx < sorted.len() && st[sorted[idx].idx()].leader > 0 {
            let mut d = sorted[idx];
            if !p.lfc && st[d.idx()].slices_with_leader >= remaining {
                d = self.best_fit(st, &sorted[idx..], remaining, leaders, true);
            }
            results.push(d);
            leaders -= st[d.idx()].leader;
            remaining -= st[d.idx()].slices_with_leader;
            idx += 1;
        }
        if leaders > 0 {
            return Err(self.not_fit(st, level, p.leader_count - leaders, slice_count));
        }
        let mut rest = sorted[idx..].to_vec();
        self.sort(st, &mut rest, p.lfc);
        let mut i = 0;
        while remaining > 0 && i < rest.len() {
            let mut d = rest[i];
            if !p.lfc && st[d.idx()].slices >= remaining {
                d = self.best_fit(st, &rest[i..], remaining, 0, true);
            }
            results.push(d);
            remaining -= st[d.idx()].slices;
            i += 1;
        }
        if remaining > 0 {
            return Err(self.not_fit(st, level, slice_count - remaining, slice_count));
        }
        Ok((level, results))
    }

    /// Kueue-style "does not fit" message.
    pub fn not_fit(&self, st: &[DomainState], level: usize, fit: i64, requested: i64) -> TasFailure {
        let p = &self.p;
        let kind = FailureKind::NotFit { fit: fit.max(0) as u64, requested: requested.max(0) as u64 };
        if p.layers.len() > 1 {
            // The domain of the search level with the most slices, the first by name on a tie.
            let best = self
                .tree
                .level_domains(level)
                .max_by(|&a, &b| st[a.idx()].slices.cmp(&st[b.idx()].slices).then(b.cmp(&a)));
            let mut msg = format!("topology {TOPOLOGY_NAME:?} doesn't allow to fit");
            if let Some(best) = best {
                for &(layer_level, size) in &p.layers {
                    let fit = self.slices_in_subtree(st, best, layer_level, size);
                    msg.push_str(&format!(
                        "; {fit}/{} slice(s) fit on level {}",
                        p.count / size,
                        self.tree.levels()[layer_level]
                    ));
                }
            }
            msg.push_str(&self.exclusions.suffix());
            return TasFailure::new(kind, msg);
        }
        let unit = if p.slice_size == 1 { "pod" } else { "slice" };
        let mut msg = if fit <= 0 {
            format!("topology {TOPOLOGY_NAME:?} doesn't allow to fit any of {requested} {unit}(s)")
        } else {
            format!("topology {TOPOLOGY_NAME:?} allows to fit only {fit} out of {requested} {unit}(s)")
        };
        msg.push_str(&self.exclusions.suffix());
        TasFailure::new(kind, msg)
    }

    fn slices_in_subtree(&self, st: &[DomainState], d: DomainId, target: usize, size: i64) -> i64 {
        if self.tree.level(d) >= target {
            return st[d.idx()].pods / size.max(1);
        }
        self.tree
            .children(d)
            .map(|c| self.slices_in_subtree(st, c, target, size))
            .fold(0, i64::saturating_add)
    }

    // ----- phase 2b: distribution and descent --------------------------------------------

    /// Gives `count` pods (in slices of `slice_size` when `slices`) and `leaders` leaders to
    /// `domains` in order, greedily, with the BestFit last-domain rule (Kueue's
    /// updateCountsToMinimumGeneric). Returns the domains used, or `None` when they cannot
    /// hold it all.
    pub fn distribute(
        &self,
        st: &mut [DomainState],
        domains: Vec<DomainId>,
        count: i64,
        leaders: i64,
        slice_size: i64,
        slices: bool,
    ) -> Option<Vec<DomainId>> {
        let lfc = self.p.lfc;
        let domains = self.prioritize_leader(st, domains, count, leaders, slice_size, slices);
        let mut result = Vec::new();
        let mut remaining = if slices { count / slice_size } else { count };
        let mut leaders_left = leaders;
        for i in 0..domains.len() {
            if leaders_left > 0 {
                let (d, done) = self.consume_with_leader(
                    st,
                    &domains[i..],
                    &mut remaining,
                    &mut leaders_left,
                    slice_size,
                    slices,
                );
                result.push(d);
                if done {
                    return Some(result);
                }
                continue;
            }
            let mut d = domains[i];
            if slices {
                if !lfc && st[d.idx()].slices >= remaining {
                    d = self.best_fit(st, &domains[i..], remaining, 0, true);
                }
                let s = &mut st[d.idx()];
                s.leader = 0;
                result.push(d);
                if s.slices >= remaining {
                    s.pods = remaining * slice_size;
                    s.slices = remaining;
                    return Some(result);
                }
                s.pods = s.slices * slice_size;
                remaining -= s.slices;
            } else {
                if !lfc && st[d.idx()].pods >= remaining {
                    d = self.best_fit(st, &domains[i..], remaining, 0, false);
                }
                let s = &mut st[d.idx()];
                s.leader = 0;
                result.push(d);
                if s.pods >= remaining {
                    s.pods = remaining;
                    return Some(result);
                }
                remaining -= s.pods;
            }
        }
        None
    }

    /// One step of [`Self::distribute`] while leaders are still to be placed: `rest[0]` (or
    /// the tight fit among `rest` when it could finish) takes what it can with a leader.
    fn consume_with_leader(
        &self,
        st: &mut [DomainState],
        rest: &[DomainId],
        remaining: &mut i64,
        leaders: &mut i64,
        slice_size: i64,
        slices: bool,
    ) -> (DomainId, bool) {
        let with_leader = |s: &DomainState| if slices { s.slices_with_leader } else { s.pods_with_leader };
        let mut d = rest[0];
        {
            let s = &st[d.idx()];
            if !self.p.lfc && with_leader(s) >= *remaining && s.leader >= *leaders {
                d = self.best_fit(st, rest, *remaining, *leaders, slices);
            }
        }
        let s = &mut st[d.idx()];
        if with_leader(s) >= *remaining && s.leader >= *leaders {
            if slices {
                s.slices = *remaining;
            }
            s.leader = *leaders;
            s.pods = *remaining * slice_size;
            return (d, true);
        }
        let taken = with_leader(s).min(*remaining);
        if slices {
            s.slices_with_leader = taken;
            s.slices = taken;
        } else {
            s.pods_with_leader = taken;
        }
        s.leader = s.leader.min(*leaders);
        s.pods = taken * slice_size;
        *leaders -= s.leader;
        *remaining -= taken;
        (d, false)
    }

    /// From the domains chosen at `fit_level` down to the leaves (SEMANTICS §6.3): pooled
    /// greedy levels above the slice level (unless the balanced placement chose the
    /// domains), then each domain split among its own children.
    pub fn descend(
        &self,
        st: &mut [DomainState],
        chosen: Vec<DomainId>,
        fit_level: usize,
        balanced: bool,
    ) -> Result<Vec<DomainId>, TasFailure> {
        let p = &self.p;
        let tree = self.tree;
        let last = tree.depth() - 1;
        let lost = || {
            TasFailure::new(
                FailureKind::Internal,
                "internal error: the chosen domains cannot hold the pods".to_string(),
            )
        };
        let mut cur =
            self.distribute(st, chosen, p.count, p.leader_count, p.slice_size, true).ok_or_else(lost)?;
        let mut level = fit_level;
        if !balanced {
            while level < last.min(p.slice_level) {
                let mut lower: Vec<DomainId> = cur.iter().flat_map(|&d| tree.children(d)).collect();
                self.sort(st, &mut lower, p.lfc);
                cur = self
                    .distribute(st, lower, p.count, p.leader_count, p.slice_size, true)
                    .ok_or_else(lost)?;
                level += 1;
            }
        }
        while level < last {
            let size_here = if level >= p.slice_level {
                p.inner_size.get(level + 1).copied().flatten().unwrap_or(1)
            } else {
                p.slice_size
            };
            let mut next = Vec::with_capacity(cur.len());
            for &d in &cur {
                let mut lower: Vec<DomainId> = tree.children(d).collect();
                self.sort(st, &mut lower, p.lfc);
                if size_here > 1 {
                    for c in &lower {
                        let s = &mut st[c.idx()];
                        s.slices = s.pods / size_here;
                        s.slices_with_leader = s.pods_with_leader / size_here;
                    }
                }
                let (pods, leader) = (st[d.idx()].pods, st[d.idx()].leader);
                next.extend(
                    self.distribute(st, lower, pods, leader, size_here, size_here > 1).ok_or_else(lost)?,
                );
            }
            cur = next;
            level += 1;
        }
        Ok(cur)
    }
}

/// The requested resource that leaves no room for one pod (the first such, by name order
/// of [`Resources::iter_nonzero`]).
fn limiting_resource<'r>(req: &'r Resources, free: &Resources) -> Option<&'r str> {
    req.iter_nonzero()
        .find(|(name, amount)| *amount > 0 && free.get(name).max(0) < *amount)
        .map(|(name, _)| name)
}
