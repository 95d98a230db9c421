//! Client-side rate limiting (client-go's QPS / burst) as a tower layer on the kube client.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::time::Sleep;
use tower::{Layer, Service};

use crate::queue::{InvalidRateLimit, RateLimiter, TokenBucket};

/// Limits the requests of a client to `qps` per second with bursts of `burst` (client-go's
/// `QPS` / `Burst`). Requests over the limit wait; none is rejected.
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    bucket: Arc<Mutex<TokenBucket>>,
}

impl RateLimitLayer {
    /// A limit of `qps` requests per second, `burst` at once.
    ///
    /// # Errors
    ///
    /// A non-positive `qps` or a zero `burst`.
    pub fn new(qps: f64, burst: u32) -> Result<Self, InvalidRateLimit> {
        Ok(Self {
            bucket: Arc::new(Mutex::new(TokenBucket::new(qps, burst)?)),
        })
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> RateLimited<S> {
        RateLimited {
            inner,
            bucket: Arc::clone(&self.bucket),
            wait: None,
            reserved: false,
        }
    }
}

/// The service of [`RateLimitLayer`]: readiness waits for a token.
pub struct RateLimited<S> {
    inner: S,
    bucket: Arc<Mutex<TokenBucket>>,
    wait: Option<Pin<Box<Sleep>>>,
    reserved: bool,
}

impl<S> std::fmt::Debug for RateLimited<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimited").finish_non_exhaustive()
    }
}

impl<S, Req> Service<Req> for RateLimited<S>
where
    S: Service<Req>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if !self.reserved {
            let delay = {
                let bucket = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
                RateLimiter::<()>::when(&*bucket, &())
            };
            self.reserved = true;
            if !delay.is_zero() {
                self.wait = Some(Box::pin(tokio::time::sleep(delay)));
            }
        }
        if let Some(wait) = self.wait.as_mut() {
            if wait.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.wait = None;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        self.reserved = false;
        self.inner.call(request)
    }
}

/// A client for `config` (built by [`connect_with`](super::connect_with), so it notices dead
/// connections) whose requests are limited to `qps` per second with bursts of `burst`.
///
/// # Errors
///
/// An unusable configuration or rate.
pub fn rate_limited_client(
    config: kube::Config,
    qps: f64,
    burst: u32,
) -> Result<kube::Client, kube::Error> {
    super::connect_with(
        config,
        &super::ConnectionConfig::default().rate_limit(qps, burst),
    )
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::time::Duration;

    use tower::ServiceExt;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn rate_limited_service_should_space_requests_after_the_burst() {
        let layer = RateLimitLayer::new(10.0, 2).unwrap();
        let mut service = layer.layer(tower::service_fn(|()| async {
            Ok::<_, Infallible>(tokio::time::Instant::now())
        }));
        let start = tokio::time::Instant::now();
        let mut times = Vec::new();
        for _ in 0..4 {
            times.push(service.ready().await.unwrap().call(()).await.unwrap() - start);
        }
        let ms = Duration::from_millis;
        assert_eq!(times, [ms(0), ms(0), ms(100), ms(200)]);
    }
}
