//! `TopologyAnnotationValidation`: Kueue's Job webhook checks of the topology annotations on
//! a Job's pod template, run where Kueue runs them, at admission (create and update), so a
//! Job Placer could never place is refused at once instead of leaving an unschedulable
//! PodGroup behind.
//!
//! The rules are Kueue's `ValidateTASPodSetRequest` and
//! `ValidateSliceSizeAnnotationUpperBound` (`pkg/controller/jobframework/tas_validation.go`,
//! called by `pkg/controller/jobs/job/job_webhook.go`), in the API server's words
//! (`spec.template.metadata.annotations[<key>]: Invalid value: "<v>": <why>`):
//!
//! * at most one of `podset-required-topology`, `podset-preferred-topology`,
//!   `podset-unconstrained-topology`; the levels they and `podset-slice-required-topology`
//!   name are label keys; `podset-unconstrained-topology` is a boolean;
//! * `podset-slice-size` is a number of at least 1 and at most the Job's pod count
//!   (`min(parallelism, completions)`), needed with `podset-slice-required-topology` and
//!   forbidden without it;
//! * `podset-group-name` is not a number, goes with a required or preferred level and not
//!   with slices;
//! * `podset-slice-required-topology-constraints` needs gate `TASMultiLayerTopology`,
//!   excludes the two-level slice annotations and the group name, is a JSON list of 1 to 3
//!   `{topology, size}` entries with label-key topologies, distinct, sizes of at least 1,
//!   each dividing the one above, the first at most the pod count.
//!
//! Seed 002 lists further rules Kueue checks only once the flavor's Topology is known
//! (the workload is then deactivated): the named levels exist, the slice level is below
//! the main level, the slice size divides the pod count, layers go coarsest to finest.
//! Placer knows its topology up front (`topologyLevels`), so with levels given those are
//! checked here too ([`placer_engine::check_topology_annotations`]).
//!
//! PodGroups are not checked here: a PodGroup with an invalid request stays unschedulable
//! with a condition naming the annotation (what the scheduler does today).

use std::collections::BTreeMap;

use placer_api::annotations::{
    PODSET_GROUP_NAME, PODSET_PREFERRED_TOPOLOGY, PODSET_REQUIRED_TOPOLOGY, PODSET_SLICE_REQUIRED_TOPOLOGY,
    PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS, PODSET_SLICE_SIZE, PODSET_UNCONSTRAINED_TOPOLOGY,
};
use placer_api::gates::{FeatureGates, Gate};
use placer_api::k8s::api::batch::v1::{CronJob, Job};
use placer_cluster::validation::{check_label_key, echo, render, FieldError};
use placer_cluster::{Admission, ClusterStore, Object};

/// Where a Job's pod template annotations are.
const ANNOTATIONS: &str = "spec.template.metadata.annotations";
/// The name of Kueue's validating webhook for Jobs, which admission errors quote.
const WEBHOOK: &str = "vjob.kb.io";

fn at(key: &str) -> String {
    format!("{ANNOTATIONS}[{key}]")
}

fn invalid(field: String, value: &str, why: impl AsRef<str>) -> FieldError {
    FieldError { field, message: format!("Invalid value: {}: {}", echo(value), why.as_ref()) }
}

fn forbidden(field: String, why: impl AsRef<str>) -> FieldError {
    FieldError { field, message: format!("Forbidden: {}", why.as_ref()) }
}

