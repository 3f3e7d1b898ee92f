//! Extension points and their results.
//!
//! Pod level: PreFilter / Filter / Score (+ NormalizeScore) plugins, registered by name with
//! a weight. Placement level (KEP-5732): PlacementGenerate, PlacementFeasible and
//! PlacementScore (+ NormalizePlacementScore). A new policy is a new plugin.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use smallvec::SmallVec;

use crate::config::SchedulerConfig;
use crate::model::{NodeId, PodInfo};
use crate::snapshot::{NodeState, Snapshot};

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

// ---------------------------------------------------------------------------------------
// Pod-level framework: PreFilter / Filter / PreScore / Score / NormalizeScore.
// ---------------------------------------------------------------------------------------

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

/// A Filter plugin (with its PreFilter).
pub trait FilterPlugin: Send + Sync {
    /// The plugin name as in kube-scheduler (e.g. `NodeResourcesFit`).
    fn name(&self) -> &'static str;
    /// Computes per-pod state from the snapshot (once per scheduling attempt). An `Err`
    /// rejects the pod on every node. A plugin may also narrow the candidate nodes with
    /// [`CycleState::restrict_nodes`] (kube's `PreFilterResult`).
    fn pre_filter<'a>(
        &self,
        _state: &mut CycleState<'a>,
        _snap: &'a Snapshot,
    ) -> Result<PreResult, Rejection> {
        Ok(PreResult::Run)
    }
    /// Whether the pod can run on `node`.
    fn filter(&self, state: &CycleState<'_>, snap: &Snapshot, node: &NodeState) -> FilterResult;
}

/// A Score plugin (with its PreScore and NormalizeScore).
pub trait ScorePlugin: Send + Sync {
    /// The plugin name as in kube-scheduler.
    fn name(&self) -> &'static str;
    /// Weight in kube-scheduler's default profile.
    fn default_weight(&self) -> i64;
    /// Computes per-pod scoring state over the feasible nodes.
    fn pre_score<'a>(
        &self,
        _state: &mut CycleState<'a>,
        _snap: &'a Snapshot,
        _feasible: &[NodeId],
    ) -> PreResult {
        PreResult::Run
    }
    /// Raw score of one feasible node (`node` is `snap.node(id)`).
    fn score(&self, state: &CycleState<'_>, snap: &Snapshot, id: NodeId, node: &NodeState) -> i64;
    /// Rescales the raw scores (`scores[i]` belongs to `feasible[i]`) to `0..=MAX_NODE_SCORE`.
    fn normalize(&self, _state: &CycleState<'_>, _feasible: &[NodeId], _scores: &mut [i64]) {}
    /// Whether the raw score of a node depends only on the pod and that node's state, and
    /// PreScore neither depends on the feasible set nor on pods elsewhere. Lets
    /// [`crate::schedule_one::place_copies`] rescore only the node that received a copy.
    fn node_local(&self) -> bool {
        false
    }
}

/// Candidate nodes narrowed by PreFilter plugins (kube's `PreFilterResult`).
#[derive(Debug, Clone, Default)]
pub struct NodeRestriction<'a> {
    /// Allowed node names, sorted and deduplicated.
    pub names: Vec<&'a str>,
    /// Plugins that narrowed the set, sorted.
    pub plugins: Vec<&'static str>,
}

impl NodeRestriction<'_> {
    /// Whether the node named `name` is a candidate.
    pub fn allows(&self, name: &str) -> bool {
        self.names.binary_search(&name).is_ok()
    }

    /// The reason given to nodes left out: `node(s) didn't satisfy plugin(s) [A B]`.
    pub fn reason(&self) -> String {
        format!("node(s) didn't satisfy plugin(s) [{}]", self.plugins.join(" "))
    }
}

