//! Copy counting with devices: what it refuses, and its count against the plain path
//! (each copy's own claims allocated and recorded one after the other, as assumed pods'
//! are).
use super::*;
use crate::model::{ObjectKey, PodKey};
use crate::plugins::testing::{node, pod};
use placer_api::k8s::api::resource::v1::{
    CELDeviceSelector, Device, DeviceClaim, DeviceConstraint, DeviceRequest, DeviceSelector,
    ExactDeviceRequest, ResourceClaim, ResourceClaimConsumerReference, ResourceClaimSpec,
    ResourceClaimStatus, ResourceSlice,
};
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use proptest::prelude::*;

const DRIVER: &str = "gpu.example.com";

fn spec(count: i64, all: bool, constraint: bool) -> ResourceClaimSpec {
    let request = |name: &str| DeviceRequest {
        name: name.into(),
        exactly: Some(ExactDeviceRequest {
            device_class_name: "gpu".into(),
            count: (!all).then_some(count),
            allocation_mode: all.then(|| "All".into()),
            ..Default::default()
        }),
        first_available: None,
    };
    let (requests, constraints) = if constraint {
        (
            vec![request("a"), request("b")],
            Some(vec![DeviceConstraint {
                match_attribute: Some(format!("{DRIVER}/model")),
                ..Default::default()
            }]),
        )
    } else {
        (vec![request("r")], None)
    };
    ResourceClaimSpec { devices: Some(DeviceClaim { requests: Some(requests), constraints, config: None }) }
}

/// Claim `name`, controlled by pod `owner` (`uid-<owner>`) when given.
fn claim(name: &str, owner: Option<&str>, spec: ResourceClaimSpec) -> Arc<ResourceClaim> {
    Arc::new(ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            owner_references: owner.map(|o| {
                vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    name: o.into(),
                    uid: format!("uid-{o}"),
                    controller: Some(true),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        },
        spec,
        status: None,
    })
}

/// A slice of [`DRIVER`]'s devices (the DRA tests' builder).
fn slice(name: &str, node: Option<&str>, devices: Vec<Device>) -> Arc<ResourceSlice> {
    crate::snapshot::dra::tests::slice(name, DRIVER, node, devices)
}

fn gpu(k: usize) -> Device {
    let model = placer_api::k8s::api::resource::v1::DeviceAttribute {
        int: Some((k % 2) as i64),
        ..Default::default()
    };
    Device {
        name: format!("g{k}"),
        attributes: Some([("model".to_string(), model)].into()),
        ..Default::default()
    }
}

/// The GPU class and node n0's slice of `gpus` GPUs.
fn state(gpus: usize) -> DraState {
    let mut s = DraState::default();
    s.upsert_class(crate::plugins::testing::device_class("gpu", DRIVER));
    s.upsert_slice(slice("n0", Some("n0"), (0..gpus).map(gpu).collect()));
    s
}

/// Member `m{i}` with its claim `m{i}-gpu` from template `one-gpu`, stored with `spec`.
fn member(s: &mut DraState, i: usize, spec: ResourceClaimSpec) -> Arc<PodInfo> {
    let name = format!("m{i}");
    s.upsert_claim(claim(&format!("{name}-gpu"), Some(&name), spec));
    Arc::new(pod(&name).template_claim("gpu", "one-gpu", &format!("{name}-gpu")).build())
}

#[test]
fn claims_of_the_pods_own_from_one_template_are_counted() {
    let mut s = state(4);
    let pods: Vec<_> = (0..3).map(|i| member(&mut s, i, spec(1, false, false))).collect();
    let claims = s.copy_claims(&pods).expect("counted");
    let n0 = node("n0").build();
    assert_eq!(s.node_copies(&claims, &n0, s.in_use_set(), 10), Some(4));
    assert_eq!(s.node_copies(&claims, &n0, s.in_use_set(), 3), Some(3), "at most the limit");
    let m9 = member(&mut s, 9, spec(2, false, false));
    let two = s.copy_claims(&[m9]).unwrap();
    assert_eq!(s.node_copies(&two, &n0, s.in_use_set(), 10), Some(2));
    let m8 = member(&mut s, 8, spec(1, true, false));
    let all = s.copy_claims(&[m8]).unwrap();
    assert_eq!(s.node_copies(&all, &n0, s.in_use_set(), 10), Some(1), "All takes every GPU");
}

