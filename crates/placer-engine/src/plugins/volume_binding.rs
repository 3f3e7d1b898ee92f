//! `VolumeBinding`: a pod's PersistentVolumeClaims, as kube-scheduler's plugin of that name
//! (its volume binder: `pkg/scheduler/framework/plugins/volumebinding`).
//!
//! * PreFilter resolves the claims (upstream's messages for a missing, lost or deleting
//!   claim, or an ephemeral claim not the pod's) and keeps the pod Pending while a claim
//!   with `Immediate` binding is unbound (`pod has unbound immediate
//!   PersistentVolumeClaims`); all `UnschedulableAndUnresolvable`.
//! * Filter: bound claims' PVs must exist and their node affinity match; unbound
//!   `WaitForFirstConsumer` claims must each get a matching Available PV or be
//!   provisionable on the node (see [`crate::framework::VolumeState`]); a provisioning by
//!   a CSI driver with `storageCapacity: true` needs a CSIStorageCapacity of the class
//!   reaching the node with room (`node(s) did not have enough free storage`). Every
//!   reason is `UnschedulableAndUnresolvable`, as upstream's Filter returns them.
//! * Reserve chooses the node's bindings again with the group's earlier members assumed
//!   (the snapshot holds assumed PVs until the rollback); PreBind hands the writes (PV
//!   `claimRef`, claim `volume.kubernetes.io/selected-node`) to the commit step, which
//!   emits them before the binding. The PV controller (the embedded one in the simulator)
//!   completes the binding or provisions the volume.
//!
//! Not modelled: the capacity score (`StorageCapacityScoring`, alpha and off in v1.36, so
//! `VolumeBindingArgs.shape` is rejected as upstream does with the gate off), in-tree to
//! CSI translation of bound PVs' node affinity, and PreBind's wait for the PV controller
//! (`VolumeBindingArgs.bindTimeoutSeconds`, read and shown, bounds nothing here: the
//! binding follows the writes at once).

use crate::framework::helper::labels_or_empty;
use crate::framework::{
    ClaimsError, CycleData, CycleState, Dependence, FilterPlugin, FilterResult, NodeId, NodeState, PodClaims,
    PodInfo, PodVolumes, PreBindPlugin, PreResult, Rejection, ReservePlugin, Snapshot, Status, VolumeState,
};

/// Plugin name.
pub const NAME: &str = "VolumeBinding";
/// PreFilter reason: an `Immediate` claim is not bound yet.
pub const ERR_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// What PreFilter found, for Filter and Reserve.
struct PreState(PodClaims);

/// What Reserve decided on the node, for PreBind.
struct Reserved(PodVolumes, String);

/// The `VolumeBinding` plugin (filter, Reserve and PreBind).
#[derive(Debug, Clone, Copy, Default)]
pub struct VolumeBinding;

fn has_claims(pod: &PodInfo) -> bool {
    pod.view.volumes.iter().any(|v| v.claim().is_some())
}

fn find(snap: &Snapshot, claims: &PodClaims, node: &NodeState) -> Result<PodVolumes, Rejection> {
    let labels = labels_or_empty(node.info.node.metadata.labels.as_ref());
    match snap.volumes().find_pod_volumes(claims, node.name(), labels) {
        Err(e) => Err(Rejection::error(NAME, e)),
        Ok(Ok(volumes)) => Ok(volumes),
        Ok(Err(reasons)) => {
            let mut r = Rejection::unresolvable(NAME, reasons[0]);
            r.reasons.extend(reasons[1..].iter().map(|s| (*s).into()));
            Err(r)
        }
    }
}

impl FilterPlugin for VolumeBinding {
    fn name(&self) -> &'static str {
        NAME
    }

    fn dependence(&self, pod: &PodInfo) -> Dependence {
        if has_claims(pod) {
            Dependence::ExtraCapacity
        } else {
            Dependence::NodeLocal
        }
    }

    fn pre_filter<'a>(&self, state: &mut CycleState<'a>, snap: &'a Snapshot) -> Result<PreResult, Rejection> {
        if !has_claims(state.pod) {
            return Ok(PreResult::Skip);
        }
        let claims = match snap.volumes().pod_claims(state.pod) {
            Ok(Some(c)) => c,
            Ok(None) => return Ok(PreResult::Skip),
            Err(ClaimsError::Unresolvable(m)) => return Err(Rejection::unresolvable(NAME, m)),
            Err(ClaimsError::Error(m)) => return Err(Rejection::error(NAME, m)),
        };
        if !claims.immediate.is_empty() {
            return Err(Rejection::unresolvable(NAME, ERR_UNBOUND_IMMEDIATE));
        }
        state.data.write(NAME, PreState(claims));
        Ok(PreResult::Run)
    }

    fn filter(&self, state: &CycleState<'_>, snap: &Snapshot, node: &NodeState) -> FilterResult {
        let Some(PreState(claims)) = state.data.read::<PreState>(NAME) else { return Ok(()) };
        find(snap, claims, node).map(|_| ())
    }
}

impl ReservePlugin for VolumeBinding {
    fn name(&self) -> &'static str {
        NAME
    }

    fn applies(&self, pod: &PodInfo) -> bool {
        has_claims(pod)
    }

    fn reserve(
        &self,
        data: &mut CycleData,
        snap: &Snapshot,
        _pod: &PodInfo,
        node: NodeId,
    ) -> Result<(), Status> {
        let Some(PreState(claims)) = data.read::<PreState>(NAME) else { return Ok(()) };
        let state = snap.node(node);
        let volumes = find(snap, claims, state).map_err(|r| r.to_status())?;
        let name = state.name().to_string();
        data.write(NAME, Reserved(volumes, name));
        Ok(())
    }

    fn unreserve(&self, data: &mut CycleData, _snap: &Snapshot, _pod: &PodInfo, _node: NodeId) {
        if let Some(r) = data.read_mut::<Reserved>(NAME) {
            r.0 = PodVolumes::default();
        }
    }
}

impl PreBindPlugin for VolumeBinding {
    fn name(&self) -> &'static str {
        NAME
    }

    fn applies(&self, pod: &PodInfo) -> bool {
        has_claims(pod)
    }

    fn pre_bind(
        &self,
        data: &mut CycleData,
        _snap: &Snapshot,
        _pod: &PodInfo,
        _node: NodeId,
    ) -> Result<(), Status> {
        let Some(Reserved(volumes, node)) = data.read_mut::<Reserved>(NAME) else { return Ok(()) };
        let volumes = std::mem::take(volumes);
        let node = node.clone();
        for w in VolumeState::writes(&volumes, &node) {
            data.add_volume_write(w);
        }
        Ok(())
    }
}
