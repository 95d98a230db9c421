//! Self-signed webhook certificates kept in a Secret shared by replicas, against the real
//! apiserver: replicas racing to create it agree on one, a renewal on one reaches the others, a
//! deleted or corrupted Secret comes back (with the certificate being served, so clients keep
//! trusting it).

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, ListParams, PostParams};
use kubeforge::testing::TestNamespace;
use kubeforge::webhook::certs::{CertSource, SelfSigned, ServingCerts};
use tokio_util::sync::CancellationToken;

use crate::support::eventually;

const SECRET: &str = "hooks-cert";
const CHECK: Duration = Duration::from_secs(1);
/// Generous: a few checks on a busy machine.
const WITHIN: Duration = Duration::from_secs(15);

fn source(ns: &TestNamespace) -> CertSource {
    CertSource::SelfSigned(
        SelfSigned::new(ns.name(), SECRET)
            .dns_names([format!("hooks.{}.svc", ns.name())])
            .ip_addresses(["127.0.0.1".parse().unwrap()])
            .check_interval(CHECK),
    )
}

async fn start(ns: &TestNamespace) -> ServingCerts {
    ServingCerts::start(source(ns), Some(ns.client()))
        .await
        .unwrap()
}

fn text(secret: &Secret, key: &str) -> String {
    let data = secret.data.as_ref().unwrap();
    String::from_utf8(data[key].0.clone()).unwrap()
}

/// Runs `certs` until the returned token is cancelled (dropped: cancelled too).
fn run(certs: &ServingCerts) -> tokio_util::sync::DropGuard {
    let token = CancellationToken::new();
    tokio::spawn(certs.clone().run(token.clone()));
    token.drop_guard()
}

#[tokio::test]
async fn replicas_starting_together_should_create_one_secret_and_serve_the_same_certificate() {
    let ns = TestNamespace::new().await.unwrap();
    let (a, b) = tokio::join!(
        ServingCerts::start(source(&ns), Some(ns.client())),
        ServingCerts::start(source(&ns), Some(ns.client())),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.current(), b.current());
    assert_eq!(*a.ca_bundle().borrow(), *b.ca_bundle().borrow());

    let secrets = ns
        .api::<Secret>()
        .list(&ListParams::default().labels("app.kubernetes.io/managed-by=kubeforge"))
        .await
        .unwrap();
    assert_eq!(secrets.items.len(), 1);
    let secret = &secrets.items[0];
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let mut keys: Vec<_> = secret.data.as_ref().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(keys, ["ca.crt", "ca.key", "tls.crt", "tls.key"]);
    assert_eq!(
        a.ca_bundle().borrow().as_deref(),
        Some(text(secret, "ca.crt").as_bytes())
    );
    let annotations = secret.metadata.annotations.as_ref().unwrap();
    let not_after: k8s_openapi::jiff::Timestamp = annotations["kubeforge.dev/serving-not-after"]
        .parse()
        .unwrap();
    let served = a.current().not_after.unwrap();
    assert_eq!(std::time::SystemTime::from(not_after), served);
    let year = Duration::from_secs(365 * 24 * 3600);
    let left = served.duration_since(std::time::SystemTime::now()).unwrap();
    assert!(
        left > year - Duration::from_secs(600) && left <= year,
        "{left:?}"
    );
}

#[tokio::test]
async fn a_renewal_on_one_replica_should_reach_the_other_within_its_check_interval() {
    let ns = TestNamespace::new().await.unwrap();
    let a = start(&ns).await;
    let b = start(&ns).await;
    let _running = run(&b);
    let before = a.current();
    let bundle = a.ca_bundle().borrow().clone();

    a.renew_now().await.unwrap();
    let renewed = a.current();
    assert_ne!(renewed.sha256, before.sha256);
    assert_eq!(
        *a.ca_bundle().borrow(),
        bundle,
        "same CA: clients need nothing new"
    );
    let secret = ns.api::<Secret>().get(SECRET).await.unwrap();
    assert_eq!(
        *b.ca_bundle().borrow(),
        Some(text(&secret, "ca.crt").into_bytes())
    );

    eventually(
        "the other replica to serve the renewal",
        WITHIN,
        async || (b.current() == renewed).then_some(()),
    )
    .await;

    // Both renewing at once: one write wins (the other gets a Conflict and takes it, or renews
    // again on top); with both running they converge.
    let _running_a = run(&a);
    let (ra, rb) = tokio::join!(a.renew_now(), b.renew_now());
    ra.unwrap();
    rb.unwrap();
    eventually(
        "both replicas to serve one certificate",
        WITHIN,
        async || (a.current() == b.current() && a.current() != renewed).then_some(()),
    )
    .await;
}

