//! The engine side of preemption ([`crate::preemption`]): nominations, the hooks of the
//! single-pod and PodGroup cycles, and carrying a preemption out as decisions.
//!
//! * A pod (or group) that preempted is nominated (`status.nominatedNodeName`) to the node(s)
//!   it will take once the victims are gone. Until it binds, its room is reserved: pods of
//!   lower or equal priority are filtered as if the nominated pods were already placed
//!   (upstream's `RunFilterPluginsWithNominatedPods`). With `WorkloadAwarePreemption` on,
//!   a PodGroup member counts with its PodGroup's priority on both sides of that comparison.
//! * A pod with a nomination tries that node first (upstream's `evaluateNominatedNode`).
//! * Carrying out: `Evict` every victim (event `Preempted`, message `Preempted by pod ...` or
//!   `Preempted by podgroup <ns>/<name>`), `DisruptionTarget` (reason `PreemptionByScheduler`)
//!   on every PodGroup losing pods, and lower-priority pods nominated to the same nodes lose
//!   their nomination.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::framework::FitError;
use crate::podgroup::{GroupPreemption, PodPreemption, PreemptionPlan};
use crate::preemption::{
    assume_nominated, disrupted_groups, effective_priority, nominated_for, PodPreemptor, PreemptionEnv,
    WorkloadPreemptor, GATE_TOPOLOGY_AWARE_WORKLOAD_PREEMPTION, GATE_WORKLOAD_AWARE_PREEMPTION,
    METRIC_PREEMPTION_ATTEMPTS, METRIC_PREEMPTION_VICTIMS, MSG_CONSTRAINED_UNSUPPORTED,
};
use crate::snapshot::Mark;

/// What the engine remembers about preemptions in flight.
#[derive(Debug, Default)]
pub(super) struct PreemptionState {
    /// Pending pods nominated to a node (pod -> node name): the engine's own nominations
    /// as soon as it makes them, and those read from `status.nominatedNodeName`.
    pub(super) nominations: BTreeMap<PodKey, String>,
    /// Victims whose eviction was decided and whose deletion has not been observed yet.
    pub(super) evicting: BTreeSet<PodKey>,
}

impl PreemptionState {
    /// Keeps the nominations in step with a pod update.
    pub(super) fn observe_pod(&mut self, pod: &PodInfo) {
        if pod.node_name.is_some() || pod.terminal || pod.deleting {
            self.nominations.remove(&pod.key);
            if pod.terminal {
                self.evicting.remove(&pod.key);
            }
            return;
        }
        match &pod.nominated_node_name {
            Some(node) => {
                self.nominations.insert(pod.key.clone(), node.clone());
            }
            None => {
                self.nominations.remove(&pod.key);
            }
        }
    }

    /// Forgets a deleted pod.
    pub(super) fn forget(&mut self, key: &PodKey) {
        self.nominations.remove(key);
        self.evicting.remove(key);
    }
}

impl Engine {
    fn wap_enabled(&self) -> bool {
        self.gate(GATE_WORKLOAD_AWARE_PREEMPTION)
    }

    /// The priority a pod's nomination is weighed with (see the module docs).
    fn nomination_priority(&self, pod: &PodInfo) -> i32 {
        if self.wap_enabled() {
            effective_priority(&self.groups, pod)
        } else {
            pod.priority
        }
    }

    /// Counts the nominated pods that pods of priority `priority` must respect as placed
    /// (`skip`: the pods being scheduled). Returns the mark to roll back to.
    fn assume_nominated_pods(&mut self, priority: i32, skip: impl Fn(&PodKey) -> bool) -> Mark {
        let mark = self.snapshot.checkpoint();
        if self.preempt.nominations.is_empty() {
            return mark;
        }
        let wap = self.wap_enabled();
        let groups = &self.groups;
        let prio = |p: &PodInfo| if wap { effective_priority(groups, p) } else { p.priority };
        let nominated = nominated_for(&self.preempt.nominations, &self.pods, priority, prio, skip);
        assume_nominated(&mut self.snapshot, &nominated);
        mark
    }

