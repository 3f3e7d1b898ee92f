//! PodDisruptionBudgets as preemption reads them: how many more pods each budget lets go,
//! and which victims would overdraw a budget.
//!
//! Upstream reads `status.disruptionsAllowed`, which the disruption controller maintains.
//! Placer uses that field when the status has been written (`status.observedGeneration`
//! set, as in a live cluster). Otherwise (the simulator has no disruption controller) it
//! computes the budget from the spec, against the pods the engine knows:
//!
//! * matching pods: same namespace, selected by `spec.selector`, not terminal, not being
//!   deleted; **healthy** ones are bound and not reported `Ready=False`;
//! * `minAvailable: n` (or `p%` of the matching pods, rounded up): `healthy - n`;
//! * `maxUnavailable: n` (or `p%`, rounded up): `n - (matching - healthy)`;
//! * neither: every healthy pod may go.
//!
//! This is an approximation of the disruption controller: it counts the matching pods
//! rather than the scale of their controller, and does not know `unhealthyPodEvictionPolicy`.
//! As in v1.36, a budget with a missing or empty selector protects nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use placer_api::k8s::api::policy::v1::PodDisruptionBudget;
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::LabelSelector;
use placer_api::k8s::apimachinery::pkg::util::intstr::IntOrString;

use crate::framework::helper::{label_selector_is_empty, label_selector_matches, validate_label_selector};
use crate::model::{PodInfo, PodKey};

/// One budget with the disruptions it still allows.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// `namespace/name` of the PodDisruptionBudget.
    pub key: PodKey,
    selector: LabelSelector,
    /// Disruptions still allowed (may go negative while victims are counted).
    pub allowed: i64,
    /// Pods the API server already counted as disrupted (`status.disruptedPods`): evicting
    /// them again costs nothing.
    disrupted: BTreeSet<String>,
}

impl Budget {
    /// Whether this budget covers `pod`.
    pub fn covers(&self, pod: &PodInfo) -> bool {
        pod.key.namespace == self.key.namespace && label_selector_matches(&self.selector, pod.labels())
    }
}

/// Budgets of every PodDisruptionBudget with a usable selector, in key order. `pods` are
/// all pods the engine knows (bound or not).
pub fn budgets<'p>(
    pdbs: &BTreeMap<PodKey, Arc<PodDisruptionBudget>>,
    pods: impl Iterator<Item = &'p Arc<PodInfo>> + Clone,
) -> Vec<Budget> {
    let mut out = Vec::new();
    for (key, pdb) in pdbs {
        let Some(spec) = pdb.spec.as_ref() else { continue };
        let Some(selector) = spec.selector.clone() else { continue };
        if label_selector_is_empty(&selector) || validate_label_selector(&selector).is_err() {
            continue;
        }
        let status = pdb.status.as_ref().filter(|s| s.observed_generation.is_some());
        let disrupted: BTreeSet<String> = status
            .and_then(|s| s.disrupted_pods.as_ref())
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        let mut budget = Budget { key: key.clone(), selector, allowed: 0, disrupted };
        budget.allowed = match status {
            Some(s) => i64::from(s.disruptions_allowed.unwrap_or(0)),
            None => {
                let (mut matching, mut healthy) = (0i64, 0i64);
                for p in pods.clone().filter(|p| !p.terminal && !p.deleting && budget.covers(p)) {
                    matching += 1;
                    healthy += i64::from(p.node_name.is_some() && !p.view.reports_not_ready);
                }
                allowed_from_spec(
                    spec.min_available.as_ref(),
                    spec.max_unavailable.as_ref(),
                    matching,
                    healthy,
                )
            }
        };
        out.push(budget);
    }
    out
}

/// An absolute number, or a percentage of `total` rounded up. Unreadable values count as 0.
fn scaled(value: &IntOrString, total: i64) -> i64 {
    match value {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(s) => match s.strip_suffix('%').and_then(|p| p.trim().parse::<i64>().ok()) {
            Some(pct) => (total * pct + 99) / 100,
            None => s.trim().parse::<i64>().unwrap_or(0),
        },
    }
}

/// Disruptions a budget allows given the matching and healthy pod counts (never negative).
pub fn allowed_from_spec(
    min_available: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    matching: i64,
    healthy: i64,
) -> i64 {
    let allowed = match (min_available, max_unavailable) {
        (Some(min), _) => healthy - scaled(min, matching),
        (None, Some(max)) => scaled(max, matching) - (matching - healthy),
        (None, None) => healthy,
    };
    allowed.max(0)
}

