//! `Table` responses (`kubectl get`): the columns kube-apiserver's printers give for each
//! kind (`pkg/printers/internalversion`), and its default table (Name, Created At) for
//! kinds without a printer (PodGroups and Workloads).

use std::collections::BTreeSet;

use placer_api::k8s::api::batch::v1::{CronJob, Job, JobCondition};
use placer_api::k8s::api::core::v1::{Container, Event, Node, Pod};
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use placer_api::k8s::apimachinery::pkg::util::intstr::IntOrString;
use placer_api::k8s::jiff::Timestamp;
use placer_cluster::{Kind, Object};
use serde_json::{json, Value};

mod storage;

/// What each row carries (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(v: Option<&str>) -> IncludeObject {
        match v {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

/// The Table version asked for in `Accept` (`v1` or `v1beta1`), if any.
pub fn wants_table(accept: &str) -> Option<&'static str> {
    for part in accept.split(',') {
        let params: Vec<&str> = part.split(';').map(str::trim).collect();
        if params.contains(&"as=Table") && params.contains(&"g=meta.k8s.io") {
            if params.contains(&"v=v1") {
                return Some("v1");
            }
            if params.contains(&"v=v1beta1") {
                return Some("v1beta1");
            }
        }
        if params.first().is_some_and(|m| *m == "application/json" || *m == "*/*")
            && !params.iter().any(|p| p.starts_with("as="))
        {
            return None;
        }
    }
    None
}

/// True when `Accept` asks for `PartialObjectMetadata` (or its list) first.
pub fn wants_metadata(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| {
        let params: Vec<&str> = first.split(';').map(str::trim).collect();
        params.iter().any(|p| p.starts_with("as=PartialObjectMetadata")) && params.contains(&"g=meta.k8s.io")
    })
}

