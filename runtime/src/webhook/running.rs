//! The webhook server as a part of the manager: binds at start, then on every replica gets its
//! certificate, serves, keeps the configurations applied with the current CA bundle, and answers
//! the `webhook` readiness check.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::Client;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::certs::{CertSource, SelfSigned, ServingCerts};
use super::config::{Configurations, Endpoint};
use super::server::{Handler, Route, Server, WebhookMetrics, probe};
use super::{
    KindConversions, KindWebhooks, WebhookEndpoint, WebhookOptions, registered,
    registered_conversions,
};
use crate::BoxError;
use crate::health::{Check, check};
use crate::runner::Runnable;

/// What `start` found to serve: the runnable and its readiness check.
pub(crate) struct Started {
    pub(crate) local: SocketAddr,
    pub(crate) runnable: Arc<dyn Runnable>,
}

/// Binds the webhook server of the registered kinds (`None` when no kind has a webhook).
///
/// # Errors
///
/// The address cannot be bound.
pub(crate) async fn start(
    options: &WebhookOptions,
    primary: &[(String, String)],
    client: &Client,
    registry: &prometheus::Registry,
    namespaces: &crate::Namespaces,
) -> std::io::Result<Option<Started>> {
    let kinds: Vec<KindWebhooks> = registered()
        .into_iter()
        .filter(|k| options.serves(k.group, k.kind, primary))
        .collect();
    let conversions: Vec<KindConversions> = registered_conversions()
        .into_iter()
        .filter(|c| options.serves(c.hub.group, c.hub.kind, primary))
        .collect();
    if kinds.is_empty() && conversions.is_empty() {
        tracing::debug!("no served kind has a webhook; the webhook server is not started");
        return Ok(None);
    }
    let listener = TcpListener::bind(options.bind).await?;
    let local = listener.local_addr()?;
    let plan = Plan::new(options, client, namespaces, local);
    let routes = routes(&plan.configurations, &kinds, &conversions);
    tracing::info!(%local, endpoint = ?plan.configurations.endpoint, webhooks = routes.len(), "serving webhooks");
    let server = Server {
        routes,
        client: client.clone(),
        metrics: WebhookMetrics::new(registry),
        drops: Arc::new(super::kept::DropEvents::new(client.clone())),
    };
    let serving = Arc::new(WebhookRunnable {
        state: Arc::new(OnceLock::new()),
        run: Mutex::new(Some((
            listener,
            server,
            plan,
            Served { kinds, conversions },
            client.clone(),
        ))),
    });
    Ok(Some(Started {
        local,
        runnable: serving,
    }))
}

/// The routes, at the paths the configurations name (under the operator's name) and, for an
/// upgrade from a release whose configurations did not name it, at the bare paths too.
fn routes(
    configurations: &Configurations,
    kinds: &[KindWebhooks],
    conversions: &[KindConversions],
) -> HashMap<String, Route> {
    let mut routes = HashMap::new();
    let mut add = |path: String, route: Route| {
        routes.insert(configurations.path(&path), route.clone());
        routes.insert(path, route);
    };
    for kind in conversions {
        add(
            kind.kept_path(),
            Route {
                handler: Handler::Admission(
                    Arc::new(super::kept::KeptAnnotations(Arc::new(kind.clone()))),
                    None,
                ),
                timeout: Duration::from_secs(9),
                kind: kind.hub.kind.to_owned(),
            },
        );
        add(
            kind.path(),
            Route {
                handler: Handler::Conversion(Arc::new(kind.clone())),
                // The apiserver waits 30 s for a conversion.
                timeout: Duration::from_secs(25),
                kind: kind.hub.kind.to_owned(),
            },
        );
    }
    for kind in kinds {
        // Answer a second before the apiserver gives up.
        let timeout = Duration::from_secs(u64::from(kind.settings.timeout_seconds.max(2)) - 1);
        let version = super::HookVersion::of(kind.group, kind.kind, kind.version);
        let hooks = [
            (kind.validate_path(), &kind.hooks.validate),
            (kind.validate_delete_path(), &kind.hooks.validate_delete),
            (kind.mutate_path(), &kind.hooks.default),
        ];
        for (path, hook) in hooks {
            if let Some(hook) = hook {
                add(
                    path,
                    Route {
                        handler: Handler::Admission(Arc::clone(hook), version.clone()),
                        timeout,
                        kind: kind.kind.to_owned(),
                    },
                );
            }
        }
    }
    routes
}

