//! The book's tutorial operator (`docs/src/tutorial.md`), in its final state: a `Guestbook` kind
//! whose controller keeps a page (a ConfigMap) of its entries, a validating webhook that keeps
//! guestbooks append-only, a defaulting webhook that titles untitled ones, and a second version
//! (`v2`) converted by generated code. `tests/integration/guestbook.rs` runs every step of the
//! tutorial against the local control plane. The README's first operator is the `first` part.

// ANCHOR: first
use kubeforge::crd::Conditions;
use kubeforge::k8s_openapi::api::core::v1::ConfigMap;
use kubeforge::prelude::*;

/// A guestbook: a title and the entries its visitors left.
#[kubeforge::custom_resource(
    group = "tutorial.kubeforge.dev",
    version = "v1",
    kind = "Guestbook",
    namespaced,
    status = GuestbookStatus,
    printcolumn(name = "Title", json_path = ".spec.title", type = "string"),
    printcolumn(name = "Ready", json_path = ".status.conditions[?(@.type==\"Ready\")].status", type = "string"),
)]
#[derive(Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GuestbookSpec {
    /// Shown above the entries (the object's name when left empty).
    #[serde(default)]
    #[validate(min_length = 1, max_length = 64)]
    pub title: String,
    /// The entries, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[validate(max_items = 100, items(min_length = 1, max_length = 280))]
    pub entries: Vec<String>,
}

/// What the controller observed: `Ready` once the page shows the current entries.
#[kubeforge::schema]
#[derive(Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GuestbookStatus {
    /// The generation the conditions describe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Progressing` and `Degraded`, kept by the framework.
    #[serde(default)]
    pub conditions: Conditions,
}

/// Keeps one ConfigMap per Guestbook, `<name>-page`, holding its entries as text.
pub struct GuestbookController;

#[kubeforge::controller(for = Guestbook, dependents(page))]
impl GuestbookController {
    fn page(&self, book: &Guestbook, _: &Context<Guestbook>) -> ConfigMap {
        let mut text = format!("# {}\n", book.spec.title);
        for entry in &book.spec.entries {
            text.push_str(&format!("- {entry}\n"));
        }
        let mut page = ConfigMap::default();
        page.metadata.name = Some(format!("{}-page", book.name_any()));
        page.data = Some([("index.md".to_owned(), text)].into());
        page
    }
}
// ANCHOR_END: first

// ANCHOR: webhooks
use kubeforge::webhook::{AdmissionContext, Defaulter, Validator, Verdict};

/// A guestbook is append-only: an update may add entries at the end, never change or remove
/// one. The schema cannot say that; a validating webhook can.
impl Validator for Guestbook {
    async fn validate_create(&self, _: &AdmissionContext) -> Verdict {
        Verdict::allow()
    }

    async fn validate_update(&self, old: &Self, _: &AdmissionContext) -> Verdict {
        if self.spec.entries.starts_with(&old.spec.entries) {
            Verdict::allow()
        } else {
            Verdict::deny("spec.entries: a guestbook is append-only; add entries at the end")
        }
    }
}

/// An untitled guestbook is titled after its name.
impl Defaulter for Guestbook {
    async fn apply_defaults(&mut self, _: &AdmissionContext) -> Verdict {
        if self.spec.title.is_empty() {
            self.spec.title = self.name_any();
            return Verdict::allow().warn("spec.title defaulted to the guestbook's name");
        }
        Verdict::allow()
    }
}
// ANCHOR_END: webhooks

// ANCHOR: v2
/// `tutorial.kubeforge.dev/v2`: `title` is now `heading`, and a guestbook has a `theme`. v1
/// stays the storage version; the macro writes both conversions (`generate`), and keeps what
/// v1 cannot hold (the theme) in an annotation, so nothing is lost through v1.
pub mod v2 {
    use super::GuestbookStatus;

    /// A guestbook (v2).
    #[kubeforge::custom_resource(
        group = "tutorial.kubeforge.dev",
        version = "v2",
        kind = "Guestbook",
        namespaced,
        status = GuestbookStatus,
        storage = false,
        conversion(hub = super::Guestbook, generate),
        printcolumn(name = "Heading", json_path = ".spec.heading", type = "string"),
        printcolumn(name = "Ready", json_path = ".status.conditions[?(@.type==\"Ready\")].status", type = "string"),
    )]
    #[derive(Clone, Debug, PartialEq)]
    #[serde(rename_all = "camelCase")]
    pub struct GuestbookSpec {
        /// Shown above the entries (v1's `title`).
        #[convert(from = "title")]
        #[serde(default)]
        #[validate(min_length = 1, max_length = 64)]
        pub heading: String,
        /// The entries, oldest first.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        #[validate(max_items = 100, items(min_length = 1, max_length = 280))]
        pub entries: Vec<String>,
        /// How the page looks (new in v2).
        #[serde(default = "plain")]
        #[validate(enum = ["plain", "fancy"])]
        pub theme: String,
    }

    fn plain() -> String {
        "plain".to_owned()
    }
}
// ANCHOR_END: v2
