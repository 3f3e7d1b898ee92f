//! The driver against the embedded store: what a scenario run sees.

use super::*;
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::Time;
use placer_cluster::embedded::EmbeddedCluster;
use placer_engine::NoopObserver;
use serde_json::json;

fn create(store: &mut dyn ClusterStore, kind: Kind, v: serde_json::Value) {
    let obj = Object::from_json(kind, v).unwrap();
    store.create(obj).unwrap();
}

fn node(store: &mut dyn ClusterStore, name: &str, cpu: &str) {
    create(
        store,
        Kind::Node,
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
               "status": {"allocatable": {"cpu": cpu, "pods": "32"}}}),
    );
}

fn pod(store: &mut dyn ClusterStore, name: &str, cpu: &str, group: Option<&str>) {
    let mut spec =
        json!({"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]});
    if let Some(g) = group {
        spec["schedulingGroup"] = json!({"podGroupName": g});
    }
    create(
        store,
        Kind::Pod,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}),
    );
}

fn gang(store: &mut dyn ClusterStore, name: &str, min: i32) {
    create(
        store,
        Kind::PodGroup,
        json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
               "metadata": {"name": name, "namespace": "default"},
               "spec": {"schedulingPolicy": {"gang": {"minCount": min}}}}),
    );
}

fn controller() -> SchedulerController {
    let config =
        SchedulerConfig { pod_initial_backoff_ms: 0, pod_max_backoff_ms: 0, ..SchedulerConfig::default() };
    SchedulerController::new(config, Box::new(NoopObserver))
}

fn settle(c: &mut SchedulerController, store: &mut dyn ClusterStore) -> usize {
    let mut rounds = 0;
    while c.reconcile(store).unwrap() {
        rounds += 1;
        assert!(rounds < 20, "the driver must reach quiescence");
    }
    rounds
}

fn node_of(store: &dyn ClusterStore, name: &str) -> Option<String> {
    match store.get(&ObjectRef::new(Kind::Pod, "default", name)) {
        Some(Object::Pod(p)) => p.spec.and_then(|s| s.node_name),
        _ => None,
    }
}

fn group_condition(store: &dyn ClusterStore, name: &str) -> Option<Condition> {
    match store.get(&ObjectRef::new(Kind::PodGroup, "default", name)) {
        Some(Object::PodGroup(pg)) => pg
            .status
            .and_then(|s| s.conditions)
            .and_then(|c| c.into_iter().find(|c| c.type_ == POD_GROUP_SCHEDULED)),
        _ => None,
    }
}

#[test]
fn binds_a_gang_marks_its_group_and_records_events() {
    let mut store = EmbeddedCluster::new();
    node(&mut store, "n1", "4");
    gang(&mut store, "pg", 3);
    for i in 1..=3 {
        pod(&mut store, &format!("p{i}"), "1", Some("pg"));
    }
    let mut c = controller();
    assert!(settle(&mut c, &mut store) >= 1);
    for i in 1..=3 {
        assert_eq!(node_of(&store, &format!("p{i}")).as_deref(), Some("n1"));
    }
    let cond = group_condition(&store, "pg").unwrap();
    assert_eq!((cond.status.as_str(), cond.reason.as_str()), ("True", "Scheduled"));
    assert_eq!(cond.observed_generation, Some(1));
    assert_eq!(cond.last_transition_time, store.now());
    let scheduled: Vec<_> = store.events().into_iter().filter(|e| e.reason == "Scheduled").collect();
    assert_eq!(scheduled.len(), 3);
    assert_eq!(scheduled[0].reporter, REPORTER);
    assert_eq!(scheduled[0].note, "Successfully assigned default/p1 to n1");
    assert!(!c.reconcile(&mut store).unwrap(), "nothing left to do");
}

#[test]
fn unschedulable_gang_writes_pod_and_group_status_once() {
    let mut store = EmbeddedCluster::new();
    node(&mut store, "n1", "2");
    gang(&mut store, "pg", 3);
    for i in 1..=3 {
        pod(&mut store, &format!("p{i}"), "1", Some("pg"));
    }
    let mut c = controller();
    settle(&mut c, &mut store);
    assert!(node_of(&store, "p1").is_none());
    let Some(Object::Pod(p3)) = store.get(&ObjectRef::new(Kind::Pod, "default", "p3")) else { panic!() };
    let cond =
        p3.status.unwrap().conditions.unwrap().into_iter().find(|c| c.type_ == "PodScheduled").unwrap();
    assert_eq!(cond.status, "False");
    assert_eq!(cond.reason.as_deref(), Some("Unschedulable"));
    assert_eq!(cond.message.as_deref(), Some("0/1 nodes are available: 1 Insufficient cpu."));
    let g = group_condition(&store, "pg").unwrap();
    assert_eq!((g.status.as_str(), g.reason.as_str()), ("False", "Unschedulable"));
    assert_eq!(g.message, "2/3 pods fit: 0/1 nodes are available: 1 Insufficient cpu.");
    let failed =
        store.events().iter().filter(|e| e.reason == "FailedScheduling" && e.type_ == "Warning").count();
    assert_eq!(failed, 3);
    assert!(!c.reconcile(&mut store).unwrap(), "status writes do not requeue the pods");

    // Capacity arrives: the gang schedules and the condition flips to True.
    node(&mut store, "n2", "2");
    settle(&mut c, &mut store);
    assert!(node_of(&store, "p3").is_some());
    let g = group_condition(&store, "pg").unwrap();
    assert_eq!(g.status, "True");
}

