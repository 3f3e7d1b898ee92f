//! The scheduling queue: which pod is tried next, and when a pod that failed is tried again.
//!
//! Every pod waiting to be scheduled is in exactly one of four places:
//! * **active**: ready now; popped in order of priority (higher first), then first arrival
//!   (earlier first);
//! * **backoff**: failed recently and an event could help it, ready again at a virtual time
//!   (exponential backoff from `pod_initial_backoff_ms`, doubling per attempt, capped at
//!   `pod_max_backoff_ms`);
//! * **unschedulable**: failed and waits for a cluster event that could help (node added or
//!   changed, pod deleted or terminated, PodGroup added, group member added); the engine
//!   decides which events those are and calls [`SchedulingQueue::activate`] /
//!   [`SchedulingQueue::move_all_unschedulable`];
//! * **gated**: rejected by PreEnqueue (scheduling gates, PodGroup missing, gang quorum not
//!   reached); never popped until the engine re-admits it.
//!
//! The queue holds no policy beyond ordering and backoff: PreEnqueue verdicts come from the
//! engine as an [`Admission`]. A popped pod leaves the queue ("in flight"); the engine puts
//! it back with [`SchedulingQueue::add_failed`] if the attempt fails.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::model::{value_or_default, GroupKey, PodInfo, PodKey};

/// PreEnqueue verdict for a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// The pod may be scheduled.
    Admit,
    /// The pod waits; the message says why (e.g. `waiting for minCount pods from a gang to
    /// appear in scheduling queue`).
    Reject(Reason),
}

/// PreEnqueue's message: the fixed ones (e.g. a gang's quorum) are not copied per member.
pub type Reason = std::borrow::Cow<'static, str>;

/// Where a queued pod is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueState {
    /// Ready to be popped.
    Active,
    /// Ready again at `ready_at_ms`.
    Backoff { ready_at_ms: u64 },
    /// Waits for an event that could help.
    Unschedulable,
    /// Rejected by PreEnqueue, with its message.
    Gated { reason: Reason },
}

/// A pod as the queue keeps it.
#[derive(Debug, Clone)]
pub struct QueuedPod {
    pub pod: Arc<PodInfo>,
    /// Order of first arrival in the queue (kube's initial attempt timestamp); kept across
    /// attempts.
    pub arrival: u64,
    /// Failed scheduling attempts so far.
    pub attempts: u32,
    /// End of the current backoff (virtual ms); 0 when the pod never failed.
    pub backoff_until_ms: u64,
}

#[derive(Debug, Clone)]
struct Entry {
    queued: QueuedPod,
    state: QueueState,
    /// Priority the entry is filed under in `active` (kept to find it again after the pod
    /// info changed).
    active_priority: i32,
}

/// The scheduling queue. Deterministic: every order is by (priority, arrival), never by
/// hash order.
#[derive(Debug, Clone)]
pub struct SchedulingQueue {
    initial_backoff_ms: u64,
    max_backoff_ms: u64,
    entries: FxHashMap<PodKey, Entry>,
    active: BTreeMap<(Reverse<i32>, u64), PodKey>,
    backoff: BTreeMap<(u64, u64), PodKey>,
    /// Arrival order of pods in the unschedulable pool.
    unschedulable: BTreeMap<u64, PodKey>,
    /// The subset of `unschedulable` whose feasibility depends on where other pods run
    /// ([`depends_on_other_pods`]).
    unschedulable_pod_dependent: BTreeMap<u64, PodKey>,
    /// Queued pods of each PodGroup (any state), by arrival.
    groups: FxHashMap<GroupKey, ArrivalSet>,
    /// The members of each PodGroup a group event can move
    /// ([`SchedulingQueue::group_members_to_activate`]).
    group_waiting: FxHashMap<GroupKey, GroupWaiting>,
    next_arrival: u64,
}

/// Members of one PodGroup in the unschedulable pool or gated by a group verdict, so that
/// a group event visits only them and not every member (a gang of N pods joins one member
/// at a time: visiting all members on each join is quadratic).
#[derive(Debug, Clone, Default)]
struct GroupWaiting {
    unschedulable: ArrivalSet,
    /// Gated members, by reason. Members gated by their own scheduling gates are not here:
    /// their verdict depends only on the pod, and it changes only through `upsert`.
    gated: BTreeMap<Reason, ArrivalSet>,
}

/// Queued pods keyed by arrival, which is unique among queued pods (a new entry takes the
/// next one, and a pod put back keeps its own): filing and taking out one member is one
/// hash probe, where an ordered set searches and rebalances per member. The order is not
/// kept; a reader that needs arrival order sorts ([`ArrivalSet::sorted`]).
#[derive(Debug, Clone, Default)]
struct ArrivalSet(FxHashMap<u64, PodKey>);

impl ArrivalSet {
    fn insert(&mut self, (arrival, key): (u64, PodKey)) {
        let old = self.0.insert(arrival, key);
        debug_assert!(old.is_none(), "arrivals are unique among queued pods");
    }

    fn from_one(member: (u64, PodKey)) -> Self {
        let mut set = ArrivalSet::default();
        set.insert(member);
        set
    }

    fn remove(&mut self, (arrival, key): &(u64, PodKey)) {
        let removed = self.0.remove(arrival);
        debug_assert!(removed.as_ref().is_none_or(|k| k == key), "one arrival, one pod");
    }

    #[cfg(test)]
    fn contains(&self, (arrival, key): &(u64, PodKey)) -> bool {
        self.0.get(arrival) == Some(key)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.len()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The members, in no order.
    fn iter(&self) -> impl Iterator<Item = (u64, &PodKey)> {
        self.0.iter().map(|(arrival, key)| (*arrival, key))
    }

    /// The members in arrival order.
    fn sorted(&self) -> Vec<(u64, &PodKey)> {
        let mut out: Vec<(u64, &PodKey)> = self.iter().collect();
        out.sort_unstable_by_key(|(arrival, _)| *arrival);
        out
    }
}

impl IntoIterator for ArrivalSet {
    type Item = (u64, PodKey);
    type IntoIter = std::collections::hash_map::IntoIter<u64, PodKey>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl GroupWaiting {
    fn is_empty(&self) -> bool {
        self.unschedulable.is_empty() && self.gated.is_empty()
    }

    /// Files a member in `state`'s waiting set, if it has one (`self_gated`: gated by its
    /// own scheduling gates, which no group event changes).
    fn file(&mut self, member: (u64, PodKey), state: &QueueState, self_gated: bool) {
        match state {
            QueueState::Unschedulable => {
                self.unschedulable.insert(member);
            }
            QueueState::Gated { reason } if !self_gated => {
                // The reason is copied only for the first member gated by it (`entry` would
                // copy it for every member).
                match self.gated.get_mut(reason) {
                    Some(set) => {
                        set.insert(member);
                    }
                    None => {
                        self.gated.insert(reason.clone(), ArrivalSet::from_one(member));
                    }
                }
            }
            _ => {}
        }
    }

    /// Takes a member out of `state`'s waiting set.
    fn forget(&mut self, member: &(u64, PodKey), state: &QueueState) {
        match state {
            QueueState::Unschedulable => {
                self.unschedulable.remove(member);
            }
            QueueState::Gated { reason } => {
                if let Some(set) = self.gated.get_mut(reason) {
                    set.remove(member);
                    if set.is_empty() {
                        self.gated.remove(reason);
                    }
                }
            }
            _ => {}
        }
    }
}

impl SchedulingQueue {
    /// An empty queue with the given backoff bounds (virtual milliseconds).
    pub fn new(initial_backoff_ms: u64, max_backoff_ms: u64) -> Self {
        SchedulingQueue {
            initial_backoff_ms,
            max_backoff_ms: max_backoff_ms.max(initial_backoff_ms),
            entries: FxHashMap::default(),
            active: BTreeMap::new(),
            backoff: BTreeMap::new(),
            unschedulable: BTreeMap::new(),
            unschedulable_pod_dependent: BTreeMap::new(),
            groups: FxHashMap::default(),
            group_waiting: FxHashMap::default(),
            next_arrival: 0,
        }
    }