/// `PartialObjectMetadata` of a served object.
pub fn partial_metadata(obj: &Value, version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

fn col(name: &str, type_: &str, priority: i32, description: &str) -> Value {
    let mut c =
        json!({"name": name, "type": type_, "format": "", "description": description, "priority": priority});
    if name == "Name" {
        c["format"] = json!("name");
    }
    c
}

/// The column definitions for `kind`.
pub fn columns(kind: Kind) -> Vec<Value> {
    let name = col("Name", "string", 0, "Name must be unique within a namespace.");
    let age = col(
        "Age",
        "string",
        0,
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    );
    match kind {
        Kind::Pod => vec![
            name,
            col("Ready", "string", 0, "The aggregate readiness state of this pod for accepting traffic."),
            col("Status", "string", 0, "The aggregate status of the containers in this pod."),
            col("Restarts", "string", 0, "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
            age,
            col("IP", "string", 1, "podIP address allocated to the pod."),
            col("Node", "string", 1, "NodeName indicates in which node this pod is scheduled."),
            col("Nominated Node", "string", 1, "nominatedNodeName is set when this pod preempts other pods on the node."),
            col("Readiness Gates", "string", 1, "If specified, all readiness gates will be evaluated for pod readiness."),
        ],
        Kind::Node => vec![
            name,
            col("Status", "string", 0, "The status of the node"),
            col("Roles", "string", 0, "The roles of the node"),
            age,
            col("Version", "string", 0, "Kubelet Version reported by the node."),
            col("Internal-IP", "string", 1, "List of addresses reachable to the node."),
            col("External-IP", "string", 1, "List of addresses reachable to the node."),
            col("OS-Image", "string", 1, "OS Image reported by the node."),
            col("Kernel-Version", "string", 1, "Kernel Version reported by the node."),
            col("Container-Runtime", "string", 1, "ContainerRuntime Version reported by the node."),
        ],
        Kind::Namespace => vec![name, col("Status", "string", 0, "The status of the namespace"), age],
        Kind::Event => vec![
            col("Last Seen", "string", 0, "The time at which the most recent occurrence of this event was recorded."),
            col("Type", "string", 0, "Type of this event (Normal, Warning), new types could be added in the future"),
            col("Reason", "string", 0, "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."),
            col("Object", "string", 0, "The object that this event is about."),
            col("Subobject", "string", 1, "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement."),
            col("Source", "string", 1, "The component reporting this event. Should be a short machine understandable string."),
            col("Message", "string", 0, "A human-readable description of the status of this operation."),
            col("First Seen", "string", 1, "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)"),
            col("Count", "string", 1, "The number of times this event has occurred."),
            col("Name", "string", 1, "Name must be unique within a namespace."),
        ],
        Kind::Job => vec![
            name,
            col("Status", "string", 0, "Status of the job."),
            col("Completions", "string", 0, "The number of pods which reached phase Succeeded."),
            col("Duration", "string", 0, "Time required to complete the job."),
            age,
            col("Containers", "string", 1, "Names of each container in the template."),
            col("Images", "string", 1, "Images referenced by each container in the template."),
            col("Selector", "string", 1, "A label query over pods that should match the pod count."),
        ],
        Kind::CronJob => vec![
            name,
            col("Schedule", "string", 0, "The schedule in Cron format."),
            col("Timezone", "string", 0, "The time zone name for the given schedule."),
            col("Suspend", "boolean", 0, "This flag tells the controller to suspend subsequent executions."),
            col("Active", "integer", 0, "A list of pointers to currently running jobs."),
            col("Last Schedule", "string", 0, "Information when was the last time the job was successfully scheduled."),
            age,
            col("Containers", "string", 1, "Names of each container in the template."),
            col("Images", "string", 1, "Images referenced by each container in the template."),
            col("Selector", "string", 1, "A label query over pods that should match the pod count."),
        ],
        Kind::Lease => vec![name, col("Holder", "string", 0, "holderIdentity contains the identity of the holder of a current lease."), age],
        Kind::PriorityClass => vec![
            name,
            col("Value", "integer", 0, "value represents the integer value of this priority class."),
            col("Global-Default", "boolean", 0, "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class."),
            age,
            col("PreemptionPolicy", "string", 0, "preemptionPolicy is the Policy for preempting pods with lower priority."),
        ],
        Kind::PodDisruptionBudget => vec![
            name,
            col("Min Available", "string", 0, "The minimum number of pods that must be available."),
            col("Max Unavailable", "string", 0, "The maximum number of pods that may be unavailable."),
            col("Allowed Disruptions", "integer", 0, "Calculated number of pods that may be disrupted at this time."),
            age,
        ],
        Kind::DeviceClass | Kind::ResourceClaimTemplate => vec![name, age],
        Kind::ResourceClaim => vec![
            name,
            col("State", "string", 0, "Whether the claim is allocated and reserved for a consumer."),
            age,
        ],
        Kind::ResourceSlice => vec![
            name,
            col("Node", "string", 0, "The node that the devices of this slice are local to, if any."),
            col("Driver", "string", 0, "The driver that provides the devices of this slice."),
            col("Pool", "string", 0, "The pool that this slice belongs to."),
            age,
        ],
        Kind::PersistentVolumeClaim
        | Kind::PersistentVolume
        | Kind::StorageClass
        | Kind::CSINode
        | Kind::CSIDriver
        | Kind::CSIStorageCapacity
        | Kind::VolumeAttachment => storage::columns(kind, name, age),
        Kind::PodGroup | Kind::Workload => vec![
            name,
            json!({"name": "Created At", "type": "date", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0}),
        ],
    }
}

/// One row of cells for `obj` at store time `now`.
pub fn cells(obj: &Object, now: Timestamp) -> Vec<Value> {
    let meta = obj.metadata();
    let name = json!(meta.name.clone().unwrap_or_default());
    let age = json!(since(meta.creation_timestamp.as_ref(), now));
    match obj {
        Object::Pod(p) => pod_cells(p, now),
        Object::Node(n) => node_cells(n, now),
        Object::Namespace(ns) => {
            let phase = ns.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
            vec![name, json!(phase), age]
        }
        Object::Event(e) => event_cells(e, now),
        Object::Job(j) => job_cells(j, now),
        Object::CronJob(c) => cronjob_cells(c, now),
        Object::Lease(l) => {
            let holder = l.spec.as_ref().and_then(|s| s.holder_identity.clone()).unwrap_or_default();
            vec![name, json!(holder), age]
        }
        Object::PriorityClass(pc) => vec![
            name,
            json!(pc.value.unwrap_or_default()),
            json!(pc.global_default.unwrap_or(false)),
            age,
            json!(pc.preemption_policy.clone().unwrap_or_default()),
        ],
        Object::PodDisruptionBudget(pdb) => {
            let spec = pdb.spec.clone().unwrap_or_default();
            let show = |v: Option<IntOrString>| match v {
                Some(IntOrString::Int(i)) => i.to_string(),
                Some(IntOrString::String(s)) => s,
                None => "N/A".to_string(),
            };
            let allowed = pdb.status.as_ref().and_then(|s| s.disruptions_allowed).unwrap_or(0);
            vec![
                name,
                json!(show(spec.min_available)),
                json!(show(spec.max_unavailable)),
                json!(allowed),
                age,
            ]
        }
        Object::DeviceClass(_) | Object::ResourceClaimTemplate(_) => vec![name, age],
        Object::ResourceClaim(c) => {
            // kubectl's printer: pending, allocated, allocated,reserved, deleted.
            let status = c.status.as_ref();
            let mut state = Vec::new();
            if meta.deletion_timestamp.is_some() {
                state.push("deleted");
            }
            if status.and_then(|s| s.allocation.as_ref()).is_some() {
                state.push("allocated");
                if status.and_then(|s| s.reserved_for.as_ref()).is_some_and(|r| !r.is_empty()) {
                    state.push("reserved");
                }
            } else if state.is_empty() {
                state.push("pending");
            }
            vec![name, json!(state.join(",")), age]
        }
        Object::ResourceSlice(rs) => vec![
            name,
            json!(rs.spec.node_name.clone().unwrap_or_default()),
            json!(rs.spec.driver.clone()),
            json!(rs.spec.pool.name.clone()),
            age,
        ],
        Object::PersistentVolumeClaim(_)
        | Object::PersistentVolume(_)
        | Object::StorageClass(_)
        | Object::CSINode(_)
        | Object::CSIDriver(_)
        | Object::CSIStorageCapacity(_)
        | Object::VolumeAttachment(_) => storage::cells(obj, name, age),
        Object::PodGroup(_) | Object::Workload(_) => {
            let created = meta.creation_timestamp.as_ref().map(|t| rfc3339_seconds(t.0)).unwrap_or_default();
            vec![name, json!(created)]
        }
    }
}

fn rfc3339_seconds(t: Timestamp) -> String {
    Timestamp::from_second(t.as_second()).map(|t| t.to_string()).unwrap_or_default()
}

/// A Table of `objects` (stored form), each row with its served object as `served`
/// gives it.
pub fn table(
    kind: Kind,
    objects: &[Object],
    served: impl Fn(&Object) -> Value,
    now: Timestamp,
    version: &str,
    include: IncludeObject,
    list_meta: Value,
) -> Value {
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut row = json!({"cells": cells(o, now)});
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => row["object"] = partial_metadata(&served(o), version),
                IncludeObject::Object => row["object"] = served(o),
            }
            if let Object::Pod(p) = o {
                match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
                    Some("Succeeded") => row["conditions"] = json!([{"type": "Completed", "status": "True", "reason": "Succeeded", "message": "The pod has completed successfully."}]),
                    Some("Failed") => row["conditions"] = json!([{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]),
                    _ => {}
                }
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": list_meta,
        "columnDefinitions": columns(kind),
        "rows": rows,
    })
}

