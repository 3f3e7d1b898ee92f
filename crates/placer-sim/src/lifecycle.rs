//! The node side of failures in the embedded cluster, as kube-controller-manager, the API
//! server and the kubelet do it (a real cluster does all of this itself; `placer serve`
//! only watches the outcome):
//!
//! * **Node lifecycle** (`nodelifecycle` controller, taint-based evictions): a node whose
//!   `Ready` condition is `False` gets the `node.kubernetes.io/not-ready` taint, `Unknown`
//!   the `node.kubernetes.io/unreachable` taint, each with effect `NoSchedule` and
//!   `NoExecute` (`timeAdded` set on the latter); `Ready=True` removes them.
//! * **DefaultTolerationSeconds** admission ([`DefaultTolerationSeconds`]): a created pod
//!   that does not tolerate `not-ready:NoExecute` (resp. `unreachable:NoExecute`), counting
//!   tolerations with an empty key or empty effect, gets `{key, operator: Exists, effect:
//!   NoExecute, tolerationSeconds: 300}` appended.
//! * **Taint eviction** (`tainteviction` manager): a pod bound to a node with `NoExecute`
//!   taints is deleted at once when one of them is not tolerated; otherwise when the
//!   smallest `tolerationSeconds` of the tolerations used has passed since the manager
//!   first saw the pod under taint (no `tolerationSeconds`: tolerated for good; 0 or
//!   less: at once). Removing the taints cancels the eviction. The evicted pod first
//!   gets `DisruptionTarget=True` (reason `DeletionByTaintManager`) and a
//!   `TaintManagerEviction` event.
//! * **Termination** (the kubelet's final delete): a terminating pod (see
//!   `EmbeddedCluster`'s graceful deletion) without finalizers is removed once its
//!   `deletionTimestamp` has passed, if its node is `Ready`; a pod on a node that is not
//!   Ready stays `Terminating` (its kubelet is gone) until the node recovers or is deleted.
//!   Terminating pods listed in the scenario's `cluster.pods` are left as they are.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use placer_api::k8s::api::core::v1::{Node, Pod, PodCondition, PodSpec, Taint, Toleration};
use placer_cluster::{
    Admission, ClusterStore, EventRecord, Kind, Object, ObjectRef, StoreError, WatchEventKind,
};
use placer_controllers::{Controller, ControllerError};

use crate::kubelet::pod_ref;

/// Reporter / controller name.
pub const NAME: &str = "node-lifecycle-controller";
/// The taint of a node whose `Ready` condition is `False`.
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
/// The taint of a node whose `Ready` condition is `Unknown`.
pub const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";
/// DefaultTolerationSeconds' default for both taints.
pub const DEFAULT_TOLERATION_SECONDS: i64 = 300;
/// Reason of the `DisruptionTarget` condition the taint manager sets.
pub const REASON_DELETION_BY_TAINT_MANAGER: &str = "DeletionByTaintManager";

const NO_EXECUTE: &str = "NoExecute";
const NO_SCHEDULE: &str = "NoSchedule";

/// The DefaultTolerationSeconds admission plugin (mutating, on pod create).
#[derive(Debug, Default, Clone, Copy)]
pub struct DefaultTolerationSeconds;

impl Admission for DefaultTolerationSeconds {
    fn admit(&self, _: &dyn ClusterStore, _: Option<&Object>, _: &Object) -> Result<(), String> {
        Ok(())
    }

    fn mutate_on_create(&self, obj: &mut Object) {
        let Some(pod) = obj.as_pod_mut() else { return };
        add_default_toleration_seconds(pod.spec.get_or_insert_with(Default::default));
    }
}

/// DefaultTolerationSeconds' mutation: tolerations of the `not-ready` and `unreachable`
/// NoExecute taints for [`DEFAULT_TOLERATION_SECONDS`], unless the pod tolerates them already
/// (same key or an empty key, NoExecute or an empty effect, as upstream checks). Also used
/// by placer-apiserver's pod defaulting.
pub fn add_default_toleration_seconds(spec: &mut PodSpec) {
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    let covers = |key: &str| {
        tolerations.iter().any(|t| {
            t.key.as_deref().is_none_or(|k| k.is_empty() || k == key)
                && t.effect.as_deref().is_none_or(|e| e.is_empty() || e == NO_EXECUTE)
        })
    };
    let missing: Vec<&str> =
        [NOT_READY_TAINT, UNREACHABLE_TAINT].into_iter().filter(|k| !covers(k)).collect();
    for key in missing {
        tolerations.push(Toleration {
            key: Some(key.to_string()),
            operator: Some("Exists".to_string()),
            effect: Some(NO_EXECUTE.to_string()),
            toleration_seconds: Some(DEFAULT_TOLERATION_SECONDS),
            value: None,
        });
    }
}

