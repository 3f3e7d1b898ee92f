//! Validation of the storage kinds (core/v1 PersistentVolumeClaim and PersistentVolume,
//! storage.k8s.io/v1 StorageClass, CSINode, CSIDriver), in the API server's messages
//! (`pkg/apis/core/validation`, `pkg/apis/storage/validation`): the fields the scheduler
//! and the PV controller read.

use placer_api::k8s::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Volume};
use placer_api::k8s::api::storage::v1::{CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment};

use super::{
    check_dns_label, immutable, json, parse_quantity, validate_node_selector_term, validate_selector, Errors,
};

const ACCESS_MODES: [&str; 4] = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"];
const VOLUME_MODES: [&str; 2] = ["Block", "Filesystem"];
const BINDING_MODES: [&str; 2] = ["Immediate", "WaitForFirstConsumer"];

fn access_modes(e: &mut Errors, path: &str, modes: Option<&[String]>) {
    let modes = modes.unwrap_or(&[]);
    if modes.is_empty() {
        e.required(path, "at least 1 access mode is required");
        return;
    }
    for m in modes {
        if !ACCESS_MODES.contains(&m.as_str()) {
            e.not_supported(path, m, &ACCESS_MODES);
        }
    }
    if modes.iter().any(|m| m == "ReadWriteOncePod") && modes.len() > 1 {
        e.forbidden(path, "may not use ReadWriteOncePod with other access modes");
    }
}

fn volume_mode(e: &mut Errors, path: &str, mode: Option<&str>) {
    if let Some(m) = mode.filter(|m| !VOLUME_MODES.contains(m)) {
        e.not_supported(path, m, &VOLUME_MODES);
    }
}

/// A pod's `spec.volumes`: unique DNS-label names; a claim volume names its claim.
pub(super) fn validate_pod_volumes(e: &mut Errors, path: &str, volumes: Option<&[Volume]>) {
    let mut names = std::collections::BTreeSet::new();
    for (i, v) in volumes.unwrap_or(&[]).iter().enumerate() {
        let vpath = format!("{path}[{i}]");
        if v.name.is_empty() {
            e.required(format!("{vpath}.name"), "");
        } else if let Err(m) = check_dns_label(&v.name) {
            e.invalid(format!("{vpath}.name"), &v.name, &m);
        } else if !names.insert(v.name.as_str()) {
            e.duplicate(format!("{vpath}.name"), &v.name);
        }
        if let Some(c) = &v.persistent_volume_claim {
            if c.claim_name.is_empty() {
                e.required(format!("{vpath}.persistentVolumeClaim.claimName"), "");
            }
        }
    }
}

/// A PersistentVolumeClaim on create.
pub(super) fn validate_pvc(e: &mut Errors, pvc: &PersistentVolumeClaim) {
    let Some(spec) = &pvc.spec else {
        e.required("spec.accessModes", "at least 1 access mode is required");
        e.required("spec.resources[storage]", "");
        return;
    };
    access_modes(e, "spec.accessModes", spec.access_modes.as_deref());
    if let Some(s) = &spec.selector {
        validate_selector(e, "spec.selector", s);
    }
    match spec.resources.as_ref().and_then(|r| r.requests.as_ref()).and_then(|r| r.get("storage")) {
        None => e.required("spec.resources[storage]", ""),
        Some(q) => match parse_quantity("storage", q) {
            Err(m) => e.invalid("spec.resources.requests[storage]", &q.0, &m),
            Ok(v) if v <= 0 => {
                e.invalid("spec.resources.requests[storage]", &q.0, "must be greater than zero")
            }
            Ok(_) => {}
        },
    }
    volume_mode(e, "spec.volumeMode", spec.volume_mode.as_deref());
}

/// The number of volume sources a PersistentVolume names (exactly one is allowed).
fn pv_sources(pv: &PersistentVolume) -> usize {
    let Some(s) = &pv.spec else { return 0 };
    [
        s.aws_elastic_block_store.is_some(),
        s.azure_disk.is_some(),
        s.azure_file.is_some(),
        s.cephfs.is_some(),
        s.cinder.is_some(),
        s.csi.is_some(),
        s.fc.is_some(),
        s.flex_volume.is_some(),
        s.flocker.is_some(),
        s.gce_persistent_disk.is_some(),
        s.glusterfs.is_some(),
        s.host_path.is_some(),
        s.iscsi.is_some(),
        s.local.is_some(),
        s.nfs.is_some(),
        s.photon_persistent_disk.is_some(),
        s.portworx_volume.is_some(),
        s.quobyte.is_some(),
        s.rbd.is_some(),
        s.scale_io.is_some(),
        s.storageos.is_some(),
        s.vsphere_volume.is_some(),
    ]
    .into_iter()
    .filter(|b| *b)
    .count()
}

