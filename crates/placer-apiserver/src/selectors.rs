//! Label selectors (`app=web,tier in (a,b),!canary`) and field selectors
//! (`spec.nodeName=n1,status.phase!=Failed`) with the fields kube-apiserver supports for
//! each kind.

use std::collections::BTreeMap;

use placer_cluster::Kind;
use serde_json::Value;

use crate::errors::{ApiError, ApiResult};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Exists,
    NotExists,
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Gt(i64),
    Lt(i64),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<(String, Op)>,
}

impl LabelSelector {
    pub fn parse(text: &str) -> ApiResult<LabelSelector> {
        let bad = |why: String| ApiError::bad_request(format!("unable to parse requirement: {why}"));
        let mut requirements = Vec::new();
        for part in split_top_level(text) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let req = if let Some(key) = part.strip_prefix('!') {
                (checked_key(key.trim()).map_err(bad)?, Op::NotExists)
            } else if let Some((key, values)) = split_word(part, "notin") {
                (checked_key(key).map_err(bad)?, Op::NotIn(parse_set(values).map_err(bad)?))
            } else if let Some((key, values)) = split_word(part, "in") {
                (checked_key(key).map_err(bad)?, Op::In(parse_set(values).map_err(bad)?))
            } else if let Some((key, value)) = part.split_once("!=") {
                (checked_key(key.trim()).map_err(bad)?, Op::NotEq(value.trim().to_string()))
            } else if let Some((key, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (checked_key(key.trim()).map_err(bad)?, Op::Eq(value.trim().to_string()))
            } else if let Some((key, value)) = part.split_once('>') {
                let n = value.trim().parse().map_err(|_| bad(format!("{value:?} is not an integer")))?;
                (checked_key(key.trim()).map_err(bad)?, Op::Gt(n))
            } else if let Some((key, value)) = part.split_once('<') {
                let n = value.trim().parse().map_err(|_| bad(format!("{value:?} is not an integer")))?;
                (checked_key(key.trim()).map_err(bad)?, Op::Lt(n))
            } else {
                (checked_key(part).map_err(bad)?, Op::Exists)
            };
            requirements.push(req);
        }
        Ok(LabelSelector { requirements })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        self.requirements.iter().all(|(key, op)| {
            let value = labels.and_then(|l| l.get(key));
            match op {
                Op::Exists => value.is_some(),
                Op::NotExists => value.is_none(),
                Op::Eq(v) => value == Some(v),
                Op::NotEq(v) => value != Some(v),
                Op::In(set) => value.is_some_and(|v| set.contains(v)),
                Op::NotIn(set) => value.is_none_or(|v| !set.contains(v)),
                Op::Gt(n) => value.and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v > *n),
                Op::Lt(n) => value.and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v < *n),
            }
        })
    }
}

/// Splits on commas outside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// `key in (a,b)` → (`key`, `(a,b)`), with `word` surrounded by whitespace.
fn split_word<'a>(part: &'a str, word: &str) -> Option<(&'a str, &'a str)> {
    let idx = part.find('(')?;
    let head = part[..idx].trim_end();
    let key = head.strip_suffix(word)?;
    if !key.ends_with(char::is_whitespace) {
        return None;
    }
    Some((key.trim(), &part[idx..]))
}

fn parse_set(text: &str) -> Result<Vec<String>, String> {
    let inner = text
        .trim()
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| format!("{text:?}: expected a parenthesized list of values"))?;
    Ok(inner.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect())
}

fn checked_key(key: &str) -> Result<String, String> {
    let ok = !key.is_empty()
        && key.len() <= 317
        && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(key.to_string())
    } else {
        Err(format!("{key:?}: invalid label key"))
    }
}

/// A parsed field selector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// (field, wanted value, negated)
    requirements: Vec<(String, String, bool)>,
}

impl FieldSelector {
    /// Parses `text`; every field must be supported for `kind`.
    pub fn parse(text: &str, kind: Kind, events_v1: bool) -> ApiResult<FieldSelector> {
        let mut requirements = Vec::new();
        for part in split_unescaped(text, ',') {
            if part.trim().is_empty() {
                continue;
            }
            let (field, value, negated) = if let Some((f, v)) = split_op(&part, "!=") {
                (f, v, true)
            } else if let Some((f, v)) = split_op(&part, "==").or_else(|| split_op(&part, "=")) {
                (f, v, false)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector: {part:?}: expected field=value"
                )));
            };
            let field = field.trim().to_string();
            let field = if events_v1 { events_v1_field(&field) } else { field };
            if !supported(kind, &field) {
                return Err(ApiError::bad_request(format!("field label not supported: {field}")));
            }
            requirements.push((field, unescape(value.trim()), negated));
        }
        Ok(FieldSelector { requirements })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// `object` is the stored object as JSON.
    pub fn matches(&self, kind: Kind, object: &Value) -> bool {
        self.requirements
            .iter()
            .all(|(field, want, negated)| (field_value(kind, object, field) == *want) != *negated)
    }

    /// The value the selector requires for `field` (`metadata.name=x` → `x`).
    pub fn required(&self, field: &str) -> Option<&str> {
        self.requirements.iter().find(|(f, _, neg)| f == field && !neg).map(|(_, v, _)| v.as_str())
    }
}

