//! The API server's validation of the kinds Placer stores: what a create must satisfy
//! ([`validate`]) and what an update may change ([`validate_update`]).
//!
//! The rules follow kube-apiserver (`pkg/apis/core/validation`, `pkg/apis/batch/validation`,
//! `pkg/apis/scheduling/validation`, apimachinery's `ObjectMeta` and label rules) for the
//! fields Placer reads, with its messages: `spec.containers[0].image: Required value`,
//! `metadata.labels[bad key]: Invalid value: "bad key": ...`, `spec.schedulingPolicy:
//! Invalid value: ...: field is immutable`. Map keys are written `[key]` as the API server
//! writes them. Values are echoed at most [`MAX_ECHO_CHARS`] characters.
//!
//! The embedded cluster runs these checks on every create, update and merge patch when it
//! validates ([`crate::embedded::EmbeddedCluster::validating`]); the scenario loader runs
//! [`validate`] on every manifest so that a bad file is rejected before anything runs, with
//! the file and line of the field.
//!
//! Deliberate leniencies, kept because scenario files rely on them: extended resources
//! (`nvidia.com/gpu`) may be requested without a limit, and a Job needs no `selector` (the
//! API server generates one).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use placer_api::k8s::api::batch::v1::{CronJob, Job, JobSpec};
use placer_api::k8s::api::core::v1::{
    Affinity, Container, Node, NodeSelectorTerm, Pod, PodSpec, ResourceRequirements, Taint, Toleration,
    TopologySpreadConstraint,
};
use placer_api::k8s::api::policy::v1::PodDisruptionBudget;
use placer_api::k8s::api::resource::v1::{
    CapacityRequirements, DeviceSelector, DeviceToleration, ResourceClaimSpec, ResourceSlice,
};
use placer_api::k8s::api::scheduling::v1::PriorityClass;
use placer_api::k8s::api::scheduling::v1alpha2::{
    PodGroup, PodGroupSchedulingConstraints, PodGroupSchedulingPolicy, Workload,
};
use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use placer_api::k8s::apimachinery::pkg::util::intstr::IntOrString;
use placer_api::quantity::{parse_milli, parse_units, QuantityError};
use serde_json::Value;

use crate::{Kind, Object};

mod storage;

/// Longest value echoed back in a message; longer ones are cut and their length given.
pub const MAX_ECHO_CHARS: usize = 200;
/// Largest object the API server stores: etcd's default request limit, 1.5 MiB (the
/// object's JSON encoding is measured).
pub const MAX_OBJECT_BYTES: usize = 1_572_864;
/// Largest total size of an object's annotations (keys plus values), 256 KiB.
pub const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;
/// Largest `parallelism` of an Indexed Job.
pub const MAX_INDEXED_PARALLELISM: i32 = 100_000;
/// Above this many completions an Indexed Job with `backoffLimitPerIndex` must set
/// `maxFailedIndexes` and keep `parallelism` at most [`PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS`].
pub const COMPLETIONS_SOFT_LIMIT: i32 = 100_000;
/// See [`COMPLETIONS_SOFT_LIMIT`].
pub const PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS: i32 = 10_000;
/// Largest `maxFailedIndexes` of an Indexed Job.
pub const MAX_FAILED_INDEXES: i32 = 100_000;
/// Longest CronJob name (its Jobs append an 11-character suffix).
pub const MAX_CRONJOB_NAME: usize = 52;
/// Most PodGroup templates of a Workload.
pub const MAX_WORKLOAD_TEMPLATES: usize = 8;
/// Highest `value` of a PriorityClass whose name does not start with `system-`.
pub const HIGHEST_USER_DEFINABLE_PRIORITY: i32 = 1_000_000_000;

/// One invalid field, as the API server reports it: `field: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Path of the field inside the object, e.g. `spec.containers[0].resources.requests[cpu]`
    /// (empty for the object as a whole).
    pub field: String,
    /// What is wrong, in the API server's words (`Required value`, `Invalid value: "x": ...`).
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

/// The errors as the API server joins them: one as is, several in brackets.
pub fn render(errors: &[FieldError]) -> String {
    match errors {
        [one] => one.to_string(),
        many => format!("[{}]", many.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
    }
}

/// `value` quoted, cut to [`MAX_ECHO_CHARS`] characters as printed, escapes included (a cut
/// value says how long it was): control characters print as `\u{17}`, six for one.
pub fn echo(value: &str) -> String {
    let mut printed = 0;
    let mut end = value.len();
    for (i, c) in value.char_indices() {
        printed += c.escape_debug().count();
        if printed > MAX_ECHO_CHARS {
            end = i;
            break;
        }
    }
    if end == value.len() {
        return format!("{value:?}");
    }
    format!("{:?}... ({} characters)", &value[..end], value.chars().count())
}

/// A JSON value in compact form, cut like [`echo`].
pub fn echo_json(value: &Value) -> String {
    let text = match value {
        Value::String(s) => return echo(s),
        other => serde_json::to_string(other).unwrap_or_default(),
    };
    let count = text.chars().count();
    if count <= MAX_ECHO_CHARS {
        text
    } else {
        let cut: String = text.chars().take(MAX_ECHO_CHARS).collect();
        format!("{cut}... ({count} characters)")
    }
}

/// Collects errors under a path.
struct Errors(Vec<FieldError>);

impl Errors {
    fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError { field: field.into(), message: message.into() });
    }
    fn required(&mut self, field: impl Into<String>, detail: &str) {
        let message = if detail.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {detail}")
        };
        self.push(field, message);
    }
    fn invalid(&mut self, field: impl Into<String>, value: &str, detail: &str) {
        self.push(field, format!("Invalid value: {}: {detail}", echo(value)));
    }
    fn invalid_int(&mut self, field: impl Into<String>, value: i64, detail: &str) {
        self.push(field, format!("Invalid value: {value}: {detail}"));
    }
    fn forbidden(&mut self, field: impl Into<String>, detail: &str) {
        self.push(field, format!("Forbidden: {detail}"));
    }
    fn duplicate(&mut self, field: impl Into<String>, value: &str) {
        self.push(field, format!("Duplicate value: {}", echo(value)));
    }
    fn not_supported(&mut self, field: impl Into<String>, value: &str, supported: &[&str]) {
        let list = supported.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ");
        self.push(field, format!("Unsupported value: {}: supported values: {list}", echo(value)));
    }
    fn non_negative(&mut self, field: &str, value: Option<i64>) {
        if let Some(v) = value.filter(|v| *v < 0) {
            self.invalid_int(field, v, "must be greater than or equal to 0");
        }
    }
}

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn key(path: &str, key: &str) -> String {
    format!("{path}[{key}]")
}

// ---------------------------------------------------------------------------------------
// Names and labels: the API machinery's checks live in `placer_api::names` (the engine's
// selectors use them too).

use placer_api::names::check_subdomain;
pub use placer_api::names::{
    check_dns_label, check_dns_subdomain, check_label_key, check_label_value, label_value_errors,
    qualified_name_errors,
};

fn validate_labels(e: &mut Errors, path: &str, labels: Option<&BTreeMap<String, String>>) {
    for (k, v) in labels.into_iter().flatten() {
        for m in qualified_name_errors(k) {
            e.invalid(key(path, k), k, &m);
        }
        for m in label_value_errors(v) {
            e.invalid(key(path, k), v, &m);
        }
    }
}

/// Parses a quantity of resource `name` (cpu in millicores, the rest in units). The error
/// says what is wrong without repeating the value (the caller echoes it).
pub fn parse_quantity(name: &str, q: &Quantity) -> Result<i64, String> {
    let parsed = if name == "cpu" { parse_milli(&q.0) } else { parse_units(&q.0) };
    parsed.map_err(|e| match e {
        QuantityError::Empty => "must not be empty".to_string(),
        QuantityError::Syntax(_) => {
            "must be a quantity: a number with an optional suffix (e.g. 500m, 2, 1.5Gi)".to_string()
        }
        QuantityError::Overflow(_) => {
            let unit = if name == "cpu" { "millicores" } else { "units" };
            format!("is too large: at most {} {unit}", i64::MAX)
        }
    })
}

/// A quantity that parses and is not negative.
pub fn check_quantity(name: &str, q: &Quantity) -> Result<i64, String> {
    match parse_quantity(name, q)? {
        v if v < 0 => Err("must be greater than or equal to 0".to_string()),
        v => Ok(v),
    }
}

