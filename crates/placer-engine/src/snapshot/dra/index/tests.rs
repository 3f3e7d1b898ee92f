//! Each speed-up of `index.rs` against the plain computation, and the device pre-filter's
//! soundness.
use std::sync::Arc;

use placer_api::k8s::api::core::v1::{Container, Pod, PodResourceClaim, PodSpec};
use placer_api::k8s::api::resource::v1::{
    AllocationResult, CELDeviceSelector, Device, DeviceAllocationResult, DeviceAttribute, DeviceClaim,
    DeviceClass, DeviceClassSpec, DeviceRequest, DeviceRequestAllocationResult, DeviceSelector,
    ExactDeviceRequest, ResourceClaim, ResourceClaimSpec, ResourceClaimStatus, ResourcePool, ResourceSlice,
    ResourceSliceSpec,
};
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use proptest::prelude::*;
use rustc_hash::FxHashSet;

use super::super::{ClaimEntry, DraState};
use crate::model::{NodeStatic, ObjectKey, PodInfo, PodKey};
use crate::plugins::testing::node;

const DRIVER: &str = "gpu.example.com";

fn sel(e: &str) -> DeviceSelector {
    DeviceSelector { cel: Some(CELDeviceSelector { expression: e.into() }) }
}

fn class(name: &str, selectors: &[String]) -> Arc<DeviceClass> {
    Arc::new(DeviceClass {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: DeviceClassSpec {
            selectors: Some(selectors.iter().map(|s| sel(s)).collect()),
            ..Default::default()
        },
    })
}

/// A slice of `node` (all nodes when `None`) with devices `d0..` whose `mem` attribute is
/// given (`None`: no such attribute, a runtime error for a selector that reads it).
fn slice(name: &str, node: Option<&str>, generation: i64, mems: &[Option<i64>]) -> Arc<ResourceSlice> {
    let devices = mems
        .iter()
        .enumerate()
        .map(|(i, m)| Device {
            name: format!("d{i}"),
            attributes: m.map(|m| {
                [("mem".to_string(), DeviceAttribute { int: Some(m), ..Default::default() })]
                    .into_iter()
                    .collect()
            }),
            ..Default::default()
        })
        .collect();
    Arc::new(ResourceSlice {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: ResourceSliceSpec {
            driver: DRIVER.into(),
            node_name: node.map(Into::into),
            all_nodes: node.is_none().then_some(true),
            pool: ResourcePool { name: name.into(), generation, resource_slice_count: 1 },
            devices: Some(devices),
            ..Default::default()
        },
    })
}

fn request(class: &str, mode: Option<&str>, count: i64, admin: bool) -> DeviceRequest {
    DeviceRequest {
        name: "r".into(),
        exactly: Some(ExactDeviceRequest {
            device_class_name: class.into(),
            allocation_mode: mode.map(Into::into),
            count: (mode.is_none()).then_some(count),
            admin_access: admin.then_some(true),
            ..Default::default()
        }),
        first_available: None,
    }
}

fn claim_object(name: &str, requests: Vec<DeviceRequest>, allocated: &[String]) -> ResourceClaim {
    let status = (!allocated.is_empty()).then(|| ResourceClaimStatus {
        allocation: Some(allocation(allocated, false)),
        ..Default::default()
    });
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: ResourceClaimSpec {
            devices: Some(DeviceClaim { requests: Some(requests), constraints: None, config: None }),
        },
        status,
    }
}

/// An allocation of devices named `pool/device`.
fn allocation(devices: &[String], admin: bool) -> AllocationResult {
    let results = devices
        .iter()
        .map(|d| {
            let (pool, device) = d.split_once('/').unwrap_or(("p", d));
            DeviceRequestAllocationResult {
                request: "r".into(),
                driver: DRIVER.into(),
                pool: pool.into(),
                device: device.into(),
                admin_access: admin.then_some(true),
                ..Default::default()
            }
        })
        .collect();
    AllocationResult {
        devices: Some(DeviceAllocationResult { results: Some(results), config: None }),
        ..Default::default()
    }
}

