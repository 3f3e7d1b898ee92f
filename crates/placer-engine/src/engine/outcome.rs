//! The one place a PodGroup's [`GroupDecision`] (from either strategy, with or without
//! preemption) becomes decisions: the topology-assignment and unhealthy-nodes annotations, preemption carried
//! out, binds (prebound by `nominatedNodeName` when a placement was chosen), nominations,
//! FailedScheduling conditions and events, the `PodGroupScheduled` condition, and the
//! attempt metric.
//!
//! Before anything binds, the commit step runs the framework's Reserve, Permit and PreBind
//! plugins on the decided assignment (when the profile has any): every member is reserved
//! in cycle order with the earlier ones assumed; a failure unreserves every member
//! reserved so far and the group (a gang: all of it; a basic group: that member) fails;
//! Permit is asked once all are reserved; PreBind runs only when the whole group is
//! permitted.

use placer_api::annotations::{TOPOLOGY_ASSIGNMENT, UNHEALTHY_NODES};

use super::cycle::unhealthy_nodes_value;

use super::*;
use crate::framework::group::{unschedulable_all, GroupDecision, MSG_GROUP_UNSCHEDULABLE};
use crate::framework::BindWrites;
use crate::framework::{CycleData, PermitVerdict, Status};

/// What happens to one member after a group cycle.
enum Decided {
    Bind { node: NodeId, nominate: bool, writes: BindWrites },
    Nominated { node: NodeId },
    Fail { reason: &'static str, message: String },
}

impl Engine {
    /// Carries out one PodGroup's decision and returns the attempt's result label. `queued`
    /// holds the unit's members taken from the queue; the ones decided here are removed
    /// from it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn carry_out(
        &mut self,
        key: &GroupKey,
        cycle: &GroupCycle,
        decision: GroupDecision,
        queued: &mut FxHashMap<PodKey, QueuedPod>,
        now_ms: u64,
        obs: &mut dyn Observer,
        out: &mut Vec<Decision>,
    ) -> &'static str {
        let GroupDecision { outcome, topology_assignment, unhealthy_nodes } = decision;
        let (outcome, mut writes) = self.commit(cycle, outcome);
        // Kueue's `unhealthyNodes`: set while the group waits for replacements of failed
        // nodes, cleared once they are placed or the group is evicted.
        let unhealthy = match &outcome {
            GroupOutcome::Unschedulable { .. } | GroupOutcome::WaitingOnPreemption { .. } => {
                Some(unhealthy_nodes)
            }
            GroupOutcome::Scheduled { .. } | GroupOutcome::EvictForNodeFailure { .. } => Some(Vec::new()),
            GroupOutcome::Error { .. } => None,
        };
        if let Some(nodes) = unhealthy {
            let published = cycle.group.annotation(UNHEALTHY_NODES);
            let value = unhealthy_nodes_value(&nodes);
            if published != value.as_deref() {
                out.push(Decision::PodGroupAnnotation {
                    group: key.clone(),
                    key: UNHEALTHY_NODES.to_string(),
                    value,
                });
            }
        }
        let mut take = |i: usize| cycle.pods.get(i).and_then(|p| queued.remove(&p.key));
        let mut decided: Vec<(QueuedPod, Decided)> = Vec::new();
        let (result, status, reason, message) = match outcome {
            GroupOutcome::Scheduled { placement, assignments, failures } => {
                if let Some(value) = topology_assignment {
                    if cycle.group.annotation(TOPOLOGY_ASSIGNMENT) != Some(value.as_str()) {
                        out.push(Decision::PodGroupAnnotation {
                            group: key.clone(),
                            key: TOPOLOGY_ASSIGNMENT.to_string(),
                            value: Some(value),
                        });
                    }
                }
                // KEP-5732: members of a chosen placement are prebound by nominatedNodeName.
                let nominate = placement.is_some();
                // A claim shared by several members (a PodGroup claim) is written once per
                // consumer.
                let mut written: Vec<(ObjectKey, String)> = Vec::new();
                // A volume claim shared by members is bound (or provisioned) once.
                let mut volumes_written = Vec::new();
                for (i, node) in assignments {
                    let mut w = writes.remove(&i).unwrap_or_default();
                    w.volumes.retain(|v| {
                        let fresh = !volumes_written.contains(v);
                        volumes_written.push(v.clone());
                        fresh
                    });
                    w.claims.retain(|w| {
                        let id = (w.claim.clone(), w.consumer.uid.clone());
                        let fresh = w.allocation.is_some() || !written.contains(&id);
                        written.push(id);
                        fresh
                    });
                    if let Some(q) = take(i) {
                        decided.push((q, Decided::Bind { node, nominate, writes: w }));
                    }
                }
                for (i, message) in failures {
                    if let Some(q) = take(i) {
                        decided.push((q, Decided::Fail { reason: REASON_UNSCHEDULABLE, message }));
                    }
                }
                ("scheduled", true, REASON_SCHEDULED, String::new())
            }
            GroupOutcome::WaitingOnPreemption { nominations, victims, failures } => {
                let nodes = crate::preemption::nominated_nodes(&nominations);
                let own: Vec<PodKey> = cycle.pods.iter().map(|p| p.key.clone()).collect();
                let priority = self.cycle_priority(cycle);
                self.actuate_preemption(
                    &victims,
                    super::preempt::Preemptor::Group(key),
                    priority,
                    &nodes,
                    &own,
                    obs,
                    out,
                );
                for (i, node) in nominations {
                    if let Some(q) = take(i) {
                        decided.push((q, Decided::Nominated { node }));
                    }
                }
                for (i, message) in failures {
                    if let Some(q) = take(i) {
                        decided.push((q, Decided::Fail { reason: REASON_UNSCHEDULABLE, message }));
                    }
                }
                ("unschedulable", false, REASON_UNSCHEDULABLE, MSG_WAITING_ON_PREEMPTION.to_string())
            }
            GroupOutcome::Unschedulable { message, pod_messages } => {
                for (i, m) in pod_messages {
                    if let Some(q) = take(i) {
                        decided.push((q, Decided::Fail { reason: REASON_UNSCHEDULABLE, message: m }));
                    }
                }
                ("unschedulable", false, REASON_UNSCHEDULABLE, message)
            }
            GroupOutcome::EvictForNodeFailure { failed_nodes, message } => {
                let pods: Vec<(PodKey, Arc<str>)> = cycle
                    .scheduled
                    .iter()
                    .filter_map(|(k, _)| self.pods.get(k).map(|p| (k.clone(), p.uid.clone())))
                    .collect();
                for (k, uid) in &pods {
                    self.preempt.evicting.insert(k.clone(), uid.clone());
                }
                out.push(Decision::EvictForNodeFailure {
                    group: key.clone(),
                    pods: pods.into_iter().map(|(k, uid)| (k, uid.to_string())).collect(),
                    failed_nodes: failed_nodes.into(),
                    message: message.clone(),
                });
                let waiting =
                    format!("{MSG_GROUP_UNSCHEDULABLE}: the group is evicted to be placed again ({message})");
                for i in 0..cycle.pods.len() {
                    if let Some(q) = take(i) {
                        decided.push((
                            q,
                            Decided::Fail { reason: REASON_UNSCHEDULABLE, message: waiting.clone() },
                        ));
                    }
                }
                ("unschedulable", false, REASON_UNSCHEDULABLE, waiting)
            }
            GroupOutcome::Error { message } => {
                for i in 0..cycle.pods.len() {
                    if let Some(q) = take(i) {
                        let fail = Decided::Fail { reason: REASON_SCHEDULER_ERROR, message: message.clone() };
                        decided.push((q, fail));
                    }
                }
                ("error", false, REASON_SCHEDULER_ERROR, message)
            }
        };
        // A bound member adds up to three decisions (nomination, binding, event), and the
        // group's condition may follow: room for them once, not a reallocation of every
        // decision so far as a large gang grows (or for the one condition after them).
        out.reserve(3 * decided.len() + 1);
        for (q, d) in decided {
            match d {
                Decided::Bind { node, nominate, writes } => {
                    if nominate {
                        out.push(Decision::Nominate {
                            pod: q.pod.key.clone(),
                            node: Some(self.snapshot.node(node).name().to_string()),
                        });
                    }
                    self.bind(q, node, writes, out);
                }
                Decided::Nominated { node } => {
                    self.nominate(&q.pod.key, node, out);
                    let message = MSG_WAITING_ON_PREEMPTION.to_string();
                    self.fail(q, REASON_UNSCHEDULABLE, message, false, now_ms, out);
                }
                Decided::Fail { reason, message } => self.fail(q, reason, message, true, now_ms, out),
            }
        }
        self.set_condition(key, status, reason, message, out);
        obs.count(METRIC_PODGROUP_ATTEMPTS, &[("result", result)], 1);
        result
    }

    /// PreFilter and Filter again on the decided node (with the earlier members assumed),
    /// then Reserve: the pod's cycle data for Permit and PreBind.
    fn reserve_member(&self, pod: &PodInfo, node: NodeId) -> Result<CycleData, Status> {
        let fw = &self.fw;
        let filtered = crate::schedule_one::prepare(fw, &self.snapshot, pod).and_then(|mut state| {
            crate::schedule_one::filter_prepared(fw, &state, &self.snapshot, node)?;
            Ok(std::mem::take(&mut state.data))
        });
        match filtered {
            Err(r) => Err(r.to_status()),
            Ok(mut data) => fw.run_reserve(&mut data, &self.snapshot, pod, node).map(|()| data),
        }
    }

    /// The binding cycle of a pod scheduled on its own: Reserve, Permit, PreBind. Returns
    /// the claim writes PreBind decided, or why the pod was refused (everything reserved
    /// is unreserved).
    pub(super) fn commit_single(&mut self, pod: &PodInfo, node: NodeId) -> Result<BindWrites, String> {
        if !self.fw.binding_cycle_applies(pod) {
            return Ok(BindWrites::default());
        }
        let why = |s: Status| format!("{}: {}", s.plugin, s.reasons.join(", "));
        let mut data = self.reserve_member(pod, node).map_err(why)?;
        let refused = match self.fw.run_permit(&data, &self.snapshot, pod, node) {
            PermitVerdict::Allow => self.fw.run_pre_bind(&mut data, &self.snapshot, pod, node).err().map(why),
            PermitVerdict::Wait(w) | PermitVerdict::Reject(w) => Some(w),
        };
        match refused {
            None => Ok(data.take_writes()),
            Some(w) => {
                self.fw.run_unreserve(&mut data, &self.snapshot, pod, node);
                Err(format!("pod {} was refused by the binding cycle: {w}", pod.key))
            }
        }
    }

    /// The commit step (see the module docs): Reserve, Permit and PreBind on a scheduled
    /// outcome. Returns the outcome to carry out: unchanged when every plugin agrees (or
    /// the profile has none), otherwise with the refused members (a gang: all) failed;
    /// and the claim writes PreBind decided, by member index.
    fn commit(
        &mut self,
        cycle: &GroupCycle,
        outcome: GroupOutcome,
    ) -> (GroupOutcome, FxHashMap<usize, BindWrites>) {
        let mut writes = FxHashMap::default();
        if !cycle.pods.iter().any(|p| self.fw.binding_cycle_applies(p)) {
            return (outcome, writes);
        }
        let GroupOutcome::Scheduled { placement, assignments, mut failures } = outcome else {
            return (outcome, writes);
        };
        let mark = self.snapshot.checkpoint();
        // Reserve each member in order, the earlier ones assumed.
        let mut reserved: Vec<(usize, NodeId, CycleData)> = Vec::with_capacity(assignments.len());
        let mut refused: Option<(usize, String)> = None;
        for &(i, node) in &assignments {
            let pod = &cycle.pods[i];
            let result = self.reserve_member(pod, node);
            match result {
                Ok(data) => {
                    self.snapshot.assume(pod.clone(), node);
                    reserved.push((i, node, data));
                }
                Err(status) => {
                    let why = format!("{}: {}", status.plugin, status.reasons.join(", "));
                    if cycle.gang {
                        refused = Some((i, why));
                        break;
                    }
                    failures.push((i, why));
                }
            }
        }
        let fw = &self.fw;
        // Permit, once every member is reserved.
        if refused.is_none() {
            for (i, node, data) in &reserved {
                let verdict = fw.run_permit(data, &self.snapshot, &cycle.pods[*i], *node);
                match verdict {
                    PermitVerdict::Allow => {}
                    PermitVerdict::Wait(why) | PermitVerdict::Reject(why) => {
                        refused = Some((*i, why));
                        break;
                    }
                }
            }
        }
        // PreBind, only when the whole group is permitted.
        if refused.is_none() {
            for (i, node, data) in &mut reserved {
                if let Err(status) = fw.run_pre_bind(data, &self.snapshot, &cycle.pods[*i], *node) {
                    refused = Some((*i, format!("{}: {}", status.plugin, status.reasons.join(", "))));
                    break;
                }
            }
        }
        if let Some((i, why)) = refused {
            for (j, node, data) in reserved.iter_mut().rev() {
                fw.run_unreserve(data, &self.snapshot, &cycle.pods[*j], *node);
            }
            self.snapshot.rollback(mark);
            let pod = &cycle.pods[i].key;
            let message = format!("pod {pod} was refused by the binding cycle: {why}");
            return (unschedulable_all(cycle, message), writes);
        }
        self.snapshot.rollback(mark);
        let kept: Vec<(usize, NodeId)> = reserved.iter().map(|(i, n, _)| (*i, *n)).collect();
        if kept.is_empty() {
            return (unschedulable_all(cycle, "no member passed the binding cycle".to_string()), writes);
        }
        for (i, _, data) in &mut reserved {
            writes.insert(*i, data.take_writes());
        }
        (GroupOutcome::Scheduled { placement, assignments: kept, failures }, writes)
    }
}
