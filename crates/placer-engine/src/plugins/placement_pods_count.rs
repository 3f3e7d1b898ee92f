//! `PodGroupPodsCount` placement scoring (SEMANTICS §7): raw score = members already
//! scheduled (bound or assumed) + pods placed in the placement; normalized to
//! `raw * 100 / max(raw)`. minCount is deliberately not used. All raw scores 0 is an error.

use crate::framework::GroupCycle;
use crate::framework::Snapshot;
use crate::framework::{PlacementCandidate, PlacementScore};
use crate::framework::{Status, MAX_NODE_SCORE};

/// Plugin name.
pub const NAME: &str = "PodGroupPodsCount";

/// Scores placements by how many pods of the group they hold.
#[derive(Debug, Clone, Copy, Default)]
pub struct PodGroupPodsCount;

impl PlacementScore for PodGroupPodsCount {
    fn name(&self) -> &'static str {
        NAME
    }

    fn score(
        &self,
        _snap: &Snapshot,
        _cycle: &GroupCycle,
        candidate: &PlacementCandidate<'_>,
    ) -> Result<i64, Status> {
        Ok(i64::from(candidate.scheduled_total))
    }

    fn normalize(&self, _cycle: &GroupCycle, scores: &mut [i64]) -> Result<(), Status> {
        normalize(scores)
    }
}

/// `raw * 100 / max(raw)`; an error when every score is 0.
pub fn normalize(scores: &mut [i64]) -> Result<(), Status> {
    let max = scores.iter().copied().max().unwrap_or(0);
    if max <= 0 {
        return Err(Status::error(
            NAME,
            "no pods from pod group are assigned to any of the candidate placements",
        ));
    }
    for s in scores.iter_mut() {
        *s = *s * MAX_NODE_SCORE / max;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_against_the_largest_count() {
        let mut s = [3, 2, 0];
        normalize(&mut s).unwrap();
        assert_eq!(s, [100, 66, 0]);
    }

    #[test]
    fn all_zero_is_an_error() {
        let err = normalize(&mut [0, 0]).unwrap_err();
        assert_eq!(err.reasons, ["no pods from pod group are assigned to any of the candidate placements"]);
    }
}
