//! In-tree volume to CSI translation as kube-scheduler's NodeVolumeLimits uses it
//! (`k8s.io/csi-translation-lib` and the plugin's `isCSIMigrationOn`, v1.36): which in-tree
//! plugin a PV or an inline volume belongs to, the CSI driver it migrated to, and the
//! translated volume handle that identifies one volume across pods.
//!
//! The library knows seven in-tree plugins; the scheduler counts only those whose
//! migration is complete (AWS EBS, GCE PD, Azure Disk, Cinder, Portworx), and only on a
//! node with a CSINode. Azure File and vSphere volumes are recognized (an unbound claim of
//! such a class is not counted under the in-tree name) but never counted.

use placer_api::k8s::api::core::v1::{PersistentVolume, Volume};
use placer_api::k8s::api::storage::v1::CSINode;

pub const AWS_EBS: &str = "kubernetes.io/aws-ebs";
pub const GCE_PD: &str = "kubernetes.io/gce-pd";
pub const AZURE_DISK: &str = "kubernetes.io/azure-disk";
pub const AZURE_FILE: &str = "kubernetes.io/azure-file";
pub const CINDER: &str = "kubernetes.io/cinder";
pub const VSPHERE: &str = "kubernetes.io/vsphere-volume";
pub const PORTWORX: &str = "kubernetes.io/portworx-volume";

/// csi-translation-lib's plugins: in-tree name and CSI driver name.
const PLUGINS: [(&str, &str); 7] = [
    (GCE_PD, "pd.csi.storage.gke.io"),
    (AWS_EBS, "ebs.csi.aws.com"),
    (CINDER, "cinder.csi.openstack.org"),
    (AZURE_DISK, "disk.csi.azure.com"),
    (AZURE_FILE, "file.csi.azure.com"),
    (VSPHERE, "csi.vsphere.vmware.com"),
    (PORTWORX, "pxd.portworx.com"),
];

/// GCE PD handle formats' unspecified project / zone.
const UNSPECIFIED: &str = "UNSPECIFIED";

/// `IsMigratableIntreePluginByName`.
pub fn is_migratable_plugin(name: &str) -> bool {
    PLUGINS.iter().any(|(n, _)| *n == name)
}

/// `GetCSINameFromInTreeName`.
pub fn csi_driver_of(in_tree: &str) -> Option<&'static str> {
    PLUGINS.iter().find(|(n, _)| *n == in_tree).map(|(_, d)| *d)
}

/// NodeVolumeLimits' `isCSIMigrationOn`: the node has a CSINode and the plugin's migration
/// is complete (every gate of these plugins is GA in v1.36).
pub fn migration_on(csi_node: Option<&CSINode>, plugin: &str) -> bool {
    csi_node.is_some() && matches!(plugin, AWS_EBS | PORTWORX | GCE_PD | AZURE_DISK | CINDER)
}

/// The in-tree plugin of a volume source (a PV's spec or an inline volume: the same
/// field names), in csi-translation-lib's order.
macro_rules! in_tree_plugin {
    ($s:expr) => {
        if $s.gce_persistent_disk.is_some() {
            Some(GCE_PD)
        } else if $s.aws_elastic_block_store.is_some() {
            Some(AWS_EBS)
        } else if $s.cinder.is_some() {
            Some(CINDER)
        } else if $s.azure_disk.is_some() {
            Some(AZURE_DISK)
        } else if $s.azure_file.is_some() {
            Some(AZURE_FILE)
        } else if $s.vsphere_volume.is_some() {
            Some(VSPHERE)
        } else if $s.portworx_volume.is_some() {
            Some(PORTWORX)
        } else {
            None
        }
    };
}

/// `GetInTreePluginNameFromSpec` for a PV (`None`: not migratable, `IsPVMigratable`).
pub fn pv_plugin(pv: &PersistentVolume) -> Option<&'static str> {
    let s = pv.spec.as_ref()?;
    in_tree_plugin!(s)
}

