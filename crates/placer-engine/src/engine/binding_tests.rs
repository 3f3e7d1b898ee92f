//! The commit step of `outcome.rs` with small Reserve / Permit / PreBind plugins, and
//! profiles that disable plugins by name, through the engine facade.

use std::sync::{Arc as StdArc, Mutex};

use serde_json::json;

use super::*;
use crate::config::ExtensionPoint;
use crate::framework::{
    CycleData, PermitPlugin, PermitVerdict, PreBindPlugin, Registry, ReservePlugin, Status,
};
use crate::observer::NoopObserver;

/// What the example plugins saw, in order (`reserve p0`, `unreserve p0`, ...).
type Log = StdArc<Mutex<Vec<String>>>;

static LOG: Mutex<Option<Log>> = Mutex::new(None);

fn log() -> Log {
    LOG.lock().unwrap().get_or_insert_with(Default::default).clone()
}

fn record(what: &str, pod: &PodInfo) {
    log().lock().unwrap().push(format!("{what} {}", pod.key.name));
}

/// Reserves a "device" per pod in its CycleData; refuses pods labelled `refuse=reserve`.
struct Devices;
impl ReservePlugin for Devices {
    fn name(&self) -> &'static str {
        "ExampleDevices"
    }
    fn reserve(&self, data: &mut CycleData, _: &Snapshot, pod: &PodInfo, node: NodeId) -> Result<(), Status> {
        if pod.labels().get("refuse").map(String::as_str) == Some("reserve") {
            return Err(Status::unschedulable("ExampleDevices", "no device left"));
        }
        data.write("ExampleDevices", node);
        record("reserve", pod);
        Ok(())
    }
    fn unreserve(&self, data: &mut CycleData, _: &Snapshot, pod: &PodInfo, _: NodeId) {
        if data.read::<NodeId>("ExampleDevices").is_some() {
            record("unreserve", pod);
        }
    }
}

/// Waits for pods labelled `refuse=permit`.
struct Gate;
impl PermitPlugin for Gate {
    fn name(&self) -> &'static str {
        "ExampleGate"
    }
    fn permit(&self, _: &CycleData, _: &Snapshot, pod: &PodInfo, _: NodeId) -> PermitVerdict {
        if pod.labels().get("refuse").map(String::as_str) == Some("permit") {
            PermitVerdict::Wait("not yet".to_string())
        } else {
            PermitVerdict::Allow
        }
    }
}

/// Records what Reserve stored, proving the pod's data reaches PreBind.
struct Writer;
impl PreBindPlugin for Writer {
    fn name(&self) -> &'static str {
        "ExampleWriter"
    }
    fn pre_bind(
        &self,
        data: &mut CycleData,
        _: &Snapshot,
        pod: &PodInfo,
        node: NodeId,
    ) -> Result<(), Status> {
        assert_eq!(data.read::<NodeId>("ExampleDevices"), Some(&node), "Reserve's data reaches PreBind");
        record("prebind", pod);
        Ok(())
    }
}

fn engine() -> Engine {
    let mut r = crate::plugins::registry();
    r.reserve("ExampleDevices", |_| Some(Box::new(Devices)));
    r.permit("ExampleGate", |_| Some(Box::new(Gate)));
    r.pre_bind("ExampleWriter", |_| Some(Box::new(Writer)));
    with_registry(&r, SchedulerConfig::default())
}

fn with_registry(r: &Registry, config: SchedulerConfig) -> Engine {
    let config = SchedulerConfig { pod_initial_backoff_ms: 0, pod_max_backoff_ms: 0, ..config };
    let mut e = Engine::with_registry(config, r);
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "n1", "labels": {"zone": "z1"}},
        "spec": {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "8", "pods": "32"}}
    }))
    .unwrap();
    e.apply(ClusterEvent::NodeUpserted(Arc::new(node)), 0);
    e
}