/// Splits `units` (each a list of pods, in the order given) into those whose eviction would
/// overdraw a budget and the others, keeping the order inside each part. Budgets are
/// charged pod by pod in that order, like upstream's `filterVictimsWithPDBViolation`: the
/// first pods a budget can afford are not violating, the ones after are.
pub fn split_by_violation<T>(
    units: Vec<T>,
    pods_of: impl Fn(&T) -> &[Arc<PodInfo>],
    budgets: &mut [Budget],
) -> (Vec<T>, Vec<T>) {
    let mut violating = Vec::new();
    let mut other = Vec::new();
    for unit in units {
        let mut violates = false;
        for pod in pods_of(&unit) {
            for b in budgets.iter_mut() {
                if !b.covers(pod) || b.disrupted.contains(&*pod.key.name) {
                    continue;
                }
                b.allowed -= 1;
                if b.allowed < 0 {
                    violates = true;
                }
            }
        }
        if violates {
            violating.push(unit);
        } else {
            other.push(unit);
        }
    }
    (violating, other)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::pod;
    use serde_json::json;

    fn pdb(name: &str, spec: serde_json::Value) -> (PodKey, Arc<PodDisruptionBudget>) {
        let pdb: PodDisruptionBudget =
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec}))
                .expect("valid PodDisruptionBudget");
        (PodKey::new("default", name), Arc::new(pdb))
    }

    fn foo(name: &str, node: Option<&str>) -> Arc<PodInfo> {
        let mut b = pod(name).cpu("1").label("app", "foo");
        if let Some(n) = node {
            b = b.on(n);
        }
        Arc::new(b.build())
    }

    #[test]
    fn min_available_leaves_healthy_minus_min() {
        assert_eq!(allowed_from_spec(Some(&IntOrString::Int(2)), None, 3, 3), 1);
        assert_eq!(allowed_from_spec(Some(&IntOrString::Int(2)), None, 2, 2), 0);
        assert_eq!(allowed_from_spec(Some(&IntOrString::Int(5)), None, 2, 2), 0, "never negative");
    }

    #[test]
    fn percentages_round_up() {
        // 50% of 3 matching pods is 2 (rounded up): 3 healthy - 2 = 1.
        assert_eq!(allowed_from_spec(Some(&IntOrString::String("50%".into())), None, 3, 3), 1);
        // maxUnavailable 34% of 3 = 2 (rounded up), one already unhealthy: 1 more.
        assert_eq!(allowed_from_spec(None, Some(&IntOrString::String("34%".into())), 3, 2), 1);
    }

    #[test]
    fn max_unavailable_counts_pods_already_down() {
        assert_eq!(allowed_from_spec(None, Some(&IntOrString::Int(1)), 3, 3), 1);
        assert_eq!(allowed_from_spec(None, Some(&IntOrString::Int(1)), 3, 2), 0);
    }

    #[test]
    fn only_bound_matching_pods_in_the_namespace_are_healthy() {
        let pdbs: BTreeMap<_, _> =
            [pdb("foo", json!({"minAvailable": 1, "selector": {"matchLabels": {"app": "foo"}}}))]
                .into_iter()
                .collect();
        let pods = [
            foo("a", Some("n1")),
            foo("b", Some("n1")),
            foo("pending", None),
            Arc::new(pod("other").on("n1").build()),
        ];
        let b = budgets(&pdbs, pods.iter());
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].allowed, 1, "2 healthy - minAvailable 1");
    }

    #[test]
    fn budgets_without_a_selector_protect_nothing() {
        let pdbs: BTreeMap<_, _> = [
            pdb("none", json!({"minAvailable": 1})),
            pdb("empty", json!({"minAvailable": 1, "selector": {}})),
        ]
        .into_iter()
        .collect();
        assert!(budgets(&pdbs, [foo("a", Some("n1"))].iter()).is_empty());
    }

    #[test]
    fn written_status_wins_over_the_spec() {
        let mut pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": "foo", "namespace": "default"},
            "spec": {"minAvailable": 0, "selector": {"matchLabels": {"app": "foo"}}},
            "status": {"observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 1,
                       "desiredHealthy": 1, "expectedPods": 1}
        }))
        .expect("valid PodDisruptionBudget");
        pdb.metadata.generation = Some(1);
        let pdbs: BTreeMap<_, _> = [(PodKey::new("default", "foo"), Arc::new(pdb))].into_iter().collect();
        let b = budgets(&pdbs, [foo("a", Some("n1"))].iter());
        assert_eq!(b[0].allowed, 0);
    }

    #[test]
    fn victims_are_charged_in_order_and_the_overdraft_violates() {
        let pdbs: BTreeMap<_, _> =
            [pdb("foo", json!({"minAvailable": 1, "selector": {"matchLabels": {"app": "foo"}}}))]
                .into_iter()
                .collect();
        let pods = [foo("a", Some("n1")), foo("b", Some("n1")), foo("c", Some("n1"))];
        let mut b = budgets(&pdbs, pods.iter());
        assert_eq!(b[0].allowed, 2);
        let units: Vec<Vec<Arc<PodInfo>>> = vec![
            vec![pods[0].clone()],
            vec![Arc::new(pod("free").on("n1").build())],
            vec![pods[1].clone()],
            vec![pods[2].clone()],
        ];
        let (violating, other) = split_by_violation(units, |u| u.as_slice(), &mut b);
        let names = |v: &[Vec<Arc<PodInfo>>]| v.iter().map(|u| u[0].key.name.to_string()).collect::<Vec<_>>();
        assert_eq!(names(&other), ["a", "free", "b"]);
        assert_eq!(names(&violating), ["c"]);
    }
}
