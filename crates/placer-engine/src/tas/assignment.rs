//! The compact `TopologyAssignment` of seed 002 ("Since v1beta2"): levels, then slices of
//! domains, each slice zipping per-level values (one `universal` value, or `individual`
//! roots around a common prefix and suffix) with pod counts (`universal` or `individual`).
//!
//! [`TopologyAssignment::encode`] keeps only the hostname level when the lowest level is
//! `kubernetes.io/hostname` (as Kueue does: a hostname names its node), extracts prefixes,
//! suffixes and universal values, and splits the domains into slices by naming pattern
//! (e.g. node pools) when that is smaller. [`TopologyAssignment::decode`] validates and
//! expands it back.

use serde::{Deserialize, Serialize};

use super::tree::HOSTNAME_LEVEL;
use super::TasAssignment;

/// Most slices an assignment may have (seed 002: `MaxItems=1000`).
pub const MAX_SLICES: usize = 1000;

/// A topology assignment in the v1beta2 shape (JSON field names as in Kueue).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignment {
    /// Level keys, coarsest first, that the values of every slice refer to.
    pub levels: Vec<String>,
    /// The assignment is the union of the slices.
    pub slices: Vec<TopologyAssignmentSlice>,
}

/// The placement of a subset of the pods: `domain_count` domains.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignmentSlice {
    pub domain_count: i32,
    /// One entry per level of the assignment.
    pub values_per_level: Vec<SliceLevelValues>,
    pub pod_counts: SlicePodCounts,
}

/// The values of one level in a slice: exactly one of the two is set.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SliceLevelValues {
    /// The same value for every domain of the slice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub universal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub individual: Option<IndividualValues>,
}

/// One value per domain, written as `prefix + root + suffix`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndividualValues {
    /// Non-empty when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Non-empty when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suffix: Option<String>,
    /// `domain_count` roots.
    pub roots: Vec<String>,
}

/// Pods per domain in a slice: exactly one of the two is set.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlicePodCounts {
    /// The same count (at least 1) in every domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub universal: Option<i32>,
    /// One count (at least 1) per domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub individual: Option<Vec<i32>>,
}

/// One domain of an assignment: a value per level and its pod count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainCount {
    pub values: Vec<String>,
    pub count: u32,
}

/// An encoded assignment that breaks the format's rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssignmentError {
    #[error("topologyAssignment: levels must not be empty")]
    NoLevels,
    #[error("topologyAssignment: {count} slices; at most {MAX_SLICES} are allowed")]
    TooManySlices { count: usize },
    #[error("topologyAssignment.slices[{slice}]: domainCount {count} must be at least 1")]
    DomainCount { slice: usize, count: i32 },
    #[error("topologyAssignment.slices[{slice}].valuesPerLevel: {got} entries for {levels} levels")]
    LevelCount { slice: usize, got: usize, levels: usize },
    #[error("topologyAssignment.slices[{slice}].valuesPerLevel[{level}]: exactly one of universal, individual must be set")]
    LevelValuesOneOf { slice: usize, level: usize },
    #[error("topologyAssignment.slices[{slice}].valuesPerLevel[{level}].individual.{field} must not be empty when set")]
    EmptyAffix { slice: usize, level: usize, field: &'static str },
    #[error("topologyAssignment.slices[{slice}].valuesPerLevel[{level}].individual.roots: {got} roots for {count} domains")]
    RootCount { slice: usize, level: usize, got: usize, count: i32 },
    #[error(
        "topologyAssignment.slices[{slice}].podCounts: exactly one of universal, individual must be set"
    )]
    PodCountsOneOf { slice: usize },
    #[error("topologyAssignment.slices[{slice}].podCounts.individual: {got} counts for {count} domains")]
    PodCountLength { slice: usize, got: usize, count: i32 },
    #[error("topologyAssignment.slices[{slice}].podCounts: count {value} must be at least 1")]
    PodCountValue { slice: usize, value: i32 },
    #[error("topologyAssignment: domain {index}: {got} values for {levels} levels")]
    DomainValues { index: usize, got: usize, levels: usize },
}

