//! Label selectors, node selector terms and tolerations, evaluated directly on the API
//! types with the semantics of `k8s.io/apimachinery/pkg/labels` and
//! `k8s.io/component-helpers/scheduling/corev1`. Nothing here allocates.

use std::collections::BTreeMap;

use placer_api::k8s::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, Taint, Toleration};
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use placer_api::names::{check_label_key, check_label_value};

/// Labels of an object.
pub type Labels = BTreeMap<String, String>;

/// The empty label set.
pub static NO_LABELS: Labels = BTreeMap::new();

/// The label every namespace carries with its own name (the API server sets it and keeps
/// it equal to the name).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The labels of the Namespace objects the engine has seen, by namespace name.
pub type NamespaceIndex = BTreeMap<String, Labels>;

/// Something that can look up label values.
pub trait LabelLookup {
    /// The value of label `key`, if present.
    fn label(&self, key: &str) -> Option<&str>;
}

impl LabelLookup for Labels {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// The labels of a namespace: its Namespace object's labels when the engine has seen it
/// (none when it has not), and always `kubernetes.io/metadata.name` with its name.
#[derive(Debug, Clone, Copy)]
pub struct NamespaceLabels<'a> {
    pub name: &'a str,
    pub labels: Option<&'a Labels>,
}

impl<'a> NamespaceLabels<'a> {
    /// The labels of namespace `name` as `index` knows them.
    pub fn of(name: &'a str, index: &'a NamespaceIndex) -> Self {
        NamespaceLabels { name, labels: index.get(name) }
    }
}

impl LabelLookup for NamespaceLabels<'_> {
    fn label(&self, key: &str) -> Option<&str> {
        if key == NAMESPACE_NAME_LABEL {
            return Some(self.name);
        }
        self.labels.and_then(|l| l.get(key)).map(String::as_str)
    }
}

/// The labels of an object, or the empty set.
pub fn labels_or_empty(labels: Option<&Labels>) -> &Labels {
    labels.unwrap_or(&NO_LABELS)
}

/// A selector the API server would have rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("key {key:?}: {operator:?} is not a valid selector operator")]
    InvalidOperator { key: String, operator: String },
    #[error("key {key:?}: for operator {operator:?} values must be non-empty")]
    ValuesRequired { key: String, operator: String },
    #[error("key {key:?}: for operator {operator:?} values must be empty")]
    ValuesForbidden { key: String, operator: String },
    #[error("key {key:?}: for operator {operator:?} values must be a single integer")]
    IntegerRequired { key: String, operator: String },
    #[error("field {key:?}: for operator {operator:?} values must have exactly one element")]
    FieldValue { key: String, operator: String },
}

fn values(v: &Option<Vec<String>>) -> &[String] {
    v.as_deref().unwrap_or(&[])
}

// ---------------------------------------------------------------------------------------
// Label selectors (metav1.LabelSelector)
// ---------------------------------------------------------------------------------------

