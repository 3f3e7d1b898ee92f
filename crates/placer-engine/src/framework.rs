//! Extension points and their results.
//!
//! Pod level: PreFilter / Filter / Score (+ NormalizeScore) plugins, registered by name with
//! a weight. Placement level (KEP-5732): PlacementGenerate, PlacementFeasible and
//! PlacementScore (+ NormalizePlacementScore). A new policy is a new plugin.

use std::collections::BTreeMap;
use std::fmt;

/// Outcome code of a plugin, as in kube-scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Code {
    Success,
    /// Might fit after other pods go (preemption may help).
    Unschedulable,
    /// Will not fit on this node whatever is removed.
    UnschedulableAndUnresolvable,
    Wait,
    Error,
}

/// A plugin result with its reasons (kube-scheduler style short phrases, e.g.
/// "Insufficient cpu", "node(s) didn't match Pod's node affinity/selector").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: Code,
    pub reasons: Vec<String>,
    pub plugin: &'static str,
}

impl Status {
    pub fn success() -> Status {
        Status { code: Code::Success, reasons: Vec::new(), plugin: "" }
    }
    pub fn unschedulable(plugin: &'static str, reason: impl Into<String>) -> Status {
        Status { code: Code::Unschedulable, reasons: vec![reason.into()], plugin }
    }
    pub fn unresolvable(plugin: &'static str, reason: impl Into<String>) -> Status {
        Status { code: Code::UnschedulableAndUnresolvable, reasons: vec![reason.into()], plugin }
    }
    pub fn error(plugin: &'static str, reason: impl Into<String>) -> Status {
        Status { code: Code::Error, reasons: vec![reason.into()], plugin }
    }
    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }
}

/// Why a pod fits no node: the count of nodes per rejection reason.
/// Displays as kube-scheduler does: `0/12 nodes are available: 4 node(s) had untolerated
/// taint {k: v}, 8 Insufficient cpu.` (reasons sorted by text).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FitError {
    pub num_nodes: usize,
    pub reasons: BTreeMap<String, usize>,
    /// Nodes rejected with `Unschedulable` (preemption could help there).
    pub preemptable_nodes: Vec<crate::model::NodeId>,
    /// Optional message before the node reasons (e.g. a PreFilter rejection).
    pub pre_message: Option<String>,
}

impl FitError {
    pub fn add(&mut self, reason: &str) {
        *self.reasons.entry(reason.to_string()).or_insert(0) += 1;
    }
}

impl fmt::Display for FitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0/{} nodes are available", self.num_nodes)?;
        if let Some(m) = &self.pre_message {
            write!(f, ": {m}")?;
        }
        if !self.reasons.is_empty() {
            let parts: Vec<String> = self.reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
            write!(f, ": {}", parts.join(", "))?;
        }
        write!(f, ".")
    }
}
