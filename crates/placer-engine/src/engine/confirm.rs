//! Binding confirmations read in place.
//!
//! The engine assumes a pod on its node when it decides, then the store's watch shows the
//! binding: the same pod with `spec.nodeName` set. Reading that version from scratch
//! (`PodInfo::from_pod`: the view, the requests) repeats work the engine has done: when
//! the new version differs from the one it read only by what a binding writes
//! ([`differs_only_by_binding`]), the bound copy the snapshot already counts is exactly
//! what reading it would give, and it becomes the pod's record as it is.
//!
//! Valid only then: an assumed pod, confirmed on the node it was assumed on, whose record
//! has not changed since it was assumed, whose object the engine kept when it read it, and
//! whose counted copy is still the one made when it was assumed (the same allocation). In
//! every other case [`Engine::confirm_in_place`] returns false and the caller reads the
//! pod as before. Debug builds check every confirmation against a full read.
//!
//! The same holds for a pending pod whose new version differs only by its `PodScheduled`
//! condition: what this scheduler writes after every failed attempt (a gang that waits
//! for hours in a replay is written after each retry). [`Engine::refresh_in_place`] keeps
//! its record and queue entry as they are and replaces only the object it read, when the
//! full path would leave them unchanged too: the pod is unbound in both versions, not
//! assumed, queued, and its PreEnqueue verdict is the one its queue entry holds.
//!
//! A caller that writes that condition itself through a store that can write in place
//! (the embedded cluster, when nobody else holds the stored version) first takes the
//! engine's object away ([`Engine::release_pod_object`]), so the write copies nothing,
//! then hands the written version back ([`Engine::reattach_condition_write`]), which is
//! taken under the same rule, and only as the write over the very version released.

use std::sync::Arc;

use placer_api::k8s::api::core::v1::Pod;

use super::Engine;
#[cfg(debug_assertions)]
use crate::model::PodInfo;
use crate::model::{differs_only_by_binding, PodKey};
use crate::queue::{Admission, QueueState};

