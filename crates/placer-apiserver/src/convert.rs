//! Conversion between `events.k8s.io/v1` Events (served) and core `v1` Events (stored),
//! field by field as kube-apiserver converts them.

use serde_json::{Map, Value};

use crate::resources::{Conversion, Resource};

/// (core v1 field, events.k8s.io/v1 field)
const RENAMES: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

fn rename(value: Value, to_v1: bool, api_version: &str) -> Value {
    let Value::Object(fields) = value else { return value };
    let mut out = Map::new();
    for (key, v) in fields {
        let key = RENAMES
            .iter()
            .find_map(|(core, v1)| match to_v1 {
                true if key == *core => Some(v1.to_string()),
                false if key == *v1 => Some(core.to_string()),
                _ => None,
            })
            .unwrap_or(key);
        out.insert(key, v);
    }
    out.insert("apiVersion".to_string(), Value::String(api_version.to_string()));
    Value::Object(out)
}

/// The stored object as served by `r`.
pub fn to_served(r: &Resource, stored: Value) -> Value {
    match r.conversion {
        Conversion::None => stored,
        Conversion::EventsV1 => rename(stored, true, "events.k8s.io/v1"),
    }
}

/// A written object of `r` as stored.
pub fn to_stored(r: &Resource, served: Value) -> Value {
    match r.conversion {
        Conversion::None => served,
        Conversion::EventsV1 => rename(served, false, "v1"),
    }
}

/// A patch written against `r`'s served form, in stored field names.
pub fn patch_to_stored(r: &Resource, patch: Value) -> Value {
    match (r.conversion, patch) {
        (Conversion::None, p) => p,
        (Conversion::EventsV1, Value::Object(mut fields)) => {
            let had_api_version = fields.contains_key("apiVersion");
            fields.remove("apiVersion");
            let Value::Object(mut out) = rename(Value::Object(fields), false, "v1") else { unreachable!() };
            if !had_api_version {
                out.remove("apiVersion");
            }
            Value::Object(out)
        }
        (_, p) => p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources;
    use serde_json::json;

    #[test]
    fn events_round_trip_between_groups() {
        let v1 = resources::find("events.k8s.io", "v1", "events").unwrap();
        let served = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "Pod", "name": "p"}, "note": "hi", "reportingController": "placer.dev/x",
            "reason": "Scheduled", "eventTime": "2026-01-01T00:00:00.000000Z"});
        let stored = to_stored(v1, served.clone());
        assert_eq!(stored["apiVersion"], "v1");
        assert_eq!(stored["involvedObject"]["name"], "p");
        assert_eq!(stored["message"], "hi");
        assert_eq!(stored["reportingComponent"], "placer.dev/x");
        assert_eq!(to_served(v1, stored), served);
        let patch = patch_to_stored(v1, json!({"series": {"count": 2}, "note": "x"}));
        assert_eq!(patch, json!({"series": {"count": 2}, "message": "x"}));
    }
}
