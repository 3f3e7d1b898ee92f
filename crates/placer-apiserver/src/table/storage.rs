//! kubectl's columns for the storage kinds (`pkg/printers/internalversion`):
//! PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode, CSIDriver,
//! CSIStorageCapacity, VolumeAttachment.

use placer_cluster::{Kind, Object};
use serde_json::{json, Value};

use super::col;

/// kubectl's short access modes (`RWO,ROX,RWX,RWOP`), in its order.
fn access_modes(modes: Option<&Vec<String>>) -> String {
    let modes = modes.map(Vec::as_slice).unwrap_or(&[]);
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .into_iter()
    .filter(|(m, _)| modes.iter().any(|x| x == m))
    .map(|(_, s)| s)
    .collect::<Vec<_>>()
    .join(",")
}

fn or_unset(v: Option<&String>) -> String {
    v.filter(|s| !s.is_empty()).cloned().unwrap_or_else(|| "<unset>".to_string())
}

/// The columns after Name (`name`) with `age` where kubectl puts it.
pub(super) fn columns(kind: Kind, name: Value, age: Value) -> Vec<Value> {
    match kind {
        Kind::PersistentVolumeClaim => vec![
            name,
            col("Status", "string", 0, "Status of the claim."),
            col("Volume", "string", 0, "The binding reference to the PersistentVolume backing this claim."),
            col("Capacity", "string", 0, "The actual resources of the underlying volume."),
            col("Access Modes", "string", 0, "The access modes of the underlying volume."),
            col("StorageClass", "string", 0, "The name of the StorageClass required by the claim."),
            col("VolumeAttributesClass", "string", 0, "The name of the VolumeAttributesClass of the claim."),
            age,
            col("VolumeMode", "string", 1, "What type of volume is required by the claim."),
        ],
        Kind::PersistentVolume => vec![
            name,
            col("Capacity", "string", 0, "The capacity of the volume."),
            col("Access Modes", "string", 0, "The access modes the volume can be mounted with."),
            col("Reclaim Policy", "string", 0, "What happens to the volume when released from its claim."),
            col("Status", "string", 0, "The phase of the volume."),
            col("Claim", "string", 0, "The claim the volume is bound to."),
            col("StorageClass", "string", 0, "The StorageClass the volume belongs to."),
            col("VolumeAttributesClass", "string", 0, "The VolumeAttributesClass of the volume."),
            col("Reason", "string", 0, "Why the volume is in this phase."),
            age,
            col("VolumeMode", "string", 1, "Whether the volume is a filesystem or a raw block device."),
        ],
        Kind::StorageClass => vec![
            name,
            col("Provisioner", "string", 0, "The volume plugin that provisions volumes of this class."),
            col("ReclaimPolicy", "string", 0, "What happens to provisioned volumes when they are released."),
            col("VolumeBindingMode", "string", 0, "When volumes are bound and provisioned."),
            col("AllowVolumeExpansion", "string", 0, "Whether volumes of this class can be expanded."),
            age,
        ],
        Kind::CSINode => {
            vec![name, col("Drivers", "integer", 0, "The number of CSI drivers on the node."), age]
        }
        // kubectl's columns for CSIStorageCapacity have no age.
        Kind::CSIStorageCapacity => vec![
            name,
            col("StorageClassName", "string", 0, "The StorageClass the capacity applies to."),
            col("Capacity", "string", 0, "The capacity available for new volumes."),
        ],
        Kind::VolumeAttachment => vec![
            name,
            col("Attacher", "string", 0, "The CSI driver that attaches the volume."),
            col("PV", "string", 0, "The PersistentVolume attached."),
            col("Node", "string", 0, "The node the volume is attached to."),
            col("Attached", "boolean", 0, "Whether the volume is attached."),
            age,
        ],
        _ => vec![
            name,
            col("AttachRequired", "boolean", 0, "Whether the driver needs an attach operation."),
            col("PodInfoOnMount", "boolean", 0, "Whether the driver gets pod information on mount."),
            col("StorageCapacity", "boolean", 0, "Whether the driver publishes storage capacity."),
            col("TokenRequests", "string", 0, "The service account tokens the driver asks for."),
            col("RequiresRepublish", "boolean", 0, "Whether the driver asks to be called periodically."),
            col("Modes", "string", 0, "The volume lifecycle modes the driver supports."),
            age,
        ],
    }
}

