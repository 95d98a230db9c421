//! [`WebhookCleanup`]: the shared plane as a test found it, after a test that ran webhooks.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};

use super::TestNamespace;

/// Undoes, when dropped, what a manager serving webhooks leaves on the shared plane, so that no
/// later test meets a webhook at the port of a manager that is gone: deletes the validating and
/// mutating configurations named `name`, and points the conversion of each CRD given to
/// [`WebhookCleanup::conversion`] back at the unconfigured endpoint (a Service that does not
/// exist: requests that need a conversion fail loudly, as on a plane no operator has
/// configured; nothing is converted lossily). A manager leaves them on purpose when it stops (see `kubeforge::webhook`); a test
/// does not.
///
/// Runs at the end of the test and while it unwinds from a panic (make it after the
/// [`TestNamespace`], so it is dropped first: a namespace whose objects a dead webhook
/// validates could not be deleted otherwise).
///
/// ```no_run
/// use kubeforge::testing::{TestNamespace, WebhookCleanup};
///
/// # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
/// let ns = TestNamespace::new().await?;
/// let name = format!("wh-{}", ns.name());
/// let _cleanup = WebhookCleanup::new(&ns, &name).conversion("webapps.apps.kubeforge.dev");
/// // ... run a manager with `WebhookOptions::new(&name)` ...
/// # Ok(()) }
/// ```
pub struct WebhookCleanup {
    config: kube::Config,
    name: String,
    crds: Vec<String>,
}

impl std::fmt::Debug for WebhookCleanup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookCleanup")
            .field("name", &self.name)
            .field("crds", &self.crds)
            .finish_non_exhaustive()
    }
}

impl WebhookCleanup {
    /// Removes the configurations named `name` (the `WebhookOptions`' name) when dropped.
    #[must_use]
    pub fn new(ns: &TestNamespace, name: &str) -> Self {
        Self {
            config: ns.config().clone(),
            name: name.to_owned(),
            crds: Vec::new(),
        }
    }

    /// Also points the conversion of the CRD named `crd` back at the unconfigured endpoint.
    #[must_use]
    pub fn conversion(mut self, crd: &str) -> Self {
        self.crds.push(crd.to_owned());
        self
    }

    async fn clean(config: kube::Config, name: &str, crds: &[String]) -> Result<(), String> {
        let client = Client::try_from(config).map_err(|e| e.to_string())?;
        let gone = |r: kube::Result<()>| match r {
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            other => other.map_err(|e| e.to_string()),
        };
        let params = DeleteParams::default();
        gone(
            Api::<ValidatingWebhookConfiguration>::all(client.clone())
                .delete(name, &params)
                .await
                .map(|_| ()),
        )?;
        gone(
            Api::<MutatingWebhookConfiguration>::all(client.clone())
                .delete(name, &params)
                .await
                .map(|_| ()),
        )?;
        let api = Api::<CustomResourceDefinition>::all(client);
        for crd in crds {
            let Some(live) = api.get_opt(crd).await.map_err(|e| e.to_string())? else {
                continue;
            };
            let unconfigured = crate::crd::conversion::unconfigured(&live);
            let service = unconfigured
                .webhook
                .and_then(|w| w.client_config)
                .and_then(|c| c.service);
            let patch = serde_json::json!({ "spec": { "conversion": {
                "strategy": unconfigured.strategy,
                "webhook": { "clientConfig": {
                    "url": null,
                    "service": service,
                    "caBundle": null,
                } },
            } } });
            gone(
                api.patch(crd, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|_| ()),
            )?;
        }
        Ok(())
    }
}

impl Drop for WebhookCleanup {
    fn drop(&mut self) {
        // The test's runtime may be shutting down (or the test unwinding): a thread of our own
        // with its own runtime and client, as `TestNamespace` does.
        let config = self.config.clone();
        let name = std::mem::take(&mut self.name);
        let crds = std::mem::take(&mut self.crds);
        let outcome = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(Self::clean(config, &name, &crds))
        })
        .join();
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(message)) => eprintln!("kubeforge::testing: webhook clean-up: {message}"),
            Err(_) => eprintln!("kubeforge::testing: webhook clean-up thread panicked"),
        }
    }
}
