//! Events the embedded controllers record become core `v1` Event objects, as client-go's
//! recorder makes them: named `<object>.<hex timestamp>`, repeats within ten minutes
//! counted on one object, and deleted after a time to live (kube-apiserver's
//! `--event-ttl`, one hour by default).

use std::collections::{HashMap, VecDeque};

use placer_api::k8s::api::core::v1::{Event, EventSource, ObjectReference};
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use placer_cluster::embedded::{EmbeddedCluster, EPOCH_UNIX_MS};
use placer_cluster::{ClusterStore, EventRecord, Kind, Object, ObjectRef, StoreError, WatchEvent};

/// Repeats of an event within this window are counted on one object.
const AGGREGATION_WINDOW_MS: u64 = 10 * 60 * 1000;

/// Records kept for [`ClusterStore::events`].
const RECENT: usize = 1000;

/// What makes two events the same (client-go's aggregation key, the object's uid included).
type Key = (ObjectRef, Option<String>, String, String, String, String);

/// See the module documentation.
#[derive(Debug, Default)]
pub struct EventRecorder {
    /// Aggregation key → (event name, store time of the last occurrence).
    latest: HashMap<Key, (String, u64)>,
    recent: VecDeque<EventRecord>,
    sequence: u64,
    /// Instance name in `reportingInstance`.
    pub instance: String,
}

impl EventRecorder {
    pub fn new(instance: &str) -> EventRecorder {
        EventRecorder { instance: instance.to_string(), ..EventRecorder::default() }
    }

    /// Creates or updates the Event object for `record`.
    pub fn record(&mut self, store: &mut EmbeddedCluster, record: &EventRecord) {
        if self.recent.len() >= RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(record.clone());
        let now_ms = store.now_ms();
        let now = store.now();
        let uid = store.get(&record.regarding).and_then(|o| o.metadata().uid.clone());
        let key: Key = (
            record.regarding.clone(),
            uid.clone(),
            record.type_.clone(),
            record.reason.clone(),
            record.note.clone(),
            record.reporter.clone(),
        );
        let namespace = if record.regarding.namespace.is_empty() {
            "default".to_string()
        } else {
            record.regarding.namespace.clone()
        };
        if let Some((name, last)) = self.latest.get(&key).cloned() {
            if now_ms.saturating_sub(last) <= AGGREGATION_WINDOW_MS {
                let r = ObjectRef::new(Kind::Event, namespace.clone(), name.clone());
                if let Some(Object::Event(mut e)) = store.get(&r) {
                    e.count = Some(e.count.unwrap_or(1) + 1);
                    e.last_timestamp = Some(now.clone());
                    if store.update(Object::Event(e)).is_ok() {
                        self.latest.insert(key, (name, now_ms));
                        return;
                    }
                }
            }
        }
        self.sequence += 1;
        let unix_nanos =
            (i128::from(EPOCH_UNIX_MS) + i128::from(now_ms)) * 1_000_000 + i128::from(self.sequence);
        let name = format!("{}.{:x}", record.regarding.name, unix_nanos.max(0));
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some(record.regarding.kind.api_version().to_string()),
                kind: Some(record.regarding.kind.name().to_string()),
                name: Some(record.regarding.name.clone()),
                namespace: (!record.regarding.namespace.is_empty())
                    .then(|| record.regarding.namespace.clone()),
                uid,
                ..ObjectReference::default()
            },
            reason: Some(record.reason.clone()),
            message: Some(record.note.clone()),
            type_: Some(record.type_.clone()),
            count: Some(1),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            source: Some(EventSource { component: Some(record.reporter.clone()), host: None }),
            reporting_component: Some(record.reporter.clone()),
            reporting_instance: Some(self.instance.clone()),
            ..Event::default()
        };
        match store.create(Object::Event(event)) {
            Ok(_) => {
                self.latest.insert(key, (name, now_ms));
            }
            Err(e) => tracing::debug!(error = %e, "could not record an event"),
        }
    }

    /// Deletes Events last seen more than `ttl_ms` ago. Returns how many.
    pub fn expire(&mut self, store: &mut EmbeddedCluster, ttl_ms: u64) -> usize {
        let now_ms = store.now_ms();
        let now = store.now();
        let cutoff_unix_ms = now.0.as_millisecond() - i64::try_from(ttl_ms).unwrap_or(i64::MAX);
        let old: Vec<ObjectRef> = store
            .list(Kind::Event)
            .into_iter()
            .filter(|o| match o {
                Object::Event(e) => last_seen(e).is_some_and(|t| t.0.as_millisecond() < cutoff_unix_ms),
                _ => false,
            })
            .map(|o| o.object_ref())
            .collect();
        for r in &old {
            if let Err(e) = store.delete(r) {
                if !matches!(e, StoreError::NotFound(_)) {
                    tracing::debug!(error = %e, event = %r, "could not expire an event");
                }
            }
        }
        self.latest.retain(|_, (_, last)| now_ms.saturating_sub(*last) <= ttl_ms.max(AGGREGATION_WINDOW_MS));
        old.len()
    }

    pub fn recent(&self) -> Vec<EventRecord> {
        self.recent.iter().cloned().collect()
    }
}

