//! The topology request of one PodGroup: which level its pods must (or should) share,
//! whether they are split into slices, and which leader + workers group it belongs to.
//!
//! Sources, in the words of seed 002 ("User-facing API", "Validation") and
//! SEMANTICS §5, §8:
//! * required level: `spec.schedulingConstraints.topology[0].key`, or the Kueue annotation
//!   `kueue.x-k8s.io/podset-required-topology` (the same meaning; both may be given when
//!   they agree);
//! * `kueue.x-k8s.io/podset-preferred-topology`: that level, then each higher level;
//! * `kueue.x-k8s.io/podset-unconstrained-topology: "true"`: no compactness at all;
//! * none of them: "implied" (Kueue's implicit default, handled like unconstrained);
//! * slices: `podset-slice-required-topology` + `podset-slice-size` (two levels), or the
//!   multi-layer JSON list `podset-slice-required-topology-constraints`;
//!   slice annotations without a required / preferred level: "slice only" (the search
//!   starts at the highest level and is otherwise unconstrained);
//! * `kueue.x-k8s.io/podset-group-name`: leader + workers placed as one problem;
//! * `kueue.x-k8s.io/pod-index-offset` (read apart, by [`pod_index_offset`]: Kueue's webhooks
//!   never check it, its TopologyUngater reads it from the pods when it hands out ranks).
//!
//! Every error names the PodGroup and the annotation (or field) at fault.

use std::fmt;

use placer_api::annotations::{
    PODSET_GROUP_NAME, PODSET_PREFERRED_TOPOLOGY, PODSET_REQUIRED_TOPOLOGY, PODSET_SLICE_REQUIRED_TOPOLOGY,
    PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS, PODSET_SLICE_SIZE, PODSET_UNCONSTRAINED_TOPOLOGY,
    POD_INDEX_OFFSET,
};
use placer_api::gates::{FeatureGates, Gate};

use crate::model::PodGroupInfo;

/// The field a required level can also come from.
pub const SPEC_TOPOLOGY_KEY: &str = "spec.schedulingConstraints.topology[0].key";

/// Most slice layers a multi-layer request may list (seed 002: "Up to 3 constraint layers").
pub const MAX_SLICE_LAYERS: usize = 3;

/// How compact the PodGroup must be. Level values are indexes into the topology levels
/// the request was parsed against (coarsest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TopologyMode {
    /// All pods in one domain of this level, never higher.
    Required(usize),
    /// One domain of this level if possible, else of each higher level in turn, else spread
    /// over the whole topology.
    Preferred(usize),
    /// `podset-unconstrained-topology: "true"`: spread over the lowest level.
    Unconstrained,
    /// No topology annotation at all: Kueue's implicit default, placed like
    /// [`TopologyMode::Unconstrained`].
    Implied,
    /// Slice annotations only: the search starts at the highest level, is unconstrained
    /// above the slice level, and every slice shares one domain of its level.
    SliceOnly,
}

impl TopologyMode {
    /// Placed like an unconstrained request (LeastFreeCapacity under the default profile).
    pub fn is_unconstrained(self) -> bool {
        matches!(self, TopologyMode::Unconstrained | TopologyMode::Implied | TopologyMode::SliceOnly)
    }
}

/// One slice layer: groups of `size` pods that must each share a domain of `level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SliceLayer {
    /// Index of the level in the topology (coarsest first).
    pub level: usize,
    /// Pods per slice at this layer (at least 1).
    pub size: u32,
}

/// The parsed and validated topology request of one PodGroup.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopologyRequest {
    pub mode: TopologyMode,
    /// Slice layers, coarsest first: empty without slices; one layer for the two-level
    /// annotations; up to [`MAX_SLICE_LAYERS`] for multi-layer constraints. Each layer is at
    /// or below the main level, strictly below the previous layer, and its size divides the
    /// previous layer's size.
    pub slices: Vec<SliceLayer>,
    /// The layers came from `podset-slice-required-topology-constraints`.
    pub multi_layer: bool,
    /// `kueue.x-k8s.io/podset-group-name`.
    pub group_name: Option<String>,
}

