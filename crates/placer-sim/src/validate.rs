//! Validation of a typed scenario, before anything runs.
//!
//! k8s-openapi accepts what Kubernetes' schema allows and defaults what is missing (an
//! absent `spec` becomes an empty one), so the checks the API server would make are done
//! here: required fields, quantities, PodGroup policies, names and labels, plus the
//! scenario's own rules (feature gates, topology levels, generated clusters, step and
//! expectation syntax, duplicate names). Every problem is collected, with the position
//! of the manifest, the object and the field path.

use std::collections::{BTreeMap, BTreeSet};

use placer_api::gates::FeatureGates;
use placer_api::k8s::api::core::v1::{Container, PodSpec, ResourceRequirements, Taint, Toleration};
use placer_api::k8s::api::scheduling::v1alpha2::{PodGroupSchedulingConstraints, PodGroupSchedulingPolicy};
use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use placer_api::quantity::{parse_milli, parse_units};
use placer_cluster::{Kind, Object};

use crate::generate::generated_node_names;
use crate::load::{split_key, Problem};
use crate::scenario::{Expect, Manifest, Scenario, StepAction};

/// Largest cluster `cluster.generate` may describe.
pub const MAX_GENERATED_NODES: usize = 200_000;

/// Collects every problem of `s` into `problems`.
pub(crate) fn validate(s: &Scenario, problems: &mut Vec<Problem>) {
    let top = |at: &str, field: &str, message: String| Problem {
        line: 0,
        column: 0,
        at: at.to_string(),
        object: None,
        field: field.to_string(),
        message,
    };
    if !is_kebab(&s.name) {
        problems.push(top("name", "", format!("{:?} must be kebab-case (a-z, 0-9 and '-')", s.name)));
    }
    validate_scheduler(s, problems, &top);

    // Nodes: listed and generated, names unique.
    let mut node_names: BTreeSet<String> = BTreeSet::new();
    for m in &s.nodes {
        let mut cx = Ctx::new(m, problems);
        validate_object(&mut cx, &m.object);
        if let Some(name) = m.object.metadata().name.clone() {
            if !node_names.insert(name.clone()) {
                cx.err("metadata.name", format!("duplicate Node name {name:?}"));
            }
        }
    }
    if let Some(g) = &s.generate {
        validate_generate(g, problems, &top);
        if g.node_count() <= MAX_GENERATED_NODES && g.levels.len() == g.fanout.len() {
            for name in generated_node_names(g) {
                if !node_names.insert(name.clone()) {
                    problems.push(top(
                        "cluster.generate",
                        "",
                        format!("generated node {name:?} is also listed"),
                    ));
                }
            }
        }
    }

    // Pods already bound.
    for m in &s.pods {
        let mut cx = Ctx::new(m, problems);
        validate_object(&mut cx, &m.object);
        let node = m.object.as_pod().and_then(|p| p.spec.as_ref()).and_then(|s| s.node_name.clone());
        match node.filter(|n| !n.is_empty()) {
            None => {
                cx.err("spec.nodeName", "is required: cluster.pods are pods already bound to a node".into())
            }
            Some(n) if !node_names.contains(&n) => {
                cx.err("spec.nodeName", format!("node {n:?} is not in the cluster"));
            }
            Some(_) => {}
        }
    }

    // Submitted objects: valid, and no two with the same kind, namespace and name in the
    // initial cluster + submit, nor within one step.
    let mut seen: BTreeSet<(Kind, String, String)> = BTreeSet::new();
    for m in s.pods.iter().chain(&s.submit) {
        check_duplicate(m, &mut seen, problems);
    }
    for m in &s.submit {
        validate_object(&mut Ctx::new(m, problems), &m.object);
    }
    for step in &s.steps {
        match &step.action {
            StepAction::Submit(list) => {
                let mut seen = BTreeSet::new();
                for m in list {
                    validate_object(&mut Ctx::new(m, problems), &m.object);
                    check_duplicate(m, &mut seen, problems);
                }
            }
            StepAction::Taint(t) => {
                let mut p = |field: &str, message: String| {
                    problems.push(Problem {
                        line: step.line,
                        column: step.column,
                        at: step.path.clone(),
                        object: None,
                        field: format!("taint.{field}"),
                        message,
                    })
                };
                if !matches!(t.effect.as_str(), "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
                    p("effect", format!("{:?} must be NoSchedule, PreferNoSchedule or NoExecute", t.effect));
                }
                if let Err(m) = check_label_key(&t.key) {
                    p("key", m);
                }
            }
            StepAction::Expect(e) => validate_expect(e, &step.path, step.line, step.column, problems),
            _ => {}
        }
    }
    if let Some(e) = &s.expect {
        validate_expect(e, "expect", 0, 0, problems);
    }
}

