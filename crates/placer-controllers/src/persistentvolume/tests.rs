//! The PV controller against pv_controller's binding and provisioning rules.

use placer_cluster::embedded::EmbeddedCluster;
use serde_json::json;

use super::*;

fn obj(kind: Kind, v: serde_json::Value) -> Object {
    Object::from_json(kind, v).expect("a valid object")
}

fn create(store: &mut EmbeddedCluster, kind: Kind, v: serde_json::Value) {
    store.create(obj(kind, v)).expect("created");
}

fn settle(store: &mut EmbeddedCluster) -> PersistentVolumeController {
    let mut c = PersistentVolumeController::new();
    for _ in 0..10 {
        if !c.reconcile(store).expect("reconciles") {
            break;
        }
    }
    c
}

fn claim(store: &EmbeddedCluster, name: &str) -> PersistentVolumeClaim {
    match store.get(&ObjectRef::new(Kind::PersistentVolumeClaim, "default", name)) {
        Some(Object::PersistentVolumeClaim(c)) => c,
        other => panic!("no claim {name}: {other:?}"),
    }
}

fn pvc(name: &str, class: Option<&str>) -> serde_json::Value {
    let mut v = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
    if let Some(c) = class {
        v["spec"]["storageClassName"] = json!(c);
    }
    v
}

fn class(name: &str, mode: &str, provisioner: &str, default: bool) -> serde_json::Value {
    let mut v = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode});
    if default {
        v["metadata"]["annotations"] = json!({ANN_DEFAULT_CLASS: "true"});
    }
    v
}

#[test]
fn immediate_claims_bind_to_the_smallest_fitting_volume_and_get_the_default_class() {
    let mut store = EmbeddedCluster::new();
    create(&mut store, Kind::StorageClass, class("std", "Immediate", NO_PROVISIONER, true));
    for (name, size) in [("big", "10Gi"), ("small", "2Gi")] {
        create(
            &mut store,
            Kind::PersistentVolume,
            json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": "std",
                     "hostPath": {"path": "/x"}}}),
        );
    }
    create(&mut store, Kind::PersistentVolumeClaim, pvc("data", None));
    settle(&mut store);
    let c = claim(&store, "data");
    assert_eq!(c.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()), Some("std"));
    assert_eq!(volume_name(&c), "small");
    assert_eq!(c.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Bound"));
    assert_eq!(ann(&c.metadata, ANN_BIND_COMPLETED), Some("yes"));
    let Some(Object::PersistentVolume(big)) = store.get(&ObjectRef::new(Kind::PersistentVolume, "", "big"))
    else {
        panic!()
    };
    assert_eq!(big.status.and_then(|s| s.phase), Some("Available".to_string()));
}

#[test]
fn wait_for_first_consumer_claims_wait_then_provision_on_the_selected_node() {
    let mut store = EmbeddedCluster::new();
    create(
        &mut store,
        Kind::Node,
        json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "a"}}}),
    );
    create(
        &mut store,
        Kind::CSINode,
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
        "metadata": {"name": "n1"},
        "spec": {"drivers": [{"name": "csi.example.com", "nodeID": "n1", "topologyKeys": ["topology.kubernetes.io/zone"]}]}}),
    );
    create(&mut store, Kind::StorageClass, class("wait", "WaitForFirstConsumer", "csi.example.com", false));
    create(&mut store, Kind::PersistentVolumeClaim, pvc("data", Some("wait")));
    settle(&mut store);
    let c = claim(&store, "data");
    assert_eq!(c.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Pending"));
    assert!(store.list(Kind::PersistentVolume).is_empty());
    assert!(store.events().iter().any(|e| e.reason == "WaitForFirstConsumer"));

    let r = ObjectRef::new(Kind::PersistentVolumeClaim, "default", "data");
    store.merge_patch(&r, &json!({"metadata": {"annotations": {ANN_SELECTED_NODE: "n1"}}})).unwrap();
    settle(&mut store);
    let c = claim(&store, "data");
    assert_eq!(c.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Bound"));
    let pvs = store.list(Kind::PersistentVolume);
    let Some(Object::PersistentVolume(pv)) = pvs.first() else { panic!("no PV provisioned") };
    assert_eq!(pv.metadata.name.as_deref(), Some(volume_name(&c)));
    let terms = &pv
        .spec
        .as_ref()
        .unwrap()
        .node_affinity
        .as_ref()
        .unwrap()
        .required
        .as_ref()
        .unwrap()
        .node_selector_terms;
    let expr = &terms[0].match_expressions.as_ref().unwrap()[0];
    assert_eq!(
        (expr.key.as_str(), expr.values.clone()),
        ("topology.kubernetes.io/zone", Some(vec!["a".to_string()]))
    );

    // The claim goes: a provisioned volume with reclaim policy Delete goes with it.
    store.delete(&r).unwrap();
    settle(&mut store);
    assert!(store.list(Kind::PersistentVolume).is_empty());
}

#[test]
fn a_bound_claim_whose_volume_is_gone_is_lost() {
    let mut store = EmbeddedCluster::new();
    let mut v = pvc("data", Some(""));
    v["spec"]["volumeName"] = json!("gone");
    v["metadata"]["annotations"] = json!({ANN_BIND_COMPLETED: "yes"});
    create(&mut store, Kind::PersistentVolumeClaim, v);
    settle(&mut store);
    let c = claim(&store, "data");
    assert_eq!(c.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Lost"));
    assert!(store.events().iter().any(|e| e.reason == "ClaimLost"));
}
