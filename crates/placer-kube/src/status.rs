//! Re-applying a status change onto a fresh copy after an update conflict.
//!
//! Controllers write status from the cached object; under a live API server the cache is
//! often a version behind (the kubelet updated the pod, another replica of a controller
//! touched the PodGroup). On a 409 the store reads the object again and re-applies the
//! caller's *intent* on the fresh copy:
//!
//! * conditions are merged by `type`: a condition the caller changed or added replaces the
//!   one of the same type unless they only differ in their timestamps (then the fresh one
//!   stays, so `lastTransitionTime` keeps its meaning); conditions the caller did not
//!   change or did not mention keep their fresh values;
//! * every other top-level status field the caller changed (compared with the version it
//!   started from) is set, or removed if the caller removed it (e.g. clearing
//!   `nominatedNodeName`); fields it did not touch keep their fresh values.

use serde_json::{Map, Value};

const TIMESTAMPS: &[&str] = &["lastTransitionTime", "lastProbeTime", "lastHeartbeatTime", "lastUpdateTime"];

fn without_timestamps(c: &Value) -> Value {
    match c {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !TIMESTAMPS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn condition_type(c: &Value) -> Option<&str> {
    c.get("type").and_then(Value::as_str)
}

fn merge_conditions(base: Option<&Value>, fresh: Option<&Value>, desired: &[Value]) -> Value {
    let base: &[Value] = base.and_then(Value::as_array).map_or(&[], Vec::as_slice);
    let mut out: Vec<Value> = fresh.and_then(Value::as_array).cloned().unwrap_or_default();
    for cond in desired {
        let Some(t) = condition_type(cond) else { continue };
        if base.iter().any(|b| b == cond) {
            // Unchanged by the caller: whatever the fresh copy says stands.
            continue;
        }
        match out.iter_mut().find(|c| condition_type(c) == Some(t)) {
            Some(existing) => {
                if without_timestamps(existing) != without_timestamps(cond) {
                    *existing = cond.clone();
                }
            }
            None => out.push(cond.clone()),
        }
    }
    Value::Array(out)
}

/// The status to write: `fresh` with the changes from `base` to `desired` applied.
/// Arguments are `status` values (absent = `None` or `null`).
pub(crate) fn merge_status(base: Option<&Value>, desired: Option<&Value>, fresh: Option<&Value>) -> Value {
    let empty = Map::new();
    let as_map = |v: Option<&Value>| v.and_then(Value::as_object).cloned();
    let base = as_map(base).unwrap_or_default();
    let desired_map = desired.and_then(Value::as_object).unwrap_or(&empty);
    let mut out = as_map(fresh).unwrap_or_default();

    for (key, value) in desired_map {
        if key == "conditions" {
            if let Value::Array(conds) = value {
                let merged = merge_conditions(base.get("conditions"), out.get("conditions"), conds);
                out.insert(key.clone(), merged);
                continue;
            }
        }
        if base.get(key) != Some(value) {
            out.insert(key.clone(), value.clone());
        }
    }
    for key in base.keys() {
        if key != "conditions" && !desired_map.contains_key(key) {
            out.remove(key);
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_callers_condition_lands_on_the_fresh_copy_next_to_others() {
        let base = json!({"conditions": [{"type": "A", "status": "False"}]});
        let desired = json!({"conditions": [
            {"type": "A", "status": "False"},
            {"type": "PodGroupScheduled", "status": "True", "reason": "Scheduled", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        ]});
        let fresh = json!({"conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "True"}]});
        let merged = merge_status(Some(&base), Some(&desired), Some(&fresh));
        // A: the caller re-sent its unchanged (stale) copy: the fresh value stands.
        assert_eq!(
            merged,
            json!({"conditions": [
                {"type": "A", "status": "True"},
                {"type": "B", "status": "True"},
                {"type": "PodGroupScheduled", "status": "True", "reason": "Scheduled", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ]})
        );
    }

    #[test]
    fn an_unchanged_condition_keeps_its_transition_time() {
        let scheduled = |time: &str| json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": time});
        let fresh = json!({"conditions": [scheduled("T0")]});
        let desired = json!({"conditions": [scheduled("T1")]});
        assert_eq!(merge_status(None, Some(&desired), Some(&fresh)), fresh);
    }

    #[test]
    fn fields_the_caller_did_not_touch_keep_their_fresh_values() {
        let base = json!({"phase": "Pending", "nominatedNodeName": "n1"});
        let desired = json!({"phase": "Pending"});
        let fresh = json!({"phase": "Running", "nominatedNodeName": "n1", "podIP": "10.0.0.1"});
        // phase untouched by the caller: fresh value stays; nominatedNodeName cleared by
        // the caller: removed; podIP unknown to the caller: stays.
        assert_eq!(
            merge_status(Some(&base), Some(&desired), Some(&fresh)),
            json!({"phase": "Running", "podIP": "10.0.0.1"})
        );
        let desired = json!({"phase": "Pending", "nominatedNodeName": "n2"});
        assert_eq!(merge_status(Some(&base), Some(&desired), Some(&fresh))["nominatedNodeName"], json!("n2"));
    }

    #[test]
    fn a_missing_fresh_status_is_created() {
        let desired = json!({"conditions": [{"type": "X", "status": "True"}]});
        assert_eq!(merge_status(None, Some(&desired), None), desired);
        assert_eq!(merge_status(None, None, None), json!({}));
    }
}
