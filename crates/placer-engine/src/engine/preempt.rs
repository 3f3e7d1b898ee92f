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
use crate::metrics::{METRIC_PREEMPTION_ATTEMPTS, METRIC_PREEMPTION_VICTIMS};
use crate::podgroup::{GroupPreemption, PodPreemption, PreemptionPlan};
use crate::preemption::{
    assume_nominated, disrupted_groups, effective_priority, nominated_for, PodPreemptor, PreemptionEnv,
    WorkloadPreemptor, MSG_CONSTRAINED_UNSUPPORTED,
};
use crate::snapshot::Mark;

/// Who preempts, as the victims' `Preempted` events name it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Preemptor<'a> {
    /// A single pod (per-pod preemption).
    Pod(&'a PodInfo),
    /// A PodGroup (its cycle; workload-aware or per-pod preemption of its members).
    Group(&'a GroupKey),
}

impl Preemptor<'_> {
    /// `pod` or `podgroup` (the metrics label).
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Preemptor::Pod(_) => "pod",
            Preemptor::Group(_) => "podgroup",
        }
    }

    /// The victim's `Preempted` event: kube-scheduler's `Preempted by pod <preemptor uid>
    /// on node <node>` (its preemption executor; `on` is the candidate node) for a pod;
    /// `Preempted by podgroup <ns>/<name>` for a PodGroup (the prefix upstream's
    /// workload-aware preemption tests look for).
    fn event_message(&self, on: Option<&str>) -> String {
        match self {
            Preemptor::Pod(p) => {
                let who = if p.uid.is_empty() { p.key.to_string() } else { p.uid.to_string() };
                match on {
                    Some(node) => format!("Preempted by pod {who} on node {node}"),
                    None => format!("Preempted by pod {who}"),
                }
            }
            Preemptor::Group(g) => format!("Preempted by podgroup {g}"),
        }
    }
}

/// `pod ns/name` or `podgroup ns/name`: the preemptor in Placer's own messages.
impl std::fmt::Display for Preemptor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Preemptor::Pod(p) => write!(f, "pod {}", p.key),
            Preemptor::Group(g) => write!(f, "podgroup {g}"),
        }
    }
}

/// What the engine remembers about preemptions in flight.
#[derive(Debug, Default)]
pub(super) struct PreemptionState {
    /// Pending pods nominated to a node (pod -> node name): the engine's own nominations
    /// as soon as it makes them, and those read from `status.nominatedNodeName`.
    pub(super) nominations: BTreeMap<PodKey, String>,
    /// Victims whose eviction was decided and whose deletion has not been observed yet
    /// (pod -> uid of the victim).
    pub(super) evicting: BTreeMap<PodKey, Arc<str>>,
    /// Bumped when an eviction is decided: failures reused within a pass
    /// (`single_failures.rs`, `group_failures.rs`) hold only for the epoch they were computed in.
    pub(super) eviction_epoch: u64,
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

/// How a standalone pod's attempt went.
pub(super) enum SingleAttempt {
    /// Bind it there.
    Fits(NodeId),
    /// It fits nowhere now; evicting `plan.victims` makes room on `plan.node`.
    Preempts { fit: FitError, plan: PreemptionPlan },
    /// It fits nowhere, and preemption does not help (the FitError says why).
    Unschedulable(FitError),
}

impl Engine {
    fn wap_enabled(&self) -> bool {
        self.gate(Gate::WorkloadAwarePreemption)
    }

    /// The priority a pod's nomination is weighed with (see the module docs).
    pub(super) fn nomination_priority(&self, pod: &PodInfo) -> i32 {
        if self.wap_enabled() {
            effective_priority(&self.groups, pod)
        } else {
            pod.priority
        }
    }