/// When an Event was last seen (series, last timestamp, event time, creation).
fn last_seen(e: &Event) -> Option<Time> {
    if let Some(t) = e.series.as_ref().and_then(|s| s.last_observed_time.as_ref()) {
        return Some(Time(t.0));
    }
    e.last_timestamp
        .clone()
        .or_else(|| e.event_time.as_ref().map(|t| Time(t.0)))
        .or_else(|| e.metadata.creation_timestamp.clone())
}

/// The embedded store as the controllers see it in `placer cluster`: recorded events
/// become Event objects.
pub struct ControllerStore<'a> {
    pub store: &'a mut EmbeddedCluster,
    pub events: &'a mut EventRecorder,
}

impl ClusterStore for ControllerStore<'_> {
    fn now_ms(&self) -> u64 {
        self.store.now_ms()
    }
    fn now(&self) -> Time {
        self.store.now()
    }
    fn resource_version(&self) -> u64 {
        self.store.resource_version()
    }
    fn get(&self, r: &ObjectRef) -> Option<Object> {
        self.store.get(r)
    }
    fn list(&self, kind: Kind) -> Vec<Object> {
        self.store.list(kind)
    }
    fn create(&mut self, obj: Object) -> Result<Object, StoreError> {
        self.store.create(obj)
    }
    fn update(&mut self, obj: Object) -> Result<Object, StoreError> {
        self.store.update(obj)
    }
    fn update_status(&mut self, obj: Object) -> Result<Object, StoreError> {
        self.store.update_status(obj)
    }
    fn merge_patch(&mut self, r: &ObjectRef, patch: &serde_json::Value) -> Result<Object, StoreError> {
        self.store.merge_patch(r, patch)
    }
    fn delete(&mut self, r: &ObjectRef) -> Result<(), StoreError> {
        self.store.delete(r)
    }
    fn bind(&mut self, namespace: &str, name: &str, uid: &str, node: &str) -> Result<(), StoreError> {
        self.store.bind(namespace, name, uid, node)
    }
    fn record_event(&mut self, event: EventRecord) {
        self.events.record(self.store, &event);
    }
    fn events(&self) -> Vec<EventRecord> {
        self.events.recent()
    }
    fn watch_since(&self, after: u64) -> Vec<WatchEvent> {
        self.store.watch_since(after)
    }
    fn changed_since(&self, after: u64, kinds: &[placer_cluster::Kind]) -> bool {
        self.store.changed_since(after, kinds)
    }
    fn visit_events_since(&self, after: u64, f: &mut dyn FnMut(&WatchEvent)) {
        self.store.visit_events_since(after, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::api::core::v1::Pod;

    fn record(reason: &str) -> EventRecord {
        EventRecord {
            regarding: ObjectRef::new(Kind::Pod, "demo", "p"),
            type_: "Warning".into(),
            reason: reason.into(),
            note: "0/4 nodes are available".into(),
            reporter: "placer-scheduler".into(),
            time_ms: 0,
        }
    }

    #[test]
    fn events_become_objects_and_repeats_are_counted() {
        let mut store = EmbeddedCluster::new();
        let mut pod = Pod::default();
        pod.metadata.name = Some("p".into());
        pod.metadata.namespace = Some("demo".into());
        let uid = store.create(Object::Pod(pod.into())).unwrap().metadata().uid.clone();
        let mut rec = EventRecorder::new("test");
        rec.record(&mut store, &record("FailedScheduling"));
        store.advance_ms(1000);
        rec.record(&mut store, &record("FailedScheduling"));
        rec.record(&mut store, &record("Other"));
        let events = store.list(Kind::Event);
        assert_eq!(events.len(), 2);
        let Object::Event(e) =
            &events.iter().find(|e| e.metadata().name.as_deref().unwrap().starts_with("p.")).unwrap()
        else {
            unreachable!()
        };
        let first = events
            .iter()
            .filter_map(|o| match o {
                Object::Event(e) if e.reason.as_deref() == Some("FailedScheduling") => Some(e.clone()),
                _ => None,
            })
            .next()
            .unwrap();
        assert_eq!(first.count, Some(2));
        assert_eq!(first.involved_object.uid, uid);
        assert_eq!(first.involved_object.kind.as_deref(), Some("Pod"));
        assert_eq!(e.metadata.namespace.as_deref(), Some("demo"));
        // A recreated pod of the same name gets its own event.
        store.delete(&ObjectRef::new(Kind::Pod, "demo", "p")).unwrap();
        let mut again = Pod::default();
        again.metadata.name = Some("p".into());
        again.metadata.namespace = Some("demo".into());
        let new_uid = store.create(Object::Pod(again.into())).unwrap().metadata().uid.clone();
        rec.record(&mut store, &record("Other"));
        let uids: Vec<Option<String>> = store
            .list(Kind::Event)
            .iter()
            .filter_map(|o| match o {
                Object::Event(e) if e.reason.as_deref() == Some("Other") => {
                    Some(e.involved_object.uid.clone())
                }
                _ => None,
            })
            .collect();
        assert_eq!(uids.len(), 2);
        assert!(uids.contains(&new_uid) && uids.contains(&uid));
        store.advance_ms(3_700_000);
        rec.record(&mut store, &record("Late"));
        assert_eq!(rec.expire(&mut store, 3_600_000), 3);
        assert_eq!(store.list(Kind::Event).len(), 1);
    }
}
