//! The allocator's search: devices picked for each request in order, backtracking over
//! the candidates and the alternatives of `firstAvailable`, within a budget.

use super::*;

impl Search<'_, '_> {
    /// Satisfies request `ri` (trying its alternatives in order), then the next ones;
    /// true when every request is satisfied.
    pub(super) fn run(&mut self, ri: usize) -> bool {
        let Some(req) = self.reqs.get(ri) else { return true };
        for a in 0..req.alts.len() {
            self.alt[ri] = a;
            if self.pick(ri, a, 0, 0) {
                return true;
            }
        }
        false
    }

    /// Picks devices for alternative `a` of request `ri` from `from` on (`got` so far).
    pub(super) fn pick(&mut self, ri: usize, a: usize, from: usize, got: usize) -> bool {
        let reqs = self.reqs;
        let alt = &reqs[ri].alts[a];
        if alt.all && alt.matching.is_empty() {
            return false;
        }
        if got == alt.count {
            return self.run(ri + 1);
        }
        for pos in from..alt.matching.len() {
            if self.budget == 0 {
                return false;
            }
            self.budget -= 1;
            let k = alt.matching[pos];
            let usable = self.usable(ri, a, k) && self.add_constraints(ri, a, k);
            if !usable {
                if alt.all {
                    // Every device of an `All` request is needed.
                    return false;
                }
                continue;
            }
            self.take(ri, a, k);
            self.chosen.push((ri, k));
            if self.pick(ri, a, pos + 1, got + 1) {
                return true;
            }
            self.chosen.pop();
            self.untake(ri, a, k);
            self.remove_constraints(ri, a, k);
            if alt.all {
                return false;
            }
        }
        false
    }

    /// In use (by an allocated claim or earlier in this search), taints, capacity left on
    /// a shared device, counters left in the pool.
    pub(super) fn usable(&self, ri: usize, a: usize, k: usize) -> bool {
        let (req, alt, c) = (&self.reqs[ri], &self.reqs[ri].alts[a], &self.cands[k]);
        let taken = &self.taken[k];
        let free = if c.multi {
            !self.in_use.contains(&c.id)
        } else if alt.admin {
            !taken.contains(&req.claim)
        } else {
            taken.is_empty() && !self.in_use.contains(&c.id)
        };
        if !free || (alt.all && !taints_tolerated(c.device, alt.tolerations)) {
            return false;
        }
        if let Some(wanted) = alt.consumed.get(&k) {
            let held = self.shared.get(&c.id);
            let fits = wanted.iter().all(|w| {
                let before = held.and_then(|h| h.get(&w.name)).copied().unwrap_or(0)
                    + self.allocating[k].get(&w.name).copied().unwrap_or(0);
                before.saturating_add(w.milli) <= w.value
            });
            if !fits {
                return false;
            }
        }
        if self.counts_counters(k) {
            let (left, used) = (&self.pools[c.pool].available, &self.counters_used[c.pool]);
            let fits = c.consumes.iter().all(|(key, amount)| {
                left.get(key)
                    .is_some_and(|l| used.get(key).copied().unwrap_or(0).saturating_add(*amount) <= *l)
            });
            if !fits {
                return false;
            }
        }
        true
    }

    /// Whether picking candidate `k` now consumes its counters: a shared device consumes
    /// them once, when nothing holds it yet (upstream's `skipCounterCheck`).
    pub(super) fn counts_counters(&self, k: usize) -> bool {
        let c = &self.cands[k];
        !c.consumes.is_empty()
            && c.pool != usize::MAX
            && !(c.multi && (self.shared.contains_key(&c.id) || self.held[k] > 0))
    }

    /// Marks candidate `k` picked for alternative `a` of request `ri`.
    pub(super) fn take(&mut self, ri: usize, a: usize, k: usize) {
        let reqs = self.reqs;
        let (c, alt) = (&self.cands[k], &reqs[ri].alts[a]);
        if self.counts_counters(k) {
            for (key, amount) in &c.consumes {
                *self.counters_used[c.pool].entry(key.clone()).or_default() += amount;
            }
        }
        self.held[k] += 1;
        if !c.multi {
            self.taken[k].push(reqs[ri].claim);
        }
        for w in alt.consumed.get(&k).into_iter().flatten() {
            *self.allocating[k].entry(w.name.clone()).or_default() += w.milli;
        }
    }

    /// Undoes [`Search::take`].
    pub(super) fn untake(&mut self, ri: usize, a: usize, k: usize) {
        let reqs = self.reqs;
        let (c, alt) = (&self.cands[k], &reqs[ri].alts[a]);
        for w in alt.consumed.get(&k).into_iter().flatten() {
            *self.allocating[k].entry(w.name.clone()).or_default() -= w.milli;
        }
        if !c.multi {
            self.taken[k].pop();
        }
        self.held[k] -= 1;
        if self.counts_counters(k) {
            for (key, amount) in &c.consumes {
                *self.counters_used[c.pool].entry(key.clone()).or_default() -= amount;
            }
        }
    }

    pub(super) fn applies(c: &Constraint<'_>, req: &Req<'_>, alt: &Alt<'_>) -> bool {
        c.claim == req.claim
            && c.requests.is_none_or(|r| {
                r.iter().any(|n| {
                    n == req.name
                        || alt.sub.is_some_and(|s| {
                            n.strip_prefix(req.name).and_then(|t| t.strip_prefix('/')) == Some(s)
                        })
                })
            })
    }

    pub(super) fn add_constraints(&mut self, ri: usize, a: usize, k: usize) -> bool {
        let (reqs, cands) = (self.reqs, self.cands);
        let (req, cand) = (&reqs[ri], &cands[k]);
        let alt = &req.alts[a];
        let mut values = Vec::new();
        for (i, c) in self.cons.iter().enumerate() {
            if !Self::applies(c, req, alt) {
                continue;
            }
            let Some(v) = lookup_attribute(cand.device, &cand.id.0, c.attribute) else { return false };
            let ok = if c.distinct {
                !c.values.contains(&v)
            } else {
                c.values.first().is_none_or(|have| *have == v)
            };
            if !ok {
                return false;
            }
            values.push((i, v));
        }
        for (i, v) in values {
            self.cons[i].values.push(v);
        }
        true
    }

    pub(super) fn remove_constraints(&mut self, ri: usize, a: usize, k: usize) {
        let (reqs, cands) = (self.reqs, self.cands);
        let (req, cand) = (&reqs[ri], &cands[k]);
        let alt = &req.alts[a];
        for c in self.cons.iter_mut() {
            if Self::applies(c, req, alt) {
                if let Some(v) = lookup_attribute(cand.device, &cand.id.0, c.attribute) {
                    if let Some(pos) = c.values.iter().rposition(|have| *have == v) {
                        c.values.remove(pos);
                    }
                }
            }
        }
    }
}
