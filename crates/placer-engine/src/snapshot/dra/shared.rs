//! Partitionable devices (KEP-4815, `DRAPartitionableDevices`, beta and on by default in
//! v1.36) and consumable capacity (KEP-5075, `DRAConsumableCapacity`, likewise), as
//! upstream's incubating allocator has them:
//!
//! * a pool's counter sets come from its slices with `sharedCounters` (newest generation,
//!   whatever node they name); a device's `consumesCounters` draw on them; a device can be
//!   allocated only while every counter it consumes has enough left after the devices
//!   already allocated anywhere in the pool and the ones picked in the same search. A pool
//!   whose devices name a counter set or counter that no slice defines, or that defines a
//!   counter set twice, is invalid and nothing is allocated from it (upstream's
//!   `validateDeviceCounterConsumption` / `getAndValidateCounterSets`);
//! * a device with `allowMultipleAllocations` serves several requests (several claims) as
//!   long as the sum of what they consume of each capacity fits its value. What a request
//!   consumes of a capacity is its `capacity.requests` entry rounded up by the capacity's
//!   `requestPolicy` (`validRange` min / step, `validValues`), or when it asks nothing, the
//!   policy's `default` or else the whole value (`calculateConsumedCapacity`); a value
//!   the policy does not allow (above `max`, off the step, not a valid value) rules the
//!   device out. For any device, requesting a capacity it does not define, or more than
//!   its value, rules it out (`CmpRequestOverCapacity`).
//!
//! Quantities are compared exactly in thousandths (`parse_milli`).

use std::collections::BTreeMap;

use placer_api::k8s::api::resource::v1::{CapacityRequestPolicy, Device, ResourceSlice};
use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;
use placer_api::quantity::parse_milli;
use rustc_hash::{FxHashMap, FxHashSet};

use super::DeviceId;

/// Capacity consumed on devices allocated with a share ID, by device and capacity name
/// (thousandths).
pub type SharedUse = FxHashMap<DeviceId, BTreeMap<String, i64>>;

fn milli(q: &Quantity) -> Option<i64> {
    parse_milli(&q.0).ok()
}

/// A (counter set, counter) of a pool.
pub type CounterKey = (String, String);

/// What is left of a pool's counters after the devices already allocated.
#[derive(Debug, Clone, Default)]
pub struct PoolCounters {
    pub available: BTreeMap<CounterKey, i64>,
}

/// What `device` consumes of its pool's counters (thousandths), flattened.
pub fn consumption(device: &Device) -> Vec<(CounterKey, i64)> {
    let mut out = Vec::new();
    for c in device.consumes_counters.iter().flatten() {
        for (name, counter) in &c.counters {
            out.push(((c.counter_set.clone(), name.clone()), milli(&counter.value).unwrap_or(i64::MAX)));
        }
    }
    out
}

/// The counters of one pool (`slices`: every slice of its newest generation, whatever node
/// they name), minus what the `allocated` devices consume. `Err`: the pool is invalid
/// (upstream's reason).
pub fn pool_counters<'a>(
    slices: impl Iterator<Item = &'a ResourceSlice> + Clone,
    allocated: impl Fn(&DeviceId) -> bool,
) -> Result<PoolCounters, String> {
    let mut sets: BTreeMap<&str, BTreeMap<&str, i64>> = BTreeMap::new();
    for s in slices.clone() {
        for set in s.spec.shared_counters.iter().flatten() {
            if sets.contains_key(set.name.as_str()) {
                return Err(format!("duplicate counter set name {}", set.name));
            }
            let counters =
                set.counters.iter().map(|(k, c)| (k.as_str(), milli(&c.value).unwrap_or(0))).collect();
            sets.insert(&set.name, counters);
        }
    }
    let mut available: BTreeMap<CounterKey, i64> = BTreeMap::new();
    for (set, counters) in &sets {
        for (name, v) in counters {
            available.insert((set.to_string(), name.to_string()), *v);
        }
    }
    for s in slices {
        for d in s.spec.devices.iter().flatten() {
            for c in d.consumes_counters.iter().flatten() {
                let Some(set) = sets.get(c.counter_set.as_str()) else {
                    return Err(format!("counter set {} not found", c.counter_set));
                };
                if let Some(name) = c.counters.keys().find(|n| !set.contains_key(n.as_str())) {
                    return Err(format!("counter {name} not found in counter set {}", c.counter_set));
                }
            }
            let id: DeviceId =
                (s.spec.driver.as_str().into(), s.spec.pool.name.as_str().into(), d.name.as_str().into());
            if allocated(&id) {
                for (key, amount) in consumption(d) {
                    if let Some(v) = available.get_mut(&key) {
                        *v = v.saturating_sub(amount);
                    }
                }
            }
        }
    }
    Ok(PoolCounters { available })
}

