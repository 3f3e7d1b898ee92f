//! API errors as `Status` objects, with the code, reason and message kube-apiserver gives.

use placer_cluster::{ObjectRef, StoreError};
use serde_json::{json, Value};

use crate::resources::{self, Resource};

/// An error answered with a `Status` body.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    /// `NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, `BadRequest`, ...
    pub reason: &'static str,
    pub message: String,
    /// `details` of the Status, when there is something to say.
    pub details: Option<Value>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

pub type ApiResult<T> = Result<T, ApiError>;

fn details(r: &Resource, name: &str) -> Value {
    let mut d = json!({"name": name, "kind": r.plural});
    if !r.group.is_empty() {
        d["group"] = json!(r.group);
    }
    d
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { code, reason, message: message.into(), details: None }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    pub fn not_found(r: &Resource, name: &str) -> ApiError {
        ApiError {
            details: Some(details(r, name)),
            ..ApiError::new(404, "NotFound", format!("{} \"{name}\" not found", r.qualified()))
        }
    }

    /// 404 for a path that names no resource.
    pub fn no_route() -> ApiError {
        ApiError::new(404, "NotFound", "the server could not find the requested resource")
    }

    pub fn method_not_allowed(method: &str) -> ApiError {
        ApiError::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        )
    }

    pub fn already_exists(r: &Resource, name: &str) -> ApiError {
        ApiError {
            details: Some(details(r, name)),
            ..ApiError::new(409, "AlreadyExists", format!("{} \"{name}\" already exists", r.qualified()))
        }
    }

    pub fn conflict(r: &Resource, name: &str, why: &str) -> ApiError {
        ApiError {
            details: Some(details(r, name)),
            ..ApiError::new(
                409,
                "Conflict",
                format!("Operation cannot be fulfilled on {} \"{name}\": {why}", r.qualified()),
            )
        }
    }

    pub fn modified(r: &Resource, name: &str) -> ApiError {
        ApiError::conflict(
            r,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 with one cause per `(field, message)`.
    pub fn invalid(r: &Resource, name: &str, causes: &[(String, String)]) -> ApiError {
        let text: Vec<String> = causes
            .iter()
            .map(
                |(field, message)| {
                    if field.is_empty() {
                        message.clone()
                    } else {
                        format!("{field}: {message}")
                    }
                },
            )
            .collect();
        let kind =
            if r.group.is_empty() { r.kind_name.to_string() } else { format!("{}.{}", r.kind_name, r.group) };
        let mut d = json!({"name": name, "kind": r.kind_name});
        if !r.group.is_empty() {
            d["group"] = json!(r.group);
        }
        d["causes"] = causes
            .iter()
            .map(
                |(field, message)| json!({"reason": "FieldValueInvalid", "message": message, "field": field}),
            )
            .collect();
        ApiError {
            details: Some(d),
            ..ApiError::new(422, "Invalid", format!("{kind} \"{name}\" is invalid: {}", text.join(", ")))
        }
    }

    pub fn forbidden(r: &Resource, name: &str, why: &str) -> ApiError {
        let what = if name.is_empty() { r.qualified() } else { format!("{} \"{name}\"", r.qualified()) };
        ApiError {
            details: Some(details(r, name)),
            ..ApiError::new(403, "Forbidden", format!("{what} is forbidden: {why}"))
        }
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "InternalError", format!("Internal error occurred: {}", message.into()))
    }

    pub fn unsupported_media_type(content_type: &str) -> ApiError {
        ApiError::new(415, "UnsupportedMediaType", format!("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml (got {content_type:?})"))
    }

    /// 410 Gone: the resourceVersion asked for was compacted away.
    pub fn expired(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message)
    }

    /// The Status object.
    pub fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }

    /// The error of a store write on `r`.
    pub fn from_store(e: StoreError) -> ApiError {
        let res = |o: &ObjectRef| resources::for_kind(o.kind);
        match e {
            StoreError::NotFound(o) => ApiError::not_found(res(&o), &o.name),
            StoreError::AlreadyExists(o) => ApiError::already_exists(res(&o), &o.name),
            StoreError::Conflict(o) => ApiError::modified(res(&o), &o.name),
            StoreError::Invalid { what, message } => {
                let causes: Vec<(String, String)> =
                    split_causes(&message).into_iter().map(split_field).collect();
                ApiError::invalid(res(&what), &what.name, &causes)
            }
            StoreError::Forbidden { what, message } => ApiError::forbidden(res(&what), &what.name, &message),
            StoreError::Other(m) => ApiError::internal(m),
        }
    }
}