fn check_duplicate(m: &Manifest, seen: &mut BTreeSet<(Kind, String, String)>, problems: &mut Vec<Problem>) {
    let r = m.object.object_ref();
    if r.name.is_empty() {
        return;
    }
    if !seen.insert((r.kind, r.namespace.clone(), r.name.clone())) {
        Ctx::new(m, problems).err("metadata.name", format!("duplicate {r}: the name is already used"));
    }
}

fn validate_scheduler(
    s: &Scenario,
    problems: &mut Vec<Problem>,
    top: &dyn Fn(&str, &str, String) -> Problem,
) {
    let mut gates = FeatureGates::default();
    for (name, value) in &s.scheduler.feature_gates {
        if let Err(e) = gates.set(name, *value) {
            problems.push(top("scheduler.featureGates", name, e.to_string()));
        }
    }
    let Some(profile) = &s.scheduler.profile else { return };
    let at = "scheduler.profile";
    let mut levels = BTreeSet::new();
    for (i, level) in profile.topology_levels.iter().enumerate() {
        let field = format!("topologyLevels[{i}]");
        if let Err(m) = check_label_key(level) {
            problems.push(top(at, &field, m));
        }
        if !levels.insert(level) {
            problems.push(top(at, &field, format!("duplicate level {level:?}")));
        }
    }
    for (plugin, weight) in &profile.plugin_weights {
        if *weight < 0 {
            problems.push(top(
                at,
                &format!("pluginWeights.{plugin}"),
                "must be greater than or equal to 0".into(),
            ));
        }
    }
    if let Some(p) = profile.percentage_of_placements_to_score {
        if p > 100 {
            problems.push(top(at, "percentageOfPlacementsToScore", format!("{p} must be between 0 and 100")));
        }
    }
    for (field, value) in [
        ("scoringStrategy", &profile.scoring_strategy),
        ("placementScoringStrategy", &profile.placement_scoring_strategy),
    ] {
        if let Some(v) = value {
            if !matches!(v.as_str(), "LeastAllocated" | "MostAllocated") {
                problems.push(top(at, field, format!("{v:?} must be LeastAllocated or MostAllocated")));
            }
        }
    }
    let mut backoff = [None, None];
    for (i, (field, value)) in
        [("podInitialBackoff", &profile.pod_initial_backoff), ("podMaxBackoff", &profile.pod_max_backoff)]
            .into_iter()
            .enumerate()
    {
        if let Some(v) = value {
            match crate::scenario::parse_duration_ms(v) {
                Ok(ms) => backoff[i] = Some(ms),
                Err(m) => problems.push(top(at, field, m)),
            }
        }
    }
    if let [Some(initial), Some(max)] = backoff {
        if initial > max {
            problems.push(top(at, "podInitialBackoff", "must not be greater than podMaxBackoff".into()));
        }
    }
    if let Some(names) = &profile.scheduler_names {
        if names.is_empty() || names.iter().any(String::is_empty) {
            problems.push(top(at, "schedulerNames", "must list at least one non-empty name".into()));
        }
    }
    validate_plugins(profile, problems, top);
}

/// `scheduler.profile.plugins`: known extension points, plugins that exist there.
fn validate_plugins(
    profile: &crate::scenario::ProfileSpec,
    problems: &mut Vec<Problem>,
    top: &dyn Fn(&str, &str, String) -> Problem,
) {
    let at = "scheduler.profile";
    let mut config = placer_engine::SchedulerConfig::default();
    for (key, set) in &profile.plugins {
        let Some(point) = placer_engine::ExtensionPoint::from_key(key) else {
            problems.push(top(at, &format!("plugins.{key}"), format!("unknown extension point {key:?}")));
            continue;
        };
        for e in &set.enabled {
            config.plugins.enable(point, &e.name, e.weight);
        }
        for d in &set.disabled {
            config.plugins.disable(point, &d.name);
        }
    }
    if let Err(e) = placer_engine::check_profile(&config) {
        let message = format!("unknown plugin {:?} (known here: {})", e.name, e.known);
        problems.push(top(at, &format!("plugins.{}", e.point), message));
    }
}

