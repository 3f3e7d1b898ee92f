//! `NodeResourcesFit` (filter + score) and `NodeResourcesBalancedAllocation` (score), as in
//! kube-scheduler's `noderesources` package.
//!
//! * Filter: the pod's requests must fit in allocatable minus what the node's pods request,
//!   resource by resource; one more pod must fit under allocatable `pods`. Zero requests are
//!   not checked; a resource the node does not offer is insufficient.
//! * Score (`NodeResourcesFit`): LeastAllocated (default), MostAllocated or
//!   RequestedToCapacityRatio over the strategy's weighted resources. cpu and memory count
//!   pods without requests at kube's defaults (100m, 200Mi) on both sides.
//! * Score (`NodeResourcesBalancedAllocation`): `(1 - std(fractions)) * 100` over cpu and
//!   memory with the real requests; skipped for pods that request neither.

use std::borrow::Cow;
use std::sync::Arc;

use crate::framework::{scaled, Resources, CPU, EPHEMERAL_STORAGE, MEMORY};
use crate::framework::{
    CycleState, FilterPlugin, FilterResult, PreResult, Rejection, ScorePlugin, MAX_NODE_SCORE,
};
use crate::framework::{Dependence, SchedulerConfig, ScoringStrategy};
use crate::framework::{NodeId, PodInfo};
use crate::framework::{NodeState, Snapshot, DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST};
use crate::snapshot::NodeHot;

/// Plugin name of `NodeResourcesFit`.
pub const FIT_NAME: &str = "NodeResourcesFit";
/// Plugin name of `NodeResourcesBalancedAllocation`.
pub const BALANCED_NAME: &str = "NodeResourcesBalancedAllocation";

/// kube's `MaxCustomPriorityScore`: shape scores are given on 0..=10.
const MAX_CUSTOM_PRIORITY_SCORE: i64 = 10;
/// kube's `maxUtilization`.
const MAX_UTILIZATION: i64 = 100;

/// How many copies of `pod` fit on `node` by resources alone (cpu, memory,
/// ephemeral-storage, extended resources, pods count), given what is already requested
/// there. A resource the pod requests but the node does not offer gives 0.
pub fn fit_count(snap: &Snapshot, pod: &PodInfo, node: NodeId) -> u32 {
    fit_count_on(snap.node(node), &pod.requests)
}

/// [`fit_count`] on a node state, for requests `requests`.
pub fn fit_count_on(node: &NodeState, requests: &Resources) -> u32 {
    let alloc = &node.allocatable;
    let used = &node.requested;
    let mut count = (alloc.pods - used.pods).max(0);
    let mut limit = |free: i64, req: i64| {
        if req > 0 {
            count = count.min((free / req).max(0));
        }
    };
    limit(alloc.cpu - used.cpu, requests.cpu);
    limit(alloc.memory - used.memory, requests.memory);
    limit(alloc.ephemeral_storage - used.ephemeral_storage, requests.ephemeral_storage);
    for (name, req) in &requests.scalar {
        limit(alloc.get_scalar(name) - used.get_scalar(name), *req);
    }
    u32::try_from(count).unwrap_or(u32::MAX)
}

/// Whether `requests` fit on `node` (one more pod, every requested resource).
#[inline]
pub fn fits(node: &NodeState, requests: &Resources) -> bool {
    let alloc = &node.allocatable;
    let used = &node.requested;
    used.pods < alloc.pods
        && (requests.cpu <= 0 || requests.cpu <= alloc.cpu - used.cpu)
        && (requests.memory <= 0 || requests.memory <= alloc.memory - used.memory)
        && (requests.ephemeral_storage <= 0
            || requests.ephemeral_storage <= alloc.ephemeral_storage - used.ephemeral_storage)
        && requests
            .scalar
            .iter()
            .all(|(name, r)| *r <= 0 || *r <= alloc.get_scalar(name) - used.get_scalar(name))
}

/// The reasons `requests` do not fit on `node` (empty when they fit), in kube's order:
/// pods count, cpu, memory, ephemeral-storage, extended resources by name.
pub fn insufficient_resources(
    node: &NodeState,
    requests: &Resources,
) -> smallvec::SmallVec<[Cow<'static, str>; 2]> {
    let alloc = &node.allocatable;
    let used = &node.requested;
    let mut out = smallvec::SmallVec::new();
    if used.pods + 1 > alloc.pods {
        out.push(Cow::Borrowed("Too many pods"));
    }
    if requests.cpu > 0 && requests.cpu > alloc.cpu - used.cpu {
        out.push(Cow::Borrowed("Insufficient cpu"));
    }
    if requests.memory > 0 && requests.memory > alloc.memory - used.memory {
        out.push(Cow::Borrowed("Insufficient memory"));
    }
    if requests.ephemeral_storage > 0
        && requests.ephemeral_storage > alloc.ephemeral_storage - used.ephemeral_storage
    {
        out.push(Cow::Borrowed("Insufficient ephemeral-storage"));
    }
    for (name, r) in &requests.scalar {
        if *r > 0 && *r > alloc.get(name) - used.get(name) {
            out.push(insufficient(name));
        }
    }
    out
}

