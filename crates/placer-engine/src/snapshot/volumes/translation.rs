//! In-tree volume to CSI translation as kube-scheduler uses it (`k8s.io/csi-translation-lib`,
//! v1.36): which in-tree plugin a PV or an inline volume belongs to, the CSI driver it
//! migrated to, and the translated volume handle that identifies one volume across pods
//! (NodeVolumeLimits, with its `isCSIMigrationOn`); and the translated node affinity of an
//! in-tree PV (VolumeBinding's `tryTranslatePVToCSI`, on a node whose CSINode lists the
//! plugin in `storage.alpha.kubernetes.io/migrated-plugins`).
//!
//! The library knows seven in-tree plugins; the scheduler counts only those whose
//! migration is complete (AWS EBS, GCE PD, Azure Disk, Cinder, Portworx), and only on a
//! node with a CSINode. Azure File and vSphere volumes are recognized (an unbound claim of
//! such a class is not counted under the in-tree name) but never counted.

use std::borrow::Cow;

use placer_api::k8s::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume, Volume, VolumeNodeAffinity,
};
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

/// The CSINode annotation listing the in-tree plugins migrated on the node
/// (`v1.MigratedPluginsAnnotationKey`), comma-separated.
pub const MIGRATED_PLUGINS_ANNOTATION: &str = "storage.alpha.kubernetes.io/migrated-plugins";

const ZONE_GA: &str = "topology.kubernetes.io/zone";
const REGION_GA: &str = "topology.kubernetes.io/region";
const ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
const REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";
/// `labelMultiZoneDelimiter`.
const MULTI_ZONE_DELIMITER: &str = "__";

/// The CSI topology key an in-tree PV's zone becomes (`AWSEBSTopologyKey`,
/// `GCEPDTopologyKey`, `CinderTopologyKey`); the other plugins' translators leave the node
/// affinity as it is.
fn csi_topology_key(plugin: &str) -> Option<&'static str> {
    match plugin {
        AWS_EBS => Some("topology.ebs.csi.aws.com/zone"),
        GCE_PD => Some("topology.gke.io/zone"),
        CINDER => Some("topology.cinder.csi.openstack.org/zone"),
        _ => None,
    }
}

/// VolumeBinding's `isPluginMigratedToCSIOnNode`: the node's CSINode lists the plugin in
/// [`MIGRATED_PLUGINS_ANNOTATION`].
pub fn migrated_on_node(csi_node: Option<&CSINode>, plugin: &str) -> bool {
    csi_node
        .and_then(|n| n.metadata.annotations.as_ref())
        .and_then(|a| a.get(MIGRATED_PLUGINS_ANNOTATION))
        .is_some_and(|list| list.split(',').any(|p| p == plugin))
}

fn terms_mut(pv: &mut PersistentVolume) -> Option<&mut Vec<NodeSelectorTerm>> {
    let terms = &mut pv.spec.as_mut()?.node_affinity.as_mut()?.required.as_mut()?.node_selector_terms;
    Some(terms)
}

/// `TopologyKeyExist`.
fn key_exists(pv: &PersistentVolume, key: &str) -> bool {
    let Some(required) =
        pv.spec.as_ref().and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref())
    else {
        return false;
    };
    required
        .node_selector_terms
        .iter()
        .flat_map(|t| t.match_expressions.iter().flatten())
        .any(|r| r.key == key)
}

/// `getTopologyValues`: the values of `key` in the PV's node affinity, sorted and unique.
fn topology_values(pv: &PersistentVolume, key: &str) -> Vec<String> {
    let Some(required) =
        pv.spec.as_ref().and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref())
    else {
        return Vec::new();
    };
    let values: std::collections::BTreeSet<&String> = required
        .node_selector_terms
        .iter()
        .flat_map(|t| t.match_expressions.iter().flatten())
        .filter(|r| r.key == key)
        .flat_map(|r| r.values.iter().flatten())
        .collect();
    values.into_iter().cloned().collect()
}

/// `replaceTopology`: every requirement on `old` now reads `new`.
fn replace_topology(pv: &mut PersistentVolume, old: &str, new: &str) {
    if let Some(terms) = terms_mut(pv) {
        for r in terms.iter_mut().flat_map(|t| t.match_expressions.iter_mut().flatten()) {
            if r.key == old {
                r.key = new.to_string();
            }
        }
    }
}