/// Go's `strconv.ParseBool`.
fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Go's `strconv.ParseInt(v, 10, 32)`.
fn parse_i32(v: &str) -> Option<i32> {
    let digits = v.strip_prefix(['+', '-']).unwrap_or(v);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

/// The pods of the Job's one PodSet, as Kueue counts them: `min(parallelism, completions)`,
/// parallelism defaulting to 1.
pub fn job_pod_count(job: &Job) -> i32 {
    let spec = job.spec.as_ref();
    let parallelism = spec.and_then(|s| s.parallelism).unwrap_or(1);
    match spec.and_then(|s| s.completions) {
        Some(c) if c < parallelism => c,
        _ => parallelism,
    }
}

/// One `{topology, size}` entry of the multi-layer annotation.
#[derive(serde::Deserialize)]
struct Layer {
    #[serde(default)]
    topology: String,
    #[serde(default)]
    size: i32,
}

/// Kueue's webhook rules on one pod template's annotations (`count`: the PodSet's pods).
pub fn validate_template(
    annotations: &BTreeMap<String, String>,
    count: i32,
    gates: &FeatureGates,
) -> Vec<FieldError> {
    let get = |k: &str| annotations.get(k).map(String::as_str);
    let required = get(PODSET_REQUIRED_TOPOLOGY);
    let preferred = get(PODSET_PREFERRED_TOPOLOGY);
    let unconstrained = get(PODSET_UNCONSTRAINED_TOPOLOGY);
    let slice_level = get(PODSET_SLICE_REQUIRED_TOPOLOGY);
    let slice_size = get(PODSET_SLICE_SIZE);
    let group = get(PODSET_GROUP_NAME);
    let mut errs = Vec::new();

    if [required, preferred, unconstrained].iter().filter(|v| v.is_some()).count() > 1 {
        errs.push(FieldError {
            field: ANNOTATIONS.to_string(),
            message: format!(
                "Invalid value: must not contain more than one topology annotation: [{PODSET_REQUIRED_TOPOLOGY:?}, \
                 {PODSET_PREFERRED_TOPOLOGY:?}, {PODSET_UNCONSTRAINED_TOPOLOGY:?}]"
            ),
        });
    }
    for (key, value) in [
        (PODSET_REQUIRED_TOPOLOGY, required),
        (PODSET_PREFERRED_TOPOLOGY, preferred),
        (PODSET_SLICE_REQUIRED_TOPOLOGY, slice_level),
    ] {
        if let Some(v) = value {
            if let Err(why) = check_label_key(v) {
                errs.push(invalid(at(key), v, why));
            }
        }
    }
    if let Some(name) = group {
        if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) && name.parse::<u64>().is_ok() {
            errs.push(invalid(at(PODSET_GROUP_NAME), name, "must not be a number"));
        }
        if slice_size.is_some() {
            errs.push(forbidden(
                at(PODSET_GROUP_NAME),
                format!("may not be set when '{PODSET_SLICE_SIZE}' is specified"),
            ));
        }
        if slice_level.is_some() {
            errs.push(forbidden(
                at(PODSET_GROUP_NAME),
                format!("may not be set when '{PODSET_SLICE_REQUIRED_TOPOLOGY}' is specified"),
            ));
        }
        if preferred.is_none() && required.is_none() {
            errs.push(forbidden(
                at(PODSET_GROUP_NAME),
                format!(
                    "may not be set when neither '{PODSET_PREFERRED_TOPOLOGY}' nor '{PODSET_REQUIRED_TOPOLOGY}' is specified"
                ),
            ));
        }
    }
    if let Some(v) = unconstrained {
        if parse_bool(v).is_none() {
            errs.push(invalid(at(PODSET_UNCONSTRAINED_TOPOLOGY), v, "must be a boolean value"));
        }
    }
    let size = slice_size.map(|v| (v, parse_i32(v)));
    match size {
        Some((v, None)) => errs.push(invalid(at(PODSET_SLICE_SIZE), v, "must be a numeric value")),
        Some((v, Some(n))) if n < 1 => {
            errs.push(invalid(at(PODSET_SLICE_SIZE), v, "must be greater than or equal to 1"))
        }
        _ => {}
    }
    match (slice_level, slice_size) {
        (Some(_), None) => errs.push(FieldError {
            field: at(PODSET_SLICE_SIZE),
            message: format!(
                "Required value: must be set when '{PODSET_SLICE_REQUIRED_TOPOLOGY}' is specified"
            ),
        }),
        (None, Some(_)) => errs.push(forbidden(
            at(PODSET_SLICE_SIZE),
            format!("may not be set when '{PODSET_SLICE_REQUIRED_TOPOLOGY}' is not specified"),
        )),
        _ => {}
    }
    if let Some(json) = get(PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS) {
        validate_layers(
            json,
            slice_level.is_some(),
            slice_size.is_some(),
            group.is_some(),
            count,
            gates,
            &mut errs,
        );
    }
    if !errs.is_empty() {
        return errs;
    }
    // ValidateSliceSizeAnnotationUpperBound (only once the rest holds).
    if let Some((v, Some(n))) = size {
        if n > count {
            errs.push(invalid(
                at(PODSET_SLICE_SIZE),
                v,
                format!("must not be greater than pod set count {count}"),
            ));
        }
    }
    errs
}

