//! Leader election on a `coordination.k8s.io/v1` Lease (kube-lease-manager), and the
//! [`Leadership`] flag that gates scheduling.
//!
//! Two replicas never schedule at once: only the lease holder's flag is up, the scheduling
//! loop runs controllers only while it is up, and the store refuses every write while it
//! is down (so a write already under way when the lease is lost is the last one). On
//! shutdown the flag goes down first, the scheduling thread stops, and only then is the
//! lease released so a standby replica takes over at once instead of waiting for expiry.
//!
//! kube-lease-manager reads the Lease (`get`), creates it when missing (`create`) and takes
//! or renews it with server-side apply and strategic merge patches (`patch`). Each
//! replica applies as its own field manager ([`field_manager`]), so two replicas taking
//! an orphaned lease at once conflict instead of both winning.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;

use crate::config::LeaderElectionSettings;

#[derive(Debug)]
struct Flags {
    leading: AtomicBool,
    /// The lease manager is running (leading or standing by).
    electing: AtomicBool,
}

/// Whether this replica may schedule. Cheap to clone; all clones share the flag.
#[derive(Debug, Clone)]
pub struct Leadership {
    flags: Arc<Flags>,
}

impl Leadership {
    /// Without leader election: always leading.
    pub fn always() -> Leadership {
        Leadership {
            flags: Arc::new(Flags { leading: AtomicBool::new(true), electing: AtomicBool::new(true) }),
        }
    }

    /// With leader election, before the lease manager has started.
    pub fn standby() -> Leadership {
        Leadership {
            flags: Arc::new(Flags { leading: AtomicBool::new(false), electing: AtomicBool::new(false) }),
        }
    }

    pub fn is_leader(&self) -> bool {
        self.flags.leading.load(Ordering::SeqCst)
    }

    pub fn set_leader(&self, leading: bool) {
        self.flags.leading.store(leading, Ordering::SeqCst);
    }

    /// True while the election runs (leading or standing by) or when there is none.
    pub fn is_electing(&self) -> bool {
        self.flags.electing.load(Ordering::SeqCst)
    }

    pub fn set_electing(&self, electing: bool) {
        self.flags.electing.store(electing, Ordering::SeqCst);
    }
}

/// The lease holder identity: `POD_NAME` (set by the Deployment through the downward API)
/// or the host name, plus a random suffix so a restarted process is a new holder.
pub fn identity() -> String {
    use std::hash::{BuildHasher, Hasher};
    let base = std::env::var("POD_NAME")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "placer".to_string());
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    format!("{base}_{:08x}", h.finish() as u32)
}

/// The field manager of this replica's writes to the Lease. It must differ between
/// replicas: taking an orphaned lease is a server-side apply of `holderIdentity`, and only
/// an apply by *another* manager conflicts (409) — with one shared manager, two replicas
/// racing for the lease both succeed and both lead until the next renewal.
pub fn field_manager(identity: &str) -> String {
    let mut m = format!("placer-leader-election/{identity}");
    while m.len() > 128 {
        m.pop();
    }
    m
}

/// The lease namespace: the configured one, else `POD_NAMESPACE`, else the service
/// account's namespace, else `default`.
pub fn lease_namespace(settings: &LeaderElectionSettings) -> String {
    if let Some(ns) = &settings.namespace {
        return ns.clone();
    }
    if let Some(ns) = std::env::var("POD_NAMESPACE").ok().filter(|s| !s.is_empty()) {
        return ns;
    }
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "default".to_string())
}

