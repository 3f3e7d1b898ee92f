//! DRA device binding conditions (KEP-5007, `DRADeviceBindingConditions`, beta and on by
//! default in v1.36, with `DRAResourceClaimDeviceStatus`): the DynamicResources PreBind of
//! a pod whose allocated devices have `bindingConditions` waits until every one of them is
//! `True` in the claim's `status.devices` (written by the driver, e.g. once a
//! fabric-attached device is attached to the node) before the pod is bound.
//!
//! The engine has no threads to wait on, so the waiting pod stays assumed on its node
//! (holding its devices and resources) with its claim status writes already emitted, and
//! its [`Decision::Bind`] is held back; every [`Engine::schedule`] looks at the claims as
//! the store shows them. When one of the device's `bindingFailureConditions` is `True`, or
//! the conditions are not all met `bindingTimeout` after the allocation (kube-scheduler's
//! default `DynamicResourcesArgs.bindingTimeout`, 600 s, from the allocation's
//! `allocationTimestamp`), PreBind fails: upstream's Unreserve removes the pod from
//! `reservedFor`, and its next attempt's PostFilter deallocates the claim that is no longer
//! reserved, so that other devices can be tried; here both happen at once
//! ([`Decision::ClaimUnreserve`]) and the pod is retried after its backoff.

use super::*;
use placer_api::k8s::api::resource::v1::{AllocationResult, DeviceRequestAllocationResult};

/// Reason of the `Normal` event upstream's DynamicResources PreBind records on the pod
/// when it starts waiting ("waiting for binding conditions for device on node <node>").
pub const REASON_BINDING_CONDITIONS_PENDING: &str = "BindingConditionsPending";

/// kube-scheduler's default `DynamicResourcesArgs.bindingTimeout` (10 minutes).
pub const BINDING_TIMEOUT_MS: u64 = 600_000;

/// A pod whose PreBind waits for its devices' binding conditions.
#[derive(Debug, Clone)]
pub(super) struct BindingWait {
    pub deadline_ms: u64,
}

enum Readiness {
    Ready,
    Waiting,
    Failed(String),
}

fn results(a: &AllocationResult) -> impl Iterator<Item = &DeviceRequestAllocationResult> {
    a.devices.iter().flat_map(|d| d.results.iter().flatten())
}

fn has_conditions(a: &AllocationResult) -> bool {
    results(a).any(|r| r.binding_conditions.as_ref().is_some_and(|c| !c.is_empty()))
}

impl Engine {
    /// When PreBind of `pod` (just allocated and reserved) must wait for binding
    /// conditions: the deadline, on the scheduling clock.
    pub(super) fn binding_deadline(&self, pod: &PodInfo, now_ms: u64) -> Option<u64> {
        if !self.config.gates.enabled(Gate::DRADeviceBindingConditions) {
            return None;
        }
        let claims = self.snapshot.dra().pod_claims(pod).ok()?;
        let mut deadline: Option<u64> = None;
        for c in &claims {
            let Some(a) = c.allocation.as_ref().filter(|a| has_conditions(a)) else { continue };
            // Counted from the allocation's timestamp when the store has one (an earlier
            // attempt allocated the claim), from now otherwise.
            let from = match (a.allocation_timestamp.as_ref(), self.wall_offset_ms) {
                (Some(t), Some(off)) => u64::try_from(t.0.as_millisecond().saturating_sub(off)).unwrap_or(0),
                _ => now_ms,
            };
            let d = from.saturating_add(BINDING_TIMEOUT_MS);
            deadline = Some(deadline.map_or(d, |x| x.min(d)));
        }
        deadline
    }

    /// Upstream's `isPodReadyForBinding` over `pod`'s claims as the store shows them.
    fn readiness(&self, pod: &PodInfo) -> Readiness {
        let claims = match self.snapshot.dra().pod_claims(pod) {
            Ok(c) => c,
            Err(m) => return Readiness::Failed(m),
        };
        for c in &claims {
            let name = &c.entry.key.name;
            let pending = c.allocation.as_ref().is_some_and(|a| has_conditions(a));
            let Some(stored) = c.entry.stored_allocation() else {
                if pending {
                    return Readiness::Waiting;
                }
                continue;
            };
            let devices = c.entry.claim.status.as_ref().and_then(|s| s.devices.as_deref()).unwrap_or(&[]);
            for r in results(stored) {
                let conditions = r.binding_conditions.as_deref().unwrap_or(&[]);
                if conditions.is_empty() {
                    continue;
                }
                let Some(status) =
                    devices.iter().find(|d| d.driver == r.driver && d.pool == r.pool && d.device == r.device)
                else {
                    return Readiness::Waiting;
                };
                let find = |t: &str| status.conditions.iter().flatten().find(|c| c.type_ == t);
                for f in r.binding_failure_conditions.iter().flatten() {
                    if let Some(cond) = find(f).filter(|c| c.status == "True") {
                        return Readiness::Failed(format!(
                            "claim {name} binding failed: reason={}, message={:?}",
                            cond.reason, cond.message
                        ));
                    }
                }
                if !conditions.iter().all(|t| find(t).is_some_and(|c| c.status == "True")) {
                    return Readiness::Waiting;
                }
            }
        }
        Readiness::Ready
    }

    /// The pods waiting in PreBind: bound once their devices are ready, failed on a
    /// failure condition or after the binding timeout.
    pub(super) fn check_binding_waits(&mut self, now_ms: u64, out: &mut Vec<Decision>) {
        if self.binding_waits.is_empty() {
            return;
        }
        let keys: Vec<PodKey> = self.binding_waits.keys().cloned().collect();
        for key in keys {
            let Some(assumed) = self.assumed.get(&key) else {
                // Deleted (or its binding failed) meanwhile.
                self.binding_waits.remove(&key);
                continue;
            };
            let pod = assumed.queued.pod.clone();
            let node = assumed.node.clone();
            let deadline = self.binding_waits.get(&key).map_or(0, |w| w.deadline_ms);
            let failure = match self.readiness(&pod) {
                Readiness::Ready => None,
                Readiness::Waiting if now_ms < deadline => continue,
                Readiness::Waiting => {
                    let claims = self.snapshot.dra().pod_claims(&pod).unwrap_or_default();
                    let waiting =
                        claims.iter().find(|c| c.allocation.as_ref().is_some_and(|a| has_conditions(a)));
                    Some(match waiting {
                        Some(c) => format!("claim {} binding timeout", c.entry.key.name),
                        None => "device binding timeout".to_string(),
                    })
                }
                Readiness::Failed(m) => Some(m),
            };
            self.binding_waits.remove(&key);
            match failure {
                None => self.emit_bind(&key, &pod.uid, &node, out),
                Some(message) => {
                    let dra = self.snapshot.dra();
                    for c in dra.pod_claims(&pod).unwrap_or_default() {
                        let Some(a) = &c.allocation else { continue };
                        out.push(Decision::ClaimUnreserve {
                            claim: c.entry.key.clone(),
                            consumer_uid: dra.consumer(&pod, &c.pod_claim).uid,
                            deallocate: has_conditions(a),
                        });
                    }
                    self.binding_failed(&key, now_ms);
                    out.push(Decision::PodUnschedulable {
                        pod: key.clone(),
                        reason: REASON_SCHEDULER_ERROR.to_string(),
                        message: format!("running PreBind plugin \"DynamicResources\": {message}"),
                    });
                }
            }
        }
    }

    /// The earliest binding-condition deadline of a waiting pod.
    pub(super) fn next_binding_deadline_ms(&self) -> Option<u64> {
        self.binding_waits.values().map(|w| w.deadline_ms).min()
    }
}
