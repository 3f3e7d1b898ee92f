//! The mapping between the store's [`Kind`]s and kube's typed and dynamic APIs.

use std::fmt::Debug;

use kube::core::{ApiResource, DynamicObject};
use kube::{Api, Client};
use placer_api::k8s::api::batch::v1::{CronJob, Job};
use placer_api::k8s::api::coordination::v1::Lease;
use placer_api::k8s::api::core::v1::{Event, Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use placer_api::k8s::api::policy::v1::PodDisruptionBudget;
use placer_api::k8s::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use placer_api::k8s::api::scheduling::v1::PriorityClass;
use placer_api::k8s::api::scheduling::v1alpha2::{PodGroup, Workload};
use placer_api::k8s::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};
use placer_cluster::{Kind, Object, StoreError};
use serde::de::DeserializeOwned;

/// A Kubernetes type the store holds as one of [`Kind`].
pub(crate) trait KindType:
    kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
    const KIND: Kind;
    fn into_object(self) -> Object;
}

macro_rules! kind_type {
    ($t:ty, $k:ident) => {
        impl KindType for $t {
            const KIND: Kind = Kind::$k;
            fn into_object(self) -> Object {
                Object::$k(self.into())
            }
        }
    };
}

kind_type!(Node, Node);
kind_type!(Pod, Pod);
kind_type!(PodGroup, PodGroup);
kind_type!(Workload, Workload);
kind_type!(Job, Job);
kind_type!(CronJob, CronJob);
kind_type!(PriorityClass, PriorityClass);
kind_type!(PodDisruptionBudget, PodDisruptionBudget);
kind_type!(Namespace, Namespace);
kind_type!(Event, Event);
kind_type!(Lease, Lease);
kind_type!(DeviceClass, DeviceClass);
kind_type!(ResourceSlice, ResourceSlice);
kind_type!(ResourceClaim, ResourceClaim);
kind_type!(ResourceClaimTemplate, ResourceClaimTemplate);
kind_type!(PersistentVolumeClaim, PersistentVolumeClaim);
kind_type!(PersistentVolume, PersistentVolume);
kind_type!(StorageClass, StorageClass);
kind_type!(CSINode, CSINode);
kind_type!(CSIDriver, CSIDriver);
kind_type!(CSIStorageCapacity, CSIStorageCapacity);
kind_type!(VolumeAttachment, VolumeAttachment);

/// Group, version and plural of a kind.
pub(crate) fn api_resource(kind: Kind) -> ApiResource {
    match kind {
        Kind::Node => ApiResource::erase::<Node>(&()),
        Kind::Pod => ApiResource::erase::<Pod>(&()),
        Kind::PodGroup => ApiResource::erase::<PodGroup>(&()),
        Kind::Workload => ApiResource::erase::<Workload>(&()),
        Kind::Job => ApiResource::erase::<Job>(&()),
        Kind::CronJob => ApiResource::erase::<CronJob>(&()),
        Kind::PriorityClass => ApiResource::erase::<PriorityClass>(&()),
        Kind::PodDisruptionBudget => ApiResource::erase::<PodDisruptionBudget>(&()),
        Kind::Namespace => ApiResource::erase::<Namespace>(&()),
        Kind::Event => ApiResource::erase::<Event>(&()),
        Kind::Lease => ApiResource::erase::<Lease>(&()),
        Kind::DeviceClass => ApiResource::erase::<DeviceClass>(&()),
        Kind::ResourceSlice => ApiResource::erase::<ResourceSlice>(&()),
        Kind::ResourceClaim => ApiResource::erase::<ResourceClaim>(&()),
        Kind::ResourceClaimTemplate => ApiResource::erase::<ResourceClaimTemplate>(&()),
        Kind::PersistentVolumeClaim => ApiResource::erase::<PersistentVolumeClaim>(&()),
        Kind::PersistentVolume => ApiResource::erase::<PersistentVolume>(&()),
        Kind::StorageClass => ApiResource::erase::<StorageClass>(&()),
        Kind::CSINode => ApiResource::erase::<CSINode>(&()),
        Kind::CSIDriver => ApiResource::erase::<CSIDriver>(&()),
        Kind::CSIStorageCapacity => ApiResource::erase::<CSIStorageCapacity>(&()),
        Kind::VolumeAttachment => ApiResource::erase::<VolumeAttachment>(&()),
    }
}

/// The dynamic API of `kind` in `namespace` (ignored for cluster-scoped kinds).
pub(crate) fn dynamic_api(client: Client, kind: Kind, namespace: &str) -> Api<DynamicObject> {
    let ar = api_resource(kind);
    if kind.namespaced() {
        Api::namespaced_with(client, namespace, &ar)
    } else {
        Api::all_with(client, &ar)
    }
}

/// A store object as a kube dynamic object (same JSON).
pub(crate) fn to_dynamic(obj: &Object) -> Result<DynamicObject, StoreError> {
    serde_json::from_value(obj.to_json()).map_err(|e| StoreError::Invalid {
        what: obj.object_ref(),
        message: format!("cannot encode the object: {e}"),
    })
}

/// An API answer back into a store object of `kind`.
pub(crate) fn from_dynamic(kind: Kind, obj: DynamicObject) -> Result<Object, StoreError> {
    let value = serde_json::to_value(&obj)
        .map_err(|e| StoreError::Other(format!("cannot re-encode a {kind} from the API: {e}")))?;
    from_json(kind, value)
}

pub(crate) fn from_json(kind: Kind, mut value: serde_json::Value) -> Result<Object, StoreError> {
    // Some answers (and the dynamic type) may omit apiVersion/kind; k8s-openapi insists on them.
    if let Some(map) = value.as_object_mut() {
        map.entry("apiVersion").or_insert_with(|| kind.api_version().into());
        map.entry("kind").or_insert_with(|| kind.name().into());
    }
    Object::from_json(kind, value)
        .map_err(|e| StoreError::Other(format!("cannot decode a {kind} from the API: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_resources_point_at_the_served_groups() {
        let pg = api_resource(Kind::PodGroup);
        assert_eq!(
            (pg.group.as_str(), pg.version.as_str(), pg.plural.as_str()),
            ("scheduling.k8s.io", "v1alpha2", "podgroups")
        );
        assert_eq!(api_resource(Kind::Pod).plural, "pods");
        assert_eq!(api_resource(Kind::PodDisruptionBudget).api_version, "policy/v1");
        for kind in Kind::ALL {
            assert_eq!(api_resource(kind).kind, kind.name());
            assert_eq!(api_resource(kind).api_version, kind.api_version());
        }
    }

    #[test]
    fn objects_round_trip_through_the_dynamic_type() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("p".into());
        pod.metadata.namespace = Some("ns".into());
        let obj = Object::Pod(pod.into());
        let dynamic = to_dynamic(&obj).unwrap();
        assert_eq!(from_dynamic(Kind::Pod, dynamic).unwrap(), obj);
    }
}
