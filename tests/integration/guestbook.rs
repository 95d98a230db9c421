//! The book's tutorial (`docs/src/tutorial.md`), step by step, against the real apiserver: the
//! Guestbook operator (`examples/src/guestbook.rs`) with its webhooks and its second version
//! (its RBAC is the generated one, checked for every operator with webhooks by
//! `faults::webhooks::the_operator_should_run_under_exactly_the_rbac_it_prints`). A Guestbook gets its page and `Ready`; an
//! untitled one is titled by the defaulter (with a warning); an update that rewrites history is
//! denied with the validator's message; one the markers forbid is refused by the apiserver; a v2
//! object reads through v1 and keeps its v2-only `theme` across a v1 write.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kubeforge::crd::{ConditionStatus, READY};
use kubeforge::manager::Manager;
use kubeforge::testing::{TestNamespace, WebhookCleanup, apply_crds};
use kubeforge::webhook::WebhookOptions;
use kubeforge_examples::guestbook::{Guestbook, GuestbookController, v2};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::eventually;

const CRD: &str = "guestbooks.tutorial.kubeforge.dev";

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, step by step: each step of the book's tutorial in order"
)]
async fn the_tutorials_operator_should_run_each_step_of_the_book() {
    let ns = TestNamespace::new().await.unwrap();
    let admin = ns.client();
    let crds = kubeforge::crd::crds()
        .unwrap()
        .into_iter()
        .filter(|c| c.spec.group == "tutorial.kubeforge.dev");
    apply_crds(&admin, crds, Duration::from_secs(30))
        .await
        .unwrap();
    let name = format!("guestbook-{}", ns.name());
    // Dropped last-but-one (before the namespace): no webhook of a stopped manager stays behind.
    let cleanup = WebhookCleanup::new(&ns, &name).conversion(CRD);
    let start = || {
        let webhooks = WebhookOptions::new(&name)
            .port(0)
            .url("https://127.0.0.1")
            .secret(ns.name(), "webhook-cert")
            .serve::<Guestbook>();
        let manager = Manager::new(admin.clone())
            .namespace(Some(ns.name().to_owned()))
            .webhooks(webhooks)
            .controller(GuestbookController);
        let shutdown = CancellationToken::new();
        let running = tokio::spawn(manager.run_until(shutdown.clone()));
        (shutdown, running)
    };
    let (shutdown, running) = start();

    // Step "A first operator": a Guestbook gets its page and Ready. An untitled one is titled
    // after its name by the defaulter, once the webhooks are registered (until then the
    // apiserver refuses it: the title has `min_length = 1`).
    let books = ns.api::<Guestbook>();
    let book: Guestbook = serde_json::from_value(json!({
        "apiVersion": "tutorial.kubeforge.dev/v1", "kind": "Guestbook",
        "metadata": { "name": "visitors" },
        "spec": { "entries": ["hello"] },
    }))
    .unwrap();
    let created = eventually(
        "an untitled Guestbook admitted and defaulted",
        Duration::from_secs(60),
        async || books.create(&PostParams::default(), &book).await.ok(),
    )
    .await;
    assert_eq!(created.spec.title, "visitors", "titled by the defaulter");
    let pages = ns.api::<ConfigMap>();
    let ready = async |entries: &str| {
        eventually(
            &format!("Ready with the page showing {entries:?}"),
            Duration::from_secs(60),
            async || {
                let book = books.get("visitors").await.ok()?;
                let status = book.status?;
                let page = pages.get_opt("visitors-page").await.ok()??;
                let text = page.data?.remove("index.md")?;
                (status.observed_generation == book.metadata.generation
                    && status.conditions.get(READY)?.status == ConditionStatus::True
                    && text == format!("# visitors\n{entries}"))
                .then_some(())
            },
        )
        .await
    };
    ready("- hello\n").await;

    // Step "A webhook": appending is allowed, rewriting history is denied with the message.
    let append = json!({ "spec": { "entries": ["hello", "again"] } });
    books
        .patch("visitors", &PatchParams::default(), &Patch::Merge(&append))
        .await
        .unwrap();
    ready("- hello\n- again\n").await;
    let rewrite = json!({ "spec": { "entries": ["goodbye"] } });
    let denied = books
        .patch("visitors", &PatchParams::default(), &Patch::Merge(&rewrite))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        denied.contains("a guestbook is append-only"),
        "the validator's message: {denied}"
    );
    // The markers, checked by the apiserver (and by `validate()` before sending).
    let long = json!({ "spec": { "title": "x".repeat(65) } });
    let refused = books
        .patch("visitors", &PatchParams::default(), &Patch::Merge(&long))
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("spec.title"), "{refused}");

    // Step "A second version": a v2 object reads through v1, and its theme survives a v1 write.
    let fancy: v2::Guestbook = serde_json::from_value(json!({
        "apiVersion": "tutorial.kubeforge.dev/v2", "kind": "Guestbook",
        "metadata": { "name": "party" },
        "spec": { "heading": "Party", "theme": "fancy" },
    }))
    .unwrap();
    let v2_books = ns.api::<v2::Guestbook>();
    eventually(
        "a v2 create (the conversion configured)",
        Duration::from_secs(60),
        async || v2_books.create(&PostParams::default(), &fancy).await.ok(),
    )
    .await;
    let as_v1 = books.get("party").await.unwrap();
    assert_eq!(as_v1.spec.title, "Party");
    let sign = json!({ "spec": { "entries": ["cake"] } });
    books
        .patch("party", &PatchParams::default(), &Patch::Merge(&sign))
        .await
        .unwrap();
    let again = v2_books.get("party").await.unwrap();
    assert_eq!(
        (again.spec.heading.as_str(), again.spec.theme.as_str()),
        ("Party", "fancy"),
        "nothing lost through v1"
    );
    assert_eq!(again.spec.entries, ["cake"]);

    // A field of the wrong type written through v2 (the hooks are v1's) gets the schema's
    // error. Before #48 the apiserver converted the object to v1 for the hooks first, so a wrong
    // `heading` (v1's `title`) failed as a conversion: "conversion webhook for
    // tutorial.kubeforge.dev/v2, Kind=Guestbook failed: .. cannot read the object as version v1".
    // Sent as JSON: the typed client cannot hold a number there.
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("tutorial.kubeforge.dev", "v2", "Guestbook"),
        "guestbooks",
    );
    let raw: Api<DynamicObject> = Api::namespaced_with(admin.clone(), ns.name(), &resource);
    for field in ["heading", "theme"] {
        let mut spec = json!({ "heading": "Wrong", "theme": "fancy" });
        spec[field] = json!(7);
        let wrong = json!({
            "apiVersion": "tutorial.kubeforge.dev/v2", "kind": "Guestbook",
            "metadata": { "name": format!("wrong-{field}") }, "spec": spec,
        });
        let refused = raw
            .create(
                &PostParams::default(),
                &serde_json::from_value(wrong).unwrap(),
            )
            .await
            .map(|stored| format!("stored: {stored:?}"))
            .unwrap_or_else(|e| e.to_string());
        assert!(
            refused.contains(&format!("spec.{field}: Invalid value"))
                && refused.contains("must be of type string")
                && !refused.contains("conversion"),
            "the schema's error for spec.{field}: {refused}"
        );
    }

    // The annotation that keeps v2's fields is anyone's to write. One that does not fit v2 (a
    // number for the theme) is refused when it is written, with why (before #48 it was
    // accepted and dropped by the next read through v2); one that fits is what v2 reads.
    let kept = |text: &str| json!({ "metadata": { "annotations": { "conversion.kubeforge.dev/v2": text } } });
    let bad = kept("{\"/spec/theme\": 7}");
    let refused = books
        .patch("visitors", &PatchParams::default(), &Patch::Merge(&bad))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("the annotation conversion.kubeforge.dev/v2 does not fit version v2"),
        "{refused}"
    );
    for (text, why) in [
        ("not json", "is not a JSON object of pointers"),
        (
            "{\"/metadata/name\": \"x\"}",
            "is not a JSON pointer into spec or status",
        ),
    ] {
        let refused = books
            .patch(
                "visitors",
                &PatchParams::default(),
                &Patch::Merge(&kept(text)),
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(refused.contains(why), "{text}: {refused}");
    }
    let refused = books
        .patch(
            "visitors",
            &PatchParams::default(),
            &Patch::Merge(
                &json!({ "metadata": { "annotations": { "conversion.kubeforge.dev/v9": "{}" } } }),
            ),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("names no version"), "{refused}");
    books
        .patch(
            "visitors",
            &PatchParams::default(),
            &Patch::Merge(&kept("{\"/spec/theme\": \"fancy\"}")),
        )
        .await
        .unwrap();
    assert_eq!(v2_books.get("visitors").await.unwrap().spec.theme, "fancy");

    // One written before the check existed (an operator of an earlier release: the validating
    // configuration without it) never fails a read: it is dropped when the object is read
    // through v2, not a failure of every v2 read and list in the namespace (before #48:
    // `cannot read the object as version v2`).
    shutdown.cancel();
    running.await.unwrap().unwrap();
    // With the operator down, the check is asked only when such an annotation changes: a label
    // goes through, a changed annotation is refused (the webhook fails closed).
    let label = json!({ "metadata": { "labels": { "tier": "front" } } });
    books
        .patch("visitors", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    let refused = books
        .patch("visitors", &PatchParams::default(), &Patch::Merge(&bad))
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("kept-annotations.guestbooks"), "{refused}");
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
    configurations
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    books
        .patch("visitors", &PatchParams::default(), &Patch::Merge(&bad))
        .await
        .unwrap();
    let (shutdown, running) = start();
    let listed = eventually(
        "a list through v2 (the conversion served again)",
        Duration::from_secs(60),
        async || v2_books.list(&Default::default()).await.ok(),
    )
    .await;
    let visitors = listed
        .items
        .iter()
        .find(|b| b.metadata.name.as_deref() == Some("visitors"))
        .expect("listed through v2");
    assert_eq!(visitors.spec.heading, "visitors");
    assert_eq!(
        visitors.spec.theme, "plain",
        "the annotation dropped, v2's default"
    );
    // With an event on the object saying so.
    let events = ns.api::<k8s_openapi::api::events::v1::Event>();
    let note = eventually(
        "a ConversionAnnotationDropped event on visitors",
        Duration::from_secs(30),
        async || {
            let list = events.list(&Default::default()).await.ok()?;
            list.items.into_iter().find_map(|e| {
                (e.reason.as_deref() == Some("ConversionAnnotationDropped")
                    && e.regarding.as_ref()?.name.as_deref() == Some("visitors"))
                .then_some(e.note?)
            })
        },
    )
    .await;
    assert!(
        note.contains("conversion.kubeforge.dev/v2") && note.contains("does not fit version v2"),
        "{note}"
    );
    assert_eq!(v2_books.get("party").await.unwrap().spec.theme, "fancy");

    shutdown.cancel();
    running.await.unwrap().unwrap();

    // The operator stopped, its conversion is gone: the namespace (with its Guestbooks, one
    // written through v2) can still be deleted. Before the clean-up deleted the Guestbooks, the
    // namespace controller's list through the other version needed the dead conversion, and no
    // namespace of the plane could be deleted any more.
    drop(cleanup);
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    namespaces
        .delete(ns.name(), &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the namespace to be deleted once the operator stopped",
        Duration::from_secs(240),
        async || matches!(namespaces.get_opt(ns.name()).await, Ok(None)).then_some(()),
    )
    .await;
}
