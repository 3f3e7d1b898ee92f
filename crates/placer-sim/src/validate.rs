//! Validation of a typed scenario, before anything runs.
//!
//! Every manifest goes through the API server's checks ([`placer_cluster::validation`],
//! the same the embedded cluster runs on every write), plus the scenario's own rules:
//! feature gates, topology levels, generated clusters, step and expectation syntax, names
//! used twice (within a step, or across the file when nothing in between can have removed
//! the first object), pods bound to nodes that do not exist. Every problem is collected,
//! with the position of the manifest, the object and the field path (the loader then
//! moves each problem to its field's line).

use std::collections::{BTreeMap, BTreeSet};

use placer_api::gates::FeatureGates;
use placer_api::k8s::api::resource::v1::DeviceSelector;
use placer_cluster::validation::{
    check_label_key, check_label_value, check_quantity, echo, validate as api_validate,
};
use placer_cluster::{Kind, Object};

use crate::generate::generated_node_names;
use crate::load::{describe, split_key, Problem};
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
        problems.push(top(
            "name",
            "",
            format!("Invalid value: {}: must be kebab-case (a-z, 0-9 and '-')", echo(&s.name)),
        ));
    }
    validate_scheduler(s, problems, &top);

    // Nodes: listed and generated, names unique.
    let mut node_names: BTreeSet<String> = BTreeSet::new();
    for m in &s.nodes {
        validate_manifest(m, problems);
        if let Some(name) = m.object.metadata().name.clone() {
            if !node_names.insert(name.clone()) {
                err(
                    problems,
                    m,
                    "metadata.name",
                    format!("Duplicate value: {}: another Node has this name", echo(&name)),
                );
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
                        format!("generated node {} is also listed", echo(&name)),
                    ));
                }
            }
        }
    }

    // Pods already bound.
    for m in &s.pods {
        validate_manifest(m, problems);
        let node = m.object.as_pod().and_then(|p| p.spec.as_ref()).and_then(|s| s.node_name.clone());
        if node.as_deref().is_none_or(str::is_empty) {
            err(
                problems,
                m,
                "spec.nodeName",
                "Required value: cluster.pods are pods already bound to a node".into(),
            );
        }
    }

    let mut history = History::new(node_names);
    for m in s.pods.iter().chain(&s.submit) {
        history.submit(m, problems);
    }
    for m in &s.submit {
        validate_manifest(m, problems);
    }
    for step in &s.steps {
        match &step.action {
            StepAction::Submit(list) => {
                let mut seen = BTreeMap::new();
                for m in list {
                    validate_manifest(m, problems);
                    let r = m.object.object_ref();
                    if !r.name.is_empty() {
                        if let Some(first) = seen.insert(r.clone(), m.path.clone()) {
                            err(
                                problems,
                                m,
                                "metadata.name",
                                format!(
                                    "Duplicate value: {}: {first} in the same step has this name",
                                    echo(&r.name)
                                ),
                            );
                            continue;
                        }
                    }
                    history.submit(m, problems);
                }
            }
            StepAction::DeletePod { namespace, name } => history.delete_pod(namespace, name),
            StepAction::DeleteNode(name) => history.delete_node(name),
            // A node that stops being Ready gets the lifecycle controller's NoExecute taint:
            // its pods are evicted once their tolerations run out, and a group with a pod on
            // it may be evicted whole (failed-node replacement). A patched node may gain a
            // NoExecute taint or lose its Ready condition the same way.
            StepAction::MarkNotReady(_) | StepAction::MarkUnreachable(_) => history.evictions_possible(),
            StepAction::Patch { target, .. } if target.kind == Kind::Node => history.evictions_possible(),
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
                    p(
                        "effect",
                        format!(
                            "Unsupported value: {}: supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
                            echo(&t.effect)
                        ),
                    );
                }
                if let Err(m) = check_label_key(&t.key) {
                    p("key", format!("Invalid value: {}: {m}", echo(&t.key)));
                }
                if t.effect == "NoExecute" {
                    history.evictions_possible();
                }
            }
            StepAction::Expect(e) => validate_expect(e, &step.path, step.line, step.column, problems),
            _ => {}
        }
    }
    if let Some(e) = &s.expect {
        validate_expect(e, "expect", 0, 0, problems);
    }
    validate_job_topology(s, problems);
    validate_counter_sets(s, problems);
}

