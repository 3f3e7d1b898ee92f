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

    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.cpu,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.pods,
            _ => self.scalar.iter().find(|(n, _)| &**n == name).map(|(_, v)| *v).unwrap_or(0),
        }
    }

    pub fn set(&mut self, name: &str, value: i64) {
        match name {
            CPU => self.cpu = value,
            MEMORY => self.memory = value,
            EPHEMERAL_STORAGE => self.ephemeral_storage = value,
            PODS => self.pods = value,
            _ => match self.scalar.binary_search_by(|(n, _)| (**n).cmp(name)) {
                Ok(i) => self.scalar[i].1 = value,
                Err(i) => self.scalar.insert(i, (Arc::from(name), value)),
            },
        }
    }

    /// `self += other` (all resources, including `pods`).
    pub fn add(&mut self, other: &Resources) {
        self.cpu += other.cpu;
        self.memory += other.memory;
        self.ephemeral_storage += other.ephemeral_storage;
        self.pods += other.pods;
        for (n, v) in &other.scalar {
            let cur = self.get(n);
            self.set(n, cur + v);
        }
    }

    /// `self -= other` (all resources, including `pods`).
    pub fn sub(&mut self, other: &Resources) {
        self.cpu -= other.cpu;
        self.memory -= other.memory;
        self.ephemeral_storage -= other.ephemeral_storage;
        self.pods -= other.pods;
        for (n, v) in &other.scalar {
            let cur = self.get(n);
            self.set(n, cur - v);
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn bad_quantity_names_the_resource() {
        let mut list = BTreeMap::new();
        list.insert("memory".to_string(), Quantity("lots".into()));
        let err = Resources::from_list(&list).unwrap_err();
        assert_eq!(err.resource, "memory");
    }
}