fn gang(e: &mut Engine, refuse: Option<(usize, &str)>) {
    let pg: PodGroup = serde_json::from_value(json!({
        "metadata": {"name": "pg", "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}
    }))
    .unwrap();
    e.apply(ClusterEvent::PodGroupUpserted(Arc::new(pg)), 0);
    for i in 0..3 {
        let labels = match refuse {
            Some((j, what)) if j == i => json!({"refuse": what}),
            _ => json!({}),
        };
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("p{i}"), "namespace": "default", "uid": format!("u{i}"), "labels": labels},
            "spec": {
                "schedulingGroup": {"podGroupName": "pg"},
                "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]
            }
        }))
        .unwrap();
        e.apply(ClusterEvent::PodUpserted(Arc::new(p)), 0);
    }
}

fn binds(d: &[Decision]) -> usize {
    d.iter().filter(|d| matches!(d, Decision::Bind { .. })).count()
}

fn condition(d: &[Decision]) -> Option<(bool, String)> {
    d.iter().find_map(|d| match d {
        Decision::PodGroupCondition { status, message, .. } => Some((*status, message.clone())),
        _ => None,
    })
}

/// The plugin tests share the log: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn take_log() -> Vec<String> {
    std::mem::take(&mut *log().lock().unwrap())
}

#[test]
fn a_gang_is_reserved_member_by_member_then_permitted_then_prebound() {
    let _one = SERIAL.lock().unwrap();
    take_log();
    let mut e = engine();
    gang(&mut e, None);
    let d = e.schedule(0, &mut NoopObserver);
    assert_eq!(binds(&d), 3, "{d:?}");
    assert_eq!(
        take_log(),
        ["reserve p0", "reserve p1", "reserve p2", "prebind p0", "prebind p1", "prebind p2"]
    );
}

#[test]
fn a_refused_reservation_unreserves_the_whole_gang() {
    let _one = SERIAL.lock().unwrap();
    take_log();
    let mut e = engine();
    gang(&mut e, Some((2, "reserve")));
    let d = e.schedule(0, &mut NoopObserver);
    assert_eq!(binds(&d), 0, "all or nothing: {d:?}");
    assert_eq!(take_log(), ["reserve p0", "reserve p1", "unreserve p1", "unreserve p0"]);
    let (status, message) = condition(&d).unwrap();
    assert!(!status);
    assert!(message.contains("ExampleDevices: no device left"), "{message}");
}

#[test]
fn permit_waiting_holds_the_gang_and_nothing_is_prebound() {
    let _one = SERIAL.lock().unwrap();
    take_log();
    let mut e = engine();
    gang(&mut e, Some((1, "permit")));
    let d = e.schedule(0, &mut NoopObserver);
    assert_eq!(binds(&d), 0);
    let seen = take_log();
    assert!(!seen.iter().any(|s| s.starts_with("prebind")), "{seen:?}");
    assert_eq!(seen.iter().filter(|s| s.starts_with("unreserve")).count(), 3, "{seen:?}");
    assert!(condition(&d).unwrap().1.contains("not yet"));
}

#[test]
fn a_profile_disables_plugins_by_name() {
    // The node is tainted; the gang's pods tolerate it. Without the toleration they would
    // not fit, unless the profile disables TaintToleration's filter.
    let r = crate::plugins::registry();
    let intolerant = |e: &mut Engine| {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "x", "namespace": "default", "uid": "ux"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
        }))
        .unwrap();
        e.apply(ClusterEvent::PodUpserted(Arc::new(p)), 0);
        e.schedule(0, &mut NoopObserver)
    };
    let mut e = with_registry(&r, SchedulerConfig::default());
    assert_eq!(binds(&intolerant(&mut e)), 0);
    let mut config = SchedulerConfig::default();
    config.plugins.disable(ExtensionPoint::Filter, "TaintToleration");
    let mut e = with_registry(&r, config);
    assert_eq!(binds(&intolerant(&mut e)), 1);
    assert!(!e.fw.filter_names().contains(&"TaintToleration"));
    assert!(e.fw.score_weights().iter().any(|(n, _)| *n == "TaintToleration"), "only the filter point");

    let mut config = SchedulerConfig::default();
    config.plugins.disable(ExtensionPoint::MultiPoint, "*");
    config.plugins.enable(ExtensionPoint::Filter, "NodeResourcesFit", None);
    let e = with_registry(&r, config.clone());
    assert_eq!(e.fw.filter_names(), ["NodeResourcesFit"]);
    assert!(e.fw.score_weights().is_empty());
    assert!(e.placements.generators.is_empty());
    assert_eq!(r.check(&config), Ok(()));

    config.plugins.disable(ExtensionPoint::Score, "NoSuchPlugin");
    let err = r.check(&config).unwrap_err();
    assert_eq!(err.name, "NoSuchPlugin");
    assert!(err
        .to_string()
        .starts_with("plugins.score: unknown plugin \"NoSuchPlugin\" (known here: TaintToleration,"));
}

