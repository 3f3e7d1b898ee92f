//! Kueue TAS conformance: runs every scenario of
//! `/work/shared/scenarios/conformance/kueue-tas/` (override with `PLACER_KUEUE_TAS_DIR`)
//! through `tas::parse_request` + `tas::find_assignment` and compares the per-domain pod
//! counts with `expect`.
//!
//! The harness plays the engine's part: it drops nodes that are not ready, unschedulable or
//! miss a level label; applies the pods' taints / tolerations, nodeSelector and required
//! node affinity; scores preferred node affinity; subtracts the bound, non-terminal pods in
//! `cluster.pods`; places the PodGroups in submission order (leader + workers together,
//! later groups seeing earlier usage; `steps` after `submit`) and, for topologies whose
//! leaves are buckets of nodes, spreads a leaf's pods over its nodes first-fit.
//!
//! Cases that still fail are listed with a reason in `kueue_tas_known_failures.txt`; an
//! unlisted failure fails the test, and so does a listed case that passes, so the list
//! only shrinks. `KUEUE_TAS_CASE=<substring>` runs matching cases only and prints their
//! assignments.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use placer_api::gates::FeatureGates;
use placer_api::k8s::api::core::v1::{Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, Taint};
use placer_api::k8s::api::scheduling::v1alpha2::PodGroup;
use placer_engine::testing::{
    find_assignment, fit_count, parse_request, validate_group, with_one_pod, NodeStatic, PodGroupInfo,
    PodInfo, PodSchedulingView, TasNode, TasProblem, TopologyRequest,
};
use placer_engine::Resources;
use serde::Deserialize;

