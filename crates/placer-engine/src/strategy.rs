//! The group strategy, chosen once when the engine is built: KEP-5732's placement search
//! ([`crate::placement`]) without `topologyLevels`, seed 002's hierarchical algorithms
//! ([`crate::tas`]) with them. Both answer a cycle with [`GroupDecision`]s, which
//! `engine/outcome.rs` alone turns into decisions.

use crate::config::SchedulerConfig;
use crate::tas::engine_bridge::TasCache;

/// How the engine decides PodGroups.
#[derive(Debug)]
pub enum Strategy {
    /// KEP-5732: candidate placements per topology domain, scored; one PodGroup per cycle,
    /// with per-pod and workload-aware preemption.
    Placements,
    /// Seed 002 (Kueue): domains and per-node counts from the hierarchical algorithms; a
    /// cycle decides a unit (a PodGroup, or the leader and workers PodGroups of a PodSet
    /// group). Keeps the domain tree of the current node set.
    Hierarchical(Box<TasCache>),
}

impl Strategy {
    /// The strategy `config` calls for.
    pub fn new(config: &SchedulerConfig) -> Strategy {
        if config.topology_levels.is_empty() {
            Strategy::Placements
        } else {
            Strategy::Hierarchical(Box::new(TasCache::new(config)))
        }
    }

    /// Whether this is the hierarchical strategy (PodSet units, Kueue annotations).
    pub fn is_hierarchical(&self) -> bool {
        matches!(self, Strategy::Hierarchical(_))
    }
}
