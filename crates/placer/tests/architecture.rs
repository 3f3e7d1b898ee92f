//! ARCHITECTURE.md's dependency invariants, checked on the crates' manifests: only
//! placer-kube depends on kube; only placer-kube and placer-apiserver (the two HTTP
//! edges) depend on tokio and axum; only placer-api enables a k8s-openapi version.

use std::path::Path;

/// The names in the `[dependencies]` section of a manifest (dev-dependencies aside).
fn dependencies(manifest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps {
            if let Some((name, _)) = line.split_once('=') {
                let name = name.trim();
                if !name.is_empty() && !name.starts_with('#') {
                    out.push(name.to_string());
                }
            }
        }
    }
    out
}

#[test]
fn only_the_http_edges_depend_on_tokio_axum_and_kube() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut checked = 0;
    for entry in std::fs::read_dir(&crates).expect("crates/") {
        let dir = entry.expect("an entry").path();
        let Ok(manifest) = std::fs::read_to_string(dir.join("Cargo.toml")) else { continue };
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let deps = dependencies(&manifest);
        let has = |d: &str| deps.iter().any(|x| x == d);
        let edge = name == "placer-kube" || name == "placer-apiserver";
        assert!(!has("kube") || name == "placer-kube", "{name} depends on kube");
        assert!(!has("kube-lease-manager") || name == "placer-kube", "{name} depends on kube-lease-manager");
        assert!(!has("tokio") || edge, "{name} depends on tokio");
        assert!(!has("axum") || edge, "{name} depends on axum");
        let version_feature = manifest.lines().any(|l| l.contains("k8s-openapi") && l.contains("v1_"));
        assert!(!version_feature || name == "placer-api", "{name} enables a k8s-openapi version");
        checked += 1;
    }
    assert!(checked >= 9, "only {checked} crates found");
}
