//! Failed PodGroup cycles reused within one [`Engine::schedule`] pass: a PodGroup whose
//! cycle failed, with nothing to preempt, fails the same way for the next PodGroup of the
//! same shape as long as nothing the cycle reads changed. The group counterpart of
//! `single_failures.rs` (kube-scheduler's opportunistic batching of identical pods, seed
//! 004, applied to whole groups and to failures; exact). A queue of identical gangs
//! waiting for room, retried after every completion, is the case it is for.
//!
//! A cycle's result is a function of:
//! - its PodGroup's scheduling inputs: policy and `minCount` in effect, topology key,
//!   resolved priority, disruption mode, the whole `spec` but `podGroupTemplateRef` (which
//!   the engine does not read), its annotations and labels (the hierarchical strategy's
//!   requests), its namespace, and its `creationTimestamp` only where Kueue's preemption
//!   policy `LowerOrNewerEqualPriority` compares it;
//! - its members' inputs, in cycle order ([`crate::podgroup::same_member_inputs`]: the fit
//!   signature, namespace, scheduler, `preemptionPolicy`, placing index, images; labels
//!   only while some placed pod has required anti-affinity);
//! - the engine's state: the snapshot, the nominated pods, the victims being evicted, PDBs,
//!   PodGroups and pods.
//!
//! Entries are kept only while the state is unchanged, as for single pods: the snapshot's
//! `state_id` and the eviction epoch are those the entry was computed at, no pod is
//! nominated anywhere, and every entry is dropped at the start of a pass (events change
//! PDBs, PodGroups and pods only between passes).
//!
//! Only cycles that cannot depend on who they are take part: a unit of one PodGroup, with
//! no member already bound or assumed, no failed node to replace, no PodGroup
//! ResourceClaims, members with a fit signature and no nominated node. Only failures that
//! do not name the group or a member are recorded (a message that names them is not the
//! next group's message). A reused failure is reported as the plain cycle reports it: the
//! same decision, and the metrics the cycle counted (its durations as measured then). The
//! tests in `group_failure_tests.rs` compare passes with and without the reuse.

use super::*;
use crate::framework::group::{GroupCycle, GroupDecision};
use crate::strategy::Strategy;

/// What a recorded metric call was.
#[derive(Debug, Clone, Copy)]
enum Value {
    Count(u64),
    Observe(f64),
    Gauge(f64),
}

/// A metric call made by a recorded cycle; its labels are a range of [`Calls::labels`].
#[derive(Debug, Clone)]
struct Call {
    name: &'static str,
    labels: std::ops::Range<usize>,
    value: Value,
}

/// The metric calls of a recorded cycle, in order. The label values are copied into one
/// string, so recording a call allocates nothing once the buffers have grown (a cycle
/// makes two calls per placement it evaluates, and most cycles are not kept).
#[derive(Debug, Clone, Default)]
pub(super) struct Calls {
    calls: Vec<Call>,
    /// Label names, with the range of their value in `text`.
    labels: Vec<(&'static str, std::ops::Range<usize>)>,
    text: String,
}

impl Calls {
    fn push(&mut self, name: &'static str, labels: &[(&'static str, &str)], value: Value) {
        let first = self.labels.len();
        for (key, v) in labels {
            let start = self.text.len();
            self.text.push_str(v);
            self.labels.push((key, start..self.text.len()));
        }
        self.calls.push(Call { name, labels: first..self.labels.len(), value });
    }

    fn clear(&mut self) {
        self.calls.clear();
        self.labels.clear();
        self.text.clear();
    }

    /// Makes the recorded calls again, in order, on `obs`.
    fn replay(&self, obs: &mut dyn Observer) {
        let mut labels: Vec<(&'static str, &str)> = Vec::new();
        for call in &self.calls {
            labels.clear();
            labels.extend(self.labels[call.labels.clone()].iter().map(|(k, r)| (*k, &self.text[r.clone()])));
            match call.value {
                Value::Count(v) => obs.count(call.name, &labels, v),
                Value::Observe(v) => obs.observe(call.name, &labels, v),
                Value::Gauge(v) => obs.gauge(call.name, &labels, v),
            }
        }
    }
}

/// Forwards every call to `inner` and keeps the metric calls, to repeat them on reuse.
pub(super) struct Recorder<'a> {
    inner: &'a mut dyn Observer,
    calls: Calls,
}

impl Observer for Recorder<'_> {
    fn count(&mut self, name: &'static str, labels: &[(&'static str, &str)], value: u64) {
        self.calls.push(name, labels, Value::Count(value));
        self.inner.count(name, labels, value);
    }
    fn observe(&mut self, name: &'static str, labels: &[(&'static str, &str)], value: f64) {
        self.calls.push(name, labels, Value::Observe(value));
        self.inner.observe(name, labels, value);
    }
    fn gauge(&mut self, name: &'static str, labels: &[(&'static str, &str)], value: f64) {
        self.calls.push(name, labels, Value::Gauge(value));
        self.inner.gauge(name, labels, value);
    }
    fn start_timer(&mut self) -> u64 {
        self.inner.start_timer()
    }
    fn elapsed_seconds(&mut self, token: u64) -> f64 {
        self.inner.elapsed_seconds(token)
    }
    fn records_gauges(&self) -> bool {
        self.inner.records_gauges()
    }
}

/// A failed cycle: the cycle, its decision and the metrics it counted.
#[derive(Debug)]
pub(super) struct Entry {
    cycle: GroupCycle,
    decision: GroupDecision,
    calls: Calls,
}

/// The group failures of the current pass (see the module documentation).
pub(super) type GroupFailures = super::single_failures::PassFailures<Entry>;

