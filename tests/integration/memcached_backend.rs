//! The memcached store backend against real memcached servers ([`MemcachedServer`]): keys spread
//! over two servers, a server that stops, restarts or goes silent, and the metrics. No cluster
//! needed.

use std::error::Error;
use std::time::{Duration, Instant};

use kubeforge::store::{Backend, Memcached, MemcachedConfig};
use kubeforge::testing::{FaultProxy, MemcachedServer};

const TIMEOUT: Duration = Duration::from_millis(500);

fn backend(addrs: &[String]) -> Memcached {
    Memcached::new(MemcachedConfig::new(addrs.iter().cloned()).timeout(TIMEOUT)).unwrap()
}

fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}/object-{i}")).collect()
}

/// An error and its sources, one line.
fn chain(error: &dyn Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[tokio::test]
async fn memcached_should_spread_keys_over_two_servers_and_answer_in_order() {
    let a = MemcachedServer::start(64).await.unwrap();
    let b = MemcachedServer::start(64).await.unwrap();
    let both = backend(&[a.addr(), b.addr()]);
    let keys = keys("shop/configmaps", 200);
    let entries: Vec<(String, Vec<u8>)> = keys
        .iter()
        .map(|key| (key.clone(), format!("value of {key}").into_bytes()))
        .collect();
    both.set_many(&entries).await.unwrap();

    // Asked in another order, with misses in between: answered in that order.
    let mut asked: Vec<String> = keys.iter().rev().cloned().collect();
    asked.insert(0, "shop/configmaps/missing-0".to_owned());
    asked.insert(100, "shop/configmaps/missing-1".to_owned());
    let values = both.get_many(&asked).await.unwrap();
    assert_eq!(values.len(), asked.len());
    for (key, value) in asked.iter().zip(&values) {
        if key.contains("missing") {
            assert_eq!(value, &None, "{key}");
        } else {
            assert_eq!(value.as_deref(), Some(format!("value of {key}").as_bytes()));
        }
    }

    // Each key lives on exactly one of the servers, and both servers hold some.
    let on_a = backend(&[a.addr()]).get_many(&keys).await.unwrap();
    let on_b = backend(&[b.addr()]).get_many(&keys).await.unwrap();
    let held_by_a = on_a.iter().filter(|v| v.is_some()).count();
    assert!(
        on_a.iter()
            .zip(&on_b)
            .all(|(x, y)| x.is_some() != y.is_some()),
        "every key on exactly one server"
    );
    assert!(
        (50..150).contains(&held_by_a),
        "{held_by_a} of 200 keys on the first server"
    );

    // Deleting half (and a key that was never set) leaves the other half.
    let mut deleted: Vec<String> = keys.iter().step_by(2).cloned().collect();
    deleted.push("shop/configmaps/never-set".to_owned());
    both.delete_many(&deleted).await.unwrap();
    let values = both.get_many(&keys).await.unwrap();
    for (i, value) in values.iter().enumerate() {
        assert_eq!(value.is_some(), i % 2 == 1, "{}", keys[i]);
    }
    both.check().await.unwrap();
}

#[tokio::test]
async fn memcached_should_carry_a_full_page_of_long_keys_and_large_values() {
    let server = MemcachedServer::start(64).await.unwrap();
    let backend = backend(&[server.addr()]);
    // A page of 500 keys near the 250-byte limit: one `get` line of about 120 kB.
    let page: Vec<(String, Vec<u8>)> = (0..500)
        .map(|i| (format!("{}-{i:04}", "k".repeat(240)), vec![b'v'; 100]))
        .collect();
    backend.set_many(&page).await.unwrap();
    let keys: Vec<String> = page.iter().map(|(key, _)| key.clone()).collect();
    let values = backend.get_many(&keys).await.unwrap();
    assert!(
        values
            .iter()
            .all(|v| v.as_deref() == Some(&[b'v'; 100][..]))
    );

    // Values up to memcached's item limit (1 MB, key and overhead included).
    let large = vec![("large".to_owned(), vec![7_u8; 1000 * 1000])];
    backend.set_many(&large).await.unwrap();
    let value = backend.get_many(&["large".to_owned()]).await.unwrap();
    assert_eq!(value[0].as_deref(), Some(&large[0].1[..]));
    // Over the limit: memcached refuses, and the error says which key.
    let too_large = vec![("too-large".to_owned(), vec![7_u8; 1024 * 1024 + 1])];
    let error = backend.set_many(&too_large).await.unwrap_err();
    assert!(chain(&error).contains("too-large"), "{}", chain(&error));
    // The connection survives a refusal.
    backend.check().await.unwrap();
}

#[tokio::test]
async fn memcached_should_report_its_shard_key() {
    let backend = Memcached::new(
        MemcachedConfig::new(["127.0.0.1:11211"])
            .shard_key("replicas-a")
            .page_size(200),
    )
    .unwrap();
    assert_eq!(backend.shard_key(), "replicas-a");
    assert_eq!(backend.page_size(), 200);
}

#[tokio::test]
async fn memcached_should_fail_fast_while_a_server_is_down_and_recover_by_itself() {
    let mut server = MemcachedServer::start(64).await.unwrap();
    let backend = backend(&[server.addr()]);
    let keys = keys("shop/secrets", 20);
    let entries: Vec<(String, Vec<u8>)> = keys.iter().map(|k| (k.clone(), vec![1])).collect();
    // Several requests at once: the pool keeps several connections, all dead after the stop.
    let warm = (0..4).map(|_| backend.set_many(&entries));
    for result in futures::future::join_all(warm).await {
        result.unwrap();
    }

    server.stop();
    let started = Instant::now();
    let error = backend.get_many(&keys).await.unwrap_err();
    assert!(started.elapsed() < TIMEOUT * 2, "{:?}", started.elapsed());
    assert!(
        error.to_string().contains(&server.addr()),
        "the error names the server: {}",
        chain(&error)
    );
    let error = backend.check().await.unwrap_err();
    assert!(
        error.to_string().contains(&server.addr()),
        "{}",
        chain(&error)
    );

    server.start_again().await.unwrap();
    // No request fails once the server is back: dead connections are not reused.
    backend.check().await.unwrap();
    let values = backend.get_many(&keys).await.unwrap();
    assert!(
        values.iter().all(Option::is_none),
        "a restarted memcached is empty"
    );
    backend.set_many(&entries).await.unwrap();
    assert!(
        backend
            .get_many(&keys)
            .await
            .unwrap()
            .iter()
            .all(Option::is_some)
    );
}

#[tokio::test]
async fn memcached_should_time_out_on_a_silent_server_and_reconnect_when_it_answers() {
    let server = MemcachedServer::start(64).await.unwrap();
    // A proxy that can swallow every byte: memcached seems alive (connections are accepted) but
    // never answers, as behind a lost route.
    let upstream = kube::Config::new(format!("http://{}", server.addr()).parse().unwrap());
    let proxy = FaultProxy::start(upstream).await.unwrap();
    let via_proxy = proxy.local_addr().to_string();
    let backend = backend(std::slice::from_ref(&via_proxy));
    let keys = keys("shop/pods", 10);
    backend.get_many(&keys).await.unwrap();

    proxy.blackhole_all();
    let started = Instant::now();
    let error = backend.get_many(&keys).await.unwrap_err();
    let elapsed = started.elapsed();
    assert!(elapsed >= TIMEOUT && elapsed < TIMEOUT * 3, "{elapsed:?}");
    let text = chain(&error);
    assert!(text.contains(&via_proxy), "{text}");
    assert!(text.contains("timed out after 500ms"), "{text}");

    proxy.restore();
    backend.get_many(&keys).await.unwrap();
    backend.check().await.unwrap();
}

#[tokio::test]
async fn memcached_restart_should_empty_it() {
    let mut server = MemcachedServer::start(64).await.unwrap();
    let backend = backend(&[server.addr()]);
    let keys = keys("shop/deployments", 50);
    let entries: Vec<(String, Vec<u8>)> = keys.iter().map(|k| (k.clone(), vec![2; 64])).collect();
    backend.set_many(&entries).await.unwrap();
    assert!(
        backend
            .get_many(&keys)
            .await
            .unwrap()
            .iter()
            .all(Option::is_some)
    );

    server.restart().await.unwrap();
    let values = backend.get_many(&keys).await.unwrap();
    assert!(values.iter().all(Option::is_none));
}

#[tokio::test]
async fn memcached_metrics_should_count_hits_and_misses() {
    let server = MemcachedServer::start(64).await.unwrap();
    let backend = backend(&[server.addr()]);
    let entries: Vec<(String, Vec<u8>)> = keys("shop/services", 3)
        .into_iter()
        .map(|k| (k, vec![3]))
        .collect();
    backend.set_many(&entries).await.unwrap();
    let asked = keys("shop/services", 5); // 3 hits, 2 misses
    backend.get_many(&asked).await.unwrap();
    backend.get_many(&asked[..1]).await.unwrap(); // 1 more hit

    let families = backend.metrics();
    let requests = families
        .iter()
        .find(|f| f.name() == "kubeforge_store_requests_total")
        .expect("kubeforge_store_requests_total");
    let count = |op: &str, result: &str| {
        requests
            .get_metric()
            .iter()
            .find(|m| {
                let labels: Vec<(&str, &str)> = m
                    .get_label()
                    .iter()
                    .map(|l| (l.name(), l.value()))
                    .collect();
                labels.contains(&("backend", "memcached"))
                    && labels.contains(&("op", op))
                    && labels.contains(&("result", result))
            })
            .map(|m| m.get_counter().get_value())
    };
    assert_eq!(count("get", "hit"), Some(4.0));
    assert_eq!(count("get", "miss"), Some(2.0));
    assert_eq!(count("set", "ok"), Some(1.0));
    assert_eq!(count("get", "error"), None);
    let seconds = families
        .iter()
        .find(|f| f.name() == "kubeforge_store_request_seconds")
        .expect("kubeforge_store_request_seconds");
    let get_requests: u64 = seconds
        .get_metric()
        .iter()
        .filter(|m| m.get_label().iter().any(|l| l.value() == "get"))
        .map(|m| m.get_histogram().get_sample_count())
        .sum();
    assert_eq!(get_requests, 2);
}

#[tokio::test]
async fn one_of_two_servers_down_should_degrade_to_misses_not_fail() {
    let mut a = MemcachedServer::start(64).await.unwrap();
    let mut b = MemcachedServer::start(64).await.unwrap();
    let backend = backend(&[a.addr(), b.addr()]);
    let keys = keys("shop/deployments", 40);
    let entries: Vec<(String, Vec<u8>)> = keys.iter().map(|k| (k.clone(), vec![7])).collect();
    backend.set_many(&entries).await.unwrap();

    // The first request that meets the stopped server fails (nothing tells it is down yet);
    // from then on its keys are misses, its writes are skipped, and the backend stays ready.
    b.stop();
    let _ = backend.get_many(&keys).await;
    let started = Instant::now();
    let values = backend.get_many(&keys).await.unwrap();
    assert!(started.elapsed() < TIMEOUT, "{:?}", started.elapsed());
    let hits = values.iter().filter(|v| v.is_some()).count();
    assert!(
        hits > 0 && hits < keys.len(),
        "the keys of the server that answers are hits, the others misses: {hits} of {}",
        keys.len()
    );
    backend.set_many(&entries).await.unwrap();
    backend.delete_many(&keys[..5]).await.unwrap();
    backend
        .check()
        .await
        .expect("ready (degraded) while one server answers");

    // Both down: requests fail again, naming a server.
    a.stop();
    let _ = backend.get_many(&keys).await;
    let error = backend.get_many(&keys).await.unwrap_err();
    assert!(error.to_string().contains("127.0.0.1"), "{}", chain(&error));
    backend.check().await.unwrap_err();

    // Back: both answer (empty after their restart, but hits for what is written now).
    a.start_again().await.unwrap();
    b.start_again().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await; // past the rest of a down server
    backend.check().await.unwrap();
    backend.set_many(&entries).await.unwrap();
    let values = backend.get_many(&keys).await.unwrap();
    assert!(
        values.iter().all(Option::is_some),
        "both servers answer again"
    );
}
