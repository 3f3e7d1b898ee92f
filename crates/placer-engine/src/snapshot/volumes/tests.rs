//! The volume binder against upstream's binder_test.go cases.

use std::sync::Arc;

use placer_api::k8s::api::core::v1::{
    Container, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodSpec,
    Volume,
};
use placer_api::k8s::api::storage::v1::StorageClass;

use super::*;

fn class(name: &str, mode: &str, provisioner: &str) -> Arc<StorageClass> {
    Arc::new(
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode,
        }))
        .unwrap(),
    )
}

fn pvc(name: &str, class: &str, size: &str, volume: Option<&str>, bound: bool) -> Arc<PersistentVolumeClaim> {
    let mut v = serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                 "resources": {"requests": {"storage": size}}},
    });
    if let Some(vol) = volume {
        v["spec"]["volumeName"] = serde_json::json!(vol);
    }
    if bound {
        v["metadata"]["annotations"] = serde_json::json!({ANN_BIND_COMPLETED: "yes"});
    }
    Arc::new(serde_json::from_value(v).unwrap())
}

fn pv(name: &str, class: &str, size: &str, node: Option<&str>) -> Arc<PersistentVolume> {
    let mut v = serde_json::json!({
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                 "capacity": {"storage": size}, "local": {"path": "/x"}},
        "status": {"phase": "Available"},
    });
    if let Some(n) = node {
        v["spec"]["nodeAffinity"] = serde_json::json!({"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [n]}]}
        ]}});
    }
    Arc::new(serde_json::from_value(v).unwrap())
}

fn pod(claims: &[&str]) -> PodInfo {
    let volumes = claims
        .iter()
        .map(|c| Volume {
            name: c.to_string(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: c.to_string(),
                read_only: None,
            }),
            ..Default::default()
        })
        .collect();
    let p = Pod {
        metadata: placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("p".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container::default()],
            volumes: Some(volumes),
            ..Default::default()
        }),
        status: None,
    };
    PodInfo::from_pod(Arc::new(p)).unwrap()
}

fn labels(node: &str) -> Labels {
    Labels::from([("kubernetes.io/hostname".to_string(), node.to_string())])
}

fn state() -> VolumeState {
    let mut s = VolumeState::default();
    s.upsert_class(class("wait", "WaitForFirstConsumer", NO_PROVISIONER));
    s.upsert_class(class("immediate", "Immediate", NO_PROVISIONER));
    s.upsert_class(class("dynamic", "WaitForFirstConsumer", "csi.example.com"));
    s
}

#[test]
fn missing_claim_and_unbound_immediate_claim_are_classified() {
    let mut s = state();
    let err = s.pod_claims(&pod(&["data"])).unwrap_err();
    assert_eq!(err, ClaimsError::Unresolvable("persistentvolumeclaim \"data\" not found".into()));
    s.upsert_pvc(pvc("data", "immediate", "1Gi", None, false));
    let claims = s.pod_claims(&pod(&["data"])).unwrap().unwrap();
    assert_eq!((claims.bound.len(), claims.delayed.len(), claims.immediate.len()), (0, 0, 1));
    assert!(s.pod_claims(&pod(&[])).unwrap().is_none());
}

#[test]
fn bound_claims_check_their_volume_and_its_node_affinity() {
    let mut s = state();
    s.upsert_pvc(pvc("data", "wait", "1Gi", Some("pv1"), true));
    let claims = s.pod_claims(&pod(&["data"])).unwrap().unwrap();
    assert_eq!(s.find_pod_volumes(&claims, "n1", &labels("n1")).unwrap(), Err(vec![ERR_PV_NOT_EXIST]));
    s.upsert_pv(pv("pv1", "wait", "1Gi", Some("n1")));
    assert!(s.find_pod_volumes(&claims, "n1", &labels("n1")).unwrap().is_ok());
    assert_eq!(s.find_pod_volumes(&claims, "n2", &labels("n2")).unwrap(), Err(vec![ERR_NODE_CONFLICT]));
}