/// `podset-slice-required-topology-constraints`.
fn validate_layers(
    json: &str,
    slice_level: bool,
    slice_size: bool,
    group: bool,
    count: i32,
    gates: &FeatureGates,
    errs: &mut Vec<FieldError>,
) {
    let field = at(PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS);
    if !gates.enabled(Gate::TASMultiLayerTopology) {
        errs.push(forbidden(
            field,
            format!(
                "the {} feature gate must be enabled to use this annotation",
                Gate::TASMultiLayerTopology
            ),
        ));
        return;
    }
    if slice_level {
        errs.push(forbidden(
            field.clone(),
            format!("may not be set when '{PODSET_SLICE_REQUIRED_TOPOLOGY}' is specified"),
        ));
    }
    if slice_size {
        errs.push(forbidden(
            field.clone(),
            format!("may not be set when '{PODSET_SLICE_SIZE}' is specified"),
        ));
    }
    if group {
        errs.push(forbidden(
            at(PODSET_GROUP_NAME),
            format!("may not be set when '{PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS}' is specified"),
        ));
    }
    let layers: Vec<Layer> = match serde_json::from_str(json) {
        Ok(l) => l,
        Err(e) => {
            errs.push(invalid(field, json, format!("must be a valid JSON array: {e}")));
            return;
        }
    };
    if layers.is_empty() || layers.len() > 3 {
        errs.push(invalid(field, json, "topology constraints must contain between 1 and 3 entries"));
        return;
    }
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, l) in layers.iter().enumerate() {
        if let Err(why) = check_label_key(&l.topology) {
            errs.push(invalid(format!("{field}[{i}].topology"), &l.topology, why));
        }
        if l.size < 1 {
            errs.push(FieldError {
                field: format!("{field}[{i}].size"),
                message: format!("Invalid value: {}: must be greater than or equal to 1", l.size),
            });
        }
        if let Some(prev) = seen.insert(l.topology.as_str(), i) {
            seen.insert(l.topology.as_str(), prev);
            errs.push(FieldError {
                field: format!("{field}[{i}].topology"),
                message: format!("Duplicate value: \"{} (also at index {prev})\"", l.topology),
            });
        }
    }
    for i in 0..layers.len() - 1 {
        let (parent, child) = (layers[i].size, layers[i + 1].size);
        if child > 0 && parent % child != 0 {
            errs.push(FieldError {
                field: format!("{field}[{}].size", i + 1),
                message: format!("Invalid value: {child}: must evenly divide the parent layer size {parent}"),
            });
        }
    }
    if errs.is_empty() && layers[0].size > count {
        errs.push(FieldError {
            field,
            message: format!(
                "Invalid value: {}: must not be greater than pod set count {count}",
                layers[0].size
            ),
        });
    }
}

/// Every problem of a Job's topology annotations: Kueue's webhook rules, then (when those
/// hold and `levels` are known) the rules against the topology.
pub fn validate_job(job: &Job, levels: &[String], gates: &FeatureGates) -> Vec<FieldError> {
    let empty = BTreeMap::new();
    let annotations = job
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.as_ref())
        .unwrap_or(&empty);
    let count = job_pod_count(job);
    let mut errs = validate_template(annotations, count, gates);
    if errs.is_empty() {
        let pods = u32::try_from(count.max(0)).unwrap_or(0);
        if let Err(why) = placer_engine::check_topology_annotations(annotations, levels, gates, pods) {
            errs.push(FieldError {
                field: ANNOTATIONS.to_string(),
                message: format!("Invalid value: {why}"),
            });
        }
    }
    errs
}

