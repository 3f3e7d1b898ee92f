//! Percentiles and latency summaries.

use serde::Serialize;

/// The `p`-th percentile (0-100) of `sorted` (ascending) by the nearest-rank method: the
/// smallest sample such that at least `p`% of the samples are at or below it. `None` for
/// no samples.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 100.0) };
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.saturating_sub(1).min(sorted.len() - 1)])
}

/// Summary of latency samples, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    pub samples: usize,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl LatencySummary {
    /// Summarizes samples given in seconds (all zero without samples).
    pub fn from_seconds(samples: &[f64]) -> LatencySummary {
        let mut ms: Vec<f64> = samples.iter().map(|s| s * 1000.0).filter(|v| v.is_finite()).collect();
        if ms.is_empty() {
            return LatencySummary::default();
        }
        ms.sort_by(f64::total_cmp);
        let at = |p: f64| percentile(&ms, p).unwrap_or(0.0);
        LatencySummary {
            samples: ms.len(),
            mean_ms: ms.iter().sum::<f64>() / ms.len() as f64,
            p50_ms: at(50.0),
            p90_ms: at(90.0),
            p99_ms: at(99.0),
            max_ms: ms[ms.len() - 1],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 90.0), Some(90.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 100.0), Some(100.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 99.5), Some(100.0));
    }

    #[test]
    fn small_and_empty_sets() {
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[7.0], 1.0), Some(7.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 50.0), Some(2.0));
        assert_eq!(percentile(&v, 51.0), Some(3.0));
        assert_eq!(percentile(&v, 99.0), Some(4.0));
        assert_eq!(percentile(&v, 250.0), Some(4.0), "clamped to 100");
        assert_eq!(percentile(&v, -3.0), Some(1.0), "clamped to 0");
    }

    #[test]
    fn summary_is_in_milliseconds() {
        let secs: Vec<f64> = (1..=10).map(|i| f64::from(i) / 1000.0).collect();
        let s = LatencySummary::from_seconds(&secs);
        assert_eq!(s.samples, 10);
        assert!((s.p50_ms - 5.0).abs() < 1e-9);
        assert!((s.p90_ms - 9.0).abs() < 1e-9);
        assert!((s.p99_ms - 10.0).abs() < 1e-9);
        assert!((s.mean_ms - 5.5).abs() < 1e-9);
        assert_eq!(LatencySummary::from_seconds(&[]), LatencySummary::default());
    }
}