impl TopologyRequest {
    /// A request with the given mode and nothing else (no slices, no group).
    pub fn new(mode: TopologyMode) -> TopologyRequest {
        TopologyRequest { mode, slices: Vec::new(), multi_layer: false, group_name: None }
    }

    /// The request with these two-level slices (`podset-slice-required-topology` at `level`,
    /// `podset-slice-size` = `size`).
    pub fn with_slices(mut self, level: usize, size: u32) -> TopologyRequest {
        self.slices = vec![SliceLayer { level, size }];
        self
    }

    /// Pods per outermost slice (1 without slices).
    pub fn slice_size(&self) -> u32 {
        self.slices.first().map_or(1, |l| l.size)
    }
}

/// Where a request value came from, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source(pub &'static str);

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// A topology request that cannot be placed by any cluster state. The PodGroup stays
/// unschedulable with this message (Kueue deactivates such a workload).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TasError {
    #[error("the scheduler declares no topology levels")]
    NoLevels,
    #[error("the scheduler declares {count} topology levels; at most {max} are supported")]
    TooManyLevels { count: usize, max: usize },
    #[error("node {node}: has {values} topology value(s) for {levels} level(s)")]
    NodeLevels { node: String, values: usize, levels: usize },
    #[error(
        "PodGroup {group}: {field} names level {level:?}, which is not a topology level (levels: {known})"
    )]
    UnknownLevel { group: String, field: Source, level: String, known: String },
    #[error("PodGroup {group}: {first} and {second} are mutually exclusive")]
    MutuallyExclusive { group: String, first: Source, second: Source },
    #[error("PodGroup {group}: {first} ({first_value:?}) and {second} ({second_value:?}) disagree")]
    Disagree { group: String, first: Source, first_value: String, second: Source, second_value: String },
    #[error("PodGroup {group}: annotation {annotation}: invalid value {value:?}: {reason}")]
    InvalidValue { group: String, annotation: &'static str, value: String, reason: String },
    #[error(
        "PodGroup {group}: {annotation}: slice level {slice_level:?} is above the main level {main_level:?}"
    )]
    SliceLevelAboveMainLevel {
        group: String,
        annotation: &'static str,
        slice_level: String,
        main_level: String,
    },
    #[error("PodGroup {group}: annotation {PODSET_SLICE_REQUIRED_TOPOLOGY} needs {PODSET_SLICE_SIZE}")]
    SliceLevelWithoutSize { group: String },
    #[error(
        "PodGroup {group}: {annotation}: slice size {size} does not divide the {count} pod(s) of the group"
    )]
    SliceSizeNotDividing { group: String, annotation: &'static str, size: u32, count: u32 },
    #[error(
        "PodGroup {group}: annotation {PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS}: layer {index} (level {level:?}) \
         must be strictly below the previous layer (level {previous:?}); layers go from coarsest to finest"
    )]
    LayersNotOrdered { group: String, index: usize, level: String, previous: String },
    #[error(
        "PodGroup {group}: annotation {PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS}: layer {index} size {size} \
         does not divide the previous layer size {parent}"
    )]
    LayerSizeNotDividing { group: String, index: usize, size: u32, parent: u32 },
    #[error(
        "PodGroup {group}: annotation {PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS}: {count} layer(s); \
         between 1 and {max} are allowed"
    )]
    LayerCount { group: String, count: usize, max: usize },
    #[error("PodGroup {group}: annotation {annotation} needs the feature gate {gate}")]
    GateDisabled { group: String, annotation: &'static str, gate: Gate },
    #[error("PodSet group {name:?}: has {count} PodGroup(s); a group is exactly one leader and one workers PodGroup")]
    GroupSize { name: String, count: usize },
    #[error("PodSet group {name:?}: the leader PodGroup {leader} has {count} pods; a leader has exactly 1")]
    LeaderCount { name: String, leader: String, count: u32 },
    #[error(
        "PodSet group {name:?}: PodGroups {first} and {second} must request the same required or preferred \
         topology level"
    )]
    GroupMismatch { name: String, first: String, second: String },
}

