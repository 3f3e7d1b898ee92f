//! Feature gates, named as in the seeds. Unknown names are an error at load time.

use std::collections::BTreeMap;

/// Every gate Placer knows, with its default. Upstream Kubernetes gates default to what a
/// v1.36 cluster that enables workload-aware scheduling would run with; Kueue gates default
/// as in Kueue at the commit the conformance corpus was taken from.
pub const KNOWN_GATES: &[(&str, bool)] = &[
    // Kubernetes (seed 004)
    ("GenericWorkload", true),
    ("GangScheduling", true),
    ("TopologyAwareWorkloadScheduling", true),
    ("WorkloadAwarePreemption", false),
    ("WorkloadWithJob", true),
    ("DRAWorkloadResourceClaims", false),
    // Placer: workload-aware preemption for groups with topology constraints, searched
    // inside one domain (KEP-5732 beta). Off by default, as in v1.36.
    ("TopologyAwareWorkloadPreemption", false),
    // Kueue (seed 002)
    ("TASProfileMixed", true),
    ("TASProfileBestFit", false),
    ("TASBalancedPlacement", false),
    ("TASMultiLayerTopology", true),
    ("TASRespectNodeAffinityPreferred", false),
];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown feature gate {name:?} (known: {known})")]
pub struct UnknownGate {
    pub name: String,
    pub known: String,
}

/// A resolved set of feature gates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureGates {
    values: BTreeMap<&'static str, bool>,
}

impl Default for FeatureGates {
    fn default() -> Self {
        FeatureGates { values: KNOWN_GATES.iter().copied().collect() }
    }
}

impl FeatureGates {
    /// Defaults overridden by `overrides`; an unknown gate name is an error.
    pub fn with_overrides<'a>(
        overrides: impl IntoIterator<Item = (&'a str, bool)>,
    ) -> Result<Self, UnknownGate> {
        let mut gates = FeatureGates::default();
        for (name, value) in overrides {
            gates.set(name, value)?;
        }
        Ok(gates)
    }

    pub fn set(&mut self, name: &str, value: bool) -> Result<(), UnknownGate> {
        match KNOWN_GATES.iter().find(|(n, _)| *n == name) {
            Some((n, _)) => {
                self.values.insert(n, value);
                Ok(())
            }
            None => Err(UnknownGate {
                name: name.to_string(),
                known: KNOWN_GATES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
            }),
        }
    }

    /// Value of a known gate. Panics on a name that is not in [`KNOWN_GATES`]: gate names in
    /// code are constants, so this is a programming error, never user input.
    pub fn enabled(&self, name: &str) -> bool {
        match self.values.get(name) {
            Some(v) => *v,
            None => panic!("feature gate {name:?} is not in KNOWN_GATES"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let g = FeatureGates::with_overrides([("TASBalancedPlacement", true)]).unwrap();
        assert!(g.enabled("TASBalancedPlacement"));
        assert!(g.enabled("TASProfileMixed"));
        assert!(!g.enabled("WorkloadAwarePreemption"));
    }

    #[test]
    fn unknown_gate_is_an_error() {
        let err = FeatureGates::with_overrides([("NoSuchGate", true)]).unwrap_err();
        assert_eq!(err.name, "NoSuchGate");
    }
}
