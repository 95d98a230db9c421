//! `StaticSite`, the book's complete operator with a plain `reconcile` (docs/src/controllers.md),
//! in this file (its `main` is `src/bin/static_site.rs`): each StaticSite becomes a ConfigMap
//! holding its pages, owned by it; its status says whether the pages are published, with a
//! phase, a `Ready` condition and the generation it reflects.

// ANCHOR: static_site
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kubeforge::BoxError;
use kubeforge::crd::{Conditions, READY};
use kubeforge::k8s_openapi::api::core::v1::ConfigMap;
use kubeforge::kube::core::PartialObjectMeta;
use kubeforge::prelude::*;
use kubeforge::serde_json::{self, json};

/// A set of pages served as they are.
#[kubeforge::custom_resource(
    group = "apps.kubeforge.dev", version = "v1", kind = "StaticSite", namespaced,
    status = StaticSiteStatus,
    printcolumn(name = "Phase", json_path = ".status.phase", type = "string"),
    rule(cel = "self.index in self.pages", message = "index must name one of the pages"),
)]
#[derive(Clone, Debug, PartialEq)]
pub struct StaticSiteSpec {
    /// The pages: file name to content.
    #[validate(min_properties = 1, max_properties = 64)]
    pub pages: BTreeMap<String, String>,
    /// The page served for `/` (the apiserver stores the default in objects without one).
    #[serde(default)]
    #[validate(default = "index.html")]
    pub index: String,
}

/// The observed state of a StaticSite.
#[kubeforge::schema]
#[derive(Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StaticSiteStatus {
    /// Where the site is: `Pending`, `Published` or `Blocked`.
    #[serde(default)]
    pub phase: Phase,
    /// The `metadata.generation` this status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`: the pages of this generation are published.
    #[serde(default)]
    pub conditions: Conditions,
}

/// Where a StaticSite is.
#[kubeforge::schema]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Phase {
    /// Not reconciled yet.
    #[default]
    Pending,
    /// The pages are in the site's ConfigMap.
    Published,
    /// Another object holds the ConfigMap's name.
    Blocked,
}

/// Publishes each StaticSite's pages in a ConfigMap `<name>-pages`.
pub struct StaticSiteController;

// The ConfigMaps' data is never read back: the cache keeps their metadata only, which says
// whose each one is.
#[kubeforge::controller(for = StaticSite, owns(ConfigMap(metadata)), predicates(generation_changed))]
impl StaticSiteController {
    async fn reconcile(
        &self,
        site: Arc<StaticSite>,
        ctx: &Context<StaticSite>,
    ) -> Result<Action, BoxError> {
        let name = format!("{}-pages", site.name_any());
        // The name may be taken: a ConfigMap that does not name this site as its owner.
        // ANCHOR: metadata_read
        let here = Lookup::scope(ctx.key().namespace.as_deref());
        let configmaps = ctx.cache().store::<PartialObjectMeta<ConfigMap>>(&here)?;
        let key = ObjectKey::namespaced(site.namespace().unwrap_or_default(), &name);
        let ours = |cm: &PartialObjectMeta<ConfigMap>| {
            let owners = cm.owner_references();
            owners.iter().any(|o| Some(&o.uid) == site.uid().as_ref())
        };
        // Not in the cache: it may not have seen a ConfigMap made a moment ago, so ask the
        // apiserver (an apply would take someone else's over).
        let found = match configmaps.get(&key).await? {
            Some(cm) => Some(cm.as_ref().clone()),
            None => ctx.api::<ConfigMap>().get_metadata_opt(&name).await?,
        };
        let taken = found.is_some_and(|cm| !ours(&cm));
        // ANCHOR_END: metadata_read

        let (phase, message) = if taken {
            (Phase::Blocked, format!("{name} exists and is not ours"))
        } else {
            let pages: ConfigMap = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": name },
                "data": site.spec.pages,
            }))?;
            ctx.apply_owned(site.as_ref(), MANAGER, pages).await?;
            let count = site.spec.pages.len();
            (Phase::Published, format!("{count} pages in {name}"))
        };

        let generation = site.metadata.generation.unwrap_or_default();
        let mut status = site.status.clone().unwrap_or_default();
        status.phase = phase;
        status.observed_generation = Some(generation);
        let published = phase == Phase::Published;
        let reason = if published { "Published" } else { "NameTaken" };
        let conditions = &mut status.conditions;
        conditions.mark(READY, published, reason, &message, generation);
        if site.status.as_ref() != Some(&status) {
            let patch = Patch::Merge(json!({ "status": status }));
            ctx.patch_status(&patch).await?;
        }
        // A blocked site looks again later: the ConfigMap in its way is not the site's, so its
        // events do not reconcile the site.
        let later = Action::RequeueAfter(Duration::from_secs(30));
        Ok(if published { Action::Done } else { later })
    }
}

/// The field manager of the operator's writes.
const MANAGER: &str = "static-site-operator";
// ANCHOR_END: static_site
