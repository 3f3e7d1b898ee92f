//! The resources the server serves: for each, its group, version, plural and singular
//! names, short names, scope, subresources and the store [`Kind`] behind it.
//!
//! `events.k8s.io/v1` Events are the same objects as core `v1` Events, converted on the
//! way in and out ([`Conversion::EventsV1`]), as kube-apiserver stores both in one place.

use placer_cluster::Kind;

/// How objects of a resource are read from and written to the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conversion {
    /// Stored as served.
    None,
    /// Served as `events.k8s.io/v1` Event, stored as core `v1` Event.
    EventsV1,
}

/// One served resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    pub kind: Kind,
    /// API group (`""` for the core group).
    pub group: &'static str,
    pub version: &'static str,
    /// The kind name as served (`Event` for both event resources).
    pub kind_name: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    /// Subresources: `status`, `binding`, `eviction`.
    pub subresources: &'static [&'static str],
    pub conversion: Conversion,
}

impl Resource {
    /// `apiVersion` of the served objects: `v1`, `batch/v1`, ...
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn namespaced(&self) -> bool {
        self.kind.namespaced()
    }

    /// `pods`, `jobs.batch`: the resource as named in error messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub fn has_status(&self) -> bool {
        self.subresources.contains(&"status")
    }
}

const ALL_CATEGORY: &[&str] = &["all"];
const VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

/// Every resource served, in discovery order.
pub const RESOURCES: &[Resource] = &[
    Resource {
        kind: Kind::Pod,
        group: "",
        version: "v1",
        kind_name: "Pod",
        plural: "pods",
        singular: "pod",
        short_names: &["po"],
        categories: ALL_CATEGORY,
        subresources: &["status", "binding", "eviction"],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::Node,
        group: "",
        version: "v1",
        kind_name: "Node",
        plural: "nodes",
        singular: "node",
        short_names: &["no"],
        categories: &[],
        subresources: &["status"],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::Namespace,
        group: "",
        version: "v1",
        kind_name: "Namespace",
        plural: "namespaces",
        singular: "namespace",
        short_names: &["ns"],
        categories: &[],
        subresources: &["status"],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::Event,
        group: "",
        version: "v1",
        kind_name: "Event",
        plural: "events",
        singular: "event",
        short_names: &["ev"],
        categories: &[],
        subresources: &[],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::PersistentVolumeClaim,
        group: "",
        version: "v1",
        kind_name: "PersistentVolumeClaim",
        plural: "persistentvolumeclaims",
        singular: "persistentvolumeclaim",
        short_names: &["pvc"],
        categories: &[],
        subresources: &["status"],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::PersistentVolume,
        group: "",
        version: "v1",
        kind_name: "PersistentVolume",
        plural: "persistentvolumes",
        singular: "persistentvolume",
        short_names: &["pv"],
        categories: &[],
        subresources: &["status"],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::Job,
        group: "batch",
        version: "v1",
        kind_name: "Job",
        plural: "jobs",
        singular: "job",
        short_names: &[],
        categories: ALL_CATEGORY,
        subresources: &["status"],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::CronJob,
        group: "batch",
        version: "v1",
        kind_name: "CronJob",
        plural: "cronjobs",
        singular: "cronjob",
        short_names: &["cj"],
        categories: ALL_CATEGORY,
        subresources: &["status"],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::Lease,
        group: "coordination.k8s.io",
        version: "v1",
        kind_name: "Lease",
        plural: "leases",
        singular: "lease",
        short_names: &[],
        categories: &[],
        subresources: &[],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::Event,
        group: "events.k8s.io",
        version: "v1",
        kind_name: "Event",
        plural: "events",
        singular: "event",
        short_names: &["ev"],
        categories: &[],
        subresources: &[],
        conversion: Conversion::EventsV1,
    },
    Resource {
        kind: Kind::PodDisruptionBudget,
        group: "policy",
        version: "v1",
        kind_name: "PodDisruptionBudget",
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        short_names: &["pdb"],
        categories: &[],
        subresources: &["status"],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::DeviceClass,
        group: "resource.k8s.io",
        version: "v1",
        kind_name: "DeviceClass",
        plural: "deviceclasses",
        singular: "deviceclass",
        short_names: &[],
        categories: &[],
        subresources: &[],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::ResourceSlice,
        group: "resource.k8s.io",
        version: "v1",
        kind_name: "ResourceSlice",
        plural: "resourceslices",
        singular: "resourceslice",
        short_names: &[],
        categories: &[],
        subresources: &[],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::ResourceClaim,
        group: "resource.k8s.io",
        version: "v1",
        kind_name: "ResourceClaim",
        plural: "resourceclaims",
        singular: "resourceclaim",
        short_names: &[],
        categories: &[],
        subresources: &["status"],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::ResourceClaimTemplate,
        group: "resource.k8s.io",
        version: "v1",
        kind_name: "ResourceClaimTemplate",
        plural: "resourceclaimtemplates",
        singular: "resourceclaimtemplate",
        short_names: &[],
        categories: &[],
        subresources: &[],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::PriorityClass,
        group: "scheduling.k8s.io",
        version: "v1",
        kind_name: "PriorityClass",
        plural: "priorityclasses",
        singular: "priorityclass",
        short_names: &["pc"],
        categories: &[],
        subresources: &[],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::PodGroup,
        group: "scheduling.k8s.io",
        version: "v1alpha2",
        kind_name: "PodGroup",
        plural: "podgroups",
        singular: "podgroup",
        short_names: &[],
        categories: &[],
        subresources: &["status"],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::Workload,
        group: "scheduling.k8s.io",
        version: "v1alpha2",
        kind_name: "Workload",
        plural: "workloads",
        singular: "workload",
        short_names: &[],
        categories: &[],
        subresources: &[],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::StorageClass,
        group: "storage.k8s.io",
        version: "v1",
        kind_name: "StorageClass",
        plural: "storageclasses",
        singular: "storageclass",
        short_names: &["sc"],
        categories: &[],
        subresources: &[],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::CSINode,
        group: "storage.k8s.io",
        version: "v1",
        kind_name: "CSINode",
        plural: "csinodes",
        singular: "csinode",
        short_names: &[],
        categories: &[],
        subresources: &[],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::CSIDriver,
        group: "storage.k8s.io",
        version: "v1",
        kind_name: "CSIDriver",
        plural: "csidrivers",
        singular: "csidriver",
        short_names: &[],
        categories: &[],
        subresources: &[],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::CSIStorageCapacity,
        group: "storage.k8s.io",
        version: "v1",
        kind_name: "CSIStorageCapacity",
        plural: "csistoragecapacities",
        singular: "csistoragecapacity",
        short_names: &[],
        categories: &[],
        subresources: &[],
        conversion: Conversion::None,
    },
    Resource {
        kind: Kind::VolumeAttachment,
        group: "storage.k8s.io",
        version: "v1",
        kind_name: "VolumeAttachment",
        plural: "volumeattachments",
        singular: "volumeattachment",
        short_names: &[],
        categories: &[],
        subresources: &[],
        conversion: Conversion::None,
    },
];

