//! Score normalization helpers shared by score plugins.

/// kube's `DefaultNormalizeScore`: scales scores to `0..=max` relative to the highest one;
/// `reverse` flips them (`max - score`). All-zero scores become `max` when reversed.
pub fn default_normalize(max: i64, reverse: bool, scores: &mut [i64]) {
    let highest = scores.iter().copied().max().unwrap_or(0).max(0);
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

#[cfg(test)]
mod tests {
    use super::*;

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
