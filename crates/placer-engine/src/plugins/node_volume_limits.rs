//! `NodeVolumeLimits` (kube-scheduler's CSI volume limits plugin, `nodevolumelimits/csi.go`):
//! the CSI volumes of the pod plus those already attached by the node's pods may not
//! exceed, per driver, the node's CSINode `allocatable.count` (`node(s) exceed max volume
//! count`, Unschedulable). A volume is counted once per driver and handle: a claim's PV
//! `csi.driver` / `volumeHandle`, or for an unbound claim its class's provisioner and the
//! claim. In-tree volumes of plugins migrated to CSI (AWS EBS, GCE PD, Azure Disk, Cinder,
//! Portworx: inline, as PVs, or as an in-tree provisioner) count against the CSI driver
//! they translate to, with the translated handle, on a node that has a CSINode (see
//! [`crate::framework::volumes::translation`]). The node's VolumeAttachments count too (a
//! volume is attached until it is detached, after its pod is gone): each one of a CSI PV
//! counts against its attacher with the PV's handle, unless a pod on the node already uses
//! that volume (upstream's `getNodeVolumeAttachmentInfo`; no feature gate in v1.36). A node
//! without a CSINode or without a count for the driver has no limit. A claim of the pod
//! that does not exist is UnschedulableAndUnresolvable here.

use std::collections::{BTreeMap, BTreeSet};

use placer_api::k8s::api::storage::v1::CSINode;

use crate::framework::volumes::translation;
use crate::framework::{
    CycleState, Dependence, FilterPlugin, FilterResult, NodeState, PodInfo, PodVolume, PreResult, Rejection,
    Snapshot,
};

/// Plugin name.
pub const NAME: &str = "NodeVolumeLimits";
/// Filter reason.
pub const ERR_MAX_VOLUME_COUNT: &str = "node(s) exceed max volume count";

/// The `NodeVolumeLimits` filter.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeVolumeLimits;

/// Upstream's PreFilter test: a claim, or an inline volume of a migratable plugin.
fn has_countable(pod: &PodInfo) -> bool {
    pod.view.volumes.iter().any(|v| match v {
        PodVolume::Claim { .. } => true,
        PodVolume::Inline(v) => translation::inline_plugin(v).is_some(),
    })
}

/// Why a pod's volumes cannot be counted.
enum CountError {
    /// A claim of the new pod does not exist.
    NotFound(String),
    Other(String),
}

/// `filterAttachableVolumes`: the CSI volumes of `pod` as (driver, handle). `new_pod`: a
/// missing claim is an error (for pods already placed it is skipped).
fn csi_volumes(
    snap: &Snapshot,
    csi_node: Option<&CSINode>,
    pod: &PodInfo,
    new_pod: bool,
    out: &mut BTreeSet<(String, String)>,
) -> Result<(), CountError> {
    let v = snap.volumes();
    let ns = &*pod.key.namespace;
    for vol in pod.view.volumes.iter() {
        let claim = match vol {
            PodVolume::Claim { claim, .. } => claim,
            PodVolume::Inline(inline) => {
                // checkAttachableInlineVolume
                let Some(plugin) = translation::inline_plugin(inline) else { continue };
                if !translation::migration_on(csi_node, plugin) {
                    continue;
                }
                let (driver, handle) = translation::translate_inline(inline).map_err(|e| {
                    CountError::Other(format!("converting volume({}) from inline to csi: {e}", inline.name))
                })?;
                out.insert((driver.to_string(), handle));
                continue;
            }
        };
        if claim.is_empty() {
            return Err(CountError::Other("PersistentVolumeClaim had no name".to_string()));
        }
        let Some(pvc) = v.pvc(ns, claim) else {
            if new_pod {
                return Err(CountError::NotFound(format!(
                    "looking up PVC {ns}/{claim}: persistentvolumeclaim {claim:?} not found"
                )));
            }
            continue;
        };
        if let Some((driver, handle)) = v.csi_driver_info(csi_node, pvc) {
            if !driver.is_empty() && !handle.is_empty() {
                out.insert((driver, handle));
            }
        }
    }
    Ok(())
}

impl FilterPlugin for NodeVolumeLimits {
    fn name(&self) -> &'static str {
        NAME
    }

    fn dependence(&self, pod: &PodInfo) -> Dependence {
        if has_countable(pod) {
            Dependence::SameNodePods
        } else {
            Dependence::NodeLocal
        }
    }

    fn pre_filter<'a>(
        &self,
        state: &mut CycleState<'a>,
        _snap: &'a Snapshot,
    ) -> Result<PreResult, Rejection> {
        Ok(if has_countable(state.pod) { PreResult::Run } else { PreResult::Skip })
    }

    fn filter(&self, state: &CycleState<'_>, snap: &Snapshot, node: &NodeState) -> FilterResult {
        let csi_node = snap.volumes().csi_node(node.name()).map(|n| &**n);
        let mut new = BTreeSet::new();
        csi_volumes(snap, csi_node, state.pod, true, &mut new).map_err(|e| match e {
            CountError::NotFound(m) => Rejection::unresolvable(NAME, m),
            CountError::Other(m) => Rejection::error(NAME, m),
        })?;
        if new.is_empty() {
            return Ok(());
        }
        let Some(csi_node) = csi_node else { return Ok(()) };
        let limits: BTreeMap<&str, i64> = csi_node
            .spec
            .drivers
            .iter()
            .filter_map(|d| Some((d.name.as_str(), i64::from(d.allocatable.as_ref()?.count?))))
            .collect();
        if limits.is_empty() {
            return Ok(());
        }
        let mut attached = BTreeSet::new();
        for p in &node.pods {
            if let Err(CountError::Other(m) | CountError::NotFound(m)) =
                csi_volumes(snap, Some(csi_node), p, false, &mut attached)
            {
                return Err(Rejection::error(NAME, m));
            }
        }
        let mut attached_count: BTreeMap<&str, i64> = BTreeMap::new();
        for (driver, _) in &attached {
            *attached_count.entry(driver.as_str()).or_default() += 1;
        }
        // Volumes still attached to the node (VolumeAttachments, e.g. of a deleted pod
        // whose volume is being detached) count too, once, unless a pod there uses them.
        let attachments: BTreeSet<(&str, &str)> = snap.volumes().attached_volumes(node.name()).collect();
        for (driver, handle) in attachments {
            if !attached.iter().any(|(d, h)| d == driver && h == handle) {
                *attached_count.entry(driver).or_default() += 1;
            }
        }
        let mut new_count: BTreeMap<&str, i64> = BTreeMap::new();
        for vol in new.iter().filter(|v| !attached.contains(*v)) {
            *new_count.entry(vol.0.as_str()).or_default() += 1;
        }
        for (driver, count) in new_count {
            if let Some(max) = limits.get(driver) {
                if attached_count.get(driver).copied().unwrap_or(0) + count > *max {
                    return Err(Rejection::unschedulable(NAME, ERR_MAX_VOLUME_COUNT));
                }
            }
        }
        Ok(())
    }
}
