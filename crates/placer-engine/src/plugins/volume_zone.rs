//! `VolumeZone`: the zone and region labels of a pod's bound PersistentVolumes must match
//! the node's (kube-scheduler's plugin of that name). Unbound `WaitForFirstConsumer`
//! claims are skipped; an unbound claim of another class keeps the pod Pending. A node
//! without any zone or region label fits (single-zone clusters).

use std::collections::BTreeSet;

use crate::framework::{
    volumes, CycleState, Dependence, FilterPlugin, FilterResult, NodeState, PodInfo, PodVolume, PreResult,
    Rejection, Snapshot,
};

/// Plugin name.
pub const NAME: &str = "VolumeZone";
/// Filter reason.
pub const ERR_CONFLICT: &str = "node(s) had no available volume zone";

const TOPOLOGY_LABELS: [&str; 4] = [
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];

fn to_ga(label: &str) -> &str {
    match label {
        "failure-domain.beta.kubernetes.io/region" => "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone" => "topology.kubernetes.io/zone",
        other => other,
    }
}

/// One topology label of a PV: its key and the zones it lists (`a__b`: a or b).
struct PvTopology {
    key: &'static str,
    values: BTreeSet<String>,
}

struct PreState(Vec<PvTopology>);

/// The `VolumeZone` filter.
#[derive(Debug, Clone, Copy, Default)]
pub struct VolumeZone;

fn claim_names(pod: &PodInfo) -> impl Iterator<Item = &str> {
    // Only `persistentVolumeClaim` volumes, as upstream (not generic ephemeral ones).
    pod.view.volumes.iter().filter_map(|v| match v {
        PodVolume::Claim { claim, ephemeral: false } => Some(claim.as_str()),
        _ => None,
    })
}

fn topologies(snap: &Snapshot, pod: &PodInfo) -> Result<Vec<PvTopology>, Rejection> {
    let v = snap.volumes();
    let ns = &*pod.key.namespace;
    let mut out = Vec::new();
    for name in claim_names(pod) {
        if name.is_empty() {
            return Err(Rejection::unresolvable(NAME, "PersistentVolumeClaim had no name"));
        }
        let Some(pvc) = v.pvc(ns, name) else {
            return Err(Rejection::unresolvable(NAME, format!("persistentvolumeclaim {name:?} not found")));
        };
        let pv_name = volumes::volume_name(pvc);
        if pv_name.is_empty() {
            let class = volumes::claim_class(pvc);
            if class.is_empty() {
                return Err(Rejection::unresolvable(
                    NAME,
                    "PersistentVolumeClaim had no pv name and storageClass name",
                ));
            }
            let Some(sc) = v.class(class) else {
                return Err(Rejection::unresolvable(
                    NAME,
                    format!("storageclass.storage.k8s.io {class:?} not found"),
                ));
            };
            match sc.volume_binding_mode.as_deref() {
                None => {
                    return Err(Rejection::unresolvable(
                        NAME,
                        format!("VolumeBindingMode not set for StorageClass {class:?}"),
                    ))
                }
                Some("WaitForFirstConsumer") => continue,
                Some(_) => return Err(Rejection::unresolvable(NAME, "PersistentVolume had no name")),
            }
        }
        let Some(pv) = v.pv(pv_name) else {
            return Err(Rejection::unresolvable(NAME, format!("persistentvolume {pv_name:?} not found")));
        };
        let labels = pv.metadata.labels.as_ref();
        for key in TOPOLOGY_LABELS {
            if let Some(value) = labels.and_then(|l| l.get(key)) {
                // LabelZonesToSet: `__`-separated zones; an unparsable value is ignored.
                let values: BTreeSet<String> =
                    value.split("__").map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect();
                if !values.is_empty() {
                    out.push(PvTopology { key, values });
                }
            }
        }
    }
    Ok(out)
}

impl FilterPlugin for VolumeZone {
    fn name(&self) -> &'static str {
        NAME
    }

    fn dependence(&self, _pod: &PodInfo) -> Dependence {
        Dependence::NodeLocal
    }

    fn pre_filter<'a>(&self, state: &mut CycleState<'a>, snap: &'a Snapshot) -> Result<PreResult, Rejection> {
        if claim_names(state.pod).next().is_none() {
            return Ok(PreResult::Skip);
        }
        let t = topologies(snap, state.pod)?;
        if t.is_empty() {
            return Ok(PreResult::Skip);
        }
        state.data.write(NAME, PreState(t));
        Ok(PreResult::Run)
    }

    fn filter(&self, state: &CycleState<'_>, _snap: &Snapshot, node: &NodeState) -> FilterResult {
        let Some(PreState(topologies)) = state.data.read::<PreState>(NAME) else { return Ok(()) };
        let Some(labels) = node.info.node.metadata.labels.as_ref() else { return Ok(()) };
        if !TOPOLOGY_LABELS.iter().any(|k| labels.contains_key(*k)) {
            return Ok(());
        }
        for t in topologies {
            let v = labels.get(t.key).or_else(|| labels.get(to_ga(t.key)));
            if !v.is_some_and(|v| t.values.contains(v)) {
                return Err(Rejection::unresolvable(NAME, ERR_CONFLICT));
            }
        }
        Ok(())
    }
}