/// Whether two eligible cycles read the same inputs (see the module documentation).
fn same_inputs(a: &GroupCycle, b: &GroupCycle, labels: bool, times: bool) -> bool {
    let (ga, gb) = (&*a.group, &*b.group);
    // Every field named, so that a new one has to be classified.
    let crate::model::PodGroupInfo { pod_group: _, key, policy, topology_key, priority, disrupt_together } =
        ga;
    let placer_api::k8s::api::scheduling::v1alpha2::PodGroupSpec {
        disruption_mode,
        pod_group_template_ref: _, // not read by the engine
        priority: spec_priority,
        priority_class_name,
        resource_claims: _, // none in an eligible cycle
        scheduling_constraints,
        scheduling_policy,
    } = &ga.pod_group.spec;
    let (ma, mb) = (&ga.pod_group.metadata, &gb.pod_group.metadata);
    let sb = &gb.pod_group.spec;
    a.gang == b.gang
        && a.min_count == b.min_count
        && key.namespace == gb.key.namespace
        && *policy == gb.policy
        && *topology_key == gb.topology_key
        && *priority == gb.priority
        && *disrupt_together == gb.disrupt_together
        && *disruption_mode == sb.disruption_mode
        && *spec_priority == sb.priority
        && *priority_class_name == sb.priority_class_name
        && *scheduling_constraints == sb.scheduling_constraints
        && *scheduling_policy == sb.scheduling_policy
        && ma.annotations == mb.annotations
        && ma.labels == mb.labels
        && (!times || ma.creation_timestamp == mb.creation_timestamp)
        && a.pods.len() == b.pods.len()
        && a.pods.iter().zip(&b.pods).all(|(p, q)| crate::podgroup::same_member_inputs(p, q, labels))
}

/// Whether a message names the group or one of its members.
fn names_someone(cycle: &GroupCycle, message: &str) -> bool {
    message.contains(&*cycle.group.key.name) || cycle.pods.iter().any(|p| message.contains(&*p.key.name))
}

impl Engine {
    /// The state a failure of the unit `cycles` can be reused in, if it can (see the module
    /// documentation for what makes a unit eligible).
    pub(super) fn group_failure_state(&self, cycles: &[(GroupKey, GroupCycle)]) -> Option<(u64, u64)> {
        let [(key, cycle)] = cycles else { return None };
        if self.group_failures.off
            || !self.preempt.nominations.is_empty()
            || !cycle.scheduled.is_empty()
            || cycle.pods.is_empty()
            || self.lost_on.contains_key(key)
            || cycle.group.pod_group.spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty())
            || !cycle
                .pods
                .iter()
                .all(|p| p.nominated_node_name.is_none() && crate::podgroup::has_fit_signature(p))
        {
            return None;
        }
        Some((self.snapshot.state_id()?, self.preempt.eviction_epoch))
    }

    /// Whether group creation times are read (Kueue's `LowerOrNewerEqualPriority`).
    fn group_times_read(&self) -> bool {
        matches!(self.strategy, Strategy::Hierarchical(_))
            && self.config.within_cluster_queue
                == crate::config::WithinClusterQueue::LowerOrNewerEqualPriority
    }

    /// The decision of an earlier failed cycle of this pass that `cycle`'s would repeat,
    /// with the metrics it counted repeated on `obs`.
    pub(super) fn reused_group_failure(
        &mut self,
        state: (u64, u64),
        cycle: &GroupCycle,
        obs: &mut dyn Observer,
    ) -> Option<GroupDecision> {
        let labels = self.snapshot.num_pods_with_required_anti_affinity() > 0;
        let times = self.group_times_read();
        let entry = self
            .group_failures
            .entries_at(state)
            .iter()
            .find(|e| same_inputs(&e.cycle, cycle, labels, times))?;
        entry.calls.replay(obs);
        let decision = entry.decision.clone();
        self.group_failures.hits += 1;
        Some(decision)
    }

    /// Runs the strategy on `cycles` through a [`Recorder`] and records the result when it
    /// is a failure that can be reused in `state` (computed before the cycle).
    pub(super) fn decide_recorded(
        &mut self,
        state: (u64, u64),
        cycles: &[(GroupKey, GroupCycle)],
        obs: &mut dyn Observer,
    ) -> Vec<Option<GroupDecision>> {
        // The buffers of the last cycle not kept are used again.
        let mut recorder = Recorder { inner: obs, calls: std::mem::take(&mut self.spare_calls) };
        let decisions = self.decide(cycles, &mut recorder);
        let calls = recorder.calls;
        let ([(_, cycle)], [Some(decision)]) = (cycles, decisions.as_slice()) else {
            self.keep_spare(calls);
            return decisions;
        };
        let GroupOutcome::Unschedulable { message, pod_messages } = &decision.outcome else {
            self.keep_spare(calls);
            return decisions;
        };
        if decision.topology_assignment.is_some()
            || !decision.unhealthy_nodes.is_empty()
            || names_someone(cycle, message)
            || pod_messages
                .iter()
                .enumerate()
                // Members' messages are mostly one string: each distinct one is searched.
                .any(|(i, (_, m))| (i == 0 || *m != pod_messages[i - 1].1) && names_someone(cycle, m))
            || self.group_failure_state(cycles) != Some(state)
        {
            self.keep_spare(calls);
            return decisions;
        }
        self.group_failures.record(state, Entry { cycle: cycle.clone(), decision: decision.clone(), calls });
        decisions
    }

    /// Keeps the buffers of calls not recorded for the next recorded cycle.
    fn keep_spare(&mut self, mut calls: Calls) {
        calls.clear();
        self.spare_calls = calls;
    }
}