/// Partitionable devices: a device's `consumesCounters` must name a counter set (and
/// counters in it) that a ResourceSlice of the same pool in the file defines. The API
/// server cannot see across slices; upstream's allocator then treats the whole pool as
/// invalid and allocates nothing from it, so a scenario saying so is refused up front.
fn validate_counter_sets(s: &Scenario, problems: &mut Vec<Problem>) {
    let steps = s.steps.iter().flat_map(|step| match &step.action {
        StepAction::Submit(list) => list.as_slice(),
        _ => &[],
    });
    let slices: Vec<&Manifest> =
        s.submit.iter().chain(steps).filter(|m| matches!(m.object, Object::ResourceSlice(_))).collect();
    let mut sets: BTreeMap<(&str, &str, &str), BTreeSet<&str>> = BTreeMap::new();
    for m in &slices {
        let Object::ResourceSlice(rs) = &m.object else { continue };
        for set in rs.spec.shared_counters.iter().flatten() {
            let counters = sets.entry((&rs.spec.driver, &rs.spec.pool.name, &set.name)).or_default();
            counters.extend(set.counters.keys().map(String::as_str));
        }
    }
    for m in &slices {
        let Object::ResourceSlice(rs) = &m.object else { continue };
        for (i, d) in rs.spec.devices.iter().flatten().enumerate() {
            for (j, c) in d.consumes_counters.iter().flatten().enumerate() {
                let at = format!("spec.devices[{i}].consumesCounters[{j}]");
                let Some(defined) =
                    sets.get(&(rs.spec.driver.as_str(), rs.spec.pool.name.as_str(), c.counter_set.as_str()))
                else {
                    err(
                        problems,
                        m,
                        &format!("{at}.counterSet"),
                        format!(
                            "Invalid value: {}: no ResourceSlice of pool {} (driver {}) defines this counter set in spec.sharedCounters",
                            echo(&c.counter_set),
                            rs.spec.pool.name,
                            rs.spec.driver
                        ),
                    );
                    continue;
                };
                for name in c.counters.keys().filter(|n| !defined.contains(n.as_str())) {
                    err(
                        problems,
                        m,
                        &format!("{at}.counters[{name}]"),
                        format!(
                            "Invalid value: {}: counter set {} does not define this counter",
                            echo(name),
                            c.counter_set
                        ),
                    );
                }
            }
        }
    }
}

/// Kueue's topology annotations on Jobs' pod templates, as the embedded cluster's admission
/// checks them at creation (its webhook rules, and the rules against `topologyLevels`).
fn validate_job_topology(s: &Scenario, problems: &mut Vec<Problem>) {
    let (gates, levels) = topology_rules(s);
    for m in submitted(s) {
        let Object::Job(job) = &m.object else { continue };
        for e in placer_controllers::job::tas_validation::validate_job(job, &levels, &gates) {
            err(problems, m, &e.field, e.message);
        }
    }
}

/// What is valid but will not work as written: a CronJob whose job template has invalid
/// topology annotations. Kueue has no CronJob webhook, so the CronJob is created, and every
/// Job it creates is refused by the Job webhook (a `FailedCreate` event on the CronJob).
pub(crate) fn warnings(s: &Scenario) -> Vec<Problem> {
    let (gates, levels) = topology_rules(s);
    let mut warnings = Vec::new();
    for m in submitted(s) {
        let Object::CronJob(cj) = &m.object else { continue };
        for e in placer_controllers::job::tas_validation::validate_cronjob_template(cj, &levels, &gates) {
            err(
                &mut warnings,
                m,
                &e.field,
                format!(
                    "{} (Kueue does not check a CronJob: it is created, and every Job it creates is \
                     refused by the Job webhook \"vjob.kb.io\")",
                    e.message
                ),
            );
        }
    }
    warnings
}