/// Reads and validates the topology request of `pg`, a PodGroup of `pod_count` pods, for
/// a topology with these `levels` (coarsest first).
pub fn parse_request(
    pg: &PodGroupInfo,
    levels: &[String],
    gates: &FeatureGates,
    pod_count: u32,
) -> Result<TopologyRequest, TasError> {
    if levels.is_empty() {
        return Err(TasError::NoLevels);
    }
    let group = pg.key.to_string();
    let parser = Parser { group: &group, levels };

    // Main level.
    let spec_key = pg.topology_key.as_deref().filter(|k| !k.is_empty());
    let required_ann = pg.annotation(PODSET_REQUIRED_TOPOLOGY);
    let preferred = pg.annotation(PODSET_PREFERRED_TOPOLOGY);
    let unconstrained = pg.annotation(PODSET_UNCONSTRAINED_TOPOLOGY);
    let required = match (spec_key, required_ann) {
        (Some(a), Some(b)) if a != b => {
            return Err(TasError::Disagree {
                group,
                first: Source(SPEC_TOPOLOGY_KEY),
                first_value: a.to_string(),
                second: Source(PODSET_REQUIRED_TOPOLOGY),
                second_value: b.to_string(),
            })
        }
        (Some(a), _) => Some((a, Source(SPEC_TOPOLOGY_KEY))),
        (None, Some(b)) => Some((b, Source(PODSET_REQUIRED_TOPOLOGY))),
        (None, None) => None,
    };
    let present: Vec<Source> = [
        required.map(|(_, s)| s),
        preferred.map(|_| Source(PODSET_PREFERRED_TOPOLOGY)),
        unconstrained.map(|_| Source(PODSET_UNCONSTRAINED_TOPOLOGY)),
    ]
    .into_iter()
    .flatten()
    .collect();
    if present.len() > 1 {
        return Err(TasError::MutuallyExclusive { group, first: present[0], second: present[1] });
    }
    let unconstrained = match unconstrained {
        None => false,
        Some(v) => parse_bool(v).ok_or_else(|| TasError::InvalidValue {
            group: group.clone(),
            annotation: PODSET_UNCONSTRAINED_TOPOLOGY,
            value: v.to_string(),
            reason: "must be a boolean value".to_string(),
        })?,
    };

    // Slices.
    let slice_level = pg.annotation(PODSET_SLICE_REQUIRED_TOPOLOGY);
    let slice_size = pg.annotation(PODSET_SLICE_SIZE);
    let constraints = pg.annotation(PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS);
    let group_name = pg.annotation(PODSET_GROUP_NAME).map(str::to_string);
    let mut slices = Vec::new();
    let mut multi_layer = false;
    if let Some(json) = constraints {
        if !gates.enabled(Gate::TASMultiLayerTopology) {
            return Err(TasError::GateDisabled {
                group,
                annotation: PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS,
                gate: Gate::TASMultiLayerTopology,
            });
        }
        for other in [PODSET_SLICE_REQUIRED_TOPOLOGY, PODSET_SLICE_SIZE, PODSET_GROUP_NAME] {
            if pg.annotation(other).is_some() {
                return Err(TasError::MutuallyExclusive {
                    group,
                    first: Source(PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS),
                    second: Source(other),
                });
            }
        }
        slices = parser.layers(json)?;
        multi_layer = true;
    } else if let Some(level) = slice_level {
        let level = parser.level(level, Source(PODSET_SLICE_REQUIRED_TOPOLOGY))?;
        let size = slice_size.ok_or_else(|| TasError::SliceLevelWithoutSize { group: group.clone() })?;
        let size = parser.size(PODSET_SLICE_SIZE, size)?;
        slices.push(SliceLayer { level, size });
    }
    // A slice size without a slice level has no effect (SEMANTICS §8), but must still read.
    if let (None, Some(size)) = (slice_level, slice_size) {
        parser.size(PODSET_SLICE_SIZE, size)?;
    }

    let mode = if let Some((key, source)) = required {
        TopologyMode::Required(parser.level(key, source)?)
    } else if let Some(key) = preferred {
        TopologyMode::Preferred(parser.level(key, Source(PODSET_PREFERRED_TOPOLOGY))?)
    } else if !slices.is_empty() {
        TopologyMode::SliceOnly
    } else if unconstrained {
        TopologyMode::Unconstrained
    } else {
        TopologyMode::Implied
    };

    if let Some(first) = slices.first() {
        let annotation = if multi_layer {
            PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS
        } else {
            PODSET_SLICE_REQUIRED_TOPOLOGY
        };
        let main_level = match mode {
            TopologyMode::Required(l) | TopologyMode::Preferred(l) => l,
            TopologyMode::SliceOnly => 0,
            TopologyMode::Unconstrained | TopologyMode::Implied => levels.len() - 1,
        };
        if first.level < main_level {
            return Err(TasError::SliceLevelAboveMainLevel {
                group,
                annotation,
                slice_level: levels[first.level].clone(),
                main_level: levels[main_level].clone(),
            });
        }
        let size_annotation =
            if multi_layer { PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS } else { PODSET_SLICE_SIZE };
        if !pod_count.is_multiple_of(first.size) {
            return Err(TasError::SliceSizeNotDividing {
                group,
                annotation: size_annotation,
                size: first.size,
                count: pod_count,
            });
        }
    }

    Ok(TopologyRequest { mode, slices, multi_layer, group_name })
}

