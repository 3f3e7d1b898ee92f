//! Why a PodGroup stands where it does, from the engine's own computations: the domains of
//! its topology level with their aggregated free capacity (`snapshot/domains.rs`), how many
//! of its pods fit in each (the pod-level filters, then NodeResourcesFit's copy count on
//! every node that passes them), and the pod-level filter rejections over the whole
//! cluster, counted per reason (the `FitError` of a cycle). Read-only: nothing is assumed,
//! no decision is made.

use placer_api::annotations::{PODSET_PREFERRED_TOPOLOGY, PODSET_REQUIRED_TOPOLOGY};

use super::*;
use crate::framework::group::GroupCycle;
use crate::placement::{explain_placements, PlacementScores};
use crate::plugins::node_resources::fit_count_on;
use crate::resources::Resources;
use crate::schedule_one::{feasible_prepared, prefilter_fit_error, prepare};
use crate::tas::TasRanking;

/// One candidate domain of a group's topology level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainFit {
    /// The label value.
    pub value: String,
    /// Nodes in the domain.
    pub nodes: usize,
    /// Free amount (allocatable minus requested, summed over the domain's nodes) of every
    /// resource the group's pods request, in the engine's units (cpu: millicores; memory:
    /// bytes), `pods` first.
    pub free: Vec<(String, i64)>,
    /// How many copies of the group's pod fit in the domain: on each node that passes the
    /// pod-level filters, how many fit by resources.
    pub fits: u32,
    /// What the domain lacks to hold the pods the group still needs (`needed` times the
    /// pod's requests, minus `free`), per resource; empty when enough is free.
    pub shortfall: Vec<(String, i64)>,
}

/// Where the group's pod stands against the pod-level filters over every node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterSummary {
    /// Nodes examined.
    pub nodes: usize,
    /// Nodes where the pod passes every filter.
    pub feasible: usize,
    /// Nodes rejected, per reason (kube-scheduler's phrases, e.g. `Insufficient cpu`),
    /// most frequent first; a PreFilter rejection is one reason for every node.
    pub reasons: Vec<(String, usize)>,
}

/// A PodGroup explained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupExplanation {
    pub group: GroupKey,
    /// The PodGroup object exists (members can name a PodGroup that does not).
    pub exists: bool,
    /// `minCount` in effect (1 for a basic group or with the GangScheduling gate off).
    pub min_count: u32,
    /// Gang semantics apply.
    pub gang: bool,
    /// Known member pods (existing, not terminal, not being deleted).
    pub members: usize,
    /// Members bound (or assumed).
    pub scheduled: usize,
    /// Gang members that do not exist yet: `minCount` minus the known members.
    pub missing: u32,
    /// Pods that must still be placed for the group to be feasible: `minCount` minus the
    /// scheduled members (at least 1 while a member is unbound), for a gang; the unbound
    /// members otherwise.
    pub needed: u32,
    /// The pod the explanation is computed for (the first unbound member by name, else
    /// the first member), and its requests as the engine counts them.
    pub pod: Option<PodKey>,
    pub requests: Vec<(String, i64)>,
    /// The topology level the group is placed at (KEP-5732 constraint key, or a Kueue
    /// required / preferred level), if any, and whether it is required.
    pub level: Option<String>,
    pub level_required: bool,
    /// Every domain of `level`, most pods fitting first (then by value).
    pub domains: Vec<DomainFit>,
    /// The domains the group's bound members use at `level`.
    pub used_domains: Vec<String>,
    /// The pod-level filters over every node.
    pub filters: Option<FilterSummary>,
    /// KEP-5732 strategy, a group with a topology constraint: every candidate placement
    /// with each PlacementScore plugin's score and the total, the winner marked
    /// ([`crate::placement::explain_placements`]).
    pub placements: Option<PlacementScores>,
    /// Hierarchical strategy (`topologyLevels`): the domains of the level the algorithm
    /// searches first, in its sort order, with the numbers it sorts by and what it
    /// assigned ([`crate::tas::rank_domains`]); `Err` when the request is refused (e.g. an
    /// annotation naming an unknown level).
    pub ranking: Option<Result<TasRanking, String>>,
    /// How the level applies: `required`, `preferred`, `unconstrained` (Kueue annotation)
    /// or `implied` (no topology request under `topologyLevels`: Kueue's implicit default,
    /// spread over the lowest level).
    pub level_mode: Option<&'static str>,
    /// How `placements` / `ranking` was computed: `true` for a group with every member bound, whose
    /// own pods were taken out of the cluster first (the cycle that placed it, against
    /// today's other pods); `false` for the pods still to place, as the next cycle would.
    pub placements_as_decided: bool,
}

impl GroupExplanation {
    /// The domain closest to holding the group: the most pods fitting, then the smallest
    /// shortfall.
    pub fn closest_domain(&self) -> Option<&DomainFit> {
        self.domains.first()
    }
}

