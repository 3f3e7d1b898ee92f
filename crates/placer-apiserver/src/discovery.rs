//! Discovery: `/api`, `/apis`, `/api/v1`, `/apis/{group}`, `/apis/{group}/{version}`, the
//! aggregated form (`apidiscovery.k8s.io/v2`) when a client asks for it, and `/version`.

use serde_json::{json, Value};

use crate::resources::{self, subresource_info, verbs, Resource, RESOURCES};

/// The Kubernetes version the server reports.
pub const MAJOR: &str = "1";
pub const MINOR: &str = "36";
pub const GIT_VERSION: &str = "v1.36.0";

/// Content type of aggregated discovery responses.
pub const AGGREGATED_V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
const AGGREGATED_V2BETA1: &str = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

/// The aggregated discovery version a client accepts first, if any.
pub fn wants_aggregated(accept: &str) -> Option<&'static str> {
    for part in accept.split(',') {
        let params: Vec<&str> = part.split(';').map(str::trim).collect();
        if params.contains(&"g=apidiscovery.k8s.io") && params.contains(&"as=APIGroupDiscoveryList") {
            if params.contains(&"v=v2") {
                return Some(AGGREGATED_V2);
            }
            if params.contains(&"v=v2beta1") {
                return Some(AGGREGATED_V2BETA1);
            }
        }
        if params.first().is_some_and(|m| *m == "application/json") && params.len() == 1 {
            return None;
        }
    }
    None
}

pub fn version() -> Value {
    json!({
        "major": MAJOR,
        "minor": MINOR,
        "emulationMajor": MAJOR,
        "emulationMinor": MINOR,
        "minCompatibilityMajor": MAJOR,
        "minCompatibilityMinor": "35",
        "gitVersion": GIT_VERSION,
        "gitCommit": "placer-cluster",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "n/a (placer cluster, an embedded simulator)",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, if std::env::consts::ARCH == "x86_64" { "amd64" } else { std::env::consts::ARCH }),
    })
}

/// `/api`
pub fn core_versions(server: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server}],
    })
}

fn group_entry(group: &str, versions: &[&str]) -> Value {
    let gvs: Vec<Value> =
        versions.iter().map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v})).collect();
    // The preferred version is the first stable one, else the first listed.
    let preferred =
        versions.iter().find(|v| !v.contains("alpha") && !v.contains("beta")).unwrap_or(&versions[0]);
    json!({
        "name": group,
        "versions": gvs,
        "preferredVersion": {"groupVersion": format!("{group}/{preferred}"), "version": preferred},
    })
}

