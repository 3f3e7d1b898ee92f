//! BalancedPlacement (gate `TASBalancedPlacement`, preferred requests only): seed 002
//! "Balanced placement" with the exact rules of SEMANTICS §10.
//!
//! With L the preferred level: every domain P one level above L (or the whole top level
//! when L is the top) is tried; a greedy BestFit pass over P's domains at level L (or L+1
//! when L is above the slice level) gives the threshold T, the per-domain share a balanced
//! split can promise; domains below T are pruned; the P with the largest T (then fewer
//! level-L domains, then name) wins. Then the smallest, tightest subset of domains gets T
//! slices each and the rest in BestFit order. Any failure falls back to BestFit.
//!
//! Trying a candidate prunes the states of its own subtree only; those are saved and
//! restored around each try, so a try costs the size of that subtree.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::Range;

use super::algorithm::{DomainState, Solver};
use super::tree::DomainId;

/// A chosen candidate: its level-L domains, its threshold, and the pruned states of its
/// subtree (to be written over the phase-1 states).
pub(crate) struct BalancedChoice {
    pub domains: Vec<DomainId>,
    pub threshold: i64,
    pub pruned: SavedStates,
}

/// States of a set of contiguous domain ranges.
pub(crate) struct SavedStates {
    ranges: Vec<Range<u32>>,
    states: Vec<DomainState>,
}

impl SavedStates {
    fn save(st: &[DomainState], ranges: Vec<Range<u32>>) -> SavedStates {
        let states =
            ranges.iter().flat_map(|r| st[r.start as usize..r.end as usize].iter().copied()).collect();
        SavedStates { ranges, states }
    }

    /// Writes the saved states back.
    pub fn restore(&self, st: &mut [DomainState]) {
        let mut i = 0;
        for r in &self.ranges {
            let n = (r.end - r.start) as usize;
            st[r.start as usize..r.end as usize].copy_from_slice(&self.states[i..i + n]);
            i += n;
        }
    }

    /// Saves the current states of the same ranges.
    pub fn snapshot_same(&self, st: &[DomainState]) -> SavedStates {
        SavedStates::save(st, self.ranges.clone())
    }
}