/// `pod` as the scheduler saw it before it was placed: no `nodeName` (which the NodeName
/// filter would hold it to), no `nominatedNodeName`.
fn unplaced(pod: &Arc<PodInfo>) -> Arc<PodInfo> {
    if pod.node_name.is_none() && pod.nominated_node_name.is_none() {
        return pod.clone();
    }
    let mut p = PodInfo::clone(pod);
    p.node_name = None;
    p.nominated_node_name = None;
    Arc::new(p)
}

fn named(r: &Resources, names: &[String]) -> Vec<(String, i64)> {
    names.iter().map(|n| (n.clone(), r.get(n))).collect()
}

impl Engine {
    /// Every PodGroup the engine knows (objects, and groups only named by pods), in key
    /// order.
    pub fn group_keys(&self) -> Vec<GroupKey> {
        self.groups.iter().map(|(k, _)| k.clone()).collect()
    }

    /// Explains `group` against the current snapshot (see [`GroupExplanation`]); `None`
    /// when neither the PodGroup nor a pod naming it is known.
    pub fn explain_group(&mut self, group: &GroupKey) -> Option<GroupExplanation> {
        let entry = self.groups.get(group)?;
        let info = entry.info.clone();
        let members: Vec<Arc<PodInfo>> =
            entry.sorted_members().into_iter().filter_map(|k| self.pods.get(k).cloned()).collect();
        let gang_gate = self.gate(Gate::GangScheduling);
        let (gang, min_count) = match info.as_ref().map(|i| i.policy) {
            Some(GroupPolicy::Gang { min_count }) if gang_gate => (true, min_count.max(1)),
            _ => (false, 1),
        };
        let bound: Vec<bool> = members
            .iter()
            .map(|p| {
                self.assumed.contains_key(&p.key) || p.node_name.as_deref().is_some_and(|n| !n.is_empty())
            })
            .collect();
        let scheduled = bound.iter().filter(|b| **b).count();
        let unbound: Vec<&Arc<PodInfo>> =
            members.iter().zip(&bound).filter(|(_, b)| !**b).map(|(p, _)| p).collect();
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let missing = min_count.saturating_sub(count(members.len()));
        let needed = if gang {
            if unbound.is_empty() && missing == 0 {
                0
            } else {
                min_count.saturating_sub(count(scheduled)).max(1)
            }
        } else {
            count(unbound.len())
        };
        // A bound member stands for the group as an unplaced copy (else the NodeName
        // filter would hold it to its node).
        let pod = unbound.first().copied().cloned().or_else(|| members.first().map(unplaced));

        let (level, level_required) = match info.as_ref() {
            Some(i) => match &i.topology_key {
                Some(k) => (Some(k.clone()), true),
                None => {
                    let a = i.pod_group.metadata.annotations.as_ref();
                    match (
                        a.and_then(|a| a.get(PODSET_REQUIRED_TOPOLOGY)),
                        a.and_then(|a| a.get(PODSET_PREFERRED_TOPOLOGY)),
                    ) {
                        (Some(r), _) => (Some(r.clone()), true),
                        (None, Some(p)) => (Some(p.clone()), false),
                        _ => (None, false),
                    }
                }
            },
            None => (None, false),
        };

        // Under `topologyLevels`, a group without a level is placed at the lowest one
        // (`podset-unconstrained-topology`, or Kueue's implicit default with no request).
        let mut level_mode = level.as_ref().map(|_| if level_required { "required" } else { "preferred" });
        let (level, level_mode_hier) = match (&level, self.strategy.is_hierarchical(), info.as_ref()) {
            (None, true, Some(i)) => {
                let unconstrained =
                    i.pod_group.metadata.annotations.as_ref().is_some_and(|a| {
                        a.contains_key(placer_api::annotations::PODSET_UNCONSTRAINED_TOPOLOGY)
                    });
                (
                    self.config.topology_levels.last().cloned(),
                    Some(if unconstrained { "unconstrained" } else { "implied" }),
                )
            }
            _ => (level, None),
        };
        level_mode = level_mode_hier.or(level_mode);
        let mut explanation = GroupExplanation {
            group: group.clone(),
            exists: info.is_some(),
            min_count,
            gang,
            members: members.len(),
            scheduled,
            missing,
            needed,
            pod: pod.as_ref().map(|p| p.key.clone()),
            requests: Vec::new(),
            level: level.clone(),
            level_required,
            domains: Vec::new(),
            used_domains: Vec::new(),
            filters: None,
            placements: None,
            ranking: None,
            level_mode,
            placements_as_decided: false,
        };
        let Some(pod) = pod else { return Some(explanation) };
        let mut names: Vec<String> = vec![crate::resources::PODS.to_string()];
        names.extend(
            pod.requests.iter_nonzero().map(|(n, _)| n.to_string()).filter(|n| n != crate::resources::PODS),
        );
        explanation.requests = named(&pod.requests, &names);

        // The pod-level filters over every node: feasibility per node, reasons per node.
        let all: Vec<NodeId> = self.snapshot.node_ids().to_vec();
        let snap = &self.snapshot;
        let (feasible, fit_error) = match prepare(&self.fw, snap, &pod) {
            Ok(state) => match feasible_prepared(&self.fw, &state, snap, &all) {
                Ok(nodes) => {
                    // Reasons of the rejected nodes, if any: run the filters on the rest.
                    let rest: Vec<NodeId> = all.iter().copied().filter(|n| !nodes.contains(n)).collect();
                    let err = if rest.is_empty() {
                        None
                    } else {
                        feasible_prepared(&self.fw, &state, snap, &rest).err()
                    };
                    (nodes, err)
                }
                Err(e) => (Vec::new(), Some(e)),
            },
            Err(r) => (Vec::new(), Some(prefilter_fit_error(&r, all.len()))),
        };
        let mut reasons: Vec<(String, usize)> = match &fit_error {
            Some(e) if e.reasons.is_empty() => {
                e.pre_message.iter().map(|m| (m.clone(), all.len() - feasible.len())).collect()
            }
            Some(e) => e.reasons.iter().map(|(r, n)| (r.clone(), *n)).collect(),
            None => Vec::new(),
        };
        reasons.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        explanation.filters = Some(FilterSummary { nodes: all.len(), feasible: feasible.len(), reasons });

        if let Some(info) = info.as_ref() {
            self.explain_decision(info, &members, &bound, &mut explanation);
        }

        // The domains of the level, with the engine's per-domain sums.
        let Some(key) = level else { return Some(explanation) };
        let feasible: rustc_hash::FxHashSet<NodeId> = feasible.into_iter().collect();
        let mut total = Resources::default();
        for _ in 0..needed {
            total.add(&pod.requests);
        }
        total.pods = i64::from(needed);
        let index = self.snapshot.refresh_topology_domains(&key).clone();
        let snap = &self.snapshot;
        let mut domains = Vec::new();
        for d in index.domains() {
            let Some(agg) = d.aggregate() else { continue };
            let fits: u32 = d
                .nodes
                .iter()
                .filter(|n| feasible.contains(n))
                .map(|n| fit_count_on(snap.node(*n), &pod.requests))
                .fold(0u32, u32::saturating_add);
            let shortfall = names
                .iter()
                .filter_map(|n| {
                    let lack = total.get(n).saturating_sub(agg.free.get(n));
                    (lack > 0).then(|| (n.clone(), lack))
                })
                .collect();
            domains.push(DomainFit {
                value: d.value.to_string(),
                nodes: d.nodes.len(),
                free: named(&agg.free, &names),
                fits,
                shortfall,
            });
        }
        let lacking = |d: &DomainFit| d.shortfall.iter().map(|(_, v)| *v).fold(0i64, i64::saturating_add);
        domains.sort_by(|a, b| {
            b.fits.cmp(&a.fits).then(lacking(a).cmp(&lacking(b))).then_with(|| a.value.cmp(&b.value))
        });
        explanation.domains = domains;
        let mut used: Vec<String> = members
            .iter()
            .zip(&bound)
            .filter(|(_, b)| **b)
            .map(|(p, _)| p)
            .filter_map(|p| snap.pod_node(&p.key))
            .filter_map(|n| snap.node(n).info.label(&key).map(str::to_string))
            .collect();
        used.sort();
        used.dedup();
        explanation.used_domains = used;
        Some(explanation)
    }
}

