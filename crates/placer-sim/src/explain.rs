//! Explanations of a run's PodGroups, computed by the engine itself.
//!
//! After a run, a fresh engine with the run's configuration is fed the final objects
//! (nodes, PriorityClasses, PodGroups, pods, DRA objects, as the scheduler's watch would
//! deliver them) and asked [`placer_engine::Engine::explain_group`] for each group: the
//! domains of its level with their free capacity and how many of its pods fit, and the
//! pod-level filter rejections. Nothing here re-implements a scheduling rule.

use placer_cluster::{Kind, Object, WatchEvent, WatchEventKind};
use placer_engine::{Engine, GroupExplanation, GroupKey, SchedulerConfig};

use crate::report::{GroupRow, GroupState};

/// Kinds fed to the engine, in the order that lets each find what it refers to.
const FEED: [Kind; 8] = [
    Kind::PriorityClass,
    Kind::Node,
    Kind::DeviceClass,
    Kind::ResourceSlice,
    Kind::ResourceClaim,
    Kind::PodDisruptionBudget,
    Kind::PodGroup,
    Kind::Pod,
];

/// An engine holding `objects` as its cluster (nothing scheduled).
pub fn engine_for(config: &SchedulerConfig, objects: &[Object], now_ms: u64) -> Engine {
    let mut engine = Engine::new(config.clone());
    for kind in FEED {
        for o in objects.iter().filter(|o| o.kind() == kind) {
            let event = WatchEvent { resource_version: 0, kind: WatchEventKind::Added, object: o.clone() };
            if let Some(e) = placer_controllers::scheduler::cluster_event(event) {
                engine.apply(e, now_ms);
            }
        }
    }
    engine
}

/// Explanations of every PodGroup of `objects` (and of groups only named by pods), or of
/// `only`, in key order.
pub fn explain(
    config: &SchedulerConfig,
    objects: &[Object],
    now_ms: u64,
    only: Option<&GroupKey>,
) -> Vec<GroupExplanation> {
    let mut engine = engine_for(config, objects, now_ms);
    let keys = match only {
        Some(k) => vec![k.clone()],
        None => engine.group_keys(),
    };
    keys.iter().filter_map(|k| engine.explain_group(k)).collect()
}

