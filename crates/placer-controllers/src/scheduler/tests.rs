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
        Some(Object::Pod(p)) => p.spec.clone().and_then(|s| s.node_name),
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
    let scheduled: Vec<_> = store
        .events()
        .into_iter()
        .filter(|e| e.reason == "Scheduled" && e.regarding.kind == Kind::Pod)
        .collect();
    assert_eq!(scheduled.len(), 3);
    assert_eq!(scheduled[0].reporter, REPORTER);
    assert_eq!(scheduled[0].note, "Successfully assigned default/p1 to n1");
    // The PodGroup gets its own event, once.
    let group_events: Vec<_> =
        store.events().into_iter().filter(|e| e.regarding.kind == Kind::PodGroup).collect();
    assert_eq!(group_events.len(), 1, "{group_events:?}");
    assert_eq!((group_events[0].type_.as_str(), group_events[0].reason.as_str()), ("Normal", "Scheduled"));
    assert_eq!(group_events[0].note, "Successfully scheduled pod group default/pg: 3 pods assigned");
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
    let cond = Arc::unwrap_or_clone(p3)
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .unwrap();
    assert_eq!(cond.status, "False");
    assert_eq!(cond.reason.as_deref(), Some("Unschedulable"));
    assert_eq!(cond.message.as_deref(), Some("0/1 nodes are available: 1 Insufficient cpu."));
    let g = group_condition(&store, "pg").unwrap();
    assert_eq!((g.status.as_str(), g.reason.as_str()), ("False", "Unschedulable"));
    assert_eq!(g.message, "2/3 pods fit: 0/1 nodes are available: 1 Insufficient cpu.");
    let failed = store
        .events()
        .iter()
        .filter(|e| e.reason == "FailedScheduling" && e.type_ == "Warning" && e.regarding.kind == Kind::Pod)
        .count();
    assert_eq!(failed, 3);
    // The PodGroup's own event carries the condition's reason and message.
    let group_events: Vec<_> =
        store.events().into_iter().filter(|e| e.regarding.kind == Kind::PodGroup).collect();
    assert_eq!(group_events.len(), 1, "{group_events:?}");
    assert_eq!(
        (group_events[0].type_.as_str(), group_events[0].reason.as_str(), group_events[0].note.as_str()),
        (
            "Warning",
            "FailedScheduling",
            "Unschedulable: 2/3 pods fit: 0/1 nodes are available: 1 Insufficient cpu."
        )
    );
    assert!(!c.reconcile(&mut store).unwrap(), "status writes do not requeue the pods");

    // Capacity arrives: the gang schedules and the condition flips to True.
    node(&mut store, "n2", "2");
    settle(&mut c, &mut store);
    assert!(node_of(&store, "p3").is_some());
    let g = group_condition(&store, "pg").unwrap();
    assert_eq!(g.status, "True");
}

/// The embedded store as these tests need it: its binding subresource fails for pod
/// `fail_once` the first time, it counts reads of pods, and it vouches that its status
/// writes change only the status (as the embedded store does) only when `vouch` is set.
struct TestStore {
    inner: EmbeddedCluster,
    fail_once: Option<String>,
    vouch: bool,
    pod_reads: std::cell::Cell<usize>,
}

impl TestStore {
    fn new() -> Self {
        TestStore {
            inner: EmbeddedCluster::new(),
            fail_once: None,
            vouch: false,
            pod_reads: Default::default(),
        }
    }
}

