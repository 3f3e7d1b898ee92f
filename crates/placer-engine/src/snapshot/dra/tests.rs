//! The allocator and the claim state.
use super::*;
use crate::plugins::testing::node;
use placer_api::k8s::api::resource::v1::{
    CELDeviceSelector, Device, DeviceAttribute, DeviceCapacity, DeviceClaim, DeviceClassSpec,
    DeviceConstraint, DeviceRequest, DeviceRequestAllocationResult, DeviceSelector, DeviceSubRequest,
    DeviceTaint, DeviceToleration, ExactDeviceRequest, ResourceClaimSpec, ResourcePool, ResourceSliceSpec,
};
use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rustc_hash::FxHashSet;

fn sel(e: &str) -> DeviceSelector {
    DeviceSelector { cel: Some(CELDeviceSelector { expression: e.into() }) }
}

fn class(name: &str, driver: &str) -> Arc<DeviceClass> {
    Arc::new(DeviceClass {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: DeviceClassSpec {
            selectors: Some(vec![sel(&format!("device.driver == {driver:?}"))]),
            ..Default::default()
        },
    })
}

fn device(name: &str, attrs: &[(&str, i64)]) -> Device {
    let attributes = attrs
        .iter()
        .map(|(k, v)| (k.to_string(), DeviceAttribute { int: Some(*v), ..Default::default() }))
        .collect();
    Device { name: name.into(), attributes: Some(attributes), ..Default::default() }
}

pub(super) fn slice(
    name: &str,
    driver: &str,
    node: Option<&str>,
    devices: Vec<Device>,
) -> Arc<ResourceSlice> {
    Arc::new(ResourceSlice {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: ResourceSliceSpec {
            driver: driver.into(),
            node_name: node.map(Into::into),
            all_nodes: node.is_none().then_some(true),
            pool: ResourcePool { name: name.into(), generation: 1, resource_slice_count: 1 },
            devices: Some(devices),
            ..Default::default()
        },
    })
}

fn claim(name: &str, requests: Vec<DeviceRequest>, constraints: Vec<DeviceConstraint>) -> ClaimEntry {
    let c = ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(requests),
                constraints: Some(constraints),
                config: None,
            }),
        },
        status: None,
    };
    ClaimEntry::new(ObjectKey::new("default", name), Arc::new(c))
}

fn request(
    name: &str,
    class: &str,
    mode: Option<&str>,
    count: Option<i64>,
    selectors: &[&str],
) -> DeviceRequest {
    DeviceRequest {
        name: name.into(),
        exactly: Some(ExactDeviceRequest {
            device_class_name: class.into(),
            allocation_mode: mode.map(Into::into),
            count,
            selectors: Some(selectors.iter().map(|s| sel(s)).collect()),
            ..Default::default()
        }),
        first_available: None,
    }
}

fn devices_of(a: &AllocationResult) -> Vec<String> {
    a.devices
        .as_ref()
        .unwrap()
        .results
        .as_ref()
        .unwrap()
        .iter()
        .map(|r| format!("{}/{}", r.pool, r.device))
        .collect()
}

fn state() -> DraState {
    let mut s = DraState::default();
    s.upsert_class(class("gpu", "gpu.example.com"));
    s.upsert_slice(slice(
        "n1",
        "gpu.example.com",
        Some("n1"),
        vec![device("g0", &[("link", 0)]), device("g1", &[("link", 1)]), device("g2", &[("link", 1)])],
    ));
    s.upsert_slice(slice("n2", "gpu.example.com", Some("n2"), vec![device("g0", &[("link", 0)])]));
    s
}

#[test]
fn exact_count_skips_devices_in_use_and_pins_node_local_allocations() {
    let s = state();
    let n1 = node("n1").build();
    let c = claim("c", vec![request("r", "gpu", None, Some(2), &[])], vec![]);
    let mut used = FxHashSet::default();
    used.insert(("gpu.example.com".into(), "n1".into(), "g0".into()));
    let got = s.allocate(&[&c], &n1, &used).unwrap().unwrap();
    assert_eq!(devices_of(&got[0]), ["n1/g1", "n1/g2"]);
    let terms = &got[0].node_selector.as_ref().unwrap().node_selector_terms;
    assert_eq!(terms[0].match_fields.as_ref().unwrap()[0].values.as_deref(), Some(&["n1".to_string()][..]));
    // Only one device on n2: two cannot be allocated there.
    let n2 = node("n2").build();
    assert_eq!(s.allocate(&[&c], &n2, &FxHashSet::default()).unwrap(), None);
}

#[test]
fn match_attribute_backtracks_to_devices_that_agree() {
    let s = state();
    let c = claim(
        "c",
        vec![request("a", "gpu", None, Some(1), &[]), request("b", "gpu", None, Some(1), &[])],
        vec![DeviceConstraint { match_attribute: Some("gpu.example.com/link".into()), ..Default::default() }],
    );
    // g0 (link 0) is tried first for `a`; no second device has link 0, so g1 + g2.
    let got = s.allocate(&[&c], &node("n1").build(), &FxHashSet::default()).unwrap().unwrap();
    assert_eq!(devices_of(&got[0]), ["n1/g1", "n1/g2"]);
}