fn validate_generate(
    g: &crate::scenario::GenerateSpec,
    problems: &mut Vec<Problem>,
    top: &dyn Fn(&str, &str, String) -> Problem,
) {
    let at = "cluster.generate";
    if g.levels.is_empty() {
        problems.push(top(at, "levels", "must list at least one level".into()));
    }
    if g.levels.len() != g.fanout.len() {
        problems.push(top(
            at,
            "fanout",
            format!(
                "has {} entries, levels has {}: give one fanout per level",
                g.fanout.len(),
                g.levels.len()
            ),
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, level) in g.levels.iter().enumerate() {
        if let Err(m) = check_label_key(level) {
            problems.push(top(at, &format!("levels[{i}]"), m));
        }
        if !seen.insert(level) {
            problems.push(top(at, &format!("levels[{i}]"), format!("duplicate level {level:?}")));
        }
    }
    for (i, f) in g.fanout.iter().enumerate() {
        if *f == 0 {
            problems.push(top(at, &format!("fanout[{i}]"), "must be greater than or equal to 1".into()));
        }
    }
    if g.node_count() > MAX_GENERATED_NODES {
        problems.push(top(
            at,
            "fanout",
            format!("describes {} nodes; at most {MAX_GENERATED_NODES} are supported", g.node_count()),
        ));
    }
    for (name, q) in &g.allocatable {
        if let Err(m) = check_quantity(name, q) {
            problems.push(top(at, &format!("allocatable.{name}"), m));
        }
    }
    for (k, v) in &g.labels {
        if let Err(m) = check_label_key(k).and_then(|_| check_label_value(v)) {
            problems.push(top(at, &format!("labels.{k}"), m));
        }
    }
}

fn validate_expect(e: &Expect, at: &str, line: u64, column: u64, problems: &mut Vec<Problem>) {
    let mut p = |field: String, message: String| {
        problems.push(Problem { line, column, at: at.to_string(), object: None, field, message })
    };
    for key in e.pods.keys() {
        if split_key(key).is_none() {
            p(format!("pods.{key}"), "expected a namespace/name key".into());
        }
    }
    for (key, g) in &e.pod_groups {
        if split_key(key).is_none() {
            p(format!("podGroups.{key}"), "expected a namespace/name key".into());
        }
        if let Some(c) = &g.condition {
            if !matches!(c.status.as_str(), "True" | "False" | "Unknown") {
                p(
                    format!("podGroups.{key}.condition.status"),
                    format!("{:?} must be True, False or Unknown", c.status),
                );
            }
        }
    }
    for (list, patterns) in [("objects", &e.objects), ("absent", &e.absent)] {
        for (i, pattern) in patterns.iter().enumerate() {
            let field = format!("{list}[{i}]");
            let s = |k: &str| pattern.get(k).and_then(serde_json::Value::as_str);
            match (s("apiVersion"), s("kind")) {
                _ if !pattern.is_object() => {
                    p(field, "an object pattern is a mapping with apiVersion and kind".into())
                }
                (Some(a), Some(k)) if Kind::from_type(a, k).is_none() => {
                    p(field, format!("unknown apiVersion/kind {a:?} {k:?}"));
                }
                (Some(_), Some(_)) => {}
                _ => p(field, "apiVersion and kind are required".into()),
            }
        }
    }
}

/// Where a problem is reported: the manifest's position and the object's identity.
struct Ctx<'a> {
    problems: &'a mut Vec<Problem>,
    at: String,
    line: u64,
    column: u64,
    object: String,
}

impl<'a> Ctx<'a> {
    fn new(m: &Manifest, problems: &'a mut Vec<Problem>) -> Self {
        let r = m.object.object_ref();
        let object = if r.name.is_empty() { format!("{} (unnamed)", r.kind) } else { r.to_string() };
        Ctx { problems, at: m.path.clone(), line: m.line, column: m.column, object }
    }

    fn err(&mut self, field: impl Into<String>, message: String) {
        self.problems.push(Problem {
            line: self.line,
            column: self.column,
            at: self.at.clone(),
            object: Some(self.object.clone()),
            field: field.into(),
            message,
        });
    }
}

fn validate_object(cx: &mut Ctx<'_>, obj: &Object) {
    validate_meta(cx, obj.metadata(), obj.kind().namespaced());
    match obj {
        Object::Node(n) => {
            if let Some(status) = &n.status {
                for (list, values) in [("allocatable", &status.allocatable), ("capacity", &status.capacity)] {
                    for (name, q) in values.iter().flatten() {
                        if let Err(m) = check_quantity(name, q) {
                            cx.err(format!("status.{list}.{name}"), m);
                        }
                    }
                }
            }
            for (i, t) in n.spec.iter().flat_map(|s| s.taints.iter().flatten()).enumerate() {
                validate_taint(cx, &format!("spec.taints[{i}]"), t);
            }
        }
        Object::Pod(p) => match &p.spec {
            Some(spec) => validate_pod_spec(cx, "spec", spec),
            None => cx.err("spec", "is required".into()),
        },
        Object::Job(j) => match j.spec.as_ref() {
            None => cx.err("spec", "is required".into()),
            Some(spec) => {
                for (field, v) in [("parallelism", spec.parallelism), ("completions", spec.completions)] {
                    if v.is_some_and(|v| v < 0) {
                        cx.err(format!("spec.{field}"), "must be greater than or equal to 0".into());
                    }
                }
                if let Some(mode) = &spec.completion_mode {
                    if !matches!(mode.as_str(), "NonIndexed" | "Indexed") {
                        cx.err("spec.completionMode", format!("{mode:?} must be NonIndexed or Indexed"));
                    }
                }
                match &spec.template.spec {
                    Some(ps) => validate_pod_spec(cx, "spec.template.spec", ps),
                    None => cx.err("spec.template.spec", "is required".into()),
                }
            }
        },
        Object::CronJob(c) => {
            if let Err(e) = placer_controllers::cronjob::Schedule::parse(&c.spec.schedule) {
                cx.err("spec.schedule", e.to_string());
            }
            let ps = c.spec.job_template.spec.as_ref().and_then(|s| s.template.spec.as_ref());
            match ps {
                Some(ps) => validate_pod_spec(cx, "spec.jobTemplate.spec.template.spec", ps),
                None => cx.err("spec.jobTemplate.spec.template.spec", "is required".into()),
            }
        }
        Object::PodGroup(pg) => {
            validate_policy(cx, "spec.schedulingPolicy", &pg.spec.scheduling_policy);
            validate_constraints(cx, "spec.schedulingConstraints", pg.spec.scheduling_constraints.as_ref());
            validate_disruption_mode(cx, "spec.disruptionMode", pg.spec.disruption_mode.as_deref());
            if let Some(w) = pg.spec.pod_group_template_ref.as_ref().and_then(|r| r.workload.as_ref()) {
                if w.workload_name.is_empty() {
                    cx.err("spec.podGroupTemplateRef.workload.workloadName", "is required".into());
                }
                if w.pod_group_template_name.is_empty() {
                    cx.err("spec.podGroupTemplateRef.workload.podGroupTemplateName", "is required".into());
                }
            }
        }
        Object::Workload(w) => {
            if w.spec.pod_group_templates.is_empty() {
                cx.err("spec.podGroupTemplates", "must list at least one template".into());
            }
            let mut names = BTreeSet::new();
            for (i, t) in w.spec.pod_group_templates.iter().enumerate() {
                let path = format!("spec.podGroupTemplates[{i}]");
                if t.name.is_empty() {
                    cx.err(format!("{path}.name"), "is required".into());
                } else if let Err(m) = check_dns_label(&t.name) {
                    cx.err(format!("{path}.name"), m);
                } else if !names.insert(&t.name) {
                    cx.err(format!("{path}.name"), format!("duplicate template name {:?}", t.name));
                }
                validate_policy(cx, &format!("{path}.schedulingPolicy"), &t.scheduling_policy);
                validate_constraints(
                    cx,
                    &format!("{path}.schedulingConstraints"),
                    t.scheduling_constraints.as_ref(),
                );
                validate_disruption_mode(cx, &format!("{path}.disruptionMode"), t.disruption_mode.as_deref());
            }
            if let Some(r) = &w.spec.controller_ref {
                if r.kind.is_empty() {
                    cx.err("spec.controllerRef.kind", "is required".into());
                }
                if r.name.is_empty() {
                    cx.err("spec.controllerRef.name", "is required".into());
                }
            }
        }
        Object::PriorityClass(pc) => {
            if pc.value.is_none() {
                cx.err("value", "is required".into());
            }
        }
        Object::PodDisruptionBudget(pdb) => {
            if let Some(spec) = &pdb.spec {
                if spec.min_available.is_some() && spec.max_unavailable.is_some() {
                    cx.err("spec", "minAvailable and maxUnavailable cannot both be set".into());
                }
            }
        }
        Object::DeviceClass(c) => {
            validate_selectors(cx, "spec.selectors", c.spec.selectors.as_deref());
        }
        Object::ResourceSlice(s) => {
            if s.spec.driver.is_empty() {
                cx.err("spec.driver", "is required".into());
            }
            if s.spec.pool.name.is_empty() {
                cx.err("spec.pool.name", "is required".into());
            }
            let set = [
                s.spec.node_name.as_ref().is_some_and(|n| !n.is_empty()),
                s.spec.node_selector.is_some(),
                s.spec.all_nodes == Some(true),
                s.spec.per_device_node_selection == Some(true),
            ];
            if set.iter().filter(|b| **b).count() != 1 {
                cx.err(
                    "spec",
                    "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
                        .into(),
                );
            }
        }
        Object::ResourceClaim(c) => validate_claim_spec(cx, "spec", &c.spec),
        Object::ResourceClaimTemplate(t) => validate_claim_spec(cx, "spec.spec", &t.spec.spec),
    }
}

/// DRA selectors: the API server compiles their CEL on write; Placer also rejects what its
/// CEL subset cannot evaluate.
fn validate_selectors(
    cx: &mut Ctx<'_>,
    path: &str,
    selectors: Option<&[placer_api::k8s::api::resource::v1::DeviceSelector]>,
) {
    for (i, s) in selectors.unwrap_or(&[]).iter().enumerate() {
        match &s.cel {
            None => cx.err(format!("{path}[{i}].cel"), "is required".into()),
            Some(c) => {
                if let Err(m) = placer_engine::check_device_selector(&c.expression) {
                    cx.err(format!("{path}[{i}].cel.expression"), format!("compilation failed: {m}"));
                }
            }
        }
    }
}

/// A ResourceClaim spec (also inside a ResourceClaimTemplate), as the API server checks it.
fn validate_claim_spec(
    cx: &mut Ctx<'_>,
    path: &str,
    spec: &placer_api::k8s::api::resource::v1::ResourceClaimSpec,
) {
    let requests = spec.devices.as_ref().and_then(|d| d.requests.as_deref()).unwrap_or(&[]);
    for (i, r) in requests.iter().enumerate() {
        let at = format!("{path}.devices.requests[{i}]");
        if let Err(m) = check_dns_label(&r.name) {
            cx.err(format!("{at}.name"), m);
        }
        match (&r.exactly, r.first_available.as_ref().filter(|l| !l.is_empty())) {
            (Some(_), Some(_)) | (None, None) => {
                cx.err(at.clone(), "exactly one of `exactly` or `firstAvailable` is required".into())
            }
            (None, Some(_)) => cx.err(
                format!("{at}.firstAvailable"),
                "prioritized lists are not supported by Placer yet".into(),
            ),
            (Some(e), None) => {
                if e.device_class_name.is_empty() {
                    cx.err(format!("{at}.exactly.deviceClassName"), "is required".into());
                }
                match e.allocation_mode.as_deref().unwrap_or("ExactCount") {
                    "ExactCount" => {
                        if e.count.is_some_and(|c| c <= 0) {
                            cx.err(format!("{at}.exactly.count"), "must be greater than zero".into());
                        }
                    }
                    "All" => {
                        if e.count.is_some() {
                            cx.err(
                                format!("{at}.exactly.count"),
                                "must not be set when `allocationMode` is `All`".into(),
                            );
                        }
                    }
                    other => cx.err(
                        format!("{at}.exactly.allocationMode"),
                        format!("unsupported value {other:?}: supported values: \"All\", \"ExactCount\""),
                    ),
                }
                validate_selectors(cx, &format!("{at}.exactly.selectors"), e.selectors.as_deref());
            }
        }
    }
}

fn validate_meta(cx: &mut Ctx<'_>, meta: &ObjectMeta, namespaced: bool) {
    match meta.name.as_deref() {
        None | Some("") => cx.err("metadata.name", "is required".into()),
        Some(name) => {
            if let Err(m) = check_dns_subdomain(name) {
                cx.err("metadata.name", m);
            }
        }
    }
    if namespaced {
        if let Some(ns) = meta.namespace.as_deref() {
            if let Err(m) = check_dns_label(ns) {
                cx.err("metadata.namespace", m);
            }
        }
    }
    for (k, v) in meta.labels.iter().flatten() {
        if let Err(m) = check_label_key(k).and_then(|_| check_label_value(v)) {
            cx.err(format!("metadata.labels.{k}"), m);
        }
    }
    for k in meta.annotations.iter().flatten().map(|(k, _)| k) {
        if let Err(m) = check_label_key(k) {
            cx.err(format!("metadata.annotations.{k}"), m);
        }
    }
}

fn validate_policy(cx: &mut Ctx<'_>, path: &str, policy: &PodGroupSchedulingPolicy) {
    match (&policy.gang, &policy.basic) {
        (Some(gang), None) => {
            if gang.min_count < 1 {
                cx.err(format!("{path}.gang.minCount"), "must be greater than or equal to 1".into());
            }
        }
        (None, Some(_)) => {}
        _ => cx.err(path.to_string(), "exactly one of gang or basic is required".into()),
    }
}

fn validate_constraints(cx: &mut Ctx<'_>, path: &str, c: Option<&PodGroupSchedulingConstraints>) {
    let Some(topology) = c.and_then(|c| c.topology.as_ref()) else { return };
    if topology.len() > 1 {
        cx.err(format!("{path}.topology"), format!("must have at most 1 entry, has {}", topology.len()));
    }
    for (i, t) in topology.iter().enumerate() {
        if let Err(m) = check_label_key(&t.key) {
            cx.err(format!("{path}.topology[{i}].key"), m);
        }
    }
}

fn validate_disruption_mode(cx: &mut Ctx<'_>, path: &str, mode: Option<&str>) {
    if let Some(mode) = mode {
        if !matches!(mode, "Pod" | "PodGroup") {
            cx.err(path.to_string(), format!("{mode:?} must be Pod or PodGroup"));
        }
    }
}

fn validate_taint(cx: &mut Ctx<'_>, path: &str, t: &Taint) {
    if let Err(m) = check_label_key(&t.key) {
        cx.err(format!("{path}.key"), m);
    }
    if !matches!(t.effect.as_str(), "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        cx.err(
            format!("{path}.effect"),
            format!("{:?} must be NoSchedule, PreferNoSchedule or NoExecute", t.effect),
        );
    }
}