/// Checks a label selector like `metav1.LabelSelectorAsSelector` does.
pub fn validate_label_selector(sel: &LabelSelector) -> Result<(), SelectorError> {
    for r in sel.match_expressions.iter().flatten() {
        let err = |f: fn(String, String) -> SelectorError| f(r.key.clone(), r.operator.clone());
        match r.operator.as_str() {
            "In" | "NotIn" if values(&r.values).is_empty() => {
                return Err(err(|key, operator| SelectorError::ValuesRequired { key, operator }))
            }
            "Exists" | "DoesNotExist" if !values(&r.values).is_empty() => {
                return Err(err(|key, operator| SelectorError::ValuesForbidden { key, operator }))
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            _ => return Err(err(|key, operator| SelectorError::InvalidOperator { key, operator })),
        }
    }
    Ok(())
}

/// A selector without requirements (`{}`): it selects everything.
pub fn label_selector_is_empty(sel: &LabelSelector) -> bool {
    sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && sel.match_expressions.as_ref().is_none_or(|e| e.is_empty())
}

/// Whether `sel` selects `labels`. Invalid requirements select nothing.
pub fn label_selector_matches<L: LabelLookup + ?Sized>(sel: &LabelSelector, labels: &L) -> bool {
    sel.match_labels.iter().flatten().all(|(k, v)| labels.label(k) == Some(v.as_str()))
        && sel.match_expressions.iter().flatten().all(|r| label_requirement_matches(r, labels))
}

fn label_requirement_matches<L: LabelLookup + ?Sized>(r: &LabelSelectorRequirement, labels: &L) -> bool {
    let vals = values(&r.values);
    let value = labels.label(&r.key);
    match r.operator.as_str() {
        "In" => !vals.is_empty() && value.is_some_and(|v| vals.iter().any(|x| x == v)),
        "NotIn" => !vals.is_empty() && value.is_none_or(|v| vals.iter().all(|x| x != v)),
        "Exists" => vals.is_empty() && value.is_some(),
        "DoesNotExist" => vals.is_empty() && value.is_none(),
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------
// Node selector terms (nodeAffinity)
// ---------------------------------------------------------------------------------------

/// A term without expressions and fields: it selects no node.
pub fn node_selector_term_is_empty(term: &NodeSelectorTerm) -> bool {
    term.match_expressions.as_ref().is_none_or(|e| e.is_empty())
        && term.match_fields.as_ref().is_none_or(|f| f.is_empty())
}

/// Checks a node selector term like `nodeaffinity.newNodeSelectorTerm` does.
#[cfg(test)]
pub fn validate_node_selector_term(term: &NodeSelectorTerm) -> Result<(), SelectorError> {
    for r in term.match_expressions.iter().flatten() {
        let vals = values(&r.values);
        let err = |f: fn(String, String) -> SelectorError| Err(f(r.key.clone(), r.operator.clone()));
        match r.operator.as_str() {
            "In" | "NotIn" if vals.is_empty() => {
                return err(|key, operator| SelectorError::ValuesRequired { key, operator })
            }
            "Exists" | "DoesNotExist" if !vals.is_empty() => {
                return err(|key, operator| SelectorError::ValuesForbidden { key, operator })
            }
            "Gt" | "Lt" if vals.len() != 1 || vals[0].parse::<i64>().is_err() => {
                return err(|key, operator| SelectorError::IntegerRequired { key, operator })
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
            _ => return err(|key, operator| SelectorError::InvalidOperator { key, operator }),
        }
    }
    for r in term.match_fields.iter().flatten() {
        if values(&r.values).len() != 1 {
            return Err(SelectorError::FieldValue { key: r.key.clone(), operator: r.operator.clone() });
        }
        if !matches!(r.operator.as_str(), "In" | "NotIn") {
            return Err(SelectorError::InvalidOperator { key: r.key.clone(), operator: r.operator.clone() });
        }
    }
    Ok(())
}

/// Whether component-helpers' `nodeaffinity` can parse the term (it selects nothing when
/// it cannot): every expression's key is a qualified name, its operator one of In, NotIn,
/// Exists, DoesNotExist, Gt, Lt with the values it needs (In / NotIn: some; Exists /
/// DoesNotExist: none; Gt / Lt: one integer), and every value a valid label value (as
/// apimachinery's `labels.NewRequirement` checks); every field requirement is on
/// `metadata.name` with In or NotIn and exactly one value.
pub fn node_selector_term_is_valid(term: &NodeSelectorTerm) -> bool {
    let expr_ok = |r: &NodeSelectorRequirement| {
        let vals = values(&r.values);
        let op_ok = match r.operator.as_str() {
            "In" | "NotIn" => !vals.is_empty(),
            "Exists" | "DoesNotExist" => vals.is_empty(),
            "Gt" | "Lt" => vals.len() == 1 && vals[0].parse::<i64>().is_ok(),
            _ => false,
        };
        op_ok && check_label_key(&r.key).is_ok() && vals.iter().all(|v| check_label_value(v).is_ok())
    };
    let field_ok = |r: &NodeSelectorRequirement| {
        r.key == "metadata.name"
            && values(&r.values).len() == 1
            && matches!(r.operator.as_str(), "In" | "NotIn")
    };
    term.match_expressions.iter().flatten().all(expr_ok) && term.match_fields.iter().flatten().all(field_ok)
}

/// Whether a node (by name and labels) satisfies the term: every expression and every field
/// requirement holds. An empty or invalid term ([`node_selector_term_is_valid`]) selects no
/// node, so a `NotIn` with an invalid label value excludes every node.
pub fn node_selector_term_matches(term: &NodeSelectorTerm, node_name: &str, labels: &Labels) -> bool {
    if node_selector_term_is_empty(term) || !node_selector_term_is_valid(term) {
        return false;
    }
    term.match_expressions.iter().flatten().all(|r| node_requirement_matches(r, labels))
        && term.match_fields.iter().flatten().all(|r| field_requirement_matches(r, node_name))
}

/// Whether any of the terms (ORed) selects the node.
pub fn node_selector_terms_match(terms: &[NodeSelectorTerm], node_name: &str, labels: &Labels) -> bool {
    terms.iter().any(|t| node_selector_term_matches(t, node_name, labels))
}

fn node_requirement_matches(r: &NodeSelectorRequirement, labels: &Labels) -> bool {
    let vals = values(&r.values);
    let value = labels.get(&r.key).map(String::as_str);
    match r.operator.as_str() {
        "In" => !vals.is_empty() && value.is_some_and(|v| vals.iter().any(|x| x == v)),
        "NotIn" => !vals.is_empty() && value.is_none_or(|v| vals.iter().all(|x| x != v)),
        "Exists" => vals.is_empty() && value.is_some(),
        "DoesNotExist" => vals.is_empty() && value.is_none(),
        op @ ("Gt" | "Lt") => {
            let (Some(v), [bound]) = (value, vals) else { return false };
            let (Ok(v), Ok(bound)) = (v.parse::<i64>(), bound.parse::<i64>()) else { return false };
            if op == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

/// Field requirements: only `metadata.name` is a node field; other keys read as "".
fn field_requirement_matches(r: &NodeSelectorRequirement, node_name: &str) -> bool {
    let [want] = values(&r.values) else { return false };
    let have = if r.key == "metadata.name" { node_name } else { "" };
    match r.operator.as_str() {
        "In" => have == want,
        "NotIn" => have != want,
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------
// Taints and tolerations
// ---------------------------------------------------------------------------------------

/// `NoSchedule`.
pub const NO_SCHEDULE: &str = "NoSchedule";
/// `PreferNoSchedule`.
pub const PREFER_NO_SCHEDULE: &str = "PreferNoSchedule";
/// `NoExecute`.
pub const NO_EXECUTE: &str = "NoExecute";
/// Taint the node lifecycle controller puts on nodes that are not ready.
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// Taint equivalent of `spec.unschedulable`.
pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// A taint by reference (node taints and synthesized ones alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaintRef<'a> {
    pub key: &'a str,
    pub value: &'a str,
    pub effect: &'a str,
}

impl<'a> From<&'a Taint> for TaintRef<'a> {
    fn from(t: &'a Taint) -> Self {
        TaintRef { key: &t.key, value: t.value.as_deref().unwrap_or(""), effect: &t.effect }
    }
}

/// Whether one toleration tolerates the taint (`v1.Toleration.ToleratesTaint`).
pub fn tolerates(t: &Toleration, taint: TaintRef<'_>) -> bool {
    if let Some(effect) = t.effect.as_deref().filter(|e| !e.is_empty()) {
        if effect != taint.effect {
            return false;
        }
    }
    if let Some(key) = t.key.as_deref().filter(|k| !k.is_empty()) {
        if key != taint.key {
            return false;
        }
    }
    match t.operator.as_deref().unwrap_or("") {
        "" | "Equal" => t.value.as_deref().unwrap_or("") == taint.value,
        "Exists" => true,
        _ => false,
    }
}

/// Whether any of the tolerations tolerates the taint.
pub fn tolerations_tolerate(tolerations: &[Toleration], taint: TaintRef<'_>) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

/// The node's taints as the scheduler sees them: `spec.taints`, plus
/// `node.kubernetes.io/not-ready:NoExecute` when the node is not ready and does not carry
/// that taint already.
pub fn node_taints(node: &crate::model::NodeStatic) -> impl Iterator<Item = TaintRef<'_>> {
    let own = node.node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or(&[]);
    let synthetic = (!node.ready && !own.iter().any(|t| t.key == TAINT_NOT_READY && t.effect == NO_EXECUTE))
        .then_some(TaintRef { key: TAINT_NOT_READY, value: "", effect: NO_EXECUTE });
    own.iter().map(TaintRef::from).chain(synthetic)
}

/// The first NoSchedule / NoExecute taint of the node no toleration tolerates.
pub fn first_untolerated_taint<'n>(
    node: &'n crate::model::NodeStatic,
    tolerations: &[Toleration],
) -> Option<TaintRef<'n>> {
    node_taints(node)
        .filter(|t| t.effect == NO_SCHEDULE || t.effect == NO_EXECUTE)
        .find(|t| !tolerations_tolerate(tolerations, *t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn expr(key: &str, op: &str, vals: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!vals.is_empty()).then(|| vals.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn node_expr(key: &str, op: &str, vals: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!vals.is_empty()).then(|| vals.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn selector(exprs: Vec<LabelSelectorRequirement>) -> LabelSelector {
        LabelSelector { match_expressions: Some(exprs), match_labels: None }
    }

    #[test]
    fn label_selector_operators() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        assert!(label_selector_matches(&selector(vec![expr("app", "In", &["web", "db"])]), &l));
        assert!(!label_selector_matches(&selector(vec![expr("app", "In", &["db"])]), &l));
        assert!(label_selector_matches(&selector(vec![expr("app", "NotIn", &["db"])]), &l));
        assert!(
            label_selector_matches(&selector(vec![expr("missing", "NotIn", &["db"])]), &l),
            "NotIn holds for absent keys"
        );
        assert!(label_selector_matches(&selector(vec![expr("tier", "Exists", &[])]), &l));
        assert!(label_selector_matches(&selector(vec![expr("zone", "DoesNotExist", &[])]), &l));
        assert!(
            !label_selector_matches(&selector(vec![expr("app", "Bogus", &["web"])]), &l),
            "invalid selects nothing"
        );
        let by_labels =
            LabelSelector { match_labels: Some(labels(&[("app", "web")])), match_expressions: None };
        assert!(label_selector_matches(&by_labels, &l));
        assert!(label_selector_matches(&LabelSelector::default(), &l), "{{}} selects everything");
        assert!(label_selector_is_empty(&LabelSelector::default()));
    }

    #[test]
    fn label_selector_validation() {
        assert!(validate_label_selector(&selector(vec![expr("a", "In", &[])])).is_err());
        assert!(validate_label_selector(&selector(vec![expr("a", "Exists", &["x"])])).is_err());
        assert!(
            validate_label_selector(&selector(vec![expr("a", "Gt", &["1"])])).is_err(),
            "Gt is node-only"
        );
        assert!(validate_label_selector(&selector(vec![expr("a", "NotIn", &["x"])])).is_ok());
    }

    #[test]
    fn namespace_labels_know_only_the_name() {
        let index = NamespaceIndex::new();
        let ns = NamespaceLabels::of("team-a", &index);
        let by_name = LabelSelector {
            match_labels: Some(labels(&[(NAMESPACE_NAME_LABEL, "team-a")])),
            match_expressions: None,
        };
        assert!(label_selector_matches(&by_name, &ns));
        assert!(!label_selector_matches(&by_name, &NamespaceLabels::of("team-b", &index)));
    }

    #[test]
    fn namespace_labels_come_from_the_object_with_the_implicit_name_label() {
        let mut index = NamespaceIndex::new();
        // A label claiming another name does not override the implicit one.
        index.insert("team-a".into(), labels(&[("tier", "prod"), (NAMESPACE_NAME_LABEL, "other")]));
        let prod = LabelSelector { match_labels: Some(labels(&[("tier", "prod")])), match_expressions: None };
        let by_name = LabelSelector {
            match_labels: Some(labels(&[(NAMESPACE_NAME_LABEL, "team-a")])),
            match_expressions: None,
        };
        assert!(label_selector_matches(&prod, &NamespaceLabels::of("team-a", &index)));
        assert!(label_selector_matches(&by_name, &NamespaceLabels::of("team-a", &index)));
        assert!(!label_selector_matches(&prod, &NamespaceLabels::of("team-b", &index)), "unknown: unlabeled");
    }

    #[test]
    fn a_term_with_an_invalid_label_value_or_key_selects_nothing() {
        // Upstream nodeaffinity: labels.NewRequirement fails, the term matches no node.
        let l = labels(&[("zone", "a"), ("gpus", "8")]);
        let term = |exprs: Vec<NodeSelectorRequirement>| NodeSelectorTerm {
            match_expressions: Some(exprs),
            match_fields: None,
        };
        for (key, op, vals) in [
            ("zone", "NotIn", &["b/c"][..]),
            ("zone", "NotIn", &["-b"][..]),
            ("zone", "In", &["a", "not valid"][..]),
            ("zone", "NotIn", &[&*"x".repeat(64)][..]),
            ("gpus", "Lt", &["-1"][..]),
            ("bad key!", "DoesNotExist", &[][..]),
            ("zone", "In", &[][..]),
            ("zone", "Exists", &["a"][..]),
            ("zone", "Bogus", &["a"][..]),
        ] {
            let t = term(vec![node_expr(key, op, vals)]);
            assert!(!node_selector_term_is_valid(&t), "{key} {op} {vals:?}");
            assert!(!node_selector_term_matches(&t, "n1", &l), "{key} {op} {vals:?}");
        }
        // Another term of the same selector still matches.
        let terms =
            [term(vec![node_expr("zone", "NotIn", &["b/c"])]), term(vec![node_expr("zone", "In", &["a"])])];
        assert!(node_selector_terms_match(&terms, "n1", &l));
        // Fields: only metadata.name.
        let field = |key: &str, op: &str| NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![node_expr(key, op, &["n2"])]),
        };
        assert!(node_selector_term_matches(&field("metadata.name", "NotIn"), "n1", &l));
        assert!(!node_selector_term_matches(&field("metadata.namespace", "NotIn"), "n1", &l));
        assert!(!node_selector_term_matches(&field("metadata.name", "Exists"), "n1", &l));
        // The empty value is a valid label value.
        assert!(node_selector_term_matches(&term(vec![node_expr("zone", "NotIn", &[""])]), "n1", &l));
    }

    #[test]
    fn node_selector_operators_including_gt_lt_and_fields() {
        let l = labels(&[("gpus", "8"), ("zone", "a")]);
        let term = |exprs: Vec<NodeSelectorRequirement>| NodeSelectorTerm {
            match_expressions: Some(exprs),
            match_fields: None,
        };
        assert!(node_selector_term_matches(&term(vec![node_expr("gpus", "Gt", &["4"])]), "n1", &l));
        assert!(!node_selector_term_matches(&term(vec![node_expr("gpus", "Gt", &["8"])]), "n1", &l));
        assert!(node_selector_term_matches(&term(vec![node_expr("gpus", "Lt", &["9"])]), "n1", &l));
        assert!(
            !node_selector_term_matches(&term(vec![node_expr("zone", "Lt", &["9"])]), "n1", &l),
            "non-integer label"
        );
        assert!(
            !node_selector_term_matches(&term(vec![node_expr("none", "Gt", &["0"])]), "n1", &l),
            "absent label"
        );
        assert!(node_selector_term_matches(&term(vec![node_expr("zone", "In", &["a"])]), "n1", &l));
        assert!(node_selector_term_matches(&term(vec![node_expr("zone", "NotIn", &["b"])]), "n1", &l));
        assert!(node_selector_term_matches(&term(vec![node_expr("zone", "Exists", &[])]), "n1", &l));
        assert!(node_selector_term_matches(&term(vec![node_expr("rack", "DoesNotExist", &[])]), "n1", &l));
        assert!(
            !node_selector_term_matches(&NodeSelectorTerm::default(), "n1", &l),
            "empty term selects nothing"
        );
        let fields = NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![node_expr("metadata.name", "In", &["n1"])]),
        };
        assert!(node_selector_term_matches(&fields, "n1", &l));
        assert!(!node_selector_term_matches(&fields, "n2", &l));
        let not_in = NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![node_expr("metadata.name", "NotIn", &["n1"])]),
        };
        assert!(node_selector_term_matches(&not_in, "n2", &l));
        assert!(validate_node_selector_term(&term(vec![node_expr("gpus", "Gt", &["x"])])).is_err());
        assert!(validate_node_selector_term(&term(vec![node_expr("gpus", "Gt", &["1", "2"])])).is_err());
    }

    #[test]
    fn toleration_matching() {
        let taint = TaintRef { key: "dedicated", value: "gpu", effect: NO_SCHEDULE };
        let tol =
            |key: Option<&str>, op: Option<&str>, value: Option<&str>, effect: Option<&str>| Toleration {
                key: key.map(Into::into),
                operator: op.map(Into::into),
                value: value.map(Into::into),
                effect: effect.map(Into::into),
                toleration_seconds: None,
            };
        assert!(
            tolerates(&tol(Some("dedicated"), None, Some("gpu"), None), taint),
            "empty operator is Equal"
        );
        assert!(!tolerates(&tol(Some("dedicated"), Some("Equal"), Some("cpu"), None), taint));
        assert!(tolerates(&tol(Some("dedicated"), Some("Exists"), None, Some(NO_SCHEDULE)), taint));
        assert!(
            !tolerates(&tol(Some("dedicated"), Some("Exists"), None, Some(NO_EXECUTE)), taint),
            "effect must match"
        );
        assert!(
            tolerates(&tol(None, Some("Exists"), None, None), taint),
            "empty key + Exists tolerates everything"
        );
        assert!(!tolerates(&tol(Some("other"), Some("Exists"), None, None), taint));
    }
}