/// Runs the election until `stop` turns true, keeping `leadership` up to date and calling
/// `on_change` after every change (to wake the scheduling loop). Restarts the lease
/// manager with backoff if it fails; while it is down this replica is not leading.
pub async fn run_election(
    client: Client,
    settings: LeaderElectionSettings,
    namespace: String,
    identity: String,
    leadership: Leadership,
    on_change: impl Fn() + Send + 'static,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_secs(1);
    loop {
        if *stop.borrow() {
            return;
        }
        let manager = LeaseManagerBuilder::new(client.clone(), settings.lease_name.clone())
            .with_namespace(namespace.clone())
            .with_identity(identity.clone())
            .with_duration(settings.lease_duration_seconds)
            .with_grace(settings.renew_grace_seconds)
            .with_field_manager(field_manager(&identity))
            .build()
            .await;
        let manager = match manager {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    lease = %settings.lease_name,
                    %namespace,
                    "cannot start leader election; retrying",
                );
                leadership.set_electing(false);
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stop.changed() => return,
                }
                backoff = (backoff * 2).min(Duration::from_secs(30));
                continue;
            }
        };
        backoff = Duration::from_secs(1);
        let (mut lease, task) = manager.watch().await;
        leadership.set_electing(true);
        tracing::info!(
            lease = %settings.lease_name,
            %namespace,
            %identity,
            "leader election started; standing by",
        );
        loop {
            tokio::select! {
                changed = lease.changed() => {
                    match changed {
                        Ok(()) => {
                            let leading = *lease.borrow_and_update();
                            if leading != leadership.is_leader() {
                                leadership.set_leader(leading);
                                if leading {
                                    tracing::info!(%identity, "acquired the leader lease: scheduling");
                                } else {
                                    tracing::warn!(%identity, "lost the leader lease: scheduling stopped");
                                }
                                on_change();
                            }
                        }
                        Err(_) => {
                            // The manager's task ended (it only does so on errors).
                            leadership.set_leader(false);
                            leadership.set_electing(false);
                            on_change();
                            match task.await {
                                Ok(Err(e)) => tracing::warn!(error = %e, "election failed; restarting"),
                                Err(e) => tracing::warn!(error = %e, "election task ended; restarting"),
                                Ok(Ok(_)) => tracing::warn!("leader election ended; restarting it"),
                            }
                            tokio::select! {
                                _ = tokio::time::sleep(backoff) => {}
                                _ = stop.changed() => return,
                            }
                            break;
                        }
                    }
                }
                _ = stop.changed() => {
                    // Scheduling has stopped before we get here (see `serve`): release.
                    leadership.set_leader(false);
                    on_change();
                    drop(lease);
                    match tokio::time::timeout(Duration::from_secs(5), task).await {
                        Ok(Ok(Ok(_))) => tracing::info!("released the leader lease"),
                        Ok(Ok(Err(e))) => tracing::warn!(error = %e, "could not release the leader lease"),
                        Ok(Err(e)) => tracing::warn!(error = %e, "leader election task failed"),
                        Err(_) => tracing::warn!("timed out releasing the leader lease"),
                    }
                    leadership.set_electing(false);
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_shared_between_clones() {
        let l = Leadership::standby();
        let c = l.clone();
        assert!(!c.is_leader() && !c.is_electing());
        l.set_leader(true);
        l.set_electing(true);
        assert!(c.is_leader() && c.is_electing());
        assert!(Leadership::always().is_leader());
    }

    #[test]
    fn the_configured_namespace_wins() {
        let s = LeaderElectionSettings {
            lease_name: "placer".into(),
            namespace: Some("placer-system".into()),
            lease_duration_seconds: 15,
            renew_grace_seconds: 5,
        };
        assert_eq!(lease_namespace(&s), "placer-system");
        assert!(identity().contains('_'));
    }

    #[test]
    fn every_replica_writes_the_lease_as_its_own_field_manager() {
        let a = field_manager("placer-6c9f7d8b5d-4x2kq_9f2c11ab");
        let b = field_manager("placer-6c9f7d8b5d-n8wzt_0a1b2c3d");
        assert_ne!(a, b);
        assert_eq!(a, "placer-leader-election/placer-6c9f7d8b5d-4x2kq_9f2c11ab");
        assert!(field_manager(&"x".repeat(300)).len() <= 128, "the API's limit");
    }
}