fn validate_toleration(cx: &mut Ctx<'_>, path: &str, t: &Toleration) {
    let op = t.operator.as_deref().unwrap_or("Equal");
    if !matches!(op, "Equal" | "Exists") {
        cx.err(format!("{path}.operator"), format!("{op:?} must be Equal or Exists"));
    }
    if op == "Exists" && t.value.as_deref().is_some_and(|v| !v.is_empty()) {
        cx.err(format!("{path}.value"), "must be empty when operator is Exists".into());
    }
    if let Some(effect) = t.effect.as_deref().filter(|e| !e.is_empty()) {
        if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
            cx.err(
                format!("{path}.effect"),
                format!("{effect:?} must be NoSchedule, PreferNoSchedule or NoExecute"),
            );
        }
    }
}

fn validate_pod_spec(cx: &mut Ctx<'_>, path: &str, spec: &PodSpec) {
    if spec.containers.is_empty() {
        cx.err(format!("{path}.containers"), "is required: a pod needs at least one container".into());
    }
    let mut names = BTreeSet::new();
    let all = spec.containers.iter().map(|c| ("containers", c));
    let inits = spec.init_containers.iter().flatten().map(|c| ("initContainers", c));
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for (list, c) in all.chain(inits) {
        let i = index.entry(list).or_insert(0);
        let cpath = format!("{path}.{list}[{i}]");
        *i += 1;
        validate_container(cx, &cpath, c);
        if !c.name.is_empty() && !names.insert(c.name.clone()) {
            cx.err(format!("{cpath}.name"), format!("duplicate container name {:?}", c.name));
        }
    }
    for (name, q) in spec.overhead.iter().flatten() {
        if let Err(m) = check_quantity(name, q) {
            cx.err(format!("{path}.overhead.{name}"), m);
        }
    }
    if let Some(group) = &spec.scheduling_group {
        if group.pod_group_name.as_deref().is_none_or(str::is_empty) {
            cx.err(format!("{path}.schedulingGroup.podGroupName"), "is required".into());
        }
    }
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        validate_toleration(cx, &format!("{path}.tolerations[{i}]"), t);
    }
    for (k, v) in spec.node_selector.iter().flatten() {
        if let Err(m) = check_label_key(k).and_then(|_| check_label_value(v)) {
            cx.err(format!("{path}.nodeSelector.{k}"), m);
        }
    }
}