    /// Records a nomination and emits it.
    pub(super) fn nominate(&mut self, pod: &PodKey, node: NodeId, out: &mut Vec<Decision>) {
        let name = self.snapshot.node(node).name().to_string();
        self.preempt.nominations.insert(pod.clone(), name.clone());
        out.push(Decision::Nominate { pod: pod.clone(), node: Some(name) });
    }

    /// Whether the engine holds a nomination for `pod` (its own or read from the store).
    pub(super) fn forget_nomination(&mut self, pod: &PodKey) -> bool {
        self.preempt.nominations.remove(pod).is_some()
    }

    /// The single-pod cycle's filtering and PostFilter: the nominated node first, then every
    /// node; on failure, per-pod preemption. `Ok(node)`: bind there. `Err((fit, plan))`: the
    /// pod does not fit; with a plan, evict its victims and nominate it.
    pub(super) fn find_node_for_single(
        &mut self,
        pod: &PodInfo,
        obs: &mut dyn Observer,
    ) -> Result<NodeId, (FitError, Option<PreemptionPlan>)> {
        let priority = self.nomination_priority(pod);
        let mark = self.assume_nominated_pods(priority, |k| *k == pod.key);
        let nominated = self
            .preempt
            .nominations
            .get(&pod.key)
            .cloned()
            .or_else(|| pod.nominated_node_name.clone())
            .and_then(|n| self.snapshot.node_id(&n));
        if let Some(node) = nominated {
            if crate::schedule_one::filter_node(&self.fw, &self.snapshot, pod, node).is_success() {
                self.snapshot.rollback(mark);
                return Ok(node);
            }
        }
        let result = crate::schedule_one::find_node(&self.fw, &self.snapshot, pod, self.snapshot.node_ids());
        let result = match result {
            Ok(node) => Ok(node),
            Err(mut fit) => {
                let env = PreemptionEnv {
                    algo: &self.fw,
                    groups: &self.groups,
                    pdbs: &self.pdbs,
                    pods: &self.pods,
                    evicting: &self.preempt.evicting,
                };
                let mut preemptor = PodPreemptor::new(env);
                let nodes = self.snapshot.node_ids().to_vec();
                let plan = match preemptor.preempt_pod(&mut self.snapshot, pod, &nodes, &fit) {
                    Ok(plan) => Some(plan),
                    Err(message) => {
                        fit.post_message = Some(message);
                        None
                    }
                };
                obs.count(METRIC_PREEMPTION_ATTEMPTS, &[("kind", "pod")], preemptor.attempts);
                Err((fit, plan))
            }
        };
        self.snapshot.rollback(mark);
        result
    }