/// `/apis`
pub fn group_list() -> Value {
    let groups: Vec<Value> = resources::groups()
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, versions)| group_entry(g, &versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`
pub fn group(name: &str) -> Option<Value> {
    let (g, versions) = resources::groups().into_iter().find(|(g, _)| *g == name && !g.is_empty())?;
    let mut v = group_entry(g, &versions);
    v["kind"] = json!("APIGroup");
    v["apiVersion"] = json!("v1");
    Some(v)
}

fn resource_entries(r: &Resource) -> Vec<Value> {
    let mut main = json!({
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced(),
        "kind": r.kind_name,
        "verbs": verbs(),
    });
    if !r.short_names.is_empty() {
        main["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        main["categories"] = json!(r.categories);
    }
    let mut out = vec![main];
    for sub in r.subresources {
        let (group, version, kind, verbs) = subresource_info(sub, r);
        let mut e = json!({
            "name": format!("{}/{sub}", r.plural),
            "singularName": "",
            "namespaced": r.namespaced(),
            "kind": kind,
            "verbs": verbs,
        });
        if group != r.group || version != r.version {
            e["group"] = json!(group);
            e["version"] = json!(version);
        }
        out.push(e);
    }
    out
}

/// `/api/v1` or `/apis/{group}/{version}`
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let list: Vec<Value> = RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .flat_map(resource_entries)
        .collect();
    if list.is_empty() {
        return None;
    }
    let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list}))
}

fn aggregated_resource(r: &Resource) -> Value {
    let mut e = json!({
        "resource": r.plural,
        "responseKind": {"group": r.group, "version": r.version, "kind": r.kind_name},
        "scope": if r.namespaced() { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": verbs(),
    });
    if !r.short_names.is_empty() {
        e["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        e["categories"] = json!(r.categories);
    }
    if !r.subresources.is_empty() {
        e["subresources"] = r
            .subresources
            .iter()
            .map(|sub| {
                let (group, version, kind, verbs) = subresource_info(sub, r);
                json!({"subresource": sub, "responseKind": {"group": group, "version": version, "kind": kind}, "verbs": verbs})
            })
            .collect();
    }
    e
}

/// Aggregated discovery of the core group (`/api`, `core = true`) or of the named
/// groups (`/apis`).
pub fn aggregated(core: bool, content_type: &str) -> Value {
    let api_version =
        if content_type == AGGREGATED_V2 { "apidiscovery.k8s.io/v2" } else { "apidiscovery.k8s.io/v2beta1" };
    let items: Vec<Value> = resources::groups()
        .into_iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(g, mut versions)| {
            // Preferred (stable) version first.
            versions.sort_by_key(|v| v.contains("alpha") || v.contains("beta"));
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = RESOURCES
                        .iter()
                        .filter(|r| r.group == g && r.version == *v)
                        .map(aggregated_resource)
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            let mut metadata = json!({"creationTimestamp": null});
            if !g.is_empty() {
                metadata["name"] = json!(g);
            }
            json!({"metadata": metadata, "versions": versions})
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {}, "items": items})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_lists_every_group_version_and_subresource() {
        let groups = group_list();
        let names: Vec<&str> =
            groups["groups"].as_array().unwrap().iter().map(|g| g["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "batch",
                "coordination.k8s.io",
                "events.k8s.io",
                "policy",
                "resource.k8s.io",
                "scheduling.k8s.io",
                "storage.k8s.io"
            ]
        );
        let dra = resource_list("resource.k8s.io", "v1").unwrap();
        let dra: Vec<&str> =
            dra["resources"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
        for name in [
            "deviceclasses",
            "resourceslices",
            "resourceclaims",
            "resourceclaims/status",
            "resourceclaimtemplates",
        ] {
            assert!(dra.contains(&name), "{name} missing from {dra:?}");
        }
        let sched = group("scheduling.k8s.io").unwrap();
        assert_eq!(sched["preferredVersion"]["version"], "v1");
        let core = resource_list("", "v1").unwrap();
        let names: Vec<&str> =
            core["resources"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert!(
            names.contains(&"pods/binding")
                && names.contains(&"pods/eviction")
                && names.contains(&"namespaces/status")
        );
        let eviction =
            core["resources"].as_array().unwrap().iter().find(|r| r["name"] == "pods/eviction").unwrap();
        assert_eq!(
            (eviction["group"].as_str(), eviction["kind"].as_str()),
            (Some("policy"), Some("Eviction"))
        );
        assert!(resource_list("batch", "v2").is_none());
        let pg = resource_list("scheduling.k8s.io", "v1alpha2").unwrap();
        assert_eq!(pg["resources"][0]["name"], "podgroups");
    }

    #[test]
    fn aggregated_discovery_when_asked() {
        let kubectl = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(wants_aggregated(kubectl), Some(AGGREGATED_V2));
        assert_eq!(wants_aggregated("application/json, */*"), None);
        let core = aggregated(true, AGGREGATED_V2);
        assert_eq!(core["items"].as_array().unwrap().len(), 1);
        assert_eq!(core["items"][0]["versions"][0]["resources"][0]["resource"], "pods");
        let named = aggregated(false, AGGREGATED_V2);
        let sched = named["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["metadata"]["name"] == "scheduling.k8s.io")
            .unwrap();
        assert_eq!(sched["versions"][0]["version"], "v1");
    }
}