fn validate_container(cx: &mut Ctx<'_>, path: &str, c: &Container) {
    if c.name.is_empty() {
        cx.err(format!("{path}.name"), "is required".into());
    }
    let Some(ResourceRequirements { requests, limits, .. }) = &c.resources else { return };
    let mut parsed: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for (list, values) in [("requests", requests), ("limits", limits)] {
        for (name, q) in values.iter().flatten() {
            match check_quantity(name, q) {
                Ok(v) => {
                    parsed.insert((list, name.as_str()), v);
                }
                Err(m) => cx.err(format!("{path}.resources.{list}.{name}"), m),
            }
        }
    }
    for ((list, name), request) in &parsed {
        if *list != "requests" {
            continue;
        }
        if let Some(limit) = parsed.get(&("limits", name)) {
            if request > limit {
                cx.err(
                    format!("{path}.resources.requests.{name}"),
                    format!("must be less than or equal to the {name} limit"),
                );
            }
        }
    }
}

/// Parses a quantity of resource `name` (cpu in millicores, the rest in units) and
/// requires it to be non-negative.
pub(crate) fn check_quantity(name: &str, q: &Quantity) -> Result<i64, String> {
    let parsed = if name == "cpu" { parse_milli(&q.0) } else { parse_units(&q.0) };
    match parsed {
        Err(e) => Err(e.to_string()),
        Ok(v) if v < 0 => Err(format!("must be greater than or equal to 0, got {:?}", q.0)),
        Ok(v) => Ok(v),
    }
}