/// Most distinct `Insufficient <name>` reasons [`insufficient`] keeps; past this, reasons
/// are formatted per use (still correct, only slower), so the table stays bounded.
const MAX_SHARED_REASONS: usize = 1024;

/// `Insufficient <name>` for an extended resource. A failing gang asks every node of the
/// cluster at every retry, so the reason is made once per name and shared (a bounded table
/// of immutable strings: it never changes what any computation returns).
fn insufficient(name: &str) -> Cow<'static, str> {
    static REASONS: std::sync::OnceLock<std::sync::Mutex<rustc_hash::FxHashMap<Box<str>, &'static str>>> =
        std::sync::OnceLock::new();
    let reasons = REASONS.get_or_init(Default::default);
    let Ok(mut reasons) = reasons.lock() else { return Cow::Owned(format!("Insufficient {name}")) };
    if let Some(shared) = reasons.get(name) {
        return Cow::Borrowed(shared);
    }
    if reasons.len() >= MAX_SHARED_REASONS {
        return Cow::Owned(format!("Insufficient {name}"));
    }
    let shared: &'static str = Box::leak(format!("Insufficient {name}").into_boxed_str());
    reasons.insert(name.into(), shared);
    Cow::Borrowed(shared)
}

/// A resource a scoring strategy looks at, resolved once.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ResourceKey {
    Cpu,
    Memory,
    EphemeralStorage,
    Scalar(Arc<str>),
}

impl ResourceKey {
    fn new(name: &str) -> Self {
        match name {
            CPU => ResourceKey::Cpu,
            MEMORY => ResourceKey::Memory,
            EPHEMERAL_STORAGE => ResourceKey::EphemeralStorage,
            other => ResourceKey::Scalar(Arc::from(other)),
        }
    }

    fn get(&self, r: &Resources) -> i64 {
        match self {
            ResourceKey::Cpu => r.cpu,
            ResourceKey::Memory => r.memory,
            ResourceKey::EphemeralStorage => r.ephemeral_storage,
            ResourceKey::Scalar(name) => r.get(name),
        }
    }
}

#[derive(Debug, Clone)]
struct WeightedResource {
    key: ResourceKey,
    weight: i64,
}

fn resolve(resources: &[(String, i64)]) -> Vec<WeightedResource> {
    resources
        .iter()
        .map(|(name, weight)| WeightedResource { key: ResourceKey::new(name), weight: *weight })
        .collect()
}

/// `(allocatable, requested-with-pod)` of one resource on a node, or `None` when the resource
/// is skipped (kube's `calculateResourceAllocatableRequest` returning zero allocatable).
/// `use_requested`: real requests for cpu / memory instead of the non-zero defaults.
fn allocatable_and_requested(
    key: &ResourceKey,
    node: &NodeState,
    pod_request: i64,
    use_requested: bool,
) -> Option<(i64, i64)> {
    let node_requested = if use_requested { &node.requested } else { &node.non_zero_requested };
    let (alloc, req) = match key {
        ResourceKey::Cpu => (node.allocatable.cpu, node_requested.cpu.saturating_add(pod_request)),
        ResourceKey::Memory => (node.allocatable.memory, node_requested.memory.saturating_add(pod_request)),
        ResourceKey::EphemeralStorage => {
            (node.allocatable.ephemeral_storage, node.requested.ephemeral_storage.saturating_add(pod_request))
        }
        ResourceKey::Scalar(name) => {
            if pod_request == 0 {
                return None;
            }
            (node.allocatable.get(name), node.requested.get(name).saturating_add(pod_request))
        }
    };
    (alloc != 0).then_some((alloc, req))
}

/// The scoring function of a strategy.
#[derive(Debug, Clone)]
enum Scorer {
    LeastAllocated,
    MostAllocated,
    /// Shape points (utilization 0..=100, score 0..=100 after scaling), sorted by utilization.
    RequestedToCapacityRatio(Vec<(i64, i64)>),
}

fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity <= 0 || requested > capacity {
        return 0;
    }
    scaled(capacity - requested, MAX_NODE_SCORE, capacity)
}

/// Capacities up to this are divided in `f64` by [`least_requested_fast`].
const F64_EXACT_CAPACITY: i64 = 1 << 46;

// The proof in `least_requested_fast` needs scores below 128.
const _: () = assert!(MAX_NODE_SCORE > 0 && MAX_NODE_SCORE < 128);

/// [`least_requested_score`], dividing in `f64` where that is exact (no integer division on
/// the path every scored node takes). For `0 < capacity <= 2^46` and
/// `0 <= requested <= capacity`, `a = (capacity - requested) * 100` and `b = capacity` are
/// exact `f64`s (below 2^53) and `k = floor(a / b)` is at most 100. When `b` does not divide
/// `a`, `a / b` lies at least `1 / b >= 2^-46` below `k + 1`, and `f64`s near `k + 1 <= 101`
/// are at most 2^-46 apart, so the rounded quotient stays below `k + 1` (and at or above
/// `k`, itself an `f64`): truncating it gives `k`. Otherwise the integer path.
#[inline]
fn least_requested_fast(requested: i64, capacity: i64) -> i64 {
    if capacity > 0 && capacity <= F64_EXACT_CAPACITY && (0..=capacity).contains(&requested) {
        ((capacity - requested) as f64 * MAX_NODE_SCORE as f64 / capacity as f64) as i64
    } else {
        least_requested_score(requested, capacity)
    }
}