impl ClusterStore for TestStore {
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
        if r.kind == Kind::Pod {
            self.pod_reads.set(self.pod_reads.get() + 1);
        }
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
    fn status_write_changes_only_status(&self) -> bool {
        self.vouch && self.inner.status_write_changes_only_status()
    }
    // Without `vouch`, the caller holds on to its copy of the pod and the write copies it,
    // as the trait's default does.
    fn update_pod_status_with(
        &mut self,
        r: &ObjectRef,
        write: &mut dyn FnMut(&mut Pod) -> bool,
    ) -> Result<Option<Object>, StoreError> {
        self.inner.update_pod_status_with(r, write)
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
    let mut store = TestStore { fail_once: Some("a".into()), ..TestStore::new() };
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
            p.status.clone().and_then(|s| s.conditions).unwrap_or_default().iter().any(|c| {
                c.type_ == DISRUPTION_TARGET && c.reason.as_deref() == Some(REASON_PREEMPTION_BY_SCHEDULER)
            })
        }
        _ => false,
    });
    assert!(marked, "DisruptionTarget=True (PreemptionByScheduler) on the victim");
    let preempted: Vec<String> =
        store.events().into_iter().filter(|e| e.reason == "Preempted").map(|e| e.note).collect();
    // kube-scheduler's wording: the preemptor by uid (the store gave it one).
    let uid = store
        .get(&ObjectRef::new(Kind::Pod, "default", "high"))
        .and_then(|o| o.metadata().uid.clone())
        .unwrap_or_default();
    assert!(!uid.is_empty());
    assert_eq!(preempted, [format!("Preempted by pod {uid} on node n1")]);
}

/// A dispatcher the test drives: bindings wait until `send` carries them out on the store.
#[derive(Default, Clone)]
struct FakeDispatcher {
    state: Arc<std::sync::Mutex<FakeState>>,
}

#[derive(Default)]
struct FakeState {
    queued: Vec<BindCall>,
    statuses: Vec<StatusCall>,
    done: Vec<BindOutcome>,
    /// Pods whose next binding fails.
    fail: BTreeSet<String>,
    sent: Vec<String>,
}

impl Dispatcher for FakeDispatcher {
    fn bind(&mut self, call: BindCall) {
        self.state.lock().unwrap().queued.push(call);
    }
    fn update_status(&mut self, call: StatusCall) {
        self.state.lock().unwrap().statuses.push(call);
    }
    fn cancel_group(&mut self, group: &GroupKey) {
        let mut s = self.state.lock().unwrap();
        let (cancelled, kept): (Vec<_>, Vec<_>) =
            std::mem::take(&mut s.queued).into_iter().partition(|c| c.group.as_ref() == Some(group));
        s.queued = kept;
        s.done.extend(cancelled.into_iter().map(|call| BindOutcome { call, result: BindResult::Cancelled }));
    }
    fn completed(&mut self) -> Vec<BindOutcome> {
        std::mem::take(&mut self.state.lock().unwrap().done)
    }
    fn in_flight(&self) -> usize {
        let s = self.state.lock().unwrap();
        s.queued.len() + s.done.len()
    }
}

impl FakeDispatcher {
    /// Carries out the first `n` queued bindings on `store`.
    fn send(&self, store: &mut dyn ClusterStore, n: usize) {
        let mut s = self.state.lock().unwrap();
        let n = n.min(s.queued.len());
        let calls: Vec<BindCall> = s.queued.drain(..n).collect();
        for call in calls {
            s.sent.push(call.pod.name.to_string());
            let result = if s.fail.remove(&*call.pod.name) {
                BindResult::Failed(StoreError::Other("injected failure".into()))
            } else {
                match store.bind(&call.pod.namespace, &call.pod.name, &call.uid, &call.node) {
                    Ok(()) => BindResult::Bound,
                    Err(e) => BindResult::Failed(e),
                }
            };
            s.done.push(BindOutcome { call, result });
        }
    }

    /// Writes the dispatched status updates.
    fn write_statuses(&self, store: &mut dyn ClusterStore) -> usize {
        let calls = std::mem::take(&mut self.state.lock().unwrap().statuses);
        let n = calls.len();
        for c in calls {
            store.update_status(c.object).unwrap();
        }
        n
    }

    fn queued(&self) -> usize {
        self.state.lock().unwrap().queued.len()
    }
}

fn async_controller(d: &FakeDispatcher, observer: Box<dyn Observer + Send>) -> SchedulerController {
    let config =
        SchedulerConfig { pod_initial_backoff_ms: 0, pod_max_backoff_ms: 0, ..SchedulerConfig::default() };
    SchedulerController::with_dispatcher(config, observer, Box::new(d.clone()))
}

