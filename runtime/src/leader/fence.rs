//! The leadership gate, and a client that refuses to write once this replica's leadership is no
//! longer valid.
//!
//! Controllers check the [`Gate`] before each reconcile, but a reconcile that passed the check can
//! stall (a paused VM, SIGSTOP, a long stop-the-world) and resume after another replica took
//! over. The fenced client checks again as each write leaves: requests other than reads
//! (`GET`, `HEAD`, `OPTIONS`) fail with [`NotLeader`] instead of reaching the apiserver.
//!
//! What no client-side fence can rule out: a write that passed the check just before the
//! process was frozen, still on its way to the socket (queued for the HTTP/2 connection's task),
//! reaches the apiserver when the process thaws. Only a token the server checks could refuse it,
//! and the Kubernetes API has none. The fence keeps that window as narrow as it can and makes it
//! auditable: a write that passes is logged (`debug`, target `kubeforge::leader::fence`) and
//! checked once more before it is handed on, so every write that leaves after a freeze was logged
//! before it.

use std::sync::{Arc, RwLock};

use http::{Method, Request};
use kube::Client;
use kube::client::Body;
use tower::BoxError;

/// Whether this replica may act now: open until a leader elector installs its check (the
/// manager does so when it runs with leader election), then open only while the lease is valid.
/// Cheap to clone; clones share the check.
#[derive(Clone, Default)]
pub struct Gate {
    check: Arc<RwLock<Option<Check>>>,
}

type Check = Arc<dyn Fn() -> bool + Send + Sync>;

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("elected", &self.read().is_some())
            .field("allows", &self.allows())
            .finish()
    }
}

impl Gate {
    /// A gate that allows everything until a check is installed.
    pub fn open() -> Self {
        Self::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Option<Check>> {
        self.check.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether this replica may reconcile and write now.
    pub fn allows(&self) -> bool {
        self.read().as_ref().is_none_or(|check| check())
    }

    /// From now on, allow only what `check` allows (for example `elector.lease_valid()`).
    pub(crate) fn install(&self, check: impl Fn() -> bool + Send + Sync + 'static) {
        *self.check.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(check));
    }
}

/// A write refused because this replica does not (or no longer) hold a valid leader lease.
///
/// A reconcile sees it as [`kube::Error::Service`]; the controller retries the key later, and
/// if leadership was lost the manager stops anyway.
#[derive(Debug, thiserror::Error)]
#[error("write refused: this replica does not hold a valid lease (leader or shard member)")]
pub struct NotLeader;

impl NotLeader {
    /// Whether `error` is a write the fenced client refused (named by
    /// [`name_error`](crate::client::name_error) or not).
    pub fn is(error: &kube::Error) -> bool {
        let kube::Error::Service(e) = error else {
            return false;
        };
        e.is::<NotLeader>()
            || e.downcast_ref::<crate::client::RequestFailed>()
                .is_some_and(|named| named.source.is::<NotLeader>())
    }
}

/// `client`, with every write checked against `gate` just before it is sent.
pub fn fenced(client: Client, gate: Gate) -> Client {
    let default_namespace = client.default_namespace().to_owned();
    let service = tower::service_fn(move |request: Request<Body>| {
        let allowed = is_read(request.method()) || passes(&gate, &request);
        let client = client.clone();
        async move {
            if !allowed {
                return Err(BoxError::from(NotLeader));
            }
            client.send(request).await.map_err(BoxError::from)
        }
    });
    Client::new(service, default_namespace)
}

/// Whether a write may leave: checked, logged, checked again. A process frozen after the log
/// line was written and thawed too late sends nothing (the second check fails); one frozen after
/// the second check sends a write it logged before the freeze.
fn passes(gate: &Gate, request: &Request<Body>) -> bool {
    if !gate.allows() {
        return false;
    }
    tracing::debug!(method = %request.method(), uri = %request.uri(), "write passed the fence");
    gate.allows()
}

fn is_read(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;
    use kube::api::{DeleteParams, Patch, PatchParams, PostParams};

    use super::*;

    fn fenced_offline(valid: &Arc<AtomicBool>) -> Api<ConfigMap> {
        // Nothing listens on port 9: a request that gets past the fence fails to connect.
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("static url"));
        let client = Client::try_from(config).expect("offline client");
        let valid = Arc::clone(valid);
        let gate = Gate::open();
        gate.install(move || valid.load(Ordering::SeqCst));
        Api::namespaced(fenced(client, gate), "ns")
    }

    #[tokio::test]
    async fn fenced_client_should_refuse_writes_only_while_the_gate_is_closed() {
        let valid = Arc::new(AtomicBool::new(false));
        let api = fenced_offline(&valid);
        let patch = Patch::Merge(serde_json::json!({}));
        let pp = PatchParams::default();

        let write = api.patch("a", &pp, &patch).await.expect_err("no leader");
        assert!(NotLeader::is(&write), "{write:?}");
        let create = api
            .create(&PostParams::default(), &ConfigMap::default())
            .await
            .expect_err("no leader");
        assert!(NotLeader::is(&create), "{create:?}");
        let delete = api
            .delete("a", &DeleteParams::default())
            .await
            .expect_err("no leader");
        assert!(NotLeader::is(&delete), "{delete:?}");
        let named = crate::client::name_error("delete ConfigMap ns/x", delete);
        assert!(NotLeader::is(&named), "{named:?}");
        // Reads pass the fence (and then fail to connect).
        let read = api.get("a").await.expect_err("nothing listens");
        assert!(!NotLeader::is(&read), "{read:?}");

        valid.store(true, Ordering::SeqCst);
        let write = api
            .patch("a", &pp, &patch)
            .await
            .expect_err("nothing listens");
        assert!(!NotLeader::is(&write), "{write:?}");
        // The inner client's error comes out as it was, not wrapped once more.
        assert!(
            matches!(&write, kube::Error::Service(e) if e.is::<hyper_util::client::legacy::Error>()),
            "transport errors keep their type through the fence: {write:?}"
        );
    }
}