/// `GetInTreePluginNameFromSpec` for an inline volume (`None`: `IsInlineMigratable` false).
pub fn inline_plugin(v: &Volume) -> Option<&'static str> {
    in_tree_plugin!(v)
}

/// `KubernetesVolumeIDToEBSVolumeID`: `aws://<zone>/<vol-id>`, `aws:///<vol-id>` or a bare id.
pub fn ebs_volume_id(id: &str) -> Result<String, String> {
    let Some(rest) = id.strip_prefix("aws://") else { return Ok(id.to_string()) };
    // The URL's path: what follows the host.
    let path = rest.find('/').map_or("", |i| &rest[i..]);
    let aws_id = path.trim_matches('/');
    if aws_id.starts_with("vol-") && !aws_id.contains('/') {
        Ok(aws_id.to_string())
    } else {
        Err(format!("Invalid format for AWS volume ({id})"))
    }
}

/// `getRegionFromZones`: every zone `{locale}-{region}-{zone}` of one region.
fn region_of(zones: &[&str]) -> Result<String, String> {
    let mut regions = std::collections::BTreeSet::new();
    for z in zones {
        let parts: Vec<&str> = z.split('-').collect();
        if parts.len() != 3 {
            return Err(format!(
                "zone in unexpected format, expected: {{locale}}-{{region}}-{{zone}}, got: {z}"
            ));
        }
        regions.insert(format!("{}-{}", parts[0], parts[1]));
    }
    if regions.len() != 1 {
        return Err(format!("multiple or no regions gotten from zones, got: {regions:?}"));
    }
    Ok(regions.into_iter().next().unwrap_or_default())
}

/// `TranslateInTreePVToCSI`: the CSI driver and volume handle of a migratable PV.
pub fn translate_pv(pv: &PersistentVolume) -> Result<(&'static str, String), String> {
    let plugin = pv_plugin(pv).ok_or("pv is not migratable")?;
    let driver = csi_driver_of(plugin).unwrap_or_default();
    let s = pv.spec.as_ref().ok_or("pv has no spec")?;
    let handle = match plugin {
        AWS_EBS => ebs_volume_id(
            &s.aws_elastic_block_store.as_ref().map(|e| e.volume_id.clone()).unwrap_or_default(),
        )?,
        GCE_PD => {
            let pd = s.gce_persistent_disk.as_ref().map(|g| g.pd_name.as_str()).unwrap_or("");
            let labels = pv.metadata.labels.as_ref();
            let label = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str).unwrap_or("");
            let mut zones_label = label("failure-domain.beta.kubernetes.io/zone");
            if zones_label.is_empty() {
                zones_label = label("topology.kubernetes.io/zone");
            }
            let zones: Vec<&str> = zones_label.split("__").collect();
            if zones.len() == 1 && !zones[0].is_empty() {
                format!("projects/{UNSPECIFIED}/zones/{}/disks/{pd}", zones[0])
            } else if zones.len() > 1 {
                let region =
                    region_of(&zones).map_err(|e| format!("failed to get region from zones: {e}"))?;
                format!("projects/{UNSPECIFIED}/regions/{region}/disks/{pd}")
            } else {
                format!("projects/{UNSPECIFIED}/zones/{UNSPECIFIED}/disks/{pd}")
            }
        }
        AZURE_DISK => s.azure_disk.as_ref().map(|a| a.disk_uri.clone()).unwrap_or_default(),
        CINDER => s.cinder.as_ref().map(|c| c.volume_id.clone()).unwrap_or_default(),
        PORTWORX => s.portworx_volume.as_ref().map(|p| p.volume_id.clone()).unwrap_or_default(),
        // Never counted (no complete migration): no handle needed.
        _ => return Err(format!("translation of {plugin} is not used by the scheduler")),
    };
    Ok((driver, handle))
}

