//! A minimal CronJob controller: creates Jobs from `spec.jobTemplate` on the CronJob's
//! schedule, in store time (virtual time in the embedded cluster).
//!
//! Supported:
//! * Schedules ([`Schedule::parse`]): five-field cron (`minute hour day-of-month month
//!   day-of-week`) with `*`, numbers, ranges `a-b`, lists `a,b`, steps `*/n`, `a-b/n` and
//!   `a/n` (from `a` to the field's maximum), month names `JAN`-`DEC`, weekday names
//!   `SUN`-`SAT` (`7` is Sunday too), `?` as `*`; the macros `@yearly` (`@annually`),
//!   `@monthly`, `@weekly`, `@daily` (`@midnight`), `@hourly`; and `@every <duration>` (Go
//!   duration syntax, e.g. `@every 90s`, `@every 1h30m`). Day-of-month and day-of-week
//!   combine as in Vixie cron: when both are restricted a day matching either runs.
//!   Times are UTC; `spec.timeZone` other than UTC and `TZ=` prefixes are not supported
//!   (a Warning event says so and UTC is used / the schedule is rejected).
//! * Job names `<cronjob>-<scheduled time in Unix minutes>` (upstream's), a controller
//!   ownerReference to the CronJob, the annotation `batch.kubernetes.io/cronjob-scheduled-
//!   timestamp`, and the template's labels and annotations.
//! * Only the most recent missed schedule runs (as upstream); `startingDeadlineSeconds`
//!   skips a run that is too late; `concurrencyPolicy` `Allow` (default), `Forbid` (skip
//!   while a Job is active) and `Replace` (delete active Jobs first); `suspend`.
//! * History: finished Jobs beyond `successfulJobsHistoryLimit` (default 3) and
//!   `failedJobsHistoryLimit` (default 1) are deleted, oldest first (their pods, Workloads
//!   and PodGroups go with them through garbage collection).
//! * Status: `active`, `lastScheduleTime`, `lastSuccessfulTime`.
//!
//! The controller wakes at the next schedule time ([`Controller::next_wakeup_ms`]).

use std::collections::{BTreeMap, BTreeSet};

use placer_api::k8s::api::batch::v1::{CronJob, CronJobStatus, Job};
use placer_api::k8s::api::core::v1::ObjectReference;
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use placer_cluster::{ClusterStore, Kind, Object, ObjectRef, StoreError, WatchEventKind};
use rustc_hash::FxHashMap;

use crate::job::gang::controller_of;
use crate::job::kubelet::{parse_duration_ms, Clock};
use crate::job::Timers;
use crate::{Controller, ControllerError};

/// Reporter of the controller's events.
pub const REPORTER: &str = "cronjob-controller";
/// Annotation with the scheduled time of a Job made by a CronJob (RFC 3339).
pub const SCHEDULED_TIMESTAMP_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// `spec.successfulJobsHistoryLimit` when unset.
pub const DEFAULT_SUCCESSFUL_HISTORY: i32 = 3;
/// `spec.failedJobsHistoryLimit` when unset.
pub const DEFAULT_FAILED_HISTORY: i32 = 1;
/// How far ahead a cron schedule is searched for its next time.
const SEARCH_LIMIT_DAYS: i64 = 366 * 5;
/// Upstream gives up (with an event) after this many missed schedules.
const TOO_MANY_MISSED: usize = 100;

/// Why syncing one CronJob failed (it is retried after [`crate::job::RETRY_MS`]).
#[derive(Debug, thiserror::Error)]
pub enum CronJobError {
    #[error("{action}: {source}")]
    Store {
        action: String,
        #[source]
        source: StoreError,
    },
    #[error("CronJob {0} has no uid yet (not created through the store?)")]
    MissingUid(String),
    #[error("schedule time {0} (Unix seconds) is out of range")]
    TimeOutOfRange(i64),
}

/// A schedule that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unparseable schedule {schedule:?}: {reason}")]
pub struct ScheduleError {
    pub schedule: String,
    pub reason: String,
}

/// A parsed CronJob schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedule {
    /// `@every <duration>`: every interval after the previous time (milliseconds, rounded
    /// down to whole seconds as robfig/cron does, at least one second).
    Every(u64),
    /// A five-field cron expression.
    Cron(CronFields),
}

/// The sets of a cron expression, as bit masks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronFields {
    minutes: u64,
    hours: u64,
    days_of_month: u64,
    months: u64,
    days_of_week: u64,
    /// Day-of-month was `*` / `?` (unrestricted).
    dom_star: bool,
    /// Day-of-week was `*` / `?` (unrestricted).
    dow_star: bool,
}

const MONTH_NAMES: [&str; 12] =
    ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const DAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

