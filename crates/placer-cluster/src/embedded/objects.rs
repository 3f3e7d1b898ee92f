//! The embedded store's objects: found by hashing their reference, listed in order.
//!
//! Controllers look objects up far more often than they create, delete or list them (a
//! replay reads every pending pod at every retry), and an ordered map compares the kind,
//! namespace and name strings at every level of its tree on each lookup. So objects live in
//! a hash map, and a separate ordered set of their references serves the listings (by kind,
//! namespace and name, as the store has always listed them). Only creations and deletions
//! touch the set; updates replace the object in place.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;

use crate::{Kind, Object, ObjectRef};

/// Objects by reference, iterated in reference order.
#[derive(Default)]
pub(crate) struct ObjectMap {
    by_ref: FxHashMap<ObjectRef, Object>,
    order: BTreeSet<ObjectRef>,
}

impl ObjectMap {
    pub(crate) fn len(&self) -> usize {
        self.by_ref.len()
    }

    pub(crate) fn reserve(&mut self, additional: usize) {
        self.by_ref.reserve(additional);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.by_ref.is_empty()
    }

    pub(crate) fn get(&self, r: &ObjectRef) -> Option<&Object> {
        self.by_ref.get(r)
    }

    pub(crate) fn get_mut(&mut self, r: &ObjectRef) -> Option<&mut Object> {
        self.by_ref.get_mut(r)
    }

    pub(crate) fn contains_key(&self, r: &ObjectRef) -> bool {
        self.by_ref.contains_key(r)
    }

    /// Stores `obj` under `r`; returns the object it replaced.
    pub(crate) fn insert(&mut self, r: ObjectRef, obj: Object) -> Option<Object> {
        match self.by_ref.get_mut(&r) {
            Some(slot) => Some(std::mem::replace(slot, obj)),
            None => {
                self.order.insert(r.clone());
                self.by_ref.insert(r, obj)
            }
        }
    }

    pub(crate) fn remove(&mut self, r: &ObjectRef) -> Option<Object> {
        let obj = self.by_ref.remove(r)?;
        self.order.remove(r);
        Some(obj)
    }

    /// Every object, ordered by kind, namespace and name.
    pub(crate) fn values(&self) -> impl Iterator<Item = &Object> {
        self.order.iter().filter_map(|r| self.by_ref.get(r))
    }

    /// Every reference and object, ordered by reference.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&ObjectRef, &Object)> {
        self.order.iter().filter_map(|r| self.by_ref.get(r).map(|o| (r, o)))
    }

    /// The objects of `kind`, ordered by namespace and name.
    pub(crate) fn of_kind(&self, kind: Kind) -> impl Iterator<Item = &Object> {
        self.order
            .range(ObjectRef::new(kind, "", "")..)
            .take_while(move |r| r.kind == kind)
            .filter_map(|r| self.by_ref.get(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn obj(name: &str) -> Object {
        Object::Namespace(placer_api::k8s::api::core::v1::Namespace {
            metadata: placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    const KINDS: [Kind; 3] = [Kind::Node, Kind::Pod, Kind::PodGroup];

    proptest! {
        /// Any sequence of inserts and removes leaves the map answering as the ordered map
        /// the store used before: lookups, lengths, the listing and each kind's listing.
        #[test]
        fn answers_as_an_ordered_map(
            ops in proptest::collection::vec((0..3usize, 0..3usize, 0..6usize, any::<bool>()), 0..80)
        ) {
            let mut map = ObjectMap::default();
            let mut model: BTreeMap<ObjectRef, Object> = BTreeMap::new();
            for (step, (kind, ns, name, insert)) in ops.into_iter().enumerate() {
                let r = ObjectRef::new(KINDS[kind], format!("ns{ns}"), format!("n{name}"));
                if insert {
                    let o = obj(&format!("v{step}"));
                    prop_assert_eq!(map.insert(r.clone(), o.clone()), model.insert(r, o));
                } else {
                    prop_assert_eq!(map.remove(&r), model.remove(&r));
                }
                prop_assert_eq!(map.len(), model.len());
                prop_assert_eq!(map.is_empty(), model.is_empty());
            }
            prop_assert_eq!(map.values().collect::<Vec<_>>(), model.values().collect::<Vec<_>>());
            prop_assert_eq!(map.iter().collect::<Vec<_>>(), model.iter().collect::<Vec<_>>());
            for kind in KINDS {
                let want: Vec<&Object> = model.iter().filter(|(r, _)| r.kind == kind).map(|(_, o)| o).collect();
                prop_assert_eq!(map.of_kind(kind).collect::<Vec<_>>(), want);
                for (r, o) in model.iter().filter(|(r, _)| r.kind == kind) {
                    prop_assert_eq!(map.get(r), Some(o));
                    prop_assert!(map.contains_key(r));
                }
            }
        }
    }
}
