//! Admission policies generated from a kind (`admission_rule(..)`): the
//! `ValidatingAdmissionPolicy` and binding `kubeforge::crd::admission_policy` builds, applied to
//! the real apiserver, refuse what the rules refuse — rules on `metadata`, on `oldObject` (an
//! update), on `request.userInfo` — with the rule's message, reason and code; the binding's
//! namespace selector leaves other namespaces unchecked; and the client-side verdict of
//! `validate_admission` is the apiserver's, word for word.
//!
//! The kind is this test's own (group `admission-test.kubeforge.dev`), so its policy and
//! binding (`tickets.admission-test.kubeforge.dev`) are too; a guard deletes both at the end
//! and on panic. A new policy is not enforced at once (the apiserver's policy informers), so the
//! test first waits until a known-bad object is refused and reports how long that took.

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kubeforge::crd::{AdmissionAttributes, AdmissionRules, ValidateAdmission, admission_policy};
use kubeforge::testing::{ControlPlane, TestNamespace, apply_crds};
use serde_json::json;

/// The label that takes a namespace out of the binding's selector.
const UNCHECKED: &str = "admission-test.kubeforge.dev/unchecked";

#[kubeforge::custom_resource(
    group = "admission-test.kubeforge.dev",
    version = "v1",
    kind = "Ticket",
    namespaced,
    admission_rule(
        cel = "object.metadata.name.size() <= 20",
        message = "a Ticket's name has at most 20 characters"
    ),
    admission_rule(
        cel = "has(object.metadata.labels) && 'team' in object.metadata.labels",
        message = "a Ticket needs a team label",
        reason = "Forbidden"
    ),
    admission_rule(
        cel = "object.spec.owner == oldObject.spec.owner",
        message = "a Ticket's owner cannot change"
    ),
    admission_rule(
        cel = "object.spec.owner == request.userInfo.username",
        message_expression = "'a Ticket is opened by its owner, not by ' + request.userInfo.username",
        operations = ["CREATE"]
    ),
    admission_policy(namespace_selector = "!admission-test.kubeforge.dev/unchecked")
)]
#[derive(Clone, Debug)]
pub struct TicketSpec {
    pub owner: String,
    pub title: String,
}

/// Deletes the policy and the binding when dropped (at the end, or while a failed assertion
/// unwinds), from a thread with its own runtime: the test's may be unwinding.
struct PolicyGuard(String);

impl Drop for PolicyGuard {
    fn drop(&mut self) {
        let name = self.0.clone();
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let client = ControlPlane::shared().unwrap().client().await.unwrap();
                let dp = DeleteParams::default();
                let _ = Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
                    .delete(&name, &dp)
                    .await;
                let _ = Api::<ValidatingAdmissionPolicy>::all(client)
                    .delete(&name, &dp)
                    .await;
            });
        });
        let _ = cleanup.join();
    }
}

/// Applies the generated policy and binding (server-side apply, as `kubectl apply` would).
async fn apply_policy<K: AdmissionRules>(client: &Client) -> PolicyGuard {
    let generated = admission_policy::<K>();
    let guard = PolicyGuard(generated.name().to_owned());
    let pp = PatchParams::apply("kubeforge-tests").force();
    let mut policy = serde_json::to_value(&generated.policy).unwrap();
    policy["apiVersion"] = json!("admissionregistration.k8s.io/v1");
    policy["kind"] = json!("ValidatingAdmissionPolicy");
    Api::<ValidatingAdmissionPolicy>::all(client.clone())
        .patch(generated.name(), &pp, &Patch::Apply(policy))
        .await
        .unwrap();
    let mut binding = serde_json::to_value(&generated.binding).unwrap();
    binding["apiVersion"] = json!("admissionregistration.k8s.io/v1");
    binding["kind"] = json!("ValidatingAdmissionPolicyBinding");
    Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
        .patch(generated.name(), &pp, &Patch::Apply(binding))
        .await
        .unwrap();
    guard
}