impl Schedule {
    /// Parses a CronJob `spec.schedule` (see the module documentation for the syntax).
    pub fn parse(text: &str) -> Result<Schedule, ScheduleError> {
        let err = |reason: String| ScheduleError { schedule: text.to_string(), reason };
        let s = text.trim();
        if s.starts_with("TZ=") || s.starts_with("CRON_TZ=") {
            return Err(err("time zones in the schedule are not supported; schedules run in UTC".into()));
        }
        if let Some(rest) = s.strip_prefix("@every") {
            let ms = parse_duration_ms(rest.trim()).map_err(|e| err(e.to_string()))?;
            let ms = ms - ms % 1000;
            if ms == 0 {
                return Err(err("@every needs a duration of at least 1s".into()));
            }
            return Ok(Schedule::Every(ms));
        }
        let expanded = match s {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other if other.starts_with('@') => return Err(err(format!("unknown descriptor {other}"))),
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let [minute, hour, dom, month, dow] = fields.as_slice() else {
            return Err(err(format!(
                "expected 5 fields (minute hour day-of-month month day-of-week), got {}",
                fields.len()
            )));
        };
        let (minutes, _) = parse_field(minute, 0, 59, &[]).map_err(|r| err(format!("minute: {r}")))?;
        let (hours, _) = parse_field(hour, 0, 23, &[]).map_err(|r| err(format!("hour: {r}")))?;
        let (days_of_month, dom_star) =
            parse_field(dom, 1, 31, &[]).map_err(|r| err(format!("day of month: {r}")))?;
        let (months, _) = parse_field(month, 1, 12, &MONTH_NAMES).map_err(|r| err(format!("month: {r}")))?;
        let (mut days_of_week, dow_star) =
            parse_field(dow, 0, 7, &DAY_NAMES).map_err(|r| err(format!("day of week: {r}")))?;
        if days_of_week & (1 << 7) != 0 {
            days_of_week = (days_of_week & !(1 << 7)) | 1;
        }
        Ok(Schedule::Cron(CronFields {
            minutes,
            hours,
            days_of_month,
            months,
            days_of_week,
            dom_star,
            dow_star,
        }))
    }

    /// The first schedule time strictly after `after` (Unix seconds), if any within five
    /// years.
    pub fn next_after(&self, after: i64) -> Option<i64> {
        match self {
            Schedule::Every(ms) => {
                let secs = i64::try_from(ms / 1000).ok()?;
                after.checked_add(secs)
            }
            Schedule::Cron(f) => f.next_after(after),
        }
    }
}

/// Parses one cron field into a bit mask of `min..=max`; the flag says it was `*` / `?`.
fn parse_field(field: &str, min: u32, max: u32, names: &[&str]) -> Result<(u64, bool), String> {
    let value = |t: &str| -> Result<u32, String> {
        let upper = t.to_ascii_uppercase();
        if let Some(i) = names.iter().position(|n| *n == upper) {
            return Ok(u32::try_from(i).unwrap_or(0) + min);
        }
        let v: u32 = t.parse().map_err(|_| format!("{t:?} is not a number"))?;
        if v < min || v > max {
            return Err(format!("{v} is outside {min}-{max}"));
        }
        Ok(v)
    };
    let mut mask = 0u64;
    let mut star = false;
    for part in field.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s.parse().map_err(|_| format!("step {s:?} is not a number"))?;
                if step == 0 {
                    return Err("step must be at least 1".to_string());
                }
                (r, Some(step))
            }
            None => (part, None),
        };
        let (first, last) = if range == "*" || range == "?" {
            if step.is_none_or(|s| s == 1) {
                star = true;
            }
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a)?, value(b)?)
        } else {
            let a = value(range)?;
            (a, if step.is_some() { max } else { a })
        };
        if first > last {
            return Err(format!("range {first}-{last} is empty"));
        }
        let step = step.unwrap_or(1);
        let mut v = first;
        while v <= last {
            mask |= 1 << v;
            v += step;
        }
    }
    Ok((mask, star))
}

impl CronFields {
    fn day_matches(&self, day: u32, weekday: u32) -> bool {
        let dom = self.days_of_month & (1 << day) != 0;
        let dow = self.days_of_week & (1 << weekday) != 0;
        if self.dom_star || self.dow_star {
            dom && dow
        } else {
            dom || dow
        }
    }

    fn next_after(&self, after: i64) -> Option<i64> {
        // Start at the next whole minute.
        let mut t = after.div_euclid(60).checked_add(1)?.checked_mul(60)?;
        let limit = t.checked_add(SEARCH_LIMIT_DAYS * 86_400)?;
        while t < limit {
            let days = t.div_euclid(86_400);
            let (_, month, day) = civil_from_days(days);
            let weekday = u32::try_from((days + 4).rem_euclid(7)).unwrap_or(0);
            let secs_of_day = t.rem_euclid(86_400);
            if self.months & (1 << month) == 0 || !self.day_matches(day, weekday) {
                t = (days + 1) * 86_400;
                continue;
            }
            let hour = u32::try_from(secs_of_day / 3600).unwrap_or(0);
            if self.hours & (1 << hour) == 0 {
                t = days * 86_400 + (i64::from(hour) + 1) * 3600;
                continue;
            }
            let minute = u32::try_from((secs_of_day % 3600) / 60).unwrap_or(0);
            if self.minutes & (1 << minute) == 0 {
                t += 60;
                continue;
            }
            return Some(t);
        }
        None
    }
}