/// `addTopology`: `key In zones` (trimmed, unique, sorted) added to every term, creating
/// the affinity and one term when missing; nothing without a zone.
fn add_topology(pv: &mut PersistentVolume, key: &str, zones: &[&str]) {
    let zones: std::collections::BTreeSet<&str> =
        zones.iter().map(|z| z.trim()).filter(|z| !z.is_empty()).collect();
    if zones.is_empty() {
        return;
    }
    let spec = pv.spec.get_or_insert_with(Default::default);
    let affinity = spec.node_affinity.get_or_insert_with(VolumeNodeAffinity::default);
    let required = affinity.required.get_or_insert_with(NodeSelector::default);
    if required.node_selector_terms.is_empty() {
        required.node_selector_terms.push(NodeSelectorTerm::default());
    }
    let requirement = NodeSelectorRequirement {
        key: key.to_string(),
        operator: "In".to_string(),
        values: Some(zones.into_iter().map(str::to_string).collect()),
    };
    for t in &mut required.node_selector_terms {
        t.match_expressions.get_or_insert_with(Vec::new).push(requirement.clone());
    }
}

/// `translateTopologyFromInTreeToCSI`: the zone requirement (GA or beta, whichever the
/// node affinity, else the labels, use; GA by default) becomes `csi_key`, or without one
/// the zone label's values (`__`-separated) are added under `csi_key`; a beta region
/// requirement becomes the GA region.
fn translate_topology(pv: &mut PersistentVolume, csi_key: &str) {
    let label = |pv: &PersistentVolume, k: &str| pv.metadata.labels.as_ref().and_then(|l| l.get(k)).cloned();
    let (zone, region) = if key_exists(pv, ZONE_GA) {
        (ZONE_GA, REGION_GA)
    } else if key_exists(pv, ZONE_BETA) {
        (ZONE_BETA, REGION_BETA)
    } else if label(pv, ZONE_GA).is_some() {
        (ZONE_GA, REGION_GA)
    } else if label(pv, ZONE_BETA).is_some() {
        (ZONE_BETA, REGION_BETA)
    } else {
        (ZONE_GA, REGION_GA)
    };
    if !topology_values(pv, zone).is_empty() {
        replace_topology(pv, zone, csi_key);
    } else if let Some(value) = label(pv, zone) {
        add_topology(pv, csi_key, &value.split(MULTI_ZONE_DELIMITER).collect::<Vec<_>>());
    }
    if region == REGION_BETA && !topology_values(pv, region).is_empty() {
        replace_topology(pv, region, REGION_GA);
    }
}