#[test]
fn unbound_claims_take_the_smallest_fitting_volume_on_the_node_once() {
    let mut s = state();
    s.upsert_pvc(pvc("a", "wait", "5Gi", None, false));
    s.upsert_pvc(pvc("b", "wait", "1Gi", None, false));
    s.upsert_pv(pv("big", "wait", "20Gi", Some("n1")));
    s.upsert_pv(pv("small", "wait", "2Gi", Some("n1")));
    s.upsert_pv(pv("mid", "wait", "10Gi", Some("n1")));
    s.upsert_pv(pv("elsewhere", "wait", "10Gi", Some("n2")));
    let claims = s.pod_claims(&pod(&["a", "b"])).unwrap().unwrap();
    let got = s.find_pod_volumes(&claims, "n1", &labels("n1")).unwrap().unwrap();
    let chosen: Vec<(&str, &str)> =
        got.static_bindings.iter().map(|(c, _, pv, _)| (&*c.name, pv.as_str())).collect();
    assert_eq!(chosen, [("b", "small"), ("a", "mid")]);
    // Assumed, the volumes are taken: a second pod's claim cannot have them.
    let undo = s.assume(&got, "n1");
    s.upsert_pvc(pvc("c", "wait", "1Gi", None, false));
    let other = s.pod_claims(&pod(&["c"])).unwrap().unwrap();
    let got2 = s.find_pod_volumes(&other, "n1", &labels("n1")).unwrap().unwrap();
    assert_eq!(got2.static_bindings[0].2, "big");
    for u in undo.into_iter().rev() {
        s.restore(u);
    }
    let got3 = s.find_pod_volumes(&other, "n1", &labels("n1")).unwrap().unwrap();
    assert_eq!(got3.static_bindings[0].2, "small");
    // No volume on n3 and no provisioner: the node does not fit.
    assert_eq!(s.find_pod_volumes(&claims, "n3", &labels("n3")).unwrap(), Err(vec![ERR_BIND_CONFLICT]));
}

#[test]
fn provisioning_follows_allowed_topologies_and_the_selected_node() {
    let mut s = state();
    let mut c: StorageClass = (*class("zonal", "WaitForFirstConsumer", "csi.example.com")).clone();
    c.allowed_topologies = Some(vec![serde_json::from_value(serde_json::json!({
        "matchLabelExpressions": [{"key": "kubernetes.io/hostname", "values": ["n2"]}]
    }))
    .unwrap()]);
    s.upsert_class(Arc::new(c));
    s.upsert_pvc(pvc("d", "zonal", "1Gi", None, false));
    let claims = s.pod_claims(&pod(&["d"])).unwrap().unwrap();
    assert_eq!(s.find_pod_volumes(&claims, "n1", &labels("n1")).unwrap(), Err(vec![ERR_BIND_CONFLICT]));
    let got = s.find_pod_volumes(&claims, "n2", &labels("n2")).unwrap().unwrap();
    assert_eq!(got.provisions.len(), 1);
    s.record(&VolumeWrite::SelectNode { claim: got.provisions[0].clone(), node: "n2".into() });
    assert!(s.find_pod_volumes(&claims, "n2", &labels("n2")).unwrap().is_ok());
    // Selected for n2: another node cannot have it even if the class allowed it.
    s.upsert_pvc(pvc("e", "dynamic", "1Gi", None, false));
    s.record(&VolumeWrite::SelectNode { claim: ObjectKey::new("default", "e"), node: "n2".into() });
    let e = s.pod_claims(&pod(&["e"])).unwrap().unwrap();
    assert_eq!(s.find_pod_volumes(&e, "n1", &labels("n1")).unwrap(), Err(vec![ERR_BIND_CONFLICT]));
    // A claim without class to provision is an error.
    s.upsert_pvc(pvc("f", "missing", "1Gi", None, false));
    let f = s.pod_claims(&pod(&["f"])).unwrap().unwrap();
    assert_eq!(f.immediate.len(), 1, "a missing class is not delayed binding");
}