impl TopologyAssignment {
    /// Encodes the worker counts of an assignment (see the module docs).
    pub fn from_assignment(a: &TasAssignment) -> TopologyAssignment {
        let domains: Vec<DomainCount> =
            a.worker.iter().map(|l| DomainCount { values: l.values.clone(), count: l.count }).collect();
        // Inputs from the algorithm always have one value per level.
        TopologyAssignment::encode(&a.levels, &domains)
            .unwrap_or_else(|_| TopologyAssignment { levels: a.levels.clone(), slices: Vec::new() })
    }

    /// Encodes domains (each with one value per level, count at least 1; zero counts are
    /// dropped) compactly. With a hostname lowest level only that level is kept.
    pub fn encode(levels: &[String], domains: &[DomainCount]) -> Result<TopologyAssignment, AssignmentError> {
        if levels.is_empty() {
            return Err(AssignmentError::NoLevels);
        }
        for (index, d) in domains.iter().enumerate() {
            if d.values.len() != levels.len() {
                return Err(AssignmentError::DomainValues {
                    index,
                    got: d.values.len(),
                    levels: levels.len(),
                });
            }
        }
        let keep_from = if levels.last().is_some_and(|l| l == HOSTNAME_LEVEL) { levels.len() - 1 } else { 0 };
        let out_levels = levels[keep_from..].to_vec();
        let domains: Vec<(&[String], i32)> = domains
            .iter()
            .filter(|d| d.count > 0)
            .map(|d| (&d.values[keep_from..], i32::try_from(d.count).unwrap_or(i32::MAX)))
            .collect();
        if domains.is_empty() {
            return Ok(TopologyAssignment { levels: out_levels, slices: Vec::new() });
        }
        let single = TopologyAssignment { levels: out_levels.clone(), slices: vec![encode_slice(&domains)] };
        // Split where the naming pattern of the lowest level changes (node pools), keep it
        // if smaller.
        let groups = group_by_stem(&domains);
        if groups.len() > 1 && groups.len() <= MAX_SLICES {
            let split = TopologyAssignment {
                levels: out_levels,
                slices: groups.iter().map(|g| encode_slice(g)).collect(),
            };
            if encoded_len(&split) < encoded_len(&single) {
                return Ok(split);
            }
        }
        Ok(single)
    }

    /// Validates and expands the assignment: one entry per domain, in slice order.
    pub fn decode(&self) -> Result<Vec<DomainCount>, AssignmentError> {
        let depth = self.levels.len();
        if depth == 0 {
            return Err(AssignmentError::NoLevels);
        }
        if self.slices.len() > MAX_SLICES {
            return Err(AssignmentError::TooManySlices { count: self.slices.len() });
        }
        let mut out = Vec::new();
        for (si, slice) in self.slices.iter().enumerate() {
            let n = slice.domain_count;
            if n < 1 {
                return Err(AssignmentError::DomainCount { slice: si, count: n });
            }
            if slice.values_per_level.len() != depth {
                return Err(AssignmentError::LevelCount {
                    slice: si,
                    got: slice.values_per_level.len(),
                    levels: depth,
                });
            }
            let counts: Vec<i32> = match (&slice.pod_counts.universal, &slice.pod_counts.individual) {
                (Some(c), None) => vec![*c; n as usize],
                (None, Some(v)) => {
                    if v.len() != n as usize {
                        return Err(AssignmentError::PodCountLength { slice: si, got: v.len(), count: n });
                    }
                    v.clone()
                }
                _ => return Err(AssignmentError::PodCountsOneOf { slice: si }),
            };
            if let Some(&bad) = counts.iter().find(|&&c| c < 1) {
                return Err(AssignmentError::PodCountValue { slice: si, value: bad });
            }
            let mut columns: Vec<Vec<String>> = Vec::with_capacity(depth);
            for (li, lv) in slice.values_per_level.iter().enumerate() {
                let column = match (&lv.universal, &lv.individual) {
                    (Some(u), None) => vec![u.clone(); n as usize],
                    (None, Some(ind)) => {
                        if ind.roots.len() != n as usize {
                            return Err(AssignmentError::RootCount {
                                slice: si,
                                level: li,
                                got: ind.roots.len(),
                                count: n,
                            });
                        }
                        for (field, affix) in [("prefix", &ind.prefix), ("suffix", &ind.suffix)] {
                            if affix.as_deref() == Some("") {
                                return Err(AssignmentError::EmptyAffix { slice: si, level: li, field });
                            }
                        }
                        let (pre, suf) =
                            (ind.prefix.as_deref().unwrap_or(""), ind.suffix.as_deref().unwrap_or(""));
                        ind.roots.iter().map(|r| format!("{pre}{r}{suf}")).collect()
                    }
                    _ => return Err(AssignmentError::LevelValuesOneOf { slice: si, level: li }),
                };
                columns.push(column);
            }
            for (i, &count) in counts.iter().enumerate() {
                out.push(DomainCount {
                    values: columns.iter().map(|c| c[i].clone()).collect(),
                    count: count as u32,
                });
            }
        }
        Ok(out)
    }
}