/// The feature gates and topology levels the topology annotation rules use.
fn topology_rules(s: &Scenario) -> (FeatureGates, Vec<String>) {
    let gates = FeatureGates::with_overrides(s.scheduler.feature_gates.iter().map(|(k, v)| (k.as_str(), *v)))
        .unwrap_or_default();
    (gates, s.topology_levels().to_vec())
}

/// The objects the file submits, at the start and in steps.
fn submitted(s: &Scenario) -> impl Iterator<Item = &Manifest> {
    let steps = s.steps.iter().flat_map(|step| match &step.action {
        StepAction::Submit(list) => list.as_slice(),
        _ => &[],
    });
    s.submit.iter().chain(steps)
}

fn err(problems: &mut Vec<Problem>, m: &Manifest, field: &str, message: String) {
    problems.push(Problem {
        line: m.line,
        column: m.column,
        at: m.path.clone(),
        object: Some(describe(&m.object)),
        field: field.to_string(),
        message,
    });
}

/// The API server's checks on one manifest, plus what Placer itself must be able to read
/// (a CronJob's schedule).
pub(crate) fn validate_manifest(m: &Manifest, problems: &mut Vec<Problem>) {
    for e in api_validate(&m.object) {
        err(problems, m, &e.field, e.message);
    }
    // DRA selectors: the API server compiles their CEL on write; Placer also rejects what its
    // CEL subset cannot evaluate.
    let mut cel = |path: String, selectors: Option<&[DeviceSelector]>| {
        for (i, s) in selectors.unwrap_or(&[]).iter().enumerate() {
            if let Some(c) = s.cel.as_ref().filter(|c| !c.expression.trim().is_empty()) {
                if let Err(e) = placer_engine::check_device_selector(&c.expression) {
                    err(
                        problems,
                        m,
                        &format!("{path}[{i}].cel.expression"),
                        format!("compilation failed: {e}"),
                    );
                }
            }
        }
    };
    let claim_spec = match &m.object {
        Object::DeviceClass(c) => {
            cel("spec.selectors".into(), c.spec.selectors.as_deref());
            None
        }
        Object::ResourceClaim(c) => Some(("spec", &c.spec)),
        Object::ResourceClaimTemplate(t) => Some(("spec.spec", &t.spec.spec)),
        _ => None,
    };
    if let Some((path, spec)) = claim_spec {
        let requests = spec.devices.as_ref().and_then(|d| d.requests.as_deref()).unwrap_or(&[]);
        for (i, r) in requests.iter().enumerate() {
            if let Some(x) = &r.exactly {
                cel(format!("{path}.devices.requests[{i}].exactly.selectors"), x.selectors.as_deref());
            }
            for (j, sub) in r.first_available.iter().flatten().enumerate() {
                cel(
                    format!("{path}.devices.requests[{i}].firstAvailable[{j}].selectors"),
                    sub.selectors.as_deref(),
                );
            }
        }
    }
    if let Object::CronJob(c) = &m.object {
        if !c.spec.schedule.trim().is_empty() {
            if let Err(e) = placer_controllers::cronjob::Schedule::parse(&c.spec.schedule) {
                err(
                    problems,
                    m,
                    "spec.schedule",
                    format!("Invalid value: {}: {}", echo(&c.spec.schedule), e.reason),
                );
            }
        }
    }
}

/// What the file has created and deleted so far, in order: finds names submitted twice
/// while the first object still exists, and pods bound to nodes that do not exist.
struct History {
    /// Objects created by the file, by (kind, namespace, name), with where.
    live: BTreeMap<(Kind, String, String), Removable>,
    nodes: BTreeSet<String>,
    /// Whether the cluster may have deleted pods on its own by now (preemption needs a
    /// priority, eviction a NoExecute taint or a deleted node).
    pods_may_vanish: bool,
}

struct Removable {
    path: String,
    /// The cluster itself may delete it (owned objects, Jobs with a TTL, pods once
    /// preemption or eviction can happen).
    may_vanish: bool,
}

