//! Watching the CRDs whose conversion the webhook server answers: a CRD applied again (its
//! manifest names the operator's Service, a locally run operator serves at a URL), replaced or
//! edited by hand wakes the configurer at once, instead of converting through a missing
//! endpoint until the next periodic re-apply.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, WebhookClientConfig,
};
use kube::api::{WatchEvent, WatchParams};
use kube::{Api, Client, ResourceExt};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How long one watch request lasts before the apiserver ends it and it is made again.
const WATCH_SECONDS: u32 = 290;

/// Watches the CRD `name` until `shutdown`, and wakes `wake` whenever it exists and its
/// conversion does not name `wanted`'s endpoint (its CA bundle aside: the configurer applies a
/// new bundle itself). Errors end one watch; the next starts after a backoff, from the current
/// state.
pub(super) async fn watch_endpoint(
    client: Client,
    name: String,
    wanted: WebhookClientConfig,
    wake: Arc<Notify>,
    shutdown: CancellationToken,
) {
    let api = Api::<CustomResourceDefinition>::all(client);
    let params = WatchParams::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(WATCH_SECONDS);
    let mut delay = Duration::from_millis(200);
    // "0": the first events are the current state, so a CRD that is already wrong wakes too.
    let mut version = "0".to_owned();
    loop {
        let watched = tokio::select! {
            watched = api.watch(&params, &version) => watched,
            () = shutdown.cancelled() => return,
        };
        match watched {
            Ok(events) => {
                let mut events = std::pin::pin!(events);
                let mut quiet = true;
                loop {
                    let event = tokio::select! {
                        event = events.next() => event,
                        () = shutdown.cancelled() => return,
                    };
                    match event {
                        Some(Ok(WatchEvent::Added(crd) | WatchEvent::Modified(crd))) => {
                            quiet = false;
                            version = crd.resource_version().unwrap_or_else(|| "0".to_owned());
                            if !names(&crd, &wanted) {
                                tracing::info!(crd = %name, "the CRD's conversion endpoint changed; pointing it back");
                                wake.notify_one();
                            }
                        }
                        Some(Ok(WatchEvent::Deleted(crd))) => {
                            version = crd.resource_version().unwrap_or_else(|| "0".to_owned());
                        }
                        Some(Ok(WatchEvent::Bookmark(mark))) => {
                            version = mark.metadata.resource_version;
                        }
                        Some(Ok(WatchEvent::Error(error))) => {
                            // Mostly `410 Gone`: start again from the current state.
                            tracing::debug!(crd = %name, %error, "CRD watch ended");
                            version = "0".to_owned();
                            break;
                        }
                        Some(Err(error)) => {
                            tracing::debug!(crd = %name, %error, "CRD watch failed");
                            break;
                        }
                        None => break,
                    }
                }
                if !quiet {
                    delay = Duration::from_millis(200);
                    continue;
                }
            }
            Err(error) => {
                tracing::warn!(crd = %name, %error, retry_in = ?delay, "watching the CRD failed");
            }
        }
        // A failed watch, or one that ended without an event: wait before the next.
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = shutdown.cancelled() => return,
        }
        delay = (delay * 2).min(Duration::from_secs(30));
    }
}

/// Whether `crd` converts through a webhook at `wanted`'s endpoint.
fn names(crd: &CustomResourceDefinition, wanted: &WebhookClientConfig) -> bool {
    crd.spec
        .conversion
        .as_ref()
        .filter(|c| c.strategy == "Webhook")
        .and_then(|c| c.webhook.as_ref())
        .and_then(|w| w.client_config.as_ref())
        .is_some_and(|have| crate::crd::repoint::same_endpoint(have, wanted))
}