/// `sum / weights` (truncated), in `f64` where that is exact: `0 <= sum < 2^31` and
/// `0 < weights <= 2^20`. A quotient that is not whole lies at least `1 / weights >= 2^-20`
/// below the next integer, where `f64`s are at most 2^-22 apart, so rounding keeps it
/// below. Otherwise the integer division.
#[inline]
fn weighted_mean(sum: i64, weights: i64) -> i64 {
    // Two weights of one (kube's default): a shift, exact for a sum that is not negative.
    if weights == 2 && sum >= 0 {
        return sum >> 1;
    }
    if (0..1 << 31).contains(&sum) && (1..=1 << 20).contains(&weights) {
        (sum as f64 / weights as f64) as i64
    } else {
        sum / weights
    }
}

fn most_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity <= 0 {
        return 0;
    }
    scaled(requested.min(capacity), MAX_NODE_SCORE, capacity)
}

/// kube's `BuildBrokenLinearFunction`.
fn broken_linear(shape: &[(i64, i64)], p: i64) -> i64 {
    for (i, &(util, score)) in shape.iter().enumerate() {
        if p <= util {
            if i == 0 {
                return score;
            }
            let (prev_util, prev_score) = shape[i - 1];
            if util == prev_util {
                return score;
            }
            return prev_score + (score - prev_score) * (p - prev_util) / (util - prev_util);
        }
    }
    shape.last().map(|&(_, s)| s).unwrap_or(0)
}

/// `NodeResourcesFitArgs`' `ignoredResources` and `ignoredResourceGroups`: extended
/// resources the filter does not check (kube's `fitsRequest`).
#[derive(Debug, Clone, Default)]
struct Ignored {
    names: Vec<String>,
    groups: Vec<String>,
}

impl Ignored {
    fn is_empty(&self) -> bool {
        self.names.is_empty() && self.groups.is_empty()
    }

    /// An extended resource (not native: no `/`, or a `kubernetes.io/` name; not a
    /// `requests.` quota name) named or in a named group.
    fn ignores(&self, name: &str) -> bool {
        let extended =
            name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.");
        extended
            && (self.names.iter().any(|n| n == name)
                || name.split_once('/').is_some_and(|(group, _)| self.groups.iter().any(|g| g == group)))
    }

    /// Whether `requests` ask for an ignored resource.
    fn any_in(&self, requests: &Resources) -> bool {
        !self.is_empty() && requests.scalar.iter().any(|(n, r)| *r > 0 && self.ignores(n))
    }

    /// `requests` without the ignored resources.
    fn strip(&self, requests: &Resources) -> Resources {
        let mut out = requests.clone();
        out.scalar.retain(|(n, _)| !self.ignores(n));
        out
    }
}

/// `NodeResourcesFit`: filter and (configurable) score.
#[derive(Debug, Clone)]
pub struct NodeResourcesFit {
    resources: Vec<WeightedResource>,
    scorer: Scorer,
    ignored: Arc<Ignored>,
}

impl NodeResourcesFit {
    /// With the pod-level scoring strategy and the ignored resources of `config`.
    pub fn new(config: &SchedulerConfig) -> Self {
        let ignored = Ignored {
            names: config.fit_ignored_resources.clone(),
            groups: config.fit_ignored_resource_groups.clone(),
        };
        NodeResourcesFit {
            ignored: Arc::new(ignored),
            ..Self::with_strategy(&config.node_resources_fit_strategy)
        }
    }

    /// With an explicit scoring strategy.
    pub fn with_strategy(strategy: &ScoringStrategy) -> Self {
        match strategy {
            ScoringStrategy::LeastAllocated { resources } => NodeResourcesFit {
                resources: resolve(resources),
                scorer: Scorer::LeastAllocated,
                ignored: Arc::default(),
            },
            ScoringStrategy::MostAllocated { resources } => NodeResourcesFit {
                resources: resolve(resources),
                scorer: Scorer::MostAllocated,
                ignored: Arc::default(),
            },
            ScoringStrategy::RequestedToCapacityRatio { resources, shape } => {
                let mut points: Vec<(i64, i64)> = shape
                    .iter()
                    .map(|&(u, s)| (u, s * (MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE)))
                    .collect();
                points.sort_by_key(|&(u, _)| u);
                NodeResourcesFit {
                    resources: resolve(resources),
                    scorer: Scorer::RequestedToCapacityRatio(points),
                    ignored: Arc::default(),
                }
            }
        }
    }

    /// The pod's request of each scored resource, in `self.resources` order (cpu and memory
    /// at kube's non-zero defaults when not requested): read once per pod.
    fn pod_requests(&self, pod_requests: &Resources) -> smallvec::SmallVec<[i64; 4]> {
        self.resources
            .iter()
            .map(|r| match r.key {
                ResourceKey::Cpu if pod_requests.cpu == 0 => DEFAULT_MILLI_CPU_REQUEST,
                ResourceKey::Memory if pod_requests.memory == 0 => DEFAULT_MEMORY_REQUEST,
                _ => r.key.get(pod_requests),
            })
            .collect()
    }