fn is_kebab(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && !s.ends_with('-')
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// RFC 1123 label: at most 63 lowercase alphanumerics or '-', alphanumeric at both ends.
pub(crate) fn check_dns_label(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 63
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && alnum(b[0])
        && alnum(b[b.len() - 1]);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{s:?} must be a DNS label: at most 63 lowercase letters, digits or '-', starting and ending with a letter or digit"
        ))
    }
}

/// RFC 1123 subdomain: at most 253 characters, dot-separated labels.
pub(crate) fn check_dns_subdomain(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 253
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || *c == b'.')
        && alnum(b[0])
        && alnum(b[b.len() - 1]);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{s:?} must be a DNS subdomain: lowercase letters, digits, '-' or '.', starting and ending with a letter or digit"
        ))
    }
}

fn check_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter().all(|c| alnum(*c) || matches!(c, b'-' | b'_' | b'.'))
        && alnum(b[0])
        && alnum(b[b.len() - 1])
}

/// A label (or annotation) key: `[prefix/]name`, prefix a DNS subdomain, name at most 63
/// characters of `[A-Za-z0-9-_.]` with alphanumeric ends.
pub(crate) fn check_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| check_dns_subdomain(p).is_ok());
    if prefix_ok && check_name_part(name) {
        Ok(())
    } else {
        Err(format!(
            "{key:?} is not a valid label key: an optional DNS-subdomain prefix and '/', then at most 63 characters of [A-Za-z0-9-_.] starting and ending with a letter or digit"
        ))
    }
}

