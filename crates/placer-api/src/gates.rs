//! Feature gates, named as in the seeds.
//!
//! A gate is a [`Gate`] value: code asks [`FeatureGates::enabled`] about a variant, so a
//! misspelt gate does not compile and the question can never panic. Names only appear at
//! the edges: configuration (a scenario's `scheduler.featureGates`, `placer serve`'s
//! `featureGates`) is parsed with [`Gate::from_name`] / [`FeatureGates::set`], and an
//! unknown name is an [`UnknownGate`] error that names it and lists the known ones.

use std::fmt;

/// Declares the gates with their names and defaults, in one place.
macro_rules! gates {
    ($($(#[$doc:meta])* $variant:ident = $default:literal,)*) => {
        /// A feature gate Placer knows.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Gate {
            $($(#[$doc])* $variant,)*
        }

        impl Gate {
            /// Every gate, in declaration order.
            pub const ALL: &'static [Gate] = &[$(Gate::$variant,)*];

            /// The gate's name, as written in configuration.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Gate::$variant => stringify!($variant),)*
                }
            }

            /// The gate's default value.
            pub const fn default_value(self) -> bool {
                match self {
                    $(Gate::$variant => $default,)*
                }
            }
        }
    };
}

// Upstream Kubernetes gates default to what a v1.36 cluster that enables workload-aware
// scheduling would run with; Kueue gates default as in Kueue at the commit the conformance
// corpus was taken from.
gates! {
    // Kubernetes (seed 004)
    /// The Workload / PodGroup API and the PodGroup scheduling cycle.
    GenericWorkload = true,
    /// Gang semantics (`minCount`) and the GangScheduling plugin.
    GangScheduling = true,
    /// KEP-5732 placements for PodGroups with a topology constraint.
    TopologyAwareWorkloadScheduling = true,
    /// Workload-aware preemption (the PodGroup is the preemptor).
    WorkloadAwarePreemption = false,
    /// The Job controller creates Workloads / PodGroups (KEP-5547).
    WorkloadWithJob = true,
    /// ResourceClaims for PodGroups (seed 004, KEP-5729).
    DRAWorkloadResourceClaims = false,
    /// Partitionable devices: `sharedCounters`, `consumesCounters`, per-device node
    /// selection (KEP-4815; beta, on by default in v1.36).
    DRAPartitionableDevices = true,
    /// Consumable capacity: devices with `allowMultipleAllocations`, `capacity.requests`
    /// (KEP-5075; beta, on by default in v1.36).
    DRAConsumableCapacity = true,
    /// Device binding conditions: PreBind waits for them (KEP-5007; beta, on by default in
    /// v1.36).
    DRADeviceBindingConditions = true,
    /// Placer: workload-aware preemption for groups with topology constraints, searched
    /// inside one domain (KEP-5732 beta). Off by default, as in v1.36.
    TopologyAwareWorkloadPreemption = false,
    // Kueue (seed 002)
    /// LeastFreeCapacity for unconstrained requests.
    TASProfileMixed = true,
    /// BestFit everywhere.
    TASProfileBestFit = false,
    /// LeastFreeCapacity everywhere (Kueue's profile until v0.16, removed in v0.17; kept
    /// here so the two algorithms can be compared on the same trace).
    TASProfileLeastFreeCapacity = false,
    /// BalancedPlacement for preferred requests.
    TASBalancedPlacement = false,
    /// Multi-layer (slice) topology constraints.
    TASMultiLayerTopology = true,
    /// Preferred node affinity counts in hierarchical placement.
    TASRespectNodeAffinityPreferred = false,
    /// Pods of a placed group lost with a failed node are replaced inside the group's
    /// domain (with slices: inside the incomplete slice's domain).
    TASFailedNodeReplacement = true,
    /// When no replacement fits, the whole group is evicted and placed again.
    TASFailedNodeReplacementFailFast = true,
    /// Nodes with an untolerated NoExecute (or NoSchedule) taint count as failed.
    TASReplaceNodeOnNodeTaints = true,
    /// A not-ready (or tainted) node counts as failed for a group as soon as none of the
    /// group's pods on it is still running (all terminated or terminating), without waiting
    /// for `NodeFailureDelay`; while one still runs, it does not (Kueue beta since v0.14).
    TASReplaceNodeOnPodTermination = true,
    /// A node not ready for `NodeFailureDelay` (30 s) counts as failed even while pods of
    /// the group still run on it (Kueue: deprecated and off by default since v0.19; with
    /// `TASReplaceNodeOnPodTermination` off the 30 s rule applies regardless).
    TASReplaceNodeDueToNotReadyOverFixedTime = false,
}

impl Gate {
    /// The gate named `name` (exact, case-sensitive, as Kubernetes reads gate names).
    pub fn from_name(name: &str) -> Result<Gate, UnknownGate> {
        Gate::ALL.iter().copied().find(|g| g.name() == name).ok_or_else(|| UnknownGate {
            name: name.to_string(),
            known: Gate::ALL.iter().map(|g| g.name()).collect::<Vec<_>>().join(", "),
        })
    }
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Gate {
    type Err = UnknownGate;
    fn from_str(s: &str) -> Result<Gate, UnknownGate> {
        Gate::from_name(s)
    }
}

/// Every gate Placer knows, by name, with its default.
pub fn known_gates() -> impl Iterator<Item = (&'static str, bool)> {
    Gate::ALL.iter().map(|g| (g.name(), g.default_value()))
}

/// A configuration names a gate Placer does not know.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown feature gate {name:?} (known: {known})")]
pub struct UnknownGate {
    pub name: String,
    pub known: String,
}

/// A resolved set of feature gates: one bit per gate, by declaration order (the engine
/// asks about a gate on every pod event and binding).
#[derive(Clone, PartialEq, Eq)]
pub struct FeatureGates {
    on: u64,
}

// One bit per gate.
const _: () = assert!(Gate::ALL.len() <= 64);

impl Gate {
    const fn bit(self) -> u64 {
        1 << self as u32
    }
}

impl Default for FeatureGates {
    fn default() -> Self {
        let on = Gate::ALL.iter().filter(|g| g.default_value()).fold(0, |on, g| on | g.bit());
        FeatureGates { on }
    }
}

impl fmt::Debug for FeatureGates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(Gate::ALL.iter().map(|g| (g, self.enabled(*g)))).finish()
    }
}