    fn score_node(&self, pod_requests: &Resources, node: &NodeState) -> i64 {
        self.score_resolved(&self.pod_requests(pod_requests), node)
    }

    /// The weights of cpu and memory when the strategy is LeastAllocated over exactly
    /// `[cpu, memory]` (kube's default), which [`least_allocated_cpu_memory`] scores.
    fn least_allocated_cpu_memory(&self) -> Option<(i64, i64)> {
        match (&self.scorer, self.resources.as_slice()) {
            (
                Scorer::LeastAllocated,
                [WeightedResource { key: ResourceKey::Cpu, weight: cpu }, WeightedResource { key: ResourceKey::Memory, weight: memory }],
            ) => Some((*cpu, *memory)),
            _ => None,
        }
    }

    /// [`Self::score_resolved`] with the pod's requests already read ([`Self::pod_requests`]).
    fn score_resolved(&self, pod_requests: &[i64], node: &NodeState) -> i64 {
        let mut node_score = 0i64;
        let mut weight_sum = 0i64;
        for (r, &pod_request) in self.resources.iter().zip(pod_requests) {
            let Some((alloc, req)) = allocatable_and_requested(&r.key, node, pod_request, false) else {
                continue;
            };
            match &self.scorer {
                Scorer::LeastAllocated => {
                    node_score += least_requested_score(req, alloc) * r.weight;
                    weight_sum += r.weight;
                }
                Scorer::MostAllocated => {
                    node_score += most_requested_score(req, alloc) * r.weight;
                    weight_sum += r.weight;
                }
                Scorer::RequestedToCapacityRatio(shape) => {
                    let utilization = if req > alloc || alloc <= 0 {
                        MAX_UTILIZATION
                    } else {
                        scaled(req, MAX_UTILIZATION, alloc)
                    };
                    let s = broken_linear(shape, utilization);
                    if s > 0 {
                        node_score += s * r.weight;
                        weight_sum += r.weight;
                    }
                }
            }
        }
        if weight_sum == 0 {
            return 0;
        }
        match self.scorer {
            Scorer::RequestedToCapacityRatio(_) => (node_score as f64 / weight_sum as f64).round() as i64,
            _ => node_score / weight_sum,
        }
    }
}

impl FilterPlugin for NodeResourcesFit {
    fn name(&self) -> &'static str {
        FIT_NAME
    }

    /// Plain resources, unless the pod requests an ignored resource: the aggregate bound
    /// and copy counting count every requested resource, so they must not run for it.
    fn dependence(&self, pod: &PodInfo) -> Dependence {
        if self.ignored.any_in(&pod.requests) {
            Dependence::ExtraCapacity
        } else {
            Dependence::PlainResources
        }
    }

    fn reads_only_pod_and_node(&self, _pod: &PodInfo) -> bool {
        true
    }

    /// Passes every node the pod's whole requests fit on (ignored resources included, so
    /// the test may fail where the filter passes).
    fn quick_pass(&self, _state: &CycleState<'_>) -> Option<crate::framework::QuickPass> {
        Some(crate::framework::QuickPass { fits: true, ..Default::default() })
    }

    fn filter(&self, state: &CycleState<'_>, _snap: &Snapshot, node: &NodeState) -> FilterResult {
        if fits(node, &state.pod.requests) {
            return Ok(());
        }
        let stripped;
        let requests = if self.ignored.any_in(&state.pod.requests) {
            stripped = self.ignored.strip(&state.pod.requests);
            &stripped
        } else {
            &state.pod.requests
        };
        let reasons = insufficient_resources(node, requests);
        if reasons.is_empty() {
            Ok(())
        } else {
            Err(Rejection { code: crate::framework::Code::Unschedulable, reasons, plugin: FIT_NAME })
        }
    }
}

impl ScorePlugin for NodeResourcesFit {
    fn name(&self) -> &'static str {
        FIT_NAME
    }

    fn default_weight(&self) -> i64 {
        1
    }

    /// Reads only the pod and the node.
    fn node_local(&self) -> bool {
        true
    }

    fn reads_only_pod_and_node(&self) -> bool {
        true
    }

    fn score(&self, state: &CycleState<'_>, _snap: &Snapshot, _id: NodeId, node: &NodeState) -> i64 {
        self.score_node(&state.pod.requests, node)
    }

    /// The pod's requests read once, then [`Self::score_resolved`] per node: what `score`
    /// computes.
    /// kube's default strategy (LeastAllocated over cpu and memory) is scored by
    /// [`least_allocated_cpu_memory`], one inlined function per node.
    fn score_all(&self, state: &CycleState<'_>, snap: &Snapshot, feasible: &[NodeId], out: &mut [i64]) {
        let requests = self.pod_requests(&state.pod.requests);
        if let (Some(weights), [cpu, memory]) = (self.least_allocated_cpu_memory(), requests.as_slice()) {
            for (o, &id) in out.iter_mut().zip(feasible) {
                *o = least_allocated_cpu_memory(weights, (*cpu, *memory), snap.hot(id));
            }
            return;
        }
        for (o, &id) in out.iter_mut().zip(feasible) {
            *o = self.score_resolved(&requests, snap.node(id));
        }
    }
}

