//! What each cluster event does to the engine's state, behind [`Engine::apply`]: nodes,
//! pods (read into records, or confirmed and refreshed in place by `confirm.rs`),
//! PodGroup membership and PreEnqueue's verdicts, priorities and DRA objects.

use super::*;

impl Engine {
    /// A DRA object changed: the state the DynamicResources plugin reads is updated and
    /// unschedulable pods are moved on (a device may have been freed, a claim created).
    pub(super) fn apply_dra(&mut self, event: ClusterEvent, now_ms: u64) {
        let dra = self.snapshot.dra_mut();
        match event {
            ClusterEvent::DeviceClassUpserted(c) => dra.upsert_class(c),
            ClusterEvent::DeviceClassDeleted(name) => dra.remove_class(&name),
            ClusterEvent::ResourceSliceUpserted(s) => dra.upsert_slice(s),
            ClusterEvent::ResourceSliceDeleted(name) => dra.remove_slice(&name),
            ClusterEvent::ResourceClaimUpserted(c) => dra.upsert_claim(c),
            ClusterEvent::ResourceClaimDeleted(key) => dra.remove_claim(&key),
            _ => return,
        }
        self.queue.move_all_unschedulable(now_ms, |_| true);
    }

    pub(super) fn apply_node(&mut self, node: Arc<Node>, now_ms: u64) {
        let info = match NodeStatic::from_node(node) {
            Ok(info) => info,
            Err(e) => {
                self.ingest_errors.push(e.to_string());
                return;
            }
        };
        let changed = match self.snapshot.node_id(&info.name) {
            None => true,
            Some(id) => node_changed(&self.snapshot.node(id).info, &info),
        };
        match info.not_ready_since_unix_ms {
            Some(since) => {
                let deadline = since.saturating_add(crate::tas::NODE_FAILURE_DELAY_MS);
                self.node_failure_deadlines.insert(info.name.to_string(), deadline);
            }
            None => {
                self.node_failure_deadlines.remove(&*info.name);
            }
        }
        self.snapshot.upsert_node(info);
        if changed {
            self.queue.move_all_unschedulable(now_ms, |_| true);
        }
    }

    /// Effective priority, as the Priority admission plugin resolves it for pods and
    /// PodGroups: `spec.priority`, else the named PriorityClass, else (no class named) the
    /// global default PriorityClass, else 0. Several global defaults: the lowest value wins
    /// (as upstream), then the smallest name.
    pub(super) fn resolve_priority(&self, explicit: Option<i32>, class: Option<&str>) -> i32 {
        if let Some(p) = explicit {
            return p;
        }
        if let Some(pc) = class.and_then(|c| self.priority_classes.get(c)) {
            return pc.value;
        }
        if class.is_none() {
            // `values()` iterates in name order; `min_by_key` keeps the first minimum.
            if let Some(pc) =
                self.priority_classes.values().filter(|pc| pc.global_default).min_by_key(|pc| pc.value)
            {
                return pc.value;
            }
        }
        0
    }

    /// The record of `pod` (`key`: its key, when the caller made it already). On a pod
    /// that cannot be read, the error is reported and the key handed back.
    pub(super) fn pod_info(
        &mut self,
        pod: &Arc<Pod>,
        key: Option<PodKey>,
    ) -> Result<PodInfo, Option<PodKey>> {
        let read = match key {
            Some(key) => match self.read_like_last(pod, key) {
                Ok(info) => Ok(info),
                Err(key) => PodInfo::from_pod_keyed(pod.clone(), key.clone()).map_err(|e| (e, Some(key))),
            },
            None => PodInfo::from_pod(pod.clone()).map_err(|e| (e, None)),
        };
        match read {
            Ok(mut info) => {
                info.priority =
                    self.resolve_priority(info.view.spec_priority, info.view.priority_class_name.as_deref());
                Ok(info)
            }
            Err((e, key)) => {
                let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".to_string());
                let bound =
                    pod.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some_and(|n| !n.is_empty());
                match pod.metadata.name.clone() {
                    Some(name) if !bound => self.pending.push(Decision::PodUnschedulable {
                        pod: PodKey::new(ns, name),
                        reason: REASON_SCHEDULER_ERROR.to_string(),
                        message: e.to_string(),
                    }),
                    _ => self.ingest_errors.push(e.to_string()),
                }
                Err(key)
            }
        }
    }