/// kubectl's relative age (`duration.HumanDuration`).
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 { format!("{}d", hours / 24) } else { format!("{}d{h}h", hours / 24) };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn since(t: Option<&Time>, now: Timestamp) -> String {
    match t {
        None => "<unknown>".into(),
        Some(t) => human_duration(now.duration_since(t.0).as_secs()),
    }
}

fn pod_cells(p: &Pod, now: Timestamp) -> Vec<Value> {
    let spec = p.spec.clone().unwrap_or_default();
    let status = p.status.clone().unwrap_or_default();
    let mut restarts = 0;
    let total = spec.containers.len()
        + spec
            .init_containers
            .iter()
            .flatten()
            .filter(|c| c.restart_policy.as_deref() == Some("Always"))
            .count();
    let mut ready = 0;
    let mut reason = status.phase.clone().unwrap_or_default();
    if let Some(r) = status.reason.clone().filter(|r| !r.is_empty()) {
        reason = r;
    }
    for c in status.conditions.iter().flatten() {
        if c.type_ == "PodScheduled" && c.reason.as_deref() == Some("SchedulingGated") {
            reason = "SchedulingGated".into();
        }
    }
    let mut initializing = false;
    let init_count = spec.init_containers.as_ref().map_or(0, Vec::len);
    for (i, c) in status.init_container_statuses.iter().flatten().enumerate() {
        restarts += c.restart_count;
        let state = c.state.clone().unwrap_or_default();
        match (&state.terminated, &state.waiting) {
            (Some(t), _) if t.exit_code == 0 => continue,
            (Some(t), _) => {
                reason = match &t.reason {
                    Some(r) if !r.is_empty() => format!("Init:{r}"),
                    _ if t.signal.unwrap_or(0) != 0 => format!("Init:Signal:{}", t.signal.unwrap_or(0)),
                    _ => format!("Init:ExitCode:{}", t.exit_code),
                };
            }
            (None, Some(w))
                if w.reason.as_deref().is_some_and(|r| !r.is_empty() && r != "PodInitializing") =>
            {
                reason = format!("Init:{}", w.reason.clone().unwrap_or_default());
            }
            _ => reason = format!("Init:{i}/{init_count}"),
        }
        initializing = true;
        break;
    }
    let initialized =
        status.conditions.iter().flatten().any(|c| c.type_ == "Initialized" && c.status == "True");
    if !initializing || initialized {
        restarts = 0;
        let mut has_running = false;
        for c in status.container_statuses.iter().flatten().rev() {
            restarts += c.restart_count;
            let state = c.state.clone().unwrap_or_default();
            if let Some(w) =
                state.waiting.as_ref().filter(|w| w.reason.as_deref().is_some_and(|r| !r.is_empty()))
            {
                reason = w.reason.clone().unwrap_or_default();
            } else if let Some(t) = &state.terminated {
                reason = match &t.reason {
                    Some(r) if !r.is_empty() => r.clone(),
                    _ if t.signal.unwrap_or(0) != 0 => format!("Signal:{}", t.signal.unwrap_or(0)),
                    _ => format!("ExitCode:{}", t.exit_code),
                };
            } else if c.ready && state.running.is_some() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready =
                status.conditions.iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True");
            reason = if pod_ready { "Running".into() } else { "NotReady".into() };
        }
    }
    let terminal = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"));
    if p.metadata.deletion_timestamp.is_some() && status.reason.as_deref() == Some("NodeLost") {
        reason = "Unknown".into();
    } else if p.metadata.deletion_timestamp.is_some() && !terminal {
        reason = "Terminating".into();
    }
    let none = |s: Option<String>| s.filter(|s| !s.is_empty()).unwrap_or_else(|| "<none>".into());
    let ip = none(status.pod_ips.as_ref().and_then(|ips| ips.first()).map(|ip| ip.ip.clone()));
    let gates = match spec.readiness_gates.as_deref() {
        None | Some([]) => "<none>".to_string(),
        Some(gates) => {
            let ok = gates
                .iter()
                .filter(|g| {
                    status
                        .conditions
                        .iter()
                        .flatten()
                        .any(|c| c.type_ == g.condition_type && c.status == "True")
                })
                .count();
            format!("{ok}/{}", gates.len())
        }
    };
    vec![
        json!(p.metadata.name.clone().unwrap_or_default()),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts.to_string()),
        json!(since(p.metadata.creation_timestamp.as_ref(), now)),
        json!(ip),
        json!(none(spec.node_name.clone())),
        json!(none(status.nominated_node_name.clone())),
        json!(gates),
    ]
}