/// The admin's username and groups, as the apiserver sees them.
async fn whoami(client: &Client) -> (String, Vec<String>) {
    let review: SelfSubjectReview = Api::all(client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let user = review.status.and_then(|s| s.user_info).unwrap_or_default();
    (
        user.username.unwrap_or_default(),
        user.groups.unwrap_or_default(),
    )
}

fn ticket(name: &str, owner: &str, team: Option<&str>) -> Ticket {
    let mut t = Ticket::new(
        name,
        TicketSpec {
            owner: owner.into(),
            title: "printer on fire".into(),
        },
    );
    if let Some(team) = team {
        t.metadata.labels = Some([("team".to_owned(), team.to_owned())].into());
    }
    t
}

/// The apiserver's refusal: (code, reason, message); `None` when it accepted the write.
async fn create(api: &Api<Ticket>, t: &Ticket) -> Option<(u16, String, String)> {
    match api.create(&PostParams::default(), t).await {
        Ok(_) => None,
        Err(kube::Error::Api(status)) => {
            Some((status.code, status.reason.clone(), status.message.clone()))
        }
        Err(e) => panic!("creating {:?}: {e}", t.metadata.name),
    }
}

/// The client-side verdict's first refusal message, if any.
fn client_verdict(t: &Ticket, attributes: &AdmissionAttributes<'_, Ticket>) -> Option<String> {
    let verdict = t.validate_admission(attributes);
    assert!(verdict.unchecked.is_empty(), "{verdict:?}");
    verdict.denied.first().map(|r| r.message.clone())
}

#[tokio::test]
async fn admission_policy_should_refuse_what_the_kinds_rules_refuse() {
    let ns = TestNamespace::new().await.unwrap();
    let client = ns.client();
    apply_crds(&client, [Ticket::crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let _guard = apply_policy::<Ticket>(&client).await;
    let (me, groups) = whoami(&client).await;
    let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
    let as_me = || AdmissionAttributes::<Ticket>::create().user(&me, &groups);
    let api = ns.api::<Ticket>();

    // Enforcement starts a moment after the policy is created: wait for a known refusal.
    let started = Instant::now();
    let too_long = ticket("ticket-name-of-21-chr", &me, Some("ops"));
    let refused = loop {
        if let Some(refused) = create(&api, &too_long).await {
            assert!(
                refused.2.contains("ValidatingAdmissionPolicy"),
                "{refused:?}"
            );
            break refused;
        }
        api.delete(
            &too_long.metadata.name.clone().unwrap(),
            &DeleteParams::default(),
        )
        .await
        .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the policy was not enforced within 90 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!(
        "policy enforced {:?} after it was applied",
        started.elapsed()
    );
    assert_eq!(refused.0, 422, "{refused:?}");
    assert_eq!(refused.1, "Invalid");
    assert_eq!(Some(refused.2), client_verdict(&too_long, &as_me()));

    // Allowed: both sides agree.
    let good = ticket("t1", &me, Some("ops"));
    assert_eq!(client_verdict(&good, &as_me()), None);
    assert_eq!(create(&api, &good).await, None);

    // A metadata rule with reason Forbidden: 403.
    let unlabelled = ticket("t2", &me, None);
    let refused = create(&api, &unlabelled).await.unwrap();
    assert_eq!(
        refused,
        (
            403,
            "Forbidden".to_owned(),
            "tickets.admission-test.kubeforge.dev \"t2\" is forbidden: ValidatingAdmissionPolicy \
             'tickets.admission-test.kubeforge.dev' with binding \
             'tickets.admission-test.kubeforge.dev' denied request: a Ticket needs a team label"
                .to_owned()
        )
    );
    assert_eq!(Some(refused.2), client_verdict(&unlabelled, &as_me()));

    // A rule on the user, with a message expression.
    let someone_elses = ticket("t3", "someone-else", Some("ops"));
    let refused = create(&api, &someone_elses).await.unwrap();
    assert!(
        refused
            .2
            .ends_with(&format!("a Ticket is opened by its owner, not by {me}")),
        "{refused:?}"
    );
    assert_eq!(Some(refused.2), client_verdict(&someone_elses, &as_me()));
    // Without the user, the client cannot tell.
    let verdict = someone_elses.validate_admission(&AdmissionAttributes::create());
    assert!(verdict.allowed());
    assert_eq!(
        verdict.unchecked,
        ["object.spec.owner == request.userInfo.username"]
    );

    update_rules(&api, &good).await;
    namespace_scope(&client, &too_long).await;
}

/// An update rule on `oldObject`: the owner cannot change, the title can.
async fn update_rules(api: &Api<Ticket>, stored: &Ticket) {
    let stored = api
        .get(stored.metadata.name.as_deref().unwrap())
        .await
        .unwrap();
    let mut retitled = stored.clone();
    retitled.spec.title = "printer fixed".into();
    assert!(
        retitled
            .validate_admission(&AdmissionAttributes::update(&stored))
            .allowed()
    );
    let retitled = api
        .replace("t1", &PostParams::default(), &retitled)
        .await
        .unwrap();

    let mut handed_over = retitled.clone();
    handed_over.spec.owner = "someone-else".into();
    let expected = client_verdict(&handed_over, &AdmissionAttributes::update(&retitled));
    match api
        .replace("t1", &PostParams::default(), &handed_over)
        .await
    {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422);
            assert!(
                status.message.ends_with("a Ticket's owner cannot change"),
                "{status:?}"
            );
            assert_eq!(Some(status.message.clone()), expected);
        }
        other => panic!("the owner changed: {other:?}"),
    }
}

/// A namespace outside the binding's selector is not checked.
async fn namespace_scope(client: &Client, bad: &Ticket) {
    let unchecked = TestNamespace::new().await.unwrap();
    Api::<Namespace>::all(client.clone())
        .patch(
            unchecked.name(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { UNCHECKED: "true" } } })),
        )
        .await
        .unwrap();
    // The apiserver reads namespace labels from its informer: the label may take a moment.
    let api = unchecked.api::<Ticket>();
    let started = Instant::now();
    while let Some(refused) = create(&api, bad).await {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "still checked in a namespace outside the selector: {refused:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