fn validate_resource_list(e: &mut Errors, path: &str, list: Option<&BTreeMap<String, Quantity>>) {
    for (name, q) in list.into_iter().flatten() {
        for m in qualified_name_errors(name) {
            e.invalid(key(path, name), name, &m);
        }
        if let Err(m) = check_quantity(name, q) {
            e.invalid(key(path, name), &q.0, &m);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Create.

/// Everything wrong with `obj` as a new object (empty: the API server would store it).
pub fn validate(obj: &Object) -> Vec<FieldError> {
    let mut e = Errors(Vec::new());
    validate_meta(&mut e, obj.kind(), obj.metadata());
    match obj {
        Object::Node(n) => validate_node(&mut e, n),
        Object::Pod(p) => validate_pod(&mut e, p),
        Object::PodGroup(pg) => validate_pod_group(&mut e, pg),
        Object::Workload(w) => validate_workload(&mut e, w),
        Object::Job(j) => validate_job(&mut e, j),
        Object::CronJob(c) => validate_cron_job(&mut e, c),
        Object::PriorityClass(pc) => validate_priority_class(&mut e, pc),
        Object::PodDisruptionBudget(pdb) => validate_pdb(&mut e, pdb),
        Object::Namespace(ns) => {
            // ValidateNamespaceName: a DNS-1123 label, not just a subdomain.
            if let Some(name) = ns.metadata.name.as_deref().filter(|n| !n.is_empty()) {
                if check_dns_subdomain(name).is_ok() {
                    if let Err(m) = check_dns_label(name) {
                        e.invalid("metadata.name", name, &m);
                    }
                }
            }
        }
        // Held for the API server (names: DNS subdomains, checked above); nothing Placer reads.
        Object::Event(_) | Object::Lease(_) => {}
        Object::DeviceClass(c) => {
            validate_device_selectors(&mut e, "spec.selectors", c.spec.selectors.as_deref())
        }
        Object::ResourceSlice(rs) => validate_resource_slice(&mut e, rs),
        Object::ResourceClaim(c) => validate_claim_spec(&mut e, "spec", &c.spec),
        Object::ResourceClaimTemplate(t) => validate_claim_spec(&mut e, "spec.spec", &t.spec.spec),
        Object::PersistentVolumeClaim(pvc) => storage::validate_pvc(&mut e, pvc),
        Object::PersistentVolume(pv) => storage::validate_pv(&mut e, pv),
        Object::StorageClass(sc) => storage::validate_storage_class(&mut e, sc),
        Object::CSINode(n) => storage::validate_csi_node(&mut e, n),
        Object::CSIDriver(_) => {}
        Object::CSIStorageCapacity(c) => storage::validate_csi_storage_capacity(&mut e, c),
        Object::VolumeAttachment(va) => storage::validate_volume_attachment(&mut e, va),
    }
    if e.0.is_empty() {
        let size = serde_json::to_vec(&obj.to_json()).map(|v| v.len()).unwrap_or(0);
        if size > MAX_OBJECT_BYTES {
            e.push(
                "",
                format!(
                    "Too long: the object is {size} bytes as JSON; the API server stores at most {MAX_OBJECT_BYTES} bytes (1.5 MiB, etcd's request limit) per object"
                ),
            );
        }
    }
    e.0
}

fn validate_meta(e: &mut Errors, kind: Kind, meta: &ObjectMeta) {
    let generate = meta.generate_name.as_deref().filter(|g| !g.is_empty());
    match meta.name.as_deref().filter(|n| !n.is_empty()) {
        None if generate.is_none() => e.required("metadata.name", "name or generateName is required"),
        None => {}
        Some(name) => {
            if let Err(m) = check_dns_subdomain(name) {
                e.invalid("metadata.name", name, &m);
            } else if kind == Kind::CronJob && name.len() > MAX_CRONJOB_NAME {
                e.invalid(
                    "metadata.name",
                    name,
                    &format!("must be no more than {MAX_CRONJOB_NAME} characters"),
                );
            }
        }
    }
    if let Some(g) = generate {
        if let Err(m) = check_subdomain(g, true) {
            e.invalid("metadata.generateName", g, &m);
        }
    }
    if kind.namespaced() {
        if let Some(ns) = meta.namespace.as_deref().filter(|n| !n.is_empty()) {
            if let Err(m) = check_dns_label(ns) {
                e.invalid("metadata.namespace", ns, &m);
            }
        }
    }
    validate_labels(e, "metadata.labels", meta.labels.as_ref());
    let mut total = 0usize;
    for (k, v) in meta.annotations.iter().flatten() {
        if let Err(m) = check_label_key(&k.to_ascii_lowercase()) {
            e.invalid(key("metadata.annotations", k), k, &m);
        }
        total = total.saturating_add(k.len()).saturating_add(v.len());
    }
    if total > MAX_ANNOTATIONS_BYTES {
        e.push(
            "metadata.annotations",
            format!(
                "Too long: may not be more than {MAX_ANNOTATIONS_BYTES} bytes (the annotations have {total})"
            ),
        );
    }
    let mut controllers = 0;
    for (i, o) in meta.owner_references.iter().flatten().enumerate() {
        let path = format!("metadata.ownerReferences[{i}]");
        for (field, value) in
            [("apiVersion", &o.api_version), ("kind", &o.kind), ("name", &o.name), ("uid", &o.uid)]
        {
            if value.is_empty() {
                e.required(child(&path, field), "");
            }
        }
        if o.controller == Some(true) {
            controllers += 1;
        }
    }
    if controllers > 1 {
        e.invalid_int(
            "metadata.ownerReferences",
            controllers,
            "Only one reference can have Controller set to true",
        );
    }
}

fn validate_node(e: &mut Errors, n: &Node) {
    if let Some(status) = &n.status {
        validate_resource_list(e, "status.allocatable", status.allocatable.as_ref());
        validate_resource_list(e, "status.capacity", status.capacity.as_ref());
    }
    let mut seen = BTreeSet::new();
    for (i, t) in n.spec.iter().flat_map(|s| s.taints.iter().flatten()).enumerate() {
        let path = format!("spec.taints[{i}]");
        validate_taint(e, &path, t);
        if !seen.insert((t.key.clone(), t.effect.clone())) {
            e.duplicate(path, &format!("{}:{}", t.key, t.effect));
        }
    }
}

const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

fn validate_taint(e: &mut Errors, path: &str, t: &Taint) {
    if t.key.is_empty() {
        e.required(child(path, "key"), "");
    } else {
        for m in qualified_name_errors(&t.key) {
            e.invalid(child(path, "key"), &t.key, &m);
        }
    }
    if let Some(v) = t.value.as_deref() {
        for m in label_value_errors(v) {
            e.invalid(child(path, "value"), v, &m);
        }
    }
    if t.effect.is_empty() {
        e.required(child(path, "effect"), "");
    } else if !TAINT_EFFECTS.contains(&t.effect.as_str()) {
        e.not_supported(child(path, "effect"), &t.effect, &TAINT_EFFECTS);
    }
}

fn validate_pod(e: &mut Errors, p: &Pod) {
    match &p.spec {
        Some(spec) => validate_pod_spec(e, "spec", spec, true),
        None => e.required("spec", ""),
    }
}

/// A pod spec (of a pod, or of a template when `!is_pod`).
fn validate_pod_spec(e: &mut Errors, path: &str, spec: &PodSpec, is_pod: bool) {
    if spec.containers.is_empty() {
        e.required(child(path, "containers"), "a pod needs at least one container");
    }
    let mut names = BTreeSet::new();
    for (list, containers) in
        [("containers", Some(&spec.containers)), ("initContainers", spec.init_containers.as_ref())]
    {
        for (i, c) in containers.into_iter().flatten().enumerate() {
            let cpath = format!("{}[{i}]", child(path, list));
            validate_container(e, &cpath, c);
            if !c.name.is_empty() && !names.insert(c.name.clone()) {
                e.duplicate(child(&cpath, "name"), &c.name);
            }
        }
    }
    if let Some(policy) = spec.restart_policy.as_deref() {
        const POLICIES: [&str; 3] = ["Always", "OnFailure", "Never"];
        if !POLICIES.contains(&policy) {
            e.not_supported(child(path, "restartPolicy"), policy, &POLICIES);
        }
    }
    validate_resource_list(e, &child(path, "overhead"), spec.overhead.as_ref());
    if let Some(r) = &spec.resources {
        validate_requirements(e, &child(path, "resources"), r);
    }
    if let Some(group) = &spec.scheduling_group {
        let gpath = child(path, "schedulingGroup.podGroupName");
        match group.pod_group_name.as_deref().filter(|n| !n.is_empty()) {
            None => e.required(gpath, ""),
            Some(name) => {
                if let Err(m) = check_dns_subdomain(name) {
                    e.invalid(gpath, name, &m);
                }
            }
        }
    }
    if let Some(node) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        if let Err(m) = check_dns_subdomain(node) {
            e.invalid(child(path, "nodeName"), node, &m);
        }
        if is_pod && spec.scheduling_gates.as_ref().is_some_and(|g| !g.is_empty()) {
            e.forbidden(child(path, "nodeName"), "cannot be set until all schedulingGates have been cleared");
        }
    }
    let mut gates = BTreeSet::new();
    for (i, g) in spec.scheduling_gates.iter().flatten().enumerate() {
        let gpath = format!("{}[{i}].name", child(path, "schedulingGates"));
        for m in qualified_name_errors(&g.name) {
            e.invalid(gpath.clone(), &g.name, &m);
        }
        if !gates.insert(g.name.clone()) {
            e.duplicate(gpath, &g.name);
        }
    }
    if let Some(pc) = spec.priority_class_name.as_deref().filter(|n| !n.is_empty()) {
        if let Err(m) = check_dns_subdomain(pc) {
            e.invalid(child(path, "priorityClassName"), pc, &m);
        }
    }
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        validate_toleration(e, &format!("{}[{i}]", child(path, "tolerations")), t);
    }
    validate_labels(e, &child(path, "nodeSelector"), spec.node_selector.as_ref());
    if let Some(a) = &spec.affinity {
        validate_affinity(e, &child(path, "affinity"), a);
    }
    for (i, c) in spec.topology_spread_constraints.iter().flatten().enumerate() {
        validate_spread(e, &format!("{}[{i}]", child(path, "topologySpreadConstraints")), c);
    }
    storage::validate_pod_volumes(e, &child(path, "volumes"), spec.volumes.as_deref());
    e.non_negative(&child(path, "terminationGracePeriodSeconds"), spec.termination_grace_period_seconds);
    if let Some(d) = spec.active_deadline_seconds {
        if !(1..=i64::from(i32::MAX)).contains(&d) {
            e.invalid_int(
                child(path, "activeDeadlineSeconds"),
                d,
                "must be between 1 and 2147483647, inclusive",
            );
        }
    }
}

fn validate_container(e: &mut Errors, path: &str, c: &Container) {
    if c.name.is_empty() {
        e.required(child(path, "name"), "");
    } else if let Err(m) = check_dns_label(&c.name) {
        e.invalid(child(path, "name"), &c.name, &m);
    }
    if c.image.as_deref().is_none_or(|i| i.trim().is_empty()) {
        e.required(child(path, "image"), "");
    }
    if let Some(r) = &c.resources {
        validate_requirements(e, &child(path, "resources"), r);
    }
}

fn validate_requirements(e: &mut Errors, path: &str, r: &ResourceRequirements) {
    let requests = child(path, "requests");
    let limits = child(path, "limits");
    validate_resource_list(e, &requests, r.requests.as_ref());
    validate_resource_list(e, &limits, r.limits.as_ref());
    for (name, q) in r.requests.iter().flatten() {
        let Some(limit) = r.limits.as_ref().and_then(|l| l.get(name)) else { continue };
        if let (Ok(req), Ok(lim)) = (check_quantity(name, q), check_quantity(name, limit)) {
            if req > lim {
                e.invalid(
                    key(&requests, name),
                    &q.0,
                    &format!("must be less than or equal to {name} limit of {}", limit.0),
                );
            }
        }
    }
}

fn validate_toleration(e: &mut Errors, path: &str, t: &Toleration) {
    let op = t.operator.as_deref().unwrap_or("Equal");
    let tkey = t.key.as_deref().unwrap_or("");
    if !tkey.is_empty() {
        for m in qualified_name_errors(tkey) {
            e.invalid(child(path, "key"), tkey, &m);
        }
    }
    match op {
        "Equal" | "" => {
            if tkey.is_empty() {
                e.invalid(child(path, "operator"), op, "operator must be Exists when `key` is empty, which means \"match all values and all keys\"");
            }
            if let Some(v) = t.value.as_deref() {
                for m in label_value_errors(v) {
                    e.invalid(child(path, "value"), v, &m);
                }
            }
        }
        "Exists" => {
            if t.value.as_deref().is_some_and(|v| !v.is_empty()) {
                e.invalid(child(path, "operator"), op, "value must be empty when `operator` is 'Exists'");
            }
        }
        other => e.not_supported(child(path, "operator"), other, &["Equal", "Exists"]),
    }
    if let Some(effect) = t.effect.as_deref().filter(|x| !x.is_empty()) {
        if !TAINT_EFFECTS.contains(&effect) {
            e.not_supported(child(path, "effect"), effect, &TAINT_EFFECTS);
        }
    }
    if t.toleration_seconds.is_some() && t.effect.as_deref() != Some("NoExecute") {
        e.invalid(
            child(path, "effect"),
            t.effect.as_deref().unwrap_or(""),
            "effect must be 'NoExecute' when `tolerationSeconds` is set",
        );
    }
}

fn validate_selector(e: &mut Errors, path: &str, s: &LabelSelector) {
    validate_labels(e, &child(path, "matchLabels"), s.match_labels.as_ref());
    for (i, r) in s.match_expressions.iter().flatten().enumerate() {
        let rpath = format!("{}[{i}]", child(path, "matchExpressions"));
        for m in qualified_name_errors(&r.key) {
            e.invalid(child(&rpath, "key"), &r.key, &m);
        }
        let values = r.values.as_ref().map_or(0, Vec::len);
        match r.operator.as_str() {
            "In" | "NotIn" if values == 0 => {
                e.required(child(&rpath, "values"), "must be specified when `operator` is 'In' or 'NotIn'")
            }
            "Exists" | "DoesNotExist" if values > 0 => e.forbidden(
                child(&rpath, "values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            ),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => {
                e.not_supported(child(&rpath, "operator"), other, &["DoesNotExist", "Exists", "In", "NotIn"])
            }
        }
    }
}

fn validate_node_selector_term(e: &mut Errors, path: &str, term: &NodeSelectorTerm) {
    for (list, reqs) in [("matchExpressions", &term.match_expressions), ("matchFields", &term.match_fields)] {
        for (i, r) in reqs.iter().flatten().enumerate() {
            let rpath = format!("{}[{i}]", child(path, list));
            if list == "matchExpressions" {
                for m in qualified_name_errors(&r.key) {
                    e.invalid(child(&rpath, "key"), &r.key, &m);
                }
            }
            let values = r.values.as_ref().map_or(0, Vec::len);
            match r.operator.as_str() {
                "In" | "NotIn" if values == 0 => e.required(
                    child(&rpath, "values"),
                    "must be specified when `operator` is 'In' or 'NotIn'",
                ),
                "Exists" | "DoesNotExist" if values > 0 => e.forbidden(
                    child(&rpath, "values"),
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                ),
                "Gt" | "Lt" if values != 1 => e.required(
                    child(&rpath, "values"),
                    "must be specified single value when `operator` is 'Lt' or 'Gt'",
                ),
                "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
                other => e.not_supported(
                    child(&rpath, "operator"),
                    other,
                    &["DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn"],
                ),
            }
        }
    }
}

fn validate_affinity(e: &mut Errors, path: &str, a: &Affinity) {
    if let Some(na) = &a.node_affinity {
        let npath = child(path, "nodeAffinity");
        if let Some(req) = &na.required_during_scheduling_ignored_during_execution {
            let rpath = child(&npath, "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms");
            if req.node_selector_terms.is_empty() {
                e.required(rpath.clone(), "must have at least one node selector term");
            }
            for (i, t) in req.node_selector_terms.iter().enumerate() {
                validate_node_selector_term(e, &format!("{rpath}[{i}]"), t);
            }
        }
        for (i, p) in na.preferred_during_scheduling_ignored_during_execution.iter().flatten().enumerate() {
            let ppath = format!("{}[{i}]", child(&npath, "preferredDuringSchedulingIgnoredDuringExecution"));
            if !(1..=100).contains(&p.weight) {
                e.invalid_int(child(&ppath, "weight"), i64::from(p.weight), "must be in the range 1-100");
            }
            validate_node_selector_term(e, &child(&ppath, "preference"), &p.preference);
        }
    }
    for (name, terms) in [
        (
            "podAffinity",
            a.pod_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
        (
            "podAntiAffinity",
            a.pod_anti_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
    ] {
        let Some((required, preferred)) = terms else { continue };
        let apath = child(path, name);
        for (i, t) in required.iter().flatten().enumerate() {
            let tpath = format!("{}[{i}]", child(&apath, "requiredDuringSchedulingIgnoredDuringExecution"));
            if t.topology_key.is_empty() {
                e.required(child(&tpath, "topologyKey"), "can not be empty");
            } else {
                for m in qualified_name_errors(&t.topology_key) {
                    e.invalid(child(&tpath, "topologyKey"), &t.topology_key, &m);
                }
            }
            if let Some(s) = &t.label_selector {
                validate_selector(e, &child(&tpath, "labelSelector"), s);
            }
        }
        for (i, w) in preferred.iter().flatten().enumerate() {
            let wpath = format!("{}[{i}]", child(&apath, "preferredDuringSchedulingIgnoredDuringExecution"));
            if !(1..=100).contains(&w.weight) {
                e.invalid_int(child(&wpath, "weight"), i64::from(w.weight), "must be in the range 1-100");
            }
            let t = &w.pod_affinity_term;
            if t.topology_key.is_empty() {
                e.required(child(&wpath, "podAffinityTerm.topologyKey"), "can not be empty");
            }
            if let Some(s) = &t.label_selector {
                validate_selector(e, &child(&wpath, "podAffinityTerm.labelSelector"), s);
            }
        }
    }
}

fn validate_spread(e: &mut Errors, path: &str, c: &TopologySpreadConstraint) {
    if c.max_skew <= 0 {
        e.invalid_int(child(path, "maxSkew"), i64::from(c.max_skew), "must be greater than zero");
    }
    if c.topology_key.is_empty() {
        e.required(child(path, "topologyKey"), "can not be empty");
    } else {
        for m in qualified_name_errors(&c.topology_key) {
            e.invalid(child(path, "topologyKey"), &c.topology_key, &m);
        }
    }
    const WHEN: [&str; 2] = ["DoNotSchedule", "ScheduleAnyway"];
    if !WHEN.contains(&c.when_unsatisfiable.as_str()) {
        e.not_supported(child(path, "whenUnsatisfiable"), &c.when_unsatisfiable, &WHEN);
    }
    if let Some(m) = c.min_domains {
        if m <= 0 {
            e.invalid_int(child(path, "minDomains"), i64::from(m), "must be greater than zero");
        } else if c.when_unsatisfiable != "DoNotSchedule" {
            e.invalid_int(
                child(path, "minDomains"),
                i64::from(m),
                "can only use minDomains if whenUnsatisfiable=DoNotSchedule",
            );
        }
    }
    if let Some(s) = &c.label_selector {
        validate_selector(e, &child(path, "labelSelector"), s);
    }
}

fn validate_policy(e: &mut Errors, path: &str, policy: &PodGroupSchedulingPolicy) {
    match (&policy.gang, &policy.basic) {
        (Some(gang), None) => {
            let field = child(path, "gang.minCount");
            if gang.min_count == 0 {
                e.required(field, "must be greater than or equal to 1");
            } else if gang.min_count < 0 {
                e.invalid_int(field, i64::from(gang.min_count), "must be greater than zero");
            }
        }
        (None, Some(_)) => {}
        (None, None) => e.push(path, "Invalid value: \"\": must specify one of: `basic`, `gang`"),
        (Some(_), Some(_)) => e.push(
            path,
            "Invalid value: \"{`basic`, `gang`}\": exactly one of `basic`, `gang` is required, but multiple fields are set",
        ),
    }
}

fn validate_constraints(e: &mut Errors, path: &str, c: Option<&PodGroupSchedulingConstraints>) {
    let Some(topology) = c.and_then(|c| c.topology.as_ref()) else { return };
    if topology.len() > 1 {
        e.push(child(path, "topology"), format!("Too many: {}: must have at most 1 item", topology.len()));
    }
    for (i, t) in topology.iter().enumerate() {
        let tpath = format!("{}[{i}].key", child(path, "topology"));
        if t.key.is_empty() {
            e.required(tpath, "");
        } else {
            for m in qualified_name_errors(&t.key) {
                e.invalid(&tpath, &t.key, &m);
            }
        }
    }
}

fn validate_disruption_mode(e: &mut Errors, path: &str, mode: Option<&str>) {
    if let Some(mode) = mode {
        if !matches!(mode, "Pod" | "PodGroup") {
            e.not_supported(path, mode, &["Pod", "PodGroup"]);
        }
    }
}

fn validate_pod_group(e: &mut Errors, pg: &PodGroup) {
    let spec = &pg.spec;
    if let Some(w) = spec.pod_group_template_ref.as_ref().and_then(|r| r.workload.as_ref()) {
        for (field, value) in
            [("workloadName", &w.workload_name), ("podGroupTemplateName", &w.pod_group_template_name)]
        {
            let path = format!("spec.podGroupTemplateRef.workload.{field}");
            if value.is_empty() {
                e.required(path, "");
            } else if let Err(m) = check_dns_subdomain(value) {
                e.invalid(path, value, &m);
            }
        }
    }
    validate_policy(e, "spec.schedulingPolicy", &spec.scheduling_policy);
    validate_constraints(e, "spec.schedulingConstraints", spec.scheduling_constraints.as_ref());
    validate_disruption_mode(e, "spec.disruptionMode", spec.disruption_mode.as_deref());
    if let Some(pc) = spec.priority_class_name.as_deref().filter(|n| !n.is_empty()) {
        if let Err(m) = check_dns_subdomain(pc) {
            e.invalid("spec.priorityClassName", pc, &m);
        }
    }
}

fn validate_workload(e: &mut Errors, w: &Workload) {
    let templates = &w.spec.pod_group_templates;
    if templates.is_empty() {
        e.required("spec.podGroupTemplates", "must have at least one item");
    } else if templates.len() > MAX_WORKLOAD_TEMPLATES {
        e.push(
            "spec.podGroupTemplates",
            format!("Too many: {}: must have at most {MAX_WORKLOAD_TEMPLATES} items", templates.len()),
        );
    }
    let mut names = BTreeSet::new();
    for (i, t) in templates.iter().enumerate() {
        let path = format!("spec.podGroupTemplates[{i}]");
        if t.name.is_empty() {
            e.required(child(&path, "name"), "");
        } else if let Err(m) = check_dns_label(&t.name) {
            e.invalid(child(&path, "name"), &t.name, &m);
        } else if !names.insert(&t.name) {
            e.duplicate(child(&path, "name"), &t.name);
        }
        validate_policy(e, &child(&path, "schedulingPolicy"), &t.scheduling_policy);
        validate_constraints(e, &child(&path, "schedulingConstraints"), t.scheduling_constraints.as_ref());
        validate_disruption_mode(e, &child(&path, "disruptionMode"), t.disruption_mode.as_deref());
    }
    if let Some(r) = &w.spec.controller_ref {
        for (field, value) in [("kind", &r.kind), ("name", &r.name)] {
            if value.is_empty() {
                e.required(format!("spec.controllerRef.{field}"), "");
            }
        }
    }
}

fn validate_job(e: &mut Errors, j: &Job) {
    match j.spec.as_ref() {
        None => e.required("spec", ""),
        Some(spec) => {
            validate_job_spec(e, "spec", spec);
            let indexed = spec.completion_mode.as_deref() == Some("Indexed");
            if let (true, Some(c), Some(name)) = (indexed, spec.completions, j.metadata.name.as_deref()) {
                if c > 0 {
                    let host = format!("{name}-{}", c - 1);
                    if check_dns_label(&host).is_err() {
                        e.invalid(
                            "metadata.name",
                            name,
                            &format!("will not able to create pod with invalid DNS label: {host}"),
                        );
                    }
                }
            }
        }
    }
}

fn validate_job_spec(e: &mut Errors, path: &str, spec: &JobSpec) {
    for (field, v) in [
        ("parallelism", spec.parallelism.map(i64::from)),
        ("completions", spec.completions.map(i64::from)),
        ("activeDeadlineSeconds", spec.active_deadline_seconds),
        ("backoffLimit", spec.backoff_limit.map(i64::from)),
        ("ttlSecondsAfterFinished", spec.ttl_seconds_after_finished.map(i64::from)),
        ("backoffLimitPerIndex", spec.backoff_limit_per_index.map(i64::from)),
        ("maxFailedIndexes", spec.max_failed_indexes.map(i64::from)),
    ] {
        e.non_negative(&child(path, field), v);
    }
    if spec.max_failed_indexes.is_some() && spec.backoff_limit_per_index.is_none() {
        e.required(child(path, "backoffLimitPerIndex"), "when maxFailedIndexes is specified");
    }
    if let Some(m) = spec.managed_by.as_deref() {
        if m.len() > 63 {
            e.push(child(path, "managedBy"), "Too long: may not be more than 63 bytes");
        }
    }
    let mode = spec.completion_mode.as_deref().unwrap_or("NonIndexed");
    match mode {
        "Indexed" => {
            if spec.completions.is_none() {
                e.required(child(path, "completions"), "when completion mode is Indexed");
            }
            if let Some(p) = spec.parallelism.filter(|p| *p > MAX_INDEXED_PARALLELISM) {
                e.invalid_int(
                    child(path, "parallelism"),
                    i64::from(p),
                    &format!("must be less than or equal to {MAX_INDEXED_PARALLELISM} when completion mode is Indexed"),
                );
            }
            if let (Some(c), Some(m)) = (spec.completions, spec.max_failed_indexes) {
                if m > c {
                    e.invalid_int(
                        child(path, "maxFailedIndexes"),
                        i64::from(m),
                        "must be less than or equal to completions",
                    );
                }
            }
            if let Some(m) = spec.max_failed_indexes.filter(|m| *m > MAX_FAILED_INDEXES) {
                e.invalid_int(
                    child(path, "maxFailedIndexes"),
                    i64::from(m),
                    &format!("must be less than or equal to {MAX_FAILED_INDEXES}"),
                );
            }
            let high = spec.completions.is_some_and(|c| c > COMPLETIONS_SOFT_LIMIT);
            if high && spec.backoff_limit_per_index.is_some() {
                if spec.max_failed_indexes.is_none() {
                    e.required(
                        child(path, "maxFailedIndexes"),
                        &format!("must be specified when completions is above {COMPLETIONS_SOFT_LIMIT}"),
                    );
                }
                if let Some(p) = spec.parallelism.filter(|p| *p > PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS) {
                    e.invalid_int(
                        child(path, "parallelism"),
                        i64::from(p),
                        &format!(
                            "must be less than or equal to {PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS} when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
                        ),
                    );
                }
            }
        }
        "NonIndexed" => {
            if let Some(b) = spec.backoff_limit_per_index {
                e.invalid_int(
                    child(path, "backoffLimitPerIndex"),
                    i64::from(b),
                    "requires indexed completion mode",
                );
            }
            if let Some(m) = spec.max_failed_indexes {
                e.invalid_int(
                    child(path, "maxFailedIndexes"),
                    i64::from(m),
                    "requires indexed completion mode",
                );
            }
        }
        other => e.not_supported(child(path, "completionMode"), other, &["NonIndexed", "Indexed"]),
    }
    let template = child(path, "template");
    if let Some(meta) = &spec.template.metadata {
        validate_labels(e, &child(&template, "metadata.labels"), meta.labels.as_ref());
    }
    match &spec.template.spec {
        None => e.required(child(&template, "spec"), ""),
        Some(ps) => {
            let spath = child(&template, "spec");
            validate_pod_spec(e, &spath, ps, false);
            match ps.restart_policy.as_deref() {
                Some("OnFailure" | "Never") => {}
                None | Some("" | "Always") => {
                    e.required(child(&spath, "restartPolicy"), "valid values: \"OnFailure\", \"Never\"")
                }
                Some(_) => {} // reported by validate_pod_spec
            }
        }
    }
}

fn validate_cron_job(e: &mut Errors, c: &CronJob) {
    let spec = &c.spec;
    if spec.schedule.trim().is_empty() {
        e.required("spec.schedule", "");
    }
    if let Some(p) = spec.concurrency_policy.as_deref() {
        const POLICIES: [&str; 3] = ["Allow", "Forbid", "Replace"];
        if !POLICIES.contains(&p) {
            e.not_supported("spec.concurrencyPolicy", p, &POLICIES);
        }
    }
    e.non_negative("spec.startingDeadlineSeconds", spec.starting_deadline_seconds);
    e.non_negative("spec.successfulJobsHistoryLimit", spec.successful_jobs_history_limit.map(i64::from));
    e.non_negative("spec.failedJobsHistoryLimit", spec.failed_jobs_history_limit.map(i64::from));
    match &spec.job_template.spec {
        Some(js) => validate_job_spec(e, "spec.jobTemplate.spec", js),
        None => e.required("spec.jobTemplate.spec", ""),
    }
}

/// DRA device selectors: each needs a CEL expression (the API server also compiles it; the
/// scenario loader checks it against the CEL subset Placer evaluates).
fn validate_device_selectors(e: &mut Errors, path: &str, selectors: Option<&[DeviceSelector]>) {
    for (i, s) in selectors.unwrap_or(&[]).iter().enumerate() {
        match &s.cel {
            None => e.required(format!("{path}[{i}].cel"), ""),
            Some(c) if c.expression.trim().is_empty() => {
                e.required(format!("{path}[{i}].cel.expression"), "")
            }
            Some(_) => {}
        }
    }
}

fn validate_resource_slice(e: &mut Errors, rs: &ResourceSlice) {
    if rs.spec.driver.is_empty() {
        e.required("spec.driver", "");
    }
    if rs.spec.pool.name.is_empty() {
        e.required("spec.pool.name", "");
    }
    let set = [
        rs.spec.node_name.as_ref().is_some_and(|n| !n.is_empty()),
        rs.spec.node_selector.is_some(),
        rs.spec.all_nodes == Some(true),
        rs.spec.per_device_node_selection == Some(true),
    ];
    if set.iter().filter(|b| **b).count() != 1 {
        e.push(
            "spec",
            "Invalid value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required",
        );
    }
    if rs.spec.shared_counters.is_some() && rs.spec.devices.is_some() {
        e.invalid("spec", "", "only one of `sharedCounters` or `devices` is allowed");
    }
    let mut sets = BTreeSet::new();
    for (i, set) in rs.spec.shared_counters.iter().flatten().enumerate() {
        let at = format!("spec.sharedCounters[{i}]");
        if set.name.is_empty() {
            e.required(format!("{at}.name"), "");
        } else if let Err(m) = check_dns_label(&set.name) {
            e.invalid(format!("{at}.name"), &set.name, &m);
        } else if !sets.insert(set.name.as_str()) {
            e.duplicate(format!("{at}.name"), &set.name);
        }
        if set.counters.is_empty() {
            e.required(format!("{at}.counters"), "");
        }
        validate_counters(e, &format!("{at}.counters"), &set.counters);
    }
    let per_device = rs.spec.per_device_node_selection == Some(true);
    for (i, d) in rs.spec.devices.iter().flatten().enumerate() {
        let at = format!("spec.devices[{i}]");
        let mut consumed = BTreeSet::new();
        for (j, c) in d.consumes_counters.iter().flatten().enumerate() {
            let cat = format!("{at}.consumesCounters[{j}]");
            if c.counter_set.is_empty() {
                e.required(format!("{cat}.counterSet"), "");
            } else if !consumed.insert(c.counter_set.as_str()) {
                e.duplicate(format!("{cat}.counterSet"), &c.counter_set);
            }
            if c.counters.is_empty() {
                e.required(format!("{cat}.counters"), "");
            }
            validate_counters(e, &format!("{cat}.counters"), &c.counters);
        }
        let node_fields = [
            d.node_name.as_ref().map(|_| "`nodeName`"),
            d.node_selector.as_ref().map(|_| "`nodeSelector`"),
            (d.all_nodes == Some(true)).then_some("`allNodes`"),
        ];
        let set: Vec<&str> = node_fields.iter().flatten().copied().collect();
        if per_device {
            if set.len() != 1 {
                let what = "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec";
                if set.is_empty() {
                    e.required(at.clone(), what);
                } else {
                    e.invalid(at.clone(), &format!("{{{}}}", set.join(", ")), what);
                }
            }
        } else if d.node_name.is_some() || d.node_selector.is_some() || d.all_nodes.is_some() {
            e.invalid(at.clone(), "null", "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec");
        }
        let multi = d.allow_multiple_allocations == Some(true);
        for (name, cap) in d.capacity.iter().flatten() {
            let cat = key(&format!("{at}.capacity"), name);
            if let Some(policy) = &cap.request_policy {
                if multi {
                    validate_request_policy(e, &format!("{cat}.requestPolicy"), &cap.value, policy);
                } else {
                    e.forbidden(format!("{cat}.requestPolicy"), "allowMultipleAllocations must be true");
                }
            }
        }
        validate_binding_parameters(
            e,
            &at,
            d.binding_conditions.as_deref().unwrap_or(&[]),
            d.binding_failure_conditions.as_deref().unwrap_or(&[]),
        );
        for (j, t) in d.taints.iter().flatten().enumerate() {
            const EFFECTS: [&str; 3] = ["NoExecute", "NoSchedule", "None"];
            if t.key.is_empty() {
                e.required(format!("{at}.taints[{j}].key"), "");
            }
            if !EFFECTS.contains(&t.effect.as_str()) {
                e.not_supported(format!("{at}.taints[{j}].effect"), &t.effect, &EFFECTS);
            }
        }
    }
}

/// One `exactly` request or `firstAvailable` subrequest (`at` names it).
#[allow(clippy::too_many_arguments)]
fn validate_device_request(
    e: &mut Errors,
    at: &str,
    class: &str,
    mode: Option<&str>,
    count: Option<i64>,
    selectors: Option<&[DeviceSelector]>,
    tolerations: Option<&[DeviceToleration]>,
    capacity: Option<&CapacityRequirements>,
) {
    if class.is_empty() {
        e.required(format!("{at}.deviceClassName"), "");
    }
    match mode.unwrap_or("ExactCount") {
        "ExactCount" => {
            if let Some(c) = count.filter(|c| *c <= 0) {
                e.invalid_int(format!("{at}.count"), c, "must be greater than zero");
            }
        }
        "All" => {
            if count.is_some_and(|c| c != 0) {
                e.forbidden(format!("{at}.count"), "must not be set when `allocationMode` is `All`");
            }
        }
        other => e.not_supported(format!("{at}.allocationMode"), other, &["All", "ExactCount"]),
    }
    validate_device_selectors(e, &format!("{at}.selectors"), selectors);
    for (j, t) in tolerations.unwrap_or(&[]).iter().enumerate() {
        let tat = format!("{at}.tolerations[{j}]");
        match t.operator.as_deref().unwrap_or("Equal") {
            "Equal" => {
                if t.key.as_deref().unwrap_or("").is_empty() {
                    e.invalid(format!("{tat}.key"), "", "must be set when operator is `Equal`");
                }
            }
            "Exists" => {
                if t.value.as_deref().is_some_and(|v| !v.is_empty()) {
                    e.invalid(
                        format!("{tat}.value"),
                        t.value.as_deref().unwrap_or(""),
                        "must be empty when `operator` is 'Exists'",
                    );
                }
            }
            other => e.not_supported(format!("{tat}.operator"), other, &["Equal", "Exists"]),
        }
        if let Some(effect) = t.effect.as_deref().filter(|x| !x.is_empty()) {
            const EFFECTS: [&str; 2] = ["NoExecute", "NoSchedule"];
            if !EFFECTS.contains(&effect) {
                e.not_supported(format!("{tat}.effect"), effect, &EFFECTS);
            }
        }
    }
    for (name, q) in capacity.and_then(|c| c.requests.as_ref()).into_iter().flatten() {
        if let Err(err) = parse_milli(&q.0) {
            e.invalid(key(&format!("{at}.capacity.requests"), name), &q.0, &err.to_string());
        }
    }
}

/// Counters of a counter set or of a device's consumption: DNS labels, quantities.
fn validate_counters(
    e: &mut Errors,
    path: &str,
    counters: &BTreeMap<String, placer_api::k8s::api::resource::v1::Counter>,
) {
    for (name, c) in counters {
        let at = key(path, name);
        if let Err(m) = check_dns_label(name) {
            e.invalid(at.clone(), name, &m);
        }
        if let Err(err) = parse_milli(&c.value.0) {
            e.invalid(format!("{at}.value"), &c.value.0, &err.to_string());
        }
    }
}

/// A shared device's capacity `requestPolicy` (upstream's `validateRequestPolicy`).
fn validate_request_policy(
    e: &mut Errors,
    path: &str,
    value: &Quantity,
    policy: &placer_api::k8s::api::resource::v1::CapacityRequestPolicy,
) {
    let m = |q: &Quantity| parse_milli(&q.0).ok();
    let Some(max_capacity) = m(value) else { return };
    let values = policy.valid_values.as_deref().unwrap_or(&[]);
    if !values.is_empty() && policy.valid_range.is_some() {
        e.forbidden(path, "exactly one policy can be specified, cannot specify \"validValues\" and \"validRange\" at the same time");
        return;
    }
    if !values.is_empty() {
        let Some(default) = policy.default.as_ref() else {
            e.required(format!("{path}.default"), "required when validValues is defined");
            return;
        };
        let at = format!("{path}.validValues");
        for (i, pair) in values.windows(2).enumerate() {
            if m(&pair[0]) > m(&pair[1]) {
                e.invalid(format!("{at}[{}]", i + 1), &pair[1].0, "values must be sorted in ascending order");
            }
        }
        for (i, v) in values.iter().enumerate() {
            if m(v).is_some_and(|v| v > max_capacity) {
                e.invalid(
                    format!("{at}[{i}]"),
                    &v.0,
                    &format!("option is larger than capacity value: {}", value.0),
                );
            }
        }
        if !values.iter().any(|v| m(v).is_some() && m(v) == m(default)) {
            e.invalid(at, &default.0, "default value is not valid according to the requestPolicy");
        }
    } else if let Some(range) = &policy.valid_range {
        let at = format!("{path}.validRange");
        let Some(default) = policy.default.as_ref() else {
            e.required(format!("{path}.default"), "required when validRange is defined");
            return;
        };
        let (Some(min), Some(d)) = (m(&range.min), m(default)) else { return };
        if min > max_capacity {
            e.invalid(
                format!("{at}.min"),
                &range.min.0,
                &format!("min is larger than capacity value: {}", value.0),
            );
        }
        if d < min {
            e.invalid(format!("{at}.min"), &default.0, &format!("default is less than min: {}", range.min.0));
        }
        if let Some(max) = range.max.as_ref().and_then(m) {
            let raw = range.max.as_ref().map(|q| q.0.as_str()).unwrap_or("");
            if min > max {
                e.invalid(format!("{at}.max"), &range.min.0, &format!("min is larger than max: {raw}"));
            }
            if max > max_capacity {
                e.invalid(
                    format!("{at}.max"),
                    raw,
                    &format!("max is larger than capacity value: {}", value.0),
                );
            }
            if d > max {
                e.invalid(format!("{at}.max"), &default.0, &format!("default is more than max: {raw}"));
            }
        }
        if let Some(step) = range.step.as_ref().and_then(m).filter(|s| *s > 0) {
            let raw = range.step.as_ref().map(|q| q.0.as_str()).unwrap_or("");
            if min + step > max_capacity {
                e.invalid(
                    format!("{at}.step"),
                    raw,
                    &format!("one step is larger than capacity value: {}", value.0),
                );
            }
            if (d - min) % step != 0 {
                e.invalid(
                    format!("{at}.step"),
                    &default.0,
                    &format!("value is not a multiple of a given step ({raw}) from ({})", range.min.0),
                );
            }
        }
    }
}

/// A device's (or a result's) `bindingConditions` / `bindingFailureConditions` (upstream's
/// `validateDeviceBindingParameters`).
fn validate_binding_parameters(e: &mut Errors, at: &str, conditions: &[String], failures: &[String]) {
    const MAX: usize = 4;
    for (field, list) in [("bindingConditions", conditions), ("bindingFailureConditions", failures)] {
        let path = format!("{at}.{field}");
        if list.len() > MAX {
            e.push(path.clone(), format!("Too many: {}: must have at most {MAX} items", list.len()));
        }
        let mut seen = BTreeSet::new();
        for (i, c) in list.iter().enumerate() {
            if let Err(m) = check_label_key(c) {
                e.invalid(format!("{path}[{i}]"), c, &m);
            }
            if !seen.insert(c.as_str()) {
                e.duplicate(format!("{path}[{i}]"), c);
            }
        }
    }
    for (i, c) in failures.iter().enumerate() {
        if conditions.contains(c) {
            e.invalid(
                format!("{at}.bindingFailureConditions[{i}]"),
                c,
                "bindingFailureConditions must not overlap with bindingConditions",
            );
        }
    }
    if conditions.is_empty() && !failures.is_empty() {
        e.invalid(
            format!("{at}.bindingConditions"),
            "null",
            "bindingConditions are required to use bindingFailureConditions",
        );
    }
    if failures.is_empty() && !conditions.is_empty() {
        e.invalid(
            format!("{at}.bindingFailureConditions"),
            "null",
            "bindingFailureConditions are required to use bindingConditions",
        );
    }
}

/// A ResourceClaim spec (also inside a ResourceClaimTemplate), as the API server checks it.
fn validate_claim_spec(e: &mut Errors, path: &str, spec: &ResourceClaimSpec) {
    let devices = spec.devices.as_ref();
    let requests = devices.and_then(|d| d.requests.as_deref()).unwrap_or(&[]);
    let mut names = BTreeSet::new();
    for (i, r) in requests.iter().enumerate() {
        let at = format!("{path}.devices.requests[{i}]");
        if let Err(m) = check_dns_label(&r.name) {
            e.invalid(format!("{at}.name"), &r.name, &m);
        } else if !names.insert(r.name.clone()) {
            e.duplicate(format!("{at}.name"), &r.name);
        }
        match (&r.exactly, r.first_available.as_ref().filter(|l| !l.is_empty())) {
            (Some(_), Some(_)) | (None, None) => {
                e.push(at.clone(), "Invalid value: exactly one of `exactly` or `firstAvailable` is required")
            }
            (None, Some(subs)) => {
                const MAX_SUBREQUESTS: usize = 8;
                if subs.len() > MAX_SUBREQUESTS {
                    e.push(
                        format!("{at}.firstAvailable"),
                        format!("Too many: {}: must have at most {MAX_SUBREQUESTS} items", subs.len()),
                    );
                }
                let mut sub_names = BTreeSet::new();
                for (j, sr) in subs.iter().enumerate() {
                    let sat = format!("{at}.firstAvailable[{j}]");
                    if let Err(m) = check_dns_label(&sr.name) {
                        e.invalid(format!("{sat}.name"), &sr.name, &m);
                    } else if !sub_names.insert(sr.name.as_str()) {
                        e.duplicate(format!("{sat}.name"), &sr.name);
                    } else {
                        names.insert(format!("{}/{}", r.name, sr.name));
                    }
                    validate_device_request(
                        e,
                        &sat,
                        &sr.device_class_name,
                        sr.allocation_mode.as_deref(),
                        sr.count,
                        sr.selectors.as_deref(),
                        sr.tolerations.as_deref(),
                        sr.capacity.as_ref(),
                    );
                }
            }
            (Some(x), None) => validate_device_request(
                e,
                &format!("{at}.exactly"),
                &x.device_class_name,
                x.allocation_mode.as_deref(),
                x.count,
                x.selectors.as_deref(),
                x.tolerations.as_deref(),
                x.capacity.as_ref(),
            ),
        }
    }
    // Constraints: exactly one kind, naming requests (or `request/subrequest`) that exist.
    for (i, c) in devices.and_then(|d| d.constraints.as_deref()).unwrap_or(&[]).iter().enumerate() {
        let at = format!("{path}.devices.constraints[{i}]");
        if c.match_attribute.is_some() == c.distinct_attribute.is_some() {
            e.push(
                at.clone(),
                "Invalid value: exactly one of `matchAttribute` or `distinctAttribute` is required",
            );
        }
        for (j, n) in c.requests.iter().flatten().enumerate() {
            if !names.contains(n) {
                e.invalid(format!("{at}.requests[{j}]"), n, "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'");
            }
        }
    }
}

fn validate_priority_class(e: &mut Errors, pc: &PriorityClass) {
    let name = pc.metadata.name.as_deref().unwrap_or("");
    match pc.value {
        None => e.required("value", ""),
        Some(v) if v > HIGHEST_USER_DEFINABLE_PRIORITY && !name.starts_with("system-") => e.forbidden(
            "value",
            &format!("maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"),
        ),
        Some(_) => {}
    }
    if let Some(p) = pc.preemption_policy.as_deref() {
        const POLICIES: [&str; 2] = ["Never", "PreemptLowerPriority"];
        if !POLICIES.contains(&p) {
            e.not_supported("preemptionPolicy", p, &POLICIES);
        }
    }
}

fn validate_pdb(e: &mut Errors, pdb: &PodDisruptionBudget) {
    let Some(spec) = &pdb.spec else { return };
    if spec.min_available.is_some() && spec.max_unavailable.is_some() {
        e.invalid("spec", "", "minAvailable and maxUnavailable cannot be both set");
    }
    for (field, v) in [("minAvailable", &spec.min_available), ("maxUnavailable", &spec.max_unavailable)] {
        let path = format!("spec.{field}");
        match v {
            Some(IntOrString::Int(i)) if *i < 0 => e.invalid_int(path, i64::from(*i), "must be greater than or equal to 0"),
            Some(IntOrString::String(s)) => match s.strip_suffix('%').and_then(|n| n.parse::<i64>().ok()) {
                Some(p) if (0..=100).contains(&p) => {}
                Some(_) => e.invalid(path, s, "must not be greater than 100%"),
                None => e.invalid(path, s, "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%')"),
            },
            _ => {}
        }
    }
    if let Some(s) = &spec.selector {
        validate_selector(e, "spec.selector", s);
    }
}

// ---------------------------------------------------------------------------------------
// Update.

/// Everything wrong with replacing `old` by `new` (same kind, namespace and name): the
/// checks of a create on `new`, then what the API server keeps immutable.
pub fn validate_update(old: &Object, new: &Object) -> Vec<FieldError> {
    let mut errors = validate(new);
    let mut e = Errors(Vec::new());
    let (om, nm) = (old.metadata(), new.metadata());
    if let (Some(o), Some(n)) = (om.uid.as_deref(), nm.uid.as_deref()) {
        if !n.is_empty() && n != o {
            e.invalid("metadata.uid", n, "field is immutable");
        }
    }
    match (old, new) {
        (Object::Pod(o), Object::Pod(n)) => pod_update(&mut e, o, n),
        (Object::PodGroup(o), Object::PodGroup(n)) => {
            immutable_fields(&mut e, "spec", &json(&o.spec), &json(&n.spec));
        }
        (Object::Workload(o), Object::Workload(n)) => {
            if o.spec.controller_ref.is_some() {
                immutable(
                    &mut e,
                    "spec.controllerRef",
                    json(&o.spec.controller_ref),
                    json(&n.spec.controller_ref),
                );
            }
            immutable(
                &mut e,
                "spec.podGroupTemplates",
                json(&o.spec.pod_group_templates),
                json(&n.spec.pod_group_templates),
            );
        }
        (Object::Job(o), Object::Job(n)) => job_update(&mut e, o, n),
        (Object::PriorityClass(o), Object::PriorityClass(n)) => {
            if o.value != n.value {
                e.forbidden("value", "may not be changed in an update.");
            }
            immutable(&mut e, "preemptionPolicy", json(&o.preemption_policy), json(&n.preemption_policy));
        }
        _ => storage::storage_update(&mut e, old, new),
    }
    errors.extend(e.0);
    errors
}

fn json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn immutable(e: &mut Errors, path: &str, old: Value, new: Value) {
    if old != new {
        e.push(path, format!("Invalid value: {}: field is immutable", echo_json(&new)));
    }
}

/// Every field of `old` / `new` (objects) is immutable: one error per changed field.
fn immutable_fields(e: &mut Errors, path: &str, old: &Value, new: &Value) {
    let empty = serde_json::Map::new();
    let (o, n) = (old.as_object().unwrap_or(&empty), new.as_object().unwrap_or(&empty));
    let keys: BTreeSet<&String> = o.keys().chain(n.keys()).collect();
    for k in keys {
        let (ov, nv) = (o.get(k).cloned().unwrap_or(Value::Null), n.get(k).cloned().unwrap_or(Value::Null));
        immutable(e, &child(path, k), ov, nv);
    }
}

/// The first place where `a` and `b` differ: its path and both values.
fn first_difference(path: &str, a: &Value, b: &Value) -> Option<(String, Value, Value)> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                let (xa, yb) = (x.get(k).unwrap_or(&Value::Null), y.get(k).unwrap_or(&Value::Null));
                first_difference(&child(path, k), xa, yb)
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (xa, yb))| first_difference(&format!("{path}[{i}]"), xa, yb)),
        _ if a == b => None,
        _ => Some((path.to_string(), a.clone(), b.clone())),
    }
}