/// Where the certificate comes from, where the apiserver calls, and what the readiness check
/// dials.
struct Plan {
    source: CertSource,
    /// Where the certificate Secret is and how to move it, for an error that will not pass.
    secret_hint: Option<String>,
    configurations: Configurations,
    manage: bool,
    /// The address and TLS server name the readiness check dials.
    probe: (SocketAddr, String),
}

impl Plan {
    fn new(
        options: &WebhookOptions,
        client: &Client,
        namespaces: &crate::Namespaces,
        local: SocketAddr,
    ) -> Self {
        let loopback = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), local.port());
        let (endpoint, names, ips, probe) = match &options.endpoint {
            Some(WebhookEndpoint::Service(ns, name)) => {
                let host = format!("{name}.{ns}.svc");
                let names = vec![host.clone(), format!("{host}.cluster.local")];
                let endpoint = Endpoint::Service {
                    namespace: ns.clone(),
                    name: name.clone(),
                    port: 443,
                };
                (endpoint, names, Vec::new(), (loopback, host))
            }
            Some(WebhookEndpoint::Url(base)) => url_plan(base, local),
            None => url_plan("https://127.0.0.1", local),
        };
        let (secret_namespace, origin) = match (&options.secret, &options.endpoint) {
            (Some((ns, _)), _) => (ns.clone(), SecretOrigin::Given),
            (None, Some(WebhookEndpoint::Service(ns, _))) => (ns.clone(), SecretOrigin::Service),
            (None, _) => (
                client.default_namespace().to_owned(),
                SecretOrigin::ClientDefault,
            ),
        };
        let secret_name = options.secret.as_ref().map_or_else(
            || format!("{}-webhook-cert", options.name),
            |(_, n)| n.clone(),
        );
        let secret_hint = options
            .cert_dir
            .is_none()
            .then(|| origin.hint(&secret_namespace, &secret_name));
        let source = match &options.cert_dir {
            Some(dir) => CertSource::Dir {
                path: dir.clone(),
                poll: options.check_interval.unwrap_or(Duration::from_secs(10)),
            },
            None => {
                let mut self_signed = SelfSigned::new(secret_namespace, secret_name)
                    .dns_names(names)
                    .ip_addresses(ips);
                if let Some(validity) = options.validity {
                    self_signed = self_signed.validity(validity);
                }
                if let Some(interval) = options.check_interval {
                    self_signed = self_signed.check_interval(interval);
                }
                CertSource::SelfSigned(self_signed)
            }
        };
        let namespace_selector = options
            .namespace_selector
            .clone()
            .or_else(|| namespaces.selector());
        Self {
            source,
            secret_hint,
            configurations: Configurations {
                name: options.name.clone(),
                endpoint,
                namespace_selector,
                ca_bundle: None,
            },
            manage: options.manage_configurations,
            probe,
        }
    }
}

/// Where the namespace of the certificate Secret came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SecretOrigin {
    /// `WebhookOptions::secret` (`--webhook-cert-secret`).
    Given,
    /// The namespace of the webhook Service.
    Service,
    /// The client's default namespace.
    ClientDefault,
}