/// A PersistentVolume on create.
pub(super) fn validate_pv(e: &mut Errors, pv: &PersistentVolume) {
    let spec = pv.spec.clone().unwrap_or_default();
    access_modes(e, "spec.accessModes", spec.access_modes.as_deref());
    match spec.capacity.as_ref().and_then(|c| c.get("storage")) {
        None => e.required("spec.capacity", "must specify a capacity"),
        Some(q) => match parse_quantity("storage", q) {
            Err(m) => e.invalid("spec.capacity[storage]", &q.0, &m),
            Ok(v) if v <= 0 => e.invalid("spec.capacity[storage]", &q.0, "must be greater than zero"),
            Ok(_) => {}
        },
    }
    match pv_sources(pv) {
        0 => e.required("spec", "must specify a volume type"),
        1 => {}
        _ => e.forbidden("spec", "may not specify more than 1 volume type"),
    }
    if let Some(p) = spec.persistent_volume_reclaim_policy.as_deref() {
        let supported = ["Delete", "Recycle", "Retain"];
        if !supported.contains(&p) {
            e.not_supported("spec.persistentVolumeReclaimPolicy", p, &supported);
        }
    }
    volume_mode(e, "spec.volumeMode", spec.volume_mode.as_deref());
    if let Some(affinity) = &spec.node_affinity {
        match &affinity.required {
            None => e.required("spec.nodeAffinity.required", "must specify required node constraints"),
            Some(sel) if sel.node_selector_terms.is_empty() => e.required(
                "spec.nodeAffinity.required.nodeSelectorTerms",
                "must have at least one node selector term",
            ),
            Some(sel) => {
                for (i, t) in sel.node_selector_terms.iter().enumerate() {
                    validate_node_selector_term(
                        e,
                        &format!("spec.nodeAffinity.required.nodeSelectorTerms[{i}]"),
                        t,
                    );
                }
            }
        }
    }
    if spec.local.is_some() && spec.node_affinity.is_none() {
        e.required("spec.nodeAffinity", "Local volume requires node affinity");
    }
}

/// A StorageClass on create.
pub(super) fn validate_storage_class(e: &mut Errors, sc: &StorageClass) {
    if sc.provisioner.is_empty() {
        e.required("provisioner", "");
    }
    if let Some(p) = sc.reclaim_policy.as_deref() {
        let supported = ["Delete", "Retain"];
        if !supported.contains(&p) {
            e.not_supported("reclaimPolicy", p, &supported);
        }
    }
    if let Some(m) = sc.volume_binding_mode.as_deref().filter(|m| !BINDING_MODES.contains(m)) {
        e.not_supported("volumeBindingMode", m, &BINDING_MODES);
    }
    for (i, term) in sc.allowed_topologies.iter().flatten().enumerate() {
        let exprs = term.match_label_expressions.as_deref().unwrap_or(&[]);
        if exprs.is_empty() {
            e.required(
                format!("allowedTopologies[{i}].matchLabelExpressions"),
                "must have at least one label expression",
            );
        }
        for (j, r) in exprs.iter().enumerate() {
            if r.values.is_empty() {
                e.required(
                    format!("allowedTopologies[{i}].matchLabelExpressions[{j}].values"),
                    "must specify as least one value",
                );
            }
        }
    }
}

/// A CSINode on create.
pub(super) fn validate_csi_node(e: &mut Errors, n: &CSINode) {
    let mut seen = std::collections::BTreeSet::new();
    for (i, d) in n.spec.drivers.iter().enumerate() {
        let path = format!("spec.drivers[{i}]");
        if d.name.is_empty() {
            e.required(format!("{path}.name"), "");
        } else if !seen.insert(d.name.as_str()) {
            e.duplicate(format!("{path}.name"), &d.name);
        }
        if d.node_id.is_empty() {
            e.required(format!("{path}.nodeID"), "");
        }
        let count = d.allocatable.as_ref().and_then(|a| a.count).map(i64::from);
        e.non_negative(&format!("{path}.allocatable.count"), count);
    }
}