/// The problems every Job a CronJob creates will have, under the CronJob's own field paths
/// (`spec.jobTemplate.spec.template.metadata.annotations[<key>]`).
///
/// Kueue has no CronJob integration and no CronJob webhook (`pkg/controller/jobs` has none;
/// its "Run A CronJob" page has users put the queue name on `jobTemplate.metadata`): the
/// CronJob is accepted as it is, and each Job its controller creates from the template goes
/// through the Job webhook, which refuses it (kube's CronJob controller then records
/// `FailedCreate` on the CronJob). So this is not an admission check: `placer validate`
/// reports it as a warning on the CronJob, where the user can fix it.
pub fn validate_cronjob_template(cj: &CronJob, levels: &[String], gates: &FeatureGates) -> Vec<FieldError> {
    let template = &cj.spec.job_template;
    let job = Job {
        metadata: template.metadata.clone().unwrap_or_default(),
        spec: template.spec.clone(),
        status: None,
    };
    validate_job(&job, levels, gates)
        .into_iter()
        .map(|e| FieldError { field: format!("spec.jobTemplate.{}", e.field), message: e.message })
        .collect()
}

/// The admission message for a Job's problems (the store names the Job).
pub fn denial(errors: &[FieldError]) -> String {
    format!("admission webhook {WEBHOOK:?} denied the request: {}", render(errors))
}

/// The admission check (create and update of Jobs).
#[derive(Debug, Clone)]
pub struct TopologyAnnotationValidation {
    gates: FeatureGates,
    levels: Vec<String>,
}

impl TopologyAnnotationValidation {
    /// Kueue's webhook rules only (no topology known: `placer cluster` without a scheduler
    /// profile).
    pub fn new(gates: FeatureGates) -> Self {
        TopologyAnnotationValidation { gates, levels: Vec::new() }
    }

    /// Also the rules against the scheduler's `topologyLevels`.
    pub fn with_levels(gates: FeatureGates, levels: Vec<String>) -> Self {
        TopologyAnnotationValidation { gates, levels }
    }
}

impl Admission for TopologyAnnotationValidation {
    fn admit(&self, _store: &dyn ClusterStore, _old: Option<&Object>, new: &Object) -> Result<(), String> {
        let Object::Job(job) = new else { return Ok(()) };
        let errors = validate_job(job, &self.levels, &self.gates);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(denial(&errors))
        }
    }
}

#[cfg(test)]
mod tests {
    //! Kueue's `TestValidateCreate` TAS rows (`pkg/controller/jobs/job/job_webhook_test.go`)
    //! and `tas_validation_test.go`, in the API server's words.

    use super::*;
    use serde_json::json;

    const BLOCK: &str = "cloud.com/block";

    fn job(parallelism: i32, annotations: &[(&str, &str)]) -> Job {
        let ann: BTreeMap<&str, &str> = annotations.iter().copied().collect();
        serde_json::from_value(json!({
            "metadata": {"name": "job", "namespace": "default"},
            "spec": {"parallelism": parallelism, "template": {"metadata": {"annotations": ann},
                "spec": {"containers": [{"name": "c", "image": "x"}]}}}
        }))
        .expect("job")
    }

