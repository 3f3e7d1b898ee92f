//! Client-side rate limiting of API requests, as client-go's token bucket
//! (`clientConnection.qps` sustained, `burst` at once): a tower layer on the kube client,
//! so every request (reads, watches, writes) waits for a token before it is sent.
//!
//! kube wraps the client's service in a buffer whose worker calls `poll_ready` before
//! every request: waiting for the token there holds the requests in order without
//! spawning anything.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

/// A token bucket: `qps` tokens a second, at most `burst` saved up.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(qps: f64, burst: u32) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket { qps: qps.max(f64::MIN_POSITIVE), burst, state: Mutex::new((burst, Instant::now())) }
    }

    /// Takes a token, or tells how long until one is available.
    pub fn try_take(&self) -> Result<(), Duration> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let refill = now.saturating_duration_since(s.1).as_secs_f64() * self.qps;
        s.0 = (s.0 + refill).min(self.burst);
        s.1 = now;
        if s.0 >= 1.0 {
            s.0 -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - s.0) / self.qps))
        }
    }
}

/// The layer: `None` limits nothing.
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    bucket: Option<Arc<TokenBucket>>,
}

impl RateLimitLayer {
    /// `None`: no limit; `Some((qps, burst))`.
    pub fn new(limit: Option<(f64, u32)>) -> RateLimitLayer {
        RateLimitLayer { bucket: limit.map(|(q, b)| Arc::new(TokenBucket::new(q, b))) }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;
    fn layer(&self, inner: S) -> RateLimited<S> {
        RateLimited { inner, bucket: self.bucket.clone(), sleep: None, has_token: false }
    }
}

/// See the module documentation.
pub struct RateLimited<S> {
    inner: S,
    bucket: Option<Arc<TokenBucket>>,
    sleep: Option<Pin<Box<Sleep>>>,
    has_token: bool,
}

impl<S, R> Service<R> for RateLimited<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        if let Some(bucket) = &self.bucket {
            while !self.has_token {
                if let Some(sleep) = self.sleep.as_mut() {
                    if sleep.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    self.sleep = None;
                }
                match bucket.try_take() {
                    Ok(()) => self.has_token = true,
                    Err(wait) => self.sleep = Some(Box::pin(tokio::time::sleep(wait))),
                }
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> S::Future {
        self.has_token = false;
        self.inner.call(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_goes_at_once_then_requests_follow_the_rate() {
        let bucket = TokenBucket::new(10.0, 3);
        for _ in 0..3 {
            assert!(bucket.try_take().is_ok());
        }
        let wait = bucket.try_take().unwrap_err();
        assert!(wait > Duration::from_millis(90) && wait <= Duration::from_millis(100), "{wait:?}");
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(bucket.try_take().is_ok());
        assert!(bucket.try_take().is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn the_layer_holds_requests_until_a_token_is_free() {
        use tower::ServiceExt;
        let svc = tower::service_fn(|x: u32| async move { Ok::<_, std::convert::Infallible>(x) });
        let mut svc = RateLimitLayer::new(Some((2.0, 1))).layer(svc);
        let start = Instant::now();
        for i in 0..3 {
            assert_eq!(svc.ready().await.unwrap().call(i).await.unwrap(), i);
        }
        // One at once, then one every 500 ms.
        assert_eq!(start.elapsed(), Duration::from_millis(1000));
        let mut free = RateLimitLayer::new(None)
            .layer(tower::service_fn(|x: u32| async move { Ok::<_, std::convert::Infallible>(x) }));
        let start = Instant::now();
        for i in 0..100 {
            free.ready().await.unwrap().call(i).await.unwrap();
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
    }
}