#[test]
fn enabled_score_plugins_take_the_configured_weight() {
    let r = crate::plugins::registry();
    let mut config = SchedulerConfig::default();
    config.plugins.enable(ExtensionPoint::Score, "NodeAffinity", Some(7));
    config.plugins.enable(ExtensionPoint::PlacementScore, "PodGroupPodsCount", Some(4));
    let e = with_registry(&r, config);
    assert!(e.fw.score_weights().contains(&("NodeAffinity", 7)));
    assert!(e.placements.scorers.iter().any(|(p, w)| p.name() == "PodGroupPodsCount" && *w == 4));
}

/// DynamicResources through the engine: a pod's claim is allocated at bind time and its
/// status write comes before the binding; a second claim finds the only device taken.
#[test]
fn claim_status_is_written_before_the_binding_and_devices_are_not_reused() {
    use placer_api::k8s::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
    let mut e = Engine::new(SchedulerConfig::default());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "pods": "10"}}
    }))
    .unwrap();
    e.apply(ClusterEvent::NodeUpserted(Arc::new(node)), 0);
    let class: DeviceClass = serde_json::from_value(json!({
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}
    }))
    .unwrap();
    e.apply(ClusterEvent::DeviceClassUpserted(Arc::new(class)), 0);
    let slice: ResourceSlice = serde_json::from_value(json!({
        "metadata": {"name": "n1"},
        "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                 "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0"}]}
    }))
    .unwrap();
    e.apply(ClusterEvent::ResourceSliceUpserted(Arc::new(slice)), 0);
    for (claim, pod) in [("a", "p1"), ("b", "p2")] {
        let c: ResourceClaim = serde_json::from_value(json!({
            "metadata": {"name": claim, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}
        }))
        .unwrap();
        e.apply(ClusterEvent::ResourceClaimUpserted(Arc::new(c)), 0);
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": pod, "namespace": "default", "uid": format!("uid-{pod}")},
            "spec": {"containers": [{"name": "c", "image": "x"}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}
        }))
        .unwrap();
        e.apply(ClusterEvent::PodUpserted(Arc::new(p)), 0);
    }
    let out = e.schedule(0, &mut NoopObserver);
    let kinds: Vec<String> = out
        .iter()
        .map(|d| match d {
            Decision::ClaimStatus { claim, allocation, consumer } => format!(
                "claim {} {} for {}",
                claim.name,
                allocation.as_ref().map_or("-".to_string(), |a| {
                    a.devices.as_ref().unwrap().results.as_ref().unwrap()[0].device.clone()
                }),
                consumer.name
            ),
            Decision::Bind { pod, node, .. } => format!("bind {} {node}", pod.name),
            Decision::PodUnschedulable { pod, message, .. } => format!("fail {} {message}", pod.name),
            _ => String::new(),
        })
        .filter(|s| !s.is_empty())
        .collect();
    assert_eq!(
        kinds,
        [
            "claim a gpu-0 for p1",
            "bind p1 n1",
            // Upstream's DynamicResources PostFilter answers before DefaultPreemption.
            "fail p2 0/1 nodes are available: 1 cannot allocate all claims. still not schedulable, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        ]
    );
}
