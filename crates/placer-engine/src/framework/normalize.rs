//! Score normalization helpers shared by score plugins.

/// kube's `DefaultNormalizeScore`: scales scores to `0..=max` relative to the highest one;
/// `reverse` flips them (`max - score`). All-zero scores become `max` when reversed.
pub fn default_normalize(max: i64, reverse: bool, scores: &mut [i64]) {
    let highest = highest_score(scores);
    if highest == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| *s = max);
        }
        return;
    }
    for s in scores.iter_mut() {
        let scaled = max * *s / highest;
        *s = if reverse { max - scaled } else { scaled };
    }
}

/// The highest score, at least 0. All-zero scores (a plugin with nothing to prefer on any
/// node, e.g. TaintToleration with no `PreferNoSchedule` taint: every cycle of most
/// clusters) are told by one OR over them, which vectorizes, where the maximum of `i64`s
/// compares lane by lane without a native instruction on baseline x86-64. Exact: the OR is
/// 0 only when every score is 0, whose maximum is 0.
fn highest_score(scores: &[i64]) -> i64 {
    if scores.iter().fold(0, |any, &s| any | s) == 0 {
        return 0;
    }
    scores.iter().copied().max().unwrap_or(0).max(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The all-zero shortcut gives the plain maximum (at least 0).
        #[test]
        fn highest_score_is_the_plain_maximum(
            scores in proptest::collection::vec(prop_oneof![Just(0i64), -5i64..5, any::<i64>()], 0..40),
        ) {
            prop_assert_eq!(highest_score(&scores), scores.iter().copied().max().unwrap_or(0).max(0));
        }
    }

    #[test]
    fn scales_to_the_highest_score() {
        let mut s = vec![0, 5, 10];
        default_normalize(100, false, &mut s);
        assert_eq!(s, vec![0, 50, 100]);
        let mut s = vec![0, 5, 10];
        default_normalize(100, true, &mut s);
        assert_eq!(s, vec![100, 50, 0]);
        let mut s = vec![0, 0];
        default_normalize(100, true, &mut s);
        assert_eq!(s, vec![100, 100]);
        let mut s = vec![0, 0];
        default_normalize(100, false, &mut s);
        assert_eq!(s, vec![0, 0]);
    }
}