    /// Counts the nominated pods that pods of priority `priority` must respect as placed
    /// (`skip`: the pods being scheduled). Returns the mark to roll back to.
    pub(super) fn assume_nominated_pods(&mut self, priority: i32, skip: impl Fn(&PodKey) -> bool) -> Mark {
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
    /// node; on failure, per-pod preemption.
    pub(super) fn find_node_for_single(
        &mut self,
        pod: &Arc<PodInfo>,
        obs: &mut dyn Observer,
    ) -> SingleAttempt {
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
                return SingleAttempt::Fits(node);
            }
        }
        let nodes = self.snapshot.node_ids();
        let to_find = crate::schedule_one::num_feasible_nodes_to_find(
            self.config.percentage_of_nodes_to_score,
            nodes.len(),
        );
        // The previous pod's per-node results are reused where exact (same signature,
        // nodes unchanged since: `schedule_one::SingleReuse`); the same result as
        // `find_node_sampled`.
        let (result, examined) = crate::schedule_one::find_node_sampled_reusing(
            &self.fw,
            &self.snapshot,
            pod,
            nodes,
            self.next_start_node_index,
            to_find,
            &mut self.single_reuse,
        );
        if !nodes.is_empty() {
            self.next_start_node_index = (self.next_start_node_index + examined) % nodes.len();
        }
        let result = match result {
            Ok(node) => SingleAttempt::Fits(node),
            Err(mut fit) => {
                let env = PreemptionEnv {
                    algo: &self.fw,
                    groups: &self.groups,
                    pdbs: &self.pdbs,
                    pods: &self.pods,
                    evicting: &self.preempt.evicting,
                };
                let mut preemptor = PodPreemptor::new(env).with_candidates(self.config.preemption_candidates);
                let nodes = self.snapshot.node_ids().to_vec();
                let attempt = match preemptor.preempt_pod(&mut self.snapshot, pod, &nodes, &fit) {
                    Ok(plan) => SingleAttempt::Preempts { fit, plan },
                    Err(message) => {
                        // The DynamicResources PostFilter runs before DefaultPreemption.
                        let dra = self
                            .fw
                            .filter_names()
                            .contains(&crate::plugins::dynamic_resources::NAME)
                            .then(|| {
                                crate::plugins::dynamic_resources::post_filter_message(&self.snapshot, pod)
                            })
                            .flatten();
                        fit.post_message = Some(match dra {
                            Some(m) => format!("{m}, {message}"),
                            None => message,
                        });
                        SingleAttempt::Unschedulable(fit)
                    }
                };
                obs.count(METRIC_PREEMPTION_ATTEMPTS, &[("kind", "pod")], preemptor.attempts);
                attempt
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
        let group_preemption = wap && (!constrained || self.gate(Gate::TopologyAwareWorkloadPreemption));
        let priority = cycle.pods.iter().map(|p| self.nomination_priority(p)).min().unwrap_or(0);
        // The group's own members (nominated by an earlier cycle) are what is scheduled.
        let own: rustc_hash::FxHashSet<PodKey> =
            self.groups.get(&cycle.group.key).map(|e| e.members.clone()).unwrap_or_default();
        let mark = self.assume_nominated_pods(priority, |k| own.contains(k));
        let env = PreemptionEnv {
            algo: &self.fw,
            groups: &self.groups,
            pdbs: &self.pdbs,
            pods: &self.pods,
            evicting: &self.preempt.evicting,
        };
        let mut per_pod = PodPreemptor::new(env).with_candidates(self.config.preemption_candidates);
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
    #[allow(clippy::too_many_arguments)]
    pub(super) fn actuate_preemption(
        &mut self,
        victims: &[Arc<PodInfo>],
        preemptor: Preemptor<'_>,
        priority: i32,
        nodes: &[NodeId],
        own: &[PodKey],
        obs: &mut dyn Observer,
        out: &mut Vec<Decision>,
    ) {
        // Victims being evicted change what later preemptions see.
        self.preempt.eviction_epoch += 1;
        let kind = preemptor.kind();
        let on = match nodes {
            [one] => Some(self.snapshot.node(*one).name().to_string()),
            _ => None,
        };
        let message = preemptor.event_message(on.as_deref());
        for v in victims {
            self.preempt.evicting.insert(v.key.clone(), v.uid.clone());
            out.push(Decision::Evict {
                pod: v.key.clone(),
                uid: v.uid.to_string(),
                message: message.clone(),
            });
        }
        let preemptor = preemptor.to_string();
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

#[cfg(test)]
mod tests {
    //! Preemption through the engine facade: events in, decisions out, decisions carried
    //! out as a store would (bindings confirmed, nominations written, victims deleted).

    use super::*;
    use crate::observer::NoopObserver;
    use placer_api::gates::FeatureGates;
    use placer_api::k8s::api::scheduling::v1::PriorityClass;
    use serde_json::{json, Value};

    fn node(name: &str, cpu: &str, labels: Value) -> ClusterEvent {
        let n: Node = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": cpu, "pods": "32"}}
        }))
        .expect("node");
        ClusterEvent::NodeUpserted(Arc::new(n))
    }

    /// A pod; `extra` is merged into its spec (`priority`, `nodeName`, `schedulingGroup`...).
    fn pod(name: &str, cpu: &str, extra: Value) -> ClusterEvent {
        let mut spec =
            json!({"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]});
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                s.insert(k.clone(), v.clone());
            }
        }
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": spec
        }))
        .expect("pod");
        ClusterEvent::PodUpserted(Arc::new(p))
    }

    fn pod_group(name: &str, spec: Value) -> ClusterEvent {
        let pg: PodGroup =
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec}))
                .expect("pod group");
        ClusterEvent::PodGroupUpserted(Arc::new(pg))
    }

    fn priority_class(name: &str, value: i32, global_default: bool) -> ClusterEvent {
        let pc: PriorityClass = serde_json::from_value(
            json!({"metadata": {"name": name}, "value": value, "globalDefault": global_default}),
        )
        .expect("priority class");
        ClusterEvent::PriorityClassUpserted(Arc::new(pc))
    }

    fn engine(gates: &[(Gate, bool)]) -> Engine {
        Engine::new(SchedulerConfig {
            gates: FeatureGates::with(gates.iter().copied()),
            pod_initial_backoff_ms: 0,
            pod_max_backoff_ms: 0,
            ..SchedulerConfig::default()
        })
    }

    /// One scheduling round, its decisions carried out as the store would.
    fn round(e: &mut Engine) -> Vec<Decision> {
        let decisions = e.schedule(0, &mut NoopObserver);
        for d in &decisions {
            match d {
                Decision::Bind { pod, node, .. } => {
                    let mut p = (**e.pod_object(pod).expect("pod")).clone();
                    p.spec.get_or_insert_with(Default::default).node_name = Some(node.clone());
                    e.apply(ClusterEvent::PodUpserted(Arc::new(p)), 0);
                }
                Decision::Nominate { pod, node } => {
                    if let Some(current) = e.pod_object(pod) {
                        let mut p = (**current).clone();
                        p.status.get_or_insert_with(Default::default).nominated_node_name = node.clone();
                        e.apply(ClusterEvent::PodUpserted(Arc::new(p)), 0);
                    }
                }
                Decision::Evict { pod, .. } => e.apply(ClusterEvent::PodDeleted(pod.clone()), 0),
                _ => {}
            }
        }
        decisions
    }

    fn evicted(d: &[Decision]) -> Vec<String> {
        d.iter()
            .filter_map(|d| match d {
                Decision::Evict { pod, .. } => Some(pod.name.to_string()),
                _ => None,
            })
            .collect()
    }

    fn bound(d: &[Decision]) -> Vec<(String, String)> {
        d.iter()
            .filter_map(|d| match d {
                Decision::Bind { pod, node, .. } => Some((pod.name.to_string(), node.clone())),
                _ => None,
            })
            .collect()
    }

    fn nominated(d: &[Decision]) -> Vec<(String, Option<String>)> {
        d.iter()
            .filter_map(|d| match d {
                Decision::Nominate { pod, node } => Some((pod.name.to_string(), node.clone())),
                _ => None,
            })
            .collect()
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn a_standalone_pod_evicts_nominates_and_binds_once_the_victim_is_gone() {
        let mut e = engine(&[]);
        for ev in [node("n1", "2", json!({})), pod("low", "2", json!({"priority": 1, "nodeName": "n1"}))] {
            e.apply(ev, 0);
        }
        e.apply(pod("high", "2", json!({"priority": 100})), 0);
        let d = round(&mut e);
        assert_eq!(evicted(&d), s(&["low"]));
        assert_eq!(nominated(&d), [("high".to_string(), Some("n1".to_string()))]);
        assert!(d.iter().any(|d| matches!(d, Decision::Evict { message, .. }
            if message == "Preempted by pod uid-high on node n1")));
        let d = round(&mut e);
        assert_eq!(bound(&d), [("high".to_string(), "n1".to_string())]);
    }

    #[test]
    fn the_nominated_room_is_kept_from_lower_priority_pods_only() {
        let mut e = engine(&[]);
        for ev in [node("n1", "2", json!({})), pod("low", "2", json!({"priority": 1, "nodeName": "n1"}))] {
            e.apply(ev, 0);
        }
        e.apply(pod("high", "2", json!({"priority": 100})), 0);
        // Evictions decided but not observed yet: the victim still holds the node.
        let d = e.schedule(0, &mut NoopObserver);
        assert_eq!(evicted(&d), s(&["low"]));
        e.apply(ClusterEvent::PodDeleted(PodKey::new("default", "low")), 0);
        // Before `high` retries, a pod of lower priority arrives: the room is not for it.
        e.apply(pod("sneaky", "1", json!({"priority": 50})), 0);
        let d = round(&mut e);
        assert_eq!(bound(&d), [("high".to_string(), "n1".to_string())]);
        assert!(d
            .iter()
            .any(|d| matches!(d, Decision::PodUnschedulable { pod, .. } if &*pod.name == "sneaky")));
    }

    #[test]
    fn a_pod_that_never_preempts_just_fails() {
        let mut e = engine(&[]);
        for ev in [node("n1", "1", json!({})), pod("low", "1", json!({"priority": 1, "nodeName": "n1"}))] {
            e.apply(ev, 0);
        }
        e.apply(pod("polite", "1", json!({"priority": 100, "preemptionPolicy": "Never"})), 0);
        let d = round(&mut e);
        assert!(evicted(&d).is_empty());
        assert!(d.iter().any(|d| matches!(d, Decision::PodUnschedulable { message, .. }
            if message == "0/1 nodes are available: 1 Insufficient cpu. not eligible due to preemptionPolicy=Never.")));
    }

    #[test]
    fn workload_aware_preemption_evicts_nominates_marks_and_schedules_later() {
        let mut e = engine(&[(Gate::WorkloadAwarePreemption, true)]);
        e.apply(node("n1", "2", json!({})), 0);
        e.apply(
            pod_group(
                "victim",
                json!({"schedulingPolicy": {"basic": {}}, "priority": 1, "disruptionMode": "PodGroup"}),
            ),
            0,
        );
        for n in ["v1", "v2"] {
            e.apply(
                pod(
                    n,
                    "1",
                    json!({"priority": 1, "nodeName": "n1", "schedulingGroup": {"podGroupName": "victim"}}),
                ),
                0,
            );
        }
        e.apply(pod_group("pg", json!({"schedulingPolicy": {"gang": {"minCount": 1}}, "priority": 100})), 0);
        e.apply(pod("p", "1", json!({"priority": 1, "schedulingGroup": {"podGroupName": "pg"}})), 0);
        let d = round(&mut e);
        assert_eq!(evicted(&d), s(&["v1", "v2"]), "the whole disruptionMode PodGroup unit goes");
        assert!(d.iter().any(
            |d| matches!(d, Decision::PodGroupDisruptionTarget { group, .. } if &*group.name == "victim")
        ));
        assert!(d.iter().any(
            |d| matches!(d, Decision::Evict { message, .. } if message == "Preempted by podgroup default/pg")
        ));
        assert_eq!(nominated(&d), [("p".to_string(), Some("n1".to_string()))]);
        assert!(d.iter().any(|d| matches!(d, Decision::PodGroupCondition { status: false, message, .. }
            if message == MSG_WAITING_ON_PREEMPTION)));
        let d = round(&mut e);
        assert_eq!(bound(&d), [("p".to_string(), "n1".to_string())]);
    }

    #[test]
    fn v1_36_refuses_workload_aware_preemption_for_constrained_groups() {
        let mut e = engine(&[(Gate::WorkloadAwarePreemption, true)]);
        e.apply(node("n1", "1", json!({"rack": "r1"})), 0);
        e.apply(pod("low", "1", json!({"priority": 1, "nodeName": "n1"})), 0);
        e.apply(
            pod_group(
                "pg",
                json!({"schedulingPolicy": {"gang": {"minCount": 1}}, "priority": 100,
                       "schedulingConstraints": {"topology": [{"key": "rack"}]}}),
            ),
            0,
        );
        e.apply(pod("p", "1", json!({"priority": 100, "schedulingGroup": {"podGroupName": "pg"}})), 0);
        let d = round(&mut e);
        assert!(evicted(&d).is_empty());
        assert!(d.iter().any(|d| matches!(d, Decision::PodGroupCondition { status: false, message, .. }
            if message.ends_with(MSG_CONSTRAINED_UNSUPPORTED))));
    }

    #[test]
    fn with_the_placer_gate_constrained_groups_preempt_inside_one_domain() {
        let mut e =
            engine(&[(Gate::WorkloadAwarePreemption, true), (Gate::TopologyAwareWorkloadPreemption, true)]);
        for ev in [
            node("a", "1", json!({"rack": "r1"})),
            node("b", "1", json!({"rack": "r1"})),
            node("c", "2", json!({"rack": "r2"})),
            pod("r1-low", "1", json!({"priority": 1, "nodeName": "a"})),
            pod("r2-mid", "2", json!({"priority": 50, "nodeName": "c"})),
        ] {
            e.apply(ev, 0);
        }
        e.apply(
            pod_group(
                "pg",
                json!({"schedulingPolicy": {"gang": {"minCount": 2}}, "priority": 100,
                       "schedulingConstraints": {"topology": [{"key": "rack"}]}}),
            ),
            0,
        );
        for n in ["p1", "p2"] {
            e.apply(pod(n, "1", json!({"priority": 100, "schedulingGroup": {"podGroupName": "pg"}})), 0);
        }
        let d = round(&mut e);
        assert_eq!(evicted(&d), s(&["r1-low"]), "r1 needs one priority-1 victim, r2 a priority-50 one");
        let d = round(&mut e);
        let mut b = bound(&d);
        b.sort();
        assert_eq!(b, [("p1".to_string(), "a".to_string()), ("p2".to_string(), "b".to_string())]);
    }

    #[test]
    fn without_workload_aware_preemption_members_preempt_pod_by_pod() {
        // Scenario 036 in small: the gang needs the blocker's room and waits for it.
        let mut e = engine(&[]);
        e.apply(node("n1", "2", json!({})), 0);
        e.apply(pod("blocker", "1", json!({"priority": 10, "nodeName": "n1"})), 0);
        e.apply(pod_group("pg", json!({"schedulingPolicy": {"gang": {"minCount": 2}}})), 0);
        for n in ["p1", "p2"] {
            e.apply(pod(n, "1", json!({"priority": 100, "schedulingGroup": {"podGroupName": "pg"}})), 0);
        }
        let d = round(&mut e);
        assert_eq!(evicted(&d), s(&["blocker"]));
        assert_eq!(nominated(&d).len(), 2);
        assert!(bound(&d).is_empty(), "a group that needed preemption waits");
        let d = round(&mut e);
        assert_eq!(bound(&d).len(), 2);
    }

    #[test]
    fn the_lowest_global_default_priority_class_wins_for_pods_and_groups() {
        let mut e = engine(&[]);
        e.apply(priority_class("b-default", 5, true), 0);
        e.apply(priority_class("a-default", 7, true), 0);
        e.apply(pod("p", "1", json!({})), 0);
        e.apply(pod_group("pg", json!({"schedulingPolicy": {"basic": {}}})), 0);
        assert_eq!(e.pod(&PodKey::new("default", "p")).map(|p| p.priority), Some(5));
        let g = e.groups().info(&GroupKey::new("default", "pg")).and_then(|g| g.priority);
        assert_eq!(g, Some(5));
    }

    #[test]
    fn a_priority_class_arriving_later_reaches_bound_pods_too() {
        let mut e = engine(&[]);
        e.apply(node("n1", "1", json!({})), 0);
        e.apply(pod("running", "1", json!({"priorityClassName": "high", "nodeName": "n1"})), 0);
        e.apply(priority_class("high", 1000, false), 0);
        let id = e.snapshot().node_id("n1").expect("node");
        let counted =
            e.snapshot().node(id).pods.iter().find(|p| &*p.key.name == "running").map(|p| p.priority);
        assert_eq!(counted, Some(1000), "a victim's priority is what preemption compares");
        e.apply(pod("p", "1", json!({"priority": 500})), 0);
        let d = round(&mut e);
        assert!(evicted(&d).is_empty());
    }
}