fn encoded_len(a: &TopologyAssignment) -> usize {
    serde_json::to_vec(a).map_or(usize::MAX, |v| v.len())
}

/// One slice for these domains, using universal values and common affixes where possible.
fn encode_slice(domains: &[(&[String], i32)]) -> TopologyAssignmentSlice {
    let depth = domains.first().map_or(0, |d| d.0.len());
    let values_per_level =
        (0..depth).map(|level| encode_level(domains.iter().map(|d| d.0[level].as_str()))).collect();
    let first = domains.first().map_or(1, |d| d.1);
    let pod_counts = if domains.iter().all(|d| d.1 == first) {
        SlicePodCounts { universal: Some(first), individual: None }
    } else {
        SlicePodCounts { universal: None, individual: Some(domains.iter().map(|d| d.1).collect()) }
    };
    TopologyAssignmentSlice { domain_count: domains.len() as i32, values_per_level, pod_counts }
}

fn encode_level<'a>(values: impl Iterator<Item = &'a str> + Clone) -> SliceLevelValues {
    let mut iter = values.clone();
    let Some(first) = iter.next() else {
        return SliceLevelValues::default();
    };
    // Common prefix and suffix in bytes, kept on char boundaries.
    let (mut prefix, mut suffix) = (first.len(), first.len());
    let (mut min_len, mut all_equal) = (first.len(), true);
    for v in iter {
        all_equal &= v == first;
        min_len = min_len.min(v.len());
        prefix = common_prefix(first, v).min(prefix);
        suffix = common_suffix(first, v).min(suffix);
    }
    if all_equal {
        return SliceLevelValues { universal: Some(first.to_string()), individual: None };
    }
    // Prefix and suffix must not overlap inside the shortest value.
    if prefix + suffix > min_len {
        prefix = min_len - suffix;
        while !first.is_char_boundary(prefix) {
            prefix -= 1;
        }
    }
    let roots = values.map(|v| v[prefix..v.len() - suffix].to_string()).collect();
    let affix = |s: &str| (!s.is_empty()).then(|| s.to_string());
    SliceLevelValues {
        universal: None,
        individual: Some(IndividualValues {
            prefix: affix(&first[..prefix]),
            suffix: affix(&first[first.len() - suffix..]),
            roots,
        }),
    }
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.char_indices().zip(b.chars()).find(|((_, x), y)| x != y).map_or(a.len().min(b.len()), |((i, _), _)| i)
}

fn common_suffix(a: &str, b: &str) -> usize {
    let mut n = 0;
    for (x, y) in a.chars().rev().zip(b.chars().rev()) {
        if x != y {
            break;
        }
        n += x.len_utf8();
    }
    n
}

