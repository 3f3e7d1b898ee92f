//! Storage objects in ([`StorageEvent`]): claims, volumes, classes, CSI nodes, drivers,
//! storage capacities and volume attachments
//! update the snapshot's volume state, and unschedulable pods are moved on (a claim may
//! have been bound, a volume created, a class added).

use std::sync::Arc;

use placer_api::k8s::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use placer_api::k8s::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};

use super::Engine;
use crate::model::ObjectKey;

/// A change of a storage object, fed to [`Engine::apply`] as [`super::ClusterEvent::Storage`].
#[derive(Debug, Clone)]
pub enum StorageEvent {
    ClaimUpserted(Arc<PersistentVolumeClaim>),
    ClaimDeleted(ObjectKey),
    VolumeUpserted(Arc<PersistentVolume>),
    VolumeDeleted(String),
    ClassUpserted(Arc<StorageClass>),
    ClassDeleted(String),
    CsiNodeUpserted(Arc<CSINode>),
    CsiNodeDeleted(String),
    CsiDriverUpserted(Arc<CSIDriver>),
    CsiDriverDeleted(String),
    CapacityUpserted(Arc<CSIStorageCapacity>),
    CapacityDeleted(ObjectKey),
    AttachmentUpserted(Arc<VolumeAttachment>),
    AttachmentDeleted(String),
}

impl Engine {
    pub(super) fn apply_storage(&mut self, event: StorageEvent, now_ms: u64) {
        let v = self.snapshot.volumes_mut();
        match event {
            StorageEvent::ClaimUpserted(c) => v.upsert_pvc(c),
            StorageEvent::ClaimDeleted(k) => v.remove_pvc(&k),
            StorageEvent::VolumeUpserted(pv) => v.upsert_pv(pv),
            StorageEvent::VolumeDeleted(n) => v.remove_pv(&n),
            StorageEvent::ClassUpserted(c) => v.upsert_class(c),
            StorageEvent::ClassDeleted(n) => v.remove_class(&n),
            StorageEvent::CsiNodeUpserted(n) => v.upsert_csi_node(n),
            StorageEvent::CsiNodeDeleted(n) => v.remove_csi_node(&n),
            StorageEvent::CsiDriverUpserted(d) => v.upsert_csi_driver(d),
            StorageEvent::CsiDriverDeleted(n) => v.remove_csi_driver(&n),
            StorageEvent::CapacityUpserted(c) => v.upsert_capacity(c),
            StorageEvent::CapacityDeleted(k) => v.remove_capacity(&k),
            StorageEvent::AttachmentUpserted(a) => v.upsert_attachment(a),
            StorageEvent::AttachmentDeleted(n) => v.remove_attachment(&n),
        }
        self.queue.move_all_unschedulable(now_ms, |_| true);
    }
}