    fn errors(parallelism: i32, annotations: &[(&str, &str)]) -> Vec<String> {
        let gates = FeatureGates::default();
        validate_job(&job(parallelism, annotations), &[], &gates).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn valid_requests_pass() {
        assert!(errors(4, &[(PODSET_REQUIRED_TOPOLOGY, BLOCK)]).is_empty());
        assert!(errors(
            4,
            &[
                (PODSET_REQUIRED_TOPOLOGY, BLOCK),
                (PODSET_SLICE_REQUIRED_TOPOLOGY, BLOCK),
                (PODSET_SLICE_SIZE, "1")
            ]
        )
        .is_empty());
        assert!(errors(
            4,
            &[
                (PODSET_UNCONSTRAINED_TOPOLOGY, "true"),
                (PODSET_SLICE_REQUIRED_TOPOLOGY, BLOCK),
                (PODSET_SLICE_SIZE, "1")
            ]
        )
        .is_empty());
        assert!(errors(4, &[(PODSET_SLICE_REQUIRED_TOPOLOGY, BLOCK), (PODSET_SLICE_SIZE, "1")]).is_empty());
    }

    #[test]
    fn two_topology_annotations_are_refused() {
        assert_eq!(
            errors(4, &[(PODSET_REQUIRED_TOPOLOGY, BLOCK), (PODSET_PREFERRED_TOPOLOGY, BLOCK)]),
            ["spec.template.metadata.annotations: Invalid value: must not contain more than one topology annotation: \
              [\"kueue.x-k8s.io/podset-required-topology\", \"kueue.x-k8s.io/podset-preferred-topology\", \
              \"kueue.x-k8s.io/podset-unconstrained-topology\"]"]
        );
    }

    #[test]
    fn levels_must_be_label_keys() {
        let e = errors(4, &[(PODSET_REQUIRED_TOPOLOGY, "some required value")]);
        assert_eq!(e.len(), 1);
        assert!(
            e[0].starts_with(
                "spec.template.metadata.annotations[kueue.x-k8s.io/podset-required-topology]: Invalid value: \
                 \"some required value\": name part must consist of"
            ),
            "{e:?}"
        );
        let e = errors(4, &[(PODSET_PREFERRED_TOPOLOGY, "some preferred value")]);
        assert!(
            e[0].starts_with("spec.template.metadata.annotations[kueue.x-k8s.io/podset-preferred-topology]")
        );
    }

    #[test]
    fn slice_size_rules() {
        let slice = |size: &'static str| {
            errors(
                4,
                &[
                    (PODSET_REQUIRED_TOPOLOGY, BLOCK),
                    (PODSET_SLICE_REQUIRED_TOPOLOGY, BLOCK),
                    (PODSET_SLICE_SIZE, size),
                ],
            )
        };
        assert_eq!(
            errors(4, &[(PODSET_REQUIRED_TOPOLOGY, BLOCK), (PODSET_SLICE_REQUIRED_TOPOLOGY, BLOCK)]),
            ["spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Required value: must be set when \
              'kueue.x-k8s.io/podset-slice-required-topology' is specified"]
        );
        assert_eq!(
            slice("not a number"),
            ["spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Invalid value: \"not a number\": \
              must be a numeric value"]
        );
        for bad in ["-1", "0"] {
            assert_eq!(
                slice(bad),
                [format!(
                    "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Invalid value: \"{bad}\": \
                     must be greater than or equal to 1"
                )]
            );
        }
        assert_eq!(
            errors(4, &[(PODSET_REQUIRED_TOPOLOGY, BLOCK), (PODSET_SLICE_SIZE, "1")]),
            ["spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Forbidden: may not be set when \
              'kueue.x-k8s.io/podset-slice-required-topology' is not specified"]
        );
        assert_eq!(
            slice("20"),
            ["spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Invalid value: \"20\": must not \
              be greater than pod set count 4"]
        );
    }

    #[test]
    fn unconstrained_must_be_a_boolean_and_group_names_need_a_level() {
        assert_eq!(
            errors(4, &[(PODSET_UNCONSTRAINED_TOPOLOGY, "yes")]),
            ["spec.template.metadata.annotations[kueue.x-k8s.io/podset-unconstrained-topology]: Invalid value: \
              \"yes\": must be a boolean value"]
        );
        assert_eq!(
            errors(4, &[(PODSET_GROUP_NAME, "7"), (PODSET_REQUIRED_TOPOLOGY, BLOCK)]),
            ["spec.template.metadata.annotations[kueue.x-k8s.io/podset-group-name]: Invalid value: \"7\": must not be \
              a number"]
        );
        assert_eq!(
            errors(4, &[(PODSET_GROUP_NAME, "g")]),
            ["spec.template.metadata.annotations[kueue.x-k8s.io/podset-group-name]: Forbidden: may not be set when \
              neither 'kueue.x-k8s.io/podset-preferred-topology' nor 'kueue.x-k8s.io/podset-required-topology' is \
              specified"]
        );
    }