#[test]
fn all_mode_takes_every_matching_device_and_fails_if_one_is_held() {
    let s = state();
    let c = claim(
        "c",
        vec![request("r", "gpu", Some("All"), None, &[r#"device.attributes["gpu.example.com"].link == 1"#])],
        vec![],
    );
    let n1 = node("n1").build();
    let got = s.allocate(&[&c], &n1, &FxHashSet::default()).unwrap().unwrap();
    assert_eq!(devices_of(&got[0]), ["n1/g1", "n1/g2"]);
    let mut used = FxHashSet::default();
    used.insert(("gpu.example.com".into(), "n1".into(), "g2".into()));
    assert_eq!(s.allocate(&[&c], &n1, &used).unwrap(), None);
}

#[test]
fn two_claims_of_one_pod_never_share_a_device_and_all_nodes_slices_add_no_selector() {
    let mut s = state();
    s.upsert_class(class("chan", "imex.example.com"));
    s.upsert_slice(slice("imex", "imex.example.com", None, vec![device("ch0", &[])]));
    let a = claim("a", vec![request("r", "gpu", None, Some(1), &[])], vec![]);
    let b = claim("b", vec![request("r", "gpu", None, Some(1), &[])], vec![]);
    let n2 = node("n2").build();
    assert_eq!(s.allocate(&[&a, &b], &n2, &FxHashSet::default()).unwrap(), None, "n2 has one GPU");
    let ch = claim("ch", vec![request("r", "chan", None, None, &[])], vec![]);
    let got = s.allocate(&[&ch], &n2, &FxHashSet::default()).unwrap().unwrap();
    assert_eq!(devices_of(&got[0]), ["imex/ch0"]);
    assert_eq!(got[0].node_selector, None, "a device for all nodes does not restrict the node");
}

#[test]
fn selector_errors_name_the_claim_and_the_device() {
    let s = state();
    let c = claim(
        "c",
        vec![request("r", "gpu", None, None, &[r#"device.attributes["gpu.example.com"].model == "x""#])],
        vec![],
    );
    let err = s.allocate(&[&c], &node("n1").build(), &FxHashSet::default()).unwrap_err();
    assert_eq!(
        err,
        "claim default/c: selector #0 on device gpu.example.com/n1/g0: CEL runtime error: no such key: model"
    );
}

#[test]
fn pending_allocations_hold_devices_until_the_store_shows_them_or_their_pods_go() {
    let mut s = state();
    let c = claim("c", vec![request("r", "gpu", None, Some(1), &[])], vec![]);
    let got = s.allocate(&[&c], &node("n2").build(), &FxHashSet::default()).unwrap().unwrap();
    s.record(c.key.clone(), Arc::new(got[0].clone()), ObjectKey::new("default", "p"));
    assert_eq!(s.in_use().len(), 1);
    assert_eq!(s.allocate(&[&c], &node("n2").build(), &s.in_use()).unwrap(), None, "n2's only GPU is held");
    s.forget_pod(&ObjectKey::new("default", "p"));
    assert!(s.in_use().is_empty());
}

// ---------------------------------------------------------------------------------------
// Cases of upstream's structured allocator tests (allocator_test.go, v1.36 features).

const DRIVER: &str = "gpu.example.com";

/// A device with `memory` capacity and a `driverVersion` version attribute.
fn mem_device(name: &str, memory: &str, version: &str) -> Device {
    Device {
        name: name.into(),
        capacity: Some(
            [("memory".to_string(), DeviceCapacity { value: Quantity(memory.into()), ..Default::default() })]
                .into(),
        ),
        attributes: Some(
            [(
                "driverVersion".to_string(),
                DeviceAttribute { version: Some(version.into()), ..Default::default() },
            )]
            .into(),
        ),
        ..Default::default()
    }
}

fn memory_at_least(q: &str) -> String {
    format!(r#"device.capacity["{DRIVER}"].memory.compareTo(quantity("{q}")) >= 0"#)
}

fn sub(name: &str, class: &str, count: i64, selectors: &[&str]) -> DeviceSubRequest {
    DeviceSubRequest {
        name: name.into(),
        device_class_name: class.into(),
        count: Some(count),
        selectors: Some(selectors.iter().map(|s| sel(s)).collect()),
        ..Default::default()
    }
}

fn prioritized(name: &str, subs: Vec<DeviceSubRequest>) -> DeviceRequest {
    DeviceRequest { name: name.into(), exactly: None, first_available: Some(subs) }
}

fn results_of(a: &AllocationResult) -> Vec<(String, String)> {
    let list: &[DeviceRequestAllocationResult] =
        a.devices.as_ref().and_then(|d| d.results.as_deref()).unwrap_or(&[]);
    list.iter().map(|r| (r.request.clone(), format!("{}/{}", r.pool, r.device))).collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

fn one_node(devices: Vec<Device>) -> DraState {
    let mut s = DraState::default();
    s.upsert_class(class("gpu", DRIVER));
    s.upsert_slice(slice("pool1", DRIVER, Some("n1"), devices));
    s
}

fn alloc(s: &DraState, c: &ClaimEntry, used: &[&str]) -> Option<Vec<AllocationResult>> {
    let used: FxHashSet<DeviceId> =
        used.iter().map(|d| (DRIVER.into(), "pool1".into(), (*d).into())).collect();
    s.allocate(&[c], &node("n1").build(), &used).unwrap()
}

#[test]
fn prioritized_list_takes_the_first_subrequest_that_leads_to_a_full_solution() {
    // "prioritized-list-subrequests-with-expressions": req0 backtracks to the 1Gi device so
    // that req1's second subrequest gets the two 2Gi devices.
    let s = one_node(vec![
        mem_device("d1", "2Gi", "1.0.0"),
        mem_device("d2", "2Gi", "1.0.0"),
        mem_device("d3", "1Gi", "1.0.0"),
    ]);
    let (one, two, four) = (memory_at_least("1Gi"), memory_at_least("2Gi"), memory_at_least("4Gi"));
    let c = claim(
        "c",
        vec![
            request("req-0", "gpu", None, Some(1), &[&one]),
            prioritized("req-1", vec![sub("sub-0", "gpu", 1, &[&four]), sub("sub-1", "gpu", 2, &[&two])]),
        ],
        vec![],
    );
    let got = alloc(&s, &c, &[]).expect("a solution");
    assert_eq!(
        results_of(&got[0]),
        pairs(&[("req-0", "pool1/d3"), ("req-1/sub-1", "pool1/d1"), ("req-1/sub-1", "pool1/d2")])
    );
    // "prioritized-list-non-available": no subrequest can be satisfied.
    let c = claim(
        "c",
        vec![prioritized("req-0", vec![sub("sub-0", "gpu", 4, &[]), sub("sub-1", "gpu", 5, &[])])],
        vec![],
    );
    assert_eq!(alloc(&s, &c, &[]), None);
}

#[test]
fn prioritized_list_falls_back_when_all_mode_cannot_have_every_device() {
    // "prioritized-list-subrequests-with-allocation-mode-all": device1 is in use, so the
    // `All` subrequest fails and the next one gets device2.
    let s = one_node(vec![mem_device("device1", "1Gi", "1.0.0"), mem_device("device2", "1Gi", "1.0.0")]);
    let mut all = sub("sub-0", "gpu", 1, &[]);
    all.allocation_mode = Some("All".into());
    all.count = None;
    let c = claim("c", vec![prioritized("req-0", vec![all.clone(), sub("sub-1", "gpu", 1, &[])])], vec![]);
    let got = alloc(&s, &c, &["device1"]).expect("a solution");
    assert_eq!(results_of(&got[0]), pairs(&[("req-0/sub-1", "pool1/device2")]));
    // "prioritized-list-allocation-mode-all-multiple-requests": req-0 holds device1.
    let c = claim(
        "c",
        vec![
            request("req-0", "gpu", None, Some(1), &[]),
            prioritized("req-1", vec![all, sub("sub-1", "gpu", 1, &[])]),
        ],
        vec![],
    );
    let got = alloc(&s, &c, &[]).expect("a solution");
    assert_eq!(results_of(&got[0]), pairs(&[("req-0", "pool1/device1"), ("req-1/sub-1", "pool1/device2")]));
}

#[test]
fn constraints_name_a_parent_request_or_one_subrequest() {
    let version = "gpu.example.com/driverVersion".to_string();
    let s = {
        let mut s = DraState::default();
        s.upsert_class(class("gpu", DRIVER));
        s.upsert_slice(slice("pool1", DRIVER, Some("n1"), vec![mem_device("device1", "8Gi", "1.0.0")]));
        s.upsert_slice(slice(
            "pool2",
            DRIVER,
            Some("n1"),
            vec![mem_device("device2", "2Gi", "2.0.0"), mem_device("device3", "1Gi", "1.0.0")],
        ));
        s
    };
    let requests = || {
        vec![
            request("req-0", "gpu", None, Some(1), &[&memory_at_least("8Gi")]),
            prioritized(
                "req-1",
                vec![
                    sub("sub-0", "gpu", 1, &[&memory_at_least("2Gi")]),
                    sub("sub-1", "gpu", 1, &[&memory_at_least("1Gi")]),
                ],
            ),
        ]
    };
    let constraint = |names: &[&str]| DeviceConstraint {
        match_attribute: Some(version.clone()),
        requests: Some(names.iter().map(|n| n.to_string()).collect()),
        ..Default::default()
    };
    let n1 = node("n1").build();
    let none = FxHashSet::default();
    // "...-ref-parent-request": the constraint covers both subrequests: device2 (2.0.0) is
    // out, sub-1 gets device3 (1.0.0).
    let c = claim("c", requests(), vec![constraint(&["req-0", "req-1"])]);
    let got = s.allocate(&[&c], &n1, &none).unwrap().expect("a solution");
    assert_eq!(results_of(&got[0]), pairs(&[("req-0", "pool1/device1"), ("req-1/sub-1", "pool2/device3")]));
    // "...-ref-sub-request": only sub-0 is constrained; it fails, sub-1 is free to take
    // device2 (the first device of at least 1Gi left).
    let c = claim("c", requests(), vec![constraint(&["req-0", "req-1/sub-0"])]);
    let got = s.allocate(&[&c], &n1, &none).unwrap().expect("a solution");
    assert_eq!(results_of(&got[0]), pairs(&[("req-0", "pool1/device1"), ("req-1/sub-1", "pool2/device2")]));
}

#[test]
fn distinct_attribute_needs_different_values_and_the_attribute_itself() {
    // g0 link 0, g1 link 1, g2 link 1 on n1: two devices with distinct links are g0 + g1;
    // three cannot be had.
    let s = state();
    let distinct =
        || DeviceConstraint { distinct_attribute: Some("gpu.example.com/link".into()), ..Default::default() };
    let c = claim("c", vec![request("r", "gpu", None, Some(2), &[])], vec![distinct()]);
    let n1 = node("n1").build();
    let got = s.allocate(&[&c], &n1, &FxHashSet::default()).unwrap().unwrap();
    assert_eq!(devices_of(&got[0]), ["n1/g0", "n1/g1"]);
    let c = claim("c", vec![request("r", "gpu", None, Some(3), &[])], vec![distinct()]);
    assert_eq!(s.allocate(&[&c], &n1, &FxHashSet::default()).unwrap(), None);
    // With g0 in use, g1 and g2 share their link: no solution.
    let c = claim("c", vec![request("r", "gpu", None, Some(2), &[])], vec![distinct()]);
    let mut used = FxHashSet::default();
    used.insert((DRIVER.into(), "n1".into(), "g0".into()));
    assert_eq!(s.allocate(&[&c], &n1, &used).unwrap(), None);
    // A device without the attribute never satisfies the constraint.
    let c = claim(
        "c",
        vec![request("r", "gpu", None, Some(1), &[])],
        vec![DeviceConstraint {
            distinct_attribute: Some("gpu.example.com/missing".into()),
            ..Default::default()
        }],
    );
    assert_eq!(s.allocate(&[&c], &n1, &FxHashSet::default()).unwrap(), None);
}

#[test]
fn admin_access_takes_devices_in_use_and_leaves_them_free_for_others() {
    let s = one_node(vec![mem_device("device1", "1Gi", "1.0.0")]);
    let mut r = request("req-0", "gpu", None, Some(1), &[]);
    if let Some(e) = r.exactly.as_mut() {
        e.admin_access = Some(true);
    }
    let c = claim("admin", vec![r.clone()], vec![]);
    // "admin-access-enabled": allocated although another claim holds the device.
    let got = alloc(&s, &c, &["device1"]).expect("a solution");
    let result = &got[0].devices.as_ref().unwrap().results.as_ref().unwrap()[0];
    assert_eq!((result.device.as_str(), result.admin_access), ("device1", Some(true)));
    // Never twice in one claim.
    let twice = claim(
        "admin",
        vec![r.clone(), {
            let mut r2 = r.clone();
            r2.name = "req-1".into();
            r2
        }],
        vec![],
    );
    assert_eq!(alloc(&s, &twice, &[]), None);
    // An admin-access allocation does not put the device in use.
    let mut state = s.clone();
    let mut allocated = ResourceClaim::clone(&c.claim);
    allocated.status = Some(placer_api::k8s::api::resource::v1::ResourceClaimStatus {
        allocation: Some(got[0].clone()),
        ..Default::default()
    });
    state.upsert_claim(Arc::new(allocated));
    assert!(state.in_use().is_empty());
}

#[test]
fn tainted_devices_go_only_to_requests_that_tolerate_their_taints() {
    let taint = |effect: &str| DeviceTaint {
        key: "example.com/taint".into(),
        value: Some("tainted".into()),
        effect: effect.into(),
        time_added: None,
    };
    let mut tainted = mem_device("device1", "1Gi", "1.0.0");
    tainted.taints = Some(vec![taint("NoSchedule")]);
    let mut informational = mem_device("device2", "1Gi", "1.0.0");
    informational.taints = Some(vec![taint("None")]);
    let s = one_node(vec![tainted, informational]);
    // "tainted-two-devices" (without tolerations): device1 is skipped, the `None` taint
    // does not matter.
    let c = claim("c", vec![request("req-0", "gpu", None, Some(1), &[])], vec![]);
    assert_eq!(results_of(&alloc(&s, &c, &[]).unwrap()[0]), pairs(&[("req-0", "pool1/device2")]));
    let two = claim("c", vec![request("req-0", "gpu", None, Some(2), &[])], vec![]);
    assert_eq!(alloc(&s, &two, &[]), None);
    // "tainted-all-devices-single": `All` needs every device, device1 is not tolerated.
    let all = claim("c", vec![request("req-0", "gpu", Some("All"), None, &[])], vec![]);
    assert_eq!(alloc(&s, &all, &[]), None);
    // "tainted-tolerated": with a toleration (Equal and Exists forms) both are allocated
    // and the tolerations are recorded in the results.
    for toleration in [
        DeviceToleration {
            key: Some("example.com/taint".into()),
            value: Some("tainted".into()),
            ..Default::default()
        },
        DeviceToleration { operator: Some("Exists".into()), ..Default::default() },
        DeviceToleration {
            key: Some("example.com/taint".into()),
            operator: Some("Exists".into()),
            effect: Some("NoSchedule".into()),
            ..Default::default()
        },
    ] {
        let mut r = request("req-0", "gpu", None, Some(2), &[]);
        r.exactly.as_mut().unwrap().tolerations = Some(vec![toleration.clone()]);
        let c = claim("c", vec![r], vec![]);
        let got = alloc(&s, &c, &[]).unwrap_or_else(|| panic!("{toleration:?} tolerates the taint"));
        let results = got[0].devices.as_ref().unwrap().results.as_ref().unwrap();
        assert_eq!(results.len(), 2);
        assert!(results.iter().all(|r| r.tolerations.as_deref() == Some(&[toleration.clone()][..])));
    }
    // A toleration for another value or effect does not help.
    for toleration in [
        DeviceToleration {
            key: Some("example.com/taint".into()),
            value: Some("other".into()),
            ..Default::default()
        },
        DeviceToleration {
            key: Some("example.com/taint".into()),
            operator: Some("Exists".into()),
            effect: Some("NoExecute".into()),
            ..Default::default()
        },
    ] {
        let mut r = request("req-0", "gpu", None, Some(2), &[]);
        r.exactly.as_mut().unwrap().tolerations = Some(vec![toleration]);
        assert_eq!(alloc(&s, &claim("c", vec![r], vec![]), &[]), None);
    }
}

#[test]
fn all_mode_without_any_matching_device_has_no_solution() {
    // Upstream: at least one device is required for `All`.
    let s = state();
    let c = claim(
        "c",
        vec![request("r", "gpu", Some("All"), None, &[r#"device.attributes["gpu.example.com"].link == 7"#])],
        vec![],
    );
    assert_eq!(s.allocate(&[&c], &node("n1").build(), &FxHashSet::default()).unwrap(), None);
}

#[test]
fn a_subrequest_of_a_missing_class_is_upstream_s_message() {
    let s = state();
    let c = claim("c", vec![prioritized("req-0", vec![sub("sub-0", "nope", 1, &[])])], vec![]);
    assert_eq!(s.check_requests(&c).unwrap_err(), "request req-0/sub-0: device class nope does not exist");
}

// Partitionable devices (upstream allocator_testing.go, "partitionable-devices-*").

fn counter_device(name: &str, sets: &[(&str, &[(&str, &str)])]) -> Device {
    use placer_api::k8s::api::resource::v1::{Counter, DeviceCounterConsumption};
    Device {
        name: name.into(),
        consumes_counters: Some(
            sets.iter()
                .map(|(set, counters)| DeviceCounterConsumption {
                    counter_set: set.to_string(),
                    counters: counters
                        .iter()
                        .map(|(k, v)| (k.to_string(), Counter { value: Quantity(v.to_string()) }))
                        .collect(),
                })
                .collect(),
        ),
        ..Default::default()
    }
}

/// A pool of two slices on n1: `devices`, and the counter sets in a slice of their own.
fn partitioned(s: &mut DraState, pool: &str, devices: Vec<Device>, sets: &[(&str, &[(&str, &str)])]) {
    use placer_api::k8s::api::resource::v1::{Counter, CounterSet};
    let mk = |name: String, devices: Option<Vec<Device>>, shared: Option<Vec<CounterSet>>| {
        Arc::new(ResourceSlice {
            metadata: ObjectMeta { name: Some(name), ..Default::default() },
            spec: ResourceSliceSpec {
                driver: DRIVER.into(),
                node_name: Some("n1".into()),
                pool: ResourcePool { name: pool.into(), generation: 1, resource_slice_count: 2 },
                devices,
                shared_counters: shared,
                ..Default::default()
            },
        })
    };
    let sets = sets
        .iter()
        .map(|(set, counters)| CounterSet {
            name: set.to_string(),
            counters: counters
                .iter()
                .map(|(k, v)| (k.to_string(), Counter { value: Quantity(v.to_string()) }))
                .collect(),
        })
        .collect();
    s.upsert_slice(mk(format!("{pool}-devices"), Some(devices), None));
    s.upsert_slice(mk(format!("{pool}-counters"), None, Some(sets)));
}

#[test]
fn partitionable_devices_fit_the_counters_left_in_their_pool() {
    // "partitionable-devices-multiple-devices": 4Gi + 6Gi exceed 8Gi, 4Gi + 4Gi fit.
    let mut s = DraState::default();
    s.upsert_class(class("gpu", DRIVER));
    let devices = vec![
        counter_device("device-1", &[("counter-set-1", &[("memory", "4Gi")])]),
        counter_device("device-2", &[("counter-set-1", &[("memory", "6Gi")])]),
        counter_device("device-3", &[("counter-set-1", &[("memory", "4Gi")])]),
    ];
    partitioned(&mut s, "pool1", devices, &[("counter-set-1", &[("memory", "8Gi")])]);
    let two = claim(
        "c",
        vec![request("req-0", "gpu", None, Some(1), &[]), request("req-1", "gpu", None, Some(1), &[])],
        vec![],
    );
    let got = alloc(&s, &two, &[]).expect("fits");
    assert_eq!(results_of(&got[0]), pairs(&[("req-0", "pool1/device-1"), ("req-1", "pool1/device-3")]));
    // "partitionable-devices-no-capacity-available": device-2 (16Gi) allocated of 18Gi.
    let mut s = DraState::default();
    s.upsert_class(class("gpu", DRIVER));
    let devices = vec![
        counter_device("device-1", &[("counter-set-1", &[("memory", "4Gi")])]),
        counter_device("device-2", &[("counter-set-1", &[("memory", "16Gi")])]),
    ];
    partitioned(&mut s, "pool1", devices, &[("counter-set-1", &[("memory", "18Gi")])]);
    let one = claim("c", vec![request("req-0", "gpu", None, Some(1), &[])], vec![]);
    assert_eq!(alloc(&s, &one, &["device-2"]), None);
    assert!(alloc(&s, &one, &[]).is_some());
}

#[test]
fn partitionable_devices_of_several_pools_and_counter_sets() {
    // "partitionable-devices-multiple-pools": pool1 has device-2 and device-3 allocated
    // (10 of 18Gi, 8 of 8 cpus), pool2 has device-1 allocated (6 of 8 cpus): only pool2's
    // device-2 and device-3 (1 cpu each) fit.
    let mut s = DraState::default();
    s.upsert_class(class("gpu", DRIVER));
    let set: &[(&str, &[(&str, &str)])] = &[("counter-set-1", &[("cpus", "8"), ("memory", "18Gi")])];
    let mk = |a: (&str, &str), b: (&str, &str), c: (&str, &str)| {
        vec![
            counter_device("device-1", &[("counter-set-1", &[("cpus", a.0), ("memory", a.1)])]),
            counter_device("device-2", &[("counter-set-1", &[("cpus", b.0), ("memory", b.1)])]),
            counter_device("device-3", &[("counter-set-1", &[("cpus", c.0), ("memory", c.1)])]),
        ]
    };
    partitioned(&mut s, "pool1", mk(("6", "4Gi"), ("4", "6Gi"), ("4", "4Gi")), set);
    partitioned(&mut s, "pool2", mk(("6", "4Gi"), ("1", "7Gi"), ("1", "7Gi")), set);
    let used: FxHashSet<DeviceId> = [("pool1", "device-2"), ("pool1", "device-3"), ("pool2", "device-1")]
        .iter()
        .map(|(p, d)| (DRIVER.into(), (*p).into(), (*d).into()))
        .collect();
    let two = claim(
        "c",
        vec![request("req-0", "gpu", None, Some(1), &[]), request("req-1", "gpu", None, Some(1), &[])],
        vec![],
    );
    let got = s.allocate(&[&two], &node("n1").build(), &used).unwrap().expect("fits");
    assert_eq!(results_of(&got[0]), pairs(&[("req-0", "pool2/device-2"), ("req-1", "pool2/device-3")]));
}

#[test]
fn a_pool_consuming_an_undefined_counter_set_is_not_allocated_from() {
    let mut s = DraState::default();
    s.upsert_class(class("gpu", DRIVER));
    let devices = vec![counter_device("device-1", &[("nope", &[("memory", "1Gi")])])];
    partitioned(&mut s, "pool1", devices, &[("counter-set-1", &[("memory", "8Gi")])]);
    let one = claim("c", vec![request("req-0", "gpu", None, Some(1), &[])], vec![]);
    assert_eq!(alloc(&s, &one, &[]), None);
}

// Consumable capacity (upstream allocator_testing.go, "consumable-capacity-*").

fn shared_device(
    name: &str,
    memory: &str,
    policy: Option<placer_api::k8s::api::resource::v1::CapacityRequestPolicy>,
) -> Device {
    Device {
        name: name.into(),
        allow_multiple_allocations: Some(true),
        capacity: Some(
            [(
                "memory".to_string(),
                DeviceCapacity { value: Quantity(memory.into()), request_policy: policy },
            )]
            .into(),
        ),
        ..Default::default()
    }
}

fn capacity_request(name: &str, memory: &str) -> DeviceRequest {
    let mut r = request(name, "gpu", None, Some(1), &[]);
    r.exactly.as_mut().unwrap().capacity = Some(placer_api::k8s::api::resource::v1::CapacityRequirements {
        requests: Some([("memory".to_string(), Quantity(memory.into()))].into()),
    });
    r
}

#[test]
fn a_shared_device_serves_claims_while_capacity_remains() {
    let s = one_node(vec![shared_device("device-1", "8Gi", None)]);
    // Two requests of one claim share the device: 4Gi + 4Gi of 8Gi.
    let c = claim("c", vec![capacity_request("req-0", "4Gi"), capacity_request("req-1", "4Gi")], vec![]);
    let got = alloc(&s, &c, &[]).expect("fits");
    let results = got[0].devices.as_ref().unwrap().results.as_ref().unwrap();
    assert_eq!(results.len(), 2);
    for r in results {
        assert_eq!(r.device, "device-1");
        assert_eq!(r.consumed_capacity.as_ref().unwrap()["memory"], Quantity("4Gi".into()));
        assert!(r.share_id.is_some());
    }
    assert_ne!(results[0].share_id, results[1].share_id);
    // 4Gi + 6Gi do not fit.
    let c = claim("c", vec![capacity_request("req-0", "4Gi"), capacity_request("req-1", "6Gi")], vec![]);
    assert_eq!(alloc(&s, &c, &[]), None);
}

#[test]
fn capacity_held_by_allocated_claims_counts_and_shared_devices_are_not_in_use() {
    let mut s = one_node(vec![shared_device("device-1", "8Gi", None)]);
    let first = claim("first", vec![capacity_request("req-0", "6Gi")], vec![]);
    let allocation = alloc(&s, &first, &[]).unwrap().remove(0);
    let mut stored = ResourceClaim::clone(&first.claim);
    stored.status = Some(placer_api::k8s::api::resource::v1::ResourceClaimStatus {
        allocation: Some(allocation),
        ..Default::default()
    });
    s.upsert_claim(Arc::new(stored));
    assert!(s.in_use().is_empty(), "a shared device is not in use");
    assert_eq!(s.shared_in_use().values().next().unwrap()["memory"], 6 * 1024 * 1024 * 1024 * 1000);
    let small = claim("small", vec![capacity_request("req-0", "2Gi")], vec![]);
    assert!(alloc(&s, &small, &[]).is_some(), "2Gi of the 2Gi left");
    let big = claim("big", vec![capacity_request("req-0", "3Gi")], vec![]);
    assert_eq!(alloc(&s, &big, &[]), None);
    // Without a capacity request a claim takes the whole value: nothing left for it.
    let whole = claim("whole", vec![request("req-0", "gpu", None, Some(1), &[])], vec![]);
    assert_eq!(alloc(&s, &whole, &[]), None);
    // Copies: 2Gi each, one copy.
    assert_eq!(s.copies(&[&small], &node("n1").build(), &FxHashSet::default(), 10), 1);
}

#[test]
fn capacity_requests_on_an_ordinary_device_are_a_minimum() {
    // CmpRequestOverCapacity on a device without allowMultipleAllocations: the request must
    // fit its value; no share ID, no consumed capacity recorded.
    let s = one_node(vec![mem_device("small", "4Gi", "1.0.0"), mem_device("big", "16Gi", "1.0.0")]);
    let c = claim("c", vec![capacity_request("req-0", "8Gi")], vec![]);
    let got = alloc(&s, &c, &[]).expect("fits");
    let r = &got[0].devices.as_ref().unwrap().results.as_ref().unwrap()[0];
    assert_eq!((r.device.as_str(), r.share_id.as_ref(), r.consumed_capacity.as_ref()), ("big", None, None));
}

#[test]
fn binding_conditions_are_copied_and_binds_to_node_pins_the_allocation() {
    let mut d = device("d", &[]);
    d.binding_conditions = Some(vec!["attached".into()]);
    d.binding_failure_conditions = Some(vec!["failed".into()]);
    d.binds_to_node = Some(true);
    let mut s = DraState::default();
    s.upsert_class(class("gpu", DRIVER));
    s.upsert_slice(slice("fabric", DRIVER, None, vec![d]));
    let c = claim("c", vec![request("r", "gpu", None, Some(1), &[])], vec![]);
    let got = s.allocate(&[&c], &node("n7").build(), &FxHashSet::default()).unwrap().unwrap();
    let r = &got[0].devices.as_ref().unwrap().results.as_ref().unwrap()[0];
    assert_eq!(r.binding_conditions.as_deref(), Some(&["attached".to_string()][..]));
    assert_eq!(r.binding_failure_conditions.as_deref(), Some(&["failed".to_string()][..]));
    let terms = &got[0].node_selector.as_ref().expect("pinned").node_selector_terms;
    assert_eq!(terms[0].match_fields.as_ref().unwrap()[0].values.as_deref(), Some(&["n7".to_string()][..]));
}

#[test]
fn a_pod_removed_for_a_simulation_frees_the_claims_only_it_used() {
    use crate::plugins::testing::snapshot_with;
    use placer_api::k8s::api::core::v1::{Container, Pod, PodResourceClaim, PodSpec};
    let victim = |name: &str| {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("n1".into()),
                resource_claims: Some(vec![PodResourceClaim {
                    name: "gpu".into(),
                    resource_claim_name: Some("c".into()),
                    ..Default::default()
                }]),
                containers: vec![Container { name: "c".into(), ..Default::default() }],
                ..Default::default()
            }),
            status: None,
        };
        PodInfo::from_pod(Arc::new(pod)).unwrap()
    };
    let consumer = |name: &str| ResourceClaimConsumerReference {
        api_group: None,
        resource: "pods".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
    };
    for (holders, freed) in [(vec!["a"], true), (vec!["a", "b"], false)] {
        let pods: Vec<PodInfo> = holders.iter().map(|h| victim(h)).collect();
        let mut snap = snapshot_with(vec![node("n1").cpu("8").build()], pods.clone());
        let entry = claim("c", vec![request("r", "gpu", None, Some(1), &[])], vec![]);
        let allocation = s_alloc(&entry);
        let mut stored = ResourceClaim::clone(&entry.claim);
        stored.status = Some(placer_api::k8s::api::resource::v1::ResourceClaimStatus {
            allocation: Some(allocation),
            reserved_for: Some(holders.iter().map(|h| consumer(h)).collect()),
            ..Default::default()
        });
        {
            let dra = snap.dra_mut();
            *dra = state();
            dra.upsert_claim(Arc::new(stored));
        }
        assert_eq!(snap.dra().in_use().len(), 1);
        let mark = snap.checkpoint();
        let removed = snap.remove_for_simulation(&pods[0].key).expect("placed");
        assert_eq!(snap.dra().in_use().is_empty(), freed, "holders {holders:?}");
        // Put back (a reprieve), then rolled back: held again either way.
        let n1 = snap.node_id("n1").unwrap();
        snap.assume(removed, n1);
        assert_eq!(snap.dra().in_use().len(), 1);
        snap.rollback(mark);
        assert_eq!(snap.dra().in_use().len(), 1);
    }
}

/// `entry` allocated on n1 of [`state`].
fn s_alloc(entry: &ClaimEntry) -> AllocationResult {
    state().allocate(&[entry], &node("n1").build(), &FxHashSet::default()).unwrap().unwrap().remove(0)
}

#[test]
fn copies_count_the_pods_a_node_s_free_devices_serve() {
    let s = state();
    let n1 = node("n1").build();
    let none = FxHashSet::default();
    let one = claim("c", vec![request("r", "gpu", None, Some(1), &[])], vec![]);
    let two = claim("c", vec![request("r", "gpu", None, Some(2), &[])], vec![]);
    assert_eq!(s.copies(&[&one], &n1, &none, 110), 3, "three GPUs on n1");
    assert_eq!(s.copies(&[&one], &n1, &none, 2), 2, "at most the limit");
    assert_eq!(s.copies(&[&two], &n1, &none, 110), 1);
    let mut used = FxHashSet::default();
    used.insert((DRIVER.into(), "n1".into(), "g1".into()));
    assert_eq!(s.copies(&[&one], &n1, &used, 110), 2, "a device in use is not counted");
    assert_eq!(s.copies(&[&one], &node("n3").build(), &none, 110), 0, "no devices");
}

#[test]
fn copies_count_counters_and_shared_capacity() {
    // Three 4Gi partitions of an 8Gi GPU serve two pods; a shared 8Gi device serves four
    // claims of 2Gi.
    let mut s = DraState::default();
    s.upsert_class(class("gpu", DRIVER));
    let devices =
        (0..3).map(|i| counter_device(&format!("part-{i}"), &[("gpu-0", &[("memory", "4Gi")])])).collect();
    partitioned(&mut s, "pool1", devices, &[("gpu-0", &[("memory", "8Gi")])]);
    let one = claim("c", vec![request("r", "gpu", None, Some(1), &[])], vec![]);
    assert_eq!(s.copies(&[&one], &node("n1").build(), &FxHashSet::default(), 10), 2);
    let s = one_node(vec![shared_device("nic", "8Gi", None)]);
    let small = claim("small", vec![capacity_request("req-0", "2Gi")], vec![]);
    assert_eq!(s.copies(&[&small], &node("n1").build(), &FxHashSet::default(), 10), 4);
}

#[test]
fn features_turned_off_by_their_gates_behave_as_upstream_without_them() {
    use super::DisabledFeatures;
    let mut s = DraState::default();
    s.upsert_class(class("gpu", DRIVER));
    let devices = vec![counter_device("part-0", &[("gpu-0", &[("memory", "4Gi")])])];
    partitioned(&mut s, "pool1", devices, &[("gpu-0", &[("memory", "8Gi")])]);
    let one = claim("c", vec![request("r", "gpu", None, Some(1), &[])], vec![]);
    assert!(alloc(&s, &one, &[]).is_some());
    s.disabled = DisabledFeatures { partitionable_devices: true, ..Default::default() };
    assert_eq!(alloc(&s, &one, &[]), None, "devices consuming counters are ignored");

    let mut s = one_node(vec![shared_device("nic", "8Gi", None)]);
    s.disabled = DisabledFeatures { consumable_capacity: true, ..Default::default() };
    let c = claim("c", vec![capacity_request("req-0", "2Gi")], vec![]);
    let err = s.check_requests(&c).unwrap_err();
    assert!(err.contains("DRAConsumableCapacity feature is disabled") && err.contains("default/c"), "{err}");
    let two = claim(
        "c",
        vec![request("a", "gpu", None, Some(1), &[]), request("b", "gpu", None, Some(1), &[])],
        vec![],
    );
    assert_eq!(alloc(&s, &two, &[]), None, "a device is not shared without the gate");

    let mut d = device("d", &[]);
    d.binding_conditions = Some(vec!["attached".into()]);
    d.binding_failure_conditions = Some(vec!["failed".into()]);
    let mut s = one_node(vec![d]);
    assert!(alloc(&s, &one, &[]).is_some());
    s.disabled = DisabledFeatures { binding_conditions: true, ..Default::default() };
    assert_eq!(alloc(&s, &one, &[]), None, "devices with binding conditions are not allocated");
}

/// A slice of pool `pool` on `node` (generation 1) declaring `count` slices in the pool.
fn pool_slice(name: &str, pool: &str, node: &str, count: i64, devices: &[&str]) -> Arc<ResourceSlice> {
    let mut s =
        (*slice(name, "gpu.example.com", Some(node), devices.iter().map(|d| device(d, &[])).collect()))
            .clone();
    s.spec.pool = ResourcePool { name: pool.into(), generation: 1, resource_slice_count: count };
    Arc::new(s)
}

/// Upstream's testInvalidResourceSlices (test/integration/dra): two slices of one pool
/// that both define `device-1` make the pool invalid. Nothing is allocated from it, and
/// it is what the filter names when the node has no solution; a valid pool elsewhere
/// still serves.
#[test]
fn a_pool_defining_a_device_twice_is_invalid_on_the_nodes_it_reaches() {
    let mut s = DraState::default();
    s.upsert_class(class("gpu", "gpu.example.com"));
    s.upsert_slice(pool_slice("worker-0-1", "worker-0", "worker-0", 2, &["device-1"]));
    s.upsert_slice(pool_slice("worker-0-2", "worker-0", "worker-0", 2, &["device-1"]));
    s.upsert_slice(pool_slice("worker-1", "worker-1", "worker-1", 1, &["device-1"]));
    let c = claim("c", vec![request("r", "gpu", None, Some(1), &[])], vec![]);
    let (w0, w1) = (node("worker-0").build(), node("worker-1").build());
    assert_eq!(s.allocate(&[&c], &w0, &FxHashSet::default()).unwrap(), None);
    assert!(s.invalid_pools_reach(&w0));
    let got = s.allocate(&[&c], &w1, &FxHashSet::default()).unwrap().unwrap();
    assert_eq!(devices_of(&got[0]), ["worker-1/device-1"]);
    assert!(!s.invalid_pools_reach(&w1));
    // All devices cannot be known from an invalid pool.
    let all = claim("all", vec![request("r", "gpu", Some("All"), None, &[])], vec![]);
    assert_eq!(
        s.allocate(&[&all], &w0, &FxHashSet::default()).unwrap_err(),
        "claim default/all, request r: asks for all devices, but resource pool gpu.example.com/worker-0 is currently invalid"
    );
    // Renamed, the device is fine again.
    s.upsert_slice(pool_slice("worker-0-2", "worker-0", "worker-0", 2, &["device-2"]));
    assert!(!s.invalid_pools_reach(&w0));
    assert_eq!(
        devices_of(&s.allocate(&[&c], &w0, &FxHashSet::default()).unwrap().unwrap()[0]),
        ["worker-0/device-1"]
    );
}

/// A pool whose newest generation has fewer slices than its `resourceSliceCount` is being
/// published: nothing is allocated from it (it is not invalid), and `All` fails with
/// upstream's message until the last slice arrives.
#[test]
fn an_incomplete_pool_is_not_allocated_from_until_its_last_slice_arrives() {
    let mut s = DraState::default();
    s.upsert_class(class("gpu", "gpu.example.com"));
    s.upsert_slice(pool_slice("n1-a", "n1", "n1", 2, &["gpu-0"]));
    let c = claim("c", vec![request("r", "gpu", None, Some(1), &[])], vec![]);
    let n1 = node("n1").build();
    assert_eq!(s.allocate(&[&c], &n1, &FxHashSet::default()).unwrap(), None);
    assert!(!s.invalid_pools_reach(&n1));
    let all = claim("all", vec![request("r", "gpu", Some("All"), None, &[])], vec![]);
    assert_eq!(
        s.allocate(&[&all], &n1, &FxHashSet::default()).unwrap_err(),
        "claim default/all, request r: asks for all devices, but resource pool gpu.example.com/n1 is currently being updated"
    );
    s.upsert_slice(pool_slice("n1-b", "n1", "n1", 2, &["gpu-1"]));
    let got = s.allocate(&[&all], &n1, &FxHashSet::default()).unwrap().unwrap();
    assert_eq!(devices_of(&got[0]), ["n1/gpu-0", "n1/gpu-1"]);
    // A newer generation replaces the pool: while it is incomplete, nothing is allocated.
    let mut newer = (*pool_slice("n1-c", "n1", "n1", 2, &["gpu-2"])).clone();
    newer.spec.pool.generation = 2;
    s.upsert_slice(Arc::new(newer));
    assert_eq!(s.allocate(&[&c], &n1, &FxHashSet::default()).unwrap(), None);
}