/// VolumeBinding's `tryTranslatePVToCSI`: a PV of an in-tree plugin whose migration is
/// complete (every gate GA in v1.36), on a node whose CSINode says the plugin is migrated,
/// is checked with its translated node affinity (AWS EBS, GCE PD and Cinder zones become
/// their CSI driver's topology key); any other PV as it is. An error is
/// `TranslateInTreePVToCSI`'s (e.g. an EBS volume id that does not parse).
pub fn pv_for_node_affinity<'a>(
    pv: &'a PersistentVolume,
    csi_node: Option<&CSINode>,
) -> Result<Cow<'a, PersistentVolume>, String> {
    let Some(plugin) = pv_plugin(pv) else { return Ok(Cow::Borrowed(pv)) };
    if !matches!(plugin, AWS_EBS | PORTWORX | GCE_PD | AZURE_DISK | CINDER)
        || !migrated_on_node(csi_node, plugin)
    {
        return Ok(Cow::Borrowed(pv));
    }
    translate_pv(pv).map_err(|e| format!("could not translate pv: {e}"))?;
    let Some(key) = csi_topology_key(plugin) else { return Ok(Cow::Borrowed(pv)) };
    let mut translated = pv.clone();
    translate_topology(&mut translated, key);
    Ok(Cow::Owned(translated))
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

    fn pv_of(v: serde_json::Value) -> PersistentVolume {
        serde_json::from_value(v).unwrap()
    }

    fn affinity(pv: &PersistentVolume) -> serde_json::Value {
        serde_json::to_value(pv.spec.as_ref().unwrap().node_affinity.as_ref()).unwrap()
    }

    fn migrated(plugins: &str) -> CSINode {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "node1", "annotations": {MIGRATED_PLUGINS_ANNOTATION: plugins}},
            "spec": {"drivers": []},
        }))
        .unwrap()
    }

    #[test]
    fn in_tree_pv_node_affinity_is_translated_only_where_the_plugin_is_migrated() {
        // binder_test.go makeTestPVForCSIMigration: a GCE PD PV with zone labels, no affinity.
        let pv = pv_of(serde_json::json!({
            "metadata": {"name": "pv", "labels": {ZONE_BETA: "us-east-1", REGION_BETA: "us-east-1a"}},
            "spec": {"gcePersistentDisk": {"pdName": "test-disk"}},
        }));
        let t = pv_for_node_affinity(&pv, Some(&migrated("kubernetes.io/gce-pd"))).unwrap();
        assert_eq!(
            affinity(&t),
            serde_json::json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.gke.io/zone", "operator": "In", "values": ["us-east-1"]}
            ]}]}})
        );
        for node in [None, Some(migrated("")), Some(migrated("kubernetes.io/aws-ebs"))] {
            assert!(matches!(pv_for_node_affinity(&pv, node.as_ref()).unwrap(), Cow::Borrowed(_)));
        }
    }

    #[test]
    fn zone_requirements_are_renamed_and_beta_regions_become_ga() {
        let pv = pv_of(serde_json::json!({
            "metadata": {"name": "pv", "labels": {ZONE_GA: "ignored"}},
            "spec": {
                "awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [
                    {"matchExpressions": [
                        {"key": ZONE_BETA, "operator": "In", "values": ["us-east-1a"]},
                        {"key": REGION_BETA, "operator": "In", "values": ["us-east-1"]},
                    ]},
                    {"matchExpressions": [{"key": "other", "operator": "Exists"}]},
                ]}},
            },
        }));
        let t =
            pv_for_node_affinity(&pv, Some(&migrated("kubernetes.io/gce-pd,kubernetes.io/aws-ebs"))).unwrap();
        assert_eq!(
            affinity(&t),
            serde_json::json!({"required": {"nodeSelectorTerms": [
                {"matchExpressions": [
                    {"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": ["us-east-1a"]},
                    {"key": REGION_GA, "operator": "In", "values": ["us-east-1"]},
                ]},
                {"matchExpressions": [{"key": "other", "operator": "Exists"}]},
            ]}})
        );
        // Zones from a multi-zone label are added to every term, trimmed, unique, sorted.
        let pv = pv_of(serde_json::json!({
            "metadata": {"name": "pv", "labels": {ZONE_GA: "b__a__ __a"}},
            "spec": {
                "cinder": {"volumeID": "v"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "x", "operator": "Exists"}]},
                    {"matchExpressions": [{"key": "y", "operator": "Exists"}]},
                ]}},
            },
        }));
        let t = pv_for_node_affinity(&pv, Some(&migrated("kubernetes.io/cinder"))).unwrap();
        let zone = serde_json::json!({"key": "topology.cinder.csi.openstack.org/zone", "operator": "In", "values": ["a", "b"]});
        assert_eq!(
            affinity(&t),
            serde_json::json!({"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "x", "operator": "Exists"}, zone]},
                {"matchExpressions": [{"key": "y", "operator": "Exists"}, zone]},
            ]}})
        );
        // Azure Disk's and Portworx's translators keep the affinity; a handle that does not
        // translate is an error.
        let disk = pv_of(serde_json::json!({
            "metadata": {"name": "pv", "labels": {ZONE_GA: "z"}},
            "spec": {"azureDisk": {"diskName": "d", "diskURI": "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/disks/d"}},
        }));
        assert!(affinity(&pv_for_node_affinity(&disk, Some(&migrated(AZURE_DISK))).unwrap()).is_null());
        let bad = pv_of(serde_json::json!({
            "metadata": {"name": "pv"},
            "spec": {"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/disk-1"}},
        }));
        let err = pv_for_node_affinity(&bad, Some(&migrated(AWS_EBS))).unwrap_err();
        assert!(err.starts_with("could not translate pv: Invalid format"), "{err}");
    }
}