#[test]
fn with_a_dispatcher_bindings_leave_the_pass_and_are_reported_when_done() {
    let mut store = EmbeddedCluster::new();
    node(&mut store, "n1", "4");
    gang(&mut store, "pg", 3);
    for i in 1..=3 {
        pod(&mut store, &format!("p{i}"), "1", Some("pg"));
    }
    let metrics = placer_metrics::Metrics::new("placer", placer_metrics::Clock::Frozen);
    let d = FakeDispatcher::default();
    let mut c = async_controller(&d, Box::new(metrics.observer()));
    assert!(!c.reconcile(&mut store).unwrap(), "nothing written on the scheduling thread");
    assert_eq!(d.queued(), 3);
    assert_eq!(c.bindings_in_flight(), 3);
    assert!(node_of(&store, "p1").is_none());
    assert!(c.engine().is_assumed(&PodKey::new("default", "p1")), "assumed at once");
    assert!(!store.events().iter().any(|e| e.reason == "Scheduled" && e.regarding.kind == Kind::Pod));
    assert_eq!(d.write_statuses(&mut store), 1, "one status write: the PodGroup's condition");
    assert_eq!(group_condition(&store, "pg").unwrap().status, "True");

    d.send(&mut store, 3);
    c.reconcile(&mut store).unwrap();
    assert_eq!(c.bindings_in_flight(), 0);
    let scheduled: Vec<_> = store
        .events()
        .into_iter()
        .filter(|e| e.reason == "Scheduled" && e.regarding.kind == Kind::Pod)
        .map(|e| e.note)
        .collect();
    assert_eq!(scheduled.len(), 3);
    assert!(scheduled.contains(&"Successfully assigned default/p2 to n1".to_string()));
    for i in 1..=3 {
        assert_eq!(node_of(&store, &format!("p{i}")).as_deref(), Some("n1"));
    }
    assert!(!c.reconcile(&mut store).unwrap());
    assert_eq!(
        metrics
            .sample("scheduler_schedule_attempts_total{result=\"scheduled\",profile=\"default-scheduler\"}"),
        Some(3.0),
        "{}",
        metrics.render()
    );
    assert_eq!(
        metrics.sample("scheduler_pod_scheduling_sli_duration_seconds_count{attempts=\"1\"}"),
        Some(3.0)
    );
    assert_eq!(metrics.sample("scheduler_pod_scheduling_attempts_count"), Some(3.0));
    assert_eq!(
        metrics.sample("scheduler_podgroup_schedule_attempts_total{result=\"scheduled\",profile=\"placer\"}"),
        Some(1.0)
    );
    assert_eq!(metrics.sample("scheduler_pending_pods{queue=\"active\"}"), Some(0.0));
    assert_eq!(metrics.sample("scheduler_goroutines{operation=\"binding\"}"), Some(0.0));
}

#[test]
fn a_gang_member_that_fails_to_bind_releases_the_gangs_pending_bindings_and_the_group_is_decided_again() {
    let mut store = EmbeddedCluster::new();
    node(&mut store, "n1", "8");
    gang(&mut store, "pg", 4);
    for i in 1..=4 {
        pod(&mut store, &format!("p{i}"), "1", Some("pg"));
    }
    let d = FakeDispatcher::default();
    d.state.lock().unwrap().fail.insert("p2".into());
    let mut c = async_controller(&d, Box::new(placer_engine::NoopObserver));
    c.reconcile(&mut store).unwrap();
    assert_eq!(d.queued(), 4);
    // p1 binds, p2 fails for good; p3 and p4 have not been sent yet.
    d.send(&mut store, 2);
    c.reconcile(&mut store).unwrap();
    // p3 and p4 were never sent: released with p2, and the three are decided again
    // together (p1, bound, counts towards minCount).
    let requeued: BTreeSet<String> =
        d.state.lock().unwrap().queued.iter().map(|c| c.pod.name.to_string()).collect();
    assert_eq!(requeued, ["p2", "p3", "p4"].into_iter().map(String::from).collect());
    assert_eq!(d.state.lock().unwrap().sent, ["p1", "p2"]);
    assert!(store.events().iter().any(|e| e.regarding.kind == Kind::PodGroup
        && e.reason == "FailedScheduling"
        && e.note.contains("Binding rejected for member default/p2")));
    assert!(store.events().iter().any(|e| e.regarding == ObjectRef::new(Kind::Pod, "default", "p2")
        && e.reason == "FailedScheduling"
        && e.note.contains("injected failure")));
    // The cancelled members come back and the group is decided again, p1 counting as bound.
    for _ in 0..5 {
        c.reconcile(&mut store).unwrap();
        d.send(&mut store, usize::MAX);
    }
    c.reconcile(&mut store).unwrap();
    for i in 1..=4 {
        assert_eq!(node_of(&store, &format!("p{i}")).as_deref(), Some("n1"), "p{i}");
    }
    let sent = d.state.lock().unwrap().sent.clone();
    assert_eq!(
        sent.iter().filter(|n| *n == "p1").count(),
        1,
        "a bound member is never bound again: {sent:?}"
    );
    assert_eq!(c.bindings_in_flight(), 0);
}