/// `TranslateInTreeInlineVolumeToCSI`: the CSI driver and volume handle of a migratable
/// inline volume.
pub fn translate_inline(v: &Volume) -> Result<(&'static str, String), String> {
    let plugin = inline_plugin(v).ok_or("volume is not migratable")?;
    let driver = csi_driver_of(plugin).unwrap_or_default();
    let handle = match plugin {
        AWS_EBS => ebs_volume_id(
            &v.aws_elastic_block_store.as_ref().map(|e| e.volume_id.clone()).unwrap_or_default(),
        )?,
        GCE_PD => format!(
            "projects/{UNSPECIFIED}/zones/{UNSPECIFIED}/disks/{}",
            v.gce_persistent_disk.as_ref().map(|g| g.pd_name.as_str()).unwrap_or("")
        ),
        AZURE_DISK => v.azure_disk.as_ref().map(|a| a.disk_uri.clone()).unwrap_or_default(),
        CINDER => v.cinder.as_ref().map(|c| c.volume_id.clone()).unwrap_or_default(),
        PORTWORX => v.portworx_volume.as_ref().map(|p| p.volume_id.clone()).unwrap_or_default(),
        _ => return Err(format!("translation of {plugin} is not used by the scheduler")),
    };
    Ok((driver, handle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ebs_volume_ids_as_csi_translation_lib_reads_them() {
        assert_eq!(ebs_volume_id("vol-123").unwrap(), "vol-123");
        assert_eq!(ebs_volume_id("aws://us-east-1a/vol-123").unwrap(), "vol-123");
        assert_eq!(ebs_volume_id("aws:///vol-123").unwrap(), "vol-123");
        assert_eq!(
            ebs_volume_id("aws://us-east-1a/disk-1").unwrap_err(),
            "Invalid format for AWS volume (aws://us-east-1a/disk-1)"
        );
    }

    #[test]
    fn gce_pd_pv_handles_follow_the_zone_labels() {
        let pv = |labels: serde_json::Value| -> PersistentVolume {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "pv", "labels": labels},
                "spec": {"gcePersistentDisk": {"pdName": "disk"}},
            }))
            .unwrap()
        };
        let h = |p: &PersistentVolume| translate_pv(p).map(|(d, h)| format!("{d} {h}"));
        assert_eq!(
            h(&pv(serde_json::json!({}))).unwrap(),
            "pd.csi.storage.gke.io projects/UNSPECIFIED/zones/UNSPECIFIED/disks/disk"
        );
        assert_eq!(
            h(&pv(serde_json::json!({"topology.kubernetes.io/zone": "us-east1-b"}))).unwrap(),
            "pd.csi.storage.gke.io projects/UNSPECIFIED/zones/us-east1-b/disks/disk"
        );
        assert_eq!(
            h(&pv(serde_json::json!({"failure-domain.beta.kubernetes.io/zone": "europe-west1-b__europe-west1-c"})))
                .unwrap(),
            "pd.csi.storage.gke.io projects/UNSPECIFIED/regions/europe-west1/disks/disk"
        );
        assert!(h(&pv(serde_json::json!({"topology.kubernetes.io/zone": "a-b-c__d-e-f"}))).is_err());
    }

    #[test]
    fn only_completed_migrations_count_and_only_with_a_csi_node() {
        let node = CSINode::default();
        for p in [AWS_EBS, GCE_PD, AZURE_DISK, CINDER, PORTWORX] {
            assert!(migration_on(Some(&node), p), "{p}");
            assert!(!migration_on(None, p), "{p}");
        }
        for p in [AZURE_FILE, VSPHERE, "kubernetes.io/rbd", "csi.example.com"] {
            assert!(!migration_on(Some(&node), p), "{p}");
        }
        assert!(is_migratable_plugin(AZURE_FILE) && !is_migratable_plugin("kubernetes.io/rbd"));
        assert_eq!(csi_driver_of(AWS_EBS), Some("ebs.csi.aws.com"));
    }
}