    /// Backoff after `attempts` failed attempts: initial x 2^(attempts-1), capped at max.
    pub fn backoff_ms(&self, attempts: u32) -> u64 {
        if attempts == 0 {
            return 0;
        }
        let shift = (attempts - 1).min(62);
        self.initial_backoff_ms.saturating_mul(1u64 << shift).min(self.max_backoff_ms)
    }

    /// Number of queued pods (any state; in-flight pods are not counted).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No pod is queued.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether the pod is queued.
    pub fn contains(&self, key: &PodKey) -> bool {
        self.entries.contains_key(key)
    }

    /// Where the pod is, if queued.
    pub fn state(&self, key: &PodKey) -> Option<&QueueState> {
        self.entries.get(key).map(|e| &e.state)
    }

    /// The queued version of a pod.
    pub fn get(&self, key: &PodKey) -> Option<&QueuedPod> {
        self.entries.get(key).map(|e| &e.queued)
    }

    /// Number of pods ready to pop.
    pub fn active_len(&self) -> usize {
        self.active.len()
    }

    /// Adds a new pod, or refreshes the pod info of a queued one (keeping its arrival,
    /// attempts and state, except that a gated pod moves on if `admission` now admits it
    /// and an admitted pod is gated if `admission` rejects it). Returns true when the pod
    /// was new.
    pub fn upsert(&mut self, pod: Arc<PodInfo>, admission: Admission, now_ms: u64) -> bool {
        if let Some(mut entry) = self.take_entry(&pod.key) {
            entry.queued.pod = pod;
            let state = match (entry.state, admission) {
                (QueueState::Gated { .. }, Admission::Admit) => Self::ready_state(&entry.queued, now_ms),
                (_, Admission::Reject(reason)) => QueueState::Gated { reason },
                (state, Admission::Admit) => state,
            };
            self.insert_entry(entry.queued, state);
            return false;
        }
        let queued = QueuedPod { pod, arrival: self.next_arrival, attempts: 0, backoff_until_ms: 0 };
        self.next_arrival += 1;
        let state = match admission {
            Admission::Admit => QueueState::Active,
            Admission::Reject(reason) => QueueState::Gated { reason },
        };
        self.insert_entry(queued, state);
        true
    }

    /// Puts back a pod whose scheduling attempt failed: one more attempt, a new backoff
    /// from `now_ms`, and into the unschedulable pool (it waits for an event).
    pub fn add_failed(&mut self, mut queued: QueuedPod, now_ms: u64) {
        self.remove(&queued.pod.key);
        queued.attempts = queued.attempts.saturating_add(1);
        queued.backoff_until_ms = now_ms.saturating_add(self.backoff_ms(queued.attempts));
        self.insert_entry(queued, QueueState::Unschedulable);
    }

    /// Puts back a pod to be retried after its backoff without waiting for an event (e.g.
    /// a failed binding).
    pub fn add_backoff(&mut self, mut queued: QueuedPod, now_ms: u64) {
        self.remove(&queued.pod.key);
        queued.attempts = queued.attempts.saturating_add(1);
        queued.backoff_until_ms = now_ms.saturating_add(self.backoff_ms(queued.attempts));
        let state = Self::ready_state(&queued, now_ms);
        self.insert_entry(queued, state);
    }

    /// Puts back a popped pod unchanged (e.g. it was pulled for a cycle that ended without a
    /// verdict for it), ready now or after its pending backoff.
    pub fn requeue(&mut self, queued: QueuedPod, now_ms: u64) {
        self.remove(&queued.pod.key);
        let state = Self::ready_state(&queued, now_ms);
        self.insert_entry(queued, state);
    }

    /// Gates a queued pod (PreEnqueue rejected it at pop time or after a change).
    pub fn gate(&mut self, queued: QueuedPod, reason: Reason) {
        self.remove(&queued.pod.key);
        self.insert_entry(queued, QueueState::Gated { reason });
    }

    /// Removes a pod from the queue (deleted, bound elsewhere, no longer ours).
    pub fn remove(&mut self, key: &PodKey) -> Option<QueuedPod> {
        self.take_entry(key).map(|e| e.queued)
    }

    /// Moves an unschedulable or gated pod on: to backoff if its backoff has not expired,
    /// else to active. Gated pods are only moved when `admission` admits them (else their
    /// reason is refreshed). Active and backoff pods stay. Returns true when it moved.
    pub fn activate(&mut self, key: &PodKey, admission: Admission, now_ms: u64) -> bool {
        let Some(entry) = self.entries.get_mut(key) else { return false };
        let Some((state, moved)) = Self::activation(entry, admission, now_ms) else { return false };
        let change = StateChange::replace(entry, state);
        self.reindex(key, change);
        moved
    }

    /// What [`Self::activate`] does to an entry: its new state and whether that moves it on
    /// (`None`: it stays as it is).
    fn activation(entry: &Entry, admission: Admission, now_ms: u64) -> Option<(QueueState, bool)> {
        match (&entry.state, admission) {
            (QueueState::Unschedulable, _) | (QueueState::Gated { .. }, Admission::Admit) => {
                Some((Self::ready_state(&entry.queued, now_ms), true))
            }
            (QueueState::Gated { reason: old }, Admission::Reject(reason)) if *old != reason => {
                Some((QueueState::Gated { reason }, false))
            }
            _ => None,
        }
    }