/// Kueue's error when the offset does not read (`errParseOffsetAnnotation`).
pub const ERR_PARSE_OFFSET: &str = "failed to parse offset annotation";

/// The `kueue.x-k8s.io/pod-index-offset` of a PodGroup's pods, as Kueue's TopologyUngater
/// reads it (`pkg/controller/tas/topology_ungater.go`): the value on the PodGroup (Placer's
/// Job controller copies the pod template's annotations there), else on `first_pod` (Kueue
/// reads the first pod of the PodSet and assumes the others carry the same), parsed as Go's
/// `strconv.Atoi` (an optional sign and decimal digits: negative offsets are accepted);
/// 0 when absent. The ungater *adds* it to the rank offset a leader + workers group already
/// gives its workers. A value that does not parse leaves every pod of the workload gated
/// there; here the group is unschedulable with Kueue's error.
pub fn pod_index_offset(pg: &PodGroupInfo, first_pod: Option<&str>) -> Result<i64, TasError> {
    let Some(value) = pg.annotation(POD_INDEX_OFFSET).or(first_pod) else { return Ok(0) };
    value.parse::<i64>().map_err(|_| {
        // Go's `strconv.Atoi` error text.
        let digits = value.strip_prefix(['+', '-']).unwrap_or(value);
        let why = if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            "value out of range"
        } else {
            "invalid syntax"
        };
        TasError::InvalidValue {
            group: pg.key.to_string(),
            annotation: POD_INDEX_OFFSET,
            value: value.to_string(),
            reason: format!("{ERR_PARSE_OFFSET}: strconv.Atoi: parsing {value:?}: {why}"),
        }
    })
}

/// Checks the two PodGroups of one leader + workers group (same
/// `kueue.x-k8s.io/podset-group-name`, given in submission order) and tells which one
/// leads: the one with fewer pods, the later one on a tie (SEMANTICS §7). Returns
/// `(leader index, workers index)` into `members`. Both members must request the same
/// required / preferred / unconstrained level (seed 002 "Validation"), and the leader has
/// exactly one pod.
pub fn validate_group(
    name: &str,
    members: &[(&str, &TopologyRequest, u32)],
) -> Result<(usize, usize), TasError> {
    let [first, second] = members else {
        return Err(TasError::GroupSize { name: name.to_string(), count: members.len() });
    };
    let (leader, workers) = if second.2 > first.2 { (0, 1) } else { (1, 0) };
    if first.1.mode != second.1.mode {
        return Err(TasError::GroupMismatch {
            name: name.to_string(),
            first: first.0.to_string(),
            second: second.0.to_string(),
        });
    }
    let lead = members[leader];
    if lead.2 != 1 {
        return Err(TasError::LeaderCount {
            name: name.to_string(),
            leader: lead.0.to_string(),
            count: lead.2,
        });
    }
    Ok((leader, workers))
}