fn node_cells(n: &Node, now: Timestamp) -> Vec<Value> {
    let status = n.status.clone().unwrap_or_default();
    let mut state: Vec<String> = Vec::new();
    if let Some(c) = status.conditions.iter().flatten().find(|c| c.type_ == "Ready") {
        state.push(if c.status == "True" { "Ready".into() } else { "NotReady".into() });
    }
    if state.is_empty() {
        state.push("Unknown".into());
    }
    if n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false) {
        state.push("SchedulingDisabled".into());
    }
    let mut roles: BTreeSet<String> = BTreeSet::new();
    for (k, v) in n.metadata.labels.iter().flatten() {
        if let Some(role) = k.strip_prefix("node-role.kubernetes.io/").filter(|r| !r.is_empty()) {
            roles.insert(role.to_string());
        } else if k == "kubernetes.io/role" && !v.is_empty() {
            roles.insert(v.clone());
        }
    }
    let roles =
        if roles.is_empty() { "<none>".to_string() } else { roles.into_iter().collect::<Vec<_>>().join(",") };
    let info = status.node_info.clone().unwrap_or_default();
    let address = |t: &str| {
        status
            .addresses
            .iter()
            .flatten()
            .find(|a| a.type_ == t)
            .map_or_else(|| "<none>".to_string(), |a| a.address.clone())
    };
    let unknown = |s: String| if s.is_empty() { "<unknown>".to_string() } else { s };
    vec![
        json!(n.metadata.name.clone().unwrap_or_default()),
        json!(state.join(",")),
        json!(roles),
        json!(since(n.metadata.creation_timestamp.as_ref(), now)),
        json!(info.kubelet_version),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(unknown(info.os_image)),
        json!(unknown(info.kernel_version)),
        json!(unknown(info.container_runtime_version)),
    ]
}