const UPDATABLE_POD_SPEC_FIELDS: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// kube-apiserver's `ValidatePodUpdate`: the spec is immutable but for images, a lower
/// `activeDeadlineSeconds`, added tolerations, removed scheduling gates and, while the pod
/// is gated, added node selectors. `spec.nodeName` is set only by the binding subresource,
/// and container resources only by the `resize` subresource.
fn pod_update(e: &mut Errors, old: &Pod, new: &Pod) {
    let (Some(os), Some(ns)) = (old.spec.as_ref(), new.spec.as_ref()) else { return };
    if os == ns {
        return;
    }
    let mut munged = ns.clone();
    if munged.containers.len() == os.containers.len() {
        for (c, o) in munged.containers.iter_mut().zip(&os.containers) {
            c.image = o.image.clone();
        }
    }
    if let (Some(nc), Some(oc)) = (munged.init_containers.as_mut(), os.init_containers.as_ref()) {
        if nc.len() == oc.len() {
            for (c, o) in nc.iter_mut().zip(oc) {
                c.image = o.image.clone();
            }
        }
    }
    match (ns.active_deadline_seconds, os.active_deadline_seconds) {
        (Some(n), Some(o)) if n > o => {
            e.invalid_int("spec.activeDeadlineSeconds", n, "must be less than or equal to previous value")
        }
        (None, Some(_)) => e.push(
            "spec.activeDeadlineSeconds",
            "Invalid value: null: must not update from a positive integer to nil value",
        ),
        _ => {}
    }
    munged.active_deadline_seconds = os.active_deadline_seconds;
    let old_tolerations = os.tolerations.clone().unwrap_or_default();
    let new_tolerations = ns.tolerations.clone().unwrap_or_default();
    for (i, t) in old_tolerations.iter().enumerate() {
        let kept = new_tolerations.iter().any(|n| {
            n.key == t.key && n.operator == t.operator && n.value == t.value && n.effect == t.effect
        });
        if !kept {
            e.forbidden(
                format!("spec.tolerations[{i}]"),
                "existing toleration can not be modified except its tolerationSeconds",
            );
        }
    }
    munged.tolerations = os.tolerations.clone();
    let old_gates: Vec<String> = os.scheduling_gates.iter().flatten().map(|g| g.name.clone()).collect();
    for g in ns.scheduling_gates.iter().flatten() {
        if !old_gates.contains(&g.name) {
            let detail = format!("only deletion is allowed, but found new scheduling gate {}", echo(&g.name));
            e.forbidden("spec.schedulingGates", &detail);
        }
    }
    munged.scheduling_gates = os.scheduling_gates.clone();
    if !old_gates.is_empty() {
        // A gated pod may gain node selectors (never lose or change them).
        let old_sel = os.node_selector.clone().unwrap_or_default();
        let new_sel = ns.node_selector.clone().unwrap_or_default();
        if old_sel.iter().all(|(k, v)| new_sel.get(k) == Some(v)) {
            munged.node_selector = os.node_selector.clone();
        }
        let old_required = os
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref());
        if old_required.is_none() {
            let node_affinity = os.affinity.as_ref().and_then(|a| a.node_affinity.clone());
            if let Some(a) = munged.affinity.as_mut() {
                a.node_affinity = node_affinity;
            }
            if munged.affinity.as_ref().is_some_and(|a| {
                a.pod_affinity.is_none() && a.pod_anti_affinity.is_none() && a.node_affinity.is_none()
            }) && os.affinity.is_none()
            {
                munged.affinity = None;
            }
        }
    }
    if let (Some(o), Some(n)) = (os.termination_grace_period_seconds, munged.termination_grace_period_seconds)
    {
        if o < 0 && n == 1 {
            munged.termination_grace_period_seconds = Some(o);
        }
    }
    if munged != *os {
        let changed = first_difference("spec", &json(os), &json(&munged))
            .map(|(path, from, to)| {
                format!("; {path} changed from {} to {}", echo_json(&from), echo_json(&to))
            })
            .unwrap_or_default();
        e.forbidden(
            "spec",
            &format!("pod updates may not change fields other than {UPDATABLE_POD_SPEC_FIELDS}{changed}"),
        );
    }
}