    /// The record of `pod` built from the last pending pod read ([`PodInfo::reads_alike`]),
    /// when it reads alike; else `key` back. The engine's record of a pending pod is what
    /// reading its object gives (an update that leaves it unchanged replaces only the
    /// object), so the two agree. Debug builds check it against a full read.
    fn read_like_last(&self, pod: &Arc<Pod>, key: PodKey) -> Result<PodInfo, PodKey> {
        let Some((prev_pod, prev)) = self.last_read.as_ref() else { return Err(key) };
        if !PodInfo::reads_alike(prev, prev_pod, pod, &key) {
            return Err(key);
        }
        let info = PodInfo::alike(prev, pod, key);
        debug_assert_eq!(
            PodInfo::from_pod_keyed(pod.clone(), info.key.clone()).ok().as_ref(),
            Some(&info),
            "a pod read alike reads as the pod does"
        );
        Ok(info)
    }

    pub(super) fn apply_pod(&mut self, pod: Arc<Pod>, now_ms: u64) {
        let (key, known) = match self.key_of(&pod) {
            Some((key, known)) => (Some(key), known),
            None => (None, false),
        };
        // A pod the engine knows nothing of has no assumption to confirm nor object to
        // refresh (every pod with either has a record).
        debug_assert!(
            known
                || key
                    .as_ref()
                    .is_none_or(|k| !self.sources.contains_key(k) && !self.assumed.contains_key(k)),
            "a pod with an object read or an assumption has a record"
        );
        if let (Some(key), true) = (&key, known) {
            if self.confirm_in_place(key, &pod, now_ms) || self.refresh_in_place(key, &pod, None) {
                return;
            }
        }
        let info = match self.pod_info(&pod, key) {
            Ok(info) => Arc::new(info),
            Err(key) => {
                if let (Some(key), true) = (key, known) {
                    self.sources.remove(&key);
                }
                return;
            }
        };
        // Borrowed from the record (each copy of a key is an atomic update of its count).
        let key = &info.key;
        if info.node_name.is_none() && !info.terminal {
            self.sources.insert(key.clone(), pod.clone());
            self.last_read = Some((pod, info.clone()));
        } else if known {
            self.sources.remove(key);
        }
        let old = self.pods.insert(key.clone(), info.clone());
        self.preempt.observe_pod(&info);
        let old_held = old.as_ref().is_some_and(|o| o.node_name.is_some() && !o.terminal);
        let joined = self.update_membership(old.as_deref(), Some(&info));

        if info.node_name.is_some() {
            // Bound (maybe terminal): confirms an assumption or is somebody else's binding.
            self.queue.remove(key);
            self.assumed.remove(key);
            self.snapshot.upsert_pod(info.clone());
            if old_held && info.terminal {
                self.queue.move_all_unschedulable(now_ms, |_| true);
            } else if !info.terminal
                && old.as_ref().is_none_or(|o| o.node_name.is_none() || o.labels() != info.labels())
            {
                // An assigned pod appeared (or relabelled): pods with inter-pod affinity or
                // hard topology spread may fit now.
                self.queue.move_pod_dependent_unschedulable(now_ms);
            }
        } else if old.is_some() && self.assumed.contains_key(key) {
            // A status update written before the binding landed: keep the assumption unless
            // the pod went away.
            if info.terminal || info.deleting {
                self.assumed.remove(key);
                self.snapshot.remove_pod(key);
                self.queue.move_all_unschedulable(now_ms, |_| true);
            }
        } else if info.terminal || info.deleting || !self.config.schedules(&info.scheduler_name) {
            self.queue.remove(key);
        } else {
            let spec_changed = old.as_ref().is_none_or(|o| !o.same_spec_and_labels(&info));
            let admission = self.pre_enqueue(&info);
            let is_new = self.queue.upsert(info.clone(), admission.clone(), now_ms);
            if !is_new && spec_changed {
                self.queue.activate(key, admission, now_ms);
            }
        }
        // GangScheduling requeue hint (SEMANTICS §2): an assigned pod added to a group (a
        // member just bound) moves the group's waiting members on, e.g. the rest of a basic
        // group that now preempts for what did not fit. `joined`: the pod became a member
        // of its group (`info.group`).
        let newly_assigned =
            info.node_name.is_some() && !info.terminal && old.as_ref().is_none_or(|o| o.node_name.is_none());
        if joined || newly_assigned {
            if let Some(group) = info.group.as_ref() {
                self.group_changed(group, now_ms);
            }
        }
    }

