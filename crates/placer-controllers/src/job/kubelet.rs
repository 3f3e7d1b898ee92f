//! The simulated kubelet for Job pods in the embedded cluster, and the virtual clock
//! arithmetic it needs.
//!
//! A bound pod (`spec.nodeName` set) that is not terminal becomes `Running` (with
//! `status.startTime`, `Ready` conditions and running, ready container statuses, so
//! `kubectl get pods` shows it `1/1 Running`) as soon as the controller sees it bound. If
//! its annotation `placer.dev/run-time` holds a duration (Go syntax: `30s`, `5m`, `1h30m`,
//! `1.5s`, `250ms`), it becomes `Succeeded` once the clock reaches `startTime + run time`.
//! Without the annotation it runs until something else ends it.

use placer_api::annotations::SIM_RUN_TIME;
use placer_api::k8s::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus, Pod, PodCondition,
    PodStatus,
};
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::Time;
use placer_api::k8s::jiff::Timestamp;

use super::pods;

/// Store time (ms since the store's epoch) and its relation to wall-clock timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    pub now_ms: u64,
    /// Unix milliseconds of store time 0.
    pub epoch_unix_ms: i64,
}

impl Clock {
    /// From a store's `now_ms` and `now` read at the same instant.
    pub fn new(now_ms: u64, now: &Time) -> Clock {
        let now_signed = i64::try_from(now_ms).unwrap_or(i64::MAX);
        Clock { now_ms, epoch_unix_ms: now.0.as_millisecond().saturating_sub(now_signed) }
    }

    /// The timestamp of store time `ms`.
    pub fn time(&self, ms: u64) -> Time {
        let unix = self.epoch_unix_ms.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
        Time(Timestamp::from_millisecond(unix).unwrap_or(Timestamp::MAX))
    }

    /// `now` as a timestamp.
    pub fn now(&self) -> Time {
        self.time(self.now_ms)
    }

    /// Store time of a timestamp (0 for timestamps before the store's epoch).
    pub fn ms(&self, t: &Time) -> u64 {
        u64::try_from(t.0.as_millisecond().saturating_sub(self.epoch_unix_ms)).unwrap_or(0)
    }

    /// Unix seconds of store time `ms`.
    pub fn unix_seconds(&self, ms: u64) -> i64 {
        self.time(ms).0.as_second()
    }

    /// Store time of a Unix second (0 before the epoch).
    pub fn ms_of_unix_seconds(&self, secs: i64) -> u64 {
        u64::try_from(secs.saturating_mul(1000).saturating_sub(self.epoch_unix_ms)).unwrap_or(0)
    }
}

/// A duration that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {text:?}: {reason} (expected e.g. 30s, 5m, 1h30m, 1.5s, 250ms)")]
pub struct DurationError {
    pub text: String,
    pub reason: &'static str,
}

/// Parses a Go duration (`time.ParseDuration`) into milliseconds, rounding sub-millisecond
/// remainders up. Units: `ns us µs ms s m h`; a bare `0` is allowed; negative durations are
/// not.
pub fn parse_duration_ms(text: &str) -> Result<u64, DurationError> {
    let err = |reason| DurationError { text: text.to_string(), reason };
    let s = text.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    if s == "0" {
        return Ok(0);
    }
    if s.starts_with('-') {
        return Err(err("negative"));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    // Accumulate nanoseconds in u128 to stay exact.
    let mut total_ns: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (num, after) = rest.split_at(num_end);
        if num.is_empty() || num == "." {
            return Err(err("expected a number"));
        }
        let unit_end = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_end);
        let unit_ns: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(err("missing unit")),
            _ => return Err(err("unknown unit")),
        };
        let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
        if frac_part.contains('.') {
            return Err(err("expected a number"));
        }
        let int: u128 =
            if int_part.is_empty() { 0 } else { int_part.parse().map_err(|_| err("number too large"))? };
        let mut value = int.checked_mul(unit_ns).ok_or_else(|| err("number too large"))?;
        let mut scale = unit_ns;
        for d in frac_part.bytes() {
            scale /= 10;
            value += u128::from(d - b'0') * scale;
        }
        total_ns = total_ns.checked_add(value).ok_or_else(|| err("number too large"))?;
        rest = next;
    }
    let ms = total_ns.div_ceil(1_000_000);
    u64::try_from(ms).map_err(|_| err("number too large"))
}