/// One capacity a request consumes of a device: name, thousandths, and the quantity the
/// result records (`consumedCapacity`).
#[derive(Debug, Clone, PartialEq)]
pub struct Consumed {
    pub name: String,
    pub milli: i64,
    pub value: i64,
    pub quantity: Quantity,
}

/// What a request asking `requests` consumes of each capacity of `device` (upstream's
/// `CmpRequestOverCapacity` without what others hold): `None` when the device does not
/// define a requested capacity, the policy rules the value out, or it exceeds the
/// capacity's value.
pub fn consumed(device: &Device, requests: Option<&BTreeMap<String, Quantity>>) -> Option<Vec<Consumed>> {
    let empty = BTreeMap::new();
    let capacity = device.capacity.as_ref().unwrap_or(&empty);
    if requests.is_some_and(|r| r.keys().any(|k| !capacity.contains_key(k))) {
        return None;
    }
    let mut out = Vec::with_capacity(capacity.len());
    for (name, cap) in capacity {
        let value = milli(&cap.value)?;
        let requested = requests.and_then(|r| r.get(name));
        let (quantity, m) = consumed_quantity(requested, &cap.value, cap.request_policy.as_ref())?;
        if violates(m, cap.request_policy.as_ref()) || m > value {
            return None;
        }
        out.push(Consumed { name: name.clone(), milli: m, value, quantity });
    }
    Some(out)
}

/// Upstream's `calculateConsumedCapacity`.
fn consumed_quantity(
    requested: Option<&Quantity>,
    value: &Quantity,
    policy: Option<&CapacityRequestPolicy>,
) -> Option<(Quantity, i64)> {
    let Some(req) = requested else {
        let q = policy.and_then(|p| p.default.clone()).unwrap_or_else(|| value.clone());
        let m = milli(&q)?;
        return Some((q, m));
    };
    let r = milli(req)?;
    let Some(p) = policy else { return Some((req.clone(), r)) };
    if let Some(range) = &p.valid_range {
        let min = milli(&range.min)?;
        if r < min {
            return Some((range.min.clone(), min));
        }
        let Some(step) = range.step.as_ref().and_then(milli).filter(|s| *s > 0) else {
            return Some((req.clone(), r));
        };
        let n = (r - min + step - 1) / step;
        let m = min.checked_add(step.checked_mul(n)?)?;
        return Some((format_binary(m), m));
    }
    if let Some(values) = &p.valid_values {
        for v in values {
            let vm = milli(v)?;
            if r <= vm {
                return Some((v.clone(), vm));
            }
        }
    }
    Some((req.clone(), r))
}

/// Upstream's `violatesPolicy`.
fn violates(m: i64, policy: Option<&CapacityRequestPolicy>) -> bool {
    let Some(p) = policy else { return false };
    if p.default.as_ref().and_then(milli) == Some(m) {
        return false;
    }
    if let Some(range) = &p.valid_range {
        if range.max.as_ref().and_then(milli).is_some_and(|max| m > max) {
            return true;
        }
        if let (Some(step), Some(min)) = (range.step.as_ref().and_then(milli), milli(&range.min)) {
            return step > 0 && (m - min) % step != 0;
        }
        return false;
    }
    match &p.valid_values {
        Some(values) if !values.is_empty() => !values.iter().any(|v| milli(v) == Some(m)),
        _ => false,
    }
}

/// A quantity of `m` thousandths in the binary SI form (`"10Gi"`, `"1536"`, `"500m"`).
fn format_binary(m: i64) -> Quantity {
    if m % 1000 != 0 {
        return Quantity(format!("{m}m"));
    }
    let mut v = m / 1000;
    if v == 0 {
        return Quantity("0".into());
    }
    let mut suffix = "";
    for s in ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"] {
        if v % 1024 != 0 {
            break;
        }
        v /= 1024;
        suffix = s;
    }
    Quantity(format!("{v}{suffix}"))
}