    /// Moves every pod of the unschedulable pool for which `could_help` holds to backoff or
    /// active (an event happened that could make them schedulable). Returns how many moved.
    pub fn move_all_unschedulable(
        &mut self,
        now_ms: u64,
        mut could_help: impl FnMut(&PodInfo) -> bool,
    ) -> usize {
        // The pool is taken whole (every event so far could help every pod) and those the
        // event cannot help are filed back, in arrival order as before.
        let pool = std::mem::take(&mut self.unschedulable);
        let mut moved = 0;
        for (arrival, key) in pool {
            if self.move_on_if(&key, now_ms, &mut could_help) {
                moved += 1;
            } else {
                self.unschedulable.insert(arrival, key);
            }
        }
        moved
    }

    /// Moves a pod just taken out of the unschedulable pool to backoff or active, in
    /// place: its entry, the other state index and its group's waiting set change; its
    /// group membership (any state) stays.
    fn move_on(&mut self, key: &PodKey, now_ms: u64) {
        self.move_on_if(key, now_ms, |_| true);
    }

    /// [`Self::move_on`] when `could_help` holds for the pod (one lookup of its entry).
    /// Returns whether it moved.
    fn move_on_if(&mut self, key: &PodKey, now_ms: u64, could_help: impl FnOnce(&PodInfo) -> bool) -> bool {
        let Some(entry) = self.entries.get_mut(key).filter(|e| could_help(&e.queued.pod)) else {
            return false;
        };
        debug_assert_eq!(entry.state, QueueState::Unschedulable);
        let state = Self::ready_state(&entry.queued, now_ms);
        let change = StateChange::replace(entry, state);
        self.reindex(key, change);
        true
    }

    /// Moves every unschedulable pod whose feasibility depends on other pods' placement
    /// (required inter-pod affinity, hard topology spread) on: a pod was assigned or changed
    /// its labels. Cheap: only that subset of the pool is visited. Returns how many moved.
    pub fn move_pod_dependent_unschedulable(&mut self, now_ms: u64) -> usize {
        let dependent = std::mem::take(&mut self.unschedulable_pod_dependent);
        for arrival in dependent.keys() {
            if let Some(key) = self.unschedulable.remove(arrival) {
                self.move_on(&key, now_ms);
            }
        }
        dependent.len()
    }

    /// Moves pods whose backoff expired at `now_ms` from backoff to active.
    pub fn flush_backoff(&mut self, now_ms: u64) {
        while let Some(first) = self.backoff.first_entry() {
            if first.key().0 > now_ms {
                break;
            }
            let key = first.remove();
            self.set_state(&key, QueueState::Active);
        }
    }

    /// Pops the next active pod (after moving expired backoffs), removing it from the queue.
    pub fn pop(&mut self, now_ms: u64) -> Option<QueuedPod> {
        self.flush_backoff(now_ms);
        let (_, key) = self.active.pop_first()?;
        self.take_entry_detached(&key).map(|e| e.queued)
    }

    /// Removes and returns a specific pod if it is queued and not gated (kube's
    /// `PopSpecificPod`, used to gather the other members of a PodGroup).
    pub fn take_ungated(&mut self, key: &PodKey) -> Option<QueuedPod> {
        match self.entries.get(key) {
            Some(e) if !matches!(e.state, QueueState::Gated { .. }) => self.remove(key),
            _ => None,
        }
    }

    /// Keys of the members of a PodGroup for which `activate(key, verdict)` can change
    /// anything, in arrival order: those in the unschedulable pool, and those gated for a
    /// reason other than a rejecting `verdict` (every gated one when it admits). Members
    /// gated by their own scheduling gates are left out: the engine re-admits those with
    /// their own reason, which they already carry. Active and backoff members are left out:
    /// `activate` leaves them where they are.
    pub fn group_members_to_activate(&self, group: &GroupKey, verdict: &Admission) -> Vec<PodKey> {
        let Some(w) = self.group_waiting.get(group) else { return Vec::new() };
        // A member is in one set only: the sets are concatenated, then sorted.
        let mut out: Vec<(u64, &PodKey)> = w.unschedulable.iter().collect();
        for (reason, members) in &w.gated {
            if !matches!(verdict, Admission::Reject(r) if r == reason) {
                out.extend(members.iter());
            }
        }
        out.sort_unstable_by_key(|(arrival, _)| *arrival);
        out.into_iter().map(|(_, k)| k.clone()).collect()
    }

    /// A group event: every member [`Self::group_members_to_activate`] lists is activated
    /// ([`Self::activate`]) with the group's `verdict`, or with `own_verdict` for a member
    /// gated by its own scheduling gates. One lookup per member. Returns how many moved.
    ///
    /// The waiting sets those members are in are taken out whole, and each member is
    /// filed again only where its new state waits (a gang that reaches its quorum moves
    /// every member out of one set: one removal of the set, not one per member). The
    /// order of the visits does not matter: every index is ordered by its own key.
    pub fn activate_group(
        &mut self,
        group: &GroupKey,
        verdict: &Admission,
        now_ms: u64,
        own_verdict: impl Fn(&PodInfo) -> Admission,
    ) -> usize {
        let Some(w) = self.group_waiting.get_mut(group) else { return 0 };
        let stays = |reason: &Reason| matches!(verdict, Admission::Reject(r) if r == reason);
        if w.unschedulable.is_empty() && w.gated.keys().all(stays) {
            return 0; // a gang's member joined before its quorum: nothing moves
        }
        let mut leaving = vec![std::mem::take(&mut w.unschedulable)];
        for (reason, members) in std::mem::take(&mut w.gated) {
            if stays(&reason) {
                w.gated.insert(reason, members);
            } else {
                leaving.push(members);
            }
        }
        if w.is_empty() {
            self.group_waiting.remove(group);
        }
        let mut moved = 0;
        for (arrival, key) in leaving.into_iter().flatten() {
            let Some(entry) = self.entries.get_mut(&key) else { continue };
            let admission =
                if entry.queued.pod.gated { own_verdict(&entry.queued.pod) } else { verdict.clone() };
            let change = match Self::activation(entry, admission, now_ms) {
                Some((state, moves)) => {
                    moved += usize::from(moves);
                    StateChange::replace(entry, state)
                }
                // Stays as it is: back in the set it was taken from.
                None => StateChange::replace(entry, entry.state.clone()),
            };
            let StateChange { old, state, old_priority, pod, .. } = change;
            self.unindex_state(&old, old_priority, arrival);
            self.index_state(&state, pod.priority, arrival, &key, &pod);
            if waits_with_group(&state, &pod) {
                value_or_default(&mut self.group_waiting, group).file((arrival, key), &state, pod.gated);
            }
        }
        moved
    }

    /// Whether a member of a PodGroup waits in the unschedulable pool or gated by the
    /// group's verdict: when none does, [`Self::group_members_to_activate`] is empty for
    /// every verdict.
    pub fn group_has_waiting(&self, group: &GroupKey) -> bool {
        self.group_waiting.get(group).is_some_and(|w| !w.is_empty())
    }

    /// Keys of the queued pods of a PodGroup (any state), in arrival order.
    pub fn group_members(&self, group: &GroupKey) -> Vec<PodKey> {
        self.groups
            .get(group)
            .map(|s| s.sorted().into_iter().map(|(_, k)| k.clone()).collect())
            .unwrap_or_default()
    }