/// Consecutive runs of domains whose lowest-level values share a stem (the value without
/// its trailing run of ASCII alphanumerics after the last separator).
fn group_by_stem<'d>(domains: &'d [(&'d [String], i32)]) -> Vec<&'d [(&'d [String], i32)]> {
    let stem = |d: &(&[String], i32)| -> String {
        let v = d.0.last().map_or("", |s| s.as_str());
        let cut = v
            .char_indices()
            .rev()
            .find(|(_, c)| !c.is_ascii_alphanumeric())
            .map_or(0, |(i, c)| i + c.len_utf8());
        let mut key = d.0[..d.0.len().saturating_sub(1)].join("\u{0}");
        key.push('\u{0}');
        key.push_str(&v[..cut]);
        key
    };
    let mut groups = Vec::new();
    let mut start = 0;
    for i in 1..=domains.len() {
        if i == domains.len() || stem(&domains[i]) != stem(&domains[start]) {
            groups.push(&domains[start..i]);
            start = i;
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn dc(values: &[&str], count: u32) -> DomainCount {
        DomainCount { values: values.iter().map(|v| v.to_string()).collect(), count }
    }

    fn levels(l: &[&str]) -> Vec<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_seed_example_block_and_racks() {
        let a = TopologyAssignment::encode(
            &levels(&["block", "rack"]),
            &[dc(&["block-1", "rack-1"], 4), dc(&["block-1", "rack-2"], 2)],
        )
        .unwrap();
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "levels": ["block", "rack"],
                "slices": [{
                    "domainCount": 2,
                    "valuesPerLevel": [
                        {"universal": "block-1"},
                        {"individual": {"prefix": "rack-", "roots": ["1", "2"]}}
                    ],
                    "podCounts": {"individual": [4, 2]}
                }]
            })
        );
        assert_eq!(a.decode().unwrap(), vec![dc(&["block-1", "rack-1"], 4), dc(&["block-1", "rack-2"], 2)]);
    }

    #[test]
    fn hostname_topologies_keep_only_the_hostname_and_split_node_pools() {
        // Seed 002: nodes named pool-X-node-Y from two pools (here of 50 and 70 nodes).
        let lv = levels(&["block", HOSTNAME_LEVEL]);
        let mut domains = Vec::new();
        for (pool, size) in [(1, 50), (2, 70)] {
            for i in 1..=size {
                domains.push(dc(&["b1", &format!("pool-{pool}-node-{i}")], 1));
            }
        }
        domains.sort_by(|a, b| a.values.cmp(&b.values));
        let a = TopologyAssignment::encode(&lv, &domains).unwrap();
        assert_eq!(a.levels, [HOSTNAME_LEVEL]);
        assert_eq!(a.slices.len(), 2, "{a:?}");
        assert_eq!(a.slices[0].domain_count, 50);
        let second = a.slices[1].values_per_level[0].individual.as_ref().unwrap();
        assert_eq!(second.prefix.as_deref(), Some("pool-2-node-"));
        assert_eq!(a.slices[1].pod_counts.universal, Some(1));
        let decoded = a.decode().unwrap();
        assert_eq!(decoded.len(), 120);
        assert!(decoded.contains(&dc(&["pool-2-node-70"], 1)));
    }

    #[test]
    fn a_single_slice_is_kept_when_splitting_is_not_smaller() {
        let lv = levels(&[HOSTNAME_LEVEL]);
        let domains = [dc(&["pool-1-node-1"], 2), dc(&["pool-2-node-1"], 1)];
        let a = TopologyAssignment::encode(&lv, &domains).unwrap();
        assert_eq!(a.slices.len(), 1);
        assert_eq!(a.slices[0].pod_counts.individual, Some(vec![2, 1]));
        assert_eq!(a.decode().unwrap(), domains);
    }

    #[test]
    fn multibyte_values_split_on_char_boundaries() {
        let lv = levels(&["a", "b"]);
        let domains = [dc(&["", ""], 1), dc(&["", "é"], 1), dc(&["é", "aé-é"], 3)];
        let a = TopologyAssignment::encode(&lv, &domains).unwrap();
        assert_eq!(a.decode().unwrap(), domains);
    }

    #[test]
    fn prefix_and_suffix_never_overlap() {
        let a = TopologyAssignment::encode(&levels(&["x"]), &[dc(&["ababa"], 1), dc(&["aba"], 1)]).unwrap();
        assert_eq!(a.decode().unwrap(), vec![dc(&["ababa"], 1), dc(&["aba"], 1)]);
    }

    #[test]
    fn decoding_rejects_broken_slices() {
        let mut a = TopologyAssignment::encode(&levels(&["x"]), &[dc(&["a1"], 1), dc(&["a2"], 2)]).unwrap();
        a.slices[0].pod_counts.universal = Some(1);
        assert!(matches!(a.decode(), Err(AssignmentError::PodCountsOneOf { slice: 0 })));
        a.slices[0].pod_counts = SlicePodCounts { universal: None, individual: Some(vec![1]) };
        assert!(matches!(a.decode(), Err(AssignmentError::PodCountLength { .. })));
        a.slices[0].pod_counts = SlicePodCounts { universal: Some(0), individual: None };
        assert!(matches!(a.decode(), Err(AssignmentError::PodCountValue { .. })));
        a.slices[0].pod_counts = SlicePodCounts { universal: Some(1), individual: None };
        a.slices[0].domain_count = 3;
        assert!(matches!(a.decode(), Err(AssignmentError::RootCount { .. })));
        a.slices[0].domain_count = 0;
        assert!(matches!(a.decode(), Err(AssignmentError::DomainCount { .. })));
    }

    #[test]
    fn sixty_thousand_nodes_encode_compactly() {
        // 60,000 nodes in 30 pools of 2,000, named like managed node pools, 8 pods each.
        let lv = levels(&[
            "cloud.provider.com/topology-block",
            "cloud.provider.com/topology-rack",
            HOSTNAME_LEVEL,
        ]);
        let mut domains = Vec::with_capacity(60_000);
        for pool in 0..30 {
            for i in 0..2_000 {
                let block = format!("block-{}", (pool * 2_000 + i) / 4_000);
                let rack = format!("rack-{}", (pool * 2_000 + i) / 40);
                let host = format!("gke-train-cluster-np-gpu-{pool:02}-7f3a9c{pool:02}-{i:04x}");
                domains.push(DomainCount { values: vec![block, rack, host], count: 8 });
            }
        }
        domains.sort_by(|a, b| a.values.cmp(&b.values));
        let a = TopologyAssignment::encode(&lv, &domains).unwrap();
        let bytes = serde_json::to_vec(&a).unwrap().len();
        let naive: usize = domains.iter().map(|d| d.values[2].len() + 4).sum();
        println!(
            "60,000-node assignment: {bytes} bytes encoded ({} slices), {naive} bytes of plain hostnames",
            a.slices.len()
        );
        assert!(bytes < 1_500_000 / 3, "{bytes} bytes");
        let decoded = a.decode().unwrap();
        assert_eq!(decoded.len(), 60_000);
        assert!(decoded.iter().all(|d| d.count == 8));
    }

    proptest! {
        #[test]
        fn encode_then_decode_gives_the_domains_back(
            raw in proptest::collection::vec(
                (proptest::collection::vec("[a-c]{0,2}(-[0-9]{1,2})?é?", 3), 1u32..5),
                1..40,
            ),
            hostname in any::<bool>(),
        ) {
            let lv = if hostname { levels(&["a", "b", HOSTNAME_LEVEL]) } else { levels(&["a", "b", "c"]) };
            let mut domains: Vec<DomainCount> = raw.into_iter().map(|(values, count)| DomainCount { values, count }).collect();
            domains.sort_by(|a, b| a.values.cmp(&b.values));
            let a = TopologyAssignment::encode(&lv, &domains).unwrap();
            let json = serde_json::to_string(&a).unwrap();
            let back: TopologyAssignment = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(&back, &a);
            let decoded = back.decode().unwrap();
            let keep = if hostname { 2 } else { 0 };
            let expected: Vec<DomainCount> = domains
                .iter()
                .map(|d| DomainCount { values: d.values[keep..].to_vec(), count: d.count })
                .collect();
            prop_assert_eq!(decoded, expected);
        }
    }
}