/// The store's rendering of several field errors, `[a: m1, b: m2]`, back into its items:
/// a new item starts after a `, ` outside quotes, with a field path and `: `. One error,
/// or a text that does not read that way, stays whole.
fn split_causes(message: &str) -> Vec<&str> {
    let Some(inner) = message.strip_prefix('[').and_then(|m| m.strip_suffix(']')) else {
        return vec![message];
    };
    let mut items = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in inner.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted && inner[i..].starts_with(", ") && field_len(&inner[i + 2..]).is_some() => {
                items.push(&inner[start..i]);
                start = i + 2;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    if items.len() > 1 && items.iter().all(|item| field_len(item).is_some()) {
        items
    } else {
        vec![message]
    }
}

/// Length of the field path `text` starts with, followed by `: `: a letter, then letters,
/// digits, `.`, `_`, `-`, `/`, and `[...]` map keys or indexes (which may hold spaces).
fn field_len(text: &str) -> Option<usize> {
    if !text.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    let mut in_key = false;
    for (i, c) in text.char_indices() {
        match c {
            ']' if in_key => in_key = false,
            _ if in_key => {}
            '[' => in_key = true,
            ':' => return text[i..].starts_with(": ").then_some(i),
            c if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/') => {}
            _ => return None,
        }
    }
    None
}

/// `spec.x: Invalid value: ...` → (`spec.x`, `Invalid value: ...`); no field → ("", message).
fn split_field(message: &str) -> (String, String) {
    match field_len(message) {
        Some(n) => (message[..n].to_string(), message[n + 2..].to_string()),
        None => (String::new(), message.to_string()),
    }
}

/// A successful `Status` (deletes, bindings, evictions).
pub fn success(code: u16, details: Option<Value>) -> Value {
    let mut s =
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code});
    if let Some(d) = details {
        s["details"] = d;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_cluster::Kind;

    #[test]
    fn store_errors_become_kubernetes_statuses() {
        let e = ApiError::from_store(StoreError::NotFound(ObjectRef::new(Kind::Job, "ns", "j")));
        assert_eq!((e.code, e.reason), (404, "NotFound"));
        assert_eq!(e.message, "jobs.batch \"j\" not found");
        assert_eq!(e.status()["details"], json!({"name": "j", "group": "batch", "kind": "jobs"}));
        let e = ApiError::from_store(StoreError::Conflict(ObjectRef::new(Kind::Pod, "ns", "p")));
        assert_eq!(e.code, 409);
        assert!(e
            .message
            .starts_with("Operation cannot be fulfilled on pods \"p\": the object has been modified"));
        let e = ApiError::from_store(StoreError::Invalid {
            what: ObjectRef::new(Kind::Pod, "ns", "p"),
            message: "spec.containers: Required value".into(),
        });
        assert_eq!(e.message, "Pod \"p\" is invalid: spec.containers: Required value");
        assert_eq!(e.status()["details"]["causes"][0]["field"], "spec.containers");
        // Several field errors: one cause each, a comma inside a value stays in its message.
        let e = ApiError::from_store(StoreError::Invalid {
            what: ObjectRef::new(Kind::Pod, "ns", "p"),
            message: "[metadata.labels[a b]: Invalid value: \"a b\": x, spec.containers[0].image: Invalid value: \"i, j: k\": y]"
                .into(),
        });
        let causes = &e.status()["details"]["causes"];
        assert_eq!(causes.as_array().map(Vec::len), Some(2), "{causes}");
        assert_eq!(causes[0]["field"], "metadata.labels[a b]");
        assert_eq!(causes[0]["message"], "Invalid value: \"a b\": x");
        assert_eq!(causes[1]["field"], "spec.containers[0].image");
        assert_eq!(causes[1]["message"], "Invalid value: \"i, j: k\": y");
        assert!(e.message.starts_with("Pod \"p\" is invalid: metadata.labels[a b]: "), "{}", e.message);
    }
}
