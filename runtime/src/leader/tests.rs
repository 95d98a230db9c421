//! Unit tests: the timings' rules, and renewals against a fake apiserver holding one Lease (each
//! request counted and answered after a delay the test sets, on tokio's paused clock).

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::Full;

use super::*;

#[test]
fn config_should_reject_unsafe_timings() {
    let base = LeaderElectionConfig::new("l", "ns");
    assert!(base.validate().is_ok(), "controller-runtime's defaults");
    let s = Duration::from_secs;
    assert!(base.clone().timings(s(10), s(10), s(2)).validate().is_err());
    assert!(base.clone().timings(s(15), s(2), s(2)).validate().is_err());
    assert!(
        base.clone()
            .timings(s(15), s(10), Duration::ZERO)
            .validate()
            .is_err()
    );
    assert!(base.identity("").validate().is_err());
}

#[test]
fn jitter_should_stay_within_twenty_percent() {
    for _ in 0..100 {
        let d = jittered(Duration::from_secs(2));
        assert!(
            d >= Duration::from_secs(2) && d <= Duration::from_millis(2400),
            "{d:?}"
        );
    }
}

/// One Lease behind a fake apiserver: get, create and replace (guarded by `resourceVersion`),
/// each answered `delay` after it arrived.
#[derive(Default)]
struct Fake {
    lease: Option<serde_json::Value>,
    version: u64,
    delay: Duration,
    /// The methods of the requests answered, in order.
    requests: Vec<Method>,
}

fn answer(code: u16, body: &serde_json::Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = http::StatusCode::from_u16(code).unwrap_or_default();
    response
        .headers_mut()
        .insert("content-type", "application/json".parse().expect("static"));
    response
}

fn failure(code: u16, reason: &str) -> Response<Full<Bytes>> {
    let status = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": reason, "reason": reason, "code": code,
    });
    answer(code, &status)
}

async fn serve(
    fake: Arc<Mutex<Fake>>,
    request: Request<kube::client::Body>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    let body = body.collect_bytes().await.unwrap_or_default();
    let delay = fake.lock().unwrap().delay;
    tokio::time::sleep(delay).await;
    let mut fake = fake.lock().unwrap();
    fake.requests.push(parts.method.clone());
    let sent: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let rv = |lease: &serde_json::Value| lease["metadata"]["resourceVersion"].clone();
    let response = match parts.method {
        Method::GET => match &fake.lease {
            Some(lease) => answer(200, lease),
            None => failure(404, "NotFound"),
        },
        Method::POST if fake.lease.is_some() => failure(409, "AlreadyExists"),
        Method::PUT if fake.lease.as_ref().map(rv) != Some(rv(&sent)) => failure(409, "Conflict"),
        Method::POST | Method::PUT => {
            fake.version += 1;
            let mut stored = sent;
            stored["metadata"]["resourceVersion"] = fake.version.to_string().into();
            fake.lease = Some(stored.clone());
            answer(
                if parts.method == Method::POST {
                    201
                } else {
                    200
                },
                &stored,
            )
        }
        _ => failure(405, "MethodNotAllowed"),
    };
    Ok(response)
}

/// An elector of Lease `ns/lease` with timings 6 s / 4 s / 1 s, talking to `fake`.
fn elector(fake: &Arc<Mutex<Fake>>) -> Arc<LeaderElector> {
    let fake = Arc::clone(fake);
    let service = tower::service_fn(move |request| serve(Arc::clone(&fake), request));
    let client = Client::new(service, "ns");
    let s = Duration::from_secs;
    let config = LeaderElectionConfig::new("lease", "ns")
        .identity("me")
        .timings(s(6), s(4), s(1));
    Arc::new(LeaderElector::new(client, config).unwrap())
}

