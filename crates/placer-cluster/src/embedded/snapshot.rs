//! Saving and restoring an [`EmbeddedCluster`]: a [`Snapshot`] of every object and the
//! counters, and [`EmbeddedCluster::replay`] of changes logged after it (a journal), so a
//! process can be killed and restarted from the same state (`placer cluster --state`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::EmbeddedCluster;
use crate::{Kind, Object, WatchEvent, WatchEventKind};

/// The store's counters: the last resourceVersion, the clock and the uid / generated-name
/// sequences. A restored store continues them, so no uid or name is handed out twice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Counters {
    pub resource_version: u64,
    pub now_ms: u64,
    pub uid_counter: u64,
    pub name_counter: u64,
}

/// Every object of a store (as JSON, with `apiVersion` and `kind`) and its counters. The
/// watch log, recorded events and admission hooks are not part of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    #[serde(flatten)]
    pub counters: Counters,
    pub objects: Vec<Value>,
}

/// A snapshot or journal entry that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("object {index}: {message}")]
pub struct SnapshotError {
    /// Position of the object in the snapshot.
    pub index: usize,
    pub message: String,
}

/// Reads one stored object, taking its kind from `apiVersion` and `kind`.
pub fn object_from_json(value: Value) -> Result<Object, String> {
    let field = |name: &str| value.get(name).and_then(Value::as_str).unwrap_or_default().to_string();
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    let kind = Kind::from_type(&api_version, &kind)
        .ok_or_else(|| format!("unknown apiVersion/kind {api_version:?} {kind:?}"))?;
    Object::from_json(kind, value).map_err(|e| e.to_string())
}

impl EmbeddedCluster {
    /// The store's counters (see [`Counters`]).
    pub fn counters(&self) -> Counters {
        Counters {
            resource_version: self.resource_version,
            now_ms: self.now_ms,
            uid_counter: self.uid_counter,
            name_counter: self.name_counter,
        }
    }

    /// Every object and the counters.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot { counters: self.counters(), objects: self.objects.values().map(Object::to_json).collect() }
    }

    /// A store holding exactly the snapshot's objects (with their uids, resourceVersions and
    /// timestamps), continuing its counters. Its watch log starts empty at the snapshot's
    /// resourceVersion. Admission hooks must be added again.
    pub fn from_snapshot(snapshot: Snapshot) -> Result<EmbeddedCluster, SnapshotError> {
        let mut store = EmbeddedCluster::new();
        for (index, value) in snapshot.objects.into_iter().enumerate() {
            let obj = object_from_json(value).map_err(|message| SnapshotError { index, message })?;
            store.insert_indexed(obj.object_ref(), obj);
        }
        store.set_counters(snapshot.counters);
        store.log_floor = store.resource_version;
        Ok(store)
    }

    /// Applies a change taken from another store's watch log after a snapshot (a journal
    /// entry), then that store's counters at the time. The event is appended to the watch
    /// log, so watchers that had seen the snapshot's version can carry on.
    pub fn replay(&mut self, event: &WatchEvent, counters: Counters) {
        let r = event.object.object_ref();
        match event.kind {
            WatchEventKind::Added | WatchEventKind::Modified => self.insert_indexed(r, event.object.clone()),
            WatchEventKind::Deleted => {
                if let Some(old) = self.objects.remove(&r) {
                    self.unindex(&r, &old);
                }
            }
        }
        let last = self.log.last().map_or(self.log_floor, |e| e.resource_version);
        if event.resource_version > last {
            self.log.push(event.clone());
        }
        self.set_counters(counters);
    }

    fn set_counters(&mut self, c: Counters) {
        self.resource_version = self.resource_version.max(c.resource_version);
        self.now_ms = self.now_ms.max(c.now_ms);
        self.uid_counter = self.uid_counter.max(c.uid_counter);
        self.name_counter = self.name_counter.max(c.name_counter);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ClusterStore, ObjectRef};
    use placer_api::k8s::api::core::v1::{Node, Pod};
    use placer_api::k8s::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    fn pod(name: &str) -> Object {
        Object::pod(Pod {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            spec: Some(Default::default()),
            ..Default::default()
        })
    }

    #[test]
    fn a_restored_store_has_the_same_objects_and_continues_the_counters() {
        let mut a = EmbeddedCluster::new();
        a.advance_ms(5_000);
        let owner = a
            .create(Object::node(Node {
                metadata: ObjectMeta { name: Some("n1".into()), ..Default::default() },
                ..Default::default()
            }))
            .unwrap();
        let mut child = pod("");
        child.metadata_mut().generate_name = Some("p-".into());
        child.metadata_mut().owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: "n1".into(),
            uid: owner.metadata().uid.clone().unwrap(),
            ..Default::default()
        }]);
        a.create(child.clone()).unwrap();
        let text = serde_json::to_string(&a.snapshot()).unwrap();
        let mut b = EmbeddedCluster::from_snapshot(serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!(b.objects().collect::<Vec<_>>(), a.objects().collect::<Vec<_>>());
        assert_eq!((b.resource_version(), b.now_ms(), b.log_floor()), (2, 5_000, 2));
        // Both continue identically: same next uid, name and resourceVersion.
        assert_eq!(b.create(child.clone()).unwrap(), a.create(child).unwrap());
        // The owner index was rebuilt: deleting the node collects its pods.
        b.delete(&ObjectRef::new(Kind::Node, "", "n1")).unwrap();
        assert!(b.list(Kind::Pod).is_empty());
    }

    #[test]
    fn replaying_a_journal_reaches_the_same_state_and_keeps_watchers_going() {
        let mut a = EmbeddedCluster::new();
        a.create(pod("x")).unwrap();
        let snapshot = a.snapshot();
        let from = a.resource_version();
        a.create(pod("y")).unwrap();
        a.delete(&ObjectRef::new(Kind::Pod, "default", "x")).unwrap();
        let mut b = EmbeddedCluster::from_snapshot(snapshot).unwrap();
        for e in a.watch_since(from) {
            b.replay(&e, a.counters());
        }
        assert_eq!(b.objects().collect::<Vec<_>>(), a.objects().collect::<Vec<_>>());
        assert_eq!(b.counters(), a.counters());
        assert_eq!(b.log_since(from).unwrap().len(), 2, "a watcher at the snapshot's version resumes");
        assert!(b.log_since(from - 1).is_err());
    }

    #[test]
    fn unknown_objects_are_reported_by_position() {
        let snapshot = Snapshot {
            counters: Counters::default(),
            objects: vec![serde_json::json!({"apiVersion": "v9", "kind": "Thing"})],
        };
        let err = EmbeddedCluster::from_snapshot(snapshot).unwrap_err();
        assert_eq!(err.to_string(), "object 0: unknown apiVersion/kind \"v9\" \"Thing\"");
    }
}
