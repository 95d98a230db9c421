//! [`WebhookCleanup`]: the shared plane as a test found it, after a test that ran webhooks.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client};

use super::TestNamespace;

/// Undoes, when dropped, what a manager serving webhooks leaves on the shared plane, so that no
/// later test meets a webhook at the port of a manager that is gone: deletes the validating and
/// mutating configurations named `name`, and points the conversion of each CRD given to
/// [`WebhookCleanup::conversion`] back at the unconfigured endpoint (a Service that does not
/// exist: requests that need a conversion fail loudly, as on a plane no operator has
/// configured; nothing is converted lossily), after deleting the test namespace's objects of
/// that CRD (a namespace holding objects whose conversion is gone could not be deleted, nor, on
/// the plane, any other). A manager leaves its webhooks on purpose when it stops (see
/// `kubeforge::webhook`); a test does not.
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
    namespace: String,
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
            namespace: ns.name().to_owned(),
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

    async fn clean(
        config: kube::Config,
        namespace: &str,
        name: &str,
        crds: &[String],
    ) -> Result<(), String> {
        let client = Client::try_from(config).map_err(|e| e.to_string())?;
        let gone = |r: kube::Result<()>| ignore_gone(r).map_err(|e| e.to_string());
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
        let api = Api::<CustomResourceDefinition>::all(client.clone());
        for crd in crds {
            let Some(live) = api.get_opt(crd).await.map_err(|e| e.to_string())? else {
                continue;
            };
            let emptied = empty_namespace(&client, &live, namespace).await;
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
            emptied?;
        }
        Ok(())
    }
}

/// Deletes the objects of the namespaced `crd` in `namespace` (their finalizers removed first:
/// no operator runs to remove them) and waits until they are gone.
///
/// Why: once the conversion is unconfigured, a read of such an object through any version but
/// the one it is stored in fails. The namespace controller reads every namespace's objects
/// through the kind's preferred version, and the apiserver's cache of that version cannot fill
/// while one of them is left, so no namespace on the plane could be deleted any more. Requests at
/// the storage version need no conversion (objects are stored at it, unless a test changed the
/// storage version without migrating).
async fn empty_namespace(
    client: &Client,
    crd: &CustomResourceDefinition,
    namespace: &str,
) -> Result<(), String> {
    if crd.spec.scope != "Namespaced" {
        return Ok(());
    }
    let Some(storage) = crd.spec.versions.iter().find(|v| v.storage) else {
        return Ok(());
    };
    let resource = ApiResource {
        group: crd.spec.group.clone(),
        version: storage.name.clone(),
        api_version: format!("{}/{}", crd.spec.group, storage.name),
        kind: crd.spec.names.kind.clone(),
        plural: crd.spec.names.plural.clone(),
    };
    let what = format!("{} in {namespace}", resource.plural);
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource);
    let unfinalized = serde_json::json!({ "metadata": { "finalizers": null } });
    let deadline = tokio::time::Instant::now() + CLEAN_UP_TIMEOUT;
    loop {
        let left = api
            .list(&ListParams::default())
            .await
            .map_err(|e| format!("listing {what}: {e}"))?;
        if left.items.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "{} {what} still there after {CLEAN_UP_TIMEOUT:?}",
                left.items.len()
            ));
        }
        for object in &left.items {
            let Some(object_name) = object.metadata.name.as_deref() else {
                continue;
            };
            if object
                .metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| !f.is_empty())
            {
                ignore_gone(
                    api.patch(
                        object_name,
                        &PatchParams::default(),
                        &Patch::Merge(&unfinalized),
                    )
                    .await
                    .map(|_| ()),
                )
                .map_err(|e| format!("removing the finalizers of {what}/{object_name}: {e}"))?;
            }
            if object.metadata.deletion_timestamp.is_none() {
                ignore_gone(
                    api.delete(object_name, &DeleteParams::default())
                        .await
                        .map(|_| ()),
                )
                .map_err(|e| format!("deleting {what}/{object_name}: {e}"))?;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// How long [`empty_namespace`] waits for the objects to go.
const CLEAN_UP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The label a manager watching one namespace puts in its webhooks' `namespaceSelector`.
const NAMESPACE_NAME: &str = "kubernetes.io/metadata.name";

/// What a [`TestNamespace`] does before it is deleted, whether or not its test made a
/// [`WebhookCleanup`]: the webhook configurations whose every webhook selects this namespace
/// alone (what a manager watching only it registers: they can serve nothing once it is gone)
/// are deleted, and the CRDs whose conversion points at one of those managers (the path
/// `/<configuration name>/convert/..`) are pointed back at the unconfigured endpoint, as
/// [`WebhookCleanup`] does. So a test that forgot its cleanup, or failed before reaching it,
/// leaves no `Fail` webhook and no conversion at a closed port behind.
pub(super) async fn sweep(
    client: &Client,
    config: kube::Config,
    namespace: &str,
) -> Result<(), String> {
    let mut names =
        namespaced_configurations::<ValidatingWebhookConfiguration>(client, namespace, |c| {
            c.webhooks
                .iter()
                .flatten()
                .map(|w| w.namespace_selector.clone())
                .collect()
        })
        .await?;
    for name in namespaced_configurations::<MutatingWebhookConfiguration>(client, namespace, |c| {
        c.webhooks
            .iter()
            .flatten()
            .map(|w| w.namespace_selector.clone())
            .collect()
    })
    .await?
    {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    if names.is_empty() {
        return Ok(());
    }
    let crds = Api::<CustomResourceDefinition>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing CRDs: {e}"))?;
    for name in names {
        let prefix = format!("/{name}/");
        let converted: Vec<String> = crds
            .items
            .iter()
            .filter(|crd| {
                let client_config = crd
                    .spec
                    .conversion
                    .as_ref()
                    .and_then(|c| c.webhook.as_ref())
                    .and_then(|w| w.client_config.as_ref());
                client_config.is_some_and(|c| {
                    let url_path = c
                        .url
                        .as_deref()
                        .and_then(|u| u.split_once("://"))
                        .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]));
                    let service_path = c.service.as_ref().and_then(|s| s.path.as_deref());
                    url_path
                        .or(service_path)
                        .is_some_and(|p| p.starts_with(&prefix))
                })
            })
            .filter_map(|crd| crd.metadata.name.clone())
            .collect();
        WebhookCleanup::clean(config.clone(), namespace, &name, &converted).await?;
    }
    Ok(())
}

