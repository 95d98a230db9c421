use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};

use super::TestingError;

/// Server-side applies each CRD (as field manager `kubeforge-testing`) and waits until all of them
/// are Established and every served version is listed by API discovery, so that objects of the new
/// kinds can be created right away and an operator that finds its kinds by discovery finds them.
///
/// Established alone is not enough for the second: the apiserver publishes a new group's discovery
/// document a little later (a `404` from `kube::discovery::pinned_kind` right after Established, on
/// a busy machine).
///
/// # Errors
///
/// Fails when the apiserver rejects a CRD (a non-structural schema, for example: the error carries
/// the apiserver's message), or when a CRD is not Established and discoverable within `timeout`.
///
/// # Examples
///
/// ```no_run
/// # use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
/// # async fn doc(client: kube::Client, crd: CustomResourceDefinition) -> Result<(), kubeforge::testing::TestingError> {
/// kubeforge::testing::apply_crds(&client, [crd], std::time::Duration::from_secs(30)).await?;
/// # Ok(()) }
/// ```
pub async fn apply_crds(
    client: &Client,
    crds: impl IntoIterator<Item = CustomResourceDefinition>,
    timeout: Duration,
) -> Result<(), TestingError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("kubeforge-testing").force();
    let deadline = tokio::time::Instant::now() + timeout;
    let mut names = Vec::new();
    let mut served = Vec::new();
    for mut crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        // Server-side apply wants apiVersion/kind in the body and no server-owned fields.
        crd.metadata.managed_fields = None;
        crd.metadata.resource_version = None;
        crd.status = None;
        // A conversion an operator configured (a manager of another test, on the shared plane)
        // is kept: the CRD's own is the unconfigured one, which would point it away.
        let live = api
            .get_opt(&name)
            .await
            .map_err(TestingError::api(format!("reading CRD {name}")))?;
        if let Some(live) = live {
            // A CRD of one version (`K::crd()`) applied where the live one converts through a
            // webhook (all versions applied, by another test): the live conversion is kept. Left
            // out, server-side apply would drop the `strategy` this field manager applied before
            // but keep a `webhook` another writer set since (an operator, a clean-up's merge
            // patch): a CRD the apiserver refuses (`spec.conversion.strategy: Required value`).
            let webhook = live
                .spec
                .conversion
                .as_ref()
                .is_some_and(|c| c.strategy == "Webhook");
            if (crd.spec.conversion.is_none() && webhook)
                || (configured(live.spec.conversion.as_ref())
                    && !configured(crd.spec.conversion.as_ref()))
            {
                crd.spec.conversion = live.spec.conversion;
            } else if crd.spec.conversion.is_some() && live.spec.conversion != crd.spec.conversion {
                // Another endpoint (a URL where the CRD's is a Service): a merge patch replaces
                // it, server-side apply would keep both (invalid).
                replace_conversion(&api, &name, crd.spec.conversion.as_ref()).await?;
            }
        }
        let body = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": crd.metadata,
            "spec": crd.spec,
        });
        api.patch(&name, &params, &Patch::Apply(body))
            .await
            .map_err(TestingError::api(format!("applying CRD {name}")))?;
        for version in crd.spec.versions.iter().filter(|v| v.served) {
            served.push((
                format!("{}/{}", crd.spec.group, version.name),
                crd.spec.names.plural.clone(),
            ));
        }
        names.push(name);
    }
    for name in names {
        let established = await_condition(api.clone(), &name, conditions::is_crd_established());
        match tokio::time::timeout_at(deadline, established).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                return Err(TestingError::Timeout {
                    what: format!("CRD {name} to be Established ({e})"),
                    after: timeout,
                });
            }
            Err(_) => {
                return Err(TestingError::Timeout {
                    what: format!("CRD {name} to be Established"),
                    after: timeout,
                });
            }
        }
    }
    for (group_version, plural) in served {
        discoverable(client, &group_version, &plural, deadline, timeout).await?;
    }
    Ok(())
}

/// Waits until the discovery document of `group_version` lists `plural`.
async fn discoverable(
    client: &Client,
    group_version: &str,
    plural: &str,
    deadline: tokio::time::Instant,
    timeout: Duration,
) -> Result<(), TestingError> {
    loop {
        let last = match client.list_api_group_resources(group_version).await {
            Ok(list) if list.resources.iter().any(|r| r.name == plural) => return Ok(()),
            Ok(_) => format!("{group_version} does not list {plural} yet"),
            Err(e) => e.to_string(),
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(TestingError::Timeout {
                what: format!("{plural}.{group_version} to be listed by discovery ({last})"),
                after: timeout,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether `conversion` is a webhook some operator configured (not the unconfigured one).
fn configured(
    conversion: Option<
        &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceConversion,
    >,
) -> bool {
    let config = conversion
        .and_then(|c| c.webhook.as_ref())
        .and_then(|w| w.client_config.as_ref());
    config.is_some_and(|c| !crate::crd::conversion::is_unconfigured(c))
}

/// Sets the conversion of the CRD `name` to `conversion`, whichever endpoint it had.
async fn replace_conversion(
    api: &Api<CustomResourceDefinition>,
    name: &str,
    conversion: Option<
        &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceConversion,
    >,
) -> Result<(), TestingError> {
    let patch = crate::crd::conversion::replacing_patch(conversion);
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(TestingError::api(format!(
            "replacing the conversion of CRD {name}"
        )))?;
    Ok(())
}