    pub(super) fn delete_pod(&mut self, key: &PodKey, now_ms: u64) {
        let old = self.pods.remove(key);
        self.sources.remove(key);
        self.snapshot.dra_mut().forget_pod(key);
        self.preempt.forget(key);
        self.queue.remove(key);
        self.assumed.remove(key);
        let node = self.snapshot.pod_node(key).map(|id| self.snapshot.node(id).name().to_string());
        let freed = self.snapshot.remove_pod(key).is_some();
        if let (Some(node), Some(group)) = (node, old.as_deref().and_then(PodInfo::group_key)) {
            self.lost_on.entry(group).or_default().insert(node);
        }
        self.update_membership(old.as_deref(), None);
        if freed {
            self.queue.move_all_unschedulable(now_ms, |_| true);
        }
    }

    /// Keeps group member sets current. Returns whether `new` joined its group (`new.group`).
    pub(super) fn update_membership(&mut self, old: Option<&PodInfo>, new: Option<&PodInfo>) -> bool {
        /// The group a pod counts in, with the pod.
        fn group_of(p: Option<&PodInfo>) -> Option<(&GroupKey, &PodInfo)> {
            p.filter(|p| !p.terminal && !p.deleting).and_then(|p| Some((p.group.as_ref()?, p)))
        }
        let (old_group, new_group) = (group_of(old), group_of(new));
        if old_group.map(|(g, _)| g) == new_group.map(|(g, _)| g) {
            return false;
        }
        if let Some((g, p)) = old_group {
            self.groups.entry_mut(g).members.remove(&p.key);
            self.groups.prune(g);
        }
        if let Some((g, p)) = new_group {
            self.groups.entry_mut(g).members.insert(p.key.clone());
        }
        new_group.is_some()
    }