/// Node lifecycle, taint eviction and the final delete of terminated pods (module docs).
#[derive(Debug, Default)]
pub struct NodeLifecycle {
    seen_rv: u64,
    /// Uids of pods left terminating as the scenario wrote them.
    kept: HashSet<String>,
    /// Pod uid -> when the taint manager first saw it under tolerated NoExecute taints.
    tainted_since: BTreeMap<String, u64>,
    /// (time, pod) of timed work: an eviction or a final delete.
    timers: BTreeSet<(u64, ObjectRef)>,
}

impl NodeLifecycle {
    /// A controller that leaves the terminating pods with these uids alone.
    pub fn new(kept: HashSet<String>) -> Self {
        NodeLifecycle { kept, ..Default::default() }
    }

    /// Brings the node's lifecycle taints in line with its `Ready` condition.
    fn reconcile_node(&self, store: &mut dyn ClusterStore, node: &Node) -> Result<bool, StoreError> {
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status.as_str());
        let wanted = match ready {
            Some("False") => Some(NOT_READY_TAINT),
            Some("Unknown") => Some(UNREACHABLE_TAINT),
            _ => None,
        };
        let current = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
        let lifecycle = |t: &Taint| {
            (t.key == NOT_READY_TAINT || t.key == UNREACHABLE_TAINT)
                && (t.effect == NO_SCHEDULE || t.effect == NO_EXECUTE)
        };
        let mut taints: Vec<Taint> =
            current.iter().filter(|t| !lifecycle(t) || Some(t.key.as_str()) == wanted).cloned().collect();
        if let Some(key) = wanted {
            for effect in [NO_SCHEDULE, NO_EXECUTE] {
                if !taints.iter().any(|t| t.key == key && t.effect == effect) {
                    taints.push(Taint {
                        key: key.to_string(),
                        value: None,
                        effect: effect.to_string(),
                        time_added: (effect == NO_EXECUTE).then(|| store.now()),
                    });
                }
            }
        }
        if taints == current {
            return Ok(false);
        }
        let mut updated = node.clone();
        updated.spec.get_or_insert_with(Default::default).taints = (!taints.is_empty()).then_some(taints);
        updated.metadata.resource_version = None;
        store.update(Object::Node(updated.into()))?;
        Ok(true)
    }

    /// Taint eviction and termination for one pod. Returns whether it wrote.
    fn reconcile_pod(&mut self, store: &mut dyn ClusterStore, pod: &Pod) -> Result<bool, StoreError> {
        let r = pod_ref(pod);
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let now = store.now_ms();
        let node_name = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
        let node = (!node_name.is_empty())
            .then(|| store.get(&ObjectRef::new(Kind::Node, "", node_name.as_str())))
            .flatten();
        let node = match &node {
            Some(Object::Node(n)) => Some(n),
            _ => None,
        };
        if let Some(deadline) = &pod.metadata.deletion_timestamp {
            self.tainted_since.remove(&uid);
            if self.kept.contains(&uid) || pod.metadata.finalizers.as_ref().is_some_and(|f| !f.is_empty()) {
                return Ok(false);
            }
            if node.is_some_and(|n| !node_ready(n)) {
                return Ok(false);
            }
            let at = ms_of(store, &deadline.0);
            if at > now {
                self.timers.insert((at, r));
                return Ok(false);
            }
            return match store.delete(&r) {
                Ok(()) => Ok(store.get(&r).is_none()),
                Err(StoreError::NotFound(_)) => Ok(false),
                Err(e) => Err(e),
            };
        }
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        let Some(node) = node.filter(|_| !matches!(phase, Some("Succeeded" | "Failed"))) else {
            self.tainted_since.remove(&uid);
            return Ok(false);
        };
        let taints: Vec<&Taint> = node
            .spec
            .iter()
            .flat_map(|s| s.taints.iter().flatten())
            .filter(|t| t.effect == NO_EXECUTE)
            .collect();
        if taints.is_empty() {
            self.tainted_since.remove(&uid);
            return Ok(false);
        }
        let tolerations: &[Toleration] =
            pod.spec.as_ref().and_then(|s| s.tolerations.as_deref()).unwrap_or(&[]);
        let mut min_seconds: Option<i64> = None;
        for taint in &taints {
            match tolerations.iter().find(|t| tolerates(t, taint)) {
                None => return evict(store, pod, now).map(|()| true),
                Some(t) => {
                    if let Some(s) = t.toleration_seconds {
                        let s = s.max(0);
                        min_seconds = Some(min_seconds.map_or(s, |m| m.min(s)));
                    }
                }
            }
        }
        let Some(seconds) = min_seconds else {
            self.tainted_since.remove(&uid);
            return Ok(false);
        };
        let since = *self.tainted_since.entry(uid.clone()).or_insert(now);
        let at = since.saturating_add(u64::try_from(seconds).unwrap_or(0).saturating_mul(1000));
        if at <= now {
            self.tainted_since.remove(&uid);
            return evict(store, pod, now).map(|()| true);
        }
        self.timers.insert((at, r));
        Ok(false)
    }
}

