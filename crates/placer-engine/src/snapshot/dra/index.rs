//! Bookkeeping that makes the allocator's inputs cheap, each declaring what it is valid for
//! (property tests in `tests.rs` compare each with the plain computation):
//!
//! * [`InUseIndex`]: the devices held by allocated claims, kept up to date as claims,
//!   pending allocations and simulated frees change (Reserve / assume, rollback, binding,
//!   deallocation) instead of being recomputed from every claim for every pod. Valid as
//!   long as every change of `claims`, `pending` or `freed` goes through
//!   [`DraState::reindex`] (the only writers are `DraState`'s methods);
//!   `DraState::in_use_recomputed` is the plain path.
//! * [`SliceCache`]: per ResourceSlice, the device ids (built once, not per candidate
//!   lookup), whether the slice is of its pool's newest generation, and each DeviceClass's
//!   selector verdict per device (CEL evaluated once per (device, class) for the life of
//!   the slice and the class). Valid for the slice object and the class entry it was
//!   computed from: `upsert_slice` rebuilds a slice's cache, `upsert_class` /
//!   `remove_class` recompute or drop that class's column in every slice, and a lookup
//!   that finds no verdict evaluates the selectors (the plain path).

use std::sync::Arc;

use placer_api::k8s::api::resource::v1::{AllocationResult, ResourceSlice};
use rustc_hash::{FxHashMap, FxHashSet};

use super::cel::DeviceEnv;
use super::{ClassEntry, DeviceId};
use crate::model::ObjectKey;

/// Devices held by allocated claims, with how many claims hold each (see the module docs).
#[derive(Debug, Default, Clone)]
pub(super) struct InUseIndex {
    /// The devices each claim's effective allocation holds (admin access excluded).
    by_claim: FxHashMap<ObjectKey, Vec<DeviceId>>,
    counts: FxHashMap<DeviceId, u32>,
    /// The keys of `counts`: what the allocator reads.
    set: FxHashSet<DeviceId>,
}

impl InUseIndex {
    /// Replaces what `key` holds with `devices`.
    pub(super) fn set_claim(&mut self, key: &ObjectKey, devices: Vec<DeviceId>) {
        if let Some(old) = self.by_claim.remove(key) {
            for d in old {
                if let Some(n) = self.counts.get_mut(&d) {
                    *n -= 1;
                    if *n == 0 {
                        self.counts.remove(&d);
                        self.set.remove(&d);
                    }
                }
            }
        }
        if devices.is_empty() {
            return;
        }
        for d in &devices {
            let n = self.counts.entry(d.clone()).or_insert(0);
            if *n == 0 {
                self.set.insert(d.clone());
            }
            *n += 1;
        }
        self.by_claim.insert(key.clone(), devices);
    }

    pub(super) fn set(&self) -> &FxHashSet<DeviceId> {
        &self.set
    }
}

/// The devices an allocation makes in use (admin access does not: upstream's
/// allocated-devices list).
pub(super) fn held_devices(a: &AllocationResult) -> Vec<DeviceId> {
    let results = a.devices.as_ref().and_then(|d| d.results.as_deref()).unwrap_or(&[]);
    results
        .iter()
        // Admin access does not make a device in use (upstream's allocated-devices list);
        // devices allocated with a share ID are counted by capacity (`shared_in_use`).
        .filter(|r| r.admin_access != Some(true) && r.share_id.is_none())
        .map(|r| (r.driver.as_str().into(), r.pool.as_str().into(), r.device.as_str().into()))
        .collect()
}

/// What is computed once per ResourceSlice (see the module docs).
#[derive(Debug, Clone)]
pub(super) struct SliceCache {
    /// The slice it was computed from.
    pub(super) slice: Arc<ResourceSlice>,
    /// Device ids, by device index.
    pub(super) ids: Vec<DeviceId>,
    /// The slice is of its pool's newest generation (kept by `refresh_pools`).
    pub(super) current: bool,
    /// Some device allows multiple allocations (consumable capacity): claims may share it.
    pub(super) shareable: bool,
    /// Per DeviceClass name: its selectors' verdict per device index (`Err`: the message
    /// the allocator reports).
    pub(super) classes: FxHashMap<String, Arc<[Result<bool, String>]>>,
}