/// Runs `elector` for `leading` (paused clock) after it acquired the Lease; whether it still
/// led at the end and the methods of the requests made meanwhile.
async fn lead_for(
    elector: &Arc<LeaderElector>,
    fake: &Arc<Mutex<Fake>>,
    delay: Duration,
    leading: Duration,
) -> (bool, Vec<Method>) {
    let shutdown = CancellationToken::new();
    let (acquired, mut elected) = tokio::sync::oneshot::channel();
    let run = {
        let (elector, shutdown) = (Arc::clone(elector), shutdown.clone());
        tokio::spawn(async move {
            elector
                .run(shutdown, |token| async move {
                    let _ = acquired.send(());
                    token.cancelled().await;
                })
                .await
        })
    };
    (&mut elected).await.unwrap();
    let before = {
        let mut fake = fake.lock().unwrap();
        fake.delay = delay;
        fake.requests.len()
    };
    tokio::time::sleep(leading).await;
    let still = elector.lease_valid();
    let requests = fake.lock().unwrap().requests[before..].to_vec();
    shutdown.cancel();
    let outcome = run.await.unwrap();
    assert!(still == outcome.is_ok(), "{outcome:?}");
    (still, requests)
}

#[tokio::test(start_paused = true)]
async fn a_leader_should_renew_with_one_request_each_retry_period() {
    let fake = Arc::new(Mutex::new(Fake::default()));
    let elector = elector(&fake);
    let (held, requests) = lead_for(
        &elector,
        &fake,
        Duration::from_millis(10),
        Duration::from_secs(10),
    )
    .await;
    assert!(held);
    // Ten retry periods: ten renewals, each a write over the Lease as last written.
    assert!(
        (9..=11).contains(&requests.len()) && requests.iter().all(|m| m == Method::PUT),
        "{requests:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_requests_take_most_of_its_attempt_timeout_should_keep_its_lease() {
    // Every request answered 1.5 s after it was sent (an apiserver on a starved machine): a
    // renewal that reads the Lease before writing it takes 3 s, more than the 2 s an attempt
    // may take (half the renew deadline) — each attempt timed out and the Lease was lost
    // within the 4 s deadline. One request each, the leader renews every 1.5 s.
    let fake = Arc::new(Mutex::new(Fake::default()));
    let elector = elector(&fake);
    let (held, requests) = lead_for(
        &elector,
        &fake,
        Duration::from_millis(1500),
        Duration::from_secs(30),
    )
    .await;
    assert!(held, "lost the lease: {requests:?}");
    assert!(requests.iter().all(|m| m == Method::PUT), "{requests:?}");
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_lease_was_written_by_someone_else_should_read_it_and_decide() {
    let fake = Arc::new(Mutex::new(Fake::default()));
    let elector = elector(&fake);
    let shutdown = CancellationToken::new();
    let (acquired, elected) = tokio::sync::oneshot::channel();
    let run = {
        let (elector, shutdown) = (Arc::clone(&elector), shutdown.clone());
        tokio::spawn(async move {
            elector
                .run(shutdown, |token| async move {
                    let _ = acquired.send(());
                    token.cancelled().await;
                })
                .await
        })
    };
    elected.await.unwrap();
    // Another candidate takes the Lease over (as after this leader was frozen past it).
    {
        let mut fake = fake.lock().unwrap();
        fake.version += 1;
        let version = fake.version.to_string();
        let lease = fake.lease.as_mut().unwrap();
        lease["spec"]["holderIdentity"] = "other".into();
        lease["spec"]["renewTime"] = "2030-01-01T00:00:00.000000Z".into();
        lease["metadata"]["resourceVersion"] = version.into();
        fake.requests.clear();
    }
    // The optimistic write is refused; the leader reads the Lease, sees it held by another
    // (fresh on its clock) and does not write; its renew deadline passes: lost.
    let outcome = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the leader gives up within its renew deadline")
        .unwrap();
    assert!(
        matches!(outcome, Err(LeaderElectionError::Lost(_))),
        "{outcome:?}"
    );
    let requests = fake.lock().unwrap().requests.clone();
    assert_eq!(requests.first(), Some(&Method::PUT), "{requests:?}");
    assert!(
        requests[1..].iter().all(|m| m == Method::GET),
        "{requests:?}"
    );
    let holder = fake.lock().unwrap().lease.as_ref().unwrap()["spec"]["holderIdentity"].clone();
    assert_eq!(holder, "other");
    shutdown.cancel();
}