/// One row of `obj` (a storage kind).
pub(super) fn cells(obj: &Object, name: Value, age: Value) -> Vec<Value> {
    match obj {
        Object::PersistentVolumeClaim(pvc) => {
            let spec = pvc.spec.clone().unwrap_or_default();
            let status = pvc.status.clone().unwrap_or_default();
            let phase = status.phase.clone().unwrap_or_default();
            let bound = phase == "Bound";
            let capacity = status.capacity.as_ref().and_then(|c| c.get("storage")).map(|q| q.0.clone());
            vec![
                name,
                json!(phase),
                json!(spec.volume_name.unwrap_or_default()),
                json!(if bound { capacity.unwrap_or_default() } else { String::new() }),
                json!(if bound { access_modes(status.access_modes.as_ref()) } else { String::new() }),
                json!(or_unset(spec.storage_class_name.as_ref())),
                json!(or_unset(spec.volume_attributes_class_name.as_ref())),
                age,
                json!(spec.volume_mode.unwrap_or_else(|| "Filesystem".to_string())),
            ]
        }
        Object::PersistentVolume(pv) => {
            let spec = pv.spec.clone().unwrap_or_default();
            let status = pv.status.clone().unwrap_or_default();
            let claim = spec
                .claim_ref
                .as_ref()
                .map(|c| {
                    format!(
                        "{}/{}",
                        c.namespace.clone().unwrap_or_default(),
                        c.name.clone().unwrap_or_default()
                    )
                })
                .unwrap_or_default();
            vec![
                name,
                json!(spec
                    .capacity
                    .as_ref()
                    .and_then(|c| c.get("storage"))
                    .map(|q| q.0.clone())
                    .unwrap_or_default()),
                json!(access_modes(spec.access_modes.as_ref())),
                json!(spec.persistent_volume_reclaim_policy.unwrap_or_else(|| "Retain".to_string())),
                json!(status.phase.unwrap_or_default()),
                json!(claim),
                json!(spec.storage_class_name.unwrap_or_default()),
                json!(or_unset(spec.volume_attributes_class_name.as_ref())),
                json!(status.reason.unwrap_or_default()),
                age,
                json!(spec.volume_mode.unwrap_or_else(|| "Filesystem".to_string())),
            ]
        }
        Object::StorageClass(sc) => {
            let default = sc.metadata.annotations.as_ref().is_some_and(|a| {
                a.get("storageclass.kubernetes.io/is-default-class").map(String::as_str) == Some("true")
            });
            let name = match name.as_str().map(str::to_string) {
                Some(n) if default => json!(format!("{n} (default)")),
                _ => name,
            };
            vec![
                name,
                json!(sc.provisioner),
                json!(sc.reclaim_policy.clone().unwrap_or_else(|| "Delete".to_string())),
                json!(sc.volume_binding_mode.clone().unwrap_or_else(|| "Immediate".to_string())),
                json!(sc.allow_volume_expansion.unwrap_or(false).to_string()),
                age,
            ]
        }
        Object::CSINode(n) => vec![name, json!(n.spec.drivers.len()), age],
        Object::CSIDriver(d) => {
            let s = &d.spec;
            let tokens =
                s.token_requests.iter().flatten().map(|t| t.audience.clone()).collect::<Vec<_>>().join(",");
            let modes =
                s.volume_lifecycle_modes.clone().unwrap_or_else(|| vec!["Persistent".to_string()]).join(",");
            vec![
                name,
                json!(s.attach_required.unwrap_or(true)),
                json!(s.pod_info_on_mount.unwrap_or(false)),
                json!(s.storage_capacity.unwrap_or(false)),
                json!(if tokens.is_empty() { "<unset>".to_string() } else { tokens }),
                json!(s.requires_republish.unwrap_or(false)),
                json!(modes),
                age,
            ]
        }
        Object::CSIStorageCapacity(c) => vec![
            name,
            json!(c.storage_class_name),
            json!(c.capacity.as_ref().map_or_else(|| "<unset>".to_string(), |q| q.0.clone())),
        ],
        Object::VolumeAttachment(va) => vec![
            name,
            json!(va.spec.attacher),
            json!(va.spec.source.persistent_volume_name.as_deref().unwrap_or("")),
            json!(va.spec.node_name),
            json!(va.status.as_ref().is_some_and(|s| s.attached)),
            age,
        ],
        _ => vec![name, age],
    }
}