/// The run time of a pod from its `placer.dev/run-time` annotation: `None` without the
/// annotation, an error when it cannot be read.
pub fn run_time_ms(pod: &Pod) -> Option<Result<u64, DurationError>> {
    pod.metadata.annotations.as_ref()?.get(SIM_RUN_TIME).map(|v| parse_duration_ms(v))
}

/// What the simulated kubelet does to one pod now.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeletStep {
    /// The new status to write, if it changes.
    pub status: Option<PodStatus>,
    /// When the pod will finish, if it is running with a run time that has not elapsed.
    pub wake_at_ms: Option<u64>,
}

/// Whether [`kubelet_step`] leaves `pod` alone whatever the clock and its run time: it is
/// not bound, already terminal, or being deleted.
pub fn kubelet_idle(pod: &Pod) -> bool {
    !pods::is_bound(pod) || pods::is_terminal(pod) || pod.metadata.deletion_timestamp.is_some()
}

/// One step of the simulated kubelet for `pod` (`run_time` from [`run_time_ms`]).
pub fn kubelet_step(pod: &Pod, clock: &Clock, run_time: Option<u64>) -> KubeletStep {
    let idle = KubeletStep { status: None, wake_at_ms: None };
    if kubelet_idle(pod) {
        return idle;
    }
    let mut status = pod.status.clone().unwrap_or_default();
    let mut changed = false;
    if status.phase.as_deref() != Some("Running") {
        status.phase = Some("Running".to_string());
        changed = true;
    }
    let start_ms = match &status.start_time {
        Some(t) => clock.ms(t),
        None => {
            status.start_time = Some(clock.now());
            changed = true;
            clock.now_ms
        }
    };
    let mut wake_at_ms = None;
    let finished = match run_time {
        Some(rt) if clock.now_ms >= start_ms.saturating_add(rt) => true,
        Some(rt) => {
            wake_at_ms = Some(start_ms.saturating_add(rt));
            false
        }
        None => false,
    };
    if finished {
        status.phase = Some("Succeeded".to_string());
        for t in ["Ready", "ContainersReady"] {
            set_condition(&mut status, clock, t, "False", Some("PodCompleted"));
        }
        status.container_statuses = Some(container_statuses(pod, clock, start_ms, true));
        changed = true;
    } else {
        for t in ["Initialized", "ContainersReady", "Ready"] {
            changed |= set_condition(&mut status, clock, t, "True", None);
        }
        if status.container_statuses.is_none() {
            status.container_statuses = Some(container_statuses(pod, clock, start_ms, false));
            changed = true;
        }
    }
    KubeletStep { status: changed.then_some(status), wake_at_ms }
}

/// Container statuses as a kubelet reports them: every container running (ready) since
/// the pod started, or terminated with exit code 0 once the pod succeeded.
fn container_statuses(pod: &Pod, clock: &Clock, start_ms: u64, finished: bool) -> Vec<ContainerStatus> {
    let started = clock.time(start_ms);
    let containers = pod.spec.as_ref().map(|s| s.containers.as_slice()).unwrap_or(&[]);
    containers
        .iter()
        .map(|c| {
            let state = if finished {
                ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: 0,
                        reason: Some("Completed".to_string()),
                        started_at: Some(started.clone()),
                        finished_at: Some(clock.now()),
                        ..ContainerStateTerminated::default()
                    }),
                    ..ContainerState::default()
                }
            } else {
                ContainerState {
                    running: Some(ContainerStateRunning { started_at: Some(started.clone()) }),
                    ..ContainerState::default()
                }
            };
            ContainerStatus {
                name: c.name.clone(),
                image: c.image.clone().unwrap_or_default(),
                image_id: String::new(),
                ready: !finished,
                started: Some(!finished),
                restart_count: 0,
                state: Some(state),
                ..ContainerStatus::default()
            }
        })
        .collect()
}

