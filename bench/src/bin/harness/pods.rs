//! The pods-cached scenario (issue 36, item 1): N Pods of realistic size (three containers with
//! environment, resources, probes and mounts; labels and annotations; a running Pod's status;
//! managedFields as the apiserver writes them, 4–8 KiB of JSON each) in a namespace of their
//! own, and each driver started on them twice with `--pods`: caching them in full
//! (managedFields dropped, as in the memory-and-sync scenario) and as a view of the fields a
//! typical operator reads (metadata, `spec.nodeName`, the containers' names and images,
//! `status.phase`: kubeforge's `#[kubeforge::view]`, which decodes only those; kube-runtime's
//! `.modify(..)` and controller-runtime's cache transform, which cut the decoded Pod down to
//! them). Each driver runs a controller of the Pods whose reconcile does nothing. Recorded: sync
//! time, RSS after sync, anonymous RSS, live heap when idle; and per driver the ratio view / full
//! of each (of the medians).
//!
//! The Pods are never scheduled (the plane has no scheduler and no kubelet): they are stored
//! objects, bound by `spec.nodeName` to nodes that do not exist, their status written as a
//! kubelet would.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::Api;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::{Harness, Results, Start, median, record, record_cache, unit_of};

/// Concurrent requests creating the Pods (the harness's other objects use 16 too).
const CREATE_CONCURRENCY: usize = 16;

/// The two ways each driver caches the Pods (`--pods`).
const MODES: [&str; 2] = ["full", "view"];

/// The metrics whose ratio view / full gets a row.
const RATIOS: [&str; 4] = [
    "rss after sync",
    "anonymous rss (heap)",
    "live heap when idle",
    "sync time",
];

fn scenario(size: usize, mode: &str) -> String {
    format!("pods cached ({size} objects) [{mode}]")
}

/// Every driver (but the `-watcher`, `-memcached` and `-traced` variants, whose Pod cache is
/// the plain driver's) on every `--pod-sizes` size, full and view, `--repeats` times in a
/// rotating order.
pub(super) async fn pods_cached(h: &mut Harness, results: &mut Results) {
    let drivers: Vec<(String, PathBuf)> = h
        .args
        .drivers
        .iter()
        .filter(|(d, _)| {
            !(d.ends_with("-watcher") || d.ends_with("-memcached") || d.ends_with("-traced"))
        })
        .cloned()
        .collect();
    // One namespace, the sizes in ascending order: each size adds Pods to the last one's.
    let mut sizes = h.args.pod_sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.is_empty() {
        return;
    }
    let ns = h.namespace("pods").await;
    let mut created = 0;
    for size in sizes {
        let start = Instant::now();
        create_pods(h, &ns, created..size).await;
        created = size;
        eprintln!(
            "pods cached: {size} Pods in place after {:.0} s",
            start.elapsed().as_secs_f64()
        );
        for repeat in 0..h.args.repeats {
            let mut order = drivers.clone();
            order.rotate_left(repeat % drivers.len().max(1));
            // Full first in one repeat, view first in the next.
            let mut modes = MODES;
            modes.rotate_left(repeat % 2);
            for (driver, path) in &order {
                for mode in modes {
                    let process = h
                        .start(
                            driver,
                            path,
                            &ns,
                            Start {
                                pods: Some(mode),
                                report_heap: true,
                                ..Start::reconciling(4)
                            },
                        )
                        .await;
                    record_cache(h, results, &scenario(size, mode), driver, &process).await;
                    drop(process);
                }
            }
        }
        record_ratios(results, size);
    }
    let start = Instant::now();
    delete_pods(h, &ns, created).await;
    h.drop_namespace(&ns).await;
    eprintln!(
        "pods cached: {created} Pods deleted in {:.0} s",
        start.elapsed().as_secs_f64()
    );
}

/// Per driver, view / full of the medians of each of [`RATIOS`].
fn record_ratios(results: &mut Results, size: usize) {
    let row = format!("pods cached ({size} objects) view / full");
    let mut ratios = Vec::new();
    for metric in RATIOS {
        let unit = unit_of(metric);
        let [full, view] = MODES.map(|mode| {
            results
                .get(&(scenario(size, mode), metric.to_owned(), unit.clone()))
                .cloned()
                .unwrap_or_default()
        });
        for (driver, full) in &full {
            if let Some(view) = view.get(driver) {
                ratios.push((metric, driver.clone(), median(view) / median(full)));
            }
        }
    }
    for (metric, driver, ratio) in ratios {
        record(results, &row, metric, "ratio", &driver, ratio);
    }
}