#[test]
fn status_changes_of_one_pass_become_one_write_per_object() {
    let mut store = EmbeddedCluster::new();
    node(&mut store, "n1", "2");
    gang(&mut store, "pg", 3);
    for i in 1..=3 {
        pod(&mut store, &format!("p{i}"), "1", Some("pg"));
    }
    let d = FakeDispatcher::default();
    let mut c = async_controller(&d, Box::new(placer_engine::NoopObserver));
    c.reconcile(&mut store).unwrap();
    let calls = d.state.lock().unwrap().statuses.clone();
    let mut refs: Vec<ObjectRef> = calls.iter().map(|c| c.object.object_ref()).collect();
    let n = refs.len();
    refs.dedup();
    assert_eq!(refs.len(), n, "one write per object");
    assert_eq!(n, 4, "three pods and the PodGroup: {refs:?}");
    assert!(calls.iter().all(|c| c.base.is_some() || c.object.kind() == Kind::PodGroup));
    assert_eq!(d.write_statuses(&mut store), 4);
    let g = group_condition(&store, "pg").unwrap();
    assert_eq!((g.status.as_str(), g.reason.as_str()), ("False", "Unschedulable"));
}

fn rack_node(store: &mut dyn ClusterStore, name: &str, rack: &str) {
    create(
        store,
        Kind::Node,
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"rack": rack}},
               "status": {"allocatable": {"cpu": "4", "pods": "32"}}}),
    );
}

fn racks_and_a_rack_gang() -> EmbeddedCluster {
    let mut store = EmbeddedCluster::new();
    rack_node(&mut store, "a1", "rack-a");
    rack_node(&mut store, "b1", "rack-b");
    create(
        &mut store,
        Kind::PodGroup,
        json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
               "metadata": {"name": "pg", "namespace": "default"},
               "spec": {"schedulingPolicy": {"gang": {"minCount": 3}},
                        "schedulingConstraints": {"topology": [{"key": "rack"}]}}}),
    );
    for i in 1..=3 {
        pod(&mut store, &format!("p{i}"), "1", Some("pg"));
    }
    store
}