    #[test]
    fn multi_layer_rules() {
        let layers = |json: &'static str| {
            errors(
                64,
                &[(PODSET_REQUIRED_TOPOLOGY, BLOCK), (PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS, json)],
            )
        };
        assert!(layers(
            r#"[{"topology": "cloud.com/block", "size": 32}, {"topology": "cloud.com/rack", "size": 16}]"#
        )
        .is_empty());
        assert_eq!(
            layers(r#"[{"topology": "cloud.com/block", "size": 32}, {"topology": "cloud.com/rack", "size": 12}]"#),
            ["spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-required-topology-constraints][1].size: \
              Invalid value: 12: must evenly divide the parent layer size 32"]
        );
        assert!(layers("[]")[0].ends_with("topology constraints must contain between 1 and 3 entries"));
        assert!(layers("{")[0].contains("must be a valid JSON array"));
        let dup = layers(r#"[{"topology": "a", "size": 4}, {"topology": "a", "size": 2}]"#);
        assert!(dup[0].contains("[1].topology: Duplicate value"), "{dup:?}");
        let off = FeatureGates::with([(Gate::TASMultiLayerTopology, false)]);
        let j = job(4, &[(PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS, r#"[{"topology": "a", "size": 4}]"#)]);
        assert!(validate_job(&j, &[], &off)[0].to_string().contains("feature gate must be enabled"));
    }

    #[test]
    fn with_levels_the_topology_rules_apply_too() {
        let levels: Vec<String> = ["rack", "kubernetes.io/hostname"].iter().map(|s| s.to_string()).collect();
        let gates = FeatureGates::default();
        let e = validate_job(&job(4, &[(PODSET_REQUIRED_TOPOLOGY, BLOCK)]), &levels, &gates);
        assert_eq!(e.len(), 1);
        assert!(e[0].to_string().starts_with("spec.template.metadata.annotations: Invalid value: "), "{e:?}");
        assert!(e[0].to_string().contains("\"cloud.com/block\", which is not a topology level"), "{e:?}");
        let e = validate_job(
            &job(
                4,
                &[
                    (PODSET_REQUIRED_TOPOLOGY, "kubernetes.io/hostname"),
                    (PODSET_SLICE_REQUIRED_TOPOLOGY, "rack"),
                    (PODSET_SLICE_SIZE, "2"),
                ],
            ),
            &levels,
            &gates,
        );
        assert!(e[0].to_string().contains("is above the main level"), "{e:?}");
        let e = validate_job(
            &job(
                4,
                &[
                    (PODSET_REQUIRED_TOPOLOGY, "rack"),
                    (PODSET_SLICE_REQUIRED_TOPOLOGY, "rack"),
                    (PODSET_SLICE_SIZE, "3"),
                ],
            ),
            &levels,
            &gates,
        );
        assert!(e[0].to_string().contains("does not divide the 4 pod(s)"), "{e:?}");
        assert!(validate_job(&job(4, &[(PODSET_REQUIRED_TOPOLOGY, "rack")]), &levels, &gates).is_empty());
    }

    #[test]
    fn the_denial_names_the_webhook() {
        let e = errors(4, &[(PODSET_UNCONSTRAINED_TOPOLOGY, "yes")]);
        assert!(e.len() == 1);
        let errs =
            validate_job(&job(4, &[(PODSET_UNCONSTRAINED_TOPOLOGY, "yes")]), &[], &FeatureGates::default());
        assert!(
            denial(&errs).starts_with("admission webhook \"vjob.kb.io\" denied the request: spec.template")
        );
    }

    #[test]
    fn a_cronjob_template_is_checked_as_the_jobs_it_creates_under_its_own_paths() {
        let t = job(
            4,
            &[
                (PODSET_REQUIRED_TOPOLOGY, "rack"),
                (PODSET_SLICE_REQUIRED_TOPOLOGY, "rack"),
                (PODSET_SLICE_SIZE, "0"),
            ],
        );
        let cj: CronJob = serde_json::from_value(json!({
            "metadata": {"name": "nightly", "namespace": "default"},
            "spec": {"schedule": "*/1 * * * *", "jobTemplate": {"spec": t.spec}}
        }))
        .expect("cronjob");
        let e: Vec<String> = validate_cronjob_template(&cj, &[], &FeatureGates::default())
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            e,
            ["spec.jobTemplate.spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: \
              Invalid value: \"0\": must be greater than or equal to 1"]
        );
        let ok = job(4, &[(PODSET_REQUIRED_TOPOLOGY, "rack")]);
        let cj: CronJob = serde_json::from_value(json!({
            "metadata": {"name": "nightly"},
            "spec": {"schedule": "*/1 * * * *", "jobTemplate": {"spec": ok.spec}}
        }))
        .expect("cronjob");
        assert!(validate_cronjob_template(&cj, &[], &FeatureGates::default()).is_empty());
    }
}