/// A share ID for a device allocated to a request (upstream draws a random UUID; the engine
/// has no randomness, so it is derived from the claim, request, device and position, in
/// RFC 4122 normalized form).
pub fn share_id(parts: &[&str]) -> String {
    use std::hash::{Hash, Hasher};
    let mut words = [0u64; 2];
    for (i, w) in words.iter_mut().enumerate() {
        let mut h = rustc_hash::FxHasher::default();
        (i as u64 + 0x9e37_79b9_7f4a_7c15).hash(&mut h);
        parts.hash(&mut h);
        *w = h.finish();
    }
    let hi = words[0];
    let lo = words[1];
    // Version 4, variant 10.
    let hi = (hi & !0xf000) | 0x4000;
    let lo = (lo & !(0xc << 60)) | (0x8 << 60);
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xffff,
        lo >> 48,
        lo & 0xffff_ffff_ffff
    )
}

/// Adds `consumed` to `device`'s entry of `shared`.
pub fn add_shared(shared: &mut SharedUse, device: DeviceId, consumed: impl Iterator<Item = (String, i64)>) {
    let entry = shared.entry(device).or_default();
    for (name, m) in consumed {
        *entry.entry(name).or_default() += m;
    }
}

/// The devices of `shared` (allocated with a share ID) and of `in_use`.
pub fn is_allocated(in_use: &FxHashSet<DeviceId>, shared: &SharedUse, id: &DeviceId) -> bool {
    in_use.contains(id) || shared.contains_key(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::api::resource::v1::{CapacityRequestPolicyRange, DeviceCapacity};

    fn q(s: &str) -> Quantity {
        Quantity(s.into())
    }

    fn dev(value: &str, policy: Option<CapacityRequestPolicy>) -> Device {
        Device {
            name: "d".into(),
            allow_multiple_allocations: Some(true),
            capacity: Some(
                [("memory".to_string(), DeviceCapacity { value: q(value), request_policy: policy })].into(),
            ),
            ..Default::default()
        }
    }

    fn one(d: &Device, req: Option<&str>) -> Option<(String, i64)> {
        let r: Option<BTreeMap<String, Quantity>> = req.map(|r| [("memory".to_string(), q(r))].into());
        consumed(d, r.as_ref()).map(|v| (v[0].quantity.0.clone(), v[0].milli / 1000))
    }

    /// Upstream consumable_capacity_test.go, TestConsumableCapacity
    /// "get-consumed-capacity-from-request" and the round-up cases.
    #[test]
    fn consumed_capacity_follows_the_request_policy() {
        let plain = dev("2", None);
        assert_eq!(one(&plain, Some("1")), Some(("1".into(), 1)));
        assert_eq!(one(&plain, None), Some(("2".into(), 2)), "no request: the whole value");
        assert_eq!(one(&plain, Some("3")), None, "more than the value");
        let default = dev("2", Some(CapacityRequestPolicy { default: Some(q("1")), ..Default::default() }));
        assert_eq!(one(&default, None), Some(("1".into(), 1)));
        let range = dev(
            "10Gi",
            Some(CapacityRequestPolicy {
                default: Some(q("1Gi")),
                valid_range: Some(CapacityRequestPolicyRange {
                    min: q("1Gi"),
                    max: Some(q("4Gi")),
                    step: Some(q("1Gi")),
                }),
                ..Default::default()
            }),
        );
        assert_eq!(one(&range, Some("512Mi")), Some(("1Gi".into(), 1 << 30)), "below min: min");
        assert_eq!(one(&range, Some("1500Mi")), Some(("2Gi".into(), 2 << 30)), "rounded up to a step");
        assert_eq!(one(&range, Some("5Gi")), None, "above max");
        let values = dev(
            "10",
            Some(CapacityRequestPolicy {
                default: Some(q("2")),
                valid_values: Some(vec![q("2"), q("4"), q("8")]),
                ..Default::default()
            }),
        );
        assert_eq!(one(&values, Some("3")), Some(("4".into(), 4)));
        assert_eq!(one(&values, Some("9")), None, "above every valid value");
        let mut undefined = BTreeMap::new();
        undefined.insert("bandwidth".to_string(), q("1"));
        assert_eq!(consumed(&plain, Some(&undefined)), None, "a capacity the device does not define");
    }

    #[test]
    fn share_ids_are_normalized_uuids() {
        let id = share_id(&["default/c", "r", "d", "0"]);
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
        assert!(id.chars().all(|c| c == '-' || c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(id, share_id(&["default/c", "r", "d", "1"]));
    }

    #[test]
    fn binary_form() {
        assert_eq!(format_binary(2 * 1024 * 1024 * 1024 * 1000).0, "2Gi");
        assert_eq!(format_binary(1536 * 1000).0, "1536");
        assert_eq!(format_binary(500).0, "500m");
    }
}