impl Engine {
    /// Fills [`GroupExplanation::placements`] (KEP-5732 strategy) or
    /// [`GroupExplanation::ranking`] (hierarchical): the strategy run read-only on the
    /// members still to place, or, when every member is bound, on all of them with their
    /// own pods taken out of the cluster first (rolled back).
    fn explain_decision(
        &mut self,
        info: &Arc<PodGroupInfo>,
        members: &[Arc<PodInfo>],
        bound: &[bool],
        explanation: &mut GroupExplanation,
    ) {
        if members.is_empty() {
            return;
        }
        let as_decided = bound.iter().all(|b| *b);
        let mark = self.snapshot.checkpoint();
        let (pods, scheduled) = if as_decided {
            for p in members {
                self.snapshot.remove_for_simulation(&p.key);
            }
            (members.iter().map(|p| (0, unplaced(p))).collect(), Vec::new())
        } else {
            let unbound = members.iter().zip(bound).filter(|(p, b)| !**b && !p.deleting);
            (unbound.map(|(p, _)| (0, p.clone())).collect(), self.scheduled_members(&info.key))
        };
        let cycle = GroupCycle::new(info.clone(), self.gate(Gate::GangScheduling), pods, scheduled);
        match &mut self.strategy {
            Strategy::Placements => {
                let ctx = GroupContext { placements: &self.placements, algo: &self.fw, config: &self.config };
                explanation.placements = explain_placements(&ctx, &mut self.snapshot, &cycle);
            }
            Strategy::Hierarchical(cache) => {
                explanation.ranking = Some(
                    crate::tas::engine_bridge::rank_unit(&self.config, &self.snapshot, cache, &cycle)
                        .map_err(|f| f.message),
                );
            }
        }
        explanation.placements_as_decided = as_decided;
        self.snapshot.rollback(mark);
    }
}