    /// Keys of the gated pods, in arrival order, with their reasons.
    pub fn gated(&self) -> Vec<(PodKey, String)> {
        let mut v: Vec<(u64, PodKey, String)> = self
            .entries
            .iter()
            .filter_map(|(k, e)| match &e.state {
                QueueState::Gated { reason } => Some((e.queued.arrival, k.clone(), reason.to_string())),
                _ => None,
            })
            .collect();
        v.sort();
        v.into_iter().map(|(_, k, r)| (k, r)).collect()
    }

    /// Keys of every queued pod, in arrival order.
    pub fn keys(&self) -> Vec<PodKey> {
        let mut v: Vec<(u64, PodKey)> =
            self.entries.iter().map(|(k, e)| (e.queued.arrival, k.clone())).collect();
        v.sort();
        v.into_iter().map(|(_, k)| k).collect()
    }

    /// The earliest time a backed-off pod becomes ready.
    pub fn next_backoff_ms(&self) -> Option<u64> {
        self.backoff.first_key_value().map(|(&(t, _), _)| t)
    }

    // ---- internals ----

    fn ready_state(queued: &QueuedPod, now_ms: u64) -> QueueState {
        if queued.backoff_until_ms > now_ms {
            QueueState::Backoff { ready_at_ms: queued.backoff_until_ms }
        } else {
            QueueState::Active
        }
    }

    fn insert_entry(&mut self, queued: QueuedPod, state: QueueState) {
        let key = queued.pod.key.clone();
        let priority = queued.pod.priority;
        self.index_state(&state, priority, queued.arrival, &key, &queued.pod);
        if let Some(g) = queued.pod.group.as_ref() {
            let member = (queued.arrival, key.clone());
            if waits_with_group(&state, &queued.pod) {
                value_or_default(&mut self.group_waiting, g).file(member.clone(), &state, queued.pod.gated);
            }
            value_or_default(&mut self.groups, g).insert(member);
        }
        self.entries.insert(key, Entry { queued, state, active_priority: priority });
    }

    /// Files a pod in the index of `state` (none for a gated pod).
    fn index_state(&mut self, state: &QueueState, priority: i32, arrival: u64, key: &PodKey, pod: &PodInfo) {
        match state {
            QueueState::Active => {
                self.active.insert((Reverse(priority), arrival), key.clone());
            }
            QueueState::Backoff { ready_at_ms } => {
                self.backoff.insert((*ready_at_ms, arrival), key.clone());
            }
            QueueState::Unschedulable => {
                self.unschedulable.insert(arrival, key.clone());
                if depends_on_other_pods(pod) {
                    self.unschedulable_pod_dependent.insert(arrival, key.clone());
                }
            }
            QueueState::Gated { .. } => {}
        }
    }

    /// Takes a pod out of the index of `state` (`priority`: the one it was filed with).
    fn unindex_state(&mut self, state: &QueueState, priority: i32, arrival: u64) {
        match state {
            QueueState::Active => {
                self.active.remove(&(Reverse(priority), arrival));
            }
            QueueState::Backoff { ready_at_ms } => {
                self.backoff.remove(&(*ready_at_ms, arrival));
            }
            QueueState::Unschedulable => {
                self.unschedulable.remove(&arrival);
                self.unschedulable_pod_dependent.remove(&arrival);
            }
            QueueState::Gated { .. } => {}
        }
    }

    /// Changes a queued pod's state in place: its state index and its group's waiting
    /// sets follow, while its entry, arrival and group membership stay (`take_entry` then
    /// `insert_entry` with the same pod, without taking the pod out of every index).
    fn set_state(&mut self, key: &PodKey, state: QueueState) {
        let Some(entry) = self.entries.get_mut(key) else { return };
        let change = StateChange::replace(entry, state);
        self.reindex(key, change);
    }

    /// The rest of [`Self::set_state`] once the entry holds its new state: the state
    /// indices and the group's waiting sets follow.
    fn reindex(&mut self, key: &PodKey, change: StateChange) {
        let StateChange { old, state, old_priority, arrival, pod } = change;
        self.unindex_state(&old, old_priority, arrival);
        self.index_state(&state, pod.priority, arrival, key, &pod);
        let Some(g) = pod.group.as_ref() else { return };
        let (was, will) = (waits_with_group(&old, &pod), waits_with_group(&state, &pod));
        if !was && !will {
            return;
        }
        let member = (arrival, key.clone());
        // A member that waited is in its group's waiting sets: found without copying the key.
        if let Some(w) = self.group_waiting.get_mut(g).filter(|_| was) {
            w.forget(&member, &old);
            if will {
                w.file(member, &state, pod.gated);
            }
            if w.is_empty() {
                self.group_waiting.remove(g);
            }
        } else if will {
            value_or_default(&mut self.group_waiting, g).file(member, &state, pod.gated);
        }
    }

    /// Removes an entry from every index.
    fn take_entry(&mut self, key: &PodKey) -> Option<Entry> {
        let (key, entry) = self.entries.remove_entry(key)?;
        self.unindex_state(&entry.state, entry.active_priority, entry.queued.arrival);
        Some(self.detach_from_groups(&key, entry))
    }

    /// Removes an entry whose state index was already cleared by the caller.
    fn take_entry_detached(&mut self, key: &PodKey) -> Option<Entry> {
        let entry = self.entries.remove(key)?;
        Some(self.detach_from_groups(key, entry))
    }

