//! Resource vectors in fixed point: cpu in millicores, memory and ephemeral storage in
//! bytes, extended resources (e.g. `nvidia.com/gpu`) in their own units.
//!
//! The `pods` resource is not part of a pod's requests: a node counts its pods and
//! `NodeResourcesFit` compares that count with the node's allocatable `pods`.

use std::collections::BTreeMap;
use std::sync::Arc;

use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;
use placer_api::quantity::{parse_milli, parse_units, QuantityError};
use smallvec::SmallVec;

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const PODS: &str = "pods";

/// A vector of resource amounts. Extended resources are kept sorted by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    pub cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    /// Number of pods (only meaningful for node allocatable / requested).
    pub pods: i64,
    pub scalar: SmallVec<[(Arc<str>, i64); 2]>,
}

/// Most distinct extended resource names kept by [`intern`]; past this, names are
/// allocated per use (still correct, only slower), so the table stays bounded.
const MAX_INTERNED_NAMES: usize = 4096;

/// The shared copy of an extended resource name: every [`Resources`] naming
/// `nvidia.com/gpu` points at the same bytes, so lookups compare pointers first. A cache
/// of immutable strings: it never changes what any computation returns.
pub(crate) fn intern(name: &str) -> Arc<str> {
    static NAMES: std::sync::OnceLock<std::sync::Mutex<rustc_hash::FxHashSet<Arc<str>>>> =
        std::sync::OnceLock::new();
    let names = NAMES.get_or_init(Default::default);
    let Ok(mut names) = names.lock() else { return Arc::from(name) };
    if let Some(shared) = names.get(name) {
        return shared.clone();
    }
    let shared: Arc<str> = Arc::from(name);
    if names.len() < MAX_INTERNED_NAMES {
        names.insert(shared.clone());
    }
    shared
}

/// A quantity that could not be read, with the resource name it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("resource {resource:?}: {source}")]
pub struct ResourceError {
    pub resource: String,
    #[source]
    pub source: QuantityError,
}

impl Resources {
    /// Reads a Kubernetes resource list (`requests`, `allocatable`, `overhead`).
    pub fn from_list(list: &BTreeMap<String, Quantity>) -> Result<Resources, ResourceError> {
        let mut r = Resources::default();
        for (name, q) in list {
            let err = |source| ResourceError { resource: name.clone(), source };
            let v =
                if name == CPU { parse_milli(&q.0).map_err(err)? } else { parse_units(&q.0).map_err(err)? };
            r.set(name, v);
        }
        Ok(r)
    }