const DEFAULT_DIR: &str = "/work/shared/scenarios/conformance/kueue-tas";
const KNOWN_FAILURES: &str = include_str!("kueue_tas_known_failures.txt");

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Scenario {
    #[serde(default)]
    scheduler: Option<SchedulerSection>,
    cluster: Cluster,
    #[serde(default)]
    submit: Vec<Manifest>,
    #[serde(default)]
    steps: Vec<Step>,
    #[serde(default)]
    expect: Option<Expect>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchedulerSection {
    #[serde(default)]
    feature_gates: BTreeMap<String, bool>,
    #[serde(default)]
    profile: Option<Profile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Profile {
    #[serde(default)]
    topology_levels: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Cluster {
    #[serde(default)]
    nodes: Vec<Node>,
    #[serde(default)]
    pods: Vec<Pod>,
    #[serde(default)]
    generate: Option<serde::de::IgnoredAny>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "kind")]
enum Manifest {
    Pod(Box<Pod>),
    PodGroup(Box<PodGroup>),
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Step {
    #[serde(default)]
    submit: Option<Vec<Manifest>>,
    #[serde(default)]
    expect: Option<Expect>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Expect {
    #[serde(default)]
    pod_groups: BTreeMap<String, GroupExpect>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GroupExpect {
    #[serde(default)]
    scheduled: Option<bool>,
    #[serde(default)]
    bound_pods: Option<u64>,
    #[serde(default)]
    pods_per_domain: Option<BTreeMap<String, BTreeMap<String, u64>>>,
}

/// A node of the cluster with what is left on it.
struct ClusterNode {
    info: NodeStatic,
    free: Resources,
}

/// The simulated cluster: nodes and the outcome of every PodGroup placed so far
/// (`None`: unschedulable; `Some`: pods per node index).
struct Sim {
    levels: Vec<String>,
    gates: FeatureGates,
    nodes: Vec<ClusterNode>,
    placed: BTreeMap<String, Option<BTreeMap<usize, u64>>>,
    verbose: bool,
    log: Vec<String>,
}

/// A PodGroup of a submission with its pods.
struct Member {
    info: PodGroupInfo,
    pods: Vec<PodInfo>,
}

impl Sim {
    fn new(s: &Scenario, verbose: bool) -> Result<Sim, String> {
        let sched = s.scheduler.as_ref();
        let levels =
            sched.and_then(|s| s.profile.as_ref()).map(|p| p.topology_levels.clone()).unwrap_or_default();
        if levels.is_empty() {
            return Err("no scheduler.profile.topologyLevels".to_string());
        }
        let gates = FeatureGates::with_overrides(
            sched
                .map(|s| s.feature_gates.iter().map(|(k, v)| (k.as_str(), *v)).collect::<Vec<_>>())
                .unwrap_or_default(),
        )
        .map_err(|e| e.to_string())?;
        let mut nodes = Vec::new();
        for n in &s.cluster.nodes {
            let info = NodeStatic::from_node(Arc::new(n.clone())).map_err(|e| e.to_string())?;
            let free = info.allocatable.clone();
            nodes.push(ClusterNode { info, free });
        }
        let mut sim = Sim { levels, gates, nodes, placed: BTreeMap::new(), verbose, log: Vec::new() };
        for pod in &s.cluster.pods {
            let info = PodInfo::from_pod(Arc::new(pod.clone())).map_err(|e| e.to_string())?;
            if info.terminal {
                continue;
            }
            if let Some(node) = &info.node_name {
                if let Some(i) = sim.nodes.iter().position(|n| &n.info.name == node) {
                    sim.charge(i, &info.requests, 1);
                }
            }
        }
        Ok(sim)
    }

    fn charge(&mut self, node: usize, requests: &Resources, count: u64) {
        for _ in 0..count {
            self.nodes[node].free.sub(requests);
            self.nodes[node].free.pods -= 1;
        }
    }

    /// Places the PodGroups of one submission, in order; leader + workers together.
    fn submit(&mut self, manifests: &[Manifest]) -> Result<(), String> {
        let mut groups: Vec<PodGroupInfo> = Vec::new();
        let mut pods: Vec<PodInfo> = Vec::new();
        for m in manifests {
            match m {
                Manifest::PodGroup(pg) => groups
                    .push(PodGroupInfo::from_pod_group(Arc::new((**pg).clone())).map_err(|e| e.to_string())?),
                Manifest::Pod(p) => {
                    pods.push(PodInfo::from_pod(Arc::new((**p).clone())).map_err(|e| e.to_string())?)
                }
                Manifest::Other => {}
            }
        }
        // Units in order of first appearance: a PodSet group, or a single PodGroup.
        let mut units: Vec<(String, Vec<Member>)> = Vec::new();
        for info in groups {
            let members: Vec<PodInfo> = pods
                .iter()
                .filter(|p| p.key.namespace == info.key.namespace && p.group_name() == Some(&*info.key.name))
                .cloned()
                .collect();
            let unit = info
                .annotation(placer_api::annotations::PODSET_GROUP_NAME)
                .map(|g| format!("group:{}/{g}", info.key.namespace))
                .unwrap_or_else(|| format!("pg:{}", info.key));
            let member = Member { info, pods: members };
            match units.iter_mut().find(|(k, _)| *k == unit) {
                Some((_, list)) => list.push(member),
                None => units.push((unit, vec![member])),
            }
        }
        for (name, members) in units {
            let outcome = self.place(&name, &members);
            if self.verbose {
                self.log.push(format!("unit {name}: {outcome:?}"));
            }
            let keys: Vec<String> = members.iter().map(|m| m.info.key.to_string()).collect();
            match outcome {
                Ok(per_group) => {
                    for (key, counts) in keys.into_iter().zip(per_group) {
                        self.placed.insert(key, Some(counts));
                    }
                }
                Err(_) => {
                    for key in keys {
                        self.placed.insert(key, None);
                    }
                }
            }
        }
        Ok(())
    }

    /// Places one unit; pods per node index for each member, in member order.
    fn place(&mut self, name: &str, members: &[Member]) -> Result<Vec<BTreeMap<usize, u64>>, String> {
        let mut requests = Vec::new();
        for m in members {
            let count = m.pods.len() as u32;
            let req = parse_request(&m.info, &self.levels, &self.gates, count).map_err(|e| e.to_string())?;
            requests.push(req);
        }
        let (leader, worker) = if members.len() == 1 {
            (None, 0)
        } else {
            let list: Vec<(String, &TopologyRequest, u32)> = members
                .iter()
                .zip(&requests)
                .map(|(m, r)| (m.info.key.to_string(), r, m.pods.len() as u32))
                .collect();
            let refs: Vec<(&str, &TopologyRequest, u32)> =
                list.iter().map(|(k, r, c)| (k.as_str(), *r, *c)).collect();
            let (l, w) = validate_group(name, &refs).map_err(|e| e.to_string())?;
            (Some(l), w)
        };
        let worker_pod = members[worker].pods.first().ok_or("workers PodGroup without pods")?;
        let leader_pod = match leader {
            Some(l) => Some(members[l].pods.first().ok_or("leader PodGroup without pods")?),
            None => None,
        };

        // The nodes the algorithm sees.
        let mut index = Vec::new();
        let mut tas_nodes = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if !n.info.ready || n.info.unschedulable {
                continue;
            }
            let Some(values) =
                self.levels.iter().map(|l| n.info.label(l).map(str::to_string)).collect::<Option<Vec<_>>>()
            else {
                continue;
            };
            let node = &*n.info.node;
            let mut t = TasNode::new(n.info.name.to_string(), values, n.free.clone());
            t.worker_ok = passes_filters(&worker_pod.view, node);
            t.leader_ok = leader_pod.is_none_or(|p| passes_filters(&p.view, node));
            t.affinity_score = preferred_score(&worker_pod.view, node);
            index.push(i);
            tas_nodes.push(t);
        }
        let leader_req = leader_pod.map(|p| p.requests.clone());
        let problem = TasProblem {
            levels: &self.levels,
            nodes: &tas_nodes,
            worker_requests: &worker_pod.requests,
            worker_count: members[worker].pods.len() as u32,
            leader: leader_req.as_ref().map(|r| (r, 1)),
            request: &requests[worker],
            gates: &self.gates,
            algorithms: Default::default(),
        };
        let a = find_assignment(&problem).map_err(|e| e.message)?;
        if self.verbose {
            self.log.push(format!("  {:?} fit level {}", a.algorithm, a.fit_level));
            for l in &a.worker {
                self.log.push(format!("  worker {} x{}", l.values.join("/"), l.count));
            }
            for l in &a.leader {
                self.log.push(format!("  leader {} x{}", l.values.join("/"), l.count));
            }
        }
        let mut out = vec![BTreeMap::new(); members.len()];
        let worker_req = worker_pod.requests.clone();
        for (member, leaves, req) in [
            (Some(worker), &a.worker, &worker_req),
            (leader, &a.leader, leader_req.as_ref().unwrap_or(&worker_req)),
        ] {
            let Some(member) = member else { continue };
            for leaf in leaves {
                // Spread over the leaf's nodes first-fit (one node for hostname leaves).
                let mut left = leaf.count as u64;
                for (k, &local) in leaf.nodes.iter().enumerate() {
                    let node = index[local];
                    let fits = fit_count(&with_one_pod(req), &self.nodes[node].free).max(0) as u64;
                    let take = if k + 1 == leaf.nodes.len() { left } else { left.min(fits) };
                    if take > fits {
                        return Err(format!("leaf {} cannot be placed node by node", leaf.values.join("/")));
                    }
                    if take > 0 {
                        self.charge(node, req, take);
                        *out[member].entry(node).or_insert(0) += take;
                        left -= take;
                    }
                }
            }
        }
        Ok(out)
    }

    fn check(&self, expect: &Expect) -> Vec<String> {
        let mut problems = Vec::new();
        for (key, ge) in &expect.pod_groups {
            let Some(outcome) = self.placed.get(key) else {
                problems.push(format!("{key}: never submitted"));
                continue;
            };
            if let Some(scheduled) = ge.scheduled {
                if scheduled != outcome.is_some() {
                    problems.push(format!("{key}: scheduled {}, expected {scheduled}", outcome.is_some()));
                    continue;
                }
            }
            let bound: u64 = outcome.as_ref().map_or(0, |c| c.values().sum());
            if let Some(b) = ge.bound_pods {
                if b != bound {
                    problems.push(format!("{key}: {bound} pods bound, expected {b}"));
                }
            }
            if let Some(per_domain) = &ge.pods_per_domain {
                for (level, want) in per_domain {
                    let mut got: BTreeMap<String, u64> = BTreeMap::new();
                    for (&node, &count) in outcome.iter().flatten() {
                        let value = self.nodes[node].info.label(level).unwrap_or("<none>").to_string();
                        *got.entry(value).or_insert(0) += count;
                    }
                    let want: BTreeMap<String, u64> =
                        want.iter().filter(|(_, &c)| c > 0).map(|(k, &c)| (k.clone(), c)).collect();
                    if got != want {
                        problems.push(format!("{key}: {level}: got {got:?}, expected {want:?}"));
                    }
                }
            }
        }
        problems
    }
}

fn passes_filters(pod: &PodSchedulingView, node: &Node) -> bool {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let taints: &[Taint] = node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or(&[]);
    let tolerations = &pod.tolerations;
    for t in taints.iter().filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute") {
        let tolerated = tolerations.iter().any(|tol| {
            let effect_ok = tol.effect.as_deref().is_none_or(|e| e.is_empty() || e == t.effect);
            let key = tol.key.as_deref().unwrap_or("");
            let exists = tol.operator.as_deref() == Some("Exists");
            let key_ok = (key.is_empty() && exists) || key == t.key;
            let value_ok = exists || tol.value.as_deref().unwrap_or("") == t.value.as_deref().unwrap_or("");
            effect_ok && key_ok && value_ok
        });
        if !tolerated {
            return false;
        }
    }
    if pod.node_selector.iter().any(|(k, v)| labels.get(k) != Some(v)) {
        return false;
    }
    let required = pod
        .affinity
        .as_deref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref());
    if let Some(req) = required {
        if !req.node_selector_terms.iter().any(|t| term_matches(t, node)) {
            return false;
        }
    }
    true
}

fn preferred_score(pod: &PodSchedulingView, node: &Node) -> i64 {
    pod.affinity
        .as_deref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| na.preferred_during_scheduling_ignored_during_execution.as_ref())
        .map_or(0, |terms| {
            terms.iter().filter(|t| term_matches(&t.preference, node)).map(|t| t.weight as i64).sum()
        })
}

fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let name = node.metadata.name.clone().unwrap_or_default();
    exprs.iter().all(|e| requirement_matches(e, labels.get(&e.key).map(String::as_str)))
        && fields.iter().all(|f| requirement_matches(f, (f.key == "metadata.name").then_some(name.as_str())))
}

fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or(&[]);
    let number = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => {
            matches!((value.and_then(number), values.first().and_then(|s| number(s))), (Some(a), Some(b)) if a > b)
        }
        "Lt" => {
            matches!((value.and_then(number), values.first().and_then(|s| number(s))), (Some(a), Some(b)) if a < b)
        }
        _ => false,
    }
}

/// Runs one scenario: `Ok(log)` when every expectation holds.
fn run_case(path: &Path, verbose: bool) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("read: {e}"))?;
    let scenario: Scenario = serde_saphyr::from_str(&text).map_err(|e| format!("parse: {e}"))?;
    if scenario.cluster.generate.is_some() {
        return Err("cluster.generate is not supported by this harness".to_string());
    }
    let mut sim = Sim::new(&scenario, verbose)?;
    sim.submit(&scenario.submit)?;
    let mut problems = Vec::new();
    for step in &scenario.steps {
        if let Some(submit) = &step.submit {
            sim.submit(submit)?;
        }
        if let Some(expect) = &step.expect {
            problems.extend(sim.check(expect));
        }
    }
    if let Some(expect) = &scenario.expect {
        problems.extend(sim.check(expect));
    }
    if problems.is_empty() {
        Ok(sim.log)
    } else {
        let mut msg = problems.join("; ");
        if verbose {
            msg.push('\n');
            msg.push_str(&sim.log.join("\n"));
        }
        Err(msg)
    }
}