    /// Takes an entry just removed from `entries` out of its group's sets.
    fn detach_from_groups(&mut self, key: &PodKey, entry: Entry) -> Entry {
        if let Some(g) = entry.queued.pod.group.as_ref() {
            let member = (entry.queued.arrival, key.clone());
            if let Some(w) = self.group_waiting.get_mut(g) {
                w.forget(&member, &entry.state);
                if w.is_empty() {
                    self.group_waiting.remove(g);
                }
            }
            if let Some(set) = self.groups.get_mut(g) {
                set.remove(&member);
                if set.is_empty() {
                    self.groups.remove(g);
                }
            }
        }
        entry
    }
}

/// What an entry was before [`SchedulingQueue::set_state`] changed its state in place,
/// for [`SchedulingQueue::reindex`].
struct StateChange {
    old: QueueState,
    /// The new state (a copy of the entry's).
    state: QueueState,
    /// The priority the entry was filed under in `active`.
    old_priority: i32,
    arrival: u64,
    pod: Arc<PodInfo>,
}

impl StateChange {
    /// Gives `entry` its new `state` (filed under the pod's current priority) and says what
    /// it was.
    fn replace(entry: &mut Entry, state: QueueState) -> Self {
        let old = std::mem::replace(&mut entry.state, state.clone());
        let old_priority = std::mem::replace(&mut entry.active_priority, entry.queued.pod.priority);
        StateChange { old, state, old_priority, arrival: entry.queued.arrival, pod: entry.queued.pod.clone() }
    }
}

/// Whether a member in `state` is in its group's waiting sets (`GroupWaiting`): in the
/// unschedulable pool, or gated by the group's verdict (not by its own scheduling gates).
fn waits_with_group(state: &QueueState, pod: &PodInfo) -> bool {
    match state {
        QueueState::Unschedulable => true,
        QueueState::Gated { .. } => !pod.gated,
        _ => false,
    }
}

/// Whether a pod's feasibility can change when other pods are placed: required inter-pod
/// affinity, or a topology spread constraint with `whenUnsatisfiable: DoNotSchedule`.
pub fn depends_on_other_pods(pod: &PodInfo) -> bool {
    let view = &*pod.view;
    let affinity = view
        .affinity
        .as_deref()
        .and_then(|a| a.pod_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
        .is_some_and(|terms| !terms.is_empty());
    let spread = view.topology_spread_constraints.iter().any(|c| c.when_unsatisfiable == "DoNotSchedule");
    affinity || spread
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::api::core::v1::{Pod, PodSchedulingGroup, PodSpec};
    use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(name: &str, priority: i32, group: Option<&str>) -> Arc<PodInfo> {
        let p = Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                priority: Some(priority),
                scheduling_group: group.map(|g| PodSchedulingGroup { pod_group_name: Some(g.into()) }),
                ..Default::default()
            }),
            ..Default::default()
        };
        Arc::new(PodInfo::from_pod(Arc::new(p)).unwrap())
    }

    fn names(q: &mut SchedulingQueue, now: u64) -> Vec<String> {
        std::iter::from_fn(|| q.pop(now)).map(|p| p.pod.key.name.to_string()).collect()
    }

    #[test]
    fn pops_higher_priority_first_then_first_arrival() {
        let mut q = SchedulingQueue::new(1000, 10_000);
        q.upsert(pod("a", 0, None), Admission::Admit, 0);
        q.upsert(pod("b", 10, None), Admission::Admit, 0);
        q.upsert(pod("c", 0, None), Admission::Admit, 0);
        q.upsert(pod("d", 10, None), Admission::Admit, 0);
        assert_eq!(names(&mut q, 0), ["b", "d", "a", "c"]);
        assert!(q.is_empty());
    }

    #[test]
    fn arrival_order_survives_a_failed_attempt() {
        let mut q = SchedulingQueue::new(0, 0);
        q.upsert(pod("first", 0, None), Admission::Admit, 0);
        q.upsert(pod("second", 0, None), Admission::Admit, 0);
        let first = q.pop(0).unwrap();
        q.add_failed(first, 0);
        assert_eq!(q.move_all_unschedulable(0, |_| true), 1);
        assert_eq!(names(&mut q, 0), ["first", "second"]);
    }

    #[test]
    fn backoff_doubles_per_attempt_up_to_the_maximum() {
        let q = SchedulingQueue::new(1000, 10_000);
        let got: Vec<u64> = (0..7).map(|a| q.backoff_ms(a)).collect();
        assert_eq!(got, [0, 1000, 2000, 4000, 8000, 10_000, 10_000]);
        assert_eq!(q.backoff_ms(u32::MAX), 10_000);
    }

    #[test]
    fn failed_pod_waits_for_an_event_then_for_its_backoff() {
        let mut q = SchedulingQueue::new(1000, 10_000);
        q.upsert(pod("p", 0, None), Admission::Admit, 0);
        let p = q.pop(0).unwrap();
        q.add_failed(p, 100);
        assert_eq!(q.state(&PodKey::new("default", "p")), Some(&QueueState::Unschedulable));
        assert!(q.pop(5000).is_none(), "no event: stays unschedulable however long it waits");
        q.move_all_unschedulable(500, |_| true);
        assert_eq!(q.state(&PodKey::new("default", "p")), Some(&QueueState::Backoff { ready_at_ms: 1100 }));
        assert_eq!(q.next_backoff_ms(), Some(1100));
        assert!(q.pop(1099).is_none());
        assert_eq!(q.pop(1100).unwrap().attempts, 1);
    }

    #[test]
    fn event_after_backoff_expired_activates_immediately() {
        let mut q = SchedulingQueue::new(1000, 10_000);
        q.upsert(pod("p", 0, None), Admission::Admit, 0);
        let p = q.pop(0).unwrap();
        q.add_failed(p, 0);
        q.move_all_unschedulable(2000, |_| true);
        assert_eq!(q.state(&PodKey::new("default", "p")), Some(&QueueState::Active));
    }

    #[test]
    fn gated_pods_never_pop_until_admitted() {
        let mut q = SchedulingQueue::new(0, 0);
        q.upsert(pod("g", 0, Some("pg")), Admission::Reject("waiting".into()), 0);
        assert!(q.pop(0).is_none());
        assert_eq!(q.gated(), vec![(PodKey::new("default", "g"), "waiting".to_string())]);
        // Events that move unschedulable pods do not release gated ones.
        q.move_all_unschedulable(0, |_| true);
        assert!(q.pop(0).is_none());
        assert!(!q.activate(&PodKey::new("default", "g"), Admission::Reject("still".into()), 0));
        assert_eq!(q.gated()[0].1, "still");
        assert!(q.activate(&PodKey::new("default", "g"), Admission::Admit, 0));
        assert_eq!(&*q.pop(0).unwrap().pod.key.name, "g");
    }

    #[test]
    fn upsert_refreshes_priority_of_an_active_pod() {
        let mut q = SchedulingQueue::new(0, 0);
        q.upsert(pod("a", 0, None), Admission::Admit, 0);
        q.upsert(pod("b", 0, None), Admission::Admit, 0);
        assert!(!q.upsert(pod("b", 5, None), Admission::Admit, 0));
        assert_eq!(names(&mut q, 0), ["b", "a"]);
    }

    #[test]
    fn group_members_are_listed_in_arrival_order_and_can_be_taken() {
        let mut q = SchedulingQueue::new(0, 0);
        q.upsert(pod("m2", 0, Some("pg")), Admission::Admit, 0);
        q.upsert(pod("x", 0, None), Admission::Admit, 0);
        q.upsert(pod("m1", 0, Some("pg")), Admission::Reject("gates".into()), 0);
        q.upsert(pod("m3", 0, Some("pg")), Admission::Admit, 0);
        let g = GroupKey::new("default", "pg");
        let members: Vec<String> = q.group_members(&g).into_iter().map(|k| k.name.to_string()).collect();
        assert_eq!(members, ["m2", "m1", "m3"]);
        assert!(q.take_ungated(&PodKey::new("default", "m1")).is_none(), "gated members stay");
        assert_eq!(q.take_ungated(&PodKey::new("default", "m3")).unwrap().pod.key.name.as_ref(), "m3");
        assert_eq!(names(&mut q, 0), ["m2", "x"]);
        assert_eq!(q.group_members(&g).len(), 1);
    }