    /// The amount of a named (extended) resource, 0 when absent: [`Resources::get`] for a
    /// name that is none of the four fixed ones, without matching it against them.
    pub fn scalar(&self, name: &str) -> i64 {
        // Names are interned: the pointer check settles the common case without comparing
        // bytes.
        self.scalar
            .iter()
            .find(|(n, _)| std::ptr::eq(n.as_ptr(), name.as_ptr()) && n.len() == name.len())
            .or_else(|| self.scalar.iter().find(|(n, _)| &**n == name))
            .map(|(_, v)| *v)
            .unwrap_or(0)
    }

    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.cpu,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.pods,
            _ => self.scalar(name),
        }
    }

    /// [`Resources::get`] of a name taken from another vector's `scalar` list (an extended
    /// resource, never cpu, memory, ephemeral-storage or pods, which [`Resources::set`]
    /// keeps in their fields): the shared copy is found by pointer, without comparing the
    /// name with the native ones first.
    #[inline]
    pub fn get_scalar(&self, name: &Arc<str>) -> i64 {
        self.scalar
            .iter()
            .find(|(n, _)| Arc::ptr_eq(n, name))
            .or_else(|| self.scalar.iter().find(|(n, _)| n == name))
            .map_or(0, |(_, v)| *v)
    }

    pub fn set(&mut self, name: &str, value: i64) {
        match name {
            CPU => self.cpu = value,
            MEMORY => self.memory = value,
            EPHEMERAL_STORAGE => self.ephemeral_storage = value,
            PODS => self.pods = value,
            _ => match self.scalar.binary_search_by(|(n, _)| (**n).cmp(name)) {
                Ok(i) => self.scalar[i].1 = value,
                Err(i) => self.scalar.insert(i, (intern(name), value)),
            },
        }
    }

    /// `self += other` (all resources, including `pods`). Sums saturate at `i64::MAX` (and
    /// `i64::MIN`) instead of wrapping: a pod whose requests add up past what an `i64` holds
    /// asks for more than any node has, and never fits (two containers of `memory: 4Ei`
    /// must not wrap around to a negative request).
    pub fn add(&mut self, other: &Resources) {
        self.cpu = self.cpu.saturating_add(other.cpu);
        self.memory = self.memory.saturating_add(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.saturating_add(other.ephemeral_storage);
        self.pods = self.pods.saturating_add(other.pods);
        self.merge_scalar(other, i64::saturating_add);
    }

    /// [`Resources::add`] of `other`, `times` times over. Each amount is added `times`
    /// times the same value, so it moves one way only and saturates once, at the end:
    /// the exact sum clamped to `i64` is what the repeated additions give.
    pub fn add_times(&mut self, other: &Resources, times: u32) {
        if times == 0 {
            return; // adds nothing, and inserts no extended resource name either
        }
        let f = |a: i64, b: i64| {
            let exact = i128::from(a) + i128::from(b) * i128::from(times);
            i64::try_from(exact).unwrap_or(if exact < 0 { i64::MIN } else { i64::MAX })
        };
        self.cpu = f(self.cpu, other.cpu);
        self.memory = f(self.memory, other.memory);
        self.ephemeral_storage = f(self.ephemeral_storage, other.ephemeral_storage);
        self.pods = f(self.pods, other.pods);
        self.merge_scalar(other, f);
    }

    /// `self -= other` (all resources, including `pods`), saturating like [`Resources::add`].
    pub fn sub(&mut self, other: &Resources) {
        self.cpu = self.cpu.saturating_sub(other.cpu);
        self.memory = self.memory.saturating_sub(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.saturating_sub(other.ephemeral_storage);
        self.pods = self.pods.saturating_sub(other.pods);
        self.merge_scalar(other, i64::saturating_sub);
    }

    /// `self[name] = f(self[name], other[name])` for every extended resource of `other`.
    /// Both lists are sorted by name: when `self` already holds every name of `other` (the
    /// common case: node sums, the same kinds of pods) this is one merge walk without
    /// allocation; otherwise missing names are inserted.
    fn merge_scalar(&mut self, other: &Resources, f: impl Fn(i64, i64) -> i64) {
        let mut i = 0;
        for (name, v) in &other.scalar {
            while i < self.scalar.len() && !Arc::ptr_eq(&self.scalar[i].0, name) && *self.scalar[i].0 < **name
            {
                i += 1;
            }
            if i < self.scalar.len() && (Arc::ptr_eq(&self.scalar[i].0, name) || *self.scalar[i].0 == **name)
            {
                self.scalar[i].1 = f(self.scalar[i].1, *v);
            } else {
                self.scalar.insert(i, (name.clone(), f(0, *v)));
            }
            i += 1;
        }
    }

    /// Sets every negative amount to zero.
    pub fn clamp_non_negative(&mut self) {
        self.cpu = self.cpu.max(0);
        self.memory = self.memory.max(0);
        self.ephemeral_storage = self.ephemeral_storage.max(0);
        self.pods = self.pods.max(0);
        for (_, v) in self.scalar.iter_mut() {
            *v = (*v).max(0);
        }
    }

    /// Component-wise maximum.
    pub fn max_with(&mut self, other: &Resources) {
        self.cpu = self.cpu.max(other.cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        self.pods = self.pods.max(other.pods);
        for (n, v) in &other.scalar {
            let cur = self.get(n);
            self.set(n, cur.max(*v));
        }
    }

    /// Names and amounts of every non-zero resource (cpu, memory, ephemeral-storage,
    /// pods, then extended resources by name).
    pub fn iter_nonzero(&self) -> impl Iterator<Item = (&str, i64)> {
        [
            (CPU, self.cpu),
            (MEMORY, self.memory),
            (EPHEMERAL_STORAGE, self.ephemeral_storage),
            (PODS, self.pods),
        ]
        .into_iter()
        .chain(self.scalar.iter().map(|(n, v)| (&**n, *v)))
        .filter(|(_, v)| *v != 0)
    }

    pub fn is_zero(&self) -> bool {
        self.iter_nonzero().next().is_none()
    }
}

/// `part * scale / whole` in 128 bits, clamped back to `i64` (amounts reach `i64::MAX`, and
/// `amount * 100` must not wrap while scoring); `whole` must not be 0.
pub fn scaled(part: i64, scale: i64, whole: i64) -> i64 {
    // The common case in 64 bits (a 128-bit division is a library call, and this runs for
    // every node a pod is scored on): when the product does not overflow and the quotient
    // is representable (not `i64::MIN / -1`), both truncate toward zero alike.
    if let Some(product) = part.checked_mul(scale) {
        if let Some(q) = product.checked_div(whole) {
            return q;
        }
    }
    let v = i128::from(part) * i128::from(scale) / i128::from(whole);
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scalar_name_reads_the_same_by_pointer_as_by_name() {
        let mut node = Resources::default();
        node.set("nvidia.com/gpu", 8);
        node.set("example.com/fpga", 2);
        let mut pod = Resources::default();
        pod.set("example.com/fpga", 1);
        pod.set("nvidia.com/gpu", 1);
        // An uninterned copy of a name (not the shared allocation) is found by comparing.
        pod.scalar.push((Arc::from("example.com/nic"), 1));
        node.scalar.push((Arc::from("example.com/nic"), 4));
        for (name, _) in &pod.scalar {
            assert_eq!(node.get_scalar(name), node.get(name), "{name}");
        }
        assert_eq!(node.get_scalar(&Arc::from("example.com/none")), 0);
    }

    #[test]
    fn from_list_and_arithmetic() {
        let mut list = BTreeMap::new();
        list.insert("cpu".to_string(), Quantity("1500m".into()));
        list.insert("memory".to_string(), Quantity("1Gi".into()));
        list.insert("nvidia.com/gpu".to_string(), Quantity("8".into()));
        let r = Resources::from_list(&list).unwrap();
        assert_eq!(r.cpu, 1500);
        assert_eq!(r.memory, 1 << 30);
        assert_eq!(r.get("nvidia.com/gpu"), 8);
        let mut s = r.clone();
        s.add(&r);
        assert_eq!(s.get("nvidia.com/gpu"), 16);
        s.sub(&r);
        assert_eq!(s, r);
    }

    #[test]
    fn add_and_sub_merge_extended_resources_by_name() {
        let mut a = Resources::default();
        a.set("b.example/x", 5);
        a.set("d.example/x", 7);
        let mut b = Resources::default();
        b.set("a.example/x", 1);
        b.set("b.example/x", 2);
        b.set("c.example/x", 3);
        b.set("e.example/x", 4);
        a.add(&b);
        let got: Vec<(String, i64)> = a.scalar.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        let want = [
            ("a.example/x", 1),
            ("b.example/x", 7),
            ("c.example/x", 3),
            ("d.example/x", 7),
            ("e.example/x", 4),
        ];
        assert_eq!(got, want.map(|(n, v)| (n.to_string(), v)));
        a.sub(&b);
        assert_eq!(a.get("b.example/x"), 5);
        assert_eq!(a.get("a.example/x"), 0);
        assert_eq!(a.get("d.example/x"), 7);
        let mut c = Resources { cpu: -3, pods: 2, ..Resources::default() };
        c.set("g", -1);
        c.clamp_non_negative();
        assert_eq!((c.cpu, c.pods, c.get("g")), (0, 2, 0));
    }

    #[test]
    fn sums_saturate_instead_of_wrapping() {
        let mut list = BTreeMap::new();
        list.insert("memory".to_string(), Quantity("4Ei".into()));
        list.insert("cpu".to_string(), Quantity("5e15".into()));
        list.insert("nvidia.com/gpu".to_string(), Quantity("5e18".into()));
        let one = Resources::from_list(&list).unwrap();
        let mut sum = one.clone();
        sum.add(&one);
        assert_eq!(sum.memory, i64::MAX, "4Ei + 4Ei");
        assert_eq!(sum.get("nvidia.com/gpu"), i64::MAX, "5e18 + 5e18");
        assert_eq!(
            sum.cpu,
            10_000_000_000_000_000_000i128.min(i64::MAX as i128) as i64,
            "5e15 cores in millicores"
        );
        let mut low = Resources { cpu: i64::MIN + 1, ..Resources::default() };
        low.sub(&Resources { cpu: 5, ..Resources::default() });
        assert_eq!(low.cpu, i64::MIN);
    }

    proptest::proptest! {
        /// Sums near `i64::MAX` never wrap below either operand (all amounts here are
        /// non-negative, as validated requests are).
        #[test]
        fn sums_never_wrap(a in (i64::MAX - 1_000_000)..=i64::MAX, b in 0..=i64::MAX, g in 0..=i64::MAX) {
            let mut x = Resources { cpu: a, memory: b, ..Resources::default() };
            x.set("nvidia.com/gpu", g);
            let y = x.clone();
            x.add(&y);
            proptest::prop_assert!(x.cpu >= a && x.memory >= b && x.get("nvidia.com/gpu") >= g);
            proptest::prop_assert_eq!(x.cpu, a.saturating_add(a));
        }
    }

    proptest::proptest! {
        /// The 64-bit fast path of `scaled` agrees with the plain 128-bit computation,
        /// near the overflow edges too.
        #[test]
        fn scaled_fast_path_matches_128_bits(
            part in proptest::prop_oneof![-1_000_000i64..1_000_000, proptest::num::i64::ANY],
            scale in proptest::prop_oneof![0i64..=100, proptest::num::i64::ANY],
            whole in proptest::prop_oneof![1i64..1_000_000, proptest::num::i64::ANY],
        ) {
            proptest::prop_assume!(whole != 0);
            let v = i128::from(part) * i128::from(scale) / i128::from(whole);
            let plain = i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX });
            proptest::prop_assert_eq!(scaled(part, scale, whole), plain);
        }
    }

    proptest::proptest! {
        /// `add_times(r, k)` is `k` calls of `add(r)`, saturation included, for amounts of
        /// either sign and extended resources the sum lacks.
        #[test]
        fn adding_times_over_is_adding_that_many_times(
            start in proptest::collection::vec(proptest::prop_oneof![-1_000i64..1_000, proptest::num::i64::ANY], 5),
            each in proptest::collection::vec(proptest::prop_oneof![-1_000i64..1_000, proptest::num::i64::ANY], 5),
            start_has_gpu in proptest::bool::ANY,
            fpga in proptest::option::of(proptest::prop_oneof![0i64..10, proptest::num::i64::ANY]),
            times in proptest::prop_oneof![0u32..8, 0u32..3_000],
        ) {
            let mut sum = Resources { cpu: start[0], memory: start[1], ephemeral_storage: start[2], pods: start[3], ..Resources::default() };
            if start_has_gpu {
                sum.set("nvidia.com/gpu", start[4]);
            }
            let mut other = Resources { cpu: each[0], memory: each[1], ephemeral_storage: each[2], pods: each[3], ..Resources::default() };
            other.set("nvidia.com/gpu", each[4]);
            if let Some(f) = fpga {
                other.set("example.com/fpga", f);
            }
            let mut plain = sum.clone();
            for _ in 0..times {
                plain.add(&other);
            }
            let mut fast = sum.clone();
            fast.add_times(&other, times);
            proptest::prop_assert_eq!(fast, plain);
        }
    }

    #[test]
    fn scaled_at_the_edges() {
        assert_eq!(scaled(i64::MIN, 1, -1), i64::MAX, "i64::MIN / -1 clamps");
        assert_eq!(scaled(i64::MAX, 100, i64::MAX), 100);
        assert_eq!(scaled(-7, 100, 3), -233, "truncates toward zero");
    }

    #[test]
    fn bad_quantity_names_the_resource() {
        let mut list = BTreeMap::new();
        list.insert("memory".to_string(), Quantity("lots".into()));
        let err = Resources::from_list(&list).unwrap_err();
        assert_eq!(err.resource, "memory");
    }
}