impl SliceCache {
    pub(super) fn new(slice: Arc<ResourceSlice>) -> SliceCache {
        let ids = slice
            .spec
            .devices
            .iter()
            .flatten()
            .map(|d| {
                (
                    slice.spec.driver.as_str().into(),
                    slice.spec.pool.name.as_str().into(),
                    d.name.as_str().into(),
                )
            })
            .collect();
        let shareable =
            slice.spec.devices.iter().flatten().any(|d| d.allow_multiple_allocations == Some(true));
        SliceCache { slice, ids, current: true, shareable, classes: FxHashMap::default() }
    }

    /// Evaluates `class`'s selectors on every device of the slice (as the allocator
    /// would, same messages) and keeps the verdicts under `name`.
    pub(super) fn evaluate_class(&mut self, name: &str, class: &ClassEntry) {
        let verdicts: Arc<[Result<bool, String>]> = self
            .slice
            .spec
            .devices
            .iter()
            .flatten()
            .zip(&self.ids)
            .map(|(d, id)| {
                let env = DeviceEnv { driver: &id.0, device: d };
                super::allocator::class_selectors_match(name, class, &env, id)
            })
            .collect();
        self.classes.insert(name.to_string(), verdicts);
    }

    /// The cached verdict of class `name` on device `index`, if there is one.
    pub(super) fn verdict(&self, name: &str, index: usize) -> Option<&Result<bool, String>> {
        self.classes.get(name).and_then(|v| v.get(index))
    }
}

/// What a set of pods' claims take from the free devices at least (see
/// [`DraState::device_demand`]): the aggregate pre-filter of placements compares it with
/// [`DraState::free_devices`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceDemand {
    /// Devices of any class.
    pub total: u64,
    /// Per DeviceClass named by an `exactly` request: devices that class selects.
    pub by_class: Vec<(String, u64)>,
}

/// The fewest devices request `r` takes from the free ones, and its class when it is an
/// `exactly` request: `count` (`ExactCount`), one (`All` takes every matching device and
/// at least one), none with admin access (devices in use stay usable) or a capacity
/// request; a `firstAvailable` list takes the least of its subrequests.
fn request_floor(r: &placer_api::k8s::api::resource::v1::DeviceRequest) -> (u64, Option<&str>) {
    let alts = super::allocator::alternatives(r);
    let floor = alts
        .iter()
        .map(|a| {
            if a.admin_access || a.capacity.is_some() {
                0
            } else if a.mode == Some("All") {
                1
            } else {
                u64::try_from(a.count.unwrap_or(1)).unwrap_or(0)
            }
        })
        .min()
        .unwrap_or(0);
    let class = match alts.as_slice() {
        [one] if one.sub.is_none() => Some(one.class),
        _ => None,
    };
    (floor, class)
}