#[tokio::test]
async fn a_deleted_secret_should_be_recreated_with_the_certificate_being_served() {
    let ns = TestNamespace::new().await.unwrap();
    let api = ns.api::<Secret>();
    let a = start(&ns).await;
    let served = a.current();
    let original = api.get(SECRET).await.unwrap();
    let _running = run(&a);

    api.delete(SECRET, &DeleteParams::default()).await.unwrap();
    let recreated = eventually("the Secret to be recreated", WITHIN, async || {
        api.get_opt(SECRET).await.unwrap()
    })
    .await;
    assert_ne!(recreated.metadata.uid, original.metadata.uid);
    for key in ["tls.crt", "ca.crt", "ca.key"] {
        assert_eq!(text(&recreated, key), text(&original, key), "{key}");
    }
    assert_eq!(a.current(), served, "nothing changed for clients");
}

#[tokio::test]
async fn a_corrupted_secret_should_be_replaced_not_crash() {
    let ns = TestNamespace::new().await.unwrap();
    let api = ns.api::<Secret>();

    // Garbage before any replica starts: the first one replaces it with a new CA.
    let garbage = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(SECRET.to_owned()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(
            [("tls.crt", "garbage"), ("tls.key", "garbage")]
                .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
                .into(),
        ),
        ..Secret::default()
    };
    api.create(&PostParams::default(), &garbage).await.unwrap();
    let a = start(&ns).await;
    let repaired = api.get(SECRET).await.unwrap();
    assert!(text(&repaired, "tls.crt").starts_with("-----BEGIN CERTIFICATE-----"));
    assert!(text(&repaired, "ca.key").contains("PRIVATE KEY"));

    // Garbage while it runs: written again with what it serves.
    let served = a.current();
    let _running = run(&a);
    let mut corrupt = repaired.clone();
    corrupt
        .data
        .as_mut()
        .unwrap()
        .insert("tls.crt".to_owned(), ByteString(b"garbage".to_vec()));
    api.replace(SECRET, &PostParams::default(), &corrupt)
        .await
        .unwrap();
    let fixed = eventually("the corrupted Secret to be replaced", WITHIN, async || {
        let secret = api.get(SECRET).await.unwrap();
        (text(&secret, "tls.crt") != "garbage").then_some(secret)
    })
    .await;
    assert_eq!(text(&fixed, "tls.crt"), text(&repaired, "tls.crt"));
    assert_eq!(text(&fixed, "ca.crt"), text(&repaired, "ca.crt"));
    assert_eq!(a.current(), served);

    // And a replica starting now reads it as it is.
    let b = start(&ns).await;
    assert_eq!(b.current(), served);
}

/// Issue 33: an operator run locally with a kubeconfig that names no namespace looked for its
/// certificate Secret in `default`, where it may not read Secrets, and retried the 403 forever
/// without saying where the Secret was or how to move it. Now the manager stops with one error
/// that names the Secret, its namespace and the flag.
#[tokio::test]
async fn a_forbidden_certificate_secret_should_stop_the_manager_naming_it_and_the_flag() {
    use kubeforge::manager::Manager;
    use kubeforge::webhook::WebhookOptions;

    let ns = TestNamespace::new().await.unwrap();
    let plane = kubeforge::testing::ControlPlane::shared().unwrap();
    // A ServiceAccount without any role, through a kubeconfig that names no namespace.
    let client = plane
        .service_account_client(ns.name(), "no-secrets")
        .await
        .unwrap();
    assert_eq!(client.default_namespace(), "default");
    let name = format!("forbidden-{}", ns.name());
    let options = WebhookOptions::new(&name)
        .port(0)
        .bind_address("127.0.0.1".parse().unwrap())
        .manage_configurations(false)
        .serve::<crate::webhooks::Gadget>();
    let manager = Manager::new(client).webhooks(options);
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let outcome = tokio::time::timeout(Duration::from_secs(60), manager.run_until(shutdown))
        .await
        .expect("the manager kept retrying a refusal");
    let error = outcome.unwrap_err().to_string();
    let secret = format!("get Secret default/{name}-webhook-cert: 403 Forbidden: ");
    assert!(error.contains(&secret), "{error}");
    assert!(
        error.contains("--webhook-cert-secret NAMESPACE/NAME (env WEBHOOK_CERT_SECRET"),
        "{error}"
    );
    assert!(!error.contains("Status {"), "{error}");
}