/// `nvidia.com/gpu` 3, cpu 1500 -> `1.5`, memory bytes -> `8Gi`: a resource amount in the
/// units people write.
pub fn format_amount(resource: &str, value: i64) -> String {
    match resource {
        "cpu" => {
            if value % 1000 == 0 {
                (value / 1000).to_string()
            } else {
                format!("{value}m")
            }
        }
        "memory" | "ephemeral-storage" => {
            const UNITS: [(&str, i64); 4] =
                [("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)];
            for (unit, size) in UNITS {
                if value.abs() >= size {
                    let v = value as f64 / size as f64;
                    let text = format!("{v:.1}");
                    let text = text.strip_suffix(".0").unwrap_or(&text);
                    return format!("{text}{unit}");
                }
            }
            value.to_string()
        }
        _ => value.to_string(),
    }
}

/// `8 nvidia.com/gpu, 2 cpu` (the `pods` count left out unless it is all there is).
pub fn format_resources(list: &[(String, i64)]) -> String {
    let parts: Vec<String> = list
        .iter()
        .filter(|(n, _)| n != "pods" || list.len() == 1)
        .map(|(n, v)| format!("{} {n}", format_amount(n, *v)))
        .collect();
    if parts.is_empty() {
        "nothing".into()
    } else {
        parts.join(", ")
    }
}

/// The one-line reason of a group that is not fully bound (`None` when it is), from its
/// row, its explanation and the run's events: waiting for more pods, preempted, an
/// unknown PodGroup, or no placement holding `minCount` with the closest domain and what
/// it lacks.
pub fn group_reason(
    row: &GroupRow,
    explanation: Option<&GroupExplanation>,
    preempted_by: Option<&str>,
) -> Option<String> {
    if row.state == GroupState::Scheduled && row.total > 0 {
        return None;
    }
    if !row.exists {
        let plural = if row.total == 1 { "" } else { "s" };
        return Some(format!("unknown PodGroup: referenced by {} pod{plural}, no such object", row.total));
    }
    if let Some(by) = preempted_by {
        if row.bound < row.total || row.total == 0 {
            return Some(format!("preempted by {by}"));
        }
    }
    let e = explanation?;
    if e.gang && e.missing > 0 {
        let plural = if e.missing == 1 { "" } else { "s" };
        return Some(format!(
            "waiting for {} more pod{plural} (minCount {}, {} exist)",
            e.missing, e.min_count, e.members
        ));
    }
    if row.total == 0 {
        return Some("no pod names this PodGroup yet".into());
    }
    let needed = e.needed;
    // An implied or unconstrained level spreads the pods: no single domain must hold them.
    let spread = matches!(e.level_mode, Some("implied" | "unconstrained"));
    if let (Some(level), Some(d), false) = (&e.level, e.closest_domain(), spread) {
        let short = level.rsplit('/').next().unwrap_or(level);
        let lack = if d.shortfall.is_empty() {
            format!("{} of {needed} pods pass the filters there", d.fits)
        } else {
            format!("{} of {needed} pods fit, lacks {}", d.fits, format_resources(&d.shortfall))
        };
        let what = if e.gang { format!("minCount {}", e.min_count) } else { format!("{needed} pods") };
        return Some(format!("no {short} can hold {what}: closest {short} {} ({lack})", d.value));
    }
    if let Some(f) = &e.filters {
        if let Some((reason, nodes)) = f.reasons.first() {
            return Some(format!(
                "{} of {} nodes pass the filters for {needed} pods; most common rejection: {reason} ({nodes} nodes)",
                f.feasible, f.nodes
            ));
        }
    }
    row.condition.clone().map(|c| format!("condition {c}"))
}

/// At most this many groups get an engine explanation in the table (each costs a pass of
/// the pod-level filters over every node); the rest show their condition.
pub const MAX_EXPLAINED_ROWS: usize = 200;

/// Fills [`GroupRow::reason`] of every row not fully bound.
pub fn fill_reasons(
    rows: &mut [GroupRow],
    config: &SchedulerConfig,
    objects: &[Object],
    now_ms: u64,
    events: &[placer_cluster::EventRecord],
) {
    let pending: Vec<usize> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| !(r.state == GroupState::Scheduled && r.total > 0))
        .map(|(i, _)| i)
        .collect();
    if pending.is_empty() {
        return;
    }
    let mut engine = engine_for(config, objects, now_ms);
    for (n, i) in pending.into_iter().enumerate() {
        let (namespace, name) = (rows[i].namespace.clone(), rows[i].name.clone());
        let key = GroupKey::new(namespace.clone(), name.clone());
        let preempted_by = events
            .iter()
            .rev()
            .find(|e| {
                e.reason == "Preempted"
                    && e.regarding.kind == Kind::PodGroup
                    && e.regarding.namespace == namespace
                    && e.regarding.name == name
            })
            .map(|e| group_preemptor(&e.note));
        let explanation = if n < MAX_EXPLAINED_ROWS { engine.explain_group(&key) } else { None };
        let reason = group_reason(&rows[i], explanation.as_ref(), preempted_by.as_deref());
        rows[i].reason = reason;
    }
}

/// The preemptor and the victims of a PodGroup's `Preempted` event (`preempting to
/// accommodate a higher priority pod ns/name: 2 pod(s) evicted`): `pod ns/name (2 pods
/// evicted)`.
fn group_preemptor(note: &str) -> String {
    let rest = note.strip_prefix("preempting to accommodate a higher priority ").unwrap_or(note);
    match rest.rsplit_once(": ") {
        Some((who, evicted)) => {
            let n = evicted.strip_suffix(" pod(s) evicted").and_then(|n| n.parse::<u64>().ok());
            match n {
                Some(1) => format!("{who} (1 pod evicted)"),
                Some(n) => format!("{who} ({n} pods evicted)"),
                None => rest.to_string(),
            }
        }
        None => rest.to_string(),
    }
}

/// A pod the scheduler preempted (a `Preempted` event on a pod).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreemptedPod {
    /// `namespace/name` of the victim.
    pub pod: String,
    /// Who preempted it, resolved to names: `pod ns/name on node n1` (the preemptor's
    /// PodGroup added when it has one) or `podgroup ns/name`.
    pub by: String,
    /// The event's text as recorded (kube-scheduler's `Preempted by pod <uid> on node <n>`).
    pub note: String,
    /// Virtual time of the preemption (ms).
    pub at_ms: u64,
    /// The victim exists again (same name) at the end, e.g. recreated.
    pub exists: bool,
}

/// Every pod the run's scheduler preempted, in order, with the preemptor named: the
/// victim's `Preempted` event names a preemptor pod by uid (as kube-scheduler does); the
/// uid is looked up among the run's final pods.
pub fn preempted_pods(events: &[placer_cluster::EventRecord], objects: &[Object]) -> Vec<PreemptedPod> {
    let pods: Vec<&Object> = objects.iter().filter(|o| o.kind() == Kind::Pod).collect();
    let by_uid = |uid: &str| pods.iter().find(|o| o.metadata().uid.as_deref() == Some(uid)).copied();
    events
        .iter()
        .filter(|e| e.reason == "Preempted" && e.regarding.kind == Kind::Pod)
        .map(|e| {
            let r = &e.regarding;
            let rest = e.note.strip_prefix("Preempted by ").unwrap_or(&e.note);
            let by = match rest.strip_prefix("pod ") {
                Some(pod) => {
                    let (who, on) = match pod.split_once(" on node ") {
                        Some((who, node)) => (who, format!(" on node {node}")),
                        None => (pod, String::new()),
                    };
                    let named = match by_uid(who) {
                        Some(o) => {
                            let r = o.object_ref();
                            let group = match o {
                                Object::Pod(p) => p
                                    .spec
                                    .as_ref()
                                    .and_then(|s| s.scheduling_group.as_ref())
                                    .and_then(|g| g.pod_group_name.clone())
                                    .map(|g| format!(" (podgroup {}/{g})", r.namespace))
                                    .unwrap_or_default(),
                                _ => String::new(),
                            };
                            format!("pod {}/{}{group}", r.namespace, r.name)
                        }
                        None => format!("pod {who}"),
                    };
                    format!("{named}{on}")
                }
                None => rest.to_string(),
            };
            PreemptedPod {
                pod: format!("{}/{}", r.namespace, r.name),
                by,
                note: e.note.clone(),
                at_ms: e.time_ms,
                exists: pods.iter().any(|o| {
                    let o = o.object_ref();
                    o.namespace == r.namespace && o.name == r.name
                }),
            }
        })
        .collect()
}