impl Solver<'_> {
    /// Per level from `domains`' level down: the contiguous id range of their subtree.
    /// `domains` must be a contiguous, ordered run of one level (siblings, or a whole level).
    fn subtree_ranges(&self, domains: &[DomainId]) -> Vec<Range<u32>> {
        let (Some(first), Some(last)) = (domains.first(), domains.last()) else {
            return Vec::new();
        };
        let mut ranges = Vec::with_capacity(self.tree.depth());
        ranges.push(first.0..last.0 + 1);
        let (mut lo, mut hi) = (*first, *last);
        while self.tree.level(lo) + 1 < self.tree.depth() {
            let start = self.tree.children_range(lo).start;
            let end = self.tree.children_range(hi).end;
            if start >= end {
                break;
            }
            ranges.push(start..end);
            lo = DomainId(start);
            hi = DomainId(end - 1);
        }
        ranges
    }

    /// Greedy BestFit pass (leaders first): `(domains used, last leader domain, last
    /// worker domain)`, or `None` when the request does not fit.
    fn evaluate_greedy(
        &self,
        st: &[DomainState],
        domains: &[DomainId],
        slice_count: i64,
        leader_count: i64,
    ) -> Option<(i64, Option<DomainId>, Option<DomainId>)> {
        let (mut used, mut remaining, mut leaders) = (0i64, slice_count, leader_count);
        let (mut last_with_leader, mut last) = (None, None);
        let mut rest: Vec<DomainId> = domains.to_vec();
        if leader_count > 0 {
            self.sort_with_leader(st, &mut rest, false);
            let mut idx = 0;
            while leaders > 0 && idx < rest.len() && st[rest[idx].idx()].leader > 0 {
                let s = &st[rest[idx].idx()];
                used += 1;
                last_with_leader = Some(rest[idx]);
                leaders -= s.leader;
                remaining -= s.slices_with_leader;
                idx += 1;
            }
            rest.drain(..idx);
        }
        self.sort(st, &mut rest, false);
        if leaders > 0 {
            return None;
        }
        for &d in &rest {
            let s = &st[d.idx()];
            if remaining <= 0 || s.slices <= 0 {
                break;
            }
            used += 1;
            last = Some(d);
            remaining -= s.slices;
        }
        (remaining <= 0).then_some((used, last_with_leader, last))
    }

    /// Clears a whole subtree (keeping affinity scores).
    fn clear_subtree(&self, st: &mut [DomainState], d: DomainId) {
        let s = &mut st[d.idx()];
        *s = DomainState { affinity: s.affinity, ..DomainState::default() };
        for c in self.tree.children(d) {
            self.clear_subtree(st, c);
        }
    }

    /// Removes the leader capacity of a whole subtree.
    fn clear_leader_subtree(&self, st: &mut [DomainState], d: DomainId) {
        let s = &mut st[d.idx()];
        s.pods_with_leader = 0;
        s.slices_with_leader = 0;
        s.leader = 0;
        for c in self.tree.children(d) {
            self.clear_leader_subtree(st, c);
        }
    }

    fn prune_node(&self, st: &mut [DomainState], d: DomainId, threshold: i64, leader_required: bool) {
        let s = st[d.idx()];
        if s.slices < threshold {
            self.clear_subtree(st, d);
        } else if leader_required && s.leader > 0 && s.slices_with_leader < threshold {
            // Still usable for workers, but not as the leader's domain at this threshold.
            self.clear_leader_subtree(st, d);
        }
    }

    /// Treats every domain (of `domains` and their children) below the threshold as empty
    /// and recounts.
    fn prune(&self, st: &mut [DomainState], domains: &[DomainId], threshold: i64) {
        let leader_required = self.p.leader_count > 0;
        let level = self.p.requested_level;
        for &d in domains {
            for c in self.tree.children(d) {
                self.prune_node(st, c, threshold, leader_required);
            }
        }
        for &d in domains {
            self.refill(st, d, level, false);
            self.prune_node(st, d, threshold, leader_required);
        }
    }

    /// Steps 1-4: the best candidate and its threshold, or `None` when no candidate has a
    /// positive threshold. `st` is left as it was.
    pub(crate) fn find_best_balanced(&self, st: &mut [DomainState]) -> Option<BalancedChoice> {
        let p = &self.p;
        let tree = self.tree;
        let slice_count = p.count / p.slice_size;
        let level = p.requested_level;
        let groups: Vec<Vec<DomainId>> = if level == 0 {
            vec![tree.level_domains(0).collect()]
        } else {
            tree.level_domains(level - 1).map(|h| tree.children(h).collect()).collect()
        };
        let mut best: Option<BalancedChoice> = None;
        let (mut best_threshold, mut best_count) = (0i64, 0i64);
        for group in groups {
            if group.is_empty() {
                continue;
            }
            let original = SavedStates::save(st, self.subtree_ranges(&group));
            let lower: Vec<DomainId> = if level < p.slice_level {
                group.iter().flat_map(|&d| tree.children(d)).collect()
            } else {
                group.clone()
            };
            let Some((used, last_with_leader, last)) =
                self.evaluate_greedy(st, &lower, slice_count, p.leader_count)
            else {
                continue;
            };
            if used == 0 {
                continue;
            }
            let mut threshold = slice_count / used;
            if let Some(d) = last_with_leader {
                threshold = threshold.min(st[d.idx()].slices_with_leader);
            }
            if let Some(d) = last {
                threshold = threshold.min(st[d.idx()].slices);
            }
            let mut threshold_with_leader = threshold;
            if p.leader_count > 0 {
                if let Some(d) = last {
                    threshold_with_leader = threshold.min(st[d.idx()].slices_with_leader);
                }
            }
            if threshold < best_threshold {
                continue;
            }
            self.prune(st, &group, threshold);
            let mut after = self.evaluate_greedy(st, &group, slice_count, p.leader_count);
            if after.is_none() && threshold_with_leader < threshold {
                // Retry with a lower threshold that keeps room for the leader.
                if threshold_with_leader <= 0 || threshold_with_leader < best_threshold {
                    original.restore(st);
                    continue;
                }
                threshold = threshold_with_leader;
                original.restore(st);
                self.prune(st, &group, threshold);
                after = self.evaluate_greedy(st, &group, slice_count, p.leader_count);
            }
            if let Some((count, _, _)) = after {
                if threshold > best_threshold || (threshold == best_threshold && count < best_count) {
                    best_threshold = threshold;
                    best_count = count;
                    best = Some(BalancedChoice {
                        pruned: original.snapshot_same(st),
                        domains: group,
                        threshold,
                    });
                }
            }
            original.restore(st);
        }
        best.filter(|b| b.threshold > 0)
    }

    /// Steps 5-6 on the pruned states of the chosen candidate: the domains (at the returned
    /// level) with their balanced counts set, or why balancing gave up.
    pub(crate) fn apply_balanced(
        &self,
        st: &mut [DomainState],
        choice: &BalancedChoice,
    ) -> Result<(Vec<DomainId>, usize), &'static str> {
        let p = &self.p;
        let slice_count = p.count / p.slice_size;
        let (domains, fit_level) = if p.requested_level < p.slice_level {
            let chosen = self
                .select_optimal_set(st, &choice.domains, slice_count, true)
                .ok_or("TAS Balanced Placement: Cannot find optimal domain set to fit the request")?;
            (chosen.iter().flat_map(|&d| self.tree.children(d)).collect(), p.requested_level + 1)
        } else {
            (choice.domains.clone(), p.requested_level)
        };
        let placed = self.place_balanced(st, &domains, slice_count, choice.threshold)?;
        Ok((placed, fit_level))
    }

    /// The subset of `domains` holding the request with the fewest domains (as many as the
    /// greedy pass needs), then the smallest total room; candidates are tried in name order,
    /// or by capacity and entropy (`by_entropy`).
    fn select_optimal_set(
        &self,
        st: &[DomainState],
        domains: &[DomainId],
        slice_count: i64,
        by_entropy: bool,
    ) -> Option<Vec<DomainId>> {
        let p = &self.p;
        let (n, _, _) = self.evaluate_greedy(st, domains, slice_count, p.leader_count)?;
        let n = usize::try_from(n).ok()?;
        let mut ordered = domains.to_vec();
        if by_entropy {
            let entropy: BTreeMap<DomainId, f64> =
                ordered.iter().map(|&d| (d, self.children_entropy(st, d))).collect();
            ordered.sort_by(|&a, &b| {
                let (x, y) = (&st[a.idx()], &st[b.idx()]);
                y.leader
                    .cmp(&x.leader)
                    .then(y.slices_with_leader.cmp(&x.slices_with_leader))
                    .then(entropy[&b].partial_cmp(&entropy[&a]).unwrap_or(Ordering::Equal))
                    .then(a.cmp(&b))
            });
        } else {
            ordered.sort();
        }
        // layers[i]: (leaders left, pods left) -> first set of i domains reaching it.
        let mut layers: Vec<BTreeMap<(i64, i64), Vec<DomainId>>> = vec![BTreeMap::new(); n + 1];
        layers[0].insert((p.leader_count, slice_count * p.slice_size), Vec::new());
        for &d in &ordered {
            let s = st[d.idx()];
            for i in (1..=n).rev() {
                let (before, after) = layers.split_at_mut(i);
                for (&(leaders, pods), placement) in &before[i - 1] {
                    if leaders <= 0 && pods <= 0 {
                        continue;
                    }
                    let extended = || {
                        let mut v = placement.clone();
                        v.push(d);
                        v
                    };
                    if leaders > 0 && s.leader > 0 {
                        after[0]
                            .entry((leaders - s.leader, pods - s.pods_with_leader))
                            .or_insert_with(extended);
                    }
                    if s.slices > 0 {
                        after[0].entry((leaders, pods - s.pods)).or_insert_with(extended);
                    }
                }
            }
        }
        layers[n].range((0, i64::MIN)..=(0, 0)).next_back().map(|(_, v)| v.clone())
    }

    /// Shannon entropy of the pod capacity of `d`'s children (higher = more even).
    fn children_entropy(&self, st: &[DomainState], d: DomainId) -> f64 {
        let total: i64 = self.tree.children(d).map(|c| st[c.idx()].pods).fold(0, i64::saturating_add);
        if total <= 0 {
            return 0.0;
        }
        let total = total as f64;
        self.tree
            .children(d)
            .map(|c| st[c.idx()].pods)
            .filter(|&x| x > 0)
            .map(|x| {
                let q = x as f64 / total;
                -q * q.log2()
            })
            .sum()
    }

    /// Step 6: T slices on each domain of the optimal subset, the rest in BestFit order,
    /// the leader on the first.
    fn place_balanced(
        &self,
        st: &mut [DomainState],
        domains: &[DomainId],
        slice_count: i64,
        threshold: i64,
    ) -> Result<Vec<DomainId>, &'static str> {
        let p = &self.p;
        let mut chosen = self
            .select_optimal_set(st, domains, slice_count, false)
            .ok_or("TAS Balanced Placement: Cannot find optimal domain set to fit the request")?;
        let n = chosen.len() as i64;
        if slice_count < n * threshold {
            return Err("TAS Balanced Placement: Not enough slices to meet the threshold");
        }
        self.sort_with_leader(st, &mut chosen, false);
        let mut extra = slice_count - n * threshold;
        let mut leaders = p.leader_count;
        for &d in &chosen {
            let s = &mut st[d.idx()];
            let take = if leaders > 0 {
                s.leader = 1;
                leaders -= 1;
                (s.slices_with_leader - threshold).min(extra)
            } else if extra > 0 {
                s.leader = 0;
                (s.slices - threshold).min(extra)
            } else {
                s.leader = 0;
                0
            };
            s.slices = threshold + take;
            s.pods = s.slices * p.slice_size;
            s.slices_with_leader = s.slices;
            s.pods_with_leader = s.pods - s.leader;
            extra -= take;
        }
        if extra > 0 || leaders > 0 {
            return Err("TAS Balanced Placement: Not all slices or leaders could be placed");
        }
        Ok(chosen)
    }
}