#[test]
fn with_a_dispatcher_a_placed_gang_is_bound_without_nominated_node_writes() {
    // The engine nominates the members of the chosen placement ...
    let mut sync = controller();
    let mut copy = racks_and_a_rack_gang();
    settle(&mut sync, &mut copy);
    let nominated = |s: &EmbeddedCluster| {
        (1..=3)
            .filter(|i| {
                s.get(&ObjectRef::new(Kind::Pod, "default", format!("p{i}")))
                    .and_then(|o| o.as_pod().and_then(|p| p.status.as_ref()?.nominated_node_name.clone()))
                    .is_some()
            })
            .count()
    };
    assert_eq!(nominated(&copy), 3, "the synchronous driver writes the nominations");

    // ... but with a dispatcher the binding follows at once, so only the bindings and the
    // PodGroup's condition are written (kube-scheduler's binding cycle).
    let mut store = racks_and_a_rack_gang();
    let d = FakeDispatcher::default();
    let mut c = async_controller(&d, Box::new(placer_engine::NoopObserver));
    c.reconcile(&mut store).unwrap();
    assert_eq!(d.queued(), 3);
    let statuses: Vec<ObjectRef> =
        d.state.lock().unwrap().statuses.iter().map(|c| c.object.object_ref()).collect();
    assert_eq!(statuses, [ObjectRef::new(Kind::PodGroup, "default", "pg")]);
    d.write_statuses(&mut store);
    d.send(&mut store, usize::MAX);
    settle(&mut c, &mut store);
    let racks: BTreeSet<Option<String>> = (1..=3).map(|i| node_of(&store, &format!("p{i}"))).collect();
    assert_eq!(racks.len(), 1, "one node of one rack here: {racks:?}");
    assert!(racks.iter().all(Option::is_some));
    assert_eq!(nominated(&store), 0);
}

#[test]
fn only_a_nomination_followed_at_once_by_its_binding_is_dropped() {
    let key = |n: &str| PodKey::new("default", n);
    let nominate = |p: &str, n: Option<&str>| Decision::Nominate { pod: key(p), node: n.map(String::from) };
    let bind = |p: &str, n: &str| Decision::Bind { pod: key(p), uid: String::new(), node: n.into() };
    let between =
        Decision::PodGroupAnnotation { group: GroupKey::new("default", "pg"), key: "k".into(), value: None };
    let decisions = vec![
        nominate("a", Some("n1")),
        bind("a", "n1"),
        // A write between (PreBind's claim or volume writes): the binding waits.
        nominate("b", Some("n1")),
        between.clone(),
        bind("b", "n1"),
        // Another node, another pod, a cleared nomination, no binding: kept.
        nominate("c", Some("n1")),
        bind("c", "n2"),
        nominate("d", Some("n1")),
        bind("e", "n1"),
        nominate("f", None),
        bind("f", "n1"),
        nominate("g", Some("n1")),
    ];
    let kept = without_prebinding_nominations(decisions.clone());
    let mut expected = decisions;
    expected.remove(0);
    assert_eq!(kept, expected);
}

#[test]
fn own_condition_writes_reach_the_engine_as_such_and_only_through_a_store_that_vouches() {
    let mut store = EmbeddedCluster::new();
    node(&mut store, "n1", "1");
    pod(&mut store, "big", "2", None);
    let mut c = controller();
    c.reconcile(&mut store).unwrap();
    let key = PodKey::new("default", "big");
    let (engine_holds, after) = c.condition_writes.get(&key).cloned().expect("the write is remembered");
    let Some(Object::Pod(stored)) = store.get(&ObjectRef::new(Kind::Pod, "default", "big")) else { panic!() };
    assert_eq!(stored.metadata.resource_version.as_deref(), Some(after.as_str()));
    // The engine let go of its copy for the write and took the written version back.
    assert_eq!(engine_holds, after);
    // The next sync hands it to the engine and forgets it; the pod stays where it waits.
    c.reconcile(&mut store).unwrap();
    assert!(c.condition_writes.is_empty());
    assert_eq!(c.engine().queue().state(&key), Some(&QueueState::Unschedulable));

    // A store that does not vouch: nothing remembered.
    let mut flaky = TestStore::new();
    node(&mut flaky, "n1", "1");
    pod(&mut flaky, "big", "2", None);
    let mut c = controller();
    c.reconcile(&mut flaky).unwrap();
    assert!(c.condition_writes.is_empty());
}

/// The message of pod `name`'s `PodScheduled` condition, if any.
fn scheduled_message(store: &EmbeddedCluster, name: &str) -> Option<String> {
    match store.get(&ObjectRef::new(Kind::Pod, "default", name)) {
        Some(Object::Pod(p)) => p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
            .and_then(|c| c.message.clone()),
        _ => None,
    }
}

