//! `NodePorts`: the host ports a pod asks for must be free on the node.
//!
//! A port is `(hostIP, protocol, hostPort)` with hostIP defaulting to `0.0.0.0` and
//! protocol to `TCP`; `0.0.0.0` conflicts with every address. Ports of app containers and
//! of restartable init containers (sidecars) count.

use placer_api::k8s::api::core::v1::ContainerPort;

use crate::framework::PodInfo;
use crate::framework::{CycleState, Dependence, FilterPlugin, FilterResult, PreResult, Rejection};
use crate::framework::{NodeState, Snapshot};

/// Plugin name.
pub const NAME: &str = "NodePorts";
/// Filter reason.
pub const ERR_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

const ANY_IP: &str = "0.0.0.0";

/// A host port: `(ip, protocol, port)`.
type HostPort<'a> = (&'a str, &'a str, i32);

/// The host ports a pod uses.
pub fn host_ports(pod: &PodInfo) -> impl Iterator<Item = HostPort<'_>> {
    pod.view.host_ports.iter().map(sanitize)
}

fn sanitize(p: &ContainerPort) -> HostPort<'_> {
    let ip = p.host_ip.as_deref().filter(|ip| !ip.is_empty()).unwrap_or(ANY_IP);
    let protocol = p.protocol.as_deref().filter(|pr| !pr.is_empty()).unwrap_or("TCP");
    (ip, protocol, p.host_port.unwrap_or(0))
}

fn conflicts(want: HostPort<'_>, used: HostPort<'_>) -> bool {
    want.1 == used.1 && want.2 == used.2 && (want.0 == ANY_IP || used.0 == ANY_IP || want.0 == used.0)
}

/// The `NodePorts` filter.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodePorts;

impl FilterPlugin for NodePorts {
    fn name(&self) -> &'static str {
        NAME
    }

    fn dependence(&self, pod: &PodInfo) -> Dependence {
        if pod.view.host_ports.is_empty() {
            Dependence::NodeLocal
        } else {
            Dependence::SameNodePods
        }
    }

    /// The ports of the node's own pods.
    fn reads_only_pod_and_node(&self, _pod: &PodInfo) -> bool {
        true
    }

    fn pre_filter<'a>(
        &self,
        state: &mut CycleState<'a>,
        _snap: &'a Snapshot,
    ) -> Result<PreResult, Rejection> {
        Ok(if host_ports(state.pod).next().is_some() { PreResult::Run } else { PreResult::Skip })
    }

    fn filter(&self, state: &CycleState<'_>, _snap: &Snapshot, node: &NodeState) -> FilterResult {
        for want in host_ports(state.pod) {
            for existing in &node.pods {
                if host_ports(existing).any(|used| conflicts(want, used)) {
                    return Err(Rejection::unschedulable(NAME, ERR_REASON));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::plugins::testing::{node, pod, snapshot_with, PodBuilder};
    use crate::schedule_one::filter_node;
    use crate::SchedulerConfig;

    fn with_port(p: PodBuilder, ip: Option<&str>, protocol: Option<&str>, port: i32) -> PodInfo {
        p.port(ContainerPort {
            container_port: port,
            host_port: Some(port),
            host_ip: ip.map(Into::into),
            protocol: protocol.map(Into::into),
            ..Default::default()
        })
        .build()
    }

    #[test]
    fn a_used_host_port_rejects_the_node() {
        let fw = crate::plugins::pod_framework(&SchedulerConfig::default());
        let used = with_port(pod("old").on("a"), None, None, 8080);
        let snap = snapshot_with(vec![node("a").build()], vec![used]);
        let id = snap.node_ids()[0];
        let st = filter_node(&fw, &snap, &with_port(pod("p"), None, None, 8080), id);
        assert_eq!((st.code, st.reasons), (Code::Unschedulable, vec![ERR_REASON.to_string()]));
        assert!(filter_node(&fw, &snap, &with_port(pod("p"), None, Some("UDP"), 8080), id).is_success());
        assert!(filter_node(&fw, &snap, &with_port(pod("p"), None, None, 9090), id).is_success());
        assert!(!filter_node(&fw, &snap, &with_port(pod("p"), Some("10.0.0.1"), None, 8080), id).is_success());
    }

    #[test]
    fn distinct_addresses_do_not_conflict() {
        assert!(!conflicts(("10.0.0.1", "TCP", 80), ("10.0.0.2", "TCP", 80)));
        assert!(conflicts(("10.0.0.1", "TCP", 80), (ANY_IP, "TCP", 80)));
    }
}