/// kube-apiserver's `ValidateJobUpdate` for the fields Placer reads: `completions`
/// (changed only together with `parallelism` of an Indexed Job, "elastic Indexed Jobs"),
/// `completionMode`, `selector`, `managedBy`, the failure and success policies, and the
/// pod template (mutable only in a suspended Job that never started, and then only its
/// scheduling directives) are immutable.
fn job_update(e: &mut Errors, old: &Job, new: &Job) {
    let (Some(os), Some(ns)) = (old.spec.as_ref(), new.spec.as_ref()) else { return };
    let indexed = ns.completion_mode.as_deref() == Some("Indexed");
    let elastic = indexed
        && ns.completions.is_some()
        && ns.completions == ns.parallelism
        && os.completions == os.parallelism;
    if !elastic {
        immutable(e, "spec.completions", json(&os.completions), json(&ns.completions));
    }
    immutable(e, "spec.completionMode", json(&os.completion_mode), json(&ns.completion_mode));
    immutable(e, "spec.selector", json(&os.selector), json(&ns.selector));
    immutable(e, "spec.managedBy", json(&os.managed_by), json(&ns.managed_by));
    immutable(e, "spec.podFailurePolicy", json(&os.pod_failure_policy), json(&ns.pod_failure_policy));
    immutable(
        e,
        "spec.backoffLimitPerIndex",
        json(&os.backoff_limit_per_index),
        json(&ns.backoff_limit_per_index),
    );
    immutable(e, "spec.successPolicy", json(&os.success_policy), json(&ns.success_policy));
    let never_started = old.status.as_ref().is_none_or(|s| s.start_time.is_none());
    let suspended = os.suspend == Some(true);
    let mut template = ns.template.clone();
    if suspended && never_started {
        // Mutable scheduling directives of a suspended Job.
        let o = &os.template;
        if let (Some(t), Some(ot)) = (template.spec.as_mut(), o.spec.as_ref()) {
            t.node_selector = ot.node_selector.clone();
            t.affinity = ot.affinity.clone();
            t.tolerations = ot.tolerations.clone();
            t.scheduling_gates = ot.scheduling_gates.clone();
        }
        template.metadata = o.metadata.clone();
    }
    if template != os.template {
        let changed = first_difference("spec.template", &json(&os.template), &json(&template))
            .map(|(path, _, to)| format!(" ({path} changed to {})", echo_json(&to)))
            .unwrap_or_default();
        e.push("spec.template", format!("Invalid value: the pod template: field is immutable{changed}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::api::core::v1::PodSpec;
    use serde_json::json;

    fn obj(kind: Kind, v: Value) -> Object {
        Object::from_json(kind, v).unwrap()
    }

    fn pod(spec: Value) -> Object {
        obj(
            Kind::Pod,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": spec}),
        )
    }

    fn errors(o: &Object) -> Vec<String> {
        validate(o).iter().map(ToString::to_string).collect()
    }

    fn slice(spec: Value) -> Object {
        let mut full = json!({"driver": "gpu.example.com", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}});
        merge_json_test(&mut full, spec);
        obj(
            Kind::ResourceSlice,
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": full}),
        )
    }

    fn merge_json_test(target: &mut Value, patch: Value) {
        if let (Value::Object(t), Value::Object(p)) = (target, patch) {
            t.extend(p);
        }
    }

    /// Upstream's validateResourceSliceSpec / validateDevice (v1.36) for partitionable
    /// devices, consumable capacity and binding conditions.
    #[test]
    fn resource_slices_of_v1_36_features_follow_the_api_server() {
        let got = errors(&slice(json!({"nodeName": "n1",
            "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "8Gi"}}}],
            "devices": [{"name": "d"}]})));
        assert_eq!(got, ["spec: Invalid value: \"\": only one of `sharedCounters` or `devices` is allowed"]);
        let got = errors(&slice(json!({"perDeviceNodeSelection": true,
            "devices": [{"name": "a", "nodeName": "n1"}, {"name": "b"}]})));
        assert_eq!(got, ["spec.devices[1]: Required value: exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec"]);
        let got = errors(&slice(json!({"nodeName": "n1", "devices": [{"name": "a",
            "bindingConditions": ["example.com/attached"]}]})));
        assert_eq!(got, ["spec.devices[0].bindingFailureConditions: Invalid value: \"null\": bindingFailureConditions are required to use bindingConditions"]);
        let got = errors(&slice(
            json!({"nodeName": "n1", "devices": [{"name": "a", "allowMultipleAllocations": true,
            "capacity": {"bw": {"value": "10Gi", "requestPolicy": {"default": "2Gi",
                "validRange": {"min": "1Gi", "step": "2Gi"}}}}}]}),
        ));
        assert_eq!(got, ["spec.devices[0].capacity[bw].requestPolicy.validRange.step: Invalid value: \"2Gi\": value is not a multiple of a given step (2Gi) from (1Gi)"]);
        let ok = errors(&slice(
            json!({"nodeName": "n1", "devices": [{"name": "a", "allowMultipleAllocations": true,
            "bindingConditions": ["example.com/attached"], "bindingFailureConditions": ["example.com/failed"],
            "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "4Gi"}}}],
            "capacity": {"bw": {"value": "10Gi", "requestPolicy": {"default": "2Gi", "validValues": ["2Gi", "4Gi"]}}}}]}),
        ));
        assert_eq!(ok, Vec::<String>::new());
    }

    #[test]
    fn a_minimal_pod_is_valid() {
        assert_eq!(errors(&pod(json!({"containers": [{"name": "c", "image": "x"}]}))), Vec::<String>::new());
    }

    #[test]
    fn containers_need_a_name_and_an_image() {
        let got = errors(&pod(json!({"containers": [{"name": "c"}, {"name": "c", "image": "x"}]})));
        assert_eq!(
            got,
            ["spec.containers[0].image: Required value", "spec.containers[1].name: Duplicate value: \"c\""]
        );
    }

    #[test]
    fn quantities_are_checked_with_map_keys_in_brackets() {
        let got = errors(&pod(json!({"containers": [{"name": "c", "image": "x", "resources": {
            "requests": {"cpu": "-1", "memory": "2Gi"}, "limits": {"memory": "1Gi"}}}]})));
        assert_eq!(
            got,
            [
                "spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
                "spec.containers[0].resources.requests[memory]: Invalid value: \"2Gi\": must be less than or equal to memory limit of 1Gi",
            ]
        );
    }

    #[test]
    fn long_values_are_echoed_at_most_200_characters() {
        let long = "x".repeat(10_000);
        let o = obj(
            Kind::Node,
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": {"a": long}}}),
        );
        let got = errors(&o);
        assert_eq!(got.len(), 1);
        assert!(got[0].len() < 400, "{}", got[0].len());
        assert!(got[0].contains("(10000 characters)"), "{}", got[0]);
        assert!(got[0].starts_with("metadata.labels[a]: Invalid value: \"xxx"), "{}", got[0]);
    }

    #[test]
    fn escapes_count_towards_the_echo_limit() {
        // Found by the quantity fuzz target: 200 control characters print as 1,200.
        let text = format!("{}.-1G", "\u{17}".repeat(300));
        let shown = echo(&text);
        assert!(shown.chars().count() <= MAX_ECHO_CHARS + 40, "{shown}");
        assert!(shown.ends_with("(304 characters)"), "{shown}");
        assert_eq!(echo("a\u{17}"), "\"a\\u{17}\"");
        let exact = "y".repeat(MAX_ECHO_CHARS);
        assert_eq!(echo(&exact), format!("{exact:?}"));
    }

    #[test]
    fn label_keys_and_lengths() {
        let o = obj(
            Kind::Node,
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n",
            "labels": {"bad key!": "v", "ok": "y".repeat(64), "p/": "v"}}}),
        );
        let got = errors(&o);
        // Go's IsQualifiedName gives an empty name part two messages.
        assert_eq!(got.len(), 4, "{got:?}");
        assert!(
            got[0].starts_with(
                "metadata.labels[bad key!]: Invalid value: \"bad key!\": name part must consist"
            ),
            "{}",
            got[0]
        );
        assert!(got[1].ends_with("must be no more than 63 characters"), "{}", got[1]);
        assert!(got[2].ends_with("name part must be non-empty"), "{}", got[2]);
        assert!(got[3].contains("name part must consist"), "{}", got[3]);
    }

    /// Node affinity terms, selectors and topology keys report invalid label keys and
    /// values in the words of apimachinery's IsQualifiedName / IsValidLabelValue.
    #[test]
    fn label_keys_and_values_are_worded_as_apimachinery() {
        let p = pod(json!({"containers": [{"name": "c", "image": "x"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "bad key!", "operator": "In", "values": ["ok"]}]}]}},
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "Example.com/zone", "labelSelector": {"matchLabels": {"app": "has space"}}}]}}}));
        let got = errors(&p).join("\n");
        assert!(got.contains("Invalid value: \"bad key!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"), "{got}");
        assert!(got.contains("Invalid value: \"has space\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"), "{got}");
        assert!(got.contains("Invalid value: \"Example.com/zone\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"), "{got}");
    }

    #[test]
    fn annotations_are_limited_to_256_kib_in_total() {
        let big = "v".repeat(200 * 1024);
        let o = obj(
            Kind::Node,
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n",
            "annotations": {"a": big.clone(), "b": big}}}),
        );
        let got = errors(&o);
        assert_eq!(got, ["metadata.annotations: Too long: may not be more than 262144 bytes (the annotations have 409602)"]);
    }

    #[test]
    fn objects_larger_than_etcd_accepts_are_rejected() {
        let args: Vec<String> =
            (0..40_000).map(|i| format!("argument-number-{i:08}-with-padding-to-be-long")).collect();
        let got = errors(&pod(json!({"containers": [{"name": "c", "image": "x", "args": args}]})));
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].starts_with("Too long: the object is "), "{}", got[0]);
    }

    #[test]
    fn indexed_jobs_are_capped_as_the_api_server_caps_them() {
        let job = |parallelism: i64, completions: i64| {
            obj(
                Kind::Job,
                json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "default"},
                "spec": {"completionMode": "Indexed", "parallelism": parallelism, "completions": completions,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}}),
            )
        };
        assert_eq!(
            errors(&job(2_147_483_647, 2_147_483_647)),
            ["spec.parallelism: Invalid value: 2147483647: must be less than or equal to 100000 when completion mode is Indexed"]
        );
        assert!(errors(&job(100_000, 100_000)).is_empty());
        assert!(errors(&job(4, 2_147_483_647)).is_empty(), "many completions, low parallelism: valid");
    }

    #[test]
    fn jobs_need_a_restart_policy_other_than_always() {
        let got = errors(&obj(
            Kind::Job,
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "default"},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}),
        ));
        assert_eq!(
            got,
            ["spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""]
        );
    }

    #[test]
    fn gang_min_count_must_be_positive() {
        let pg = |min: i64| {
            obj(
                Kind::PodGroup,
                json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                "metadata": {"name": "pg", "namespace": "default"}, "spec": {"schedulingPolicy": {"gang": {"minCount": min}}}}),
            )
        };
        assert_eq!(
            errors(&pg(0)),
            ["spec.schedulingPolicy.gang.minCount: Required value: must be greater than or equal to 1"]
        );
        assert_eq!(
            errors(&pg(-2)),
            ["spec.schedulingPolicy.gang.minCount: Invalid value: -2: must be greater than zero"]
        );
        assert!(errors(&pg(2)).is_empty());
    }

    fn with_uid(mut o: Object, uid: &str) -> Object {
        o.metadata_mut().uid = Some(uid.into());
        o
    }

    #[test]
    fn a_bound_pod_keeps_its_node_and_its_requests() {
        let spec = |node: &str, cpu: &str| json!({"nodeName": node, "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]});
        let old = with_uid(pod(spec("n1", "1")), "u");
        let moved = with_uid(pod(spec("n2", "1")), "u");
        let got: Vec<String> = validate_update(&old, &moved).iter().map(ToString::to_string).collect();
        assert_eq!(got.len(), 1);
        assert!(
            got[0].starts_with("spec: Forbidden: pod updates may not change fields other than"),
            "{}",
            got[0]
        );
        assert!(got[0].ends_with("; spec.nodeName changed from \"n1\" to \"n2\""), "{}", got[0]);
        let bigger = with_uid(pod(spec("n1", "16")), "u");
        let got = validate_update(&old, &bigger);
        assert!(
            got[0].message.contains("spec.containers[0].resources.requests.cpu changed from \"1\" to \"16\""),
            "{got:?}"
        );
        let new_image = {
            let mut p = old.clone();
            if let Some(p) = p.as_pod_mut() {
                p.spec.as_mut().unwrap().containers[0].image = Some("y".into());
            }
            p
        };
        assert!(validate_update(&old, &new_image).is_empty(), "images may change");
    }

    #[test]
    fn tolerations_may_only_be_added_and_gates_only_removed() {
        let spec = |tolerations: Value, gates: Value| json!({"containers": [{"name": "c", "image": "x"}], "tolerations": tolerations, "schedulingGates": gates});
        let old =
            pod(spec(json!([{"key": "a", "operator": "Exists"}]), json!([{"name": "g1"}, {"name": "g2"}])));
        let ok = pod(spec(
            json!([{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]),
            json!([{"name": "g1"}]),
        ));
        assert!(validate_update(&old, &ok).is_empty(), "{:?}", validate_update(&old, &ok));
        let bad = pod(spec(json!([]), json!([{"name": "g1"}, {"name": "g2"}, {"name": "g3"}])));
        let got: Vec<String> = validate_update(&old, &bad).iter().map(|e| e.field.clone()).collect();
        assert_eq!(got, ["spec.tolerations[0]", "spec.schedulingGates"]);
    }

    #[test]
    fn podgroup_spec_is_immutable_and_uid_too() {
        let pg = |spec: Value| {
            obj(
                Kind::PodGroup,
                json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                "metadata": {"name": "pg", "namespace": "default", "uid": "u1"}, "spec": spec}),
            )
        };
        let old = pg(json!({"schedulingPolicy": {"gang": {"minCount": 4}}}));
        let new = pg(
            json!({"schedulingPolicy": {"gang": {"minCount": 2}}, "schedulingConstraints": {"topology": [{"key": "rack"}]}}),
        );
        let got: Vec<String> = validate_update(&old, &new).iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            [
                "spec.schedulingConstraints: Invalid value: {\"topology\":[{\"key\":\"rack\"}]}: field is immutable",
                "spec.schedulingPolicy: Invalid value: {\"gang\":{\"minCount\":2}}: field is immutable",
            ]
        );
        let other_uid = with_uid(old.clone(), "u2");
        assert_eq!(
            validate_update(&old, &other_uid)[0].to_string(),
            "metadata.uid: Invalid value: \"u2\": field is immutable"
        );
    }

    #[test]
    fn volume_attachments_need_an_attacher_a_node_and_one_source_and_keep_their_spec() {
        let va = |spec: Value| {
            obj(
                Kind::VolumeAttachment,
                json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "va"}, "spec": spec}),
            )
        };
        let good = va(
            json!({"attacher": "ebs.csi.aws.com", "nodeName": "n1", "source": {"persistentVolumeName": "pv"}}),
        );
        assert!(errors(&good).is_empty(), "{:?}", errors(&good));
        assert_eq!(
            errors(&va(json!({"attacher": "", "nodeName": "", "source": {}}))),
            [
                "spec.attacher: Required value",
                "spec.nodeName: Required value",
                "spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName",
            ]
        );
        assert_eq!(
            errors(&va(json!({"attacher": "a", "nodeName": "n", "source": {"persistentVolumeName": ""}}))),
            ["spec.source.persistentVolumeName: Required value: must specify non empty persistentVolumeName"]
        );
        let moved = va(
            json!({"attacher": "ebs.csi.aws.com", "nodeName": "n2", "source": {"persistentVolumeName": "pv"}}),
        );
        let got: Vec<String> = validate_update(&good, &moved).iter().map(ToString::to_string).collect();
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].starts_with("spec: Invalid value: ") && got[0].ends_with("field is immutable"),
            "{got:?}"
        );
    }

    #[test]
    fn job_parallelism_may_change_but_completions_and_template_may_not() {
        let job = |parallelism: i64, completions: i64, image: &str| {
            obj(
                Kind::Job,
                json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "default"},
                "spec": {"parallelism": parallelism, "completions": completions,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": image}]}}}}),
            )
        };
        let old = job(4, 8, "x");
        assert!(validate_update(&old, &job(2, 8, "x")).is_empty());
        let got: Vec<String> =
            validate_update(&old, &job(4, 9, "y")).iter().map(|e| e.field.clone()).collect();
        assert_eq!(got, ["spec.completions", "spec.template"]);
    }

    #[test]
    fn first_difference_finds_the_changed_leaf() {
        let a = json(&PodSpec { node_name: Some("a".into()), ..Default::default() });
        let b = json(&PodSpec { node_name: Some("b".into()), ..Default::default() });
        assert_eq!(first_difference("spec", &a, &b).map(|d| d.0), Some("spec.nodeName".to_string()));
    }
}