fn driver(name: &str, storage_capacity: bool) -> Arc<CSIDriver> {
    Arc::new(
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name}, "spec": {"storageCapacity": storage_capacity},
        }))
        .unwrap(),
    )
}

/// upstream's `makeCapacity`: an empty node topology (every node) unless `node` is given.
fn capacity(name: &str, class: &str, node: Option<&str>, cap: &str, max: &str) -> Arc<CSIStorageCapacity> {
    let mut v = serde_json::json!({
        "metadata": {"name": name, "namespace": "kube-system"},
        "storageClassName": class,
        "nodeTopology": {},
    });
    if let Some(n) = node {
        v["nodeTopology"] = serde_json::json!({"matchLabels": {"kubernetes.io/hostname": n}});
    }
    if !cap.is_empty() {
        v["capacity"] = serde_json::json!(cap);
    }
    if !max.is_empty() {
        v["maximumVolumeSize"] = serde_json::json!(max);
    }
    Arc::new(serde_json::from_value(v).unwrap())
}

/// upstream's binder_test.go `TestCapacity`: each scenario with the CSIDriver opted in
/// (`storageCapacity: true`) and out (every scenario provisions then).
#[test]
fn provisioning_checks_csi_storage_capacity_when_the_driver_opts_in() {
    let ok: Result<(), Vec<&str>> = Ok(());
    let no_space: Result<(), Vec<&str>> = Err(vec![ERR_NOT_ENOUGH_SPACE]);
    type Want<'a> = Result<(), Vec<&'a str>>;
    let scenarios: Vec<(&str, Vec<Arc<CSIStorageCapacity>>, &Want)> = vec![
        ("network-attached", vec![capacity("net", "dynamic", None, "1Gi", "")], &ok),
        ("local-storage", vec![capacity("net", "dynamic", Some("n1"), "1Gi", "")], &ok),
        (
            "multiple",
            vec![
                capacity("a", "dynamic", Some("n2"), "1Gi", ""),
                capacity("b", "dynamic", Some("n1"), "1Gi", ""),
            ],
            &ok,
        ),
        ("no-storage", vec![], &no_space),
        ("wrong-node", vec![capacity("net", "dynamic", Some("n2"), "1Gi", "")], &no_space),
        ("wrong-storage-class", vec![capacity("net", "wait", Some("n1"), "1Gi", "")], &no_space),
        ("insufficient-storage", vec![capacity("net", "dynamic", Some("n1"), "1Mi", "")], &no_space),
        ("insufficient-volume-size", vec![capacity("net", "dynamic", Some("n1"), "1Gi", "1Mi")], &no_space),
        ("zero-storage", vec![capacity("net", "dynamic", Some("n1"), "0Mi", "")], &no_space),
        ("zero-volume-size", vec![capacity("net", "dynamic", Some("n1"), "", "0Mi")], &no_space),
        ("nil-storage", vec![capacity("net", "dynamic", Some("n1"), "", "")], &no_space),
        // A capacity without a node topology reaches no node.
        (
            "no-topology",
            vec![{
                let mut c = (*capacity("net", "dynamic", None, "1Gi", "")).clone();
                c.node_topology = None;
                Arc::new(c)
            }],
            &no_space,
        ),
        // maximumVolumeSize wins over a smaller capacity.
        ("volume-size-over-capacity", vec![capacity("net", "dynamic", Some("n1"), "1Mi", "1Gi")], &ok),
    ];
    for opt_in in [true, false] {
        for (name, capacities, want) in &scenarios {
            let mut s = state();
            s.upsert_csi_driver(driver("csi.example.com", opt_in));
            for c in capacities {
                s.upsert_capacity(c.clone());
            }
            s.upsert_pvc(pvc("p", "dynamic", "1Gi", None, false));
            let claims = s.pod_claims(&pod(&["p"])).unwrap().unwrap();
            let got = s.find_pod_volumes(&claims, "n1", &labels("n1")).unwrap().map(|v| {
                assert_eq!(v.provisions.len(), 1, "{name}");
            });
            let want = if opt_in { (*want).clone() } else { Ok(()) };
            assert_eq!(got, want, "{name}, storageCapacity={opt_in}");
        }
    }
    // A provisioner that is no CSIDriver, or a claim without a storage request: no check.
    let mut s = state();
    s.upsert_pvc(pvc("p", "dynamic", "1Gi", None, false));
    let claims = s.pod_claims(&pod(&["p"])).unwrap().unwrap();
    assert!(s.find_pod_volumes(&claims, "n1", &labels("n1")).unwrap().is_ok());
    s.upsert_csi_driver(driver("csi.example.com", true));
    assert_eq!(s.find_pod_volumes(&claims, "n1", &labels("n1")).unwrap(), Err(vec![ERR_NOT_ENOUGH_SPACE]));
    let mut no_request = (*pvc("p", "dynamic", "1Gi", None, false)).clone();
    no_request.spec.as_mut().unwrap().resources = None;
    s.upsert_pvc(Arc::new(no_request));
    let claims = s.pod_claims(&pod(&["p"])).unwrap().unwrap();
    assert!(s.find_pod_volumes(&claims, "n1", &labels("n1")).unwrap().is_ok());
}

