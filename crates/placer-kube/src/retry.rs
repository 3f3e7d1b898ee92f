//! API error classification, error messages fit for logs, and retries with capped
//! exponential backoff and jitter.

use std::future::Future;
use std::time::Duration;

use placer_cluster::{ObjectRef, StoreError};

use crate::metrics::{Metrics, API_RETRIES};

/// How often and how patiently a request is retried after a transient error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total (1 = no retry).
    pub attempts: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    /// 5 attempts, 200 ms doubling up to 3.2 s (at most about 3 s of waiting in total).
    fn default() -> Self {
        RetryPolicy {
            attempts: 5,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_millis(3200),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub const fn none() -> Self {
        RetryPolicy { attempts: 1, initial_backoff: Duration::ZERO, max_backoff: Duration::ZERO }
    }

    /// The wait before retry number `retry` (0-based), without jitter.
    pub fn backoff(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX);
        self.initial_backoff.saturating_mul(factor).min(self.max_backoff)
    }

    /// [`backoff`](Self::backoff) with jitter: between half of it and all of it, so
    /// clients that failed together do not retry together.
    pub fn jittered(&self, retry: u32) -> Duration {
        jitter(self.backoff(retry))
    }
}

/// A duration between half of `d` and `d`, at random.
pub fn jitter(d: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |t| t.as_nanos()),
    );
    let r = (h.finish() >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
    d.mul_f64(0.5 + 0.5 * r)
}

/// Longest error text put in a log line or an error message.
pub const MAX_ERROR_TEXT: usize = 300;

/// An API error as a log line can carry it: whitespace collapsed, an HTML page (a proxy's
/// or a load balancer's 404) reduced to its title, and at most [`MAX_ERROR_TEXT`]
/// characters.
pub fn describe(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => {
            let message = clean_text(&s.message);
            if s.reason.is_empty() {
                format!("{} (HTTP {})", message, s.code)
            } else {
                format!("{} (HTTP {} {})", message, s.code, s.reason)
            }
        }
        other => {
            // The causes say what happened ("connection refused", "dns error", ...).
            let mut text = other.to_string();
            let mut source = std::error::Error::source(other);
            while let Some(cause) = source {
                let c = cause.to_string();
                if !text.contains(&c) {
                    text.push_str(": ");
                    text.push_str(&c);
                }
                source = cause.source();
            }
            clean_text(&text)
        }
    }
}

/// See [`describe`].
pub fn clean_text(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    if lower.contains("<html") || lower.contains("<!doctype") {
        let title = lower
            .find("<title>")
            .and_then(|start| {
                let from = start + "<title>".len();
                lower[from..].find("</title>").map(|end| text[from..from + end].trim().to_string())
            })
            .filter(|t| !t.is_empty());
        return match title {
            Some(t) => {
                format!("an HTML page ({} bytes) titled {:?}", text.len(), truncate_chars(&t, 80, t.len()))
            }
            None => format!("an HTML page ({} bytes)", text.len()),
        };
    }
    let collapsed: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    truncate_chars(&collapsed, MAX_ERROR_TEXT, text.len())
}

/// `s` cut to `max` characters; a cut text says how long the original (`len` bytes) was.
fn truncate_chars(s: &str, max: usize, len: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let cut: String = s.chars().take(max).collect();
    format!("{cut}... ({len} bytes in all)")
}

/// Which failures a request may be repeated after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Idempotency {
    /// Repeating is harmless (reads, updates guarded by resourceVersion, merge patches,
    /// deletes, creates with a fixed name): retry server errors, throttling and transport
    /// failures.
    Idempotent,
    /// Repeating could act twice (creates with `generateName`): retry only when the server
    /// says it did not process the request (429 Too Many Requests).
    NotIdempotent,
}

/// The HTTP code of an API error (None: no answer from the server).
pub(crate) fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// Whether a failed request may succeed if repeated.
pub(crate) fn is_transient(e: &kube::Error, idempotency: Idempotency) -> bool {
    match (e, idempotency) {
        (kube::Error::Api(s), _) if s.code == 429 => true,
        (_, Idempotency::NotIdempotent) => false,
        (kube::Error::Api(s), _) => matches!(s.code, 500 | 502 | 503 | 504),
        (kube::Error::HyperError(_) | kube::Error::Service(_), _) => true,
        _ => false,
    }
}

/// Maps an API error onto the store's vocabulary (the same meaning the embedded store gives).
pub(crate) fn store_error(what: &ObjectRef, e: &kube::Error) -> StoreError {
    match e {
        kube::Error::Api(s) => match s.code {
            404 => StoreError::NotFound(what.clone()),
            409 if s.reason == "AlreadyExists" => StoreError::AlreadyExists(what.clone()),
            409 => StoreError::Conflict(what.clone()),
            422 => StoreError::Invalid { what: what.clone(), message: s.message.clone() },
            403 => StoreError::Forbidden { what: what.clone(), message: s.message.clone() },
            _ => StoreError::Other(format!("{what}: {}", describe(e))),
        },
        other => StoreError::Other(format!("{what}: {}", describe(other))),
    }
}

