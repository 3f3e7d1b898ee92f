//! `NodeVolumeLimits` (kube-scheduler's CSI volume limits plugin): the CSI volumes of the
//! pod plus those already attached by the node's pods may not exceed, per driver, the
//! node's CSINode `allocatable.count` (`node(s) exceed max volume count`, Unschedulable).
//! A volume is counted once per driver and handle (a claim's PV `csi.driver` /
//! `volumeHandle`, or for an unbound claim its class's provisioner and the claim); a node
//! without a CSINode or without a count for the driver has no limit. A claim of the pod
//! that does not exist is an error here (VolumeRestrictions' PreFilter reports it first).

use std::collections::{BTreeMap, BTreeSet};

use crate::framework::{
    CycleState, Dependence, FilterPlugin, FilterResult, NodeState, PodInfo, PreResult, Rejection, Snapshot,
};

/// Plugin name.
pub const NAME: &str = "NodeVolumeLimits";
/// Filter reason.
pub const ERR_MAX_VOLUME_COUNT: &str = "node(s) exceed max volume count";

/// The `NodeVolumeLimits` filter.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeVolumeLimits;

fn has_claims(pod: &PodInfo) -> bool {
    pod.view.volumes.iter().any(|v| v.claim().is_some())
}

/// The CSI volumes of `pod` as (driver, handle). `new_pod`: a missing claim is an error
/// (for pods already placed it is skipped).
fn csi_volumes(
    snap: &Snapshot,
    pod: &PodInfo,
    new_pod: bool,
    out: &mut BTreeSet<(String, String)>,
) -> Result<(), String> {
    let v = snap.volumes();
    let ns = &*pod.key.namespace;
    for claim in pod.view.volumes.iter().filter_map(|v| v.claim()) {
        if claim.is_empty() {
            return Err("PersistentVolumeClaim had no name".to_string());
        }
        let Some(pvc) = v.pvc(ns, claim) else {
            if new_pod {
                return Err(format!(
                    "looking up PVC {ns}/{claim}: persistentvolumeclaim {claim:?} not found"
                ));
            }
            continue;
        };
        if let Some((driver, handle)) = v.csi_driver_info(pvc) {
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
        if has_claims(pod) {
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
        Ok(if has_claims(state.pod) { PreResult::Run } else { PreResult::Skip })
    }

    fn filter(&self, state: &CycleState<'_>, snap: &Snapshot, node: &NodeState) -> FilterResult {
        let mut new = BTreeSet::new();
        csi_volumes(snap, state.pod, true, &mut new).map_err(|e| Rejection::error(NAME, e))?;
        if new.is_empty() {
            return Ok(());
        }
        let Some(csi_node) = snap.volumes().csi_node(node.name()) else { return Ok(()) };
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
            let _ = csi_volumes(snap, p, false, &mut attached);
        }
        let mut attached_count: BTreeMap<&str, i64> = BTreeMap::new();
        for (driver, _) in &attached {
            *attached_count.entry(driver.as_str()).or_default() += 1;
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