/// Per-pod state of one scheduling attempt (kube's CycleState): the pod's parsed
/// scheduling constraints and what PreFilter / PreScore computed from the snapshot.
/// It borrows the pod and the snapshot, so it can never outlive a change of either.
pub struct CycleState<'a> {
    /// The pod being scheduled.
    pub pod: &'a PodInfo,
    /// The pod's scheduling constraints, parsed once.
    pub parsed: crate::plugins::ParsedPod<'a>,
    /// State computed by the built-in plugins.
    pub plugins: crate::plugins::PluginStates<'a>,
    /// Candidate nodes narrowed by PreFilter (`None`: every node is a candidate).
    pub restriction: Option<NodeRestriction<'a>>,
    /// Filter plugins (by index in the framework) whose PreFilter said Skip.
    pub(crate) skip_filters: u64,
    /// Score plugins (by index in the framework) whose PreScore said Skip.
    pub(crate) skip_scores: u64,
}

impl<'a> CycleState<'a> {
    /// Narrows the candidate nodes to `names` (intersected with earlier restrictions).
    pub fn restrict_nodes(&mut self, plugin: &'static str, mut names: Vec<&'a str>) {
        names.sort_unstable();
        names.dedup();
        match self.restriction.as_mut() {
            None => self.restriction = Some(NodeRestriction { names, plugins: vec![plugin] }),
            Some(r) => {
                r.names.retain(|n| names.binary_search(n).is_ok());
                r.plugins.push(plugin);
                r.plugins.sort_unstable();
                r.plugins.dedup();
            }
        }
    }
}

/// The configured pod-level plugins: filters in kube-scheduler's order, score plugins with
/// their weights.
pub struct Framework {
    pub(crate) filters: Vec<Box<dyn FilterPlugin>>,
    pub(crate) scores: Vec<(Box<dyn ScorePlugin>, i64)>,
    /// `percentageOfNodesToScore` for the pods of a PodGroup cycle searching a large node
    /// set (see [`crate::schedule_one::num_feasible_nodes_to_find`]).
    pub(crate) percentage_of_nodes_to_score: Option<u32>,
}

impl fmt::Debug for Framework {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Framework")
            .field("filters", &self.filters.iter().map(|p| p.name()).collect::<Vec<_>>())
            .field("scores", &self.scores.iter().map(|(p, w)| (p.name(), *w)).collect::<Vec<_>>())
            .finish()
    }
}

impl Framework {
    /// kube-scheduler's default profile for `config`: default filters, score plugins with
    /// weights from [`SchedulerConfig::weight`] (a weight of 0 disables a score plugin).
    pub fn new(config: &SchedulerConfig) -> Framework {
        let mut fw = Framework {
            filters: Vec::new(),
            scores: Vec::new(),
            percentage_of_nodes_to_score: config.percentage_of_nodes_to_score,
        };
        crate::plugins::register_defaults(&mut fw, config);
        fw
    }

    /// A framework without plugins (every node fits, every score is 0).
    pub fn empty() -> Framework {
        Framework { filters: Vec::new(), scores: Vec::new(), percentage_of_nodes_to_score: None }
    }

    /// Appends a filter plugin (filters run in registration order; at most 64).
    pub fn add_filter(&mut self, plugin: Box<dyn FilterPlugin>) {
        assert!(self.filters.len() < 64, "at most 64 filter plugins");
        self.filters.push(plugin);
    }

    /// Appends a score plugin with its weight; weight 0 leaves it out.
    pub fn add_score(&mut self, plugin: Box<dyn ScorePlugin>, weight: i64) {
        assert!(self.scores.len() < 64, "at most 64 score plugins");
        if weight != 0 {
            self.scores.push((plugin, weight));
        }
    }

    /// Names of the filter plugins, in order.
    pub fn filter_names(&self) -> Vec<&'static str> {
        self.filters.iter().map(|p| p.name()).collect()
    }

    /// Names and weights of the score plugins, in order.
    pub fn score_weights(&self) -> Vec<(&'static str, i64)> {
        self.scores.iter().map(|(p, w)| (p.name(), *w)).collect()
    }
}
