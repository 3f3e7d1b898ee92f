//! `VolumeRestrictions` (kube-scheduler's plugin of that name):
//!
//! * disk conflicts with the pods already on the node (`node(s) had no available disk`,
//!   Unschedulable): the same GCE PD unless both mount it read-only, the same AWS EBS
//!   volume, the same RBD image (a shared monitor, same pool and image) or iSCSI IQN unless
//!   both are read-only;
//! * `ReadWriteOncePod` claims: a claim of the pod with that access mode already used by
//!   another pod anywhere in the cluster rejects every node (Unschedulable, so preemption
//!   may free it). PreFilter needs every `persistentVolumeClaim` of the pod to exist.

use placer_api::k8s::api::core::v1::Volume;

use crate::framework::{
    volumes, CycleState, Dependence, FilterPlugin, FilterResult, NodeState, PodInfo, PodVolume, PreResult,
    Rejection, Snapshot,
};

/// Plugin name.
pub const NAME: &str = "VolumeRestrictions";
/// Filter reason: a disk conflict on the node.
pub const ERR_DISK_CONFLICT: &str = "node(s) had no available disk";
/// Filter reason: a ReadWriteOncePod claim already in use.
pub const ERR_RWOP_CONFLICT: &str =
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode";

/// The `VolumeRestrictions` filter.
#[derive(Debug, Clone, Copy, Default)]
pub struct VolumeRestrictions;

struct PreState {
    /// A ReadWriteOncePod claim of the pod is used by another pod.
    rwop_conflict: bool,
    disks: bool,
}

/// The pod's inline volumes of the kinds upstream checks for disk conflicts (GCE PD, AWS
/// EBS, iSCSI, RBD; other inline kinds are there for NodeVolumeLimits).
fn inline(pod: &PodInfo) -> impl Iterator<Item = &Volume> {
    pod.view.volumes.iter().filter_map(|v| match v {
        PodVolume::Inline(v)
            if v.gce_persistent_disk.is_some()
                || v.aws_elastic_block_store.is_some()
                || v.iscsi.is_some()
                || v.rbd.is_some() =>
        {
            Some(&**v)
        }
        _ => None,
    })
}

fn overlap(a: &[String], b: &[String]) -> bool {
    a.iter().any(|x| b.contains(x))
}

/// Upstream's `isVolumeConflict` of `v` against one volume of an existing pod.
fn conflict(v: &Volume, e: &Volume) -> bool {
    if let (Some(d), Some(ed)) = (&v.gce_persistent_disk, &e.gce_persistent_disk) {
        if d.pd_name == ed.pd_name && !(d.read_only.unwrap_or(false) && ed.read_only.unwrap_or(false)) {
            return true;
        }
    }
    if let (Some(d), Some(ed)) = (&v.aws_elastic_block_store, &e.aws_elastic_block_store) {
        if d.volume_id == ed.volume_id {
            return true;
        }
    }
    if let (Some(d), Some(ed)) = (&v.iscsi, &e.iscsi) {
        if d.iqn == ed.iqn && !(d.read_only.unwrap_or(false) && ed.read_only.unwrap_or(false)) {
            return true;
        }
    }
    if let (Some(d), Some(ed)) = (&v.rbd, &e.rbd) {
        let pool = |p: &Option<String>| p.clone().unwrap_or_else(|| "rbd".to_string());
        if overlap(&d.monitors, &ed.monitors)
            && pool(&d.pool) == pool(&ed.pool)
            && d.image == ed.image
            && !(d.read_only.unwrap_or(false) && ed.read_only.unwrap_or(false))
        {
            return true;
        }
    }
    false
}

impl FilterPlugin for VolumeRestrictions {
    fn name(&self) -> &'static str {
        NAME
    }

    fn dependence(&self, pod: &PodInfo) -> Dependence {
        if pod.view.volumes.iter().any(|v| v.claim().is_some()) {
            Dependence::OtherPods
        } else if inline(pod).next().is_some() {
            Dependence::SameNodePods
        } else {
            Dependence::NodeLocal
        }
    }

    fn pre_filter<'a>(&self, state: &mut CycleState<'a>, snap: &'a Snapshot) -> Result<PreResult, Rejection> {
        let pod = state.pod;
        let disks = inline(pod).next().is_some();
        let ns = &*pod.key.namespace;
        let mut rwop = Vec::new();
        for v in pod.view.volumes.iter() {
            let PodVolume::Claim { claim, ephemeral: false } = v else { continue };
            let Some(pvc) = snap.volumes().pvc(ns, claim) else {
                return Err(Rejection::unresolvable(
                    NAME,
                    format!("persistentvolumeclaim {claim:?} not found"),
                ));
            };
            if volumes::claim_access_modes(pvc).iter().any(|m| m == "ReadWriteOncePod") {
                rwop.push(claim.as_str());
            }
        }
        let rwop_conflict = !rwop.is_empty() && {
            let pods = snap.nodes().flat_map(|n| n.pods.iter().map(|p| &**p));
            let pods: Vec<&PodInfo> = pods.collect();
            rwop.iter().any(|c| volumes::VolumeState::claim_in_use(pods.iter().copied(), &pod.key, ns, c))
        };
        if !disks && !rwop_conflict {
            return Ok(PreResult::Skip);
        }
        state.data.write(NAME, PreState { rwop_conflict, disks });
        Ok(PreResult::Run)
    }

    fn filter(&self, state: &CycleState<'_>, _snap: &Snapshot, node: &NodeState) -> FilterResult {
        let Some(pre) = state.data.read::<PreState>(NAME) else { return Ok(()) };
        if pre.disks {
            for v in inline(state.pod) {
                if node.pods.iter().flat_map(|p| inline(p)).any(|e| conflict(v, e)) {
                    return Err(Rejection::unschedulable(NAME, ERR_DISK_CONFLICT));
                }
            }
        }
        if pre.rwop_conflict {
            return Err(Rejection::unschedulable(NAME, ERR_RWOP_CONFLICT));
        }
        Ok(())
    }
}
