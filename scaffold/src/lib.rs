//! `cargo kubeforge`: a project generator for kubeforge operators, as kubebuilder's `init` and
//! `create api` are for Go ones.
//!
//! - [`init`] writes a new crate that depends on `kubeforge`: a kind and its controller, the
//!   operator binary, the `crdgen` binary, an integration test on `kubeforge::testing`, a sample
//!   object, a README, and a test that writes and checks the deploy manifests.
//! - [`create_api`] adds another kind and controller to such a crate, registering them above the
//!   marker comments the generator wrote (`// kubeforge:kinds`, `// kubeforge:controllers`,
//!   `// kubeforge:tests`).
//!
//! Names are checked before anything is written ([`names`]); the templates are the files under
//! `scaffold/templates/`.

pub mod names;
mod project;
mod templates;

pub use project::{ApiOptions, Generated, InitOptions, Scope, create_api, default_kubeforge, init};

/// Why a project could not be generated or changed: a message for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(String);

impl Error {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}
