//! Completion indexes of Indexed Jobs: the `status.completedIndexes` text format
//! (`"1,3-5,7"`) and the index of a pod.

use std::collections::BTreeSet;

use placer_api::annotations::JOB_COMPLETION_INDEX;
use placer_api::k8s::api::core::v1::Pod;

/// A set of completion indexes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexSet(BTreeSet<i32>);

impl IndexSet {
    /// An empty set.
    pub fn new() -> Self {
        IndexSet::default()
    }

    /// Reads the upstream interval text (`"0-2,5,7-9"`). Entries that are not numbers or
    /// intervals, negative, or not below `completions` are skipped, as upstream does when it
    /// reads a status written by an older controller.
    pub fn parse(text: &str, completions: i32) -> IndexSet {
        let mut set = BTreeSet::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (first, last) = match part.split_once('-') {
                Some((a, b)) => (a.trim().parse::<i32>(), b.trim().parse::<i32>()),
                None => (part.parse::<i32>(), part.parse::<i32>()),
            };
            let (Ok(first), Ok(last)) = (first, last) else { continue };
            if first < 0 || first > last {
                continue;
            }
            set.extend(first..=last.min(completions - 1));
        }
        IndexSet(set)
    }

    /// Adds an index; returns whether it was new.
    pub fn insert(&mut self, index: i32) -> bool {
        self.0.insert(index)
    }

    /// Whether the index is in the set.
    pub fn contains(&self, index: i32) -> bool {
        self.0.contains(&index)
    }

    /// Number of indexes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// No index at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The indexes, ascending.
    pub fn iter(&self) -> impl Iterator<Item = i32> + '_ {
        self.0.iter().copied()
    }

    /// The upstream text: runs of three or more consecutive indexes as `a-b`, a run of two
    /// as `a,b`, singles as `a`, ascending, comma-separated; empty for an empty set.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let mut iter = self.0.iter().copied().peekable();
        while let Some(first) = iter.next() {
            let mut last = first;
            while iter.peek() == Some(&(last + 1)) {
                last += 1;
                iter.next();
            }
            if !out.is_empty() {
                out.push(',');
            }
            out.push_str(&first.to_string());
            if last == first + 1 {
                out.push(',');
                out.push_str(&last.to_string());
            } else if last > first {
                out.push('-');
                out.push_str(&last.to_string());
            }
        }
        out
    }
}

/// The completion index of a pod (annotation `batch.kubernetes.io/job-completion-index`,
/// else the label of the same name), if it is a valid index below `completions`.
pub fn pod_index(pod: &Pod, completions: i32) -> Option<i32> {
    let from = |m: Option<&std::collections::BTreeMap<String, String>>| {
        m.and_then(|m| m.get(JOB_COMPLETION_INDEX)).and_then(|v| v.parse::<i32>().ok())
    };
    let index = from(pod.metadata.annotations.as_ref()).or_else(|| from(pod.metadata.labels.as_ref()))?;
    (0..completions).contains(&index).then_some(index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn set(indexes: &[i32]) -> IndexSet {
        let mut s = IndexSet::new();
        for &i in indexes {
            s.insert(i);
        }
        s
    }

    #[test]
    fn text_uses_ranges_for_three_or_more_and_pairs_for_two() {
        assert_eq!(set(&[]).to_text(), "");
        assert_eq!(set(&[4]).to_text(), "4");
        assert_eq!(set(&[1, 2]).to_text(), "1,2");
        assert_eq!(set(&[0, 1, 2, 5, 7, 8, 9]).to_text(), "0-2,5,7-9");
        assert_eq!(set(&[3, 1, 2]).to_text(), "1-3");
    }

    #[test]
    fn parse_reads_what_to_text_writes() {
        for s in [set(&[]), set(&[0]), set(&[0, 1]), set(&[0, 1, 2, 5, 7, 8, 9])] {
            assert_eq!(IndexSet::parse(&s.to_text(), 100), s);
        }
    }

    #[test]
    fn parse_skips_garbage_and_indexes_beyond_completions() {
        assert_eq!(IndexSet::parse("1,x,3-2,-4,2-9", 5), set(&[1, 2, 3, 4]));
    }

    #[test]
    fn pod_index_prefers_the_annotation_and_checks_the_range() {
        let pod = |ann: Option<&str>, label: Option<&str>| Pod {
            metadata: ObjectMeta {
                annotations: ann.map(|v| [(JOB_COMPLETION_INDEX.to_string(), v.to_string())].into()),
                labels: label.map(|v| [(JOB_COMPLETION_INDEX.to_string(), v.to_string())].into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        };
        assert_eq!(pod_index(&pod(Some("2"), Some("3")), 4), Some(2));
        assert_eq!(pod_index(&pod(None, Some("3")), 4), Some(3));
        assert_eq!(pod_index(&pod(Some("4"), None), 4), None);
        assert_eq!(pod_index(&pod(Some("-1"), None), 4), None);
        assert_eq!(pod_index(&pod(Some("x"), None), 4), None);
        assert_eq!(pod_index(&pod(None, None), 4), None);
    }
}