/// Runs `op` until it succeeds, fails for good, or the attempts run out, sleeping with
/// capped exponential backoff between attempts.
pub(crate) async fn with_retry<T, F, Fut>(
    policy: RetryPolicy,
    idempotency: Idempotency,
    metrics: &Metrics,
    verb: &'static str,
    mut op: F,
) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut retry = 0;
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if retry + 1 < policy.attempts && is_transient(&e, idempotency) => {
                let wait = policy.jittered(retry);
                tracing::debug!(
                    verb,
                    error = %describe(&e),
                    retry = retry + 1,
                    wait_ms = wait.as_millis() as u64,
                    "retrying API request",
                );
                metrics.inc_counter(API_RETRIES, &[("verb", verb)], 1);
                tokio::time::sleep(wait).await;
                retry += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;
    use placer_cluster::Kind;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(Status::failure("boom", reason).with_code(code)))
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let p = RetryPolicy::default();
        let waits: Vec<u64> = (0..7).map(|i| p.backoff(i).as_millis() as u64).collect();
        assert_eq!(waits, vec![200, 400, 800, 1600, 3200, 3200, 3200]);
        assert_eq!(p.backoff(100), p.max_backoff);
    }

    #[test]
    fn jitter_stays_between_half_and_all_of_the_backoff() {
        let p = RetryPolicy::default();
        for retry in 0..6 {
            let full = p.backoff(retry);
            let j = p.jittered(retry);
            assert!(j >= full / 2 && j <= full, "{j:?} vs {full:?}");
        }
    }

    #[test]
    fn html_pages_and_long_bodies_are_not_logged_whole() {
        let page = format!(
            "<!DOCTYPE html><html><head><title>404 Not Found</title></head><body>{}</body></html>",
            "x".repeat(20_000)
        );
        let e = kube::Error::Api(Box::new(Status::failure(&page, "NotFound").with_code(404)));
        let text = describe(&e);
        assert!(text.starts_with("an HTML page ("), "{text}");
        assert!(text.contains("\"404 Not Found\""), "{text}");
        assert!(text.len() < 200, "{text}");
        let long = "word ".repeat(1000);
        let text = clean_text(&long);
        assert!(text.len() < MAX_ERROR_TEXT + 40, "{}", text.len());
        assert!(text.ends_with("(5000 bytes in all)"), "{text}");
        assert_eq!(clean_text("a\n  b"), "a b");
    }

    #[test]
    fn api_errors_map_onto_store_errors() {
        let r = ObjectRef::new(Kind::Pod, "ns", "p");
        assert_eq!(store_error(&r, &api(404, "NotFound")), StoreError::NotFound(r.clone()));
        assert_eq!(store_error(&r, &api(409, "Conflict")), StoreError::Conflict(r.clone()));
        assert_eq!(store_error(&r, &api(409, "AlreadyExists")), StoreError::AlreadyExists(r.clone()));
        assert!(matches!(store_error(&r, &api(422, "Invalid")), StoreError::Invalid { .. }));
        assert!(matches!(store_error(&r, &api(403, "Forbidden")), StoreError::Forbidden { .. }));
        assert!(matches!(store_error(&r, &api(500, "InternalError")), StoreError::Other(_)));
    }

    #[test]
    fn only_transient_errors_are_retried() {
        use Idempotency::*;
        assert!(is_transient(&api(503, "ServiceUnavailable"), Idempotent));
        assert!(is_transient(&api(429, "TooManyRequests"), NotIdempotent));
        assert!(!is_transient(&api(503, "ServiceUnavailable"), NotIdempotent));
        assert!(!is_transient(&api(409, "Conflict"), Idempotent));
        assert!(!is_transient(&api(404, "NotFound"), Idempotent));
        assert!(!is_transient(&api(422, "Invalid"), Idempotent));
    }

    #[tokio::test(start_paused = true)]
    async fn with_retry_gives_up_after_the_attempts() {
        let metrics = Metrics::default();
        let mut calls = 0;
        let result: Result<(), _> =
            with_retry(RetryPolicy::default(), Idempotency::Idempotent, &metrics, "get", || {
                calls += 1;
                async { Err(api(503, "ServiceUnavailable")) }
            })
            .await;
        assert!(result.is_err());
        assert_eq!(calls, 5);
        assert_eq!(metrics.counter_value(API_RETRIES, &[("verb", "get")]), 4);

        let mut calls = 0;
        let result: Result<(), _> =
            with_retry(RetryPolicy::default(), Idempotency::Idempotent, &metrics, "get", || {
                calls += 1;
                async { Err(api(409, "Conflict")) }
            })
            .await;
        assert!(result.is_err());
        assert_eq!(calls, 1, "a conflict is final");
    }
}
