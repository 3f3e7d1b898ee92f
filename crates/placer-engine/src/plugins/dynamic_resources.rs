//! `DynamicResources`: a pod's ResourceClaims (`resource.k8s.io/v1`) with structured
//! parameters, as kube-scheduler's plugin of that name.
//!
//! * PreFilter resolves the pod's claims (upstream's messages when a claim is missing, not
//!   generated yet, being deleted or not the pod's), checks that every claim to allocate
//!   names DeviceClasses that exist, and notes the snapshot generation: Filter and Reserve
//!   read the devices in use from the snapshot's incremental index, which is the set as
//!   of PreFilter while the generation is unchanged (the cycle state borrows the
//!   snapshot); otherwise they recompute it.
//! * Filter: an allocated claim must be available on the node (its allocation's node
//!   selector); the unallocated ones must be allocatable together on the node
//!   (`cannot allocate all claims`). Both are `UnschedulableAndUnresolvable`; a selector
//!   that does not evaluate is an error. Where a pool reaching the node is invalid, the
//!   reason is upstream's `invalid resource pools were encountered` (also
//!   `UnschedulableAndUnresolvable`: upstream's `statusUnschedulable` always is).
//! * Reserve allocates again on the decided node with the group's earlier members
//!   assumed; PreBind hands the claim status writes (allocation with its
//!   `allocationTimestamp`, `reservedFor`) to the commit step, which emits them before the
//!   binding. When allocated devices have binding conditions, the engine holds the binding
//!   until the driver reports them met (`engine/binding_wait.rs`).
//!
//! The allocator and the claim state live in the snapshot (`Snapshot::dra`), so a pod
//! assumed during a placement search holds its devices until the rollback.

use crate::framework::helper::node_selector_terms_match;
use crate::framework::{
    ClaimEntry, ClaimWrite, CycleData, CycleState, Dependence, DeviceId, FilterPlugin, FilterResult, NodeId,
    NodeState, PodClaimState, PodInfo, PreBindPlugin, PreResult, Rejection, ReservePlugin, Snapshot, Status,
};
use rustc_hash::FxHashSet;
use std::borrow::Cow;

/// Plugin name.
pub const NAME: &str = "DynamicResources";
/// Filter reason: the unallocated claims do not fit the node's free devices.
pub const ERR_CANNOT_ALLOCATE: &str = "cannot allocate all claims";
/// Filter reason (UnschedulableAndUnresolvable, upstream's allocator error wrapping
/// `ErrFailedAllocationOnNode`): no solution on the node, and a pool reaching it is invalid
/// (a device name defined twice, inconsistent counter sets), so nothing was allocated from
/// it.
pub const ERR_INVALID_POOLS: &str = "invalid resource pools were encountered";
/// Filter reason: an allocated claim's devices are not reachable from the node.
pub const ERR_NOT_AVAILABLE: &str = "resourceclaim not available on the node";

/// The DynamicResources PostFilter's answer when it deallocates nothing: upstream joins it
/// before the preemption message ("... 2 cannot allocate all claims. still not
/// schedulable, preemption: ...", test/integration/dra).
pub const MSG_STILL_NOT_SCHEDULABLE: &str = "still not schedulable";

/// Upstream's DynamicResources PostFilter for `pod`, which fits no node: when PreFilter
/// found the pod's claims (they exist and their requests are valid), it deallocates an
/// allocated claim that some node rejected and that no other pod holds, or else answers
/// [`MSG_STILL_NOT_SCHEDULABLE`]. Placer models the second answer only: `None` for a pod
/// without claims, one PreFilter rejects (upstream's "no new claims to deallocate" is not
/// modelled either), or one with an allocated claim no other pod holds (upstream might
/// deallocate it).
pub fn post_filter_message(snap: &Snapshot, pod: &PodInfo) -> Option<&'static str> {
    if pod.view.resource_claims.is_empty() {
        return None;
    }
    let dra = snap.dra();
    let claims = dra.pod_claims(pod).ok()?;
    if claims.is_empty() {
        return None;
    }
    for c in &claims {
        if c.allocation.is_none() {
            dra.check_requests(&c.entry).ok()?;
            continue;
        }
        let reserved = c.entry.claim.status.as_ref().and_then(|s| s.reserved_for.as_deref()).unwrap_or(&[]);
        if reserved.iter().all(|r| *r.uid == *pod.uid) {
            return None;
        }
    }
    Some(MSG_STILL_NOT_SCHEDULABLE)
}

/// What PreFilter found, for Filter and Reserve.
struct PreState {
    claims: Vec<PodClaimState>,
    /// The snapshot's generation at PreFilter.
    generation: u64,
}

impl PreState {
    fn to_allocate(&self) -> Vec<&ClaimEntry> {
        self.claims.iter().filter(|c| c.allocation.is_none()).map(|c| &*c.entry).collect()
    }

    /// The devices in use as of PreFilter: the snapshot's index while the snapshot is
    /// unchanged (always, as the cycle state borrows it), else computed from the claims.
    fn in_use<'s>(&self, snap: &'s Snapshot) -> Cow<'s, FxHashSet<DeviceId>> {
        if snap.generation() == self.generation {
            Cow::Borrowed(snap.dra().in_use_set())
        } else {
            Cow::Owned(snap.dra().in_use_recomputed())
        }
    }
}

/// What Reserve decided, for PreBind.
struct Reserved(Vec<ClaimWrite>);

/// The `DynamicResources` plugin (filter, Reserve and PreBind).
#[derive(Debug, Clone, Copy, Default)]
pub struct DynamicResources;