impl SecretOrigin {
    /// Where Secret `namespace/name` is looked for and how to choose another place.
    fn hint(self, namespace: &str, name: &str) -> String {
        let why = match self {
            Self::Given => "where --webhook-cert-secret (WebhookOptions::secret) put it",
            Self::Service => {
                "the namespace of the webhook Service (--webhook-service); no --webhook-cert-secret"
            }
            Self::ClientDefault => {
                "the client's default namespace (the kubeconfig context's, in a cluster the pod's, \
                 else `default`); no --webhook-cert-secret"
            }
        };
        format!(
            "the webhook certificate Secret {name} is kept in namespace {namespace}: {why}. \
             Choose its place with --webhook-cert-secret NAMESPACE/NAME (env WEBHOOK_CERT_SECRET, \
             WebhookOptions::secret in code), or let the operator get, create and update Secrets \
             in {namespace}"
        )
    }
}

/// The webhook server cannot get its certificate and trying again will not help.
#[derive(Debug, thiserror::Error)]
#[error("webhook certificate unavailable: {}{}", crate::text::concise(.source), .hint.as_deref().map(|h| format!("; {h}")).unwrap_or_default())]
struct CertificateUnavailable {
    source: super::certs::CertError,
    /// Where the Secret is and how to move it, when the Secret is the problem.
    hint: Option<String>,
}

/// The endpoint, certificate names and probe target of a URL base (`https://host[:port]`;
/// without a port, the bound one).
fn url_plan(
    base: &str,
    local: SocketAddr,
) -> (Endpoint, Vec<String>, Vec<IpAddr>, (SocketAddr, String)) {
    let rest = base.trim_end_matches('/');
    let authority = rest.strip_prefix("https://").unwrap_or(rest);
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || authority.starts_with('[') => {
            match port.parse::<u16>() {
                Ok(port) => (host.to_owned(), port),
                Err(_) => (authority.to_owned(), local.port()),
            }
        }
        _ => (authority.to_owned(), local.port()),
    };
    let bare = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let url = format!("https://{host}:{port}");
    match bare.parse::<IpAddr>() {
        Ok(ip) => (
            Endpoint::Url(url),
            vec!["localhost".to_owned()],
            vec![ip],
            (SocketAddr::new(ip, port), bare),
        ),
        Err(_) => {
            let probe = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), local.port());
            (
                Endpoint::Url(url),
                vec![bare.clone()],
                Vec::new(),
                (probe, bare),
            )
        }
    }
}

/// What one server serves.
struct Served {
    kinds: Vec<KindWebhooks>,
    conversions: Vec<KindConversions>,
}

type Parts = (TcpListener, Server, Plan, Served, Client);

/// The certificate and probe target once serving.
struct Serving {
    certs: ServingCerts,
    probe: (SocketAddr, String),
}

struct WebhookRunnable {
    state: Arc<OnceLock<Serving>>,
    run: Mutex<Option<Parts>>,
}

impl Runnable for WebhookRunnable {
    fn run(&self, shutdown: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        let parts = self.run.lock().unwrap_or_else(|e| e.into_inner()).take();
        let state = Arc::clone(&self.state);
        async move {
            let Some((listener, server, plan, served, client)) = parts else {
                return Err("the webhook server can only be run once".into());
            };
            let Some(certs) = certificate(&plan, &client, &shutdown).await? else {
                return Ok(());
            };
            let tls = tokio_rustls::TlsAcceptor::from(certs.server_config());
            let _ = state.set(Serving {
                certs: certs.clone(),
                probe: plan.probe.clone(),
            });
            let keep_fresh = certs.clone().run(shutdown.clone());
            let configure = keep_configured(plan, served, client, certs, shutdown.clone());
            let serve = Arc::new(server).serve(listener, tls, shutdown.clone());
            let (fresh, (), ()) = tokio::join!(keep_fresh, configure, serve);
            fresh.map_err(BoxError::from)
        }
        .boxed()
    }