    pub(super) fn apply_pod_group(&mut self, pg: Arc<PodGroup>, now_ms: u64) {
        let mut info = match PodGroupInfo::from_pod_group(pg.clone()) {
            Ok(info) => info,
            Err(e) => {
                self.ingest_errors.push(e.to_string());
                return;
            }
        };
        info.priority = Some(self.resolve_priority(pg.spec.priority, pg.spec.priority_class_name.as_deref()));
        let key = info.key.clone();
        self.snapshot.dra_mut().upsert_group(key.clone(), pg.clone());
        self.tas.index(&info);
        let observed = pg
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == CONDITION_POD_GROUP_SCHEDULED))
            .map(|c| GroupCondition {
                status: c.status == "True",
                reason: c.reason.clone(),
                message: c.message.clone(),
            });
        let entry = self.groups.entry_mut(&key);
        let new_policy = info.policy;
        let old = entry.info.replace(Arc::new(info));
        if observed.is_some() {
            entry.condition = observed;
        }
        if old.is_none() {
            self.restore_lost_nodes(&key, &pg);
        }
        let requeue = match old {
            None => true,
            Some(old) => policy_relaxed(old.policy, new_policy),
        };
        if requeue {
            self.group_changed(&key, now_ms);
        }
    }

    pub(super) fn refresh_priorities(&mut self, now_ms: u64) {
        let keys: Vec<GroupKey> = self.groups.iter().map(|(k, _)| k.clone()).collect();
        for key in keys {
            let Some(info) = self.groups.info(&key).cloned() else { continue };
            let spec = &info.pod_group.spec;
            let priority = Some(self.resolve_priority(spec.priority, spec.priority_class_name.as_deref()));
            if priority != info.priority {
                let mut updated = (*info).clone();
                updated.priority = priority;
                self.groups.entry_mut(&key).info = Some(Arc::new(updated));
            }
        }
        // Every pod without an explicit `spec.priority`: queued ones are re-filed, bound
        // ones (possible victims of preemption) updated in the snapshot.
        let mut keys: Vec<PodKey> = self.pods.keys().cloned().collect();
        keys.sort();
        for key in keys {
            let Some(pod) = self.pods.get(&key).cloned() else { continue };
            if pod.view.spec_priority.is_some() {
                continue;
            }
            let priority = self.resolve_priority(None, pod.view.priority_class_name.as_deref());
            if priority != pod.priority {
                let mut updated = (*pod).clone();
                updated.priority = priority;
                let updated = Arc::new(updated);
                self.pods.insert(key.clone(), updated.clone());
                if self.queue.contains(&key) {
                    let admission = self.pre_enqueue(&updated);
                    self.queue.upsert(updated, admission, now_ms);
                }
                if let Some(counted) = self.snapshot.counted_pod(&key).cloned() {
                    // The counted version (bound, or assumed with its node) keeps its node.
                    let mut c = (*counted).clone();
                    c.priority = priority;
                    self.snapshot.upsert_pod(Arc::new(c));
                }
            }
        }
    }

    /// A PodGroup appeared, relaxed its policy, or gained a member: re-run PreEnqueue for
    /// its gated members and move its unschedulable members on.
    pub(super) fn group_changed(&mut self, group: &GroupKey, now_ms: u64) {
        // In `topologyLevels` mode the other PodGroups of a PodSet group wait for this one.
        let siblings = self.tas_siblings(group);
        // A group none of whose members waits in the unschedulable pool or gated has no
        // member to move: its verdict is not computed (every confirmed binding of a member
        // comes here).
        for g in std::iter::once(group).chain(&siblings) {
            if !self.queue.group_has_waiting(g) {
                continue;
            }
            // The group's verdict is computed once, not once per member: this runs every
            // time a member joins, so per-member work here is quadratic in the gang size.
            let admission =
                if self.gate(Gate::GenericWorkload) { self.group_admission(g) } else { Admission::Admit };
            // Only the members this verdict can move are visited (a gang joins one member
            // at a time, so visiting all of them would be quadratic in its size).
            self.queue.activate_group(g, &admission, now_ms, Self::gated_admission);
        }
    }

    /// PreEnqueue: scheduling gates, then (GenericWorkload) the GangScheduling rules of
    /// SEMANTICS §2.
    pub(super) fn pre_enqueue(&self, pod: &PodInfo) -> Admission {
        if pod.gated {
            return Self::gated_admission(pod);
        }
        if !self.gate(Gate::GenericWorkload) {
            return Admission::Admit;
        }
        let Some(group) = pod.group.as_ref() else { return Admission::Admit };
        self.group_admission(group)
    }

    /// PreEnqueue's verdict on a pod with scheduling gates.
    pub(super) fn gated_admission(pod: &PodInfo) -> Admission {
        let gates = pod.view.scheduling_gates.join(" ");
        Admission::Reject(format!("waiting for scheduling gates: [{gates}]").into())
    }

    /// PreEnqueue's verdict on an ungated member of `group` (the same for every member).
    pub(super) fn group_admission(&self, group: &GroupKey) -> Admission {
        let entry = self.groups.get(group);
        match entry.and_then(|e| e.info.as_ref()) {
            None => Admission::Reject(waiting_for_group_message(&group.name).into()),
            Some(info) => match info.policy {
                GroupPolicy::Gang { min_count }
                    if self.gate(Gate::GangScheduling)
                        && entry.map_or(0, |e| e.members.len()) < min_count as usize =>
                {
                    Admission::Reject(MSG_WAITING_FOR_QUORUM.into())
                }
                _ => match self.tas_unit_wait_reason(group) {
                    Some(reason) => Admission::Reject(reason.into()),
                    None => Admission::Admit,
                },
            },
        }
    }
}
