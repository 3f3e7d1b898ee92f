//! What plugins answer: codes, statuses, filter rejections and the FitError of a pod that
//! fits no node.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use smallvec::SmallVec;

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
/// Displays as kube-scheduler's `FitError` does: `0/12 nodes are available: 4 node(s) had
/// untolerated taint {k: v}, 8 Insufficient cpu.` The `"<count> <reason>"` parts are sorted
/// as strings; a PreFilter rejection replaces them with its message, and a PostFilter
/// (preemption) message follows: `... 3 Insufficient cpu. preemption: 0/3 nodes are
/// available: 3 No preemption victims found for incoming pod.`
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FitError {
    pub num_nodes: usize,
    pub reasons: BTreeMap<String, usize>,
    /// Nodes rejected with `Unschedulable` (preemption could help there), in the order
    /// they were examined.
    pub preemptable_nodes: Vec<crate::model::NodeId>,
    /// Message of a PreFilter rejection: it stands for the per-node reasons.
    pub pre_message: Option<String>,
    /// Message of the PostFilter (preemption) attempt, appended after the reasons.
    pub post_message: Option<String>,
}

impl FitError {
    /// Counts one node rejected for `reason`.
    pub fn add(&mut self, reason: &str) {
        self.add_n(reason, 1);
    }

    /// Counts `n` nodes rejected for `reason`.
    pub fn add_n(&mut self, reason: &str, n: usize) {
        match self.reasons.get_mut(reason) {
            Some(c) => *c += n,
            None => {
                self.reasons.insert(reason.to_string(), n);
            }
        }
    }

    /// The `"<count> <reason>"` parts, sorted as kube sorts them (as strings).
    pub fn histogram(&self) -> Vec<String> {
        let mut parts: Vec<String> = self.reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
        parts.sort();
        parts
    }
}

impl fmt::Display for FitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0/{} nodes are available:", self.num_nodes)?;
        match &self.pre_message {
            Some(m) => write!(f, " {m}.")?,
            None => write!(f, " {}.", self.histogram().join(", "))?,
        }
        if let Some(m) = &self.post_message {
            write!(f, " {m}.")?;
        }
        Ok(())
    }
}

impl std::error::Error for FitError {}

/// Highest score a score plugin gives a node after normalization (kube's `MaxNodeScore`).
pub const MAX_NODE_SCORE: i64 = 100;

/// A reason phrase; static phrases cost no allocation on the hot path.
pub type Reason = Cow<'static, str>;

/// Why one filter plugin rejected a node. Cheap to build: reasons are usually static.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub code: Code,
    pub reasons: SmallVec<[Reason; 2]>,
    pub plugin: &'static str,
}

impl Rejection {
    /// `Unschedulable`: removing pods from the node might help.
    pub fn unschedulable(plugin: &'static str, reason: impl Into<Reason>) -> Rejection {
        Rejection { code: Code::Unschedulable, reasons: smallvec::smallvec![reason.into()], plugin }
    }
    /// `UnschedulableAndUnresolvable`: nothing removed from the node helps.
    pub fn unresolvable(plugin: &'static str, reason: impl Into<Reason>) -> Rejection {
        Rejection {
            code: Code::UnschedulableAndUnresolvable,
            reasons: smallvec::smallvec![reason.into()],
            plugin,
        }
    }
    /// An internal error (e.g. an invalid label selector in the pod).
    pub fn error(plugin: &'static str, reason: impl Into<Reason>) -> Rejection {
        Rejection { code: Code::Error, reasons: smallvec::smallvec![reason.into()], plugin }
    }
    /// The equivalent [`Status`].
    pub fn to_status(&self) -> Status {
        Status {
            code: self.code,
            reasons: self.reasons.iter().map(|r| r.to_string()).collect(),
            plugin: self.plugin,
        }
    }
}

/// Result of a filter plugin on one node.
pub type FilterResult = Result<(), Rejection>;

/// What PreFilter / PreScore decided for this pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreResult {
    /// Run the plugin's Filter (or Score) on every node.
    Run,
    /// The plugin has nothing to check for this pod: its Filter (Score) is skipped.
    Skip,
}