/// One change of the claim state.
#[derive(Debug, Clone)]
enum Op {
    /// Stores claim `c` with an allocation of these devices (none: unallocated).
    Upsert(usize, Vec<(u8, u8)>, bool),
    Remove(usize),
    /// A pending allocation for claim `c` by pod `p` (undone by `Restore`).
    Record(usize, Vec<(u8, u8)>, usize),
    Restore,
    Free(usize),
    Unfree(usize),
    Forget(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let devs = proptest::collection::vec((0u8..3, 0u8..3), 0..3);
    prop_oneof![
        (0usize..5, devs.clone(), any::<bool>()).prop_map(|(c, d, a)| Op::Upsert(c, d, a)),
        (0usize..5).prop_map(Op::Remove),
        (0usize..5, devs, 0usize..3).prop_map(|(c, d, p)| Op::Record(c, d, p)),
        Just(Op::Restore),
        (0usize..5).prop_map(Op::Free),
        (0usize..5).prop_map(Op::Unfree),
        (0usize..3).prop_map(Op::Forget),
    ]
}

fn names(devs: &[(u8, u8)]) -> Vec<String> {
    devs.iter().map(|(p, d)| format!("n{p}/d{d}")).collect()
}

/// The devices the allocator chose, or why not.
fn outcome(r: &Result<Option<Vec<AllocationResult>>, String>) -> String {
    format!("{r:?}")
}

fn nodes(n: usize) -> Vec<NodeStatic> {
    (0..n).map(|i| node(&format!("n{i}")).build()).collect()
}

fn pod_with_claims(name: &str, claims: &[String]) -> Arc<PodInfo> {
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        },
        spec: Some(PodSpec {
            resource_claims: Some(
                claims
                    .iter()
                    .enumerate()
                    .map(|(i, c)| PodResourceClaim {
                        name: format!("c{i}"),
                        resource_claim_name: Some(c.clone()),
                        ..Default::default()
                    })
                    .collect(),
            ),
            containers: vec![Container { name: "c".into(), ..Default::default() }],
            ..Default::default()
        }),
        status: None,
    };
    Arc::new(PodInfo::from_pod(Arc::new(pod)).expect("pod"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The incremental in-use index equals the devices recomputed from every claim after
    /// any sequence of stores, removals, pending allocations and their undo, simulated
    /// frees and forgotten pods.
    #[test]
    fn in_use_index_matches_recomputation(ops in proptest::collection::vec(op(), 1..40)) {
        let mut s = DraState::default();
        let mut undo: Vec<(ObjectKey, Option<super::super::Pending>)> = Vec::new();
        let key = |c: usize| ObjectKey::new("default", format!("c{c}").as_str());
        for op in ops {
            match op {
                Op::Upsert(c, devs, admin) => {
                    let mut obj = claim_object(&format!("c{c}"), vec![request("gpu", None, 1, false)], &[]);
                    if !devs.is_empty() {
                        obj.status = Some(ResourceClaimStatus {
                            allocation: Some(allocation(&names(&devs), admin)),
                            ..Default::default()
                        });
                    }
                    s.upsert_claim(Arc::new(obj));
                }
                Op::Remove(c) => s.remove_claim(&key(c)),
                Op::Record(c, devs, p) => {
                    let old = s.record(
                        key(c),
                        Arc::new(allocation(&names(&devs), false)),
                        PodKey::new("default", format!("p{p}").as_str()),
                    );
                    undo.push((key(c), old));
                }
                Op::Restore => {
                    if let Some((k, old)) = undo.pop() {
                        s.restore(k, old);
                    }
                }
                Op::Free(c) => s.refree(key(c)),
                Op::Unfree(c) => s.unfree(&key(c)),
                Op::Forget(p) => s.forget_pod(&PodKey::new("default", format!("p{p}").as_str())),
            }
            prop_assert_eq!(s.in_use_set(), &s.in_use_recomputed());
        }
    }

    /// Allocation with the per-slice caches (ids, pool generation, class verdicts) decides
    /// exactly as with every selector evaluated, whatever the order in which classes and
    /// slices arrive or change (including selectors that fail at run time).
    #[test]
    fn cached_class_verdicts_allocate_like_evaluation(
        slices in proptest::collection::vec(
            (0usize..4, 1i64..3, proptest::collection::vec(proptest::option::weighted(0.85, 0i64..8), 0..5)),
            0..6,
        ),
        thresholds in proptest::collection::vec((0i64..8, any::<bool>()), 1..4),
        classes_first in any::<bool>(),
        redefine in proptest::option::of((0usize..3, 0i64..8)),
        requests in proptest::collection::vec((0usize..3, 0u8..3, 1i64..4), 1..3),
        used in proptest::collection::vec((0u8..5, 0u8..5), 0..4),
    ) {
        let class_of = |(t, guarded): (i64, bool)| {
            let read = format!("device.attributes[{DRIVER:?}].mem >= {t}");
            // Unguarded, a device without the attribute is a runtime error.
            if guarded { format!("\"mem\" in device.attributes[{DRIVER:?}] && {read}") } else { read }
        };
        let mut s = DraState::default();
        let add_classes = |s: &mut DraState| {
            s.upsert_class(class("all", &[format!("device.driver == {DRIVER:?}")]));
            for (i, t) in thresholds.iter().enumerate() {
                s.upsert_class(class(&format!("k{i}"), &[class_of(*t)]));
            }
        };
        if classes_first {
            add_classes(&mut s);
        }
        for (i, (node, generation, mems)) in slices.iter().enumerate() {
            // node 3: a slice for all nodes; two generations of a pool: only the newest counts.
            let node_name = (*node < 3).then(|| format!("n{node}"));
            let pool = if i % 3 == 2 { format!("s{}", i - 1) } else { format!("s{i}") };
            let mut sl = ResourceSlice::clone(&slice(&format!("s{i}"), node_name.as_deref(), *generation, mems));
            sl.spec.pool.name = pool;
            s.upsert_slice(Arc::new(sl));
        }
        if !classes_first {
            add_classes(&mut s);
        }
        if let Some((i, t)) = redefine {
            if i < thresholds.len() {
                s.upsert_class(class(&format!("k{i}"), &[class_of((t, true))]));
            }
        }
        let mut plain = s.clone();
        plain.cache.clear();
        let reqs: Vec<DeviceRequest> = requests
            .iter()
            .map(|&(c, mode, count)| {
                let name = if c < thresholds.len() { format!("k{c}") } else { "all".to_string() };
                let mode = match mode { 0 => None, 1 => Some("All"), _ => None };
                request(&name, mode, count, false)
            })
            .collect();
        let claim = ClaimEntry::new(
            ObjectKey::new("default", "c"),
            Arc::new(claim_object("c", reqs, &[])),
        );
        let in_use: FxHashSet<super::super::DeviceId> = used
            .iter()
            .map(|(sl, d)| (DRIVER.into(), format!("s{sl}").as_str().into(), format!("d{d}").as_str().into()))
            .collect();
        for n in nodes(4) {
            let fast = s.allocate(&[&claim], &n, &in_use);
            let slow = plain.allocate(&[&claim], &n, &in_use);
            prop_assert_eq!(outcome(&fast), outcome(&slow));
            prop_assert_eq!(
                s.copies(&[&claim], &n, &in_use, 6),
                plain.copies(&[&claim], &n, &in_use, 6)
            );
        }
    }

    /// The device pre-filter never rejects a set of nodes where the pods' claims can be
    /// allocated: whenever some assignment of the pods to the nodes allocates every claim
    /// (found by trying every assignment, allocating one pod after the other), the free
    /// devices cover the demand.
    #[test]
    fn device_prefilter_is_sound(
        per_node in proptest::collection::vec(proptest::collection::vec(proptest::option::weighted(0.9, 0i64..8), 0..4), 1..4),
        shared in proptest::collection::vec(proptest::option::weighted(0.9, 0i64..8), 0..3),
        held in proptest::collection::vec((0u8..4, 0u8..4), 0..4),
        pods in proptest::collection::vec(
            proptest::collection::vec((0u8..3, 0u8..3, 1i64..3, any::<bool>()), 0..3),
            1..4,
        ),
        share_first in any::<bool>(),
        needed_less in 0usize..2,
    ) {
        let mut s = DraState::default();
        s.upsert_class(class("all", &[format!("device.driver == {DRIVER:?}")]));
        s.upsert_class(class("big", &[format!("\"mem\" in device.attributes[{DRIVER:?}] && device.attributes[{DRIVER:?}].mem >= 4")]));
        for (i, mems) in per_node.iter().enumerate() {
            s.upsert_slice(slice(&format!("n{i}"), Some(&format!("n{i}")), 1, mems));
        }
        s.upsert_slice(slice("net", None, 1, &shared));
        // Devices held by an allocated claim.
        let held: Vec<String> = held.iter().map(|(n, d)| format!("n{n}/d{d}")).collect();
        s.upsert_claim(Arc::new(claim_object("held", vec![request("all", None, 1, false)], &held)));
        // Claims: per pod, its own; the first claim of the first pod is also named by the
        // second pod when `share_first`.
        let mut pod_claims: Vec<Vec<String>> = Vec::new();
        for (p, reqs) in pods.iter().enumerate() {
            let mut names = Vec::new();
            for (r, &(class, mode, count, admin)) in reqs.iter().enumerate() {
                let class = if class == 0 { "all" } else { "big" };
                let mode = if mode == 1 { Some("All") } else { None };
                let name = format!("p{p}-{r}");
                s.upsert_claim(Arc::new(claim_object(&name, vec![request(class, mode, count, admin && mode.is_none())], &[])));
                names.push(name);
            }
            pod_claims.push(names);
        }
        if share_first && pod_claims.len() > 1 && !pod_claims[0].is_empty() {
            let first = pod_claims[0][0].clone();
            pod_claims[1].push(first);
        }
        let infos: Vec<Arc<PodInfo>> =
            pod_claims.iter().enumerate().map(|(p, c)| pod_with_claims(&format!("p{p}"), c)).collect();
        let needed = infos.len().saturating_sub(needed_less).max(1);
        let ns = nodes(per_node.len());
        // Some `needed` pods (a prefix of the pods in any order is enough: try every
        // assignment of every pod, counting those placed) fit?
        let feasible = {
            let n = ns.len();
            let total = n.pow(u32::try_from(infos.len()).unwrap_or(0));
            (0..total).any(|mut code| {
                let mut used = s.in_use_set().clone();
                let mut allocated: rustc_hash::FxHashMap<String, ()> = Default::default();
                let mut placed = 0;
                for (p, pod) in infos.iter().enumerate() {
                    let node = &ns[code % n];
                    code /= n;
                    let todo: Vec<Arc<ClaimEntry>> = pod_claims[p]
                        .iter()
                        .filter(|c| !allocated.contains_key(*c))
                        .filter_map(|c| s.claim(&ObjectKey::new("default", c.as_str())).cloned())
                        .collect();
                    let refs: Vec<&ClaimEntry> = todo.iter().map(|e| &**e).collect();
                    let _ = pod;
                    if let Ok(Some(results)) = s.allocate(&refs, node, &used) {
                        for (e, a) in todo.iter().zip(&results) {
                            allocated.insert(e.key.name.to_string(), ());
                            for d in super::held_devices(a) {
                                used.insert(d);
                            }
                        }
                        placed += 1;
                    }
                }
                placed >= needed
            })
        };
        if feasible {
            if let Some(demand) = s.device_demand(&infos, needed) {
                prop_assert!(s.devices_suffice(ns.iter(), &demand), "demand {demand:?} free {:?}", s.free_devices(ns.iter(), &demand));
            }
        }
    }
}