    /// Runs the PodGroup cycle with the preemption hooks the gates call for, nominated pods
    /// counted. `snapshot` is left as found.
    pub(super) fn run_group_cycle(&mut self, cycle: &GroupCycle, obs: &mut dyn Observer) -> GroupOutcome {
        let wap = self.wap_enabled();
        let constrained = cycle.group.topology_key.is_some();
        let group_preemption = wap && (!constrained || self.gate(GATE_TOPOLOGY_AWARE_WORKLOAD_PREEMPTION));
        let priority = cycle.pods.iter().map(|p| self.nomination_priority(p)).min().unwrap_or(0);
        // The group's own members (nominated by an earlier cycle) are what is scheduled.
        let own: BTreeSet<PodKey> =
            self.groups.get(&cycle.group.key).map(|e| e.members.clone()).unwrap_or_default();
        let mark = self.assume_nominated_pods(priority, |k| own.contains(k));
        let env = PreemptionEnv {
            algo: &self.fw,
            groups: &self.groups,
            pdbs: &self.pdbs,
            pods: &self.pods,
            evicting: &self.preempt.evicting,
        };
        let mut per_pod = PodPreemptor::new(env);
        let mut workload = WorkloadPreemptor::new(env, &self.placements.feasible);
        let hooks = GroupHooks {
            // SEMANTICS §12 (inferred): with workload-aware preemption on, members are not
            // rescued by per-pod preemption judged on pod priority.
            pod_preemption: (!wap).then_some(&mut per_pod as &mut dyn PodPreemption),
            group_preemption: group_preemption.then_some(&mut workload as &mut dyn GroupPreemption),
        };
        let ctx = GroupContext { placements: &self.placements, algo: &self.fw, config: &self.config };
        let mut outcome = schedule_pod_group(&ctx, &mut self.snapshot, cycle, hooks, obs);
        self.snapshot.rollback(mark);
        if per_pod.attempts > 0 {
            obs.count(METRIC_PREEMPTION_ATTEMPTS, &[("kind", "pod")], per_pod.attempts);
        }
        if workload.attempts > 0 {
            obs.count(METRIC_PREEMPTION_ATTEMPTS, &[("kind", "podgroup")], workload.attempts);
        }
        if wap && constrained && !group_preemption {
            // v1.36 (SEMANTICS §12, §13): the status of the refused preemption is appended.
            if let GroupOutcome::Unschedulable { message, .. } = &mut outcome {
                message.push_str("; ");
                message.push_str(MSG_CONSTRAINED_UNSUPPORTED);
            }
        }
        outcome
    }

    /// The lowest nomination priority among a cycle's pods (what the group's nominations
    /// outrank).
    pub(super) fn cycle_priority(&self, cycle: &GroupCycle) -> i32 {
        if self.wap_enabled() {
            crate::preemption::preemptor_priority(&cycle.group)
        } else {
            cycle.pods.iter().map(|p| p.priority).min().unwrap_or(0)
        }
    }

    /// Carries a preemption out: evictions, `DisruptionTarget` on the PodGroups that lose
    /// pods, lower-priority nominations on `nodes` cleared (except `own` pods), metrics.
    /// `preemptor` names it in messages (`pod ns/name`, `podgroup ns/name`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn actuate_preemption(
        &mut self,
        victims: &[Arc<PodInfo>],
        preemptor: &str,
        kind: &'static str,
        priority: i32,
        nodes: &[NodeId],
        own: &[PodKey],
        obs: &mut dyn Observer,
        out: &mut Vec<Decision>,
    ) {
        let on_node = match nodes {
            [one] if kind == "pod" => format!(" on node {}", self.snapshot.node(*one).name()),
            _ => String::new(),
        };
        for v in victims {
            self.preempt.evicting.insert(v.key.clone());
            out.push(Decision::Evict {
                pod: v.key.clone(),
                uid: v.uid.clone(),
                message: format!("Preempted by {preemptor}{on_node}"),
            });
        }
        for (group, n) in disrupted_groups(&self.groups, victims) {
            out.push(Decision::PodGroupDisruptionTarget {
                group,
                message: format!(
                    "preempting to accommodate a higher priority {preemptor}: {n} pod(s) evicted"
                ),
            });
        }
        let names: BTreeSet<String> =
            nodes.iter().map(|&n| self.snapshot.node(n).name().to_string()).collect();
        let lower: Vec<PodKey> = self
            .preempt
            .nominations
            .iter()
            .filter(|(k, node)| names.contains(*node) && !own.contains(k))
            .filter(|(k, _)| self.pods.get(*k).is_some_and(|p| self.nomination_priority(p) < priority))
            .map(|(k, _)| k.clone())
            .collect();
        for key in lower {
            self.preempt.nominations.remove(&key);
            out.push(Decision::Nominate { pod: key, node: None });
        }
        obs.observe(METRIC_PREEMPTION_VICTIMS, &[("kind", kind)], victims.len() as f64);
    }
}