/// [`NodeResourcesFit::score_resolved`] for LeastAllocated over `[cpu, memory]` with
/// `weights`, the pod's requests `requests` (non-zero defaults applied): the same sums, with
/// the divisions of [`least_requested_fast`] and [`weighted_mean`].
#[inline]
fn least_allocated_cpu_memory(weights: (i64, i64), requests: (i64, i64), node: &NodeHot) -> i64 {
    let mut sum = 0i64;
    let mut weight_sum = 0i64;
    let cpu = node.allocatable_cpu;
    if cpu != 0 {
        sum += least_requested_fast(node.non_zero_cpu.saturating_add(requests.0), cpu) * weights.0;
        weight_sum += weights.0;
    }
    let memory = node.allocatable_memory;
    if memory != 0 {
        sum += least_requested_fast(node.non_zero_memory.saturating_add(requests.1), memory) * weights.1;
        weight_sum += weights.1;
    }
    if weight_sum == 0 {
        return 0;
    }
    weighted_mean(sum, weight_sum)
}

/// [`BalancedAllocation::score_resolved`] over `[cpu, memory]` (the default): the same
/// `f64` operations in the same order, without the per-resource dispatch.
#[inline]
fn balanced_cpu_memory(requests: (i64, i64), node: &NodeHot) -> i64 {
    let fraction = |alloc: i64, requested: i64, request: i64| {
        (alloc != 0).then(|| (requested.saturating_add(request) as f64 / alloc as f64).min(1.0))
    };
    let cpu = fraction(node.allocatable_cpu, node.requested_cpu, requests.0);
    let memory = fraction(node.allocatable_memory, node.requested_memory, requests.1);
    let std = match (cpu, memory) {
        (Some(c), Some(m)) => ((c - m) / 2.0).abs(),
        _ => 0.0,
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

/// `NodeResourcesBalancedAllocation`: favours nodes whose cpu and memory fractions stay close.
#[derive(Debug, Clone)]
pub struct BalancedAllocation {
    resources: Vec<WeightedResource>,
}

impl Default for BalancedAllocation {
    fn default() -> Self {
        BalancedAllocation { resources: resolve(&[(CPU.to_string(), 1), (MEMORY.to_string(), 1)]) }
    }
}

impl BalancedAllocation {
    /// The plugin with the profile's resources (`NodeResourcesBalancedAllocationArgs`).
    pub fn new(config: &SchedulerConfig) -> Self {
        BalancedAllocation { resources: resolve(&config.balanced_allocation_resources) }
    }

    /// The pod's request of each resource, in `self.resources` order: read once per pod.
    fn pod_requests(&self, pod_requests: &Resources) -> smallvec::SmallVec<[i64; 4]> {
        self.resources.iter().map(|r| r.key.get(pod_requests)).collect()
    }

    fn score_node(&self, pod_requests: &Resources, node: &NodeState) -> i64 {
        self.score_resolved(&self.pod_requests(pod_requests), node)
    }

    /// [`Self::score_node`] with the pod's requests already read ([`Self::pod_requests`]).
    fn score_resolved(&self, pod_requests: &[i64], node: &NodeState) -> i64 {
        let mut fractions = [0f64; 8];
        let mut count = 0;
        let mut sum = 0.0;
        for (r, &pod_request) in self.resources.iter().zip(pod_requests) {
            let Some((alloc, req)) = allocatable_and_requested(&r.key, node, pod_request, true) else {
                continue;
            };
            let fraction = (req as f64 / alloc as f64).min(1.0);
            sum += fraction;
            if count < fractions.len() {
                fractions[count] = fraction;
            }
            count += 1;
        }
        let fractions = &fractions[..count.min(8)];
        let std = match fractions.len() {
            2 => ((fractions[0] - fractions[1]) / 2.0).abs(),
            n if n > 2 => {
                let mean = sum / n as f64;
                (fractions.iter().map(|f| (f - mean) * (f - mean)).sum::<f64>() / n as f64).sqrt()
            }
            _ => 0.0,
        };
        ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
    }
}

impl ScorePlugin for BalancedAllocation {
    fn name(&self) -> &'static str {
        BALANCED_NAME
    }

    fn default_weight(&self) -> i64 {
        1
    }

    /// Reads only the pod and the node.
    fn node_local(&self) -> bool {
        true
    }

    fn reads_only_pod_and_node(&self) -> bool {
        true
    }

    /// Skipped for best-effort pods (no request on any scored resource), as in kube 1.33+.
    fn pre_score<'a>(
        &self,
        state: &mut CycleState<'a>,
        _snap: &'a Snapshot,
        _feasible: &[NodeId],
    ) -> PreResult {
        if self.resources.iter().all(|r| r.key.get(&state.pod.requests) == 0) {
            PreResult::Skip
        } else {
            PreResult::Run
        }
    }

    fn score(&self, state: &CycleState<'_>, _snap: &Snapshot, _id: NodeId, node: &NodeState) -> i64 {
        self.score_node(&state.pod.requests, node)
    }

    /// The pod's requests read once, then [`Self::score_resolved`] per node: what `score`
    /// computes.
    /// The default resources (cpu and memory) are scored by [`balanced_cpu_memory`], one
    /// inlined function per node.
    fn score_all(&self, state: &CycleState<'_>, snap: &Snapshot, feasible: &[NodeId], out: &mut [i64]) {
        let requests = self.pod_requests(&state.pod.requests);
        let cpu_memory = matches!(
            self.resources.as_slice(),
            [
                WeightedResource { key: ResourceKey::Cpu, .. },
                WeightedResource { key: ResourceKey::Memory, .. }
            ]
        );
        if let (true, [cpu, memory]) = (cpu_memory, requests.as_slice()) {
            for (o, &id) in out.iter_mut().zip(feasible) {
                *o = balanced_cpu_memory((*cpu, *memory), snap.hot(id));
            }
            return;
        }
        for (o, &id) in out.iter_mut().zip(feasible) {
            *o = self.score_resolved(&requests, snap.node(id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::{node, pod, snapshot_with};

    #[test]
    fn fit_count_is_the_minimum_over_requested_resources_and_pod_slots() {
        let snap = snapshot_with(vec![node("n1").cpu("4").mem("8Gi").pods(3).build()], vec![]);
        let id = snap.node_ids()[0];
        assert_eq!(fit_count(&snap, &pod("p").cpu("1").build(), id), 3, "pods allocatable caps the count");
        assert_eq!(fit_count(&snap, &pod("p").cpu("1500m").build(), id), 2);
        assert_eq!(fit_count(&snap, &pod("p").mem("3Gi").build(), id), 2);
        assert_eq!(fit_count(&snap, &pod("p").gpu(1).build(), id), 0, "resource the node does not offer");
        assert_eq!(fit_count(&snap, &pod("p").build(), id), 3, "no requests: only the pod count limits");
    }

    #[test]
    fn fit_count_accounts_for_pods_already_there() {
        let snap = snapshot_with(
            vec![node("n1").cpu("4").gpus(8).build()],
            vec![pod("old").cpu("1").gpu(3).on("n1").build()],
        );
        let id = snap.node_ids()[0];
        assert_eq!(fit_count(&snap, &pod("p").cpu("1").build(), id), 3);
        assert_eq!(fit_count(&snap, &pod("p").gpu(2).build(), id), 2);
    }

    #[test]
    fn insufficient_resources_lists_every_reason_in_kube_order() {
        let snap = snapshot_with(
            vec![node("n1").cpu("1").mem("1Gi").pods(1).build()],
            vec![pod("old").cpu("500m").on("n1").build()],
        );
        let n = snap.node(snap.node_ids()[0]);
        let reasons = insufficient_resources(n, &pod("p").cpu("1").mem("2Gi").gpu(1).build().requests);
        assert_eq!(
            reasons.iter().map(|r| r.as_ref()).collect::<Vec<_>>(),
            vec!["Too many pods", "Insufficient cpu", "Insufficient memory", "Insufficient nvidia.com/gpu"]
        );
        let ok = snapshot_with(vec![node("n1").cpu("1").build()], vec![]);
        assert!(
            insufficient_resources(ok.node(ok.node_ids()[0]), &pod("p").cpu("1").build().requests).is_empty()
        );
    }

    #[test]
    fn least_allocated_prefers_emptier_nodes() {
        let snap = snapshot_with(
            vec![node("a").cpu("4").mem("4Gi").build(), node("b").cpu("4").mem("4Gi").build()],
            vec![pod("old").cpu("2").mem("2Gi").on("a").build()],
        );
        let fit = NodeResourcesFit::with_strategy(&ScoringStrategy::least_allocated());
        let p = pod("p").cpu("1").mem("1Gi").build();
        let a = fit.score_node(&p.requests, snap.node(snap.node_id("a").unwrap()));
        let b = fit.score_node(&p.requests, snap.node(snap.node_id("b").unwrap()));
        assert_eq!((a, b), (25, 75));
    }

    #[test]
    fn most_allocated_prefers_fuller_nodes_and_caps_at_capacity() {
        let snap = snapshot_with(
            vec![node("a").cpu("4").mem("4Gi").build()],
            vec![pod("old").cpu("2").mem("2Gi").on("a").build()],
        );
        let fit = NodeResourcesFit::with_strategy(&ScoringStrategy::most_allocated());
        let n = snap.node(snap.node_ids()[0]);
        assert_eq!(fit.score_node(&pod("p").cpu("1").mem("1Gi").build().requests, n), 75);
        assert_eq!(fit.score_node(&pod("p").cpu("8").mem("8Gi").build().requests, n), 100);
    }

    #[test]
    fn pods_without_requests_score_with_default_requests() {
        let snap = snapshot_with(vec![node("a").cpu("1").mem("1000Mi").build()], vec![]);
        let fit = NodeResourcesFit::with_strategy(&ScoringStrategy::most_allocated());
        // 100m of 1000m cpu -> 10; 200Mi of 1000Mi memory -> 20; average 15.
        assert_eq!(fit.score_node(&pod("p").build().requests, snap.node(snap.node_ids()[0])), 15);
    }

    #[test]
    fn requested_to_capacity_ratio_follows_the_shape() {
        let snap = snapshot_with(vec![node("a").cpu("10").mem("10Gi").build()], vec![]);
        let n = snap.node(snap.node_ids()[0]);
        let strategy = ScoringStrategy::RequestedToCapacityRatio {
            resources: vec![("cpu".into(), 1), ("memory".into(), 1)],
            shape: vec![(0, 0), (100, 10)],
        };
        let fit = NodeResourcesFit::with_strategy(&strategy);
        assert_eq!(fit.score_node(&pod("p").cpu("5").mem("5Gi").build().requests, n), 50);
        let strategy = ScoringStrategy::RequestedToCapacityRatio {
            resources: vec![("cpu".into(), 1)],
            shape: vec![(0, 10), (100, 0)],
        };
        let spread = NodeResourcesFit::with_strategy(&strategy);
        assert_eq!(spread.score_node(&pod("p").cpu("3").build().requests, n), 70);
        assert_eq!(broken_linear(&[(10, 20), (50, 60)], 0), 20, "below the first point");
        assert_eq!(broken_linear(&[(10, 20), (50, 60)], 90), 60, "above the last point");
        assert_eq!(broken_linear(&[(10, 20), (50, 60)], 30), 40);
    }

    #[test]
    fn extended_resources_count_only_when_requested() {
        let snap = snapshot_with(vec![node("a").cpu("4").mem("4Gi").gpus(8).build()], vec![]);
        let n = snap.node(snap.node_ids()[0]);
        let strategy = ScoringStrategy::MostAllocated {
            resources: vec![("cpu".into(), 1), ("nvidia.com/gpu".into(), 3)],
        };
        let fit = NodeResourcesFit::with_strategy(&strategy);
        // cpu 1/4 -> 25 (weight 1); gpu 4/8 -> 50 (weight 3): (25 + 150) / 4 = 43.
        assert_eq!(fit.score_node(&pod("p").cpu("1").gpu(4).build().requests, n), 43);
        // Without a gpu request only cpu counts.
        assert_eq!(fit.score_node(&pod("p").cpu("1").build().requests, n), 25);
    }

    proptest::proptest! {
        /// The `f64` divisions give the integer results: over small and large capacities,
        /// at the 2^46 bound where the fast path ends, requests from zero to past capacity.
        #[test]
        fn f64_divisions_match_the_integer_ones(
            capacity in proptest::prop_oneof![1i64..1_000, 1i64..=1 << 20, (1i64 << 40)..(1i64 << 47), proptest::strategy::Just(1i64 << 46)],
            part in 0.0f64..1.2,
            exact_multiple in 0i64..=100,
            sum in 0i64..20_000,
            weights in 1i64..200,
        ) {
            let requested = ((capacity as f64) * part) as i64;
            proptest::prop_assert_eq!(least_requested_fast(requested, capacity), least_requested_score(requested, capacity));
            // Requests that leave a whole percentage free (quotients that are integers).
            let whole = capacity / 100 * 100;
            if whole > 0 {
                let r = whole - whole / 100 * exact_multiple;
                proptest::prop_assert_eq!(least_requested_fast(r, whole), least_requested_score(r, whole));
                proptest::prop_assert_eq!(least_requested_fast(r - 1, whole), least_requested_score(r - 1, whole));
            }
            proptest::prop_assert_eq!(weighted_mean(sum, weights), sum / weights);
            proptest::prop_assert_eq!(weighted_mean(sum * weights, weights), sum);
            proptest::prop_assert_eq!(weighted_mean(sum * weights - 1, weights), (sum * weights - 1) / weights);
        }
    }

    proptest::proptest! {
        #[test]
        fn fits_agrees_with_the_reasons_and_fit_count(
            alloc_cpu in 0u32..8, alloc_gpu in 0u32..4, slots in 0u32..4,
            used_cpu in 0u32..8, used_gpu in 0u32..4,
            req_cpu in 0u32..8, req_gpu in 0u32..4,
        ) {
            let mut old = pod("old").cpu(&format!("{used_cpu}")).on("n");
            if used_gpu > 0 {
                old = old.gpu(used_gpu);
            }
            let snap = snapshot_with(
                vec![node("n").cpu(&alloc_cpu.to_string()).gpus(alloc_gpu).pods(slots + 1).build()],
                vec![old.build()],
            );
            let n = snap.node(snap.node_ids()[0]);
            let mut p = pod("p").cpu(&req_cpu.to_string());
            if req_gpu > 0 {
                p = p.gpu(req_gpu);
            }
            let p = p.build();
            let fit = fits(n, &p.requests);
            proptest::prop_assert_eq!(fit, insufficient_resources(n, &p.requests).is_empty());
            proptest::prop_assert_eq!(fit, fit_count_on(n, &p.requests) >= 1);
        }
    }

    proptest::proptest! {
        /// `score_all` (the pod's requests read once) gives every node the score `score`
        /// gives it, for each scoring strategy, extended resources and pods without requests.
        #[test]
        fn score_all_matches_score_node_by_node(
            nodes in proptest::collection::vec((1u32..16, 1u32..16, 0u32..4, 0u32..8, 0u32..8, 0u32..3), 1..8),
            req in (0u32..8, 0u32..8, 0u32..3),
            strategy in 0u8..4,
        ) {
            let ns = nodes
                .iter()
                .enumerate()
                .map(|(i, &(c, m, g, ..))| node(&format!("n{i}")).cpu(&c.to_string()).mem(&format!("{m}Gi")).gpus(g).build())
                .collect();
            let ps = nodes
                .iter()
                .enumerate()
                .map(|(i, &(_, _, _, uc, um, ug))| {
                    let mut b = pod(&format!("e{i}")).cpu(&format!("{}m", uc * 500)).mem(&format!("{}Mi", um * 512)).on(&format!("n{i}"));
                    if ug > 0 {
                        b = b.gpu(ug);
                    }
                    b.build()
                })
                .collect();
            let snap = snapshot_with(ns, ps);
            let mut p = pod("p");
            if req.0 > 0 {
                p = p.cpu(&format!("{}m", req.0 * 500));
            }
            if req.1 > 0 {
                p = p.mem(&format!("{}Mi", req.1 * 512));
            }
            if req.2 > 0 {
                p = p.gpu(req.2);
            }
            let p = p.build();
            let resources = vec![("cpu".into(), 1), ("memory".into(), 2), ("nvidia.com/gpu".into(), 3)];
            let strategy = match strategy {
                0 => ScoringStrategy::least_allocated(),
                1 => ScoringStrategy::most_allocated(),
                2 => ScoringStrategy::MostAllocated { resources },
                _ => ScoringStrategy::RequestedToCapacityRatio { resources, shape: vec![(0, 10), (60, 2), (100, 7)] },
            };
            let plugins: Vec<Box<dyn ScorePlugin>> = vec![
                Box::new(NodeResourcesFit::with_strategy(&strategy)),
                Box::new(BalancedAllocation::default()),
            ];
            let state = CycleState::new(&p);
            let ids = snap.node_ids().to_vec();
            for plugin in &plugins {
                let mut all = vec![-1i64; ids.len()];
                plugin.score_all(&state, &snap, &ids, &mut all);
                let one: Vec<i64> = ids.iter().map(|&id| plugin.score(&state, &snap, id, snap.node(id))).collect();
                proptest::prop_assert_eq!(all, one, "{}", plugin.name());
            }
        }
    }

    #[test]
    fn balanced_allocation_scores_by_fraction_spread() {
        let snap = snapshot_with(vec![node("a").cpu("4").mem("4Gi").build()], vec![]);
        let n = snap.node(snap.node_ids()[0]);
        let ba = BalancedAllocation::default();
        assert_eq!(ba.score_node(&pod("p").cpu("2").mem("2Gi").build().requests, n), 100);
        // cpu 1.0, memory 0.25 -> std 0.375 -> 62.
        assert_eq!(ba.score_node(&pod("p").cpu("4").mem("1Gi").build().requests, n), 62);
    }

    /// kube's fit_test "skip checking ignored extended resource" and "skip checking
    /// resource request with quantity zero / ignored resource group".
    #[test]
    fn ignored_extended_resources_are_not_checked() {
        use crate::framework::FilterPlugin;
        let snap = snapshot_with(vec![node("a").cpu("4").mem("4Gi").build()], vec![]);
        let n = snap.node(snap.node_ids()[0]);
        let mut p = pod("p").cpu("1").build();
        p.requests.scalar.push(("example.com/aaa".into(), 1));
        let check = |config: &SchedulerConfig| {
            let fit = NodeResourcesFit::new(config);
            let state = crate::framework::CycleState::new(&p);
            fit.filter(&state, &snap, n).map_err(|r| r.reasons.to_vec())
        };
        assert_eq!(check(&SchedulerConfig::default()), Err(vec!["Insufficient example.com/aaa".into()]));
        let by_name = SchedulerConfig {
            fit_ignored_resources: vec!["example.com/aaa".into()],
            ..SchedulerConfig::default()
        };
        assert_eq!(check(&by_name), Ok(()));
        let by_group = SchedulerConfig {
            fit_ignored_resource_groups: vec!["example.com".into()],
            ..SchedulerConfig::default()
        };
        assert_eq!(check(&by_group), Ok(()));
        assert_eq!(
            NodeResourcesFit::new(&by_group).dependence(&p),
            Dependence::ExtraCapacity,
            "no aggregate bound or copy counting for a pod with an ignored resource"
        );
        let other = SchedulerConfig {
            fit_ignored_resource_groups: vec!["other.com".into()],
            ..SchedulerConfig::default()
        };
        assert_eq!(check(&other), Err(vec!["Insufficient example.com/aaa".into()]));
    }

    /// `NodeResourcesBalancedAllocationArgs.resources` with an extended resource (kube's
    /// balanced_allocation_test "resources with extended resources"): the spread is taken
    /// over every configured resource.
    #[test]
    fn balanced_allocation_over_configured_resources() {
        let snap = snapshot_with(vec![node("a").cpu("4").mem("4Gi").gpus(4).build()], vec![]);
        let n = snap.node(snap.node_ids()[0]);
        let p = pod("p").cpu("2").mem("2Gi").gpu(4).build();
        assert_eq!(BalancedAllocation::default().score_node(&p.requests, n), 100, "cpu and memory only");
        let config = SchedulerConfig {
            balanced_allocation_resources: vec![
                ("cpu".into(), 1),
                ("memory".into(), 1),
                ("nvidia.com/gpu".into(), 1),
            ],
            ..SchedulerConfig::default()
        };
        // Fractions 0.5, 0.5, 1.0: std 0.2357 -> 76.
        assert_eq!(BalancedAllocation::new(&config).score_node(&p.requests, n), 76);
    }
}