#[test]
fn claims_that_are_not_the_pods_own_or_not_alike_are_not_counted() {
    let mut s = state(4);
    let a = member(&mut s, 0, spec(1, false, false));
    // Another spec.
    let b = member(&mut s, 1, spec(2, false, false));
    assert!(s.copy_claims(&[a.clone(), b]).is_none(), "different specs");
    // A claim named in the pod (possibly shared).
    s.upsert_claim(claim("named", None, spec(1, false, false)));
    let named = Arc::new(pod("m2").resource_claim("gpu", "named").build());
    assert!(s.copy_claims(&[named]).is_none(), "named claim");
    // Owned by someone else (e.g. a PodGroup's claim).
    s.upsert_claim(claim("m3-gpu", Some("other"), spec(1, false, false)));
    let foreign = Arc::new(pod("m3").template_claim("gpu", "one-gpu", "m3-gpu").build());
    assert!(s.copy_claims(&[foreign]).is_none(), "not the pod's own");
    // Not generated yet.
    let mut waiting = pod("m4").template_claim("gpu", "one-gpu", "m4-gpu").build();
    let mut view = (*waiting.view).clone();
    view.resource_claims[0].generated = None;
    waiting.view = Arc::new(view);
    assert!(s.copy_claims(&[Arc::new(waiting)]).is_none(), "not generated yet");
    // Allocated (pending) or reserved.
    let c = member(&mut s, 5, spec(1, false, false));
    let n0 = node("n0").build();
    let entry = s.claim(&ObjectKey::new("default", "m5-gpu")).unwrap().clone();
    let allocation = s.allocate(&[&entry], &n0, &FxHashSet::default()).unwrap().unwrap().remove(0);
    s.record(entry.key.clone(), Arc::new(allocation), PodKey::new("default", "m5"));
    assert!(s.copy_claims(&[c]).is_none(), "allocated");
    let mut reserved = (*claim("m6-gpu", Some("m6"), spec(1, false, false))).clone();
    reserved.status = Some(ResourceClaimStatus {
        reserved_for: Some(vec![ResourceClaimConsumerReference {
            resource: "pods".into(),
            name: "m6".into(),
            uid: "uid-m6".into(),
            api_group: None,
        }]),
        ..Default::default()
    });
    s.upsert_claim(Arc::new(reserved));
    let r = Arc::new(pod("m6").template_claim("gpu", "one-gpu", "m6-gpu").build());
    assert!(s.copy_claims(&[r]).is_none(), "reserved");
    assert!(s.copy_claims(&[a]).is_some());
}

#[test]
fn nodes_with_devices_other_nodes_reach_or_that_can_be_shared_are_not_counted() {
    let n0 = node("n0").build();
    let mut s = state(2);
    let m0 = member(&mut s, 0, spec(1, false, false));
    let claims = s.copy_claims(&[m0]).unwrap();
    assert_eq!(s.node_copies(&claims, &n0, s.in_use_set(), 8), Some(2));
    // A network-attached slice reaches n0 too.
    let mut net = s.clone();
    net.upsert_slice(slice("net", None, vec![gpu(0)]));
    assert_eq!(net.node_copies(&claims, &n0, net.in_use_set(), 8), None);
    // A device that allows multiple allocations.
    let mut multi = s.clone();
    let mut d = gpu(0);
    d.allow_multiple_allocations = Some(true);
    multi.upsert_slice(slice("n0", Some("n0"), vec![d, gpu(1)]));
    assert_eq!(multi.node_copies(&claims, &n0, multi.in_use_set(), 8), None);
    // A selector that does not evaluate: the filter's error, not a count.
    let mut bad = s.clone();
    let mut broken = spec(1, false, false);
    if let Some(e) =
        broken.devices.as_mut().and_then(|d| d.requests.as_mut()).and_then(|r| r[0].exactly.as_mut())
    {
        e.selectors =
            Some(vec![DeviceSelector { cel: Some(CELDeviceSelector { expression: "device.(".into() }) }]);
    }
    let m1 = member(&mut bad, 1, broken);
    let broken = bad.copy_claims(&[m1]).unwrap();
    assert_eq!(bad.node_copies(&broken, &n0, bad.in_use_set(), 8), None);
}

proptest! {
    /// The count equals allocating each copy's own claim on the node and recording it
    /// before the next, until one fails (what assuming the members one by one does).
    #[test]
    fn node_copies_equals_allocating_copy_by_copy(
        gpus in 0usize..7,
        held in proptest::collection::vec(0usize..7, 0..4),
        count in 1i64..4,
        all in any::<bool>(),
        constraint in any::<bool>(),
        limit in 0u32..8,
    ) {
        let n0 = node("n0").build();
        let mut s = state(gpus);
        let mut used = FxHashSet::default();
        for h in held.into_iter().filter(|h| *h < gpus) {
            used.insert((DRIVER.into(), "n0".into(), format!("g{h}").as_str().into()));
        }
        let pods: Vec<_> = (0..limit as usize).map(|i| member(&mut s, i, spec(count, all, constraint))).collect();
        let Some(first) = s.copy_claims(&pods[..pods.len().min(1)]) else {
            prop_assert!(pods.is_empty());
            return Ok(());
        };
        let counted = s.node_copies(&first, &n0, &used, limit);
        let mut plain = 0u32;
        for (i, p) in pods.iter().enumerate() {
            let entry = s.claim(&ObjectKey::new("default", format!("m{i}-gpu").as_str())).unwrap().clone();
            let mut in_use = s.in_use_recomputed();
            in_use.extend(used.iter().cloned());
            match s.allocate(&[&entry], &n0, &in_use).unwrap() {
                Some(mut a) => {
                    s.record(entry.key.clone(), Arc::new(a.remove(0)), p.key.clone());
                    plain += 1;
                }
                None => break,
            }
        }
        prop_assert_eq!(counted, Some(plain));
    }
}