/// (year, month 1-12, day 1-31) of a day count since 1970-01-01 (proleptic Gregorian).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, u32::try_from(month).unwrap_or(1), u32::try_from(day).unwrap_or(1))
}

/// Creates Jobs from CronJobs on schedule. See the module documentation.
#[derive(Default)]
pub struct CronJobController {
    seen_rv: u64,
    initialized: bool,
    cronjobs: BTreeMap<ObjectRef, CronJob>,
    /// Jobs controlled by a CronJob, by the CronJob's UID.
    jobs: FxHashMap<String, BTreeMap<String, Job>>,
    dirty: BTreeSet<ObjectRef>,
    timers: Timers,
    /// Events recorded once, by (CronJob UID, kind of event) -> the last occasion (a
    /// scheduled time, or empty): one entry per kind, however long the CronJob runs.
    warned: BTreeMap<(String, String), String>,
}

/// Admission check of CronJobs: the schedule must parse (kube-apiserver's
/// `ValidateCronJobSpec` does the same with its cron parser).
#[derive(Debug, Clone, Copy, Default)]
pub struct CronJobValidation;

impl placer_cluster::Admission for CronJobValidation {
    fn admit(&self, _: &dyn ClusterStore, _: Option<&Object>, new: &Object) -> Result<(), String> {
        match new {
            Object::CronJob(c) => Schedule::parse(&c.spec.schedule)
                .map(|_| ())
                .map_err(|e| format!("spec.schedule: Invalid value: {:?}: {}", c.spec.schedule, e.reason)),
            _ => Ok(()),
        }
    }
}

fn cronjob_owner(job: &Job) -> Option<(&str, &str)> {
    controller_of(&job.metadata).filter(|r| r.kind == "CronJob").map(|r| (r.uid.as_str(), r.name.as_str()))
}

fn job_finished(job: &Job) -> Option<&'static str> {
    let conds = job.status.as_ref().and_then(|s| s.conditions.as_ref())?;
    conds.iter().filter(|c| c.status == "True").find_map(|c| match c.type_.as_str() {
        "Complete" => Some("Complete"),
        "Failed" => Some("Failed"),
        _ => None,
    })
}

impl CronJobController {
    /// A controller with an empty cache (filled on the first reconcile).
    pub fn new() -> Self {
        Self::default()
    }

    fn upsert_job(&mut self, job: Job) {
        let name = job.metadata.name.clone().unwrap_or_default();
        // Drop any previous entry (the owner never changes in practice, but be exact).
        for jobs in self.jobs.values_mut() {
            jobs.remove(&name);
        }
        self.jobs.retain(|_, jobs| !jobs.is_empty());
        if let Some((uid, _)) = cronjob_owner(&job) {
            self.jobs.entry(uid.to_string()).or_default().insert(name, job);
        }
    }

    fn apply(&mut self, kind: WatchEventKind, obj: Object) {
        let r = obj.object_ref();
        match obj {
            Object::CronJob(cj) => {
                self.dirty.insert(r.clone());
                if kind == WatchEventKind::Deleted {
                    if let Some(uid) = cj.metadata.uid.as_deref() {
                        self.jobs.remove(uid);
                        self.warned.retain(|(owner, _), _| owner != uid);
                    }
                    self.cronjobs.remove(&r);
                    self.timers.set(&r, None);
                } else {
                    self.cronjobs.insert(r, *cj);
                }
            }
            Object::Job(job) => {
                let Some((uid, name)) = cronjob_owner(&job).map(|(u, n)| (u.to_string(), n.to_string()))
                else {
                    return;
                };
                self.dirty.insert(ObjectRef::new(Kind::CronJob, r.namespace.clone(), name));
                if kind == WatchEventKind::Deleted {
                    if let Some(jobs) = self.jobs.get_mut(&uid) {
                        jobs.remove(&r.name);
                    }
                } else {
                    self.upsert_job(*job);
                }
            }
            _ => {}
        }
    }

    fn warn_once(
        &mut self,
        store: &mut dyn ClusterStore,
        cj: &CronJob,
        key: &str,
        reason: &str,
        note: String,
    ) {
        self.record_once(store, cj, key, "Warning", reason, note);
    }

    /// Records an event once per (CronJob, key).
    fn record_once(
        &mut self,
        store: &mut dyn ClusterStore,
        cj: &CronJob,
        key: &str,
        type_: &str,
        reason: &str,
        note: String,
    ) {
        let uid = cj.metadata.uid.clone().unwrap_or_default();
        let (kind, occasion) = key.split_once(':').unwrap_or((key, ""));
        if self.warned.insert((uid, kind.to_string()), occasion.to_string()).as_deref() != Some(occasion) {
            record(store, cj, type_, reason, note);
        }
    }