/// A label value: empty, or at most 63 characters of `[A-Za-z0-9-_.]` with alphanumeric ends.
pub(crate) fn check_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() || check_name_part(value) {
        Ok(())
    } else {
        Err(format!(
            "{value:?} is not a valid label value: at most 63 characters of [A-Za-z0-9-_.] starting and ending with a letter or digit"
        ))
    }
}

#[cfg(test)]
mod tests {
    use crate::load::{load_str, LoadError};

    fn problems(text: &str) -> Vec<String> {
        match load_str(text, "t.yaml") {
            Err(LoadError::Invalid { problems, file, .. }) => {
                problems.iter().map(|p| p.render(&file)).collect()
            }
            Err(other) => panic!("expected validation problems, got {other}"),
            Ok(_) => Vec::new(),
        }
    }

    const POD: &str = "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c}]}}";

    #[test]
    fn a_minimal_scenario_is_valid() {
        assert_eq!(problems(&format!("name: ok\nsubmit:\n  - {POD}\n")), Vec::<String>::new());
    }

    #[test]
    fn negative_and_unparsable_quantities_name_the_field() {
        let got = problems(
            "name: t\nsubmit:\n  - apiVersion: v1\n    kind: Pod\n    metadata: {name: p0}\n    spec:\n      \
             containers: [{name: c, resources: {requests: {cpu: '-1', memory: lots}}}]\n",
        );
        assert_eq!(
            got,
            [
                "t.yaml:3:5: submit[0]: Pod default/p0: spec.containers[0].resources.requests.cpu: must be greater than or equal to 0, got \"-1\"",
                "t.yaml:3:5: submit[0]: Pod default/p0: spec.containers[0].resources.requests.memory: invalid quantity \"lots\": expected a number with an optional suffix (e.g. 500m, 2, 1.5Gi)",
            ]
        );
    }

    #[test]
    fn requests_above_limits_are_invalid() {
        let got = problems(
            "name: t\nsubmit:\n  - {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: \
             [{name: c, resources: {requests: {cpu: '2'}, limits: {cpu: '1'}}}]}}\n",
        );
        assert_eq!(got.len(), 1);
        assert!(got[0].ends_with(
            "spec.containers[0].resources.requests.cpu: must be less than or equal to the cpu limit"
        ));
    }

    #[test]
    fn pods_need_a_spec_and_containers() {
        let got = problems("name: t\nsubmit:\n  - {apiVersion: v1, kind: Pod, metadata: {name: a}}\n  - {apiVersion: v1, kind: Pod, metadata: {name: b}, spec: {containers: []}}\n");
        assert_eq!(
            got,
            [
                "t.yaml:3:5: submit[0]: Pod default/a: spec: is required",
                "t.yaml:4:5: submit[1]: Pod default/b: spec.containers: is required: a pod needs at least one container",
            ]
        );
    }

    #[test]
    fn podgroup_policies_are_checked() {
        let pg = |name: &str, policy: &str| {
            format!("  - {{apiVersion: scheduling.k8s.io/v1alpha2, kind: PodGroup, metadata: {{name: {name}}}, spec: {{schedulingPolicy: {policy}}}}}\n")
        };
        let text = format!(
            "name: t\nsubmit:\n{}{}{}{}",
            pg("zero", "{gang: {minCount: 0}}"),
            pg("both", "{gang: {minCount: 1}, basic: {}}"),
            pg("none", "{}"),
            pg("fine", "{basic: {}}")
        );
        let got = problems(&text);
        assert_eq!(
            got,
            [
                "t.yaml:3:5: submit[0]: PodGroup default/zero: spec.schedulingPolicy.gang.minCount: must be greater than or equal to 1",
                "t.yaml:4:5: submit[1]: PodGroup default/both: spec.schedulingPolicy: exactly one of gang or basic is required",
                "t.yaml:5:5: submit[2]: PodGroup default/none: spec.schedulingPolicy: exactly one of gang or basic is required",
            ]
        );
    }

    #[test]
    fn a_podgroup_without_spec_is_reported_not_defaulted() {
        let got = problems("name: t\nsubmit:\n  - {apiVersion: scheduling.k8s.io/v1alpha2, kind: PodGroup, metadata: {name: pg}}\n");
        assert_eq!(got, ["t.yaml:3:5: submit[0]: PodGroup default/pg: spec.schedulingPolicy: exactly one of gang or basic is required"]);
    }