/// A CSIStorageCapacity on create (`ValidateCSIStorageCapacity`): the class name a DNS
/// subdomain, the node topology a valid selector, the sizes non-negative.
pub(super) fn validate_csi_storage_capacity(e: &mut Errors, c: &CSIStorageCapacity) {
    if c.storage_class_name.is_empty() {
        e.required("storageClassName", "");
    } else if let Err(m) = super::check_dns_subdomain(&c.storage_class_name) {
        e.invalid("storageClassName", &c.storage_class_name, &m);
    }
    if let Some(t) = &c.node_topology {
        validate_selector(e, "nodeTopology", t);
    }
    for (path, q) in [("capacity", &c.capacity), ("maximumVolumeSize", &c.maximum_volume_size)] {
        if let Some(q) = q {
            match parse_quantity("storage", q) {
                Ok(v) => e.non_negative(path, Some(v)),
                Err(m) => e.invalid(path, &q.0, &m),
            }
        }
    }
}

/// A VolumeAttachment on create (`ValidateVolumeAttachment`): an attacher, a node name and
/// exactly one source.
pub(super) fn validate_volume_attachment(e: &mut Errors, va: &VolumeAttachment) {
    let spec = &va.spec;
    if spec.attacher.is_empty() {
        e.required("spec.attacher", "");
    } else if let Err(m) = super::check_dns_subdomain(&spec.attacher) {
        e.invalid("spec.attacher", &spec.attacher, &m);
    }
    if spec.node_name.is_empty() {
        e.required("spec.nodeName", "");
    }
    let source = &spec.source;
    match (&source.persistent_volume_name, &source.inline_volume_spec) {
        (None, None) => {
            e.required("spec.source", "must specify exactly one of inlineVolumeSpec and persistentVolumeName")
        }
        (Some(_), Some(_)) => e.forbidden(
            "spec.source",
            "must specify exactly one of inlineVolumeSpec and persistentVolumeName",
        ),
        (Some(name), None) if name.is_empty() => {
            e.required("spec.source.persistentVolumeName", "must specify non empty persistentVolumeName")
        }
        _ => {}
    }
}

/// What the API server keeps immutable on update.
pub(super) fn storage_update(e: &mut Errors, old: &super::Object, new: &super::Object) {
    use super::Object;
    match (old, new) {
        (Object::VolumeAttachment(o), Object::VolumeAttachment(n)) => {
            immutable(e, "spec", json(&o.spec), json(&n.spec));
        }
        (Object::CSIStorageCapacity(o), Object::CSIStorageCapacity(n)) => {
            immutable(e, "nodeTopology", json(&o.node_topology), json(&n.node_topology));
            immutable(e, "storageClassName", json(&o.storage_class_name), json(&n.storage_class_name));
        }
        (Object::StorageClass(o), Object::StorageClass(n)) => {
            immutable(e, "parameters", json(&o.parameters), json(&n.parameters));
            immutable(e, "provisioner", json(&o.provisioner), json(&n.provisioner));
            immutable(e, "reclaimPolicy", json(&o.reclaim_policy), json(&n.reclaim_policy));
            immutable(e, "volumeBindingMode", json(&o.volume_binding_mode), json(&n.volume_binding_mode));
        }
        (Object::PersistentVolumeClaim(o), Object::PersistentVolumeClaim(n)) => {
            // Everything but the requests (expansion) and, while unset, the volume name
            // (binding) and the class is immutable.
            let (mut os, ns) = (o.spec.clone().unwrap_or_default(), n.spec.clone().unwrap_or_default());
            if os.volume_name.as_deref().unwrap_or("").is_empty() {
                os.volume_name = ns.volume_name.clone();
            }
            // Retroactive default class: an unset class may be set once.
            if os.storage_class_name.is_none() {
                os.storage_class_name = ns.storage_class_name.clone();
            }
            os.resources = ns.resources.clone();
            os.volume_attributes_class_name = ns.volume_attributes_class_name.clone();
            if json(&os) != json(&ns) {
                e.forbidden(
                    "spec",
                    "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
                );
            }
        }
        (Object::PersistentVolume(o), Object::PersistentVolume(n)) => {
            let (os, ns) = (o.spec.clone().unwrap_or_default(), n.spec.clone().unwrap_or_default());
            immutable(e, "spec.volumeMode", json(&os.volume_mode), json(&ns.volume_mode));
            if os.node_affinity.is_some() {
                immutable(e, "spec.nodeAffinity", json(&os.node_affinity), json(&ns.node_affinity));
            }
        }
        _ => {}
    }
}