fn event_cells(e: &Event, now: Timestamp) -> Vec<Value> {
    let micro = |t: Option<Timestamp>| {
        t.map_or_else(|| "<unknown>".to_string(), |t| human_duration(now.duration_since(t).as_secs()))
    };
    let first = match &e.first_timestamp {
        Some(t) => since(Some(t), now),
        None => micro(e.event_time.as_ref().map(|t| t.0)),
    };
    let mut last = match &e.last_timestamp {
        Some(t) => since(Some(t), now),
        None => first.clone(),
    };
    let mut count = e.count.unwrap_or(0);
    if let Some(s) = &e.series {
        last = micro(s.last_observed_time.as_ref().map(|t| t.0));
        count = s.count.unwrap_or(count);
    } else if count == 0 {
        count = 1;
    }
    let o = &e.involved_object;
    let kind = o.kind.clone().unwrap_or_default().to_lowercase();
    let target = match o.name.as_deref().filter(|n| !n.is_empty()) {
        Some(n) => format!("{kind}/{n}"),
        None => kind,
    };
    let source = e.source.clone().unwrap_or_default();
    let component = source
        .component
        .filter(|c| !c.is_empty())
        .or_else(|| e.reporting_component.clone())
        .unwrap_or_default();
    let host =
        source.host.filter(|h| !h.is_empty()).or_else(|| e.reporting_instance.clone()).unwrap_or_default();
    let source = if host.is_empty() { component } else { format!("{component}, {host}") };
    vec![
        json!(last),
        json!(e.type_.clone().unwrap_or_default()),
        json!(e.reason.clone().unwrap_or_default()),
        json!(target),
        json!(o.field_path.clone().unwrap_or_default()),
        json!(source),
        json!(e.message.clone().unwrap_or_default().trim()),
        json!(first),
        json!(count),
        json!(e.metadata.name.clone().unwrap_or_default()),
    ]
}

fn has_condition(conditions: &[JobCondition], t: &str) -> bool {
    conditions.iter().find(|c| c.type_ == t).is_some_and(|c| c.status == "True")
}

fn containers_cells(containers: &[Container]) -> (String, String) {
    let names: Vec<&str> = containers.iter().map(|c| c.name.as_str()).collect();
    let images: Vec<&str> = containers.iter().map(|c| c.image.as_deref().unwrap_or("")).collect();
    (names.join(","), images.join(","))
}

/// `metav1.FormatLabelSelector`.
fn format_selector(s: Option<&LabelSelector>) -> String {
    let Some(s) = s else { return "<none>".into() };
    let mut parts: Vec<String> = s.match_labels.iter().flatten().map(|(k, v)| format!("{k}={v}")).collect();
    for e in s.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({values})", e.key),
            "NotIn" => format!("{} notin ({values})", e.key),
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            other => format!("{} {other} ({values})", e.key),
        });
    }
    if parts.is_empty() {
        "<none>".into()
    } else {
        parts.join(",")
    }
}