/// Splits on `sep` not preceded by a backslash.
fn split_unescaped(text: &str, sep: char) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut escaped = false;
    for c in text.chars() {
        if escaped {
            if let Some(p) = parts.last_mut() {
                p.push('\\');
                p.push(c);
            }
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            parts.push(String::new());
        } else if let Some(p) = parts.last_mut() {
            p.push(c);
        }
    }
    parts
}

fn split_op<'a>(part: &'a str, op: &str) -> Option<(&'a str, &'a str)> {
    let idx = part.find(op)?;
    if op == "=" && idx > 0 && part.as_bytes()[idx - 1] == b'!' {
        return None;
    }
    Some((&part[..idx], &part[idx + op.len()..]))
}

fn unescape(v: &str) -> String {
    let mut out = String::new();
    let mut escaped = false;
    for c in v.chars() {
        if escaped || c != '\\' {
            out.push(c);
            escaped = false;
        } else {
            escaped = true;
        }
    }
    out
}

/// events.k8s.io field names map onto the stored core Event's.
fn events_v1_field(field: &str) -> String {
    if let Some(rest) = field.strip_prefix("regarding.") {
        return format!("involvedObject.{rest}");
    }
    match field {
        "reportingController" => "reportingComponent".to_string(),
        "note" => "message".to_string(),
        other => other.to_string(),
    }
}

fn supported(kind: Kind, field: &str) -> bool {
    if matches!(field, "metadata.name" | "metadata.namespace") {
        return true;
    }
    let fields: &[&str] = match kind {
        Kind::Pod => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        Kind::Node => &["spec.unschedulable"],
        Kind::Namespace => &["status.phase"],
        Kind::Job => &["status.successful"],
        Kind::Event => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        _ => &[],
    };
    fields.contains(&field)
}

/// The string value of a supported field (missing fields read as kube-apiserver's
/// defaults: `""`, `false`, `0`).
fn field_value(kind: Kind, object: &Value, field: &str) -> String {
    let path = match (kind, field) {
        (Kind::Event, "source") => "source.component",
        (_, f) => f,
    };
    let mut v = object;
    for part in path.split('.') {
        match v.get(part) {
            Some(next) => v = next,
            None => {
                return match (kind, field) {
                    (Kind::Pod, "spec.hostNetwork") | (Kind::Node, "spec.unschedulable") => {
                        "false".to_string()
                    }
                    (Kind::Job, "status.successful") => "0".to_string(),
                    _ => String::new(),
                };
            }
        }
    }
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn label_selectors_follow_kubernetes_semantics() {
        let l = labels(&[("app", "web"), ("tier", "a"), ("n", "5")]);
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(Some(&l));
        assert!(m(""));
        assert!(m("app=web"));
        assert!(m("app==web,tier in (a, b)"));
        assert!(!m("app!=web"));
        assert!(m("missing!=x"), "!= matches an absent label");
        assert!(m("tier notin (b,c),!missing"));
        assert!(!m("missing in (x)"));
        assert!(m("app"));
        assert!(m("n>4,n<6"));
        assert!(!m("app,!tier"));
        assert!(LabelSelector::parse("a b=c").is_err());
        assert!(LabelSelector::parse("x in y").is_err());
    }

    #[test]
    fn field_selectors_check_supported_fields_and_defaults() {
        let pod = json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"schedulerName": "placer"}, "status": {"phase": "Pending"}});
        let m = |s: &str| FieldSelector::parse(s, Kind::Pod, false).unwrap().matches(Kind::Pod, &pod);
        assert!(m("spec.nodeName="));
        assert!(m("metadata.name=p,status.phase!=Running"));
        assert!(m("spec.schedulerName==placer"));
        assert!(m("spec.hostNetwork=false"));
        assert!(!m("status.phase=Running"));
        let err = FieldSelector::parse("spec.priority=1", Kind::Pod, false).unwrap_err();
        assert_eq!((err.code, err.message.as_str()), (400, "field label not supported: spec.priority"));
        let ev = json!({"involvedObject": {"kind": "Pod", "name": "p"}, "source": {"component": "placer"}});
        let s = FieldSelector::parse("regarding.kind=Pod,regarding.name=p", Kind::Event, true).unwrap();
        assert!(s.matches(Kind::Event, &ev));
        assert!(FieldSelector::parse("source=placer", Kind::Event, false).unwrap().matches(Kind::Event, &ev));
        assert_eq!(
            FieldSelector::parse("metadata.name=a\\,b", Kind::Pod, false).unwrap().required("metadata.name"),
            Some("a,b")
        );
    }
}