/// Whether toleration `t` tolerates `taint` (key, operator, value, effect).
pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    let op = t.operator.as_deref().unwrap_or("Equal");
    let effect_ok = t.effect.as_deref().is_none_or(|e| e.is_empty() || e == taint.effect);
    let key_ok = match t.key.as_deref() {
        None | Some("") => op == "Exists",
        Some(k) => k == taint.key,
    };
    let value_ok = op == "Exists" || t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("");
    effect_ok && key_ok && value_ok
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_none_or(|c| c.status == "True")
}

/// Milliseconds of the store's clock at `t`.
fn ms_of(store: &dyn ClusterStore, t: &placer_api::k8s::jiff::Timestamp) -> u64 {
    let now = store.now();
    let delta = t.as_millisecond().saturating_sub(now.0.as_millisecond());
    let now_ms = i64::try_from(store.now_ms()).unwrap_or(i64::MAX);
    u64::try_from(now_ms.saturating_add(delta)).unwrap_or(0)
}

/// The taint manager's eviction: `DisruptionTarget`, an event, the delete.
fn evict(store: &mut dyn ClusterStore, pod: &Pod, now_ms: u64) -> Result<(), StoreError> {
    let r = pod_ref(pod);
    let mut marked = pod.clone();
    let conditions =
        marked.status.get_or_insert_with(Default::default).conditions.get_or_insert_with(Vec::new);
    conditions.retain(|c| c.type_ != "DisruptionTarget");
    conditions.push(PodCondition {
        type_: "DisruptionTarget".to_string(),
        status: "True".to_string(),
        reason: Some(REASON_DELETION_BY_TAINT_MANAGER.to_string()),
        message: Some("Taint manager: deleting due to NoExecute taint".to_string()),
        last_transition_time: Some(store.now()),
        ..Default::default()
    });
    marked.metadata.resource_version = None;
    store.update_status(Object::Pod(marked.into()))?;
    store.record_event(EventRecord {
        regarding: r.clone(),
        type_: "Normal".to_string(),
        reason: "TaintManagerEviction".to_string(),
        note: format!("Marking for deletion Pod {}/{}", r.namespace, r.name),
        reporter: "taint-eviction-controller".to_string(),
        time_ms: now_ms,
    });
    match store.delete(&r) {
        Ok(()) | Err(StoreError::NotFound(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

fn err(message: String) -> ControllerError {
    ControllerError { controller: NAME, message }
}

impl Controller for NodeLifecycle {
    fn name(&self) -> &'static str {
        NAME
    }

    fn reconcile(&mut self, store: &mut dyn ClusterStore) -> Result<bool, ControllerError> {
        let seen_rv = std::mem::replace(&mut self.seen_rv, store.resource_version());
        let mut wrote = false;
        let mut nodes = BTreeSet::new();
        let mut pods = BTreeSet::new();
        let tainted_since = &mut self.tainted_since;
        store.visit_events_since(seen_rv, &mut |e| match (&e.object, e.kind) {
            (Object::Node(n), WatchEventKind::Added | WatchEventKind::Modified) => {
                nodes.insert(n.metadata.name.clone().unwrap_or_default());
            }
            (Object::Pod(p), WatchEventKind::Added | WatchEventKind::Modified) => {
                pods.insert(pod_ref(p));
            }
            (Object::Pod(p), WatchEventKind::Deleted) => {
                if let Some(uid) = &p.metadata.uid {
                    tainted_since.remove(uid);
                }
            }
            _ => {}
        });
        for name in &nodes {
            if let Some(Object::Node(n)) = store.get(&ObjectRef::new(Kind::Node, "", name.as_str())) {
                wrote |= self.reconcile_node(store, &n).map_err(|e| err(e.to_string()))?;
            }
        }
        if !nodes.is_empty() {
            for obj in store.list(Kind::Pod) {
                if let Object::Pod(p) = &obj {
                    let on = p.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or("");
                    if nodes.contains(on) {
                        pods.insert(pod_ref(p));
                    }
                }
            }
        }
        let now = store.now_ms();
        while let Some((at, r)) = self.timers.first().cloned() {
            if at > now {
                break;
            }
            self.timers.remove(&(at, r.clone()));
            pods.insert(r);
        }
        let mut errors = Vec::new();
        for r in pods {
            if let Some(Object::Pod(p)) = store.get(&r) {
                match self.reconcile_pod(store, &p) {
                    Ok(w) => wrote |= w,
                    Err(StoreError::NotFound(_)) => {}
                    Err(e) => errors.push(e.to_string()),
                }
            }
        }
        match errors.into_iter().next() {
            Some(message) => Err(err(message)),
            None => Ok(wrote),
        }
    }

    fn next_wakeup_ms(&self) -> Option<u64> {
        self.timers.first().map(|(at, _)| *at)
    }
}