    fn health_checks(&self) -> Vec<(String, Check)> {
        let state = Arc::clone(&self.state);
        vec![(
            "webhook".to_owned(),
            check(move || {
                let state = Arc::clone(&state);
                async move {
                    let Some(serving) = state.get() else {
                        return Err("no serving certificate yet".to_owned());
                    };
                    let bundle = serving.certs.ca_bundle().borrow().clone();
                    let (addr, name) = &serving.probe;
                    match bundle {
                        Some(ca) => probe(*addr, name, &ca).await,
                        None => tokio::net::TcpStream::connect(addr)
                            .await
                            .map(|_| ())
                            .map_err(|e| format!("connect {addr}: {e}")),
                    }
                }
            }),
        )]
    }

    fn needs_leader_election(&self) -> bool {
        false
    }
}

/// Gets the serving certificate, retrying transient errors until `shutdown` (`None`); an error
/// that will not pass by trying again (a `403` on the Secret) fails the webhook server, and so
/// the manager, with where the Secret is and how to move it.
async fn certificate(
    plan: &Plan,
    client: &Client,
    shutdown: &CancellationToken,
) -> Result<Option<ServingCerts>, CertificateUnavailable> {
    let mut delay = Duration::from_millis(200);
    loop {
        match ServingCerts::start(plan.source.clone(), Some(client.clone())).await {
            Ok(certs) => return Ok(Some(certs)),
            Err(source) if !source.is_transient() => {
                let hint = matches!(source, super::certs::CertError::Secret { .. })
                    .then(|| plan.secret_hint.clone())
                    .flatten();
                return Err(CertificateUnavailable { source, hint });
            }
            Err(error) => {
                let error = crate::text::concise(&error);
                tracing::error!(%error, retry_in = ?delay, "webhook certificate unavailable; retrying");
            }
        }
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = shutdown.cancelled() => return Ok(None),
        }
        delay = (delay * 2).min(Duration::from_secs(30));
    }
}

/// How often the configurations are applied again although the bundle did not change: repairs
/// a configuration deleted by hand. (A CRD whose conversion endpoint changes is repaired when
/// its watch sees it.)
const REAPPLY_EVERY: Duration = Duration::from_secs(60);