fn known_failures() -> BTreeMap<String, String> {
    KNOWN_FAILURES
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once(':') {
            Some((case, reason)) => (case.trim().to_string(), reason.trim().to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect()
}

#[test]
fn kueue_tas_conformance() {
    let dir = std::env::var("PLACER_KUEUE_TAS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(DEFAULT_DIR));
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!("kueue-tas conformance: {} not found, skipped", dir.display());
        return;
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let only = std::env::var("KUEUE_TAS_CASE").ok();
    let known = known_failures();
    let (mut passed, mut ran) = (0, 0);
    let mut unexpected = Vec::new();
    let mut fixed = Vec::new();
    for path in &files {
        let case = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        if only.as_ref().is_some_and(|o| !case.contains(o.as_str())) {
            continue;
        }
        ran += 1;
        match run_case(path, only.is_some()) {
            Ok(log) => {
                passed += 1;
                if only.is_some() {
                    println!("PASS {case}\n{}", log.join("\n"));
                }
                if known.contains_key(&case) {
                    fixed.push(case);
                }
            }
            Err(why) => {
                println!("FAIL {case}: {why}");
                if !known.contains_key(&case) {
                    unexpected.push(case);
                }
            }
        }
    }
    println!(
        "kueue-tas conformance: {passed}/{ran} scenarios pass ({} listed as known failures)",
        known.len()
    );
    assert!(unexpected.is_empty(), "failing but not in kueue_tas_known_failures.txt: {unexpected:?}");
    if only.is_none() {
        assert!(fixed.is_empty(), "passing now, remove from kueue_tas_known_failures.txt: {fixed:?}");
    }
}
