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
    if let (Some(level), Some(d)) = (&e.level, e.closest_domain()) {
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
            .map(|e| e.note.strip_prefix("Preempted by ").unwrap_or(&e.note).to_string());
        let explanation = if n < MAX_EXPLAINED_ROWS { engine.explain_group(&key) } else { None };
        let reason = group_reason(&rows[i], explanation.as_ref(), preempted_by.as_deref());
        rows[i].reason = reason;
    }
}
