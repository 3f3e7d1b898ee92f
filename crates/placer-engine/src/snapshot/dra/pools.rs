//! Incomplete and invalid resource pools, as upstream's `GatherPools` / `buildPool`
//! (`structured/internal/incubating/pools_incubating.go`) judge them for a node:
//!
//! * incomplete: the pool's newest generation has a number of slices other than its
//!   `resourceSliceCount` (the driver is publishing it). Nothing is allocated from it, and
//!   a request for `All` devices fails: "asks for all devices, but resource pool
//!   <driver>/<pool> is currently being updated".
//! * invalid: the slices of the pool that reach the node define a device name twice
//!   (`duplicate device name`); a counter set defined twice or a consumed counter set or
//!   counter that does not exist (found by `shared::pool_counters`) makes it invalid too.
//!   Nothing is allocated from it; a request for `All` devices fails ("... is currently
//!   invalid"); and when the node has no solution, the DynamicResources filter says
//!   "invalid resource pools were encountered" (UnschedulableAndUnresolvable) instead of "cannot allocate
//!   all claims".
//!
//! Pools are judged when slices change ([`DraState::refresh_troubles`]: only troubled pools
//! are kept, so a healthy cluster pays nothing per node); duplicate names are then checked
//! per node among the slices that reach it, as upstream does.

use std::collections::{BTreeMap, BTreeSet};

use placer_api::k8s::api::resource::v1::ResourceSlice;

use super::DraState;
use crate::framework::helper::node_selector_terms_match;
use crate::model::NodeStatic;

/// A pool (driver, pool name).
pub(super) type PoolKey = (String, String);

/// What may be wrong with a pool's newest generation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct PoolTrouble {
    /// Slices of the newest generation other than `resourceSliceCount`.
    pub(super) incomplete: bool,
    /// Some device name appears twice among its device slices (per node: see
    /// [`DraState::pool_problems`]).
    pub(super) duplicate_names: bool,
}

/// The pools reaching one node that nothing is allocated from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct NodePools {
    pub(super) incomplete: BTreeSet<PoolKey>,
    pub(super) invalid: BTreeSet<PoolKey>,
}

impl NodePools {
    pub(super) fn excludes(&self, driver: &str, pool: &str) -> bool {
        let key = (driver.to_string(), pool.to_string());
        self.incomplete.contains(&key) || self.invalid.contains(&key)
    }
}

/// Upstream's `PoolID.String()`.
pub(super) fn show_pool(key: &PoolKey) -> String {
    format!("{}/{}", key.0, key.1)
}

/// Whether `slice` is relevant for `node` (upstream's `GatherPools`): its own node
/// selection, or with per-device node selection any device's.
fn reaches(slice: &ResourceSlice, node: &NodeStatic) -> bool {
    let empty = BTreeMap::new();
    let labels = node.node.metadata.labels.as_ref().unwrap_or(&empty);
    let matches = |name: Option<&String>,
                   all: Option<bool>,
                   sel: Option<&placer_api::k8s::api::core::v1::NodeSelector>| {
        name.is_some_and(|n| **n == *node.name)
            || all == Some(true)
            || sel.is_some_and(|s| node_selector_terms_match(&s.node_selector_terms, &node.name, labels))
    };
    let s = &slice.spec;
    if s.per_device_node_selection == Some(true) {
        s.devices
            .iter()
            .flatten()
            .any(|d| matches(d.node_name.as_ref(), d.all_nodes, d.node_selector.as_ref()))
    } else {
        matches(s.node_name.as_ref(), s.all_nodes, s.node_selector.as_ref())
    }
}

/// Whether device slices (slices without counter sets) define a name twice.
fn duplicate_names<'a>(slices: impl Iterator<Item = &'a ResourceSlice>) -> bool {
    let mut seen = BTreeSet::new();
    slices
        .filter(|s| s.spec.shared_counters.as_ref().is_none_or(|c| c.is_empty()))
        .flat_map(|s| s.spec.devices.iter().flatten())
        .any(|d| !seen.insert(d.name.as_str()))
}

impl DraState {
    /// Judges every pool's newest generation (after any slice change; `newest` is up to
    /// date). Keeps the troubled pools only.
    pub(super) fn refresh_troubles(&mut self) {
        let mut by_pool: BTreeMap<PoolKey, Vec<&ResourceSlice>> = BTreeMap::new();
        for s in self.slices.values() {
            let key = (s.spec.driver.clone(), s.spec.pool.name.clone());
            if self.newest.get(&key) == Some(&s.spec.pool.generation) {
                by_pool.entry(key).or_default().push(s);
            }
        }
        self.troubled = by_pool
            .into_iter()
            .filter_map(|(key, slices)| {
                // Slices are in name order; the first one's count is the pool's.
                let count = slices.first().map_or(0, |s| s.spec.pool.resource_slice_count);
                let trouble = PoolTrouble {
                    incomplete: i64::try_from(slices.len()).ok() != Some(count),
                    duplicate_names: duplicate_names(slices.iter().copied()),
                };
                (trouble != PoolTrouble::default()).then_some((key, trouble))
            })
            .collect();
    }

    /// The pools reaching `node` that are incomplete, or invalid for it (see the module
    /// docs; counter sets are judged by the allocator).
    pub(super) fn pool_problems(&self, node: &NodeStatic) -> NodePools {
        let mut out = NodePools::default();
        if self.troubled.is_empty() {
            return out;
        }
        let names = [&*node.name, ""].into_iter().filter_map(|n| self.by_node.get(n)).flatten();
        let mut reaching: BTreeMap<PoolKey, Vec<&ResourceSlice>> = BTreeMap::new();
        for s in names.filter_map(|n| self.slices.get(n)) {
            let key = (s.spec.driver.clone(), s.spec.pool.name.clone());
            if self.troubled.contains_key(&key)
                && self.newest.get(&key) == Some(&s.spec.pool.generation)
                && reaches(s, node)
            {
                reaching.entry(key).or_default().push(s);
            }
        }
        for (key, slices) in reaching {
            let trouble = self.troubled[&key];
            if trouble.incomplete {
                out.incomplete.insert(key);
            } else if trouble.duplicate_names && duplicate_names(slices.into_iter()) {
                out.invalid.insert(key);
            }
        }
        out
    }

    /// Whether an invalid pool reaches `node` (the DynamicResources filter's reason when
    /// the node has no solution): a pool defining a device name twice, or whose counter
    /// sets are inconsistent.
    pub fn invalid_pools_reach(&self, node: &NodeStatic) -> bool {
        if !self.pool_problems(node).invalid.is_empty() {
            return true;
        }
        let mut pools: BTreeSet<(&str, &str)> = BTreeSet::new();
        for c in self.candidates(node).iter().filter(|c| !c.consumes.is_empty()) {
            pools.insert((c.slice.spec.driver.as_str(), c.slice.spec.pool.name.as_str()));
        }
        pools.into_iter().any(|(driver, pool)| self.counters_of(driver, pool, |_| false).is_err())
    }
}
