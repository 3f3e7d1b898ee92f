//! Metrics without globals: the engine reports through an [`Observer`] the caller gives it.
//! The observer also owns time measurement, so the engine never reads a clock.

/// Receives the engine's metrics. Names follow seed 000 (`scheduler_placement_total`, ...).
pub trait Observer {
    /// Adds `value` to counter `name` with the given label pairs.
    fn count(&mut self, name: &'static str, labels: &[(&'static str, &str)], value: u64);
    /// Records one observation of histogram `name`.
    fn observe(&mut self, name: &'static str, labels: &[(&'static str, &str)], value: f64);
    /// Sets gauge `name` (queue depths and the like; the driver reports them).
    fn gauge(&mut self, _name: &'static str, _labels: &[(&'static str, &str)], _value: f64) {}
    /// Starts a timer; the engine passes the token back to [`Observer::elapsed_seconds`].
    fn start_timer(&mut self) -> u64 {
        0
    }
    /// Seconds elapsed since the timer `token` was started (0 for observers without a clock).
    fn elapsed_seconds(&mut self, _token: u64) -> f64 {
        0.0
    }
    /// Whether gauges go anywhere: a caller may skip computing them when not (the
    /// scheduler driver's queue depths walk the whole queue after every cycle).
    fn records_gauges(&self) -> bool {
        true
    }
}

/// Discards everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopObserver;

impl Observer for NoopObserver {
    fn count(&mut self, _: &'static str, _: &[(&'static str, &str)], _: u64) {}
    fn observe(&mut self, _: &'static str, _: &[(&'static str, &str)], _: f64) {}
    fn records_gauges(&self) -> bool {
        false
    }
}