impl FeatureGates {
    /// Defaults overridden by `overrides` read from configuration; an unknown gate name is
    /// an error naming it.
    pub fn with_overrides<'a>(
        overrides: impl IntoIterator<Item = (&'a str, bool)>,
    ) -> Result<Self, UnknownGate> {
        let mut gates = FeatureGates::default();
        for (name, value) in overrides {
            gates.set(name, value)?;
        }
        Ok(gates)
    }

    /// Defaults overridden by typed values (cannot fail).
    pub fn with(overrides: impl IntoIterator<Item = (Gate, bool)>) -> Self {
        let mut gates = FeatureGates::default();
        for (gate, value) in overrides {
            gates.set_gate(gate, value);
        }
        gates
    }

    /// Sets the gate named `name` (from configuration); an unknown name is an error.
    pub fn set(&mut self, name: &str, value: bool) -> Result<(), UnknownGate> {
        self.set_gate(Gate::from_name(name)?, value);
        Ok(())
    }

    /// Sets a gate.
    pub fn set_gate(&mut self, gate: Gate, value: bool) {
        if value {
            self.on |= gate.bit();
        } else {
            self.on &= !gate.bit();
        }
    }

    /// Whether a gate is on.
    pub fn enabled(&self, gate: Gate) -> bool {
        self.on & gate.bit() != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_gate_is_set_and_cleared_alone() {
        for gate in Gate::ALL {
            for value in [true, false] {
                let g = FeatureGates::with([(*gate, value)]);
                for other in Gate::ALL {
                    let expected = if other == gate { value } else { other.default_value() };
                    assert_eq!(g.enabled(*other), expected, "{gate} = {value}: {other}");
                }
            }
        }
    }

    #[test]
    fn defaults_and_overrides() {
        let g = FeatureGates::with_overrides([("TASBalancedPlacement", true)]).unwrap();
        assert!(g.enabled(Gate::TASBalancedPlacement));
        assert!(g.enabled(Gate::TASProfileMixed));
        assert!(!g.enabled(Gate::WorkloadAwarePreemption));
        assert_eq!(FeatureGates::with([(Gate::TASBalancedPlacement, true)]), g);
    }

    #[test]
    fn unknown_gate_is_an_error_naming_it() {
        let err = FeatureGates::with_overrides([("NoSuchGate", true)]).unwrap_err();
        assert_eq!(err.name, "NoSuchGate");
        assert!(err.to_string().starts_with("unknown feature gate \"NoSuchGate\" (known: GenericWorkload,"));
        assert!("gangscheduling".parse::<Gate>().is_err(), "names are case-sensitive");
    }

    #[test]
    fn names_round_trip() {
        for g in Gate::ALL {
            assert_eq!(Gate::from_name(g.name()), Ok(*g));
        }
        assert_eq!(known_gates().count(), Gate::ALL.len());
    }
}