/// The verbs of every main resource.
pub fn verbs() -> &'static [&'static str] {
    VERBS
}

/// The verbs and served kind of a subresource: `(group, version, kind, verbs)`.
pub fn subresource_info(
    sub: &str,
    r: &Resource,
) -> (&'static str, &'static str, String, &'static [&'static str]) {
    match sub {
        "binding" => ("", "v1", "Binding".to_string(), &["create"]),
        "eviction" => ("policy", "v1", "Eviction".to_string(), &["create"]),
        _ => (r.group, r.version, r.kind_name.to_string(), &["get", "patch", "update"]),
    }
}

/// The resource `plural` of `group`/`version`.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
    RESOURCES.iter().find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource storing `kind` under its own group (events: the core one).
pub fn for_kind(kind: Kind) -> &'static Resource {
    RESOURCES.iter().find(|r| r.kind == kind && r.conversion == Conversion::None).unwrap_or(&RESOURCES[0])
}

/// Groups with their versions, in discovery order (the core group first, as `""`).
pub fn groups() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for r in RESOURCES {
        match out.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, versions)) => {
                if !versions.contains(&r.version) {
                    versions.push(r.version);
                }
            }
            None => out.push((r.group, vec![r.version])),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_store_kind_is_served_under_its_own_api_version() {
        for kind in Kind::ALL {
            let r = for_kind(kind);
            assert_eq!(r.kind, kind);
            assert_eq!(r.api_version(), kind.api_version(), "{kind}");
            assert_eq!(r.kind_name, kind.name());
        }
    }

    #[test]
    fn names_and_groups() {
        assert_eq!(find("batch", "v1", "jobs").map(Resource::qualified).as_deref(), Some("jobs.batch"));
        assert_eq!(find("", "v1", "pods").map(Resource::qualified).as_deref(), Some("pods"));
        assert!(find("", "v1", "jobs").is_none());
        let g = groups();
        assert_eq!(g[0], ("", vec!["v1"]));
        assert!(g.contains(&("scheduling.k8s.io", vec!["v1", "v1alpha2"])));
    }
}