    /// Syncs one CronJob. Returns whether it wrote anything.
    fn sync(
        &mut self,
        store: &mut dyn ClusterStore,
        r: &ObjectRef,
        clock: &Clock,
    ) -> Result<bool, CronJobError> {
        let Some(cj) = self.cronjobs.get(r).cloned() else { return Ok(false) };
        let uid = cj.metadata.uid.clone().unwrap_or_default();
        let spec = cj.spec.clone();
        let mut wrote = false;
        let mut jobs: Vec<Job> =
            self.jobs.get(&uid).map(|m| m.values().cloned().collect()).unwrap_or_default();

        if spec.time_zone.as_deref().is_some_and(|tz| !matches!(tz, "UTC" | "Etc/UTC")) {
            self.warn_once(
                store,
                &cj,
                "time-zone",
                "UnsupportedTimeZone",
                format!(
                    "timeZone {:?} is not supported; the schedule runs in UTC",
                    spec.time_zone.as_deref().unwrap_or("")
                ),
            );
        }
        let schedule = match Schedule::parse(&spec.schedule) {
            Ok(s) => Some(s),
            Err(e) => {
                self.warn_once(store, &cj, "schedule", "UnparseableSchedule", e.to_string());
                None
            }
        };

        // History: delete the oldest finished Jobs beyond the limits.
        for (kind, limit) in [
            ("Complete", spec.successful_jobs_history_limit.unwrap_or(DEFAULT_SUCCESSFUL_HISTORY)),
            ("Failed", spec.failed_jobs_history_limit.unwrap_or(DEFAULT_FAILED_HISTORY)),
        ] {
            let mut finished: Vec<&Job> = jobs.iter().filter(|j| job_finished(j) == Some(kind)).collect();
            finished.sort_by_key(|j| (job_sort_time(j), j.metadata.name.clone()));
            let excess = finished.len().saturating_sub(usize::try_from(limit.max(0)).unwrap_or(0));
            let doomed: Vec<String> =
                finished.iter().take(excess).filter_map(|j| j.metadata.name.clone()).collect();
            for name in doomed {
                delete_job(store, &cj, &r.namespace, &name)?;
                jobs.retain(|j| j.metadata.name.as_deref() != Some(name.as_str()));
                wrote = true;
            }
        }

        let mut status = cj.status.clone().unwrap_or_default();
        let mut active: Vec<&Job> = jobs.iter().filter(|j| job_finished(j).is_none()).collect();
        let mut created: Option<Job> = None;
        let mut wake = None;

        if let Some(schedule) = schedule.as_ref() {
            let earliest = status
                .last_schedule_time
                .as_ref()
                .or(cj.metadata.creation_timestamp.as_ref())
                .map(|t| t.0.as_second())
                .unwrap_or_else(|| clock.unix_seconds(clock.now_ms));
            let now = clock.unix_seconds(clock.now_ms);
            // The most recent schedule time in (earliest, now].
            let mut missed = 0usize;
            let mut most_recent = None;
            let mut t = earliest;
            while let Some(next) = schedule.next_after(t) {
                if next > now {
                    wake = Some(clock.ms_of_unix_seconds(next));
                    break;
                }
                most_recent = Some(next);
                missed += 1;
                t = next;
                if missed > 100_000 {
                    break;
                }
            }
            if missed > TOO_MANY_MISSED {
                self.warn_once(
                    store,
                    &cj,
                    "too-many-missed",
                    "TooManyMissedTimes",
                    format!("too many missed start times: {missed}; only the most recent runs"),
                );
            }
            let too_late = |at: i64| spec.starting_deadline_seconds.is_some_and(|d| now - at > d);
            let suspended = spec.suspend == Some(true);
            if let Some(at) = most_recent.filter(|at| !suspended && !too_late(*at)) {
                let policy = spec.concurrency_policy.as_deref().unwrap_or("Allow");
                let run = match policy {
                    "Forbid" if !active.is_empty() => false,
                    "Replace" => {
                        for j in &active {
                            if let Some(name) = j.metadata.name.as_deref() {
                                delete_job(store, &cj, &r.namespace, name)?;
                                wrote = true;
                            }
                        }
                        active.clear();
                        true
                    }
                    _ => true,
                };
                if run {
                    let job = build_job(&cj, at)?;
                    let name = job.metadata.name.clone().unwrap_or_default();
                    match store.create(Object::Job(Box::new(job))) {
                        Ok(obj) => {
                            wrote = true;
                            record(store, &cj, "Normal", "SuccessfulCreate", format!("Created job {name}"));
                            if let Object::Job(j) = obj {
                                created = Some(*j);
                            }
                        }
                        Err(StoreError::AlreadyExists(_)) => {}
                        Err(e) => {
                            record(store, &cj, "Warning", "FailedCreate", format!("Error creating job: {e}"));
                            return Err(CronJobError::Store {
                                action: format!("creating Job {name}"),
                                source: e,
                            });
                        }
                    }
                    status.last_schedule_time = Some(timestamp(at)?);
                } else if spec.concurrency_policy.as_deref() == Some("Forbid") {
                    // Retry as soon as the running Job finishes (a Job event wakes us).
                    self.record_once(
                        store,
                        &cj,
                        &format!("forbid:{at}"),
                        "Normal",
                        "JobAlreadyActive",
                        "Not starting job because prior execution is running and concurrency policy is Forbid".to_string(),
                    );
                }
            } else if let Some(at) = most_recent.filter(|at| too_late(*at)) {
                self.warn_once(
                    store,
                    &cj,
                    &format!("missed:{at}"),
                    "MissSchedule",
                    format!(
                        "Missed scheduled time to start a job: {}",
                        placer_api::k8s::jiff::Timestamp::from_second(at)
                            .map(|t| t.to_string())
                            .unwrap_or_default()
                    ),
                );
            }
        }

        // Status: active Jobs (including the one just created), last success.
        let mut active_refs: Vec<ObjectReference> = active.iter().map(|j| job_ref(j)).collect();
        if let Some(j) = created {
            active_refs.push(job_ref(&j));
            self.upsert_job(j);
        }
        active_refs.sort_by(|a, b| a.name.cmp(&b.name));
        let last_success = jobs
            .iter()
            .filter(|j| job_finished(j) == Some("Complete"))
            .filter_map(|j| j.status.as_ref().and_then(|s| s.completion_time.clone()))
            .max_by_key(|t| t.0)
            .or(status.last_successful_time.clone());
        let new_status = CronJobStatus {
            active: (!active_refs.is_empty()).then_some(active_refs),
            last_schedule_time: status.last_schedule_time.clone(),
            last_successful_time: last_success,
        };
        if cj.status.clone().unwrap_or_default() != new_status {
            let mut updated = cj.clone();
            updated.status = Some(new_status);
            updated.metadata.resource_version = None;
            match store.update_status(Object::CronJob(Box::new(updated))) {
                Ok(Object::CronJob(c)) => {
                    self.cronjobs.insert(r.clone(), *c);
                    wrote = true;
                }
                Ok(_) | Err(StoreError::NotFound(_)) => {}
                Err(e) => {
                    return Err(CronJobError::Store {
                        action: format!("updating status of CronJob {}", r.name),
                        source: e,
                    })
                }
            }
        }
        self.timers.set(r, wake);
        Ok(wrote)
    }
}