impl super::DraState {
    /// A lower bound of the free devices `needed` of `pods` take when they are placed
    /// together: the claims still to allocate that only one of the pods names (each
    /// distinct claim takes distinct devices, unless admin access, counted as none; a
    /// claim several pods share is left out), per pod, then per dimension the sum of the
    /// `needed` smallest. `None` when that is zero (no device to count).
    /// Also `None` while a device that allows multiple allocations exists (and consumable
    /// capacity is on): several claims may then share one device, so distinct claims do not
    /// take distinct devices.
    pub fn device_demand(&self, pods: &[Arc<crate::model::PodInfo>], needed: usize) -> Option<DeviceDemand> {
        if !self.disabled.consumable_capacity && self.cache.values().any(|c| c.shareable) {
            return None;
        }
        let per_pod: Vec<Vec<Arc<super::ClaimEntry>>> = pods
            .iter()
            .map(|p| {
                if p.view.resource_claims.is_empty() {
                    return Vec::new();
                }
                let claims = self.pod_claims(p).unwrap_or_default();
                claims.into_iter().filter(|c| c.allocation.is_none()).map(|c| c.entry).collect()
            })
            .collect();
        let mut users: FxHashMap<&ObjectKey, usize> = FxHashMap::default();
        for e in per_pod.iter().flatten() {
            *users.entry(&e.key).or_insert(0) += 1;
        }
        // Per pod: total, then per class.
        let mut classes: Vec<String> = Vec::new();
        let mut rows: Vec<(u64, Vec<u64>)> = Vec::with_capacity(pods.len());
        for claims in &per_pod {
            let mut total = 0u64;
            let mut by_class: Vec<u64> = vec![0; classes.len()];
            for e in claims.iter().filter(|e| users.get(&e.key) == Some(&1)) {
                for r in super::requests(&e.claim) {
                    let (floor, class) = request_floor(r);
                    total = total.saturating_add(floor);
                    if let (Some(class), true) = (class, floor > 0) {
                        let i = match classes.iter().position(|c| c == class) {
                            Some(i) => i,
                            None => {
                                classes.push(class.to_string());
                                classes.len() - 1
                            }
                        };
                        by_class.resize(classes.len(), 0);
                        by_class[i] = by_class[i].saturating_add(floor);
                    }
                }
            }
            rows.push((total, by_class));
        }
        let smallest = |mut v: Vec<u64>| -> u64 {
            v.sort_unstable();
            v.into_iter().take(needed).fold(0u64, u64::saturating_add)
        };
        let total = smallest(rows.iter().map(|r| r.0).collect());
        if total == 0 {
            return None;
        }
        let by_class = classes
            .iter()
            .enumerate()
            .map(|(i, c)| {
                (c.clone(), smallest(rows.iter().map(|r| r.1.get(i).copied().unwrap_or(0)).collect()))
            })
            .collect();
        Some(DeviceDemand { total, by_class })
    }

    /// An upper bound of the free devices the pods of `nodes` can be allocated: the
    /// devices reaching any of them (each counted once) that the allocator could take and
    /// that no claim holds, in total and per class of `demand` (a device whose class
    /// selectors do not evaluate counts as selected). Taints, constraints and request
    /// selectors are not looked at: they only ever rule devices out.
    pub fn free_devices<'n>(
        &self,
        nodes: impl IntoIterator<Item = &'n crate::model::NodeStatic>,
        demand: &DeviceDemand,
    ) -> (u64, Vec<u64>) {
        let used = self.used.set();
        let mut shared: FxHashSet<DeviceId> = FxHashSet::default();
        let mut total = 0u64;
        let mut by_class = vec![0u64; demand.by_class.len()];
        for node in nodes {
            for c in self.candidates(node) {
                if used.contains(&c.id) {
                    continue;
                }
                // A node-local device reaches its node only; others are counted once.
                if c.slice.spec.node_name.is_none() && !shared.insert(c.id.clone()) {
                    continue;
                }
                total += 1;
                for ((class, _), n) in demand.by_class.iter().zip(by_class.iter_mut()) {
                    let selected = match c.cache.and_then(|sc| sc.verdict(class, c.index)) {
                        Some(v) => v.clone().unwrap_or(true),
                        None => match self.classes.get(class.as_str()) {
                            Some(entry) => {
                                let env = DeviceEnv { driver: &c.id.0, device: c.device };
                                super::allocator::class_selectors_match(class, entry, &env, &c.id)
                                    .unwrap_or(true)
                            }
                            None => true,
                        },
                    };
                    if selected {
                        *n += 1;
                    }
                }
            }
        }
        (total, by_class)
    }

    /// Whether the free devices of `nodes` can cover `demand` (see
    /// [`DraState::free_devices`]); false only when no placement of the pods on `nodes`
    /// could allocate their claims.
    pub fn devices_suffice<'n>(
        &self,
        nodes: impl IntoIterator<Item = &'n crate::model::NodeStatic>,
        demand: &DeviceDemand,
    ) -> bool {
        let (total, by_class) = self.free_devices(nodes, demand);
        total >= demand.total && demand.by_class.iter().zip(&by_class).all(|((_, want), have)| have >= want)
    }
}

#[cfg(test)]
mod tests;