#[test]
fn volume_attachments_are_indexed_by_node_and_resolved_through_csi_pvs() {
    use placer_api::k8s::api::storage::v1::VolumeAttachment;
    let va = |name: &str, node: &str, attacher: &str, pv: Option<&str>| -> Arc<VolumeAttachment> {
        let mut source = serde_json::json!({});
        if let Some(pv) = pv {
            source = serde_json::json!({"persistentVolumeName": pv});
        }
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "spec": {"attacher": attacher, "nodeName": node, "source": source},
            }))
            .unwrap(),
        )
    };
    let csi_pv = |name: &str, handle: &str| -> Arc<PersistentVolume> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": handle}},
            }))
            .unwrap(),
        )
    };
    let mut v = VolumeState::default();
    v.upsert_pv(csi_pv("pv-1", "vol-1"));
    v.upsert_pv(csi_pv("pv-2", "vol-2"));
    v.upsert_pv(pv("local", "c", "1Gi", Some("n1")));
    v.upsert_attachment(va("a", "n1", "ebs.csi.aws.com", Some("pv-1")));
    v.upsert_attachment(va("b", "n1", "", Some("pv-2"))); // no attacher
    v.upsert_attachment(va("c", "n1", "ebs.csi.aws.com", None)); // inline spec, no PV name
    v.upsert_attachment(va("d", "n1", "ebs.csi.aws.com", Some("missing")));
    v.upsert_attachment(va("e", "n1", "ebs.csi.aws.com", Some("local"))); // not a CSI PV
    v.upsert_attachment(va("f", "n2", "ebs.csi.aws.com", Some("pv-2")));
    let on =
        |v: &VolumeState, n: &str| v.attached_volumes(n).map(|(a, h)| format!("{a}/{h}")).collect::<Vec<_>>();
    assert_eq!(on(&v, "n1"), ["ebs.csi.aws.com/vol-1"]);
    assert_eq!(on(&v, "n2"), ["ebs.csi.aws.com/vol-2"]);
    // An update that moves the attachment re-indexes it; a delete forgets it.
    v.upsert_attachment(va("f", "n1", "ebs.csi.aws.com", Some("pv-2")));
    assert_eq!(on(&v, "n1"), ["ebs.csi.aws.com/vol-1", "ebs.csi.aws.com/vol-2"]);
    assert!(on(&v, "n2").is_empty());
    v.remove_attachment("a");
    v.remove_attachment("f");
    assert!(on(&v, "n1").is_empty());
    assert!(!v.attachments_by_node.contains_key("n2"), "an emptied node leaves the index");
}