fn job_cells(j: &Job, now: Timestamp) -> Vec<Value> {
    let spec = j.spec.clone().unwrap_or_default();
    let status = j.status.clone().unwrap_or_default();
    let succeeded = status.succeeded.unwrap_or(0);
    let completions = match spec.completions {
        Some(c) => format!("{succeeded}/{c}"),
        None => match spec.parallelism.unwrap_or(0) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let duration = match (&status.start_time, &status.completion_time) {
        (None, _) => String::new(),
        (Some(s), None) => human_duration(now.duration_since(s.0).as_secs()),
        (Some(s), Some(c)) => human_duration(c.0.duration_since(s.0).as_secs()),
    };
    let conditions = status.conditions.clone().unwrap_or_default();
    let state = if has_condition(&conditions, "Complete") {
        "Complete"
    } else if has_condition(&conditions, "Failed") {
        "Failed"
    } else if j.metadata.deletion_timestamp.is_some() {
        "Terminating"
    } else if has_condition(&conditions, "Suspended") {
        "Suspended"
    } else if has_condition(&conditions, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let containers = spec.template.spec.as_ref().map(|s| s.containers.clone()).unwrap_or_default();
    let (names, images) = containers_cells(&containers);
    vec![
        json!(j.metadata.name.clone().unwrap_or_default()),
        json!(state),
        json!(completions),
        json!(duration),
        json!(since(j.metadata.creation_timestamp.as_ref(), now)),
        json!(names),
        json!(images),
        json!(format_selector(spec.selector.as_ref())),
    ]
}

fn cronjob_cells(c: &CronJob, now: Timestamp) -> Vec<Value> {
    let spec = c.spec.clone();
    let status = c.status.clone().unwrap_or_default();
    let last =
        status.last_schedule_time.as_ref().map_or_else(|| "<none>".to_string(), |t| since(Some(t), now));
    let suspend = match spec.suspend {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    };
    let template = spec.job_template.spec.clone().unwrap_or_default();
    let containers = template.template.spec.as_ref().map(|s| s.containers.clone()).unwrap_or_default();
    let (names, images) = containers_cells(&containers);
    vec![
        json!(c.metadata.name.clone().unwrap_or_default()),
        json!(spec.schedule),
        json!(spec.time_zone.clone().unwrap_or_else(|| "<none>".into())),
        json!(suspend),
        json!(status.active.as_ref().map_or(0, Vec::len)),
        json!(last),
        json!(since(c.metadata.creation_timestamp.as_ref(), now)),
        json!(names),
        json!(images),
        json!(format_selector(template.selector.as_ref())),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStatus, PodSpec, PodStatus,
    };

    #[test]
    fn human_durations_match_kubectl() {
        for (s, want) in [
            (-5, "<invalid>"),
            (-1, "0s"),
            (5, "5s"),
            (119, "119s"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (30 * 3600, "30h"),
            (50 * 3600, "2d2h"),
            (400 * 86400, "400d"),
            (800 * 86400, "2y70d"),
        ] {
            assert_eq!(human_duration(s), want, "{s}");
        }
    }

    #[test]
    fn accept_headers_pick_tables_and_metadata() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(wants_table(kubectl), Some("v1"));
        assert_eq!(wants_table("application/json"), None);
        assert_eq!(wants_table("application/json;as=Table;v=v1beta1;g=meta.k8s.io"), Some("v1beta1"));
        assert!(wants_metadata(
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
        ));
        assert!(!wants_metadata(kubectl));
    }

    #[test]
    fn pod_rows_as_kubectl_prints_them() {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let created = Time(Timestamp::from_second(1_800_000_000 - 42).unwrap());
        let mut pod = Pod::default();
        pod.metadata.name = Some("train-0".into());
        pod.metadata.creation_timestamp = Some(created);
        pod.spec = Some(PodSpec {
            node_name: Some("b-1".into()),
            containers: vec![Container { name: "c".into(), ..Default::default() }],
            ..Default::default()
        });
        pod.status = Some(PodStatus {
            phase: Some("Running".into()),
            container_statuses: Some(vec![ContainerStatus {
                name: "c".into(),
                ready: true,
                state: Some(ContainerState {
                    running: Some(ContainerStateRunning::default()),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        });
        let row = cells(&Object::Pod(pod.into()), now);
        assert_eq!(
            row,
            vec![
                json!("train-0"),
                json!("1/1"),
                json!("Running"),
                json!("0"),
                json!("42s"),
                json!("<none>"),
                json!("b-1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        assert_eq!(columns(Kind::Pod).len(), row.len());
        for kind in Kind::ALL {
            assert!(!columns(kind).is_empty());
        }
    }
}