impl History {
    /// The cluster's nodes exist from the start (under the path `cluster`).
    fn new(nodes: BTreeSet<String>) -> Self {
        let live = nodes
            .iter()
            .map(|n| {
                let key = (Kind::Node, String::new(), n.clone());
                (key, Removable { path: "cluster".to_string(), may_vanish: false })
            })
            .collect();
        History { live, nodes, pods_may_vanish: false }
    }

    fn submit(&mut self, m: &Manifest, problems: &mut Vec<Problem>) {
        let obj = &m.object;
        let r = obj.object_ref();
        let gives_priority = match obj {
            Object::PriorityClass(_) => true,
            Object::PodGroup(pg) => {
                pg.spec.priority.is_some_and(|p| p > 0) || pg.spec.priority_class_name.is_some()
            }
            Object::Pod(p) => p
                .spec
                .as_ref()
                .is_some_and(|s| s.priority.is_some_and(|v| v > 0) || s.priority_class_name.is_some()),
            _ => false,
        };
        self.pods_may_vanish |= gives_priority;
        if let Object::Pod(p) = obj {
            let spec = p.spec.as_ref();
            if let Some(node) = spec.and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty()) {
                if !self.nodes.contains(node) {
                    err(
                        problems,
                        m,
                        "spec.nodeName",
                        format!(
                            "Invalid value: {}: no such node at this point of the scenario; the API server would accept the pod, but no kubelet would run it and the pod garbage collector would delete it, so it is rejected here",
                            echo(node)
                        ),
                    );
                }
            }
        }
        if obj.kind() == Kind::Node {
            self.nodes.insert(r.name.clone());
        }
        if r.name.is_empty() {
            return;
        }
        let key = (r.kind, r.namespace.clone(), r.name.clone());
        if let Some(first) = self.live.get(&key) {
            let vanished = first.may_vanish || (r.kind == Kind::Pod && self.pods_may_vanish);
            if !vanished {
                err(
                    problems,
                    m,
                    "metadata.name",
                    format!(
                        "Duplicate value: {}: {} created {r} already and nothing in between deletes it (the API server would answer AlreadyExists)",
                        echo(&r.name),
                        first.path
                    ),
                );
                return;
            }
        }
        let owned = obj.metadata().owner_references.as_ref().is_some_and(|o| !o.is_empty());
        let ttl = matches!(obj, Object::Job(j) if j.spec.as_ref().is_some_and(|s| s.ttl_seconds_after_finished.is_some()));
        self.live.insert(key, Removable { path: m.path.clone(), may_vanish: owned || ttl });
    }

    fn delete_pod(&mut self, namespace: &str, name: &str) {
        self.live.remove(&(Kind::Pod, namespace.to_string(), name.to_string()));
    }

    fn delete_node(&mut self, name: &str) {
        self.live.remove(&(Kind::Node, String::new(), name.to_string()));
        self.nodes.remove(name);
        self.evictions_possible();
    }

    fn evictions_possible(&mut self) {
        self.pods_may_vanish = true;
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
            let message = format!("unknown feature gate {} (known: {})", echo(&e.name), e.known);
            problems.push(top("scheduler.featureGates", bracket(name).trim_start_matches('.'), message));
        }
    }
    let Some(profile) = &s.scheduler.profile else { return };
    let at = "scheduler.profile";
    let mut levels = BTreeSet::new();
    for (i, level) in profile.topology_levels.iter().enumerate() {
        let field = format!("topologyLevels[{i}]");
        if let Err(m) = check_label_key(level) {
            problems.push(top(at, &field, format!("Invalid value: {}: {m}", echo(level))));
        }
        if !levels.insert(level) {
            problems.push(top(
                at,
                &field,
                format!("Duplicate value: {}: the level is listed twice", echo(level)),
            ));
        }
    }
    for (plugin, weight) in &profile.plugin_weights {
        if *weight < 0 {
            problems.push(top(
                at,
                &format!("pluginWeights{}", bracket(plugin)),
                format!("Invalid value: {weight}: must be greater than or equal to 0"),
            ));
        }
    }
    if let Some(p) = profile.percentage_of_placements_to_score {
        if p > 100 {
            problems.push(top(
                at,
                "percentageOfPlacementsToScore",
                format!("Invalid value: {p}: must be between 0 and 100"),
            ));
        }
    }
    for (field, value) in [
        ("scoringStrategy", &profile.scoring_strategy),
        ("placementScoringStrategy", &profile.placement_scoring_strategy),
    ] {
        if let Some(v) = value {
            if !matches!(v.as_str(), "LeastAllocated" | "MostAllocated") {
                problems.push(top(
                    at,
                    field,
                    format!(
                        "Unsupported value: {}: supported values: \"LeastAllocated\", \"MostAllocated\"",
                        echo(v)
                    ),
                ));
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
    if let Some(Err(m)) = profile.topology_algorithms.as_ref().map(|a| a.to_config()) {
        let (field, message) = m.split_once(": ").unwrap_or(("topologyAlgorithms", m.as_str()));
        problems.push(top(at, field, message.to_string()));
    }
    if let Some(Err(m)) = profile.topology_preemption.as_ref().map(|t| t.to_config()) {
        let (field, message) = m.split_once(": ").unwrap_or(("topologyPreemption", m.as_str()));
        problems.push(top(at, field, message.to_string()));
    }
    validate_plugins(profile, &gates, problems, top);
}

/// `scheduler.profile.plugins`: known extension points, plugins that exist there.
fn validate_plugins(
    profile: &crate::scenario::ProfileSpec,
    gates: &FeatureGates,
    problems: &mut Vec<Problem>,
    top: &dyn Fn(&str, &str, String) -> Problem,
) {
    let at = "scheduler.profile";
    let mut config = placer_engine::SchedulerConfig { gates: gates.clone(), ..Default::default() };
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
    // Each problem names the profile (`scheduler.profile`), the plugin and the field.
    if let Err(errs) = placer_engine::apply_plugin_config(&mut config, &profile.plugin_config, "pluginConfig")
    {
        for e in errs {
            let mut p = top(at, &e.field, e.message);
            p.object = Some(format!("plugin {}", e.plugin));
            problems.push(p);
        }
    }
}

/// `.key` for a plain word, `[key]` otherwise (as paths are written).
fn bracket(key: &str) -> String {
    if !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        format!(".{key}")
    } else {
        format!("[{key}]")
    }
}

fn validate_generate(
    g: &crate::scenario::GenerateSpec,
    problems: &mut Vec<Problem>,
    top: &dyn Fn(&str, &str, String) -> Problem,
) {
    let at = "cluster.generate";
    if g.levels.is_empty() {
        problems.push(top(at, "levels", "Required value: must list at least one level".into()));
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
            problems.push(top(at, &format!("levels[{i}]"), format!("Invalid value: {}: {m}", echo(level))));
        }
        if !seen.insert(level) {
            problems.push(top(
                at,
                &format!("levels[{i}]"),
                format!("Duplicate value: {}: the level is listed twice", echo(level)),
            ));
        }
    }
    for (i, f) in g.fanout.iter().enumerate() {
        if *f == 0 {
            problems.push(top(
                at,
                &format!("fanout[{i}]"),
                "Invalid value: 0: must be greater than or equal to 1".into(),
            ));
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
            problems.push(top(
                at,
                &format!("allocatable{}", bracket(name)),
                format!("Invalid value: {}: {m}", echo(&q.0)),
            ));
        }
    }
    for (k, v) in &g.labels {
        if let Err(m) = check_label_key(k) {
            problems.push(top(
                at,
                &format!("labels{}", bracket(k)),
                format!("Invalid value: {}: {m}", echo(k)),
            ));
        }
        if let Err(m) = check_label_value(v) {
            problems.push(top(
                at,
                &format!("labels{}", bracket(k)),
                format!("Invalid value: {}: {m}", echo(v)),
            ));
        }
    }
}