/// The names of the webhook configurations of kind `C` whose webhooks (their namespace
/// selectors, by `selectors`) are not none and each selects exactly `namespace` by its name label.
async fn namespaced_configurations<C>(
    client: &Client,
    namespace: &str,
    selectors: impl Fn(&C) -> Vec<Option<LabelSelector>>,
) -> Result<Vec<String>, String>
where
    C: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let listed = Api::<C>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing {}s: {e}", C::kind(&())))?;
    Ok(listed
        .items
        .iter()
        .filter(|config| {
            let selectors = selectors(config);
            !selectors.is_empty()
                && selectors.iter().all(|selector| {
                    selector
                        .as_ref()
                        .and_then(|s| s.match_labels.as_ref())
                        .and_then(|labels| labels.get(NAMESPACE_NAME))
                        .is_some_and(|named| named == namespace)
                })
        })
        .filter_map(|config| config.meta().name.clone())
        .collect())
}

fn ignore_gone(result: kube::Result<()>) -> kube::Result<()> {
    match result {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other,
    }
}

impl Drop for WebhookCleanup {
    fn drop(&mut self) {
        // The test's runtime may be shutting down (or the test unwinding): a thread of our own
        // with its own runtime and client, as `TestNamespace` does.
        let config = self.config.clone();
        let namespace = std::mem::take(&mut self.namespace);
        let name = std::mem::take(&mut self.name);
        let crds = std::mem::take(&mut self.crds);
        let outcome = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(Self::clean(config, &namespace, &name, &crds))
        })
        .join();
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(message)) => eprintln!("kubeforge::testing: webhook clean-up: {message}"),
            Err(_) => eprintln!("kubeforge::testing: webhook clean-up thread panicked"),
        }
    }
}