/// A store whose binding subresource fails for one pod the first time.
struct FlakyBind {
    inner: EmbeddedCluster,
    fail_once: Option<String>,
}

impl ClusterStore for FlakyBind {
    fn now_ms(&self) -> u64 {
        self.inner.now_ms()
    }
    fn now(&self) -> Time {
        self.inner.now()
    }
    fn resource_version(&self) -> u64 {
        self.inner.resource_version()
    }
    fn get(&self, r: &ObjectRef) -> Option<Object> {
        self.inner.get(r)
    }
    fn list(&self, kind: Kind) -> Vec<Object> {
        self.inner.list(kind)
    }
    fn create(&mut self, obj: Object) -> Result<Object, StoreError> {
        self.inner.create(obj)
    }
    fn update(&mut self, obj: Object) -> Result<Object, StoreError> {
        self.inner.update(obj)
    }
    fn update_status(&mut self, obj: Object) -> Result<Object, StoreError> {
        self.inner.update_status(obj)
    }
    fn merge_patch(&mut self, r: &ObjectRef, patch: &serde_json::Value) -> Result<Object, StoreError> {
        self.inner.merge_patch(r, patch)
    }
    fn delete(&mut self, r: &ObjectRef) -> Result<(), StoreError> {
        self.inner.delete(r)
    }
    fn bind(&mut self, namespace: &str, name: &str, uid: &str, node: &str) -> Result<(), StoreError> {
        if self.fail_once.as_deref() == Some(name) {
            self.fail_once = None;
            return Err(StoreError::Other("injected failure".into()));
        }
        self.inner.bind(namespace, name, uid, node)
    }
    fn record_event(&mut self, event: EventRecord) {
        self.inner.record_event(event)
    }
    fn events(&self) -> Vec<EventRecord> {
        self.inner.events()
    }
    fn watch_since(&self, after: u64) -> Vec<WatchEvent> {
        self.inner.watch_since(after)
    }
}

#[test]
fn failed_binding_is_retried_and_reported() {
    let mut store = FlakyBind { inner: EmbeddedCluster::new(), fail_once: Some("a".into()) };
    node(&mut store, "n1", "1");
    pod(&mut store, "a", "1", None);
    let mut c = controller();
    assert!(c.reconcile(&mut store).unwrap());
    assert!(node_of(&store, "a").is_none());
    assert!(!c.engine().is_assumed(&PodKey::new("default", "a")));
    assert!(store
        .events()
        .iter()
        .any(|e| e.reason == "FailedScheduling" && e.note.contains("injected failure")));
    assert!(!store.events().iter().any(|e| e.reason == "Scheduled"), "no Scheduled event for a failed bind");
    settle(&mut c, &mut store);
    assert_eq!(node_of(&store, "a").as_deref(), Some("n1"));
}

#[test]
fn watch_events_of_other_kinds_are_ignored() {
    let ev = WatchEvent {
        resource_version: 1,
        kind: WatchEventKind::Added,
        object: Object::from_json(
            Kind::Workload,
            json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "Workload",
                   "metadata": {"name": "w", "namespace": "default"},
                   "spec": {"podGroupTemplates": [{"name": "t", "schedulingPolicy": {"basic": {}}}]}}),
        )
        .unwrap(),
    };
    assert!(cluster_event(ev).is_none());
}

#[test]
fn a_preempted_pod_is_marked_then_deleted_with_a_preempted_event() {
    let mut store = EmbeddedCluster::new();
    let mut c = controller();
    node(&mut store, "n1", "1");
    create(
        &mut store,
        Kind::Pod,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "low", "namespace": "default"},
               "spec": {"nodeName": "n1", "priority": 1,
                        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}),
    );
    create(
        &mut store,
        Kind::Pod,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "high", "namespace": "default"},
               "spec": {"priority": 100,
                        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}),
    );
    let seen = store.watch_since(0).last().map_or(0, |e| e.resource_version);
    settle(&mut c, &mut store);
    assert!(store.get(&ObjectRef::new(Kind::Pod, "default", "low")).is_none(), "the victim is deleted");
    assert_eq!(node_of(&store, "high").as_deref(), Some("n1"), "the preemptor binds once it is gone");
    // The victim carried DisruptionTarget before it went.
    let marked = store.watch_since(seen).into_iter().any(|e| match e.object {
        Object::Pod(p) if p.metadata.name.as_deref() == Some("low") => {
            p.status.and_then(|s| s.conditions).unwrap_or_default().iter().any(|c| {
                c.type_ == DISRUPTION_TARGET && c.reason.as_deref() == Some(REASON_PREEMPTION_BY_SCHEDULER)
            })
        }
        _ => false,
    });
    assert!(marked, "DisruptionTarget=True (PreemptionByScheduler) on the victim");
    let preempted: Vec<String> =
        store.events().into_iter().filter(|e| e.reason == "Preempted").map(|e| e.note).collect();
    assert_eq!(preempted, ["Preempted by pod default/high on node n1"]);
}
