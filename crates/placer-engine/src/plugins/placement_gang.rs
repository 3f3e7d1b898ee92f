//! `GangScheduling` as a PlacementFeasible plugin (KEP-5732 beta "early rejection",
//! SEMANTICS §4 later master): with `remaining` members not yet tried and `scheduled`
//! members bound, assumed or placed so far,
//! * `remaining + scheduled < minCount` -> Unschedulable (the evaluation stops);
//! * `scheduled < minCount` -> Wait;
//! * else Success.
//!
//! Basic groups use minCount 1.

use crate::framework::GroupCycle;
use crate::framework::{Code, Status};
use crate::framework::{PlacementFeasible, PlacementProgress};

/// Plugin name.
pub const NAME: &str = "GangScheduling";

/// The GangScheduling plugin's PlacementFeasible extension.
#[derive(Debug, Clone, Copy, Default)]
pub struct GangScheduling;

impl PlacementFeasible for GangScheduling {
    fn name(&self) -> &'static str {
        NAME
    }

    fn feasible(&self, cycle: &GroupCycle, progress: PlacementProgress) -> Status {
        let min = cycle.min_count;
        let PlacementProgress { remaining, scheduled, .. } = progress;
        if remaining.saturating_add(scheduled) < min {
            return Status::unschedulable(
                NAME,
                format!("minCount ({min}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"),
            );
        }
        if scheduled < min {
            return Status {
                code: Code::Wait,
                reasons: vec![format!(
                    "minCount ({min}) is not yet satisfied: {scheduled} scheduled, {remaining} remaining"
                )],
                plugin: NAME,
            };
        }
        Status::success()
    }

    fn code(&self, cycle: &GroupCycle, progress: PlacementProgress) -> Code {
        let PlacementProgress { remaining, scheduled, .. } = progress;
        if remaining.saturating_add(scheduled) < cycle.min_count {
            Code::Unschedulable
        } else if scheduled < cycle.min_count {
            Code::Wait
        } else {
            Code::Success
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podgroup::tests::{group, pod};

    fn cycle(min: Option<i32>) -> GroupCycle {
        GroupCycle::new(group("pg", min, None), true, vec![(0, pod("p", 1, Some("pg"), None))], vec![])
    }

    fn progress(remaining: u32, scheduled: u32) -> PlacementProgress {
        PlacementProgress { remaining, scheduled, placed: scheduled }
    }

    #[test]
    fn the_code_alone_is_the_verdict_s_code() {
        for min in [None, Some(1), Some(3), Some(4)] {
            let c = cycle(min);
            for remaining in 0..6 {
                for scheduled in 0..6 {
                    let p = progress(remaining, scheduled);
                    assert_eq!(
                        GangScheduling.code(&c, p),
                        GangScheduling.feasible(&c, p).code,
                        "{min:?} {p:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn rejects_when_min_count_is_out_of_reach() {
        let s = GangScheduling.feasible(&cycle(Some(4)), progress(1, 2));
        assert_eq!(s.code, Code::Unschedulable);
        assert_eq!(s.reasons, ["minCount (4) cannot be satisfied: 2 scheduled, 1 remaining"]);
    }

    #[test]
    fn waits_while_min_count_is_reachable_but_not_reached() {
        let s = GangScheduling.feasible(&cycle(Some(4)), progress(2, 2));
        assert_eq!(s.code, Code::Wait);
        assert_eq!(s.reasons, ["minCount (4) is not yet satisfied: 2 scheduled, 2 remaining"]);
    }

    #[test]
    fn succeeds_once_min_count_is_reached() {
        assert!(GangScheduling.feasible(&cycle(Some(4)), progress(0, 4)).is_success());
    }

    #[test]
    fn basic_groups_need_one_pod() {
        assert_eq!(GangScheduling.feasible(&cycle(None), progress(1, 0)).code, Code::Wait);
        assert!(GangScheduling.feasible(&cycle(None), progress(0, 1)).is_success());
        assert_eq!(GangScheduling.feasible(&cycle(None), progress(0, 0)).code, Code::Unschedulable);
    }
}