fn validate_expect(e: &Expect, at: &str, line: u64, column: u64, problems: &mut Vec<Problem>) {
    let mut p = |field: String, message: String| {
        problems.push(Problem { line, column, at: at.to_string(), object: None, field, message })
    };
    for key in e.pods.keys() {
        if split_key(key).is_none() {
            p(
                format!("pods{}", bracket(key)),
                format!("Invalid value: {}: expected a namespace/name key", echo(key)),
            );
        }
    }
    for (key, g) in &e.pod_groups {
        let job_key = key.strip_prefix(crate::expect::JOB_KEY_PREFIX);
        let valid = match job_key {
            Some(rest) => {
                let parts: Vec<&str> = rest.split('/').collect();
                (2..=3).contains(&parts.len()) && parts.iter().all(|p| !p.is_empty())
            }
            None => split_key(key).is_some(),
        };
        if !valid {
            p(
                format!("podGroups{}", bracket(key)),
                format!(
                    "Invalid value: {}: expected a namespace/name key, or job:namespace/name[/template] for the PodGroup of a Job",
                    echo(key)
                ),
            );
        }
        if let Some(c) = &g.condition {
            if !matches!(c.status.as_str(), "True" | "False" | "Unknown") {
                p(
                    format!("podGroups{}.condition.status", bracket(key)),
                    format!(
                        "Unsupported value: {}: supported values: \"True\", \"False\", \"Unknown\"",
                        echo(&c.status)
                    ),
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
                    p(field, format!("unknown apiVersion/kind {} {}", echo(a), echo(k)));
                }
                (Some(_), Some(_)) => {}
                _ => p(field, "apiVersion and kind are required".into()),
            }
        }
    }
}