/// Creates the Pods `p<i>` of `range` in `ns` and writes each one's status as a kubelet would
/// (`CREATE_CONCURRENCY` at a time); prints one Pod's size as listed, with and without its
/// managedFields.
async fn create_pods(h: &Harness, ns: &str, range: std::ops::Range<usize>) {
    // The ServiceAccount admission plugin refuses Pods until the namespace's `default`
    // ServiceAccount exists (kube-controller-manager makes it, a moment after the namespace).
    let accounts: Api<ServiceAccount> = Api::namespaced(h.admin.clone(), ns);
    let default = ServiceAccount {
        metadata: ObjectMeta {
            name: Some("default".to_owned()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    let _ = accounts.create(&PostParams::default(), &default).await; // or it exists already
    let api: Api<Pod> = Api::namespaced(h.admin.clone(), ns);
    let kubelet = PatchParams {
        field_manager: Some("kubelet".to_owned()),
        ..PatchParams::default()
    };
    futures::StreamExt::for_each_concurrent(
        futures::stream::iter(range.clone()),
        CREATE_CONCURRENCY,
        |i| {
            let (api, kubelet) = (api.clone(), kubelet.clone());
            async move {
                let pod: Pod = serde_json::from_value(pod(i)).expect("a valid Pod");
                let created = api
                    .create(&PostParams::default(), &pod)
                    .await
                    .expect("create a Pod");
                let name = created.metadata.name.unwrap_or_default();
                api.patch_status(&name, &kubelet, &Patch::Strategic(status(i)))
                    .await
                    .expect("write a Pod's status");
            }
        },
    )
    .await;
    if range.start == 0 && !range.is_empty() {
        let listed: Value =
            serde_json::to_value(api.get("p0").await.expect("get p0")).expect("a Pod serializes");
        let with = serde_json::to_vec(&listed).map_or(0, |b| b.len());
        let mut without = listed;
        if let Some(meta) = without["metadata"].as_object_mut() {
            meta.remove("managedFields");
        }
        let without = serde_json::to_vec(&without).map_or(0, |b| b.len());
        eprintln!(
            "pods cached: one Pod is {with} bytes of JSON, {without} without its managedFields"
        );
    }
}

/// Deletes the Pods `p0`..`p<n-1>` in `ns` at once (grace period 0), `CREATE_CONCURRENCY` at a
/// time (the apiserver deletes a collection with one worker), and waits until none is left. A
/// Pod bound to a node is deleted gracefully by default: it waits for its kubelet to confirm,
/// and there is none here, so the namespace's deletion would wait for ever.
async fn delete_pods(h: &Harness, ns: &str, n: usize) {
    let api: Api<Pod> = Api::namespaced(h.admin.clone(), ns);
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    futures::StreamExt::for_each_concurrent(futures::stream::iter(0..n), CREATE_CONCURRENCY, |i| {
        let (api, now) = (api.clone(), now.clone());
        async move {
            let _ = api.delete(&format!("p{i}"), &now).await;
        }
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(600);
    while Instant::now() < deadline {
        let _ = api.delete_collection(&now, &ListParams::default()).await;
        match api.list_metadata(&ListParams::default().limit(1)).await {
            Ok(left) if left.items.is_empty() => return,
            _ => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
    eprintln!("pods cached: Pods of {ns} still there after 10 minutes; going on");
}

/// 64 hex digits derived from `i` and `salt` (digests, container ids).
fn hex64(i: usize, salt: u64) -> String {
    let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt;
    (0..4)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            format!("{x:016x}")
        })
        .collect()
}

/// The Pod's containers: the application, its proxy, a metrics exporter.
fn containers(app: &str) -> Value {
    let env = |names: &[(&str, &str)]| -> Vec<Value> {
        names
            .iter()
            .map(|(k, v)| json!({ "name": k, "value": v }))
            .collect()
    };
    let field_env = |name: &str, path: &str| json!({ "name": name, "valueFrom": { "fieldRef": { "apiVersion": "v1", "fieldPath": path } } });
    let mut app_env = env(&[
        ("LOG_LEVEL", "info"),
        ("LOG_FORMAT", "json"),
        ("HTTP_ADDR", ":8080"),
        ("DATABASE_HOST", "postgres.shop.svc.cluster.local"),
        (
            "CACHE_URL",
            "redis://redis-master.shop.svc.cluster.local:6379/0",
        ),
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://otel-collector.observability:4317",
        ),
    ]);
    app_env.push(field_env("POD_NAME", "metadata.name"));
    app_env.push(field_env("POD_NAMESPACE", "metadata.namespace"));
    app_env.push(json!({ "name": "DATABASE_PASSWORD", "valueFrom": { "secretKeyRef": { "name": format!("{app}-db"), "key": "password" } } }));
    let probe = |path: &str, port: &str, period: u32| {
        json!({ "httpGet": { "path": path, "port": port, "scheme": "HTTP" }, "initialDelaySeconds": 5,
                "periodSeconds": period, "timeoutSeconds": 2, "failureThreshold": 3 })
    };
    let security = json!({ "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                           "runAsNonRoot": true, "capabilities": { "drop": ["ALL"] } });
    json!([
        {
            "name": "app",
            "image": "registry.example.com/shop/frontend:2.14.3",
            "args": ["--config=/etc/shop/config.yaml", "--http-addr=:8080"],
            "env": app_env,
            "ports": [
                { "name": "http", "containerPort": 8080, "protocol": "TCP" },
            ],
            "resources": { "requests": { "cpu": "250m", "memory": "256Mi" },
                           "limits": { "cpu": "1", "memory": "512Mi" } },
            "livenessProbe": probe("/healthz", "http", 10),
            "readinessProbe": probe("/ready", "http", 5),
            "volumeMounts": [
                { "name": "config", "mountPath": "/etc/shop", "readOnly": true },
                { "name": "tls", "mountPath": "/etc/tls", "readOnly": true },
                { "name": "cache", "mountPath": "/var/cache/shop" },
            ],
            "securityContext": security,
        },
        {
            "name": "proxy",
            "image": "registry.example.com/infra/envoy:1.31.2",
            "args": ["-c", "/etc/envoy/envoy.yaml", "--service-cluster", "shop-frontend"],
            "env": env(&[("ENVOY_LOG_LEVEL", "warn")]),
            "ports": [{ "name": "https", "containerPort": 8443, "protocol": "TCP" }],
            "resources": { "requests": { "cpu": "100m", "memory": "64Mi" },
                           "limits": { "cpu": "500m", "memory": "128Mi" } },
            "readinessProbe": probe("/ready", "https", 5),
            "volumeMounts": [
                { "name": "envoy", "mountPath": "/etc/envoy", "readOnly": true },
                { "name": "tls", "mountPath": "/etc/tls", "readOnly": true },
            ],
        },
        {
            "name": "metrics",
            "image": "registry.example.com/infra/statsd-exporter:0.27.1",
            "args": ["--statsd.listen-udp=:9125", "--web.listen-address=:9090"],
            "ports": [{ "name": "metrics", "containerPort": 9090, "protocol": "TCP" }],
            "resources": { "requests": { "cpu": "20m", "memory": "32Mi" },
                           "limits": { "cpu": "100m", "memory": "64Mi" } },
        },
    ])
}

/// Pod `p<i>`: a web application with a proxy and a metrics sidecar, as a Deployment's Pod
/// template would make it, bound to one of 100 nodes.
fn pod(i: usize) -> Value {
    let app = format!("shop-{}", i % 20);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("p{i}"),
            "labels": {
                "app.kubernetes.io/name": "shop-frontend",
                "app.kubernetes.io/instance": app,
                "app.kubernetes.io/version": "2.14.3",
                "app.kubernetes.io/component": "frontend",
                "app.kubernetes.io/part-of": "shop",
                "app.kubernetes.io/managed-by": "helm",
                "pod-template-hash": "7d9f8b6c5d",
            },
            "annotations": {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "9090",
                "checksum/config": hex64(i % 20, 1),
            },
        },
        "spec": {
            "nodeName": format!("node-{}", i % 100),
            "containers": containers(&app),
            "volumes": [
                { "name": "config", "configMap": { "name": format!("{app}-config") } },
                { "name": "envoy", "configMap": { "name": "envoy-frontend" } },
                { "name": "tls", "secret": { "secretName": format!("{app}-tls") } },
                { "name": "cache", "emptyDir": { "sizeLimit": "1Gi" } },
            ],
            "securityContext": { "fsGroup": 2000, "runAsUser": 1000, "runAsGroup": 3000,
                                 "seccompProfile": { "type": "RuntimeDefault" } },
            "tolerations": [{ "key": "dedicated", "operator": "Equal", "value": "shop", "effect": "NoSchedule" }],
            "terminationGracePeriodSeconds": 45,
            "automountServiceAccountToken": false,
        },
    })
}

/// A running Pod's status, as its kubelet writes it.
fn status(i: usize) -> Value {
    let at = "2026-11-28T10:00:00Z";
    let (pod_ip, host_ip) = (
        format!("10.{}.{}.{}", 64 + i / 65536 % 64, i / 256 % 256, i % 256),
        format!("192.168.0.{}", 10 + i % 100),
    );
    let container = |name: &str, image: &str, salt: u64| {
        let (repo, _) = image.split_once(':').unwrap_or((image, ""));
        json!({
            "name": name, "image": image,
            "imageID": format!("{repo}@sha256:{}", hex64(0, salt)),
            "containerID": format!("containerd://{}", hex64(i, salt)),
            "ready": true, "started": true, "restartCount": 0,
            "state": { "running": { "startedAt": at } },
        })
    };
    let condition = |kind: &str| json!({ "type": kind, "status": "True", "lastProbeTime": null, "lastTransitionTime": at });
    let conditions = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .map(condition);
    json!({ "status": {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": host_ip, "hostIPs": [{ "ip": host_ip }],
        "podIP": pod_ip, "podIPs": [{ "ip": pod_ip }],
        "startTime": at,
        "containerStatuses": [
            container("app", "registry.example.com/shop/frontend:2.14.3", 2),
            container("proxy", "registry.example.com/infra/envoy:1.31.2", 3),
            container("metrics", "registry.example.com/infra/statsd-exporter:0.27.1", 4),
        ],
    } })
}