    /// A pod with required inter-pod affinity ([`depends_on_other_pods`]).
    fn affine_pod(name: &str, group: Option<&str>) -> Arc<PodInfo> {
        let mut with_affinity = (*pod(name, 0, group)).clone();
        let mut view = (*with_affinity.view).clone();
        view.affinity = Some(
            serde_json::from_value(serde_json::json!({
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "db"}}}
                ]}
            }))
            .unwrap(),
        );
        with_affinity.view = Arc::new(view);
        Arc::new(with_affinity)
    }

    #[test]
    fn pod_assignments_move_only_pods_that_depend_on_other_pods() {
        let mut q = SchedulingQueue::new(0, 0);
        let plain = pod("plain", 0, None);
        let with_affinity = affine_pod("affine", None);
        assert!(depends_on_other_pods(&with_affinity));
        assert!(!depends_on_other_pods(&plain));
        for p in [plain, with_affinity] {
            q.upsert(p, Admission::Admit, 0);
            let popped = q.pop(0).unwrap();
            q.add_failed(popped, 0);
        }
        assert_eq!(q.move_pod_dependent_unschedulable(0), 1);
        assert_eq!(q.state(&PodKey::new("default", "affine")), Some(&QueueState::Active));
        assert_eq!(q.state(&PodKey::new("default", "plain")), Some(&QueueState::Unschedulable));
    }

    fn gated_pod(name: &str, group: &str) -> Arc<PodInfo> {
        let mut info = (*pod(name, 0, Some(group))).clone();
        info.gated = true;
        Arc::new(info)
    }

    /// The verdict the engine gives one member: its own gates' reason when it has gates,
    /// else the group's verdict.
    fn member_verdict(q: &SchedulingQueue, key: &PodKey, group: &Admission) -> Admission {
        match q.get(key) {
            Some(m) if m.pod.gated => Admission::Reject(format!("gates of {}", m.pod.key.name).into()),
            _ => group.clone(),
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Upsert member `i` (own scheduling gates when `gates`) with verdict `v`.
        Upsert {
            i: usize,
            gates: bool,
            v: usize,
        },
        Pop,
        Fail {
            now: u64,
        },
        Remove {
            i: usize,
        },
        MoveAll {
            now: u64,
        },
        GroupChanged {
            v: usize,
            now: u64,
        },
    }

    fn verdict(v: usize) -> Admission {
        match v % 3 {
            0 => Admission::Admit,
            1 => Admission::Reject("waiting for quorum".into()),
            _ => Admission::Reject("waiting for the PodGroup".into()),
        }
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            (0..8usize, any::<bool>(), 0..3usize).prop_map(|(i, gates, v)| Op::Upsert { i, gates, v }),
            Just(Op::Pop),
            (0..3000u64).prop_map(|now| Op::Fail { now }),
            (0..8usize).prop_map(|i| Op::Remove { i }),
            (0..3000u64).prop_map(|now| Op::MoveAll { now }),
            (0..3usize, 0..3000u64).prop_map(|(v, now)| Op::GroupChanged { v, now }),
        ]
    }

    proptest::proptest! {
        /// A group event that visits only `group_members_to_activate` (`activate_group`)
        /// leaves the queue exactly as visiting every member does (the plain path).
        #[test]
        fn group_activation_visits_every_member_it_can_move(ops in proptest::collection::vec(op(), 0..60)) {
            let g = GroupKey::new("default", "pg");
            let mut fast = SchedulingQueue::new(1000, 4000);
            let mut plain = SchedulingQueue::new(1000, 4000);
            let mut popped = Vec::new();
            for op in ops {
                match op {
                    Op::Upsert { i, gates, v } => {
                        let name = format!("m{i}");
                        let p = if gates { gated_pod(&name, "pg") } else { pod(&name, 0, Some("pg")) };
                        let a = if gates { Admission::Reject(format!("gates of {name}").into()) } else { verdict(v) };
                        fast.upsert(p.clone(), a.clone(), 0);
                        plain.upsert(p, a, 0);
                    }
                    Op::Pop => {
                        let (a, b) = (fast.pop(0), plain.pop(0));
                        proptest::prop_assert_eq!(a.as_ref().map(|q| q.pod.key.clone()), b.as_ref().map(|q| q.pod.key.clone()));
                        popped.extend(a);
                    }
                    Op::Fail { now } => {
                        if let Some(q) = popped.pop() {
                            fast.add_failed(q.clone(), now);
                            plain.add_failed(q, now);
                        }
                    }
                    Op::Remove { i } => {
                        let key = PodKey::new("default", format!("m{i}"));
                        fast.remove(&key);
                        plain.remove(&key);
                    }
                    Op::MoveAll { now } => {
                        fast.move_all_unschedulable(now, |_| true);
                        plain.move_all_unschedulable(now, |_| true);
                    }
                    Op::GroupChanged { v, now } => {
                        let group = verdict(v);
                        fast.activate_group(&g, &group, now, |p| {
                            Admission::Reject(format!("gates of {}", p.key.name).into())
                        });
                        for key in plain.group_members(&g) {
                            let a = member_verdict(&plain, &key, &group);
                            plain.activate(&key, a, now);
                        }
                    }
                }
                for i in 0..8 {
                    let key = PodKey::new("default", format!("m{i}"));
                    proptest::prop_assert_eq!(fast.state(&key), plain.state(&key));
                }
                // The group's waiting sets agree too (what the next group event visits).
                proptest::prop_assert_eq!(fast.group_has_waiting(&g), plain.group_has_waiting(&g));
                for v in 0..3 {
                    proptest::prop_assert_eq!(
                        fast.group_members_to_activate(&g, &verdict(v)),
                        plain.group_members_to_activate(&g, &verdict(v))
                    );
                }
                proptest::prop_assert_eq!(fast.gated(), plain.gated());
                proptest::prop_assert_eq!(fast.next_backoff_ms(), plain.next_backoff_ms());
                proptest::prop_assert_eq!(fast.active_len(), plain.active_len());
            }
        }
    }

    #[test]
    fn remove_forgets_the_pod_everywhere() {
        let mut q = SchedulingQueue::new(1000, 1000);
        q.upsert(pod("a", 0, Some("pg")), Admission::Admit, 0);
        let a = q.pop(0).unwrap();
        q.add_backoff(a, 0);
        assert_eq!(q.next_backoff_ms(), Some(1000));
        assert!(q.remove(&PodKey::new("default", "a")).is_some());
        assert!(q.is_empty());
        assert_eq!(q.next_backoff_ms(), None);
        assert!(q.group_members(&GroupKey::new("default", "pg")).is_empty());
    }

    /// The moves before `move_on`: every moved pod taken out of every index and filed
    /// again (the plain path the in-place move must match).
    fn plain_move_all(q: &mut SchedulingQueue, now_ms: u64, dependent_only: bool, odd_only: bool) {
        let pool = if dependent_only { &q.unschedulable_pod_dependent } else { &q.unschedulable };
        let keys: Vec<PodKey> = pool
            .values()
            .filter(|k| !odd_only || k.name.ends_with(['1', '3', '5', '7', '9']))
            .cloned()
            .collect();
        for key in &keys {
            if let Some(entry) = q.take_entry(key) {
                let state = SchedulingQueue::ready_state(&entry.queued, now_ms);
                q.insert_entry(entry.queued, state);
            }
        }
    }

    /// Every index agrees with the entries: the state maps, the pod-dependent subset,
    /// group membership and the groups' waiting sets.
    fn assert_consistent(q: &SchedulingQueue) {
        let mut active = 0;
        let mut backoff = 0;
        let mut unschedulable = 0;
        for (key, e) in &q.entries {
            match &e.state {
                QueueState::Active => {
                    active += 1;
                    assert_eq!(q.active.get(&(Reverse(e.active_priority), e.queued.arrival)), Some(key));
                }
                QueueState::Backoff { ready_at_ms } => {
                    backoff += 1;
                    assert_eq!(q.backoff.get(&(*ready_at_ms, e.queued.arrival)), Some(key));
                }
                QueueState::Unschedulable => {
                    unschedulable += 1;
                    assert_eq!(q.unschedulable.get(&e.queued.arrival), Some(key));
                    let dependent = q.unschedulable_pod_dependent.get(&e.queued.arrival);
                    assert_eq!(dependent.is_some(), depends_on_other_pods(&e.queued.pod));
                }
                QueueState::Gated { .. } => {}
            }
            if let Some(g) = e.queued.pod.group_key() {
                let member = (e.queued.arrival, key.clone());
                assert!(q.groups.get(&g).is_some_and(|set| set.contains(&member)));
                let waiting = q.group_waiting.get(&g).is_some_and(|w| w.unschedulable.contains(&member));
                assert_eq!(waiting, e.state == QueueState::Unschedulable, "{key}");
                let gated_for = |reason: &Reason| {
                    q.group_waiting
                        .get(&g)
                        .and_then(|w| w.gated.get(reason))
                        .is_some_and(|s| s.contains(&member))
                };
                if let QueueState::Gated { reason } = &e.state {
                    assert_eq!(gated_for(reason), !e.queued.pod.gated, "{key}");
                }
            }
        }
        let gated_members: usize =
            q.group_waiting.values().flat_map(|w| w.gated.values()).map(|s| s.len()).sum();
        let gated_entries = q
            .entries
            .values()
            .filter(|e| {
                matches!(e.state, QueueState::Gated { .. })
                    && !e.queued.pod.gated
                    && e.queued.pod.group.is_some()
            })
            .count();
        assert_eq!(gated_members, gated_entries);
        assert_eq!(
            (q.active.len(), q.backoff.len(), q.unschedulable.len()),
            (active, backoff, unschedulable)
        );
        let waiting: usize = q.group_waiting.values().map(|w| w.unschedulable.len()).sum();
        let grouped_unschedulable = q
            .entries
            .values()
            .filter(|e| e.state == QueueState::Unschedulable && e.queued.pod.group.is_some())
            .count();
        assert_eq!(waiting, grouped_unschedulable);
        assert!(q.group_waiting.values().all(|w| !w.is_empty()));
    }

    #[derive(Debug, Clone)]
    enum MoveOp {
        /// Upsert pod `i` (in a group when `i` is even; with inter-pod affinity when
        /// `i % 3 == 0`) with priority `p`.
        Upsert {
            i: usize,
            p: i32,
        },
        Pop {
            now: u64,
        },
        Fail {
            now: u64,
        },
        MoveAll {
            now: u64,
            odd_only: bool,
        },
        MoveDependent {
            now: u64,
        },
        /// Gate pod `i` (PreEnqueue rejects it).
        Gate {
            i: usize,
        },
        /// Take pod `i` if it is queued and not gated (gathering a PodGroup's members).
        TakeUngated {
            i: usize,
        },
    }

    fn move_op() -> impl proptest::strategy::Strategy<Value = MoveOp> {
        use proptest::prelude::*;
        prop_oneof![
            (0..10usize, -2..3i32).prop_map(|(i, p)| MoveOp::Upsert { i, p }),
            (0..5000u64).prop_map(|now| MoveOp::Pop { now }),
            (0..5000u64).prop_map(|now| MoveOp::Fail { now }),
            (0..5000u64, any::<bool>()).prop_map(|(now, odd_only)| MoveOp::MoveAll { now, odd_only }),
            (0..5000u64).prop_map(|now| MoveOp::MoveDependent { now }),
            (0..10usize).prop_map(|i| MoveOp::Gate { i }),
            (0..10usize).prop_map(|i| MoveOp::TakeUngated { i }),
        ]
    }

    proptest::proptest! {
        /// Moving pods out of the unschedulable pool in place (`move_on`) leaves the queue
        /// as taking each out of every index and filing it again does, and every index
        /// consistent.
        #[test]
        fn in_place_moves_match_the_plain_path(ops in proptest::collection::vec(move_op(), 0..80)) {
            let mut fast = SchedulingQueue::new(1000, 4000);
            let mut plain = SchedulingQueue::new(1000, 4000);
            let mut popped: Vec<QueuedPod> = Vec::new();
            for op in ops {
                match op {
                    MoveOp::Upsert { i, p } => {
                        let name = format!("m{i}");
                        let group = (i % 2 == 0).then_some("pg");
                        let mut info = if i % 3 == 0 { (*affine_pod(&name, group)).clone() } else { (*pod(&name, p, group)).clone() };
                        info.priority = p;
                        let info = Arc::new(info);
                        fast.upsert(info.clone(), Admission::Admit, 0);
                        plain.upsert(info, Admission::Admit, 0);
                    }
                    MoveOp::Pop { now } => {
                        let (a, b) = (fast.pop(now), plain.pop(now));
                        proptest::prop_assert_eq!(a.as_ref().map(|q| q.pod.key.clone()), b.as_ref().map(|q| q.pod.key.clone()));
                        popped.extend(a);
                    }
                    MoveOp::Fail { now } => {
                        if let Some(q) = popped.pop() {
                            fast.add_failed(q.clone(), now);
                            plain.add_failed(q, now);
                        }
                    }
                    MoveOp::MoveAll { now, odd_only } => {
                        let odd = |p: &PodInfo| !odd_only || p.key.name.ends_with(['1', '3', '5', '7', '9']);
                        let moved = fast.move_all_unschedulable(now, odd);
                        let before = plain.unschedulable.len();
                        plain_move_all(&mut plain, now, false, odd_only);
                        proptest::prop_assert_eq!(moved, before - plain.unschedulable.len());
                    }
                    MoveOp::MoveDependent { now } => {
                        fast.move_pod_dependent_unschedulable(now);
                        plain_move_all(&mut plain, now, true, false);
                    }
                    MoveOp::Gate { i } => {
                        let key = PodKey::new("default", format!("m{i}"));
                        let gate = |q: &mut SchedulingQueue| {
                            if let Some(e) = q.entries.get(&key) {
                                let info = e.queued.pod.clone();
                                q.upsert(info, Admission::Reject("waiting".into()), 0);
                            }
                        };
                        gate(&mut fast);
                        gate(&mut plain);
                    }
                    MoveOp::TakeUngated { i } => {
                        let key = PodKey::new("default", format!("m{i}"));
                        let taken = fast.take_ungated(&key);
                        let expected = match plain.state(&key) {
                            Some(QueueState::Gated { .. }) | None => None,
                            Some(_) => plain.take_entry(&key).map(|e| e.queued),
                        };
                        proptest::prop_assert_eq!(taken.as_ref().map(|q| q.arrival), expected.as_ref().map(|q| q.arrival));
                        popped.extend(taken);
                    }
                }
                assert_consistent(&fast);
                for i in 0..10 {
                    let key = PodKey::new("default", format!("m{i}"));
                    proptest::prop_assert_eq!(fast.state(&key), plain.state(&key));
                }
                let g = GroupKey::new("default", "pg");
                proptest::prop_assert_eq!(fast.group_members(&g), plain.group_members(&g));
                proptest::prop_assert_eq!(fast.group_members_to_activate(&g, &Admission::Admit), plain.group_members_to_activate(&g, &Admission::Admit));
                proptest::prop_assert_eq!(fast.next_backoff_ms(), plain.next_backoff_ms());
            }
            // Both drain in the same order.
            let drain = |q: &mut SchedulingQueue| {
                q.move_all_unschedulable(u64::MAX, |_| true);
                std::iter::from_fn(|| q.pop(u64::MAX)).map(|p| p.pod.key.clone()).collect::<Vec<_>>()
            };
            proptest::prop_assert_eq!(drain(&mut fast), drain(&mut plain));
        }
    }

    /// `activate` and the backoff flush as they were before `set_state`: the pod taken
    /// out of every index and filed again.
    fn plain_activate(q: &mut SchedulingQueue, key: &PodKey, admission: Admission, now_ms: u64) {
        let Some(entry) = q.entries.get(key) else { return };
        match (&entry.state, admission) {
            (QueueState::Unschedulable, _) | (QueueState::Gated { .. }, Admission::Admit) => {
                if let Some(entry) = q.take_entry(key) {
                    let state = SchedulingQueue::ready_state(&entry.queued, now_ms);
                    q.insert_entry(entry.queued, state);
                }
            }
            (QueueState::Gated { reason: old }, Admission::Reject(reason)) if *old != reason => {
                if let Some(entry) = q.take_entry(key) {
                    q.insert_entry(entry.queued, QueueState::Gated { reason });
                }
            }
            _ => {}
        }
    }

    fn plain_pop(q: &mut SchedulingQueue, now_ms: u64) -> Option<QueuedPod> {
        while let Some((&(ready_at, arrival), _)) = q.backoff.first_key_value() {
            if ready_at > now_ms {
                break;
            }
            if let Some(key) = q.backoff.remove(&(ready_at, arrival)) {
                if let Some(entry) = q.take_entry_detached(&key) {
                    q.insert_entry(entry.queued, QueueState::Active);
                }
            }
        }
        let (_, key) = q.active.pop_first()?;
        q.take_entry_detached(&key).map(|e| e.queued)
    }

    proptest::proptest! {
        /// Activating a pod and flushing expired backoffs in place (`set_state`) leave the
        /// queue as taking the pod out of every index and filing it again does, and every
        /// index consistent.
        #[test]
        fn in_place_activation_matches_the_plain_path(ops in proptest::collection::vec(op(), 0..80)) {
            let g = GroupKey::new("default", "pg");
            let mut fast = SchedulingQueue::new(1000, 4000);
            let mut plain = SchedulingQueue::new(1000, 4000);
            let mut popped: Vec<QueuedPod> = Vec::new();
            let mut now = 0;
            for op in ops {
                match op {
                    Op::Upsert { i, gates, v } => {
                        let name = format!("m{i}");
                        let group = (i % 4 != 3).then_some("pg");
                        let p = match (gates, group) {
                            (true, Some(g)) => gated_pod(&name, g),
                            _ => pod(&name, (i % 3) as i32, group),
                        };
                        let a = if gates { Admission::Reject(format!("gates of {name}").into()) } else { verdict(v) };
                        fast.upsert(p.clone(), a.clone(), now);
                        plain.upsert(p, a, now);
                    }
                    Op::Pop => {
                        let (a, b) = (fast.pop(now), plain_pop(&mut plain, now));
                        proptest::prop_assert_eq!(a.as_ref().map(|q| q.pod.key.clone()), b.as_ref().map(|q| q.pod.key.clone()));
                        popped.extend(a);
                    }
                    Op::Fail { now: t } => {
                        now = now.max(t);
                        if let Some(q) = popped.pop() {
                            fast.add_failed(q.clone(), now);
                            plain.add_failed(q, now);
                        }
                    }
                    Op::Remove { i } => {
                        let key = PodKey::new("default", format!("m{i}"));
                        fast.remove(&key);
                        plain.remove(&key);
                    }
                    Op::MoveAll { now: t } => {
                        now = now.max(t);
                        fast.move_all_unschedulable(now, |_| true);
                        plain.move_all_unschedulable(now, |_| true);
                    }
                    Op::GroupChanged { v, now: t } => {
                        now = now.max(t);
                        let group = verdict(v);
                        for key in fast.group_members(&g) {
                            let a = member_verdict(&fast, &key, &group);
                            fast.activate(&key, a.clone(), now);
                            plain_activate(&mut plain, &key, a, now);
                        }
                    }
                }
                assert_consistent(&fast);
                for i in 0..8 {
                    let key = PodKey::new("default", format!("m{i}"));
                    proptest::prop_assert_eq!(fast.state(&key), plain.state(&key));
                }
                proptest::prop_assert_eq!(fast.group_members(&g), plain.group_members(&g));
                for v in 0..3 {
                    proptest::prop_assert_eq!(fast.group_members_to_activate(&g, &verdict(v)), plain.group_members_to_activate(&g, &verdict(v)));
                }
                proptest::prop_assert_eq!(fast.gated(), plain.gated());
                proptest::prop_assert_eq!(fast.next_backoff_ms(), plain.next_backoff_ms());
            }
            let drain = |q: &mut SchedulingQueue| {
                q.move_all_unschedulable(u64::MAX, |_| true);
                std::iter::from_fn(|| q.pop(u64::MAX)).map(|p| p.pod.key.clone()).collect::<Vec<_>>()
            };
            proptest::prop_assert_eq!(drain(&mut fast), drain(&mut plain));
        }
    }
}