#[test]
fn a_condition_write_is_made_in_place_once_nobody_else_holds_the_pod() {
    let mut store = EmbeddedCluster::new();
    node(&mut store, "n1", "1");
    pod(&mut store, "big", "2", None);
    let mut c = controller();
    settle(&mut c, &mut store);
    let r = ObjectRef::new(Kind::Pod, "default", "big");
    let message = |store: &EmbeddedCluster| scheduled_message(store, "big");
    let first = message(&store).expect("the failure is written");
    // Every reader has seen the written version: the log can forget it.
    store.compact_log(store.resource_version());
    let Some(Object::Pod(held)) = store.get(&r) else { panic!() };
    let address = Arc::as_ptr(&held);
    drop(held);

    // A second node changes the message of the next failure.
    node(&mut store, "n2", "1");
    store.compact_log(store.resource_version() - 1);
    settle(&mut c, &mut store);
    let second = message(&store).expect("the failure is written");
    assert_ne!(first, second);
    let Some(Object::Pod(now)) = store.get(&r) else { panic!() };
    assert_eq!(Arc::as_ptr(&now), address, "written in place, not copied");
    // The engine holds that version and keeps the pod where it waits.
    let key = PodKey::new("default", "big");
    assert_eq!(c.engine().queue().state(&key), Some(&QueueState::Unschedulable));
    assert!(c.condition_writes.is_empty());
}

/// As upstream's updatePod: a failure that leaves the pod's condition as it is writes
/// nothing, and is judged on the condition the controller wrote, without reading the pod
/// from the store. The attempt is still reported (a FailedScheduling event each time).
#[test]
fn a_failure_repeating_the_condition_writes_nothing_and_reads_no_pod() {
    let mut store = TestStore { vouch: true, ..TestStore::new() };
    node(&mut store, "n1", "3");
    pod(&mut store, "small", "2", None);
    pod(&mut store, "tiny", "1", None);
    let mut c = controller();
    settle(&mut c, &mut store);
    assert!(node_of(&store, "small").is_some() && node_of(&store, "tiny").is_some());
    pod(&mut store, "big", "2", None);
    settle(&mut c, &mut store);
    let big = ObjectRef::new(Kind::Pod, "default", "big");
    let version =
        |store: &TestStore| store.inner.get(&big).and_then(|o| o.metadata().resource_version.clone());
    let failures = |store: &TestStore| {
        store.events().iter().filter(|e| e.regarding == big && e.reason == "FailedScheduling").count()
    };
    // Read past the counting store.
    let condition_message = |store: &TestStore| scheduled_message(&store.inner, "big");
    let (written, failed) = (version(&store), failures(&store));
    assert_eq!(failed, 1);
    let first_message = condition_message(&store);
    assert!(first_message.as_deref().is_some_and(|m| m.contains("Insufficient cpu")));

    // `tiny` goes: `big` is tried again and fails the same way (1 cpu free, 2 asked).
    store.delete(&ObjectRef::new(Kind::Pod, "default", "tiny")).unwrap();
    store.pod_reads.set(0);
    settle(&mut c, &mut store);
    assert_eq!(failures(&store), 2, "the second attempt is reported");
    assert_eq!(version(&store), written, "the same condition is not written again");
    assert_eq!(store.pod_reads.get(), 0, "no pod was read from the store");

    // Someone else changes the condition: the next identical failure writes it back.
    let mut changed = match store.inner.get(&big) {
        Some(Object::Pod(p)) => (*p).clone(),
        other => panic!("big: {other:?}"),
    };
    let conditions = changed.status.as_mut().and_then(|s| s.conditions.as_mut()).expect("conditions");
    conditions.iter_mut().for_each(|c| c.message = Some("changed elsewhere".to_string()));
    store.update_status(Object::Pod(changed.into())).unwrap();
    pod(&mut store, "tiny2", "1", None);
    settle(&mut c, &mut store);
    store.delete(&ObjectRef::new(Kind::Pod, "default", "tiny2")).unwrap();
    settle(&mut c, &mut store);
    assert_eq!(condition_message(&store), first_message, "the condition written elsewhere is replaced");
}
