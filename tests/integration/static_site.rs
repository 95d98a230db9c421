//! The book's complete operator, StaticSite (`examples/src/static_site.rs`), against the real
//! apiserver: a site is published into its ConfigMap with its status (phase, observed
//! generation, `Ready`); a site whose ConfigMap name another object holds is blocked until the
//! name is free; the kind's CEL rule refuses an index that names no page.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kubeforge::crd::{ConditionStatus, READY};
use kubeforge::manager::Manager;
use kubeforge::testing::{TestNamespace, apply_crds};
use kubeforge_examples::static_site::{Phase, StaticSite, StaticSiteController, StaticSiteSpec};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{configmap, eventually, status_code};

fn site(name: &str, pages: &[(&str, &str)]) -> StaticSite {
    let pages: BTreeMap<String, String> = pages
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    StaticSite::new(
        name,
        StaticSiteSpec {
            pages,
            index: "index.html".to_owned(),
        },
    )
}

/// Waits until the site's status reflects `generation` with `phase`; returns the `Ready`
/// condition's status and reason.
async fn settled(
    ns: &TestNamespace,
    name: &str,
    generation: i64,
    phase: Phase,
) -> (ConditionStatus, String) {
    let what = format!("{name} to be {phase:?} at generation {generation}");
    // 60 s: a reconcile that read the cache just before an event (the freed name) is followed
    // by the blocked site's 30 s requeue.
    eventually(&what, Duration::from_secs(60), async || {
        let status = ns.api::<StaticSite>().get(name).await.ok()?.status?;
        let ready = status.conditions.get(READY)?;
        (status.phase == phase
            && status.observed_generation == Some(generation)
            && ready.observed_generation == Some(generation))
        .then(|| (ready.status, ready.reason.clone()))
    })
    .await
}

#[tokio::test]
async fn static_site_should_publish_its_pages_report_its_status_and_wait_for_a_taken_name() {
    let ns = TestNamespace::new().await.unwrap();
    apply_crds(&ns.client(), [StaticSite::crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let manager = Manager::new(ns.client())
        .namespace(Some(ns.name().to_owned()))
        .controller(StaticSiteController);
    let shutdown = CancellationToken::new();
    tokio::spawn(manager.run_until(shutdown.clone()));
    let sites = ns.api::<StaticSite>();

    // Published: the ConfigMap holds the pages, owned by the site.
    let home = site("home", &[("index.html", "<h1>hi</h1>")]);
    sites.create(&PostParams::default(), &home).await.unwrap();
    let ready = settled(&ns, "home", 1, Phase::Published).await;
    assert_eq!(ready, (ConditionStatus::True, "Published".to_owned()));
    let pages = ns.api::<ConfigMap>().get("home-pages").await.unwrap();
    assert_eq!(pages.data.unwrap()["index.html"], "<h1>hi</h1>");
    let owner = &pages.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("StaticSite", "home")
    );

    // A spec change: the next generation is published and reported.
    let more = json!({ "spec": { "pages": { "about.html": "<p>us</p>" } } });
    sites
        .patch("home", &PatchParams::default(), &Patch::Merge(more))
        .await
        .unwrap();
    settled(&ns, "home", 2, Phase::Published).await;
    let pages = ns.api::<ConfigMap>().get("home-pages").await.unwrap();
    assert_eq!(pages.data.unwrap().len(), 2);

    // Blocked: another object holds the name; it is left alone.
    ns.api::<ConfigMap>()
        .create(
            &PostParams::default(),
            &configmap("blog-pages", &[("mine", "yes")]),
        )
        .await
        .unwrap();
    let blog = site("blog", &[("index.html", "<h1>blog</h1>")]);
    sites.create(&PostParams::default(), &blog).await.unwrap();
    let ready = settled(&ns, "blog", 1, Phase::Blocked).await;
    assert_eq!(ready, (ConditionStatus::False, "NameTaken".to_owned()));
    let theirs = ns.api::<ConfigMap>().get("blog-pages").await.unwrap();
    assert_eq!(theirs.data.unwrap()["mine"], "yes");
    assert!(theirs.metadata.owner_references.is_none());

    // The name is freed; a change of the site reconciles it at once (else its requeue would).
    ns.api::<ConfigMap>()
        .delete("blog-pages", &DeleteParams::default())
        .await
        .unwrap();
    let edit = json!({ "spec": { "pages": { "feed.xml": "<rss/>" } } });
    sites
        .patch("blog", &PatchParams::default(), &Patch::Merge(edit))
        .await
        .unwrap();
    let ready = settled(&ns, "blog", 2, Phase::Published).await;
    assert_eq!(ready, (ConditionStatus::True, "Published".to_owned()));

    // The kind's CEL rule: the index must be one of the pages.
    let mut lost = site("lost", &[("a.html", "a")]);
    lost.spec.index = "index.html".to_owned();
    assert_eq!(
        status_code(sites.create(&PostParams::default(), &lost).await),
        422
    );
    shutdown.cancel();
}
