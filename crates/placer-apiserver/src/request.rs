//! Parsing request paths (`/api/v1/namespaces/{ns}/pods/{name}/status`, ...) and query
//! strings.

use std::collections::BTreeMap;

use crate::errors::{ApiError, ApiResult};
use crate::resources::{self, Resource};

/// What a path addresses.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A collection: every object (`namespace: None`) or those of one namespace.
    Collection { resource: &'static Resource, namespace: Option<String> },
    /// One object, possibly a subresource of it.
    Object {
        resource: &'static Resource,
        namespace: Option<String>,
        name: String,
        subresource: Option<String>,
    },
}

impl Target {
    pub fn resource(&self) -> &'static Resource {
        match self {
            Target::Collection { resource, .. } | Target::Object { resource, .. } => resource,
        }
    }
}

/// A resource path, or `None` when the path is not under `/api/v1` or `/apis/{g}/{v}`.
pub fn parse_path(path: &str) -> Option<ApiResult<Target>> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", "v1", rest @ ..] if !rest.is_empty() => ("", "v1", rest),
        ["apis", group, version, rest @ ..] if !rest.is_empty() => (*group, *version, rest),
        _ => return None,
    };
    let lookup = |plural: &str| resources::find(group, version, plural).ok_or_else(ApiError::no_route);
    let decode = |s: &str| percent_decode(s);
    let target = match rest {
        [plural] => lookup(plural).map(|resource| Target::Collection { resource, namespace: None }),
        ["namespaces", ns, plural] if group.is_empty() && (*plural == "status" || *plural == "finalize") => {
            lookup("namespaces").map(|resource| Target::Object {
                resource,
                namespace: None,
                name: decode(ns),
                subresource: Some(plural.to_string()),
            })
        }
        ["namespaces", ns, plural] => {
            lookup(plural).map(|resource| Target::Collection { resource, namespace: Some(decode(ns)) })
        }
        ["namespaces", ns, plural, name, sub @ ..] if sub.len() <= 1 => {
            lookup(plural).map(|resource| Target::Object {
                resource,
                namespace: Some(decode(ns)),
                name: decode(name),
                subresource: sub.first().map(|s| s.to_string()),
            })
        }
        [plural, name, sub @ ..] if sub.len() <= 1 => lookup(plural).map(|resource| Target::Object {
            resource,
            namespace: None,
            name: decode(name),
            subresource: sub.first().map(|s| s.to_string()),
        }),
        _ => Err(ApiError::no_route()),
    };
    let target = target.and_then(check_scope);
    Some(target)
}

/// A namespaced resource addressed by name needs a namespace; a cluster-scoped one
/// takes none; subresources must exist.
fn check_scope(t: Target) -> ApiResult<Target> {
    match &t {
        Target::Collection { resource, namespace: Some(_) } if !resource.namespaced() => {
            Err(ApiError::no_route())
        }
        Target::Object { resource, namespace, subresource, .. } => {
            if resource.namespaced() != namespace.is_some() {
                return Err(ApiError::no_route());
            }
            if let Some(sub) = subresource {
                if !resource.subresources.contains(&sub.as_str()) && sub != "finalize" {
                    return Err(ApiError::no_route());
                }
            }
            Ok(t)
        }
        _ => Ok(t),
    }
}

/// Decodes `%XX` escapes and `+` (a space in query strings).
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Query parameters (the last value of a repeated key wins).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Query {
    params: BTreeMap<String, String>,
}

impl Query {
    pub fn parse(query: Option<&str>) -> Query {
        let mut params = BTreeMap::new();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            params.insert(percent_decode(k), percent_decode(v));
        }
        Query { params }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str).filter(|v| !v.is_empty())
    }

    pub fn flag(&self, key: &str) -> bool {
        matches!(self.params.get(key).map(String::as_str), Some("true" | "1" | ""))
            && self.params.contains_key(key)
    }

    pub fn number(&self, key: &str) -> ApiResult<Option<u64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.parse::<i64>().map(|n| Some(n.max(0) as u64)).map_err(|_| {
                ApiError::bad_request(format!("invalid value {v:?} for parameter {key}: must be an integer"))
            }),
        }
    }

    /// `dryRun=All`.
    pub fn dry_run(&self) -> bool {
        self.get("dryRun").is_some_and(|v| v == "All")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_cluster::Kind;

    fn object(path: &str) -> (Kind, Option<String>, String, Option<String>) {
        match parse_path(path) {
            Some(Ok(Target::Object { resource, namespace, name, subresource })) => {
                (resource.kind, namespace, name, subresource)
            }
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn paths_name_collections_objects_and_subresources() {
        assert_eq!(
            object("/api/v1/namespaces/demo/pods/p1/binding"),
            (Kind::Pod, Some("demo".into()), "p1".into(), Some("binding".into()))
        );
        assert_eq!(object("/api/v1/nodes/n1"), (Kind::Node, None, "n1".into(), None));
        assert_eq!(object("/api/v1/namespaces/demo"), (Kind::Namespace, None, "demo".into(), None));
        assert_eq!(
            object("/api/v1/namespaces/demo/status"),
            (Kind::Namespace, None, "demo".into(), Some("status".into()))
        );
        assert_eq!(
            object("/apis/scheduling.k8s.io/v1alpha2/namespaces/d/podgroups/g/status"),
            (Kind::PodGroup, Some("d".into()), "g".into(), Some("status".into()))
        );
        match parse_path("/apis/batch/v1/namespaces/d/jobs") {
            Some(Ok(Target::Collection { resource, namespace })) => {
                assert_eq!((resource.kind, namespace.as_deref()), (Kind::Job, Some("d")))
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse_path("/api/v1/pods"), Some(Ok(Target::Collection { namespace: None, .. }))));
    }

    #[test]
    fn bad_paths_are_404_and_other_paths_are_not_resources() {
        for p in
            ["/api/v1/widgets", "/api/v1/pods/p", "/api/v1/namespaces/x/nodes/n", "/api/v1/nodes/n/binding"]
        {
            assert_eq!(parse_path(p).map(|r| r.map_err(|e| e.code)), Some(Err(404)), "{p}");
        }
        assert!(parse_path("/version").is_none());
        assert!(parse_path("/api").is_none());
        assert!(parse_path("/apis/batch/v1").is_none());
    }

    #[test]
    fn queries_decode_escapes() {
        let q = Query::parse(Some("labelSelector=app%3Dweb%2Ctier+in+%28a%29&watch=true&limit=5&x"));
        assert_eq!(q.get("labelSelector"), Some("app=web,tier in (a)"));
        assert!(q.flag("watch"));
        assert!(!q.flag("allowWatchBookmarks"));
        assert_eq!(q.number("limit").unwrap(), Some(5));
        assert!(Query::parse(Some("limit=x")).number("limit").is_err());
    }
}