/// Applies the configurations with the current CA bundle, again whenever it changes, whenever a
/// converted kind's CRD stops naming this server's endpoint, and every [`REAPPLY_EVERY`], until
/// `shutdown`; retries failures with backoff.
///
/// Nothing is removed on shutdown, in any mode: while the operator is down the apiserver fails
/// the requests these webhooks answer (a `Fail` webhook refuses them, a conversion cannot be
/// done) instead of admitting what the webhooks would refuse or storing an object whose other
/// version's fields were dropped.
async fn keep_configured(
    plan: Plan,
    served: Served,
    client: Client,
    certs: ServingCerts,
    shutdown: CancellationToken,
) {
    if !plan.manage {
        return;
    }
    let mut configurations = plan.configurations;
    let mut bundle = certs.ca_bundle();
    let wake = Arc::new(tokio::sync::Notify::new());
    let watches = futures::future::join_all(served.conversions.iter().map(|kind| {
        let wanted = configurations
            .crd_conversion(kind)
            .webhook
            .and_then(|w| w.client_config)
            .unwrap_or_default();
        super::repair::watch_endpoint(
            client.clone(),
            kind.crd_name(),
            wanted,
            Arc::clone(&wake),
            shutdown.clone(),
        )
    }));
    let configure = async {
        loop {
            configurations.ca_bundle = bundle.borrow_and_update().clone();
            let mut delay = Duration::from_millis(200);
            let mut first = true;
            loop {
                let applied = async {
                    configurations
                        .apply(&client, &served.kinds, &served.conversions)
                        .await?;
                    configurations
                        .apply_conversions(&client, &served.conversions)
                        .await
                };
                match applied.await {
                    Ok(()) if first => {
                        tracing::info!(name = %configurations.name, "webhook configurations applied");
                        break;
                    }
                    Ok(()) => {
                        tracing::info!(name = %configurations.name, "webhook configurations applied after failures");
                        break;
                    }
                    Err(error) => {
                        tracing::warn!(%error, retry_in = ?delay, "applying the webhook configurations failed");
                    }
                }
                first = false;
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = shutdown.cancelled() => return,
                }
                delay = (delay * 2).min(Duration::from_secs(30));
            }
            tokio::select! {
                changed = bundle.changed() => if changed.is_err() { return },
                () = wake.notified() => {}
                () = tokio::time::sleep(REAPPLY_EVERY) => {}
                () = shutdown.cancelled() => return,
            }
        }
    };
    tokio::join!(configure, watches);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forbidden(namespace: &str, name: &str) -> super::super::certs::CertError {
        let status = kube::core::Status::failure(
            &format!(
                "secrets \"{name}\" is forbidden: User \"dev\" cannot get resource \"secrets\" \
                 in API group \"\" in the namespace \"{namespace}\""
            ),
            "Forbidden",
        )
        .with_code(403);
        super::super::certs::CertError::Secret {
            action: "get",
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source: Box::new(kube::Error::Api(Box::new(status))),
        }
    }

    /// Issue 33: a local operator whose kubeconfig names no namespace looked for its
    /// certificate Secret in `default` and retried its 403 forever, saying neither where nor how
    /// to move it.
    #[test]
    fn a_refused_secret_should_fail_naming_the_secret_its_namespace_and_the_flag() {
        let source = forbidden("default", "shop-webhook-cert");
        assert!(!source.is_transient());
        let error = CertificateUnavailable {
            source,
            hint: Some(SecretOrigin::ClientDefault.hint("default", "shop-webhook-cert")),
        };
        let text = error.to_string();
        assert!(
            text.starts_with(
                "webhook certificate unavailable: get Secret default/shop-webhook-cert: \
                 403 Forbidden: secrets \"shop-webhook-cert\" is forbidden: "
            ),
            "{text}"
        );
        for said in [
            "kept in namespace default: the client's default namespace",
            "--webhook-cert-secret NAMESPACE/NAME (env WEBHOOK_CERT_SECRET",
            "get, create and update Secrets in default",
        ] {
            assert!(text.contains(said), "{said:?} in {text}");
        }
        assert!(!text.contains("Status {"), "{text}");
    }

    #[test]
    fn only_refusals_and_bad_settings_should_stop_the_retries() {
        use super::super::certs::CertError;
        let status = |code| {
            kube::Error::Api(Box::new(
                kube::core::Status::failure("no", "Reason").with_code(code),
            ))
        };
        let secret = |source| CertError::Secret {
            action: "create",
            namespace: "ns".to_owned(),
            name: "cert".to_owned(),
            source: Box::new(source),
        };
        for code in [400, 401, 403, 404, 422] {
            assert!(!secret(status(code)).is_transient(), "{code}");
        }
        for code in [409, 429, 500, 503, 504] {
            assert!(secret(status(code)).is_transient(), "{code}");
        }
        assert!(secret(kube::Error::Service("connection refused".into())).is_transient());
        assert!(!CertError::NoClient.is_transient());
        assert!(!CertError::Config("poll must not be zero".to_owned()).is_transient());
    }

    #[test]
    fn url_plans_should_take_the_bound_port_unless_one_is_given() {
        let local: SocketAddr = "0.0.0.0:4321".parse().unwrap();
        let (endpoint, names, ips, probe) = url_plan("https://127.0.0.1", local);
        assert_eq!(endpoint, Endpoint::Url("https://127.0.0.1:4321".into()));
        assert_eq!(
            (names, ips),
            (
                vec!["localhost".to_owned()],
                vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]
            )
        );
        assert_eq!(probe.0, "127.0.0.1:4321".parse().unwrap());
        let (endpoint, names, _, probe) = url_plan("https://webhooks.example.com:8443/", local);
        assert_eq!(
            endpoint,
            Endpoint::Url("https://webhooks.example.com:8443".into())
        );
        assert_eq!(names, vec!["webhooks.example.com".to_owned()]);
        assert_eq!(
            probe,
            (
                "127.0.0.1:4321".parse().unwrap(),
                "webhooks.example.com".to_owned()
            )
        );
    }
}
