//! Copy counting with devices: how many identical pods, each with claims of its own, a
//! node's free devices serve, for the placement search's shortcuts (a placement evaluated
//! by counting copies per node, identical members placed in one pass). It declares what it
//! is valid for and answers `None` otherwise; the caller then simulates the members one by
//! one (the plain path, which property tests compare it with):
//!
//! * the group ([`DraState::copy_claims`]): every member's claims come from templates (the
//!   claim generated for the pod, as `status.resourceClaimStatuses` records it) and are
//!   controlled by the pod itself (not a PodGroup's claim, never another pod's), none is
//!   allocated (stored or pending) or reserved, PreFilter's request check passes, and every
//!   member has the same entries (name, template) and claims with the same `spec` as the
//!   first. Then the DynamicResources filter of member k on a node is the allocator run on
//!   the first member's claims with what the earlier copies on that node took marked in
//!   use: the allocator reads a claim's spec, never its name or uid (except in share IDs,
//!   which need a device allowing multiple allocations: ruled out below).
//! * the node ([`DraState::node_copies`]): every device reaching the node is node-local
//!   (its slice's `nodeName` is the node, without per-device node selection), allows one
//!   allocation only and consumes no counters. Then copies on other nodes never take a
//!   device this node could use and copies share nothing but whole devices, so the copies
//!   a node serves depend on that node alone. An allocator error (a selector that does not
//!   evaluate) is not counted either.
//!
//! Matching and distinct attributes constrain the devices of one claim (a claim is one
//! pod's here), so they are part of each copy's allocation, which is the allocator's own.

use std::sync::Arc;

use rustc_hash::FxHashSet;

use super::allocator::{alternatives, device_matches, taints_tolerated, RequestView};
use super::{ClaimEntry, ClassEntry, DeviceId, DraState};
use crate::model::{NodeStatic, PodInfo};

/// The claims of a group's first member when copy counting may count them (see the
/// module docs); made only by [`DraState::copy_claims`].
#[derive(Debug, Clone)]
pub struct CopyClaims(Vec<Arc<ClaimEntry>>);

impl DraState {
    /// The claims every pod of `pods` allocates alike, one set of its own per pod (see
    /// the module docs); `None` when copies of them cannot be counted (or there are none).
    pub fn copy_claims(&self, pods: &[Arc<PodInfo>]) -> Option<CopyClaims> {
        let first = pods.first()?;
        let claims = self.own_claims(first)?;
        for pod in &pods[1..] {
            let same_entries = pod.view.resource_claims.len() == first.view.resource_claims.len()
                && pod.view.resource_claims.iter().zip(first.view.resource_claims.iter()).all(|(a, b)| {
                    a.name == b.name && a.resource_claim_template_name == b.resource_claim_template_name
                });
            if !same_entries {
                return None;
            }
            let other = self.own_claims(pod)?;
            if other.len() != claims.len()
                || other.iter().zip(&claims).any(|(a, b)| a.key == b.key || a.claim.spec != b.claim.spec)
            {
                return None;
            }
        }
        Some(CopyClaims(claims))
    }

    /// `pod`'s claims when each is generated from a template for the pod alone, not
    /// allocated, not reserved and valid to allocate.
    fn own_claims(&self, pod: &PodInfo) -> Option<Vec<Arc<ClaimEntry>>> {
        if pod.view.resource_claims.is_empty()
            || pod.view.resource_claims.iter().any(|c| {
                c.resource_claim_name.is_some()
                    || c.resource_claim_template_name.is_none()
                    || !matches!(c.generated, Some(Some(_)))
            })
        {
            return None;
        }
        let claims = self.pod_claims(pod).ok()?;
        if claims.len() != pod.view.resource_claims.len() {
            return None;
        }
        let mut out = Vec::with_capacity(claims.len());
        for c in claims {
            let claim = &c.entry.claim;
            let owned_by_pod = claim
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
                .is_some_and(|o| o.kind == "Pod" && *o.uid == *pod.uid && !pod.uid.is_empty());
            let reserved =
                claim.status.as_ref().and_then(|s| s.reserved_for.as_ref()).is_some_and(|r| !r.is_empty());
            if c.allocation.is_some()
                || self.pending.contains_key(&c.entry.key)
                || reserved
                || !owned_by_pod
                || self.check_requests(&c.entry).is_err()
            {
                return None;
            }
            out.push(c.entry);
        }
        Some(out)
    }

    /// How many copies of the pods of `claims` the free devices of `node` serve, at most
    /// `limit`: copy k fits iff the allocator finds devices for it with the devices of the
    /// k-1 before it in use, exactly as the DynamicResources filter decides for the k-th
    /// member with the earlier ones assumed on the node. `None` when that is not exact for
    /// this node (see the module docs).
    pub fn node_copies(
        &self,
        claims: &CopyClaims,
        node: &NodeStatic,
        in_use: &FxHashSet<DeviceId>,
        limit: u32,
    ) -> Option<u32> {
        let cands = self.candidates(node);
        let node_local_only = cands.iter().all(|c| {
            c.slice.spec.node_name.as_deref() == Some(&*node.name)
                && c.slice.spec.per_device_node_selection != Some(true)
                && !c.multi
                && c.consumes.is_empty()
        });
        if !node_local_only {
            return None;
        }
        if let Some((entry, class, count)) = self.one_exact_request(claims) {
            // One request for `count` devices: each copy takes the first `count` free
            // devices it matches, so the copies are the matching free devices / `count`.
            let (view, own) = (&entry.request_view()?, entry.selectors.first()?.first()?);
            let mut free = 0u32;
            for c in cands.iter().filter(|c| !in_use.contains(&c.id)) {
                let usable = device_matches(entry, view.class, class, own, c).ok()?
                    && taints_tolerated(c.device, view.tolerations)
                    && (self.disabled.consumable_capacity
                        || super::shared::consumed(c.device, None).is_some());
                free += u32::from(usable);
            }
            return Some((free / count).min(limit));
        }
        let refs: Vec<&ClaimEntry> = claims.0.iter().map(|c| &**c).collect();
        match self.count_copies(&refs, node, in_use, i64::from(limit)) {
            // An allocator error is the filter's error, not a count.
            (_, true) => None,
            (n, false) => u32::try_from(n).ok(),
        }
    }
}

impl DraState {
    /// The claim, its class and count when `claims` are one claim with one `exactly`
    /// request of `ExactCount` devices, without admin access, capacity requests or
    /// constraints (then the allocator takes the first `count` usable devices it matches).
    fn one_exact_request<'c>(&self, claims: &'c CopyClaims) -> Option<(&'c ClaimEntry, &ClassEntry, u32)> {
        let [entry] = claims.0.as_slice() else { return None };
        let view = entry.request_view()?;
        let devices = entry.claim.spec.devices.as_ref()?;
        let simple = matches!(view.mode, None | Some("ExactCount"))
            && !view.admin_access
            && view.capacity.is_none()
            && devices.constraints.as_ref().is_none_or(|c| c.is_empty());
        let count = u32::try_from(view.count.unwrap_or(1)).ok().filter(|c| *c > 0)?;
        let class = self.classes.get(view.class)?;
        simple.then_some((&**entry, &**class, count))
    }
}

impl ClaimEntry {
    /// The claim's only request when it has one, and it is `exactly`.
    fn request_view(&self) -> Option<RequestView<'_>> {
        match super::requests(&self.claim) {
            [one] if one.exactly.is_some() => alternatives(one).into_iter().next(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