fn available(c: &PodClaimState, node: &NodeState) -> bool {
    let Some(sel) = c.allocation.as_ref().and_then(|a| a.node_selector.as_ref()) else { return true };
    let empty = Default::default();
    let labels = node.info.node.metadata.labels.as_ref().unwrap_or(&empty);
    node_selector_terms_match(&sel.node_selector_terms, node.name(), labels)
}

impl FilterPlugin for DynamicResources {
    fn name(&self) -> &'static str {
        NAME
    }

    fn dependence(&self, pod: &PodInfo) -> Dependence {
        if pod.view.resource_claims.is_empty() {
            Dependence::NodeLocal
        } else {
            // Counted by copy counting only where the claims' devices allow it exactly
            // (`DraState::copy_claims`, `DraState::node_copies`).
            Dependence::Devices
        }
    }

    fn pre_filter<'a>(&self, state: &mut CycleState<'a>, snap: &'a Snapshot) -> Result<PreResult, Rejection> {
        if state.pod.view.resource_claims.is_empty() {
            return Ok(PreResult::Skip);
        }
        let dra = snap.dra();
        let claims = dra.pod_claims(state.pod).map_err(|m| Rejection::unresolvable(NAME, m))?;
        if claims.is_empty() {
            return Ok(PreResult::Skip);
        }
        for c in claims.iter().filter(|c| c.allocation.is_none()) {
            dra.check_requests(&c.entry).map_err(|m| Rejection::unresolvable(NAME, m))?;
        }
        state.data.write(NAME, PreState { claims, generation: snap.generation() });
        Ok(PreResult::Run)
    }

    fn filter(&self, state: &CycleState<'_>, snap: &Snapshot, node: &NodeState) -> FilterResult {
        let Some(pre) = state.data.read::<PreState>(NAME) else { return Ok(()) };
        if !pre.claims.iter().all(|c| available(c, node)) {
            return Err(Rejection::unresolvable(NAME, ERR_NOT_AVAILABLE));
        }
        let todo = pre.to_allocate();
        if todo.is_empty() {
            return Ok(());
        }
        match snap.dra().allocate(&todo, &node.info, &pre.in_use(snap)) {
            Ok(Some(_)) => Ok(()),
            // Upstream surfaces invalid pools only where the node has no solution (other
            // nodes may still do), through `statusUnschedulable`, which is
            // UnschedulableAndUnresolvable: preemption does not try the node.
            Ok(None) if snap.dra().invalid_pools_reach(&node.info) => {
                Err(Rejection::unresolvable(NAME, ERR_INVALID_POOLS))
            }
            Ok(None) => Err(Rejection::unresolvable(NAME, ERR_CANNOT_ALLOCATE)),
            Err(m) => Err(Rejection::error(NAME, m)),
        }
    }
}

impl ReservePlugin for DynamicResources {
    fn name(&self) -> &'static str {
        NAME
    }

    fn applies(&self, pod: &PodInfo) -> bool {
        !pod.view.resource_claims.is_empty()
    }

    fn reserve(
        &self,
        data: &mut CycleData,
        snap: &Snapshot,
        pod: &PodInfo,
        node: NodeId,
    ) -> Result<(), Status> {
        let Some(pre) = data.read::<PreState>(NAME) else { return Ok(()) };
        let dra = snap.dra();
        let todo = pre.to_allocate();
        let mut allocations = if todo.is_empty() {
            Vec::new()
        } else {
            match dra.allocate(&todo, &snap.node(node).info, &pre.in_use(snap)) {
                Ok(Some(a)) => a,
                Ok(None) => return Err(Status::unresolvable(NAME, ERR_CANNOT_ALLOCATE)),
                Err(m) => return Err(Status::error(NAME, m)),
            }
        }
        .into_iter()
        .map(|mut a| {
            // With DRADeviceBindingConditions and DRAResourceClaimDeviceStatus (both on
            // in v1.36) the allocation records when it was made: the binding timeout of
            // devices with binding conditions runs from there.
            if a.allocation_timestamp.is_none() {
                a.allocation_timestamp = snap.now_unix_ms().and_then(|ms| {
                    placer_api::k8s::jiff::Timestamp::from_millisecond(ms)
                        .ok()
                        .map(placer_api::k8s::apimachinery::pkg::apis::meta::v1::Time)
                });
            }
            a
        });
        let writes = pre
            .claims
            .iter()
            .map(|c| ClaimWrite {
                claim: c.entry.key.clone(),
                allocation: if c.allocation.is_none() { allocations.next() } else { None },
                consumer: dra.consumer(pod, &c.pod_claim),
            })
            .collect();
        data.write(NAME, Reserved(writes));
        Ok(())
    }

    fn unreserve(&self, data: &mut CycleData, _snap: &Snapshot, _pod: &PodInfo, _node: NodeId) {
        if let Some(r) = data.read_mut::<Reserved>(NAME) {
            r.0.clear();
        }
    }
}

impl PreBindPlugin for DynamicResources {
    fn name(&self) -> &'static str {
        NAME
    }

    fn applies(&self, pod: &PodInfo) -> bool {
        !pod.view.resource_claims.is_empty()
    }

    fn pre_bind(
        &self,
        data: &mut CycleData,
        _snap: &Snapshot,
        _pod: &PodInfo,
        _node: NodeId,
    ) -> Result<(), Status> {
        let writes = data.read_mut::<Reserved>(NAME).map(|r| std::mem::take(&mut r.0)).unwrap_or_default();
        for w in writes {
            data.add_claim_write(w);
        }
        Ok(())
    }
}