fn job_sort_time(job: &Job) -> Option<i64> {
    let status = job.status.as_ref();
    status
        .and_then(|s| s.completion_time.as_ref().or(s.start_time.as_ref()))
        .or(job.metadata.creation_timestamp.as_ref())
        .map(|t| t.0.as_millisecond())
}

fn job_ref(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".to_string()),
        kind: Some("Job".to_string()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// The Job a CronJob runs at `at` (Unix seconds): name `<cronjob>-<at in minutes>`, the
/// template's labels, annotations and spec, the scheduled-timestamp annotation, and a
/// controller ownerReference to the CronJob.
pub fn build_job(cj: &CronJob, at: i64) -> Result<Job, CronJobError> {
    let name = cj.metadata.name.clone().unwrap_or_default();
    let uid = cj
        .metadata
        .uid
        .clone()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| CronJobError::MissingUid(name.clone()))?;
    let template = cj.spec.job_template.clone();
    let meta = template.metadata.unwrap_or_default();
    let mut annotations = meta.annotations.unwrap_or_default();
    let scheduled = timestamp(at)?.0;
    annotations.insert(SCHEDULED_TIMESTAMP_ANNOTATION.to_string(), scheduled.to_string());
    Ok(Job {
        metadata: ObjectMeta {
            name: Some(format!("{name}-{}", at.div_euclid(60))),
            namespace: cj.metadata.namespace.clone(),
            labels: meta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "batch/v1".to_string(),
                kind: "CronJob".to_string(),
                name,
                uid,
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: template.spec,
        status: None,
    })
}

/// The timestamp of a Unix second.
fn timestamp(secs: i64) -> Result<Time, CronJobError> {
    placer_api::k8s::jiff::Timestamp::from_second(secs)
        .map(Time)
        .map_err(|_| CronJobError::TimeOutOfRange(secs))
}

fn delete_job(
    store: &mut dyn ClusterStore,
    cj: &CronJob,
    namespace: &str,
    name: &str,
) -> Result<(), CronJobError> {
    match store.delete(&ObjectRef::new(Kind::Job, namespace, name)) {
        Ok(()) => {
            record(store, cj, "Normal", "SuccessfulDelete", format!("Deleted job {name}"));
            Ok(())
        }
        Err(StoreError::NotFound(_)) => Ok(()),
        Err(e) => Err(CronJobError::Store { action: format!("deleting Job {namespace}/{name}"), source: e }),
    }
}

fn record(store: &mut dyn ClusterStore, cj: &CronJob, type_: &str, reason: &str, note: String) {
    let regarding = || Object::CronJob(Box::new(cj.clone())).object_ref();
    placer_cluster::record_event(store, regarding, type_, reason, note, REPORTER);
}

impl Controller for CronJobController {
    fn name(&self) -> &'static str {
        "cronjob-controller"
    }

    fn reconcile(&mut self, store: &mut dyn ClusterStore) -> Result<bool, ControllerError> {
        let clock = Clock::new(store.now_ms(), &store.now());
        if self.initialized {
            for event in store.watch_kinds_since(self.seen_rv, &[Kind::CronJob, Kind::Job]) {
                self.apply(event.kind, event.object);
            }
            // Read through the store's version, not just through the last CronJob or Job
            // change: otherwise, with no CronJobs, every pass reads the whole log since
            // start again, and once the log is compacted past that point the store
            // rebuilds it from a copy of every object (in `placer cluster`, under the lock
            // every API request takes, after every write).
            self.seen_rv = store.resource_version();
        } else {
            self.seen_rv = store.resource_version();
            for obj in store.list(Kind::CronJob).into_iter().chain(store.list(Kind::Job)) {
                self.apply(WatchEventKind::Added, obj);
            }
            self.initialized = true;
        }
        self.dirty.extend(self.timers.take_due(clock.now_ms));
        let mut wrote = false;
        let mut errors = Vec::new();
        for r in std::mem::take(&mut self.dirty) {
            match self.sync(store, &r, &clock) {
                Ok(w) => wrote |= w,
                Err(e) => {
                    tracing::warn!(cronjob = %r, error = %e, "cronjob sync failed; retrying");
                    errors.push(format!("{r}: {e}"));
                    self.timers.set(&r, Some(clock.now_ms.saturating_add(crate::job::RETRY_MS)));
                }
            }
        }
        if errors.is_empty() {
            Ok(wrote)
        } else {
            Err(ControllerError { controller: "cronjob-controller", message: errors.join("; ") })
        }
    }

    fn next_wakeup_ms(&self) -> Option<u64> {
        self.timers.earliest()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-01-01T00:00:00Z (a Thursday).
    const T0: i64 = 1_767_225_600;

    fn next(s: &str, after: i64) -> i64 {
        Schedule::parse(s).unwrap().next_after(after).unwrap()
    }

    /// Changes of other kinds move the controller's read position too, so a log
    /// compacted after them is never read from before its floor.
    #[test]
    fn reads_through_changes_of_other_kinds() {
        use placer_cluster::embedded::EmbeddedCluster;
        let mut store = EmbeddedCluster::new();
        let mut c = CronJobController::new();
        c.reconcile(&mut store).unwrap();
        for name in ["a", "b", "c"] {
            let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "x"}]}});
            store.create(Object::from_json(Kind::Pod, pod).unwrap()).unwrap();
        }
        c.reconcile(&mut store).unwrap();
        assert_eq!(c.seen_rv, store.resource_version());
        store.compact_log(store.resource_version());
        assert!(store.log_since(c.seen_rv).is_ok(), "the next pass reads the log, not a copy of the store");
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(T0 / 86_400), (2026, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn every_minute_and_steps() {
        assert_eq!(next("* * * * *", T0), T0 + 60);
        assert_eq!(next("* * * * *", T0 + 30), T0 + 60);
        assert_eq!(next("*/5 * * * *", T0), T0 + 300);
        assert_eq!(next("*/5 * * * *", T0 + 299), T0 + 300);
        assert_eq!(next("7/20 * * * *", T0), T0 + 7 * 60, "a/n starts at a");
        assert_eq!(next("10-12 * * * *", T0 + 11 * 60), T0 + 12 * 60);
        assert_eq!(next("0,30 * * * *", T0 + 60), T0 + 30 * 60);
    }

    #[test]
    fn hours_days_and_months() {
        assert_eq!(next("@hourly", T0), T0 + 3600);
        assert_eq!(next("@daily", T0), T0 + 86_400);
        assert_eq!(next("30 2 * * *", T0), T0 + 2 * 3600 + 30 * 60);
        assert_eq!(next("0 0 1 FEB *", T0), T0 + 31 * 86_400);
        assert_eq!(next("@yearly", T0), 1_798_761_600, "2027-01-01");
    }

    #[test]
    fn weekdays_and_the_vixie_day_rule() {
        // 2026-01-01 is a Thursday; the next Monday is 2026-01-05.
        assert_eq!(next("0 0 * * MON", T0), T0 + 4 * 86_400);
        assert_eq!(next("0 0 * * 1", T0), T0 + 4 * 86_400);
        // Sunday as 0 and as 7.
        assert_eq!(next("0 0 * * 7", T0), T0 + 3 * 86_400);
        assert_eq!(next("0 0 * * 0", T0), T0 + 3 * 86_400);
        // Both restricted: either matches (the 3rd, a Saturday, or the next Monday).
        assert_eq!(next("0 0 3 * MON", T0), T0 + 2 * 86_400);
    }

    #[test]
    fn every_duration() {
        assert_eq!(Schedule::parse("@every 90s"), Ok(Schedule::Every(90_000)));
        assert_eq!(next("@every 1h30m", T0), T0 + 5400);
        assert!(Schedule::parse("@every 500ms").is_err(), "below one second");
    }

    #[test]
    fn bad_schedules_are_errors_with_a_reason() {
        for bad in [
            "",
            "* * * *",
            "61 * * * *",
            "*/0 * * * *",
            "@fortnightly",
            "TZ=UTC * * * * *",
            "5-1 * * * *",
            "x * * * *",
        ] {
            let e = Schedule::parse(bad).unwrap_err();
            assert!(!e.reason.is_empty(), "{bad:?}");
        }
    }

    use crate::job::JobController;
    use placer_api::gates::FeatureGates;
    use placer_api::k8s::api::batch::v1::{CronJobSpec, JobSpec, JobTemplateSpec};
    use placer_api::k8s::api::core::v1::{Container, Node, PodSpec, PodTemplateSpec};
    use placer_cluster::embedded::{EmbeddedCluster, EPOCH_UNIX_MS};

    struct World {
        store: EmbeddedCluster,
        cron: CronJobController,
        jobs: JobController,
    }

    impl World {
        fn new() -> World {
            let mut store = EmbeddedCluster::new();
            store
                .create(Object::node(Node {
                    metadata: ObjectMeta { name: Some("n1".into()), ..ObjectMeta::default() },
                    ..Node::default()
                }))
                .unwrap();
            World { store, cron: CronJobController::new(), jobs: JobController::new(FeatureGates::default()) }
        }

        fn settle(&mut self) {
            for _ in 0..100 {
                let mut wrote = self.cron.reconcile(&mut self.store).unwrap();
                wrote |= self.jobs.reconcile(&mut self.store).unwrap();
                for obj in self.store.list(Kind::Pod) {
                    let Object::Pod(p) = obj else { continue };
                    if p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none() {
                        let (ns, name) =
                            (p.metadata.namespace.clone().unwrap(), p.metadata.name.clone().unwrap());
                        self.store.bind(&ns, &name, "", "n1").unwrap();
                        wrote = true;
                    }
                }
                if !wrote {
                    return;
                }
            }
            panic!("did not settle");
        }

        fn advance_to(&mut self, target: u64) {
            self.settle();
            loop {
                let next =
                    [self.cron.next_wakeup_ms(), self.jobs.next_wakeup_ms()].into_iter().flatten().min();
                match next {
                    Some(at) if at <= target => {
                        self.store.set_now_ms(at.max(self.store.now_ms()));
                        self.settle();
                    }
                    _ => break,
                }
            }
            self.store.set_now_ms(target);
            self.settle();
        }

        fn job_names(&self) -> Vec<String> {
            self.store.list(Kind::Job).into_iter().filter_map(|j| j.metadata().name.clone()).collect()
        }

        fn cronjob(&self) -> CronJob {
            match self.store.get(&ObjectRef::new(Kind::CronJob, "default", "nightly")) {
                Some(Object::CronJob(c)) => *c,
                other => panic!("{other:?}"),
            }
        }
    }

    fn cronjob(schedule: &str, run_time: &str) -> CronJob {
        CronJob {
            metadata: ObjectMeta {
                name: Some("nightly".into()),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            },
            spec: CronJobSpec {
                schedule: schedule.into(),
                job_template: JobTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some([("team".to_string(), "ml".to_string())].into()),
                        ..ObjectMeta::default()
                    }),
                    spec: Some(JobSpec {
                        template: PodTemplateSpec {
                            metadata: Some(ObjectMeta {
                                annotations: Some(
                                    [(
                                        placer_api::annotations::SIM_RUN_TIME.to_string(),
                                        run_time.to_string(),
                                    )]
                                    .into(),
                                ),
                                ..ObjectMeta::default()
                            }),
                            spec: Some(PodSpec {
                                containers: vec![Container { name: "c".into(), ..Container::default() }],
                                ..PodSpec::default()
                            }),
                        },
                        ..JobSpec::default()
                    }),
                },
                ..CronJobSpec::default()
            },
            status: None,
        }
    }

    /// Unix minutes of store time `ms`.
    fn minutes(ms: u64) -> i64 {
        (EPOCH_UNIX_MS + i64::try_from(ms).unwrap()) / 60_000
    }

    #[test]
    fn a_cronjob_creates_named_owned_jobs_on_schedule() {
        let mut w = World::new();
        let cj = w.store.create(Object::CronJob(Box::new(cronjob("*/1 * * * *", "30s")))).unwrap();
        w.settle();
        assert!(w.job_names().is_empty(), "nothing before the first minute");
        assert_eq!(w.cron.next_wakeup_ms(), Some(60_000));
        w.advance_to(60_000);
        let name = format!("nightly-{}", minutes(60_000));
        assert_eq!(w.job_names(), std::slice::from_ref(&name));
        let Some(Object::Job(job)) = w.store.get(&ObjectRef::new(Kind::Job, "default", &name)) else {
            panic!()
        };
        let owner = &job.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("CronJob", "nightly", Some(true))
        );
        assert_eq!(owner.uid, cj.metadata().uid.clone().unwrap());
        assert_eq!(job.metadata.labels.as_ref().unwrap()["team"], "ml");
        assert_eq!(
            job.metadata.annotations.as_ref().unwrap()[SCHEDULED_TIMESTAMP_ANNOTATION],
            "2026-01-01T00:01:00Z"
        );
        let status = w.cronjob().status.unwrap();
        assert_eq!(status.active.map(|a| a.len()), Some(1));
        assert_eq!(
            status.last_schedule_time.map(|t| t.0.to_string()).as_deref(),
            Some("2026-01-01T00:01:00Z")
        );
    }

    #[test]
    fn only_the_last_successful_jobs_are_kept() {
        let mut w = World::new();
        w.store.create(Object::CronJob(Box::new(cronjob("@every 1m", "30s")))).unwrap();
        w.advance_to(6 * 60_000 + 45_000);
        // Jobs at minutes 1..=6 all completed; the default history keeps 3.
        let expected: Vec<String> = (4..=6).map(|m| format!("nightly-{}", minutes(m * 60_000))).collect();
        assert_eq!(w.job_names(), expected);
        let status = w.cronjob().status.unwrap();
        assert!(status.active.is_none());
        assert_eq!(
            status.last_successful_time.map(|t| t.0.to_string()).as_deref(),
            Some("2026-01-01T00:06:30Z")
        );
    }

    #[test]
    fn forbid_skips_a_run_while_the_previous_job_is_active() {
        let mut w = World::new();
        let mut cj = cronjob("@every 1m", "90s");
        cj.spec.concurrency_policy = Some("Forbid".into());
        w.store.create(Object::CronJob(Box::new(cj))).unwrap();
        w.advance_to(2 * 60_000 + 1);
        assert_eq!(w.job_names(), [format!("nightly-{}", minutes(60_000))], "the 2nd run is skipped");
        w.advance_to(3 * 60_000);
        assert_eq!(w.job_names().len(), 2, "runs again once the first Job finished");
    }

    #[test]
    fn a_suspended_cronjob_creates_nothing() {
        let mut w = World::new();
        let mut cj = cronjob("@every 1m", "1s");
        cj.spec.suspend = Some(true);
        w.store.create(Object::CronJob(Box::new(cj))).unwrap();
        w.advance_to(5 * 60_000);
        assert!(w.job_names().is_empty());
    }

    #[test]
    fn an_unparseable_schedule_is_reported_once() {
        let mut w = World::new();
        w.store.create(Object::CronJob(Box::new(cronjob("every day", "1s")))).unwrap();
        w.advance_to(5 * 60_000);
        let events: Vec<_> =
            w.store.events().into_iter().filter(|e| e.reason == "UnparseableSchedule").collect();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].type_, "Warning");
    }

    /// Kueue has no CronJob webhook: the CronJob is accepted, and each Job it creates is
    /// refused by Kueue's Job webhook (here `TopologyAnnotationValidation`), which the
    /// controller reports as upstream's `FailedCreate` event on the CronJob.
    #[test]
    fn jobs_refused_by_the_topology_webhook_are_failed_creates_on_the_cronjob() {
        use placer_api::annotations::{
            PODSET_REQUIRED_TOPOLOGY, PODSET_SLICE_REQUIRED_TOPOLOGY, PODSET_SLICE_SIZE,
        };
        let mut w = World::new();
        w.store.add_admission(Box::new(crate::job::tas_validation::TopologyAnnotationValidation::new(
            FeatureGates::default(),
        )));
        let mut cj = cronjob("*/1 * * * *", "30s");
        let template = cj.spec.job_template.spec.as_mut().unwrap();
        template.parallelism = Some(4);
        let ann = template.template.metadata.as_mut().unwrap().annotations.as_mut().unwrap();
        for (k, v) in [
            (PODSET_REQUIRED_TOPOLOGY, "rack"),
            (PODSET_SLICE_REQUIRED_TOPOLOGY, "rack"),
            (PODSET_SLICE_SIZE, "0"),
        ] {
            ann.insert(k.to_string(), v.to_string());
        }
        w.store.create(Object::CronJob(Box::new(cj))).expect("Kueue does not check a CronJob's template");
        w.store.set_now_ms(60_000);
        let err = w.cron.reconcile(&mut w.store).unwrap_err();
        assert!(err.message.contains("kueue.x-k8s.io/podset-slice-size"), "{}", err.message);
        assert!(w.job_names().is_empty());
        let events: Vec<_> = w.store.events().into_iter().filter(|e| e.reason == "FailedCreate").collect();
        assert_eq!(events.len(), 1);
        assert_eq!((events[0].type_.as_str(), events[0].regarding.kind), ("Warning", Kind::CronJob));
        assert_eq!(events[0].regarding.name, "nightly");
        assert!(
            events[0].note.starts_with("Error creating job: ")
                && events[0].note.contains("admission webhook \"vjob.kb.io\" denied the request")
                && events[0].note.contains(
                    "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Invalid value: \"0\""
                ),
            "{}",
            events[0].note
        );
    }

    #[test]
    fn feb_30_never_comes() {
        assert_eq!(Schedule::parse("0 0 30 2 *").unwrap().next_after(T0), None);
    }
}