fn is_kebab(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && !s.ends_with('-')
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
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

    const POD: &str =
        "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: i}]}}";

    #[test]
    fn a_minimal_scenario_is_valid() {
        assert_eq!(problems(&format!("name: ok\nsubmit:\n  - {POD}\n")), Vec::<String>::new());
    }

    #[test]
    fn negative_and_unparsable_quantities_name_the_field_on_its_line() {
        let got = problems(
            "name: t\nsubmit:\n  - apiVersion: v1\n    kind: Pod\n    metadata: {name: p0}\n    spec:\n      \
             containers:\n        - name: c\n          image: i\n          resources:\n            requests: {cpu: '-1', memory: lots}\n",
        );
        assert_eq!(
            got,
            [
                "t.yaml:11:24: submit[0]: Pod default/p0: spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
                "t.yaml:11:35: submit[0]: Pod default/p0: spec.containers[0].resources.requests[memory]: Invalid value: \"lots\": must be a quantity: a number with an optional suffix (e.g. 500m, 2, 1.5Gi)",
            ]
        );
    }

    #[test]
    fn requests_above_limits_are_invalid() {
        let got = problems(
            "name: t\nsubmit:\n  - {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: \
             [{name: c, image: i, resources: {requests: {cpu: '2'}, limits: {cpu: '1'}}}]}}\n",
        );
        assert_eq!(got.len(), 1);
        assert!(got[0].ends_with(
            "spec.containers[0].resources.requests[cpu]: Invalid value: \"2\": must be less than or equal to cpu limit of 1"
        ), "{}", got[0]);
    }

    #[test]
    fn pods_need_a_spec_and_containers_with_images() {
        let got = problems("name: t\nsubmit:\n  - {apiVersion: v1, kind: Pod, metadata: {name: a}}\n  - {apiVersion: v1, kind: Pod, metadata: {name: b}, spec: {containers: []}}\n  - {apiVersion: v1, kind: Pod, metadata: {name: c}, spec: {containers: [{name: c}]}}\n");
        assert_eq!(
            got,
            [
                "t.yaml:3:5: submit[0]: Pod default/a: spec: Required value",
                "t.yaml:4:61: submit[1]: Pod default/b: spec.containers: Required value: a pod needs at least one container",
                "t.yaml:5:74: submit[2]: Pod default/c: spec.containers[0].image: Required value",
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
                "t.yaml:3:119: submit[0]: PodGroup default/zero: spec.schedulingPolicy.gang.minCount: Required value: must be greater than or equal to 1",
                "t.yaml:4:93: submit[1]: PodGroup default/both: spec.schedulingPolicy: Invalid value: \"{`basic`, `gang`}\": exactly one of `basic`, `gang` is required, but multiple fields are set",
                "t.yaml:5:93: submit[2]: PodGroup default/none: spec.schedulingPolicy: Invalid value: \"\": must specify one of: `basic`, `gang`",
            ]
        );
    }

    #[test]
    fn a_podgroup_without_spec_is_reported_not_defaulted() {
        let got = problems("name: t\nsubmit:\n  - {apiVersion: scheduling.k8s.io/v1alpha2, kind: PodGroup, metadata: {name: pg}}\n");
        assert_eq!(got, ["t.yaml:3:5: submit[0]: PodGroup default/pg: spec.schedulingPolicy: Invalid value: \"\": must specify one of: `basic`, `gang`"]);
    }

    #[test]
    fn a_pod_naming_a_missing_podgroup_is_fine() {
        let got = problems("name: t\nsubmit:\n  - {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {schedulingGroup: {podGroupName: later}, containers: [{name: c, image: i}]}}\n");
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn duplicate_names_within_kind_and_namespace() {
        let got = problems(&format!(
            "name: t\nsubmit:\n  - {POD}\n  - {POD}\n  - {{apiVersion: v1, kind: Pod, metadata: {{name: p, namespace: other}}, spec: {{containers: [{{name: c, image: i}}]}}}}\n"
        ));
        assert_eq!(got, ["t.yaml:4:44: submit[1]: Pod default/p: metadata.name: Duplicate value: \"p\": submit[0] created Pod default/p already and nothing in between deletes it (the API server would answer AlreadyExists)"]);
    }

    #[test]
    fn duplicates_across_steps_are_found_unless_something_deleted_the_first() {
        let pc = |name: &str| {
            format!("{{apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {{name: {name}}}, value: 1}}")
        };
        let got = problems(&format!(
            "name: t\nsubmit:\n  - {}\nsteps:\n  - submit: [{}]\n  - submit: [{}, {}]\n",
            pc("a"),
            pc("b"),
            pc("a"),
            pc("c")
        ));
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].starts_with("t.yaml:6:81: steps[1].submit[0]: PriorityClass a: metadata.name: Duplicate value: \"a\": submit[0] created PriorityClass a already"), "{}", got[0]);
        // A pod deleted in between may come back; so may one the cluster may have evicted.
        let got = problems(&format!(
            "name: t\nsubmit:\n  - {POD}\nsteps:\n  - deletePod: default/p\n  - submit: [{POD}]\n"
        ));
        assert!(got.is_empty(), "{got:?}");
        let got = problems(&format!(
            "name: t\ncluster:\n  nodes: [{{metadata: {{name: n1}}}}]\nsubmit:\n  - {POD}\nsteps:\n  - taint: {{node: n1, key: k, effect: NoExecute}}\n  - submit: [{POD}]\n"
        ));
        assert!(got.is_empty(), "{got:?}");
        // A node that stops being Ready, or is patched, may have its pods evicted too.
        for step in [
            "markNotReady: n1",
            "markUnreachable: n1",
            "patch: {apiVersion: v1, kind: Node, metadata: {name: n1}, spec: {unschedulable: true}}",
        ] {
            let got = problems(&format!(
                "name: t\ncluster:\n  nodes: [{{metadata: {{name: n1}}}}]\nsubmit:\n  - {POD}\nsteps:\n  - {step}\n  - submit: [{POD}]\n"
            ));
            assert!(got.is_empty(), "{step}: {got:?}");
        }
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
        assert!(
            got[0].starts_with(
                "t.yaml:3:18: scheduler.featureGates: NoSuchGate: unknown feature gate \"NoSuchGate\""
            ),
            "{}",
            got[0]
        );
        assert_eq!(got[1], "t.yaml:4:36: scheduler.profile: topologyLevels[1]: Duplicate value: \"rack\": the level is listed twice");
    }

    #[test]
    fn labels_and_names_follow_kubernetes_syntax() {
        let got = problems(
            "name: Bad_Name\ncluster:\n  nodes:\n    - metadata: {name: N1, labels: {'bad key!': x, ok: 'has space'}}\n",
        );
        assert_eq!(got.len(), 4, "{got:?}");
        assert!(
            got[0].starts_with("t.yaml:1:1: name: Invalid value: \"Bad_Name\": must be kebab-case"),
            "{}",
            got[0]
        );
        assert!(got[1].contains("4:18: cluster.nodes[0]: Node N1: metadata.name: Invalid value: \"N1\": a lowercase RFC 1123 subdomain"), "{}", got[1]);
        assert!(got[2].contains("4:37: cluster.nodes[0]: Node N1: metadata.labels[bad key!]: Invalid value: \"bad key!\": name part must consist"), "{}", got[2]);
        assert!(
            got[3].contains("metadata.labels[ok]: Invalid value: \"has space\": a valid label must be"),
            "{}",
            got[3]
        );
    }

    #[test]
    fn bound_pods_need_an_existing_node() {
        let got = problems(
            "name: t\ncluster:\n  nodes: [{metadata: {name: n1}}]\n  pods:\n    - {metadata: {name: a}, spec: {nodeName: n2, containers: [{name: c, image: i}]}}\n    - {metadata: {name: b}, spec: {containers: [{name: c, image: i}]}}\n",
        );
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0], "t.yaml:6:29: cluster.pods[1]: Pod default/b: spec.nodeName: Required value: cluster.pods are pods already bound to a node");
        assert!(got[1].starts_with("t.yaml:5:36: cluster.pods[0]: Pod default/a: spec.nodeName: Invalid value: \"n2\": no such node at this point of the scenario"), "{}", got[1]);
    }

    #[test]
    fn submitted_pods_bound_to_missing_nodes_are_rejected() {
        let got = problems(
            "name: t\ncluster:\n  nodes: [{metadata: {name: n1}}]\nsubmit:\n  - {apiVersion: v1, kind: Pod, metadata: {name: a}, spec: {nodeName: ghost, containers: [{name: c, image: i}]}}\nsteps:\n  - deleteNode: n1\n  - submit: [{apiVersion: v1, kind: Pod, metadata: {name: b}, spec: {nodeName: n1, containers: [{name: c, image: i}]}}]\n",
        );
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(
            got[0]
                .contains("submit[0]: Pod default/a: spec.nodeName: Invalid value: \"ghost\": no such node"),
            "{}",
            got[0]
        );
        assert!(
            got[1].contains(
                "steps[1].submit[0]: Pod default/b: spec.nodeName: Invalid value: \"n1\": no such node"
            ),
            "{}",
            got[1]
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
                "t.yaml:3:30: cluster.generate: fanout: has 1 entries, levels has 2: give one fanout per level",
                "t.yaml:3:57: cluster.generate: allocatable.cpu: Invalid value: \"-4\": must be greater than or equal to 0",
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
                "t.yaml:3:10: expect: pods.p0: Invalid value: \"p0\": expected a namespace/name key",
                "t.yaml:4:49: expect: podGroups[default/pg].condition.status: Unsupported value: \"maybe\": supported values: \"True\", \"False\", \"Unknown\"",
                "t.yaml:5:13: expect: objects[0]: unknown apiVersion/kind \"apps/v1\" \"Deployment\"",
                "t.yaml:6:12: expect: absent[0]: apiVersion and kind are required",
            ]
        );
    }

    #[test]
    fn taint_steps_need_a_known_effect() {
        let got = problems("name: t\nsteps:\n  - taint: {node: n1, key: k, effect: Sometimes}\n");
        assert_eq!(got, ["t.yaml:3:31: steps[0]: taint.effect: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""]);
    }

    #[test]
    fn cronjob_schedules_must_parse() {
        let got = problems("name: t\nsubmit:\n  - {apiVersion: batch/v1, kind: CronJob, metadata: {name: c}, spec: {schedule: 'every day', jobTemplate: {spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: i}]}}}}}}\n");
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].contains("submit[0]: CronJob default/c: spec.schedule: Invalid value: \"every day\":"),
            "{}",
            got[0]
        );
    }
}