fn parse_bool(v: &str) -> Option<bool> {
    // strconv.ParseBool's spellings.
    match v.trim() {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

struct Parser<'a> {
    group: &'a str,
    levels: &'a [String],
}

impl Parser<'_> {
    fn level(&self, key: &str, field: Source) -> Result<usize, TasError> {
        self.levels.iter().position(|l| l == key).ok_or_else(|| TasError::UnknownLevel {
            group: self.group.to_string(),
            field,
            level: key.to_string(),
            known: self.levels.join(", "),
        })
    }

    fn size(&self, annotation: &'static str, value: &str) -> Result<u32, TasError> {
        let invalid = |reason: &str| TasError::InvalidValue {
            group: self.group.to_string(),
            annotation,
            value: value.to_string(),
            reason: reason.to_string(),
        };
        let n: i64 = value.trim().parse().map_err(|_| invalid("must be an integer"))?;
        if n < 1 {
            return Err(invalid("must be at least 1"));
        }
        u32::try_from(n).map_err(|_| invalid("too large"))
    }

    /// `[{"topology": L, "size": N}, ...]`, sizes as JSON integers or strings.
    fn layers(&self, json: &str) -> Result<Vec<SliceLayer>, TasError> {
        const ANN: &str = PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS;
        let invalid = |reason: String| TasError::InvalidValue {
            group: self.group.to_string(),
            annotation: ANN,
            value: json.to_string(),
            reason,
        };
        let value: serde_json::Value =
            serde_json::from_str(json).map_err(|e| invalid(format!("must be a JSON list: {e}")))?;
        let entries = value.as_array().ok_or_else(|| invalid("must be a JSON list".to_string()))?;
        if entries.is_empty() || entries.len() > MAX_SLICE_LAYERS || entries.len() > self.levels.len() {
            return Err(TasError::LayerCount {
                group: self.group.to_string(),
                count: entries.len(),
                max: MAX_SLICE_LAYERS.min(self.levels.len()),
            });
        }
        let mut layers: Vec<SliceLayer> = Vec::with_capacity(entries.len());
        for (i, entry) in entries.iter().enumerate() {
            let obj = entry.as_object().ok_or_else(|| invalid(format!("entry {i} must be an object")))?;
            let topology = obj
                .get("topology")
                .and_then(|t| t.as_str())
                .ok_or_else(|| invalid(format!("entry {i} needs a string \"topology\"")))?;
            let level = self.level(topology, Source(ANN))?;
            let size = match obj.get("size") {
                Some(serde_json::Value::Number(n)) => {
                    let n =
                        n.as_i64().ok_or_else(|| invalid(format!("entry {i}: size must be an integer")))?;
                    self.size(ANN, &n.to_string())?
                }
                Some(serde_json::Value::String(s)) => self.size(ANN, s)?,
                _ => return Err(invalid(format!("entry {i} needs an integer \"size\""))),
            };
            if let Some(prev) = layers.last() {
                if level <= prev.level {
                    return Err(TasError::LayersNotOrdered {
                        group: self.group.to_string(),
                        index: i,
                        level: topology.to_string(),
                        previous: self.levels[prev.level].clone(),
                    });
                }
                if prev.size % size != 0 {
                    return Err(TasError::LayerSizeNotDividing {
                        group: self.group.to_string(),
                        index: i,
                        size,
                        parent: prev.size,
                    });
                }
            }
            layers.push(SliceLayer { level, size });
        }
        Ok(layers)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use placer_api::k8s::api::scheduling::v1alpha2::{
        GangSchedulingPolicy, PodGroup, PodGroupSchedulingConstraints, PodGroupSchedulingPolicy,
        PodGroupSpec, TopologyConstraint,
    };
    use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    const BLOCK: &str = "block";
    const RACK: &str = "rack";
    const HOST: &str = "kubernetes.io/hostname";

    fn levels() -> Vec<String> {
        vec![BLOCK.to_string(), RACK.to_string(), HOST.to_string()]
    }

    fn group(required: Option<&str>, annotations: &[(&str, &str)]) -> PodGroupInfo {
        let pg = PodGroup {
            metadata: ObjectMeta {
                name: Some("pg".into()),
                namespace: Some("ns".into()),
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect::<BTreeMap<_, _>>(),
                ),
                ..Default::default()
            },
            spec: PodGroupSpec {
                scheduling_policy: PodGroupSchedulingPolicy {
                    gang: Some(GangSchedulingPolicy { min_count: 4 }),
                    ..Default::default()
                },
                scheduling_constraints: required.map(|k| PodGroupSchedulingConstraints {
                    topology: Some(vec![TopologyConstraint { key: k.to_string() }]),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        PodGroupInfo::from_pod_group(Arc::new(pg)).unwrap()
    }

    fn parse(
        required: Option<&str>,
        annotations: &[(&str, &str)],
        count: u32,
    ) -> Result<TopologyRequest, TasError> {
        parse_request(&group(required, annotations), &levels(), &FeatureGates::default(), count)
    }

    #[test]
    fn the_spec_topology_key_is_a_required_level() {
        let r = parse(Some(RACK), &[], 4).unwrap();
        assert_eq!(r.mode, TopologyMode::Required(1));
        assert!(r.slices.is_empty());
        assert_eq!(r.slice_size(), 1);
    }

    #[test]
    fn the_required_annotation_means_the_same_and_may_repeat_the_spec() {
        assert_eq!(
            parse(None, &[(PODSET_REQUIRED_TOPOLOGY, RACK)], 4).unwrap().mode,
            TopologyMode::Required(1)
        );
        assert_eq!(
            parse(Some(RACK), &[(PODSET_REQUIRED_TOPOLOGY, RACK)], 4).unwrap().mode,
            TopologyMode::Required(1)
        );
        let err = parse(Some(RACK), &[(PODSET_REQUIRED_TOPOLOGY, BLOCK)], 4).unwrap_err();
        assert!(matches!(err, TasError::Disagree { .. }), "{err}");
    }

    #[test]
    fn preferred_unconstrained_implied_and_slice_only() {
        assert_eq!(
            parse(None, &[(PODSET_PREFERRED_TOPOLOGY, BLOCK)], 4).unwrap().mode,
            TopologyMode::Preferred(0)
        );
        assert_eq!(
            parse(None, &[(PODSET_UNCONSTRAINED_TOPOLOGY, "true")], 4).unwrap().mode,
            TopologyMode::Unconstrained
        );
        assert_eq!(
            parse(None, &[(PODSET_UNCONSTRAINED_TOPOLOGY, "false")], 4).unwrap().mode,
            TopologyMode::Implied
        );
        assert_eq!(parse(None, &[], 4).unwrap().mode, TopologyMode::Implied);
        let r = parse(None, &[(PODSET_SLICE_REQUIRED_TOPOLOGY, HOST), (PODSET_SLICE_SIZE, "2")], 4).unwrap();
        assert_eq!(r.mode, TopologyMode::SliceOnly);
        assert_eq!(r.slices, vec![SliceLayer { level: 2, size: 2 }]);
    }

    #[test]
    fn an_unknown_level_names_the_group_and_the_annotation() {
        let err = parse(None, &[(PODSET_PREFERRED_TOPOLOGY, "zone")], 4).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("ns/pg") && msg.contains(PODSET_PREFERRED_TOPOLOGY) && msg.contains("zone"),
            "{msg}"
        );
    }

    #[test]
    fn main_level_annotations_are_mutually_exclusive() {
        let err = parse(Some(RACK), &[(PODSET_PREFERRED_TOPOLOGY, RACK)], 4).unwrap_err();
        assert!(matches!(err, TasError::MutuallyExclusive { .. }), "{err}");
        let err =
            parse(None, &[(PODSET_PREFERRED_TOPOLOGY, RACK), (PODSET_UNCONSTRAINED_TOPOLOGY, "true")], 4)
                .unwrap_err();
        assert!(matches!(err, TasError::MutuallyExclusive { .. }), "{err}");
        let err = parse(None, &[(PODSET_UNCONSTRAINED_TOPOLOGY, "maybe")], 4).unwrap_err();
        assert!(matches!(err, TasError::InvalidValue { .. }), "{err}");
    }

    #[test]
    fn slice_level_must_not_be_above_the_main_level() {
        let err = parse(Some(RACK), &[(PODSET_SLICE_REQUIRED_TOPOLOGY, BLOCK), (PODSET_SLICE_SIZE, "2")], 4)
            .unwrap_err();
        assert!(matches!(err, TasError::SliceLevelAboveMainLevel { .. }), "{err}");
        // At the main level is fine.
        let r = parse(Some(RACK), &[(PODSET_SLICE_REQUIRED_TOPOLOGY, RACK), (PODSET_SLICE_SIZE, "2")], 4)
            .unwrap();
        assert_eq!(r.slices, vec![SliceLayer { level: 1, size: 2 }]);
    }

    #[test]
    fn slice_level_needs_a_size_that_divides_the_count() {
        let err = parse(Some(BLOCK), &[(PODSET_SLICE_REQUIRED_TOPOLOGY, HOST)], 4).unwrap_err();
        assert!(matches!(err, TasError::SliceLevelWithoutSize { .. }), "{err}");
        let err = parse(Some(BLOCK), &[(PODSET_SLICE_REQUIRED_TOPOLOGY, HOST), (PODSET_SLICE_SIZE, "3")], 4)
            .unwrap_err();
        assert!(matches!(err, TasError::SliceSizeNotDividing { size: 3, count: 4, .. }), "{err}");
        let err = parse(Some(BLOCK), &[(PODSET_SLICE_REQUIRED_TOPOLOGY, HOST), (PODSET_SLICE_SIZE, "0")], 4)
            .unwrap_err();
        assert!(matches!(err, TasError::InvalidValue { .. }), "{err}");
        // A size alone is ignored.
        assert!(parse(Some(BLOCK), &[(PODSET_SLICE_SIZE, "1")], 4).unwrap().slices.is_empty());
    }

    #[test]
    fn multi_layer_constraints_accept_integer_and_string_sizes() {
        let json =
            r#"[{"topology": "rack", "size": 4}, {"topology": "kubernetes.io/hostname", "size": "2"}]"#;
        let r = parse(Some(BLOCK), &[(PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS, json)], 8).unwrap();
        assert!(r.multi_layer);
        assert_eq!(r.slices, vec![SliceLayer { level: 1, size: 4 }, SliceLayer { level: 2, size: 2 }]);
        assert_eq!(r.slice_size(), 4);
    }

    #[test]
    fn multi_layer_constraints_are_ordered_and_divide() {
        let unordered =
            r#"[{"topology": "kubernetes.io/hostname", "size": 2}, {"topology": "rack", "size": 1}]"#;
        let err =
            parse(Some(BLOCK), &[(PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS, unordered)], 8).unwrap_err();
        assert!(matches!(err, TasError::LayersNotOrdered { index: 1, .. }), "{err}");
        let not_dividing =
            r#"[{"topology": "rack", "size": 4}, {"topology": "kubernetes.io/hostname", "size": 3}]"#;
        let err =
            parse(Some(BLOCK), &[(PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS, not_dividing)], 8).unwrap_err();
        assert!(matches!(err, TasError::LayerSizeNotDividing { size: 3, parent: 4, .. }), "{err}");
        let err = parse(Some(BLOCK), &[(PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS, "[]")], 8).unwrap_err();
        assert!(matches!(err, TasError::LayerCount { .. }), "{err}");
        let err = parse(Some(BLOCK), &[(PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS, "{")], 8).unwrap_err();
        assert!(matches!(err, TasError::InvalidValue { .. }), "{err}");
    }

    #[test]
    fn multi_layer_constraints_exclude_two_level_slices_and_groups() {
        let json = r#"[{"topology": "rack", "size": 4}]"#;
        for other in [(PODSET_SLICE_SIZE, "4"), (PODSET_GROUP_NAME, "g")] {
            let err = parse(Some(BLOCK), &[(PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS, json), other], 8)
                .unwrap_err();
            assert!(matches!(err, TasError::MutuallyExclusive { .. }), "{err}");
        }
        let gates = FeatureGates::with([(Gate::TASMultiLayerTopology, false)]);
        let err = parse_request(
            &group(Some(BLOCK), &[(PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS, json)]),
            &levels(),
            &gates,
            8,
        )
        .unwrap_err();
        assert!(matches!(err, TasError::GateDisabled { .. }), "{err}");
    }

    #[test]
    fn group_name_and_pod_index_offset() {
        let r = parse(Some(RACK), &[(PODSET_GROUP_NAME, "lws")], 4).unwrap();
        assert_eq!(r.group_name.as_deref(), Some("lws"));
        // Kueue's webhooks do not check the offset; with a group name both apply (the
        // ungater adds the offset to the leader count).
        let r = parse(Some(RACK), &[(POD_INDEX_OFFSET, "x"), (PODSET_GROUP_NAME, "g")], 4).unwrap();
        assert_eq!(r.group_name.as_deref(), Some("g"));
    }

    #[test]
    fn pod_index_offset_reads_as_go_atoi_from_the_group_then_the_pod() {
        let offset = |ann: &[(&str, &str)], pod: Option<&str>| pod_index_offset(&group(Some(RACK), ann), pod);
        assert_eq!(offset(&[], None).unwrap(), 0);
        assert_eq!(offset(&[(POD_INDEX_OFFSET, "1")], None).unwrap(), 1);
        assert_eq!(offset(&[], Some("2")).unwrap(), 2);
        assert_eq!(offset(&[(POD_INDEX_OFFSET, "1")], Some("2")).unwrap(), 1, "the PodGroup's value first");
        assert_eq!(offset(&[], Some("-1")).unwrap(), -1);
        assert_eq!(offset(&[], Some("+3")).unwrap(), 3);
        for bad in ["invalid", " 1", "1 ", "", "+", "1_0", "0x1", "9223372036854775808"] {
            let err = offset(&[], Some(bad)).unwrap_err();
            assert!(err.to_string().contains(ERR_PARSE_OFFSET), "{bad:?}: {err}");
            assert!(err.to_string().contains(POD_INDEX_OFFSET), "{bad:?}: {err}");
        }
        let err = offset(&[], Some("9223372036854775808")).unwrap_err();
        assert!(err.to_string().ends_with("value out of range"), "{err}");
        let err = offset(&[], Some("x")).unwrap_err();
        assert!(err.to_string().ends_with(r#"strconv.Atoi: parsing "x": invalid syntax"#), "{err}");
    }

    #[test]
    fn a_group_is_a_leader_of_one_pod_and_workers_with_the_same_level() {
        let rack = TopologyRequest::new(TopologyMode::Required(1));
        let block = TopologyRequest::new(TopologyMode::Required(0));
        // The smaller member leads; on a tie the later one.
        assert_eq!(validate_group("g", &[("a", &rack, 1), ("b", &rack, 4)]).unwrap(), (0, 1));
        assert_eq!(validate_group("g", &[("a", &rack, 4), ("b", &rack, 1)]).unwrap(), (1, 0));
        assert_eq!(validate_group("g", &[("a", &rack, 1), ("b", &rack, 1)]).unwrap(), (1, 0));
        assert!(matches!(
            validate_group("g", &[("a", &rack, 1), ("b", &block, 4)]),
            Err(TasError::GroupMismatch { .. })
        ));
        assert!(matches!(
            validate_group("g", &[("a", &rack, 2), ("b", &rack, 4)]),
            Err(TasError::LeaderCount { .. })
        ));
        assert!(matches!(validate_group("g", &[("a", &rack, 1)]), Err(TasError::GroupSize { count: 1, .. })));
    }
}
