use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::{Api, Client, Resource};

use super::{ControlPlane, TestingError};

/// Label put on every namespace the harness creates, so leftovers can be found.
pub const TEST_NAMESPACE_LABEL: &str = "kubeforge.dev/test-namespace";

/// A fresh namespace on the shared control plane, with an admin client; deleted on drop.
///
/// Dropping it deletes the namespace (in the background: the namespace controller finishes the
/// job), also when the test panics. Nothing waits for the deletion to complete. Before that it
/// removes what a manager watching only this namespace registered and left behind: its webhook
/// configurations, and the conversion of the CRDs that point at it (see [`super::WebhookCleanup`],
/// which a test that runs such a manager need not make any more).
///
/// # Examples
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kubeforge::testing::TestNamespace;
///
/// # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
/// let ns = TestNamespace::new().await?;
/// let cm: ConfigMap = serde_json::from_value(serde_json::json!({
///     "metadata": { "name": "settings" },
///     "data": { "mode": "fast" },
/// }))?;
/// ns.api::<ConfigMap>().create(&Default::default(), &cm).await?;
/// # Ok(()) }
/// ```
pub struct TestNamespace {
    name: String,
    client: Client,
    config: kube::Config,
}

impl std::fmt::Debug for TestNamespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestNamespace")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl TestNamespace {
    /// Creates a uniquely named namespace on [`ControlPlane::shared`].
    ///
    /// # Errors
    ///
    /// Fails when the control plane is unavailable or the namespace cannot be created.
    pub async fn new() -> Result<Self, TestingError> {
        let plane = ControlPlane::shared()?;
        let config = plane.config().await?;
        let client = plane.client().await?;
        let name = unique_name();
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some([(TEST_NAMESPACE_LABEL.to_owned(), "true".to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .map_err(TestingError::api(format!("creating namespace {name}")))?;
        Ok(Self {
            name,
            client,
            config,
        })
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The admin client's configuration (for a client on another runtime).
    pub(crate) fn config(&self) -> &kube::Config {
        &self.config
    }

    /// An admin client (bound to the Tokio runtime of the test that created this value).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// An [`Api`] for a namespaced kind in this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        // The test's runtime may be shutting down (or the test may be unwinding), so delete on a
        // thread of our own with its own runtime and client.
        let name = std::mem::take(&mut self.name);
        let config = self.config.clone();
        let outcome = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async move {
                let client = Client::try_from(config.clone()).map_err(|e| e.to_string())?;
                // A failed sweep is reported; the namespace is deleted all the same.
                if let Err(error) = super::webhooks::sweep(&client, config, &name).await {
                    eprintln!("kubeforge::testing: removing the webhooks of test namespace {name}: {error}");
                }
                match Api::<Namespace>::all(client)
                    .delete(&name, &DeleteParams::background())
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
                    Err(e) => Err(format!("deleting test namespace {name}: {e}")),
                }
            })
        })
        .join();
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(message)) => eprintln!("kubeforge::testing: {message}"),
            Err(_) => eprintln!("kubeforge::testing: namespace clean-up thread panicked"),
        }
    }
}

fn unique_name() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let random = kubeforge_shared::random::Rng::from_clock().next_u64();
    // pid + counter make names unique within a run; the random part keeps reruns from colliding
    // with namespaces of an earlier run that are still terminating.
    format!("kf-{}-{n}-{:x}", std::process::id(), random & 0xfffff)
}

#[cfg(test)]
mod tests {
    use super::unique_name;

    #[test]
    fn unique_name_should_be_a_valid_distinct_dns_label() {
        let a = unique_name();
        let b = unique_name();
        assert_ne!(a, b);
        for name in [a, b] {
            assert!(name.len() <= 63, "{name}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{name}"
            );
        }
    }
}