/// Sets a pod condition; returns whether anything changed. Other conditions (e.g. the
/// scheduler's `PodScheduled`) are kept.
fn set_condition(
    status: &mut PodStatus,
    clock: &Clock,
    type_: &str,
    value: &str,
    reason: Option<&str>,
) -> bool {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == value && c.reason.as_deref() == reason => false,
        Some(c) => {
            c.status = value.to_string();
            c.reason = reason.map(str::to_string);
            c.last_transition_time = Some(clock.now());
            true
        }
        None => {
            conditions.push(PodCondition {
                type_: type_.to_string(),
                status: value.to_string(),
                reason: reason.map(str::to_string),
                last_transition_time: Some(clock.now()),
                ..PodCondition::default()
            });
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::api::core::v1::PodSpec;
    use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn clock(now_ms: u64) -> Clock {
        // Store epoch 2026-01-01T00:00:00Z.
        Clock { now_ms, epoch_unix_ms: 1_767_225_600_000 }
    }

    #[test]
    fn durations_follow_go_syntax() {
        assert_eq!(parse_duration_ms("30s"), Ok(30_000));
        assert_eq!(parse_duration_ms("5m"), Ok(300_000));
        assert_eq!(parse_duration_ms("1h30m"), Ok(5_400_000));
        assert_eq!(parse_duration_ms("1.5s"), Ok(1_500));
        assert_eq!(parse_duration_ms("250ms"), Ok(250));
        assert_eq!(parse_duration_ms("1ns"), Ok(1), "sub-millisecond rounds up");
        assert_eq!(parse_duration_ms("0"), Ok(0));
        assert_eq!(parse_duration_ms(".5m"), Ok(30_000));
    }

    #[test]
    fn bad_durations_are_errors() {
        for bad in ["", "30", "5x", "-5s", "s", "1..5s", "99999999999999999999999h"] {
            assert!(parse_duration_ms(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn clock_converts_both_ways() {
        let c = clock(90_000);
        assert_eq!(c.ms(&c.time(12_345)), 12_345);
        assert_eq!(c.ms(&c.now()), 90_000);
        assert_eq!(c.unix_seconds(0), 1_767_225_600);
        assert_eq!(c.ms_of_unix_seconds(1_767_225_660), 60_000);
    }

    fn bound_pod(run_time: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                annotations: run_time.map(|v| [(SIM_RUN_TIME.to_string(), v.to_string())].into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec { node_name: Some("n1".into()), ..PodSpec::default() }),
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "PodScheduled".into(),
                    status: "True".into(),
                    ..PodCondition::default()
                }]),
                ..PodStatus::default()
            }),
        }
    }

    #[test]
    fn an_unbound_pod_is_left_alone() {
        let mut pod = bound_pod(None);
        pod.spec = Some(PodSpec::default());
        assert_eq!(kubelet_step(&pod, &clock(0), None), KubeletStep { status: None, wake_at_ms: None });
    }

    #[test]
    fn a_bound_pod_starts_running_and_keeps_the_scheduler_condition() {
        let pod = bound_pod(None);
        let step = kubelet_step(&pod, &clock(5_000), None);
        let status = step.status.unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(status.start_time, Some(clock(5_000).now()));
        let conds = status.conditions.unwrap();
        assert!(conds.iter().any(|c| c.type_ == "PodScheduled" && c.status == "True"));
        assert!(conds.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        assert_eq!(step.wake_at_ms, None, "without run time it runs forever");
    }

    #[test]
    fn a_running_pod_succeeds_when_its_run_time_has_elapsed() {
        let pod = bound_pod(Some("30s"));
        let rt = run_time_ms(&pod).unwrap().ok();
        let started = kubelet_step(&pod, &clock(1_000), rt);
        assert_eq!(started.wake_at_ms, Some(31_000));
        let running = Pod { status: started.status, ..pod };
        let early = kubelet_step(&running, &clock(30_999), rt);
        assert_eq!(early, KubeletStep { status: None, wake_at_ms: Some(31_000) });
        let done = kubelet_step(&running, &clock(31_000), rt);
        let status = done.status.unwrap();
        assert_eq!(status.phase.as_deref(), Some("Succeeded"));
        assert!(status.conditions.unwrap().iter().any(|c| c.type_ == "Ready" && c.status == "False"));
        assert_eq!(done.wake_at_ms, None);
    }

    #[test]
    fn a_zero_run_time_succeeds_at_once() {
        let pod = bound_pod(Some("0s"));
        let step = kubelet_step(&pod, &clock(7), Some(0));
        let status = step.status.unwrap();
        assert_eq!(status.phase.as_deref(), Some("Succeeded"));
        assert_eq!(status.start_time, Some(clock(7).now()));
    }
}