impl Engine {
    /// Confirms an assumed pod from its bound version without reading it again, when that
    /// is exact (see the module documentation). Returns whether it did.
    pub(super) fn confirm_in_place(&mut self, key: &PodKey, pod: &Arc<Pod>, now_ms: u64) -> bool {
        if self.assumed.is_empty() {
            return false;
        }
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else { return false };
        // The assumption and the object read are taken out first and put back when the
        // confirmation cannot be taken in place (nothing iterates either map, so their
        // order does not matter): one probe of each on the common path.
        let Some(assumed) = self.assumed.remove(key) else { return false };
        let Some(read) = self.sources.remove(key) else {
            self.assumed.insert(key.clone(), assumed);
            return false;
        };
        // The assumption stands on this node and was made from the pod's current record
        // (an update since, e.g. a status write before the binding landed, replaced it);
        // `pod` differs from the object read only by what a binding writes; the snapshot
        // still counts the very copy made when the pod was assumed.
        let current = self.pods.get_mut(key);
        let exact = *assumed.node == *node
            && current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &assumed.queued.pod))
            && differs_only_by_binding(&read, pod)
            && self.snapshot.counts(key, &assumed.counted);
        let (true, Some(current)) = (exact, current) else {
            self.sources.insert(key.clone(), read);
            self.assumed.insert(key.clone(), assumed);
            return false;
        };
        let counted = assumed.counted;
        *current = counted.clone();
        #[cfg(debug_assertions)]
        self.check_confirmation(pod, &counted);
        self.queue.remove(key);
        self.preempt.observe_pod(&counted);
        // What `apply_pod` does for a pod that became assigned: pods with inter-pod
        // affinity or hard topology spread may fit now, and its group's waiting members
        // move on (GangScheduling requeue hint). Membership is unchanged.
        if !counted.terminal {
            self.queue.move_pod_dependent_unschedulable(now_ms);
            if let Some(group) = counted.group.as_ref() {
                self.group_changed(group, now_ms);
            }
        }
        true
    }

    /// Takes a pending pod's update that changed only its `PodScheduled` condition (and
    /// resourceVersion) without reading the pod again, when that is exact (see the module
    /// documentation). Returns whether it did. `known_from`: the caller knows that `pod`
    /// is the version with this resourceVersion with only that condition changed; when
    /// the engine holds that version, the two are not compared.
    pub(super) fn refresh_in_place(
        &mut self,
        key: &PodKey,
        pod: &Arc<Pod>,
        known_from: Option<&str>,
    ) -> bool {
        if !unbound(pod) {
            return false;
        }
        if self.assumed.contains_key(key) {
            return false;
        }
        let Some(read) = self.sources.get(key) else { return false };
        if !unbound(read) {
            return false;
        }
        let known = known_from.is_some() && read.metadata.resource_version.as_deref() == known_from;
        debug_assert!(
            !known || differs_only_by_binding(read, pod),
            "a condition write changed only the condition"
        );
        if !known && !differs_only_by_binding(read, pod) {
            return false;
        }
        self.refresh_record(key, pod)
    }

    /// The rest of [`Engine::refresh_in_place`], once `pod` (unbound, not assumed) is known
    /// to be the object the engine read with only its `PodScheduled` condition changed:
    /// replaces the object when the full path would leave the record and queue entry
    /// unchanged.
    fn refresh_record(&mut self, key: &PodKey, pod: &Arc<Pod>) -> bool {
        let Some(record) = self.pods.get(key) else { return false };
        // What `apply_pod` would do with the same record: refresh the queue entry with
        // PreEnqueue's verdict, which moves the pod only when the verdict changed.
        let unchanged = match (self.queue.state(key), self.pre_enqueue(record)) {
            (Some(QueueState::Gated { reason: held }), Admission::Reject(reason)) => *held == reason,
            (Some(QueueState::Gated { .. }), Admission::Admit) => false,
            (Some(_), Admission::Admit) => true,
            (Some(_), Admission::Reject(_)) | (None, _) => false,
        };
        if !unchanged {
            return false;
        }
        #[cfg(debug_assertions)]
        {
            let record = record.clone();
            let fresh = self.pod_info(pod, None).ok();
            debug_assert_eq!(
                fresh.as_ref(),
                Some(&*record),
                "a status-only update reads as the pod's record"
            );
        }
        self.sources.insert(key.clone(), pod.clone());
        true
    }

    /// Lets go of the object pending pod `key` was read from, before its caller writes the
    /// pod's `PodScheduled` condition through a store that can then write in place (the
    /// engine's copy is the one other holder of the stored version). The caller hands the
    /// written version back with [`Engine::reattach_condition_write`]; until then the
    /// engine has no object for the pod, and an update of it is read in full (exact, only
    /// slower). `None` (nothing released) when the pod is bound, assumed or not read.
    pub fn release_pod_object(&mut self, key: &PodKey) -> Option<ReleasedPodObject> {
        let read = self.sources.get(key)?;
        if !unbound(read) || self.assumed.contains_key(key) {
            return None;
        }
        let resource_version = read.metadata.resource_version.clone();
        // The object read last is held for the next pod's read too: let go of it as well.
        if self.last_read.as_ref().is_some_and(|(last, _)| Arc::ptr_eq(last, read)) {
            self.last_read = None;
        }
        self.sources.remove(key);
        Some(ReleasedPodObject { key: key.clone(), resource_version })
    }

    /// Takes back a released pod's object: `pod` is the version whose resourceVersion was
    /// `previous` with only its `PodScheduled` condition changed, as the store declares
    /// ([`Engine::apply_condition_write`]). When `previous` is the version the engine
    /// released (not a later one the engine has not seen) and the record and queue entry
    /// stay as they are, as [`Engine::apply_condition_write`] would leave them, it becomes
    /// the engine's object for the pod; otherwise nothing is done, and the watch's version
    /// of the pod is read in full when it arrives. Returns whether it was taken.
    pub fn reattach_condition_write(
        &mut self,
        released: ReleasedPodObject,
        previous: &str,
        pod: &Arc<Pod>,
    ) -> bool {
        let ReleasedPodObject { key, resource_version } = released;
        if self.sources.contains_key(&key) || resource_version.as_deref() != Some(previous) {
            return false;
        }
        if pod.metadata.name.as_deref() != Some(&*key.name) || super::pod_namespace(pod) != &*key.namespace {
            return false;
        }
        if !unbound(pod) || self.assumed.contains_key(&key) {
            return false;
        }
        self.refresh_record(&key, pod)
    }

    /// Debug builds: the confirmed record is what a full read of `pod` gives.
    #[cfg(debug_assertions)]
    fn check_confirmation(&mut self, pod: &Arc<Pod>, counted: &PodInfo) {
        let read = self.pod_info(pod, None).ok();
        debug_assert_eq!(read.as_ref(), Some(counted), "a binding confirmed in place reads as the pod does");
    }
}

/// `spec.nodeName` is unset or empty.
fn unbound(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_none_or(str::is_empty)
}

/// What [`Engine::release_pod_object`] let go of: the pod and the resourceVersion of the
/// object the engine had read, for [`Engine::reattach_condition_write`].
#[derive(Debug)]
pub struct ReleasedPodObject {
    key: PodKey,
    resource_version: Option<String>,
}