    #[test]
    fn a_pod_naming_a_missing_podgroup_is_fine() {
        let got = problems("name: t\nsubmit:\n  - {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {schedulingGroup: {podGroupName: later}, containers: [{name: c}]}}\n");
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn duplicate_names_within_kind_and_namespace() {
        let got = problems(&format!(
            "name: t\nsubmit:\n  - {POD}\n  - {POD}\n  - {{apiVersion: v1, kind: Pod, metadata: {{name: p, namespace: other}}, spec: {{containers: [{{name: c}}]}}}}\n"
        ));
        assert_eq!(got, ["t.yaml:4:5: submit[1]: Pod default/p: metadata.name: duplicate Pod default/p: the name is already used"]);
    }

    #[test]
    fn plugins_name_known_points_and_plugins() {
        let got = problems(
            "name: t\nscheduler:\n  profile:\n    plugins:\n      filter: {disabled: [{name: NoSuchFilter}]}\n      sideways: {disabled: [{name: '*'}]}\n",
        );
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(
            got.iter().any(|p| p.contains("plugins.sideways: unknown extension point \"sideways\"")),
            "{got:?}"
        );
        assert!(
            got.iter().any(|p| p
                .contains("plugins.filter: unknown plugin \"NoSuchFilter\" (known here: NodeUnschedulable,")),
            "{got:?}"
        );
        let ok = problems("name: t\nscheduler:\n  profile:\n    plugins:\n      preFilter: {disabled: [{name: TaintToleration}]}\n      multiPoint: {disabled: [{name: '*'}]}\n      score: {enabled: [{name: NodeAffinity, weight: 4}]}\n");
        assert!(ok.is_empty(), "{ok:?}");
    }

    #[test]
    fn unknown_gates_and_duplicate_levels() {
        let got = problems(
            "name: t\nscheduler:\n  featureGates: {NoSuchGate: true}\n  profile: {topologyLevels: [rack, rack]}\n",
        );
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0]
            .starts_with("t.yaml: scheduler.featureGates: NoSuchGate: unknown feature gate \"NoSuchGate\""));
        assert_eq!(got[1], "t.yaml: scheduler.profile: topologyLevels[1]: duplicate level \"rack\"");
    }

    #[test]
    fn labels_and_names_follow_kubernetes_syntax() {
        let got = problems(
            "name: Bad_Name\ncluster:\n  nodes:\n    - metadata: {name: N1, labels: {'bad key!': x, ok: 'has space'}}\n",
        );
        assert_eq!(got.len(), 4, "{got:?}");
        assert!(got[0].contains("must be kebab-case"));
        assert!(got[1].contains("metadata.name: \"N1\" must be a DNS subdomain"));
        assert!(got[2].contains("metadata.labels.bad key!: \"bad key!\" is not a valid label key"));
        assert!(got[3].contains("metadata.labels.ok: \"has space\" is not a valid label value"));
    }

    #[test]
    fn bound_pods_need_an_existing_node() {
        let got = problems(
            "name: t\ncluster:\n  nodes: [{metadata: {name: n1}}]\n  pods:\n    - {metadata: {name: a}, spec: {nodeName: n2, containers: [{name: c}]}}\n    - {metadata: {name: b}, spec: {containers: [{name: c}]}}\n",
        );
        assert_eq!(
            got,
            [
                "t.yaml:5:7: cluster.pods[0]: Pod default/a: spec.nodeName: node \"n2\" is not in the cluster",
                "t.yaml:6:7: cluster.pods[1]: Pod default/b: spec.nodeName: is required: cluster.pods are pods already bound to a node",
            ]
        );
    }

    #[test]
    fn generate_needs_one_fanout_per_level() {
        let got = problems(
            "name: t\ncluster:\n  generate: {levels: [a, b], fanout: [2], allocatable: {cpu: '-4'}}\n",
        );
        assert_eq!(
            got,
            [
                "t.yaml: cluster.generate: fanout: has 1 entries, levels has 2: give one fanout per level",
                "t.yaml: cluster.generate: allocatable.cpu: must be greater than or equal to 0, got \"-4\"",
            ]
        );
    }

    #[test]
    fn expectation_keys_and_patterns_are_checked() {
        let got = problems(
            "name: t\nexpect:\n  pods: {p0: n1}\n  podGroups: {default/pg: {condition: {type: X, status: maybe}}}\n  \
             objects: [{apiVersion: apps/v1, kind: Deployment}]\n  absent: [{kind: Pod}]\n",
        );
        assert_eq!(
            got,
            [
                "t.yaml: expect: pods.p0: expected a namespace/name key",
                "t.yaml: expect: podGroups.default/pg.condition.status: \"maybe\" must be True, False or Unknown",
                "t.yaml: expect: objects[0]: unknown apiVersion/kind \"apps/v1\" \"Deployment\"",
                "t.yaml: expect: absent[0]: apiVersion and kind are required",
            ]
        );
    }

    #[test]
    fn taint_steps_need_a_known_effect() {
        let got = problems("name: t\nsteps:\n  - taint: {node: n1, key: k, effect: Sometimes}\n");
        assert_eq!(got, ["t.yaml:3:5: steps[0]: taint.effect: \"Sometimes\" must be NoSchedule, PreferNoSchedule or NoExecute"]);
    }
}
